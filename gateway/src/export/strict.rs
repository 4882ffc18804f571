//! OpenAI structured outputs (`strict: true`) schemas.
//!
//! Only what strict mode documents as supported is kept, conservatively: `type` (a
//! string, or `[t, "null"]`), `description`, `properties`, `required` (every property),
//! `additionalProperties: false` (every object), `items`, `enum`, `anyOf`, and `format`
//! on strings when it is one of [`FORMATS`]. Everything else is removed; the useful
//! keywords (`pattern`, lengths, ranges, `default`, examples, other formats, …) are moved
//! into the description. `allOf` is merged, `oneOf` becomes `anyOf`, `const` becomes a
//! one-value `enum`, `not`/`if`/`then`/`else` are dropped (and said so). A property
//! that was optional becomes nullable (`[t, "null"]`, a `null` enum value, or a
//! `{"type":"null"}` alternative).
//!
//! What strict mode cannot say at all is narrowed to something it can, so that every
//! value the model may send is still valid for the original schema: a schema with no
//! type (any value) becomes `anyOf` string/number/boolean/null; an array without
//! `items` gets such items; a free-form object (keys not declared) becomes a closed
//! object with the declared properties only, and its description says so.

use serde_json::{Map, Value, json};

use super::merge::{self, admits_null, types_of};
use super::notes::Notes;

/// String formats strict mode supports.
pub(super) const FORMATS: &[&str] = &[
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
/// Deepest nesting converted; deeper schemas become "any scalar".
const MAX_DEPTH: usize = 48;

/// Size limits OpenAI documents for one strict schema: object nesting levels, object
/// properties, enum values, and characters of property names plus enum values.
pub(super) const MAX_NESTING: usize = 10;
pub(super) const MAX_PROPERTIES: usize = 5000;
pub(super) const MAX_ENUM_VALUES: usize = 1000;
pub(super) const MAX_STRING_CHARS: usize = 120_000;

/// Checks a converted schema against OpenAI's size limits for strict mode; a schema
/// over one of them would make OpenAI reject the whole request.
pub(super) fn check_limits(schema: &Value) -> Result<(), String> {
    #[derive(Default)]
    struct Count {
        nesting: usize,
        properties: usize,
        enums: usize,
        chars: usize,
    }
    fn walk(s: &Value, level: usize, c: &mut Count) {
        let Some(m) = s.as_object() else { return };
        let level = if m.contains_key("properties") {
            level + 1
        } else {
            level
        };
        c.nesting = c.nesting.max(level);
        if let Some(e) = m.get("enum").and_then(Value::as_array) {
            c.enums += e.len();
            c.chars += e
                .iter()
                .filter_map(Value::as_str)
                .map(str::len)
                .sum::<usize>();
        }
        if let Some(p) = m.get("properties").and_then(Value::as_object) {
            c.properties += p.len();
            for (k, v) in p {
                c.chars += k.len();
                walk(v, level, c);
            }
        }
        if let Some(i) = m.get("items") {
            walk(i, level, c);
        }
        for b in m
            .get("anyOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            walk(b, level, c);
        }
    }
    let mut c = Count::default();
    walk(schema, 0, &mut c);
    let over = [
        ("levels of object nesting", c.nesting, MAX_NESTING),
        ("object properties", c.properties, MAX_PROPERTIES),
        ("enum values", c.enums, MAX_ENUM_VALUES),
        (
            "characters of property names and enum values",
            c.chars,
            MAX_STRING_CHARS,
        ),
    ]
    .into_iter()
    .find(|(_, n, max)| n > max);
    match over {
        Some((what, n, max)) => Err(format!(
            "strict mode allows at most {max} {what}; this schema has {n}"
        )),
        None => Ok(()),
    }
}

/// Converts an object root (refs already inlined) into a strict-mode schema.
pub(super) fn convert_root(root: &Value) -> Value {
    let mut out = node(root, 0);
    if let Value::Object(m) = &mut out {
        // The root is an object by construction; never nullable.
        m.insert("type".into(), json!("object"));
    }
    out
}

fn any_value(description: Option<String>) -> Value {
    let mut m = Map::new();
    m.insert(
        "anyOf".into(),
        json!([{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]),
    );
    if let Some(d) = description {
        m.insert("description".into(), json!(d));
    }
    Value::Object(m)
}

fn description_of(m: &Map<String, Value>) -> Option<&str> {
    m.get("description").and_then(Value::as_str)
}

fn node(s: &Value, depth: usize) -> Value {
    let Some(m) = s.as_object() else {
        return any_value(Some("Any value.".into()));
    };
    if depth > MAX_DEPTH {
        let mut n = Notes::new();
        n.push("nested too deeply to describe; any value");
        return any_value(n.describe(description_of(m)));
    }
    if let Some(Value::Array(branches)) = m.get("allOf") {
        let mut base = m.clone();
        base.remove("allOf");
        let mut all = vec![Value::Object(base)];
        all.extend(branches.iter().cloned());
        return node(&merge::merge_all_of(&all), depth + 1);
    }
    let mut notes = Notes::new();
    for k in ["not", "if", "then", "else"] {
        if m.contains_key(k) {
            notes.push(format!("condition '{k}' not enforced"));
        }
    }
    let alternatives: Vec<Value> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect();
    if !alternatives.is_empty() {
        return any_of(m, &alternatives, notes, depth);
    }
    let mut m = m.clone();
    if let Some(c) = m.remove("const") {
        m.insert("enum".into(), json!([c]));
    }
    let declared = types_of(&Value::Object(m.clone()));
    let nullable = declared.iter().any(|t| t == "null");
    let mut types: Vec<String> = declared.into_iter().filter(|t| t != "null").collect();
    if types.is_empty() {
        types = inferred(&m);
    }
    match types.len() {
        0 if nullable => {
            let mut out = Map::new();
            out.insert("type".into(), json!("null"));
            if let Some(d) = notes.describe(description_of(&m)) {
                out.insert("description".into(), json!(d));
            }
            Value::Object(out)
        }
        0 => {
            notes.push("any JSON value; strict mode takes a string, number, boolean or null");
            any_value(notes.describe(description_of(&m)))
        }
        1 => typed(&m, &types[0], nullable, notes, depth),
        _ => {
            // Several types: one alternative per type.
            let branches: Vec<Value> = types
                .iter()
                .chain(nullable.then(|| "null".to_owned()).iter())
                .map(|t| {
                    let mut b = m.clone();
                    b.remove("description");
                    b.insert("type".into(), json!(t));
                    b.remove("nullable");
                    node(&Value::Object(b), depth + 1)
                })
                .collect();
            let mut out = Map::new();
            out.insert("anyOf".into(), Value::Array(branches));
            if let Some(d) = notes.describe(description_of(&m)) {
                out.insert("description".into(), json!(d));
            }
            Value::Object(out)
        }
    }
}

/// Types implied by a schema that does not declare any.
fn inferred(m: &Map<String, Value>) -> Vec<String> {
    if m.contains_key("properties") || m.contains_key("required") {
        return vec!["object".into()];
    }
    if m.contains_key("items") {
        return vec!["array".into()];
    }
    let mut out: Vec<String> = Vec::new();
    for v in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let t = match v {
            Value::String(_) => "string",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::Null => continue,
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !out.iter().any(|x| x == t) {
            out.push(t.into());
        }
    }
    out
}

fn any_of(m: &Map<String, Value>, alternatives: &[Value], mut notes: Notes, depth: usize) -> Value {
    if m.contains_key("anyOf") && m.contains_key("oneOf") {
        notes.push("anyOf and oneOf alternatives listed together");
    }
    let (nulls, values): (Vec<&Value>, Vec<&Value>) =
        alternatives.iter().partition(|a| merge::is_null_only(a));
    let values: Vec<Value> = values.into_iter().cloned().collect();
    if !values.is_empty()
        && let Some(mut e) = merge::enum_alternatives(m, &values)
    {
        if !nulls.is_empty()
            && let Value::Object(o) = &mut e
        {
            let mut t = types_of(&Value::Object(o.clone()));
            if t.is_empty() {
                t = inferred(o);
            }
            t.push("null".into());
            merge::set_types(o, &t);
            if let Some(Value::Array(v)) = o.get_mut("enum") {
                v.push(Value::Null);
            }
        }
        return node(&e, depth + 1);
    }
    // Structural keywords next to the alternatives apply to each of them.
    let mut base = m.clone();
    for k in [
        "anyOf",
        "oneOf",
        "description",
        "title",
        "not",
        "if",
        "then",
        "else",
    ] {
        base.remove(k);
    }
    let mut branches: Vec<Value> = Vec::new();
    for a in alternatives {
        let b = if base.is_empty() {
            a.clone()
        } else {
            merge::merge_all_of(&[Value::Object(base.clone()), a.clone()])
        };
        let converted = node(&b, depth + 1);
        // Nested alternatives are flattened; duplicates dropped.
        let parts = match converted.get("anyOf").and_then(Value::as_array) {
            Some(inner) if converted.as_object().is_some_and(|c| c.len() <= 2) => inner.clone(),
            _ => vec![converted],
        };
        for p in parts {
            if !branches.contains(&p) {
                branches.push(p);
            }
        }
    }
    let mut out = Map::new();
    if branches.len() == 1 {
        let mut only = branches.pop().unwrap_or_default();
        if let Value::Object(o) = &mut only {
            let inner = o
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let d = description_of(m).map(str::to_owned).or(inner);
            match notes.describe(d.as_deref()) {
                Some(d) => o.insert("description".into(), json!(d)),
                None => o.remove("description"),
            };
        }
        return only;
    }
    out.insert("anyOf".into(), Value::Array(branches));
    if let Some(d) = notes.describe(description_of(m)) {
        out.insert("description".into(), json!(d));
    }
    Value::Object(out)
}

fn typed(m: &Map<String, Value>, t: &str, nullable: bool, mut notes: Notes, depth: usize) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), json!(t));
    let format_kept = t == "string"
        && m.get("format")
            .and_then(Value::as_str)
            .is_some_and(|f| FORMATS.contains(&f));
    notes.dropped_keywords(m, |k| !(k == "format" && format_kept) && k != "const");
    if format_kept {
        out.insert("format".into(), m["format"].clone());
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        let kept: Vec<Value> = values
            .iter()
            .filter(|v| value_has_type(v, t))
            .cloned()
            .collect();
        if !kept.is_empty() {
            out.insert("enum".into(), Value::Array(kept));
        }
    }
    match t {
        "object" => object(m, &mut out, &mut notes, depth),
        "array" => {
            let tuple = merge::tuple_items(m);
            let items = match (m.get("items"), tuple) {
                (_, Some(tuple)) => {
                    notes.push("positions typed individually in the source");
                    any_of(&Map::new(), tuple, Notes::new(), depth)
                }
                (Some(i @ Value::Object(_)), None) => node(i, depth + 1),
                _ => any_value(None),
            };
            out.insert("items".into(), items);
            if m.contains_key("contains") {
                notes.push("'contains' constraint not enforced");
            }
        }
        _ => {}
    }
    if let Some(d) = notes.describe(description_of(m)) {
        out.insert("description".into(), json!(d));
    }
    let mut v = Value::Object(out);
    if nullable {
        make_nullable(&mut v);
    }
    v
}

fn object(m: &Map<String, Value>, out: &mut Map<String, Value>, notes: &mut Notes, depth: usize) {
    let required: Vec<&str> = m
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut props = Map::new();
    let empty = Map::new();
    let source = m
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, p) in source {
        let mut converted = node(p, depth + 1);
        if !required.contains(&name.as_str()) {
            make_nullable(&mut converted);
        }
        props.insert(name.clone(), converted);
    }
    let open = match m.get("additionalProperties") {
        None | Some(Value::Bool(true)) => source.is_empty(),
        Some(Value::Bool(false)) => false,
        Some(_) => true,
    };
    if (open || m.contains_key("patternProperties")) && !m.contains_key(super::refs::CUT_MARK) {
        notes.push("free-form keys in the source; strict mode only passes the properties listed");
    }
    out.insert("properties".into(), Value::Object(props.clone()));
    out.insert("required".into(), json!(props.keys().collect::<Vec<_>>()));
    out.insert("additionalProperties".into(), json!(false));
}

fn value_has_type(v: &Value, t: &str) -> bool {
    match (v, t) {
        (Value::String(_), "string") | (Value::Bool(_), "boolean") => true,
        (Value::Number(n), "integer") => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        (Value::Number(_), "number") => true,
        (Value::Array(_), "array") | (Value::Object(_), "object") => true,
        _ => false,
    }
}

/// Lets a converted schema also accept `null`.
pub(super) fn make_nullable(v: &mut Value) {
    if admits_null(v) {
        return;
    }
    let Value::Object(m) = v else { return };
    if let Some(Value::Array(branches)) = m.get_mut("anyOf") {
        branches.push(json!({"type": "null"}));
        return;
    }
    match m.get("type").cloned() {
        Some(Value::String(t)) => {
            m.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(mut ts)) => {
            ts.push(json!("null"));
            m.insert("type".into(), Value::Array(ts));
        }
        _ => return,
    }
    if let Some(Value::Array(values)) = m.get_mut("enum") {
        values.push(Value::Null);
    }
}
