//! An object at the root of every exported input schema, without combinators there.

use serde_json::{Map, Value, json};

use super::merge::{self, is_null_only, is_object, types_of_map};

/// A root made into a plain object schema, and a sentence for the tool description
/// when alternatives were merged.
pub(super) struct Fixed {
    pub schema: Value,
    pub note: Option<String>,
}

/// Makes `schema` a root object schema (see the module docs of `export`):
/// - missing, `null`, `true` or `{}` -> `{"type":"object","properties":{}}`;
/// - a root `$ref` -> its target (the root's `$defs` stay for the rest);
/// - root `allOf` -> its branches merged into the root;
/// - root `anyOf`/`oneOf` -> the object branches merged (`null` branches dropped);
/// - a root declared as anything but an object -> an error.
pub(super) fn object_root(schema: &Value) -> Result<Fixed, String> {
    let mut root = match schema {
        Value::Object(m) => m.clone(),
        Value::Null | Value::Bool(true) => Map::new(),
        other => return Err(format!("the input schema is not a schema object: {other}")),
    };
    let whole = Value::Object(root.clone());
    let mut note = None;
    for _ in 0..8 {
        let mut changed = false;
        if let Some(r) = root.get("$ref").and_then(Value::as_str).map(str::to_owned) {
            let target = resolve_local(&whole, &r)
                .ok_or_else(|| format!("the root reference {r} cannot be resolved"))?;
            root.remove("$ref");
            if let Value::Object(t) = target {
                for (k, v) in t {
                    root.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            changed = true;
        }
        if let Some(Value::Array(branches)) = root.remove("allOf") {
            let branches: Vec<Value> = branches
                .iter()
                .map(|b| shallow_resolve(&whole, b))
                .collect();
            let mut all = vec![Value::Object(root.clone())];
            all.extend(branches);
            let merged = merge::merge_all_of(&all);
            root = merged.as_object().cloned().unwrap_or_default();
            changed = true;
        }
        for key in ["anyOf", "oneOf"] {
            let Some(Value::Array(branches)) = root.remove(key) else {
                continue;
            };
            let branches: Vec<Value> = branches
                .iter()
                .map(|b| shallow_resolve(&whole, b))
                .map(|b| {
                    if b.get("allOf").is_some() {
                        merge::merge_all_of(&[b])
                    } else {
                        b
                    }
                })
                .filter(|b| !is_null_only(b))
                .collect();
            let objects: Vec<Value> = branches.iter().filter(|b| is_object(b)).cloned().collect();
            if objects.is_empty() && !branches.is_empty() {
                return Err(format!("no alternative of the root {key} is an object"));
            }
            let dropped = branches.len() - objects.len();
            let (merged, mut text) = match objects.len() {
                0 => (json!({}), String::new()),
                1 => (objects[0].clone(), String::new()),
                _ => merge::merge_alternatives(&objects),
            };
            if dropped > 0 {
                text = format!("{text} ({dropped} alternative(s) that are not objects left out.)")
                    .trim()
                    .to_owned();
            }
            root = merge::merge_all_of(&[Value::Object(root.clone()), merged])
                .as_object()
                .cloned()
                .unwrap_or_default();
            if !text.is_empty() {
                note = Some(text);
            }
            changed = true;
        }
        if !changed {
            break;
        }
    }
    let types = types_of_map(&root);
    let non_null: Vec<&String> = types.iter().filter(|t| *t != "null").collect();
    if !non_null.is_empty() && !non_null.iter().any(|t| *t == "object") {
        return Err(format!(
            "the input schema's root is {} rather than an object",
            non_null
                .iter()
                .map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(" or ")
        ));
    }
    root.remove("nullable");
    root.insert("type".into(), json!("object"));
    if !root.contains_key("properties") {
        root.insert("properties".into(), json!({}));
    }
    for k in ["anyOf", "oneOf", "allOf"] {
        root.remove(k);
    }
    Ok(Fixed {
        schema: Value::Object(root),
        note,
    })
}

fn resolve_local<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let frag = r.strip_prefix('#')?;
    if frag.is_empty() {
        return None; // a root referring to itself says nothing
    }
    root.pointer(frag)
}

/// A branch that is a local `$ref` replaced by its target (one level), so its shape is
/// known; anything else as it is.
fn shallow_resolve(root: &Value, b: &Value) -> Value {
    let mut cur = b.clone();
    for _ in 0..8 {
        let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let Some(Value::Object(t)) = resolve_local(root, r) else {
            break;
        };
        let mut m = cur.as_object().cloned().unwrap_or_default();
        m.remove("$ref");
        for (k, v) in t {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        cur = Value::Object(m);
    }
    cur
}
