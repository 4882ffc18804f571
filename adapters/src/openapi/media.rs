//! Media types: which request body an operation sends (JSON, form, multipart, text or
//! binary, in that order of preference) and the output schema taken from its first
//! 2xx JSON response, pruned to its shape so the tool list stays small.

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::{Body, BodyKind, PropEncoding, Style};
use super::refs::{Inliner, Refs};
use super::variants;

/// Output schemas larger than this (serialized) after pruning are left out.
const OUTPUT_MAX_BYTES: usize = 6000;

pub(super) fn body_kind(mt: &str) -> Option<BodyKind> {
    let mt = mt
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    Some(
        if mt == "application/json" || mt.ends_with("+json") || mt == "*/*" {
            BodyKind::Json
        } else if mt == "application/x-www-form-urlencoded" {
            BodyKind::Form
        } else if mt == "multipart/form-data" || mt == "multipart/mixed" {
            BodyKind::Multipart
        } else if mt.starts_with("text/") || mt.ends_with("xml") {
            BodyKind::Text
        } else if mt == "application/octet-stream"
            || mt.starts_with("image/")
            || mt.starts_with("audio/")
            || mt.starts_with("video/")
            || mt == "application/pdf"
            || mt == "application/zip"
        {
            BodyKind::Binary
        } else {
            return None;
        },
    )
}

pub(super) fn request_body<'a>(
    refs: &Refs<'a>,
    doc: usize,
    b: &'a Value,
    input: &mut Inliner<'a>,
) -> Result<Option<Body>, String> {
    let (bdoc, b) = refs.deref(doc, b)?;
    let Some(Value::Object(content)) = b.get("content") else {
        return Ok(None);
    };
    // preference: JSON, form, multipart, text, binary; the spec's order breaks ties
    let rank = |k: BodyKind| match k {
        BodyKind::Json => 0,
        BodyKind::Form => 1,
        BodyKind::Multipart => 2,
        BodyKind::Text => 3,
        BodyKind::Binary => 4,
    };
    let chosen = content
        .iter()
        .filter_map(|(mt, m)| body_kind(mt).map(|k| (rank(k), k, mt, m)))
        .min_by_key(|x| x.0);
    let Some((_, kind, mt, media)) = chosen else {
        let types: Vec<&String> = content.keys().collect();
        return Err(format!(
            "no supported request body media type among {types:?}"
        ));
    };
    let json_types: Vec<(&String, &Value)> = content
        .iter()
        .filter(|(mt, _)| body_kind(mt) == Some(BodyKind::Json))
        .collect();
    let (mt, schema, choices, repairs) = if kind == BodyKind::Json && json_types.len() > 1 {
        // Equal schemas (a 2.0 body under each of its `consumes`) are inlined once.
        let mut done: Vec<(&Value, Value)> = Vec::new();
        let mut entries = Vec::with_capacity(json_types.len());
        for (t, m) in json_types {
            let raw = m.get("schema").unwrap_or(&Value::Null);
            let schema = match done.iter().find(|(r, _)| *r == raw) {
                Some((_, s)) => s.clone(),
                None if raw.is_null() => serde_json::json!({}),
                None => {
                    let s = input.schema(bdoc, raw)?;
                    done.push((raw, s.clone()));
                    s
                }
            };
            entries.push((t.clone(), schema));
        }
        let p = variants::plan(entries);
        (p.media_type, p.schema, p.choices, p.repairs)
    } else {
        let schema = match media.get("schema") {
            Some(s) => input.schema(bdoc, s)?,
            None if kind == BodyKind::Binary => {
                serde_json::json!({"type": "string", "format": "binary"})
            }
            None => serde_json::json!({}),
        };
        (mt.clone(), schema, vec![], vec![])
    };
    let mut encoding = BTreeMap::new();
    if let Some(Value::Object(enc)) = media.get("encoding") {
        for (prop, e) in enc {
            encoding.insert(
                prop.clone(),
                PropEncoding {
                    content_type: e
                        .get("contentType")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    style: e
                        .get("style")
                        .and_then(Value::as_str)
                        .and_then(Style::parse),
                    explode: e.get("explode").and_then(Value::as_bool),
                },
            );
        }
    }
    Ok(Some(Body {
        media_type: mt,
        kind,
        required: b.get("required").and_then(Value::as_bool) == Some(true),
        description: b
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        schema,
        encoding,
        choices,
        repairs,
    }))
}

pub(super) fn output_schema<'a>(
    refs: &Refs<'a>,
    doc: usize,
    responses: &'a Value,
    out: &mut Inliner<'a>,
) -> Option<Value> {
    let responses = responses.as_object()?;
    let mut codes: Vec<&String> = responses
        .keys()
        .filter(|c| c.starts_with('2') && c.len() == 3)
        .collect();
    codes.sort_by_key(|c| (c.contains(['X', 'x']), c.to_string()));
    let code = codes.first()?;
    let (rdoc, r) = refs.deref(doc, &responses[code.as_str()]).ok()?;
    let content = r.get("content")?.as_object()?;
    let (_, media) = content
        .iter()
        .find(|(mt, _)| body_kind(mt) == Some(BodyKind::Json) && *mt != "*/*")?;
    let schema = out.schema(rdoc, media.get("schema")?).ok()?;
    let is_object = schema.get("type").and_then(Value::as_str) == Some("object")
        || (schema.get("type").is_none() && schema.get("properties").is_some());
    if !is_object {
        return None;
    }
    let mut schema = schema;
    prune_output(&mut schema, 0);
    schema["type"] = Value::String("object".into());
    let size = serde_json::to_vec(&schema)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    (size <= OUTPUT_MAX_BYTES).then_some(schema)
}

/// Keeps an output schema to its shape: the root's properties with their types and
/// short descriptions, one more level of types, nothing deeper. It is lenient on
/// purpose, because clients validate structured results against it and real APIs
/// drift from their specs: no `required`, no `enum`, no `additionalProperties`,
/// nested types accept `null`, and `oneOf` becomes `anyOf` (pruned branches overlap).
fn prune_output(v: &mut Value, level: usize) {
    let Value::Object(m) = v else { return };
    if let Some(one_of) = m.remove("oneOf") {
        m.insert("anyOf".into(), one_of);
    }
    if level >= 2 {
        m.retain(|k, _| k == "type");
    } else {
        m.retain(|k, _| {
            matches!(
                k.as_str(),
                "type"
                    | "properties"
                    | "items"
                    | "description"
                    | "format"
                    | "anyOf"
                    | "allOf"
                    | "$comment"
            )
        });
    }
    if level >= 1 {
        match m.get_mut("type") {
            Some(Value::String(t)) if t != "null" => {
                let t = t.clone();
                m.insert("type".into(), serde_json::json!([t, "null"]));
            }
            Some(Value::Array(a)) if !a.iter().any(|t| t == "null") => a.push("null".into()),
            _ => {}
        }
    }
    if let Some(Value::String(d)) = m.get_mut("description")
        && d.chars().count() > 160
    {
        let cut: String = d.chars().take(157).collect();
        *d = format!("{}…", cut.trim_end());
    }
    if level == 0 {
        m.remove("description");
    }
    for (k, x) in m.iter_mut() {
        match (k.as_str(), x) {
            ("properties", Value::Object(props)) => {
                for p in props.values_mut() {
                    prune_output(p, level + 1);
                }
            }
            ("items", x) => prune_output(x, level + 1),
            ("anyOf" | "allOf", Value::Array(a)) => {
                for x in a {
                    prune_output(x, level + 1);
                }
            }
            _ => {}
        }
    }
}
