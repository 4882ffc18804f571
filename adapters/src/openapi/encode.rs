//! Serialization of argument values as the spec describes them: path templating
//! (simple, label, matrix), query styles (form, spaceDelimited, pipeDelimited,
//! deepObject, with or without explode), headers, cookies, and the bodies
//! `application/x-www-form-urlencoded` (nested values in bracket notation, as Stripe
//! expects) and `multipart/form-data` (file content arrives in the arguments, base64 or
//! as text — never as a local path).

use std::collections::BTreeMap;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::files;
use super::model::{Parameter, PropEncoding, Style};

/// Everything but RFC 3986 unreserved characters is encoded.
const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// `allowReserved: true`: reserved characters pass as they are.
const RESERVED_OK: &AsciiSet = &STRICT
    .remove(b':')
    .remove(b'/')
    .remove(b'?')
    .remove(b'#')
    .remove(b'[')
    .remove(b']')
    .remove(b'@')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=');

/// A scalar as text (`null` as the empty string; nested values as JSON).
pub(super) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

pub(crate) fn enc(s: &str, reserved_ok: bool) -> String {
    utf8_percent_encode(s, if reserved_ok { RESERVED_OK } else { STRICT }).to_string()
}

/// Whether `path` has a `.` or `..` segment, which URL resolution removes along with
/// the segment before it. Values are percent-encoded, so `%2E` here came from the spec
/// and `%252E` from an argument; only literal dots can be an argument's.
pub(super) fn has_dot_segment(path: &str) -> bool {
    path.split('/')
        .any(|segment| segment == "." || segment == "..")
}

/// Whether a path argument holds a `.` or `..` segment of its own (between `/` or `\`).
pub(super) fn climbs(v: &Value) -> bool {
    let text_climbs = |s: &str| s.split(['/', '\\']).any(|part| part == "." || part == "..");
    match v {
        Value::String(s) => text_climbs(s),
        Value::Array(items) => items.iter().any(climbs),
        Value::Object(map) => map.iter().any(|(k, x)| text_climbs(k) || climbs(x)),
        _ => false,
    }
}

/// The text replacing `{name}` in the path.
pub(super) fn path_value(p: &Parameter, v: &Value) -> String {
    let e = |s: &str| enc(s, p.allow_reserved);
    let name = &p.name;
    match (p.style, v) {
        (Style::Label, Value::Array(a)) => {
            let parts: Vec<String> = a.iter().map(|x| e(&scalar(x))).collect();
            format!(".{}", parts.join(if p.explode { "." } else { "," }))
        }
        (Style::Label, Value::Object(m)) => {
            let parts = object_parts(m, p.explode, &e);
            format!(".{}", parts.join(if p.explode { "." } else { "," }))
        }
        (Style::Label, x) => format!(".{}", e(&scalar(x))),
        (Style::Matrix, Value::Array(a)) if p.explode => a
            .iter()
            .map(|x| format!(";{name}={}", e(&scalar(x))))
            .collect(),
        (Style::Matrix, Value::Array(a)) => {
            let parts: Vec<String> = a.iter().map(|x| e(&scalar(x))).collect();
            format!(";{name}={}", parts.join(","))
        }
        (Style::Matrix, Value::Object(m)) if p.explode => m
            .iter()
            .map(|(k, x)| format!(";{}={}", e(k), e(&scalar(x))))
            .collect(),
        (Style::Matrix, Value::Object(m)) => {
            format!(";{name}={}", object_parts(m, false, &e).join(","))
        }
        (Style::Matrix, x) => format!(";{name}={}", e(&scalar(x))),
        (_, Value::Array(a)) => a
            .iter()
            .map(|x| e(&scalar(x)))
            .collect::<Vec<_>>()
            .join(","),
        (_, Value::Object(m)) => object_parts(m, p.explode, &e).join(","),
        (_, x) => e(&scalar(x)),
    }
}

/// `k,v,k2,v2` parts (explode false) or `k=v` parts (explode true).
fn object_parts(m: &Map<String, Value>, explode: bool, e: &dyn Fn(&str) -> String) -> Vec<String> {
    if explode {
        m.iter()
            .map(|(k, x)| format!("{}={}", e(k), e(&scalar(x))))
            .collect()
    } else {
        m.iter().flat_map(|(k, x)| [e(k), e(&scalar(x))]).collect()
    }
}

/// Appends the `key=value` pairs (already encoded) of one query parameter.
pub(super) fn query_pairs(p: &Parameter, v: &Value, out: &mut Vec<String>) {
    let e = |s: &str| enc(s, p.allow_reserved);
    let name = enc(&p.name, false);
    if p.json_content {
        out.push(format!("{name}={}", e(&v.to_string())));
        return;
    }
    match (p.style, v) {
        (Style::DeepObject, Value::Object(_) | Value::Array(_)) => {
            let mut pairs = Vec::new();
            brackets(&p.name, v, &mut pairs);
            for (k, x) in pairs {
                out.push(format!("{}={}", enc_brackets(&k), e(&x)));
            }
        }
        (Style::SpaceDelimited | Style::PipeDelimited, Value::Array(a)) if !p.explode => {
            let sep = if p.style == Style::SpaceDelimited {
                "%20"
            } else {
                "|"
            };
            let parts: Vec<String> = a.iter().map(|x| e(&scalar(x))).collect();
            out.push(format!("{name}={}", parts.join(sep)));
        }
        (_, Value::Array(a)) if p.explode => {
            out.extend(a.iter().map(|x| format!("{name}={}", e(&scalar(x)))));
        }
        (_, Value::Array(a)) => {
            let parts: Vec<String> = a.iter().map(|x| e(&scalar(x))).collect();
            out.push(format!("{name}={}", parts.join(",")));
        }
        (_, Value::Object(m)) if p.explode => {
            out.extend(object_parts(m, true, &e));
        }
        (_, Value::Object(m)) => {
            out.push(format!("{name}={}", object_parts(m, false, &e).join(",")))
        }
        (_, x) => out.push(format!("{name}={}", e(&scalar(x)))),
    }
}

/// Keys in bracket notation keep `[` and `]` readable; everything else is encoded.
fn enc_brackets(k: &str) -> String {
    enc(k, false).replace("%5B", "[").replace("%5D", "]")
}

/// Flattens nested objects and arrays into `name[key][0]=value` pairs (unencoded).
fn brackets(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                brackets(&format!("{prefix}[{k}]"), x, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                brackets(&format!("{prefix}[{i}]"), x, out);
            }
        }
        x => out.push((prefix.to_owned(), scalar(x))),
    }
}

/// A header value (simple style). Fails on characters a header cannot carry.
pub(super) fn header_value(p: &Parameter, v: &Value) -> Result<String, String> {
    let s = match v {
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(","),
        Value::Object(m) => object_parts(m, p.explode, &|s: &str| s.to_owned()).join(","),
        x => scalar(x),
    };
    if s.chars()
        .any(|c| (c.is_control() && c != '\t') || !c.is_ascii())
    {
        return Err(format!(
            "header '{}' must be printable ASCII text (no control or non-ASCII characters)",
            p.name
        ));
    }
    Ok(s)
}

/// A `name=value` cookie pair (form style).
pub(super) fn cookie_pair(p: &Parameter, v: &Value) -> String {
    let value = match v {
        Value::Array(a) => a
            .iter()
            .map(|x| enc(&scalar(x), false))
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(m) => object_parts(m, false, &|s: &str| enc(s, false)).join(","),
        x => enc(&scalar(x), false),
    };
    format!("{}={value}", p.name)
}

/// An `application/x-www-form-urlencoded` body.
pub(super) fn form_body(
    props: &[(String, Value)],
    encoding: &BTreeMap<String, PropEncoding>,
) -> String {
    let mut ser = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in props {
        let e = encoding.get(k);
        let style = e.and_then(|e| e.style).unwrap_or(Style::Form);
        let explode = e.and_then(|e| e.explode).unwrap_or(true);
        match v {
            Value::Array(a)
                if style != Style::DeepObject
                    && a.iter().all(|x| !x.is_object() && !x.is_array()) =>
            {
                if explode {
                    for x in a {
                        ser.append_pair(k, &scalar(x));
                    }
                } else {
                    let sep = match style {
                        Style::SpaceDelimited => " ",
                        Style::PipeDelimited => "|",
                        _ => ",",
                    };
                    ser.append_pair(k, &a.iter().map(scalar).collect::<Vec<_>>().join(sep));
                }
            }
            Value::Object(_) | Value::Array(_) => {
                let mut pairs = Vec::new();
                brackets(k, v, &mut pairs);
                for (pk, pv) in pairs {
                    ser.append_pair(&pk, &pv);
                }
            }
            x => {
                ser.append_pair(k, &scalar(x));
            }
        }
    }
    ser.finish()
}

/// One multipart part before framing.
struct Part {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    data: Vec<u8>,
}

/// A `multipart/form-data` body and its boundary. `schemas` are the body's property
/// schemas (file properties carry base64 text or a file object, see [`files`]).
pub(super) fn multipart_body(
    props: &[(String, Value)],
    encoding: &BTreeMap<String, PropEncoding>,
    schemas: &Map<String, Value>,
) -> Result<(String, Vec<u8>), String> {
    let mut parts = Vec::new();
    for (k, v) in props {
        let schema = schemas.get(k);
        let ct = encoding.get(k).and_then(|e| e.content_type.clone());
        let item_schema = schema.and_then(|s| s.get("items"));
        let file_like = |x: &Value, s: Option<&Value>| -> Result<Option<Part>, String> {
            if !files::is_file(s) {
                return Ok(None);
            }
            let f = files::read(k, x, files::declared(ct.as_deref(), s))?;
            Ok(Some(Part {
                name: k.clone(),
                filename: Some(f.filename),
                content_type: Some(f.content_type),
                data: f.data,
            }))
        };
        match v {
            Value::Array(a) if !files::is_file(schema) => {
                for x in a {
                    match file_like(x, item_schema)? {
                        Some(p) => parts.push(p),
                        None => parts.push(text_part(k, x, ct.clone())),
                    }
                }
            }
            x => match file_like(x, schema)? {
                Some(p) => parts.push(p),
                None => parts.push(text_part(k, x, ct.clone())),
            },
        }
    }
    // A boundary derived from the content cannot occur in it (short of a SHA-256
    // collision) and keeps requests reproducible.
    let mut h = Sha256::new();
    for p in &parts {
        h.update(p.name.as_bytes());
        h.update(&p.data);
    }
    let digest = h.finalize();
    let boundary = format!(
        "toolgate-{}",
        digest[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let mut body = Vec::new();
    for p in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        let name = p.name.replace('"', "%22");
        match &p.filename {
            Some(f) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{}\"\r\n",
                    f.replace('"', "%22")
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n").as_bytes(),
            ),
        }
        if let Some(ct) = &p.content_type {
            body.extend_from_slice(format!("Content-Type: {ct}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(&p.data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok((boundary, body))
}

fn text_part(k: &str, x: &Value, ct: Option<String>) -> Part {
    let (data, default_ct) = match x {
        Value::Object(_) | Value::Array(_) => (x.to_string(), Some("application/json".to_owned())),
        x => (scalar(x), None),
    };
    Part {
        name: k.to_owned(),
        filename: None,
        content_type: ct.or(default_ct),
        data: data.into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::model::Location;
    use serde_json::json;

    fn param(style: Style, explode: bool) -> Parameter {
        Parameter {
            name: "color".into(),
            location: Location::Query,
            required: false,
            schema: json!({}),
            style,
            explode,
            allow_reserved: false,
            json_content: false,
        }
    }

    #[test]
    fn query_styles() {
        let arr = json!(["blue", "black"]);
        let obj = json!({"R": 100, "G": 200});
        let q = |s, e, v: &Value| {
            let mut out = Vec::new();
            query_pairs(&param(s, e), v, &mut out);
            out.join("&")
        };
        assert_eq!(q(Style::Form, true, &arr), "color=blue&color=black");
        assert_eq!(q(Style::Form, false, &arr), "color=blue,black");
        assert_eq!(q(Style::SpaceDelimited, false, &arr), "color=blue%20black");
        assert_eq!(q(Style::PipeDelimited, false, &arr), "color=blue|black");
        assert_eq!(q(Style::Form, true, &obj), "R=100&G=200");
        assert_eq!(q(Style::Form, false, &obj), "color=R,100,G,200");
        assert_eq!(
            q(Style::DeepObject, true, &obj),
            "color[R]=100&color[G]=200"
        );
        assert_eq!(q(Style::Form, true, &json!("a b&c")), "color=a%20b%26c");
    }

    #[test]
    fn path_styles() {
        let mut p = param(Style::Simple, false);
        p.location = Location::Path;
        assert_eq!(path_value(&p, &json!("a/b c")), "a%2Fb%20c");
        p.style = Style::Label;
        assert_eq!(path_value(&p, &json!([3, 4])), ".3,4");
        p.style = Style::Matrix;
        p.explode = true;
        assert_eq!(path_value(&p, &json!([3, 4])), ";color=3;color=4");
    }

    #[test]
    fn nested_form_body() {
        let body = form_body(
            &[
                ("amount".into(), json!(100)),
                ("metadata".into(), json!({"order": "6735"})),
                ("expand".into(), json!(["customer", "invoice"])),
            ],
            &BTreeMap::from([(
                "expand".to_owned(),
                PropEncoding {
                    content_type: None,
                    style: Some(Style::DeepObject),
                    explode: Some(true),
                },
            )]),
        );
        assert_eq!(
            body,
            "amount=100&metadata%5Border%5D=6735&expand%5B0%5D=customer&expand%5B1%5D=invoice"
        );
    }
}
