//! Merging schemas: `allOf` branches into one schema, object alternatives into one
//! object, and questions about types shared by the converters.

use serde_json::{Map, Value, json};

/// The positions of a tuple array (`items` as an array, or `prefixItems` when `items`
/// is not one schema), when it has any.
pub(super) fn tuple_items(m: &Map<String, Value>) -> Option<&Vec<Value>> {
    match (m.get("items"), m.get("prefixItems")) {
        (Some(Value::Array(t)), _) => Some(t),
        (Some(Value::Object(_)), _) => None,
        (_, Some(Value::Array(t))) => Some(t),
        _ => None,
    }
    .filter(|t| !t.is_empty())
}

/// The JSON types a schema declares (`type` string or array, plus `null` for an
/// OpenAPI 3.0 `nullable: true`), in the order written.
pub(super) fn types_of(s: &Value) -> Vec<String> {
    s.as_object().map(types_of_map).unwrap_or_default()
}

/// [`types_of`] for a schema already known to be an object (no copy of it needed:
/// this runs for every schema node a call's arguments are decoded against).
pub(super) fn types_of_map(s: &Map<String, Value>) -> Vec<String> {
    let mut out: Vec<String> = match s.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    if s.get("nullable") == Some(&Value::Bool(true)) && !out.iter().any(|t| t == "null") {
        out.push("null".into());
    }
    out
}

/// True when the schema accepts `null` by its own declaration.
pub(super) fn admits_null(s: &Value) -> bool {
    types_of(s).iter().any(|t| t == "null")
        || s.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().any(Value::is_null))
        || s.get("const") == Some(&Value::Null)
        || ["anyOf", "oneOf"].iter().any(|k| {
            s.get(*k)
                .and_then(Value::as_array)
                .is_some_and(|bs| bs.iter().any(admits_null))
        })
}

/// True for a schema that only says "null".
pub(super) fn is_null_only(s: &Value) -> bool {
    let ts = types_of(s);
    (ts.len() == 1 && ts[0] == "null")
        || s.get("const") == Some(&Value::Null)
        || s.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.len() == 1 && e[0].is_null())
}

/// True for a schema describing objects (declared so, or with `properties`).
pub(super) fn is_object(s: &Value) -> bool {
    let ts = types_of(s);
    ts.iter().any(|t| t == "object")
        || (ts.is_empty() && (s.get("properties").is_some() || s.get("required").is_some()))
}

fn required_of(s: &Value) -> Vec<String> {
    s.get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// One schema standing for all of `branches` at once (`allOf`): properties and
/// `required` are united (a property in several branches gets their merge), the
/// declared types intersected, and for any other keyword the first branch that has it
/// wins. Nested `allOf`s are flattened first.
pub(super) fn merge_all_of(branches: &[Value]) -> Value {
    let mut flat = Vec::new();
    flatten(branches, &mut flat, 0);
    let mut out = Map::new();
    let mut props = Map::new();
    let mut required: Vec<String> = Vec::new();
    let mut types: Option<Vec<String>> = None;
    for b in &flat {
        let Some(m) = b.as_object() else { continue };
        let bt = types_of(b);
        if !bt.is_empty() {
            types = Some(match types {
                None => bt,
                Some(t) => {
                    let both: Vec<String> = t.iter().filter(|x| bt.contains(x)).cloned().collect();
                    if both.is_empty() { t } else { both }
                }
            });
        }
        if let Some(p) = m.get("properties").and_then(Value::as_object) {
            for (name, schema) in p {
                let merged = match props.get(name) {
                    Some(prev) if prev != schema => merge_all_of(&[prev.clone(), schema.clone()]),
                    Some(prev) => prev.clone(),
                    None => schema.clone(),
                };
                props.insert(name.clone(), merged);
            }
        }
        for r in required_of(b) {
            if !required.contains(&r) {
                required.push(r);
            }
        }
        for (k, v) in m {
            if matches!(
                k.as_str(),
                "properties" | "required" | "type" | "nullable" | "allOf"
            ) {
                continue;
            }
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    if let Some(t) = types {
        set_types(&mut out, &t);
    }
    if !props.is_empty() {
        out.insert("properties".into(), Value::Object(props));
    }
    if !required.is_empty() {
        out.insert("required".into(), json!(required));
    }
    Value::Object(out)
}

fn flatten(branches: &[Value], out: &mut Vec<Value>, depth: usize) {
    for b in branches {
        match b.get("allOf").and_then(Value::as_array) {
            Some(inner) if depth < 16 => {
                let mut rest = b.clone();
                if let Some(m) = rest.as_object_mut() {
                    m.remove("allOf");
                }
                out.push(rest);
                flatten(inner, out, depth + 1);
            }
            _ => out.push(b.clone()),
        }
    }
}

/// Writes `types` as a `type` keyword (a string when there is one).
pub(super) fn set_types(m: &mut Map<String, Value>, types: &[String]) {
    m.remove("nullable");
    match types {
        [] => {
            m.remove("type");
        }
        [one] => {
            m.insert("type".into(), json!(one));
        }
        many => {
            m.insert("type".into(), json!(many));
        }
    }
}

/// One object standing for alternative object `branches` (`anyOf`/`oneOf`): every
/// branch's properties (a property whose branches disagree becomes their `anyOf`),
/// requiring only what every branch requires. Also returns a sentence describing the
/// alternatives by their required properties.
pub(super) fn merge_alternatives(branches: &[Value]) -> (Value, String) {
    let branches: Vec<Value> = branches
        .iter()
        .map(|b| {
            if b.get("allOf").is_some() {
                merge_all_of(std::slice::from_ref(b))
            } else {
                b.clone()
            }
        })
        .collect();
    let mut props = Map::new();
    let mut required: Option<Vec<String>> = None;
    let mut shapes = Vec::new();
    for (i, b) in branches.iter().enumerate() {
        let req = required_of(b);
        let label = b
            .get("title")
            .or_else(|| b.get("description"))
            .and_then(Value::as_str)
            .map(|t| super::cap_to(t.trim(), 60));
        let fields = if req.is_empty() {
            "no required arguments".to_owned()
        } else {
            req.join(", ")
        };
        shapes.push(match label {
            Some(l) if !l.is_empty() => format!("({}) {l}: {fields}", i + 1),
            _ => format!("({}) {fields}", i + 1),
        });
        if let Some(p) = b.get("properties").and_then(Value::as_object) {
            for (name, schema) in p {
                let merged = match props.get(name) {
                    None => schema.clone(),
                    Some(prev) if prev == schema => prev.clone(),
                    Some(Value::Object(prev)) if prev.contains_key("anyOf") && prev.len() == 1 => {
                        let mut list = prev["anyOf"].as_array().cloned().unwrap_or_default();
                        if !list.contains(schema) {
                            list.push(schema.clone());
                        }
                        json!({ "anyOf": list })
                    }
                    Some(prev) => json!({ "anyOf": [prev, schema] }),
                };
                props.insert(name.clone(), merged);
            }
        }
        required = Some(match required {
            None => req,
            Some(r) => r.into_iter().filter(|x| req.contains(x)).collect(),
        });
    }
    let mut out = Map::new();
    out.insert("type".into(), json!("object"));
    out.insert("properties".into(), Value::Object(props));
    let required = required.unwrap_or_default();
    if !required.is_empty() {
        out.insert("required".into(), json!(required));
    }
    let note = format!(
        "Accepts one of {} argument shapes: {}.",
        branches.len(),
        shapes.join("; ")
    );
    (Value::Object(out), note)
}

/// Alternatives that are each one value (`const` or a short `enum`, with at most a
/// type, title, description and format beside it) as one schema: `base` plus the
/// united `enum`, a common type when the alternatives agree on one, and a description
/// naming each value with its title and description. `None` for other alternatives.
pub(super) fn enum_alternatives(base: &Map<String, Value>, branches: &[Value]) -> Option<Value> {
    const ALLOWED: &[&str] = &[
        "const",
        "enum",
        "title",
        "description",
        "type",
        "format",
        "deprecated",
    ];
    let mut values: Vec<Value> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    let mut types: Option<Vec<String>> = None;
    for b in branches {
        let m = b.as_object()?;
        if m.keys().any(|k| !ALLOWED.contains(&k.as_str())) {
            return None;
        }
        let own: Vec<Value> = match (m.get("const"), m.get("enum").and_then(Value::as_array)) {
            (Some(c), _) => vec![c.clone()],
            (None, Some(e)) => e.clone(),
            (None, None) => return None,
        };
        let t = types_of(b);
        if !t.is_empty() {
            match &types {
                Some(prev) if *prev != t => return None,
                _ => types = Some(t),
            }
        }
        let text: Vec<&str> = ["title", "description"]
            .iter()
            .filter_map(|k| m.get(*k).and_then(Value::as_str))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if !text.is_empty() {
            let shown: Vec<String> = own.iter().map(super::notes::render).collect();
            labels.push(format!("{} = {}", shown.join("/"), text.join(": ")));
        }
        for v in own {
            if !values.contains(&v) {
                values.push(v);
            }
        }
    }
    if values.is_empty() {
        return None;
    }
    let mut out = base.clone();
    out.remove("anyOf");
    out.remove("oneOf");
    if out.get("type").is_none()
        && let Some(t) = types
    {
        set_types(&mut out, &t);
    }
    out.insert("enum".into(), Value::Array(values));
    if !labels.is_empty() {
        let d = out
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned();
        let list = format!("Values: {}.", labels.join("; "));
        let text = if d.is_empty() {
            list
        } else {
            format!("{d} {list}")
        };
        out.insert("description".into(), json!(super::cap_to(&text, 1024)));
    }
    Some(Value::Object(out))
}
