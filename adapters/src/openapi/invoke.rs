//! Request building (arguments -> method, URL, headers, cookies, body exactly as the
//! spec describes) and response mapping (HTTP response -> MCP `CallToolResult`).

use base64::Engine;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use url::Url;

use super::convert::{Converted, Target};
use super::encode;
use super::model::{Body, BodyKind, Location, Operation};
use super::variants;
use crate::{CallOutput, JsonObject, ToolError};

/// A request ready to send.
#[derive(Debug, Clone)]
pub(super) struct Prepared {
    pub method: http::Method,
    pub url: Url,
    pub headers: Vec<(String, String)>,
    pub cookies: Vec<String>,
    /// Content type and bytes (shared, not copied, by every try of the call).
    pub body: Option<(String, Bytes)>,
}

/// Builds the request for `op` from validated `args`.
pub(super) fn build(
    op: &Operation,
    conv: &Converted,
    args: &JsonObject,
    base: &Url,
) -> Result<Prepared, ToolError> {
    let Placed {
        path,
        query,
        headers,
        cookies,
        body_props,
        whole_body,
        content_type,
    } = place_args(op, conv, args)?;
    if let Some(var) = super::model::template_vars(&path).first() {
        return Err(ToolError::InvalidArgs(format!(
            "path parameter '{var}' is missing"
        )));
    }
    let url = request_url(op, base, &path, query);
    let body = match &op.body {
        None => None,
        Some(b) => encode_body(b, whole_body, body_props, content_type)?,
    };
    let method =
        http::Method::from_bytes(op.method.as_bytes()).expect("methods come from a fixed list");
    Ok(Prepared {
        method,
        url,
        headers,
        cookies,
        body: body.map(|(ct, bytes)| (ct, Bytes::from(bytes))),
    })
}

/// The arguments of one call sorted by where they go.
struct Placed<'v> {
    /// The path key's path with the path arguments filled in.
    path: String,
    /// Encoded `name=value` pairs (and bare names) from the query arguments.
    query: Vec<String>,
    headers: Vec<(String, String)>,
    cookies: Vec<String>,
    /// Body properties by their name in the spec (extra arguments too, when the body
    /// takes them).
    body_props: Vec<(String, Value)>,
    /// The argument that is the whole body.
    whole_body: Option<&'v Value>,
    /// The media type the caller chose for the body.
    content_type: Option<&'v str>,
}

/// Sorts `args` by their bindings into path, query, headers, cookies and body; `Err`
/// for a value the request cannot carry (a path value making a `.` or `..` segment, a
/// header value that is no header).
fn place_args<'v>(
    op: &Operation,
    conv: &Converted,
    args: &'v JsonObject,
) -> Result<Placed<'v>, ToolError> {
    let bad = |m: String| ToolError::InvalidArgs(m);
    let mut placed = Placed {
        path: op.target.path.clone(),
        query: Vec::new(),
        headers: Vec::new(),
        cookies: Vec::new(),
        body_props: Vec::new(),
        whole_body: None,
        content_type: None,
    };
    for b in &conv.bindings {
        let Some(v) = args.get(&b.arg) else { continue };
        match &b.target {
            Target::Param(i) => {
                let p = &op.parameters[*i];
                match p.location {
                    Location::Path => {
                        let path = &mut placed.path;
                        *path = path.replace(&format!("{{{}}}", p.name), &encode::path_value(p, v));
                        // `.` or `..` as a segment is resolved by the URL: `/things/..`
                        // is `/`, another endpoint of the API than this tool's. Also
                        // refused inside a value (`a/../..`, sent as `a%2F..%2F..`):
                        // servers that decode before routing would resolve it.
                        if encode::has_dot_segment(path) || encode::climbs(v) {
                            return Err(bad(format!(
                                "path parameter '{}' cannot make a '.' or '..' path segment",
                                p.name
                            )));
                        }
                    }
                    Location::Query => {
                        if !v.is_null() {
                            encode::query_pairs(p, v, &mut placed.query);
                        }
                    }
                    Location::Header => {
                        if !v.is_null() {
                            placed
                                .headers
                                .push((p.name.clone(), encode::header_value(p, v).map_err(bad)?));
                        }
                    }
                    Location::Cookie => {
                        if !v.is_null() {
                            placed.cookies.push(encode::cookie_pair(p, v));
                        }
                    }
                }
            }
            Target::BodyProp(k) => placed.body_props.push((k.clone(), v.clone())),
            Target::Body => placed.whole_body = Some(v),
            Target::ContentType => placed.content_type = v.as_str(),
        }
    }
    if conv.body_takes_extra {
        for (k, v) in args {
            if !conv.bindings.iter().any(|b| &b.arg == k) {
                placed.body_props.push((k.clone(), v.clone()));
            }
        }
    }
    Ok(placed)
}

/// The request URL: `path` appended to the server URL's path (its own query kept),
/// then the path key's constant query, unless an argument sends that name itself, and
/// the arguments' `query` pairs.
fn request_url(op: &Operation, base: &Url, path: &str, mut query: Vec<String>) -> Url {
    // the server URL may carry a query of its own: keep it, append the path to its path
    let mut url = base.clone();
    url.set_path(&format!("{}{path}", base.path().trim_end_matches('/')));
    url.set_fragment(None);
    // the path key's constant query first, unless an argument sends that name itself
    let fixed: Vec<String> = op
        .target
        .query
        .iter()
        .filter(|(k, _)| {
            !query
                .iter()
                .any(|q| q.split('=').next() == Some(&encode::enc(k, false)))
        })
        .map(|(k, v)| match v {
            Some(v) => format!("{}={}", encode::enc(k, false), encode::enc(v, false)),
            None => encode::enc(k, false),
        })
        .collect();
    query.splice(0..0, fixed);
    if !query.is_empty() {
        let q = match url.query() {
            Some(existing) if !existing.is_empty() => format!("{existing}&{}", query.join("&")),
            _ => query.join("&"),
        };
        url.set_query(Some(&q));
    }
    url
}

/// The body `b` as sent, its content type and bytes, from the whole-body argument or
/// the body properties; `None` for an optional body with nothing in it.
fn encode_body(
    b: &Body,
    whole_body: Option<&Value>,
    body_props: Vec<(String, Value)>,
    content_type: Option<&str>,
) -> Result<Option<(String, Vec<u8>)>, ToolError> {
    let bad = |m: String| ToolError::InvalidArgs(m);
    let ct = b.media_type.clone();
    let body = match b.kind {
        // an optional body with nothing in it is left out; a required one is sent empty
        _ if whole_body.is_none() && body_props.is_empty() && !b.required => None,
        BodyKind::Json => {
            let v = whole_body
                .cloned()
                .unwrap_or_else(|| Value::Object(body_props.into_iter().collect()));
            let ct = if b.choices.is_empty() {
                ct
            } else {
                variants::choose(&ct, &b.choices, &v, content_type).map_err(bad)?
            };
            let ct = if ct == "*/*" {
                "application/json".into()
            } else {
                ct
            };
            Some((ct, serde_json::to_vec(&v).expect("JSON values serialize")))
        }
        BodyKind::Form => {
            let props = object_props(whole_body, body_props)?;
            Some((ct, encode::form_body(&props, &b.encoding).into_bytes()))
        }
        BodyKind::Multipart => {
            let props = object_props(whole_body, body_props)?;
            let empty = Map::new();
            let schemas = b
                .schema
                .get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            let (boundary, bytes) =
                encode::multipart_body(&props, &b.encoding, schemas).map_err(bad)?;
            Some((format!("multipart/form-data; boundary={boundary}"), bytes))
        }
        BodyKind::Text => {
            let v = whole_body.cloned().unwrap_or(Value::Null);
            Some((ct, encode::scalar(&v).into_bytes()))
        }
        BodyKind::Binary => {
            let text = whole_body.and_then(Value::as_str).unwrap_or("");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|e| bad(format!("'body' must be base64: {e}")))?;
            Some((ct, bytes))
        }
    };
    Ok(body)
}

/// The members of a form or multipart body: the whole-body argument's (which must be
/// an object) when given, else the body properties.
fn object_props(
    whole_body: Option<&Value>,
    body_props: Vec<(String, Value)>,
) -> Result<Vec<(String, Value)>, ToolError> {
    match whole_body {
        Some(Value::Object(m)) => Ok(m.clone().into_iter().collect()),
        Some(other) => Err(ToolError::InvalidArgs(format!(
            "'body' must be an object, not {other}"
        ))),
        None => Ok(body_props),
    }
}

/// Images up to this size are returned as image content; larger ones are described.
const MAX_INLINE_IMAGE: usize = 1024 * 1024;
/// Error bodies are quoted up to this many characters.
const ERROR_EXCERPT: usize = 2000;

/// A text content block. Built directly: `json!` would copy `s` (the whole response
/// body, for a JSON or text answer) through the value serializer.
fn text(s: String) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), Value::String("text".into()));
    block.insert("text".into(), Value::String(s));
    Value::Object(block)
}

/// A `content` array of one block, moved in (`json!([block])` would copy it).
fn one_block(block: Value) -> Value {
    Value::Array(vec![block])
}

/// Puts the call's trace context on a request as `traceparent` and `tracestate`, in
/// place of any such header a parameter or `forward_headers` put there: the API's
/// parent is the gateway's span, not the caller's.
pub(super) fn put_trace(headers: &mut http::HeaderMap, trace: Option<&crate::TraceContext>) {
    let Some(trace) = trace else {
        return;
    };
    headers.remove("tracestate");
    for (name, value) in trace.fields() {
        if let Ok(value) = http::HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
}

fn excerpt(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}… (cut)")
}

/// Maps a response to a `CallToolResult`.
pub(super) fn map_response(
    status: http::StatusCode,
    content_type: Option<&str>,
    body: Vec<u8>,
    truncated: bool,
    what: &str,
) -> CallOutput {
    let ct = content_type
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let is_json = ct == "application/json" || ct.ends_with("+json");
    let is_text = ct.starts_with("text/")
        || ct.ends_with("xml")
        || ct == "application/javascript"
        || ct == "application/x-www-form-urlencoded"
        || ct.ends_with("+yaml")
        || ct == "application/yaml";
    let cut_note = if truncated {
        "\n[response cut at the size limit]"
    } else {
        ""
    };
    let mut raw = Map::new();
    if !status.is_success() {
        let body_text = String::from_utf8_lossy(&body);
        let reason = status.canonical_reason().unwrap_or("");
        let mut msg = format!("HTTP {} {reason} from {what}", status.as_u16());
        if !body_text.trim().is_empty() {
            msg.push_str(": ");
            msg.push_str(&excerpt(body_text.trim(), ERROR_EXCERPT));
        }
        raw.insert("content".into(), one_block(text(msg)));
        raw.insert("isError".into(), json!(true));
        return CallOutput::new(raw);
    }
    if body.is_empty() {
        let reason = status.canonical_reason().unwrap_or("");
        raw.insert(
            "content".into(),
            one_block(text(format!(
                "HTTP {} {reason} (empty body)",
                status.as_u16()
            ))),
        );
        return CallOutput::new(raw);
    }
    let utf8 = std::str::from_utf8(&body).ok();
    if (is_json || ct.is_empty())
        && !truncated
        && let Some(v) = utf8.and_then(|s| serde_json::from_str::<Value>(s).ok())
    {
        let s = serde_json::to_string(&v).expect("JSON values serialize");
        raw.insert("content".into(), one_block(text(s)));
        if v.is_object() {
            raw.insert("structuredContent".into(), v);
        }
        return CallOutput::new(raw);
    }
    if let Some(s) = utf8.filter(|_| is_json || is_text || ct.is_empty()) {
        raw.insert("content".into(), one_block(text(format!("{s}{cut_note}"))));
        return CallOutput::new(raw);
    }
    if ct.starts_with("image/") && !truncated && body.len() <= MAX_INLINE_IMAGE {
        let data = base64::engine::general_purpose::STANDARD.encode(&body);
        raw.insert(
            "content".into(),
            one_block(Value::Object(Map::from_iter([
                ("type".to_owned(), Value::String("image".into())),
                ("data".to_owned(), Value::String(data)),
                ("mimeType".to_owned(), Value::String(ct)),
            ]))),
        );
        return CallOutput::new(raw);
    }
    let ct = if ct.is_empty() {
        "unknown type".into()
    } else {
        ct
    };
    let size = if truncated {
        format!("more than {} bytes", body.len())
    } else {
        format!("{} bytes", body.len())
    };
    raw.insert(
        "content".into(),
        one_block(text(format!("binary response: {ct}, {size}"))),
    );
    CallOutput::new(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_trace_replaces_any_trace_header_already_there() {
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", "from-a-parameter".parse().unwrap());
        headers.insert("tracestate", "forwarded=1".parse().unwrap());
        headers.insert("x-other", "kept".parse().unwrap());
        let trace = crate::TraceContext {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: None,
        };
        put_trace(&mut headers, Some(&trace));
        assert_eq!(headers.get_all("traceparent").iter().count(), 1);
        assert_eq!(headers["traceparent"], trace.traceparent.as_str());
        assert!(headers.get("tracestate").is_none());
        assert_eq!(headers["x-other"], "kept");
        put_trace(&mut headers, None);
        assert_eq!(headers["traceparent"], trace.traceparent.as_str());
    }

    fn answer(ct: &str, body: &[u8]) -> String {
        let out = map_response(
            http::StatusCode::OK,
            Some(ct),
            body.to_vec(),
            false,
            "GET /x",
        );
        Value::Object(out.into_object()).to_string()
    }

    #[test]
    fn results_keep_their_shape() {
        assert_eq!(
            answer("application/json", br#"{ "id": "42", "n": 1.50 }"#),
            r#"{"content":[{"type":"text","text":"{\"id\":\"42\",\"n\":1.5}"}],"structuredContent":{"id":"42","n":1.5}}"#
        );
        assert_eq!(
            answer("text/plain; charset=utf-8", b"hello"),
            r#"{"content":[{"type":"text","text":"hello"}]}"#
        );
        assert_eq!(
            answer("image/png", &[1, 2, 3]),
            r#"{"content":[{"type":"image","data":"AQID","mimeType":"image/png"}]}"#
        );
        assert_eq!(
            answer("application/octet-stream", &[0, 159]),
            r#"{"content":[{"type":"text","text":"binary response: application/octet-stream, 2 bytes"}]}"#
        );
        let out = map_response(
            http::StatusCode::NOT_FOUND,
            Some("text/plain"),
            b"no such item".to_vec(),
            false,
            "GET /x",
        );
        assert_eq!(
            Value::Object(out.into_object()).to_string(),
            r#"{"content":[{"type":"text","text":"HTTP 404 Not Found from GET /x: no such item"}],"isError":true}"#
        );
    }
}
