//! Values strict mode and Gemini cannot describe, passed as JSON strings — and decoded
//! back on the call path.
//!
//! OpenAI strict mode wants every object closed with all its properties listed, and
//! Gemini's schema subset has no `additionalProperties`: neither can describe a
//! free-form map (`metadata`, labels, `tool_invoke`'s `arguments`) nor a recursive
//! sub-schema whose expansion was cut (see [`refs`]). Narrowed, such a value would
//! become an object that accepts nothing, or a scalar. Instead the export
//! ([`stringify`]) declares it as a **string** holding the JSON value, and its
//! description says so; the call path ([`decode`]) parses such a string back into the
//! object or array before validation and the call.
//!
//! The rule is a function of the tool's input schema alone, so the call path needs
//! nothing from the export and works whichever format the model saw. An argument's
//! *path* is its chain of property names and array positions (`/a/~/b`); the schemas
//! *reachable* at a path are those met walking the input schema down `properties` and
//! `items` (every alternative of an `anyOf`/`oneOf` taken, `allOf` merged, the
//! keywords beside alternatives applied to each). A *JSON-string slot* is a reachable
//! schema that is
//! - a free-form object: declared `object` (or untyped with object keywords, as the
//!   converters read it), no declared properties, `additionalProperties` not `false`; or
//! - a cut reference declared `object` or `array`.
//!
//! A path is *decodable* when a slot is reachable there and no schema reachable there
//! accepts an arbitrary string (a `string` type without `enum`/`const`, or no type at
//! all). Then a string at that path is never valid as it is (unless it is one of the
//! enumerated strings, which are left alone), so decoding it cannot change what a
//! valid call means. [`decode`] replaces such a string by its parse when that is JSON
//! of a slot's type; anything else is left for argument validation to report.
//!
//! A slot at a path that is not decodable (say, an alternative also takes any string),
//! or a root that takes free-form keys (the arguments object itself cannot be a
//! string), cannot be passed this way: the export refuses the tool with a reason (the
//! REST endpoint lists it under `skipped`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use toolgate_adapters::JsonObject;

use super::merge::{self, types_of, types_of_map};
use super::{refs, root};

/// Deepest nesting walked (the converters describe nothing deeper either).
const MAX_DEPTH: usize = 48;
/// Most schema nodes one walk visits (alternatives multiply paths).
const MAX_VISITS: usize = 50_000;

/// The path segment of any array position: `~` alone is never an escaped name.
const ITEMS: &str = "/~";

/// `path` extended by the property `name`, escaped as in a JSON pointer, so that no
/// name can pass for another path.
fn child(path: &str, name: &str) -> String {
    format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"))
}

/// What a JSON-string slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
}

/// The kind of value `m` holds when it is a JSON-string slot (module docs).
fn slot_kind(m: &Map<String, Value>) -> Option<Kind> {
    let types = types_of_map(m);
    let has = |t: &str| types.iter().any(|x| x == t);
    if has("string") {
        return None;
    }
    if m.contains_key(refs::CUT_MARK) {
        return if has("object") {
            Some(Kind::Object)
        } else if has("array") {
            Some(Kind::Array)
        } else {
            None
        };
    }
    // A declared object, or an untyped schema with object keywords (which the
    // converters read as an object too).
    let shaped = types.is_empty()
        && ["properties", "additionalProperties", "patternProperties"]
            .iter()
            .any(|k| m.contains_key(*k));
    if !(has("object") || shaped) || types.iter().any(|t| t != "object" && t != "null") {
        return None;
    }
    let no_properties = m
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|p| p.is_empty());
    let open = m.get("additionalProperties") != Some(&Value::Bool(false));
    (no_properties && open).then_some(Kind::Object)
}

/// Whether `m` (not a combinator) accepts strings it does not enumerate.
fn takes_any_string(m: &Map<String, Value>) -> bool {
    if m.contains_key("enum") || m.contains_key("const") {
        return false;
    }
    let types = types_of_map(m);
    if types.is_empty() {
        // Untyped: anything, unless its keywords say it is an object or an array.
        let shaped = [
            "properties",
            "additionalProperties",
            "patternProperties",
            "items",
            "required",
        ]
        .iter()
        .any(|k| m.contains_key(*k));
        return !shaped || m.contains_key(refs::CUT_MARK);
    }
    types.iter().any(|t| t == "string")
}

/// `s` with `allOf` merged, as the converters merge it.
fn merged(s: &Value) -> Value {
    let mut s = s.clone();
    for _ in 0..8 {
        let Some(Value::Array(branches)) = s.get("allOf").cloned() else {
            break;
        };
        let mut base = s.as_object().cloned().unwrap_or_default();
        base.remove("allOf");
        let mut all = vec![Value::Object(base)];
        all.extend(branches);
        s = merge::merge_all_of(&all);
    }
    s
}

/// The alternatives of `m` with the structural keywords beside them applied to each,
/// as the converters apply them; `None` without alternatives.
fn alternatives(m: &Map<String, Value>) -> Option<Vec<Value>> {
    let list: Vec<&Value> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    if list.is_empty() {
        return None;
    }
    let mut base = m.clone();
    for k in ["anyOf", "oneOf", "description", "title"] {
        base.remove(k);
    }
    Some(
        list.into_iter()
            .map(|a| {
                if base.is_empty() {
                    a.clone()
                } else {
                    merge::merge_all_of(&[Value::Object(base.clone()), a.clone()])
                }
            })
            .collect(),
    )
}

/// What the schemas reachable at each path say about strings there.
#[derive(Debug, Default)]
struct At {
    kinds: Vec<Kind>,
    any_string: bool,
    enumerated: Vec<Value>,
}

impl At {
    fn decodable(&self) -> bool {
        !self.kinds.is_empty() && !self.any_string
    }
}

/// Every path of `root` with what is reachable there.
fn reach(root: &Value) -> BTreeMap<String, At> {
    fn walk(
        s: &Value,
        path: &str,
        depth: usize,
        visits: &mut usize,
        out: &mut BTreeMap<String, At>,
    ) {
        *visits += 1;
        if depth > MAX_DEPTH || *visits > MAX_VISITS {
            return;
        }
        let node = merged(s);
        let Some(m) = node.as_object() else {
            // `true` (or anything else) accepts any string.
            out.entry(path.to_owned()).or_default().any_string = true;
            return;
        };
        if let Some(alts) = alternatives(m) {
            for a in &alts {
                walk(a, path, depth + 1, visits, out);
            }
            return;
        }
        let at = out.entry(path.to_owned()).or_default();
        if let Some(kind) = slot_kind(m) {
            at.kinds.push(kind);
            return;
        }
        at.any_string |= takes_any_string(m);
        for k in ["enum", "const"] {
            match m.get(k) {
                Some(Value::Array(values)) if k == "enum" => at
                    .enumerated
                    .extend(values.iter().filter(|v| v.is_string()).cloned()),
                Some(v @ Value::String(_)) => at.enumerated.push(v.clone()),
                _ => {}
            }
        }
        if let Some(Value::Object(props)) = m.get("properties") {
            for (name, p) in props {
                walk(p, &child(path, name), depth + 1, visits, out);
            }
        }
        let items = format!("{path}{ITEMS}");
        match m.get("items") {
            Some(i @ Value::Object(_)) => walk(i, &items, depth + 1, visits, out),
            Some(Value::Array(list)) => {
                for i in list {
                    walk(i, &items, depth + 1, visits, out);
                }
            }
            _ => {}
        }
        if let Some(Value::Array(list)) = m.get("prefixItems") {
            for i in list {
                walk(i, &items, depth + 1, visits, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, "", 0, &mut 0, &mut out);
    out
}

/// `root` (an object root, references inlined) with each JSON-string slot declared as
/// a string that says how to send it. `consumer` names the format in errors.
pub(crate) fn stringify(root: &Value, consumer: &str) -> Result<Value, String> {
    let Some(m) = root.as_object() else {
        return Ok(root.clone());
    };
    let no_properties = m
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|p| p.is_empty());
    let explicitly_open = matches!(
        m.get("additionalProperties"),
        Some(Value::Bool(true) | Value::Object(_))
    ) || m.contains_key("patternProperties");
    if no_properties && explicitly_open {
        return Err(format!(
            "it takes free-form argument names (no declared properties), which {consumer} \
             cannot describe; call it through tool_invoke or use format=openai"
        ));
    }
    let paths = reach(root);
    let mut visits = 0;
    rewrite(root, "", 0, &paths, &mut visits, consumer)
}

fn rewrite(
    s: &Value,
    path: &str,
    depth: usize,
    paths: &BTreeMap<String, At>,
    visits: &mut usize,
    consumer: &str,
) -> Result<Value, String> {
    *visits += 1;
    if depth > MAX_DEPTH || *visits > MAX_VISITS || !s.is_object() {
        return Ok(s.clone());
    }
    let node = merged(s);
    let Some(m) = node.as_object() else {
        return Ok(node);
    };
    if let Some(alts) = alternatives(m) {
        let mut changed = false;
        let mut out = Vec::new();
        for a in &alts {
            let r = rewrite(a, path, depth + 1, paths, visits, consumer)?;
            changed |= &r != a;
            out.push(r);
        }
        if !changed {
            return Ok(node);
        }
        let mut kept = Map::new();
        for k in ["description", "title"] {
            if let Some(v) = m.get(k) {
                kept.insert(k.into(), v.clone());
            }
        }
        kept.insert("anyOf".into(), Value::Array(out));
        return Ok(Value::Object(kept));
    }
    if depth > 0
        && let Some(kind) = slot_kind(m)
    {
        if paths.get(path).is_some_and(At::decodable) {
            return Ok(string_form(m, kind));
        }
        let what = if m.contains_key(refs::CUT_MARK) {
            "a recursive value"
        } else {
            "a free-form object"
        };
        let path: Vec<&str> = path
            .split('/')
            .map(|segment| if segment == "~" { "[]" } else { segment })
            .collect();
        let path = path.join("/");
        return Err(format!(
            "the argument at {path} may be {what}, which {consumer} cannot describe, and \
             it also takes any string, so it cannot be sent as a JSON string either; use \
             format=openai or call it through tool_invoke"
        ));
    }
    let mut out = m.clone();
    if let Some(Value::Object(props)) = m.get("properties") {
        let mut converted = Map::new();
        for (name, p) in props {
            let at = child(path, name);
            converted.insert(
                name.clone(),
                rewrite(p, &at, depth + 1, paths, visits, consumer)?,
            );
        }
        out.insert("properties".into(), Value::Object(converted));
    }
    let items = format!("{path}{ITEMS}");
    for k in ["items", "prefixItems"] {
        match m.get(k) {
            Some(i @ Value::Object(_)) => {
                out.insert(
                    k.into(),
                    rewrite(i, &items, depth + 1, paths, visits, consumer)?,
                );
            }
            Some(Value::Array(list)) => {
                let mut converted = Vec::new();
                for i in list {
                    converted.push(rewrite(i, &items, depth + 1, paths, visits, consumer)?);
                }
                out.insert(k.into(), Value::Array(converted));
            }
            _ => {}
        }
    }
    Ok(Value::Object(out))
}

/// The string declaration standing for a slot.
fn string_form(m: &Map<String, Value>, kind: Kind) -> Value {
    let nullable = types_of_map(m).iter().any(|t| t == "null");
    let base = m
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty());
    let how = match kind {
        Kind::Object if m.contains_key(refs::CUT_MARK) => {
            "JSON-encoded: send a JSON object of that shape as a string; it is decoded \
             before the call"
                .to_owned()
        }
        Kind::Array => "JSON-encoded: send a JSON array (as a string), e.g. \"[]\"; it is \
                        decoded before the call"
            .to_owned(),
        Kind::Object => {
            let value = match m
                .get("additionalProperties")
                .map(types_of)
                .unwrap_or_default()
                .first()
                .map(String::as_str)
            {
                Some("integer" | "number") => "1",
                Some("boolean") => "true",
                Some("array") => "[\"value\"]",
                Some("object") => "{\"name\": \"value\"}",
                _ => "\"value\"",
            };
            format!(
                "JSON-encoded: send a JSON object (as a string), e.g. \"{{\\\"key\\\": \
                 {}}}\"; it is decoded before the call",
                value.replace('"', "\\\"")
            )
        }
    };
    let text = match base {
        Some(d) => format!("{d} ({how})"),
        None => format!("({how})"),
    };
    let mut out = Map::new();
    out.insert(
        "type".into(),
        if nullable {
            json!(["string", "null"])
        } else {
            json!("string")
        },
    );
    out.insert(
        "description".into(),
        json!(super::cap_to(&text, super::notes::MAX_NODE_DESCRIPTION)),
    );
    Value::Object(out)
}

/// Parses, in `arguments`, each string sent at a decodable path of the tool's input
/// schema (`input_schema`; module docs) into the object or array it holds.
pub fn decode(input_schema: Option<&Value>, arguments: &mut JsonObject) {
    // Only strings are ever decoded; a call without one is left as it is (and spares
    // inlining the schema).
    if !holds_string(arguments) {
        return;
    }
    let Some(source) = input_schema else {
        return;
    };
    if !may_hold_slots(source) {
        return;
    }
    let Ok(fixed) = root::object_root(&refs::inline(source)) else {
        return;
    };
    let paths = reach(&fixed.schema);
    if !paths.values().any(At::decodable) {
        return;
    }
    for (name, value) in arguments.iter_mut() {
        decode_value(&paths, &child("", name), value, 1);
    }
}

/// Whether `schema` may hold a slot at all: a reference (a cut comes from one) or an
/// object without declared properties somewhere. Most tools have neither, and are
/// spared inlining their schema on every call.
fn may_hold_slots(schema: &Value) -> bool {
    let mut pending = vec![schema];
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(m) => {
                if m.contains_key("$ref") || slot_kind(m).is_some() {
                    return true;
                }
                pending.extend(m.values());
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    false
}

fn holds_string(arguments: &JsonObject) -> bool {
    let mut pending: Vec<&Value> = arguments.values().collect();
    while let Some(value) = pending.pop() {
        match value {
            Value::String(_) => return true,
            Value::Object(o) => pending.extend(o.values()),
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    false
}

fn decode_value(paths: &BTreeMap<String, At>, path: &str, value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(text) => {
            let Some(at) = paths.get(path).filter(|a| a.decodable()) else {
                return;
            };
            if at
                .enumerated
                .iter()
                .any(|e| e.as_str() == Some(text.as_str()))
            {
                return;
            }
            if let Ok(parsed) = serde_json::from_str::<Value>(text) {
                let fits = at.kinds.iter().any(|k| match k {
                    Kind::Object => parsed.is_object(),
                    Kind::Array => parsed.is_array(),
                });
                if fits {
                    *value = parsed;
                }
            }
        }
        Value::Object(o) => {
            for (name, v) in o.iter_mut() {
                decode_value(paths, &child(path, name), v, depth + 1);
            }
        }
        Value::Array(items) => {
            let at = format!("{path}{ITEMS}");
            for v in items {
                decode_value(paths, &at, v, depth + 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition(schema: Value) -> JsonObject {
        json!({"name": "t", "inputSchema": schema})
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    fn object(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn free_form_maps_become_strings_and_decode_back() {
        let schema = json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                "labels": {"anyOf": [{"type": "object"}, {"type": "null"}]},
                "stripe": {"anyOf": [
                    {"type": "object", "additionalProperties": {"type": "string"}},
                    {"type": "string", "enum": [""]}
                ]},
                "items": {"type": "array", "items": {"type": "object", "additionalProperties": true}},
                "name": {"type": "string"},
                "closed": {"type": "object", "properties": {"a": {"type": "string"}}}
            }
        });
        let out = stringify(&schema, "strict mode").unwrap();
        assert_eq!(out["properties"]["metadata"]["type"], "string");
        assert!(
            out["properties"]["metadata"]["description"]
                .as_str()
                .unwrap()
                .contains("JSON object (as a string)")
        );
        assert_eq!(out["properties"]["labels"]["anyOf"][0]["type"], "string");
        assert_eq!(out["properties"]["items"]["items"]["type"], "string");
        assert_eq!(out["properties"]["closed"]["type"], "object");

        let def = definition(schema);
        let mut args = object(json!({
            "metadata": "{\"team\": \"a\"}",
            "labels": "{\"x\": 1}",
            "stripe": "",
            "items": ["{\"k\": [1]}", "not json"],
            "name": "{\"stays\": \"a string\"}",
            "closed": {"a": "{}"}
        }));
        decode(def.get("inputSchema"), &mut args);
        assert_eq!(
            Value::Object(args),
            json!({
                "metadata": {"team": "a"},
                "labels": {"x": 1},
                "stripe": "",
                "items": [{"k": [1]}, "not json"],
                "name": "{\"stays\": \"a string\"}",
                "closed": {"a": "{}"}
            })
        );
    }

    #[test]
    fn an_untyped_recursive_node_is_cut_as_an_object_and_decoded() {
        let schema = json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/node"}},
            "$defs": {"node": {"properties": {"name": {"type": "string"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}});
        let out = stringify(&refs::inline(&schema), "strict mode").unwrap();
        let kids = &out["properties"]["root"]["properties"]["kids"]["items"];
        assert_eq!(kids["type"], "string", "{kids}");
        assert!(kids["description"].as_str().unwrap().contains("recursive"));
        let mut args = object(json!({"root": {"name": "a", "kids": ["{\"name\": \"b\"}"]}}));
        decode(definition(schema).get("inputSchema"), &mut args);
        assert_eq!(args["root"]["kids"][0], json!({"name": "b"}));
    }

    #[test]
    fn a_name_with_a_slash_is_not_another_path() {
        let def = definition(json!({"type": "object", "properties": {
            "a/b": {"type": "string"},
            "a": {"type": "object", "properties": {"b": {"type": "object"}}}
        }}));
        let mut args = object(json!({"a/b": "{\"x\": 1}", "a": {"b": "{\"y\": 2}"}}));
        decode(def.get("inputSchema"), &mut args);
        assert_eq!(
            Value::Object(args),
            json!({"a/b": "{\"x\": 1}", "a": {"b": {"y": 2}}})
        );
    }

    #[test]
    fn a_string_of_the_wrong_json_type_is_left_for_validation() {
        let def = definition(json!({"type": "object", "properties": {"m": {"type": "object"}}}));
        let mut args = object(json!({"m": "[1, 2]"}));
        decode(def.get("inputSchema"), &mut args);
        assert_eq!(args["m"], "[1, 2]");
    }

    #[test]
    fn ambiguous_slots_and_open_roots_are_refused() {
        // An alternative that takes any string makes a string there ambiguous.
        let alt = json!({"type": "object", "properties": {"v": {"anyOf": [
            {"type": "object"}, {"type": "string"}
        ]}}});
        let e = stringify(&alt, "Gemini").unwrap_err();
        assert!(e.contains("/v") && e.contains("Gemini"), "{e}");
        let open = json!({"type": "object", "additionalProperties": true});
        assert!(stringify(&open, "strict mode").is_err());
        // A root without arguments is not free-form.
        let none = json!({"type": "object", "properties": {}});
        assert_eq!(stringify(&none, "strict mode").unwrap(), none);
    }
}
