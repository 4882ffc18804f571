//! Gemini function declaration parameters: the OpenAPI 3.0 subset Gemini takes.
//!
//! Kept, conservatively: `type` (one of `string`, `number`, `integer`, `boolean`,
//! `array`, `object`; always present), `nullable`, `description`, `enum` (strings
//! only), `format` where Gemini names it (`date-time`/`enum` on strings, `float`/
//! `double` on numbers, `int32`/`int64` on integers), `properties`, `required`,
//! `items`, `minItems`/`maxItems`, `minimum`/`maximum`. Everything else is removed; the
//! useful keywords go into the description.
//!
//! Combinators: `allOf` is merged. `anyOf`/`oneOf`: `null` alternatives become
//! `nullable: true`; a single remaining alternative is used as is; alternatives that
//! are all objects are merged into one object (all properties, required only when
//! every alternative requires them); alternatives of one and the same type are merged
//! (their enums united, or no enum when one has none); otherwise the **first**
//! alternative represents the rest, and the description names the types left out.
//! Type arrays become their first non-null type plus `nullable`, with the other types
//! named in the description. `const` becomes a one-value `enum` (or a note, for a
//! non-string). A schema with no type at all (any value) becomes a string — a value
//! the source accepts — and says so.

use serde_json::{Map, Value, json};

use super::merge::{self, types_of};
use super::notes::{Notes, render};

const MAX_DEPTH: usize = 48;

/// Converts an object root (refs already inlined).
pub(super) fn convert_root(root: &Value) -> Value {
    let mut out = node(root, 0);
    if let Value::Object(m) = &mut out {
        m.insert("type".into(), json!("object"));
        m.remove("nullable");
    }
    out
}

fn description_of(m: &Map<String, Value>) -> Option<&str> {
    m.get("description").and_then(Value::as_str)
}

fn node(s: &Value, depth: usize) -> Value {
    let Some(m) = s.as_object() else {
        return json!({"type": "string", "description": "(any JSON value)"});
    };
    if depth > MAX_DEPTH {
        let mut n = Notes::new();
        n.push("nested too deeply to describe; any JSON value");
        return scalar_any(n, m);
    }
    if let Some(Value::Array(branches)) = m.get("allOf") {
        let mut base = m.clone();
        base.remove("allOf");
        let mut all = vec![Value::Object(base)];
        all.extend(branches.iter().cloned());
        return node(&merge::merge_all_of(&all), depth + 1);
    }
    let alternatives: Vec<Value> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect();
    if !alternatives.is_empty() {
        let mut base = m.clone();
        base.remove("anyOf");
        base.remove("oneOf");
        return collapse(base, &alternatives, depth);
    }
    typed(m, depth)
}

/// A schema without combinators: its type (the first of several, or one inferred),
/// the keywords the subset keeps, its enum, its properties or items, and notes on
/// everything else.
fn typed(m: &Map<String, Value>, depth: usize) -> Value {
    let mut notes = Notes::new();
    for k in ["not", "if", "then", "else"] {
        if m.contains_key(k) {
            notes.push(format!("condition '{k}' not enforced"));
        }
    }
    let mut m = m.clone();
    let declared = types_of(&Value::Object(m.clone()));
    let mut nullable = declared.iter().any(|t| t == "null");
    let mut types: Vec<String> = declared.into_iter().filter(|t| t != "null").collect();
    if types.is_empty() {
        types = inferred(&m);
    }
    if types.len() > 1 {
        notes.push(format!("also accepts: {}", types[1..].join(", ")));
    }
    let Some(t) = types.first().cloned() else {
        if nullable {
            notes.push("always null");
        } else {
            notes.push("any JSON value");
        }
        return scalar_any(notes, &m);
    };
    if let Some(c) = m.remove("const") {
        m.insert("enum".into(), json!([c]));
    }
    let mut out = Map::new();
    out.insert("type".into(), json!(t));
    keep_keywords(&m, &t, &mut notes, &mut out);
    if keep_enum(&m, &t, &mut notes, &mut out) {
        nullable = true;
    }
    match t.as_str() {
        "object" => keep_members(&m, depth, &mut notes, &mut out),
        "array" => {
            let items = items(&m, depth, &mut notes);
            out.insert("items".into(), items);
        }
        _ => {}
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    if let Some(d) = notes.describe(description_of(&m)) {
        out.insert("description".into(), json!(d));
    }
    Value::Object(out)
}

/// The `format` (where Gemini names it for type `t`) and the bounds the subset keeps
/// into `out`; every other keyword of `m` is noted as dropped.
fn keep_keywords(m: &Map<String, Value>, t: &str, notes: &mut Notes, out: &mut Map<String, Value>) {
    let format_ok = m.get("format").and_then(Value::as_str).is_some_and(|f| {
        matches!(
            (t, f),
            ("string", "date-time" | "enum")
                | ("number", "float" | "double")
                | ("integer", "int32" | "int64")
        )
    });
    let keep_number = |k: &str| match k {
        "minimum" | "maximum" => matches!(t, "number" | "integer"),
        "minItems" | "maxItems" => t == "array",
        _ => false,
    };
    notes.dropped_keywords(m, |k| !(keep_number(k) || k == "format" && format_ok));
    if format_ok {
        out.insert("format".into(), m["format"].clone());
    }
    for k in ["minimum", "maximum", "minItems", "maxItems"] {
        if let Some(v) = m.get(k).filter(|v| v.is_number() && keep_number(k)) {
            out.insert(k.into(), v.clone());
        }
    }
}

/// The `enum` of `m` for type `t`: string values kept into `out`, other values of the
/// type and values of other types noted. `true` when it allows `null`.
fn keep_enum(
    m: &Map<String, Value>,
    t: &str,
    notes: &mut Notes,
    out: &mut Map<String, Value>,
) -> bool {
    let Some(Value::Array(values)) = m.get("enum") else {
        return false;
    };
    let nullable = values.iter().any(Value::is_null);
    let (values, others): (Vec<&Value>, Vec<&Value>) = values
        .iter()
        .filter(|v| !v.is_null())
        .partition(|v| value_has_type(v, t));
    if t == "string" && !values.is_empty() {
        out.insert("enum".into(), json!(values));
    } else if !values.is_empty() {
        let list: Vec<String> = values.iter().map(|v| render(v)).collect();
        notes.push(format!("one of: {}", list.join(", ")));
    }
    if !others.is_empty() {
        let list: Vec<String> = others.iter().map(|v| v.to_string()).collect();
        notes.push(format!("also accepts: {}", list.join(", ")));
    }
    nullable
}

/// An object's converted properties and its `required` (those it has) into `out`, and
/// a note on the keys beyond them.
fn keep_members(
    m: &Map<String, Value>,
    depth: usize,
    notes: &mut Notes,
    out: &mut Map<String, Value>,
) {
    let empty = Map::new();
    let props = m
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let converted: Map<String, Value> = props
        .iter()
        .map(|(k, p)| (k.clone(), node(p, depth + 1)))
        .collect();
    let required: Vec<&str> = m
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .filter(|r| props.contains_key(*r))
                .collect()
        })
        .unwrap_or_default();
    match m.get("additionalProperties") {
        Some(Value::Object(a)) if props.is_empty() => {
            let ts = types_of(&Value::Object(a.clone()));
            let of = if ts.is_empty() {
                String::new()
            } else {
                format!(" of {}", ts.join("/"))
            };
            notes.push(format!("a map of names to values{of}"));
        }
        Some(Value::Object(_)) | Some(Value::Bool(true)) => notes.push("more keys accepted"),
        None if props.is_empty() && !m.contains_key(super::refs::CUT_MARK) => {
            notes.push("free-form object")
        }
        _ => {}
    }
    if !converted.is_empty() {
        out.insert("properties".into(), Value::Object(converted));
    }
    if !required.is_empty() {
        out.insert("required".into(), json!(required));
    }
}

/// An array's `items`: its item schema, or the first position of a tuple (noted), or
/// any value.
fn items(m: &Map<String, Value>, depth: usize, notes: &mut Notes) -> Value {
    let tuple = merge::tuple_items(m);
    match (m.get("items"), tuple) {
        // The first position represents the others.
        (_, Some(tuple)) => {
            notes.push("positions typed individually in the source");
            node(&tuple[0], depth + 1)
        }
        (Some(i @ Value::Object(_)), None) => node(i, depth + 1),
        _ => json!({"type": "string", "description": "(any JSON value)"}),
    }
}

fn scalar_any(notes: Notes, m: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), json!("string"));
    if let Some(d) = notes.describe(description_of(m)) {
        out.insert("description".into(), json!(d));
    }
    Value::Object(out)
}

fn inferred(m: &Map<String, Value>) -> Vec<String> {
    if m.contains_key("properties")
        || m.contains_key("required")
        || m.contains_key("additionalProperties")
    {
        return vec!["object".into()];
    }
    if m.contains_key("items") {
        return vec!["array".into()];
    }
    let first = m
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.iter().find(|v| !v.is_null()))
        .or_else(|| m.get("const").filter(|c| !c.is_null()));
    match first {
        Some(Value::String(_)) => vec!["string".into()],
        Some(Value::Bool(_)) => vec!["boolean".into()],
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => vec!["integer".into()],
        Some(Value::Number(_)) => vec!["number".into()],
        Some(Value::Array(_)) => vec!["array".into()],
        Some(Value::Object(_)) => vec!["object".into()],
        _ => Vec::new(),
    }
}

/// `anyOf`/`oneOf` alternatives (with the keywords `base` puts next to them) as one
/// schema of the subset.
fn collapse(base: Map<String, Value>, alternatives: &[Value], depth: usize) -> Value {
    let (nulls, values): (Vec<&Value>, Vec<&Value>) =
        alternatives.iter().partition(|a| merge::is_null_only(a));
    let values: Vec<Value> = values.into_iter().cloned().collect();
    if !values.is_empty()
        && let Some(e) = merge::enum_alternatives(&base, &values)
    {
        let mut out = node(&e, depth + 1);
        if !nulls.is_empty()
            && let Value::Object(o) = &mut out
        {
            o.insert("nullable".into(), json!(true));
        }
        return out;
    }
    let mut nullable = false;
    let mut rest: Vec<Value> = Vec::new();
    for a in alternatives {
        let a = if a.get("allOf").is_some() {
            merge::merge_all_of(std::slice::from_ref(a))
        } else {
            a.clone()
        };
        if merge::is_null_only(&a) {
            nullable = true;
        } else if !rest.contains(&a) {
            rest.push(a);
        }
    }
    let mut note = None;
    let chosen = if rest.is_empty() {
        json!({"type": "null"})
    } else if rest.len() == 1 {
        rest[0].clone()
    } else if rest.iter().all(merge::is_object) {
        let (merged, text) = merge::merge_alternatives(&rest);
        note = Some(text);
        merged
    } else if let Some(same) = same_type(&rest) {
        same
    } else {
        let others: Vec<String> = rest[1..]
            .iter()
            .map(|r| {
                let ts = types_of(r);
                let t = if ts.is_empty() {
                    "another shape".to_owned()
                } else {
                    ts.join("/")
                };
                match r.get("enum").and_then(Value::as_array) {
                    Some(e) if e.len() <= 5 => {
                        let v: Vec<String> = e.iter().map(Value::to_string).collect();
                        format!("{t} {}", v.join("/"))
                    }
                    _ => t,
                }
            })
            .collect();
        note = Some(format!("also accepts: {}", others.join(", ")));
        rest[0].clone()
    };
    // Keywords beside the alternatives apply; the alternative's own description is
    // used when the outer one is missing.
    let mut chosen = chosen.as_object().cloned().unwrap_or_default();
    let outer_desc = base.get("description").cloned();
    let mut base = base;
    base.remove("description");
    let mut merged = merge::merge_all_of(&[Value::Object(base), Value::Object(chosen.clone())])
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(d) = outer_desc.or_else(|| chosen.remove("description")) {
        merged.insert("description".into(), d);
    }
    if let Some(n) = note {
        let d = merged
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned();
        let text = if d.is_empty() {
            format!("({n})")
        } else {
            format!("{d} ({n})")
        };
        merged.insert("description".into(), json!(text));
    }
    let mut out = node(&Value::Object(merged), depth + 1);
    if nullable && let Value::Object(o) = &mut out {
        o.insert("nullable".into(), json!(true));
    }
    out
}

/// Alternatives that all declare one and the same single type, merged: the first's
/// keywords, with the enums united (or no enum when one alternative has none).
fn same_type(rest: &[Value]) -> Option<Value> {
    let t = types_of(&rest[0]);
    if t.len() != 1 || rest.iter().any(|r| types_of(r) != t) {
        return None;
    }
    let mut out = rest[0].as_object().cloned().unwrap_or_default();
    let mut values: Vec<Value> = Vec::new();
    for r in rest {
        match r.get("enum").and_then(Value::as_array) {
            Some(e) => values.extend(
                e.iter()
                    .filter(|v| !values.contains(v))
                    .cloned()
                    .collect::<Vec<_>>(),
            ),
            None => {
                out.remove("enum");
                return Some(Value::Object(out));
            }
        }
    }
    out.insert("enum".into(), Value::Array(values));
    Some(Value::Object(out))
}

fn value_has_type(v: &Value, t: &str) -> bool {
    match v {
        Value::String(_) => t == "string",
        Value::Bool(_) => t == "boolean",
        Value::Number(n) => t == "number" || (t == "integer" && (n.is_i64() || n.is_u64())),
        Value::Array(_) => t == "array",
        Value::Object(_) => t == "object",
        Value::Null => false,
    }
}
