//! The consumers' rules, written from their documentation (not from the converter).

use serde_json::{Map, Value, json};
use toolgate::export::MAX_DESCRIPTION;

pub(crate) const STRICT_KEYS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "anyOf",
    "format",
];
pub(crate) const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
pub(crate) const GEMINI_KEYS: &[&str] = &[
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
];
pub(crate) const JSON_TYPES: &[&str] =
    &["string", "number", "integer", "boolean", "array", "object"];
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
const SCHEMA_ONE: &[&str] = &[
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
];
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// Calls `f` on every schema node (objects only) with its path; bounded depth.
pub(crate) fn walk(
    s: &Value,
    path: &str,
    depth: usize,
    f: &mut dyn FnMut(&Map<String, Value>, &str),
) {
    assert!(depth < 200, "{path}: schema nested over 200 levels");
    let Some(m) = s.as_object() else { return };
    f(m, path);
    for (k, v) in m {
        let k = k.as_str();
        if SCHEMA_MAPS.contains(&k) {
            for (n, p) in v.as_object().into_iter().flatten() {
                walk(p, &format!("{path}/{k}/{n}"), depth + 1, f);
            }
        } else if SCHEMA_ONE.contains(&k) || (k == "items" && v.is_object()) {
            walk(v, &format!("{path}/{k}"), depth + 1, f);
        } else if SCHEMA_LISTS.contains(&k) || k == "items" {
            for (i, b) in v.as_array().into_iter().flatten().enumerate() {
                walk(b, &format!("{path}/{k}/{i}"), depth + 1, f);
            }
        }
    }
}

pub(crate) fn name_ok(name: &str, gemini: bool) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && (!gemini || name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

fn types(m: &Map<String, Value>) -> Vec<&str> {
    match m.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

pub(crate) fn admits_null(v: &Value) -> bool {
    let Some(m) = v.as_object() else { return false };
    types(m).contains(&"null")
        || m.get("anyOf")
            .and_then(Value::as_array)
            .is_some_and(|b| b.iter().any(admits_null))
}

/// Problems with a function's name and description.
pub(crate) fn header(
    name: Option<&Value>,
    description: Option<&Value>,
    gemini: bool,
    errs: &mut Vec<String>,
) {
    match name.and_then(Value::as_str) {
        Some(n) if name_ok(n, gemini) => {}
        other => errs.push(format!("bad name {other:?}")),
    }
    match description.and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() && d.chars().count() <= MAX_DESCRIPTION => {}
        other => errs.push(format!(
            "bad description ({:?} chars)",
            other.map(|d| d.chars().count())
        )),
    }
}

/// Object root without combinators there (OpenAI, Anthropic).
pub(crate) fn object_root(s: &Value, errs: &mut Vec<String>) {
    if s.get("type") != Some(&json!("object")) {
        errs.push(format!("root type is {:?}, not \"object\"", s.get("type")));
    }
    for k in ["anyOf", "oneOf", "allOf"] {
        if s.get(k).is_some() {
            errs.push(format!("root has {k}"));
        }
    }
}

/// Every `$ref` points at something in the document.
pub(crate) fn refs_resolve(s: &Value, errs: &mut Vec<String>) {
    walk(s, "#", 0, &mut |m, path| {
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            let ok = r == "#" || r.strip_prefix('#').is_some_and(|p| s.pointer(p).is_some());
            if !ok {
                errs.push(format!("{path}: $ref {r} does not resolve"));
            }
        }
    });
}

/// OpenAI structured outputs rules, node by node.
pub(crate) fn strict(s: &Value, source_root: &Value, errs: &mut Vec<String>) {
    object_root(s, errs);
    walk(s, "#", 0, &mut |m, path| {
        for k in m.keys() {
            if !STRICT_KEYS.contains(&k.as_str()) {
                errs.push(format!("{path}: keyword {k} not allowed in strict mode"));
            }
        }
        let ts = types(m);
        if ts.is_empty() && !m.contains_key("anyOf") {
            errs.push(format!("{path}: neither type nor anyOf"));
        }
        if m.contains_key("anyOf") && m.contains_key("type") {
            errs.push(format!("{path}: type beside anyOf"));
        }
        let non_null: Vec<&&str> = ts.iter().filter(|t| **t != "null").collect();
        if non_null.len() > 1 || ts.iter().any(|t| *t != "null" && !JSON_TYPES.contains(t)) {
            errs.push(format!("{path}: type {ts:?}"));
        }
        if ts.contains(&"object") {
            let props = m.get("properties").and_then(Value::as_object);
            let req: Option<Vec<&str>> = m
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect());
            match (props, req) {
                (Some(p), Some(r)) => {
                    let mut keys: Vec<&str> = p.keys().map(String::as_str).collect();
                    let mut r2 = r.clone();
                    keys.sort_unstable();
                    r2.sort_unstable();
                    if keys != r2 {
                        errs.push(format!("{path}: required {r:?} is not every property"));
                    }
                }
                _ => errs.push(format!("{path}: object without properties/required")),
            }
            if m.get("additionalProperties") != Some(&json!(false)) {
                errs.push(format!("{path}: object not closed"));
            }
        } else if m.contains_key("properties") || m.contains_key("additionalProperties") {
            errs.push(format!("{path}: object keywords on a non-object"));
        }
        if ts.contains(&"array") && !m.get("items").is_some_and(Value::is_object) {
            errs.push(format!("{path}: array without items"));
        }
        if let Some(f) = m.get("format")
            && !(ts.contains(&"string") && f.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f)))
        {
            errs.push(format!("{path}: format {f} not supported"));
        }
        if let Some(e) = m.get("enum") {
            match e.as_array() {
                Some(values) if !values.is_empty() => {
                    if ts.contains(&"null") && !values.iter().any(Value::is_null) {
                        errs.push(format!("{path}: nullable enum without null"));
                    }
                }
                _ => errs.push(format!("{path}: empty enum")),
            }
        }
    });
    if s.get("type").is_some_and(|t| t.is_array()) {
        errs.push("root is nullable".into());
    }
    // OpenAI's documented size limits.
    let (mut nesting, mut properties, mut enums, mut chars) = (0, 0, 0, 0);
    walk(s, "#", 0, &mut |m, path| {
        let level = path.matches("/properties/").count() + 1;
        if m.contains_key("properties") {
            nesting = nesting.max(level);
        }
        if let Some(p) = m.get("properties").and_then(Value::as_object) {
            properties += p.len();
            chars += p.keys().map(String::len).sum::<usize>();
        }
        if let Some(e) = m.get("enum").and_then(Value::as_array) {
            enums += e.len();
            chars += e
                .iter()
                .filter_map(Value::as_str)
                .map(str::len)
                .sum::<usize>();
        }
    });
    if nesting > 10 || properties > 5000 || enums > 1000 || chars > 120_000 {
        errs.push(format!(
            "over strict limits: nesting {nesting}, properties {properties}, enums {enums}, chars {chars}"
        ));
    }
    // Optional properties at the root became nullable.
    if let (Some(src), Some(out)) = (
        source_root.get("properties").and_then(Value::as_object),
        s.get("properties").and_then(Value::as_object),
    ) {
        let required: Vec<&str> = source_root
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for name in src.keys() {
            match out.get(name) {
                None => errs.push(format!("property {name} lost")),
                Some(p) if !required.contains(&name.as_str()) && !admits_null(p) => {
                    errs.push(format!("optional property {name} is not nullable"))
                }
                Some(p)
                    if required.contains(&name.as_str())
                        && admits_null(p)
                        && source_rejects_null(&src[name]) =>
                {
                    errs.push(format!("required property {name} became nullable"))
                }
                _ => {}
            }
        }
    }
}

/// True when a source schema certainly rejects `null` (references and combinators are
/// not followed: unknown counts as "may accept").
fn source_rejects_null(s: &Value) -> bool {
    let Some(m) = s.as_object() else { return false };
    if ["$ref", "allOf", "anyOf", "oneOf", "not", "if"]
        .iter()
        .any(|k| m.contains_key(*k))
    {
        return false;
    }
    if m.get("nullable") == Some(&json!(true)) {
        return false;
    }
    if let Some(e) = m.get("enum").and_then(Value::as_array) {
        return !e.iter().any(Value::is_null);
    }
    if let Some(c) = m.get("const") {
        return !c.is_null();
    }
    let ts = types(m);
    !ts.is_empty() && !ts.contains(&"null")
}

/// Gemini's OpenAPI 3.0 subset, node by node.
pub(crate) fn gemini(s: &Value, errs: &mut Vec<String>) {
    if s.get("type") != Some(&json!("object")) {
        errs.push("root is not an object".into());
    }

    walk(s, "#", 0, &mut |m, path| {
        for k in m.keys() {
            if !GEMINI_KEYS.contains(&k.as_str()) {
                errs.push(format!("{path}: keyword {k} not in Gemini's subset"));
            }
        }
        let t = match m.get("type") {
            Some(Value::String(t)) if JSON_TYPES.contains(&t.as_str()) => t.as_str(),
            other => {
                errs.push(format!("{path}: type {other:?}"));
                return;
            }
        };
        if let Some(n) = m.get("nullable")
            && !n.is_boolean()
        {
            errs.push(format!("{path}: nullable {n}"));
        }
        if let Some(e) = m.get("enum") {
            let ok = t == "string"
                && e.as_array()
                    .is_some_and(|v| !v.is_empty() && v.iter().all(Value::is_string));
            if !ok {
                errs.push(format!("{path}: enum {e} on {t}"));
            }
        }
        if let Some(f) = m.get("format").and_then(Value::as_str) {
            let ok = matches!(
                (t, f),
                ("string", "date-time" | "enum")
                    | ("number", "float" | "double")
                    | ("integer", "int32" | "int64")
            );
            if !ok {
                errs.push(format!("{path}: format {f} on {t}"));
            }
        }
        if t == "array" && !m.get("items").is_some_and(Value::is_object) {
            errs.push(format!("{path}: array without items"));
        }
        if m.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.is_empty())
        {
            errs.push(format!("{path}: empty properties (Gemini rejects them)"));
        }
        if t != "object" && (m.contains_key("properties") || m.contains_key("required")) {
            errs.push(format!("{path}: properties on {t}"));
        }
        if let Some(r) = m.get("required").and_then(Value::as_array) {
            let props = m.get("properties").and_then(Value::as_object);
            for n in r.iter().filter_map(Value::as_str) {
                if !props.is_some_and(|p| p.contains_key(n)) {
                    errs.push(format!("{path}: required {n} is not a property"));
                }
            }
        }
    });
}

/// Whether the source declares an object that takes no keys at all (no properties,
/// `additionalProperties: false`) anywhere: its exports may then hold one too.
pub(crate) fn declares_closed_empty_object(source: &Value) -> bool {
    let mut found = false;
    walk(source, "#", 0, &mut |m, _| {
        found |= m.get("additionalProperties") == Some(&json!(false))
            && m.get("properties")
                .and_then(Value::as_object)
                .is_none_or(|p| p.is_empty());
    });
    found
}

/// Strict mode and Gemini: no object below the root that accepts nothing (no
/// properties). A free-form map or a cut recursive value is a JSON string there
/// instead (or the tool is refused with a reason).
pub(crate) fn no_empty_objects(s: &Value, errs: &mut Vec<String>) {
    walk(s, "#", 0, &mut |m, path| {
        if path == "#" || !types(m).contains(&"object") {
            return;
        }
        if m.get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.is_empty())
        {
            errs.push(format!("{path}: an object that accepts no keys"));
        }
    });
}
