//! Input schemas read as the API evidently means them where the spec is wrong, so
//! validation is never stricter than the API. Two repairs, each noted for the import
//! report:
//!
//! - a `oneOf` whose branches overlap (`[integer, number]`, a nullable type beside
//!   `null`, two object shapes one value can satisfy) refuses exactly the values the
//!   API accepts under either branch: it becomes `anyOf`;
//! - a `required` entry naming no declared property cannot be satisfied by a caller
//!   who only knows the declared ones: it is dropped.
//!
//! Schemas here are already inlined (self-contained) and bounded in depth by the
//! inliner, so the walk recurses.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Keywords holding one subschema.
const ONE: [&str; 9] = [
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
];
/// Keywords holding a list of subschemas.
const LIST: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords holding a map of subschemas.
const MAP: [&str; 3] = ["properties", "patternProperties", "dependentSchemas"];

/// Repairs `schema` in place; each repair is described in `notes`, prefixed by `at`
/// (what the schema belongs to).
pub(super) fn relax(schema: &mut Value, at: &str, notes: &mut Vec<String>) {
    walk(
        schema,
        &mut String::new(),
        at,
        notes,
        Some(&BTreeSet::new()),
    );
}

/// `inherited`: the property names a combinator branch gets from the schema it is a
/// branch of (a branch's `required` may name its parent's properties); `None` when
/// they cannot be told.
fn walk(
    v: &mut Value,
    ptr: &mut String,
    at: &str,
    notes: &mut Vec<String>,
    inherited: Option<&BTreeSet<String>>,
) {
    let Value::Object(m) = v else { return };
    // the names in scope, worked out only where a `required` or a branch needs them
    let needed = m.contains_key("required")
        || ["allOf", "anyOf", "oneOf"]
            .iter()
            .any(|k| m.contains_key(*k));
    let mut names = if needed { inherited.cloned() } else { None };
    if let Some(n) = &mut names
        && declared(m, n).is_none()
    {
        names = None;
    }
    overlapping_one_of(m, ptr, at, notes);
    unknown_required(m, names.as_ref(), ptr, at, notes);
    let none = BTreeSet::new();
    let len = ptr.len();
    for (k, x) in m.iter_mut() {
        let k = k.as_str();
        if ONE.contains(&k) {
            ptr.push_str(&format!("/{k}"));
            walk(x, ptr, at, notes, Some(&none));
        } else if LIST.contains(&k) {
            // branches of a combinator see the properties around them
            let passed = if k == "prefixItems" {
                Some(&none)
            } else {
                names.as_ref()
            };
            if let Value::Array(a) = x {
                for (i, s) in a.iter_mut().enumerate() {
                    ptr.push_str(&format!("/{k}/{i}"));
                    walk(s, ptr, at, notes, passed);
                    ptr.truncate(len);
                }
            }
        } else if MAP.contains(&k)
            && let Value::Object(props) = x
        {
            for (name, s) in props.iter_mut() {
                let name = name.replace('~', "~0").replace('/', "~1");
                ptr.push_str(&format!("/{k}/{name}"));
                walk(s, ptr, at, notes, Some(&none));
                ptr.truncate(len);
            }
        }
        ptr.truncate(len);
    }
}

fn place(ptr: &str) -> String {
    if ptr.is_empty() {
        String::new()
    } else {
        format!(" at '{ptr}'")
    }
}

/// `oneOf` -> `anyOf` when two branches can accept the same value.
fn overlapping_one_of(m: &mut Map<String, Value>, ptr: &str, at: &str, notes: &mut Vec<String>) {
    let Some(Value::Array(branches)) = m.get("oneOf") else {
        return;
    };
    let object = m.get("type").and_then(Value::as_str) == Some("object");
    let pair = (0..branches.len()).find_map(|i| {
        (i + 1..branches.len())
            .find(|&j| overlap(&branches[i], &branches[j], object))
            .map(|j| (i, j))
    });
    let Some((i, j)) = pair else { return };
    let Some(Value::Array(branches)) = m.remove("oneOf") else {
        return;
    };
    let why = if is_cut(&branches[i]) || is_cut(&branches[j]) {
        "one was cut while inlining and accepts anything"
    } else {
        "they accept the same values"
    };
    let branches = Value::Array(branches);
    if m.contains_key("anyOf") {
        // both present: the old anyOf stays, the relaxed oneOf joins through allOf
        let mut wrapped = Map::new();
        wrapped.insert("anyOf".into(), branches);
        match m.entry("allOf").or_insert_with(|| Value::Array(vec![])) {
            Value::Array(all) => all.push(Value::Object(wrapped)),
            other => *other = Value::Array(vec![Value::Object(wrapped)]),
        }
    } else {
        m.insert("anyOf".into(), branches);
    }
    notes.push(format!(
        "{at}{}: oneOf branches {i} and {j} overlap ({why}); read as anyOf",
        place(ptr)
    ));
}

/// The JSON types a schema accepts; `None` for any type.
fn types_of(s: &Value) -> Option<Types> {
    const ALL: [&str; 7] = [
        "null", "boolean", "object", "array", "number", "string", "integer",
    ];
    let name = |t: &str| ALL.iter().copied().find(|x| *x == t);
    let of_value = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
    };
    let m = match s {
        Value::Bool(true) => return None,
        Value::Object(m) => m,
        _ => return Some(BTreeSet::new()),
    };
    match m.get("type") {
        Some(Value::String(t)) => return Some(name(t).into_iter().collect()),
        Some(Value::Array(a)) => {
            return Some(
                a.iter()
                    .filter_map(Value::as_str)
                    .filter_map(name)
                    .collect(),
            );
        }
        _ => {}
    }
    if let Some(c) = m.get("const") {
        return Some([of_value(c)].into());
    }
    if let Some(Value::Array(e)) = m.get("enum") {
        return Some(e.iter().map(of_value).collect());
    }
    None
}

type Types = BTreeSet<&'static str>;

fn types_overlap(a: &Types, b: &Types) -> bool {
    let widen = |s: &Types| {
        let mut s = s.clone();
        if s.contains("integer") {
            s.insert("number");
        }
        s
    };
    // an integer is a number: compare with integer widened on each side in turn
    !widen(a).is_disjoint(b) || !a.is_disjoint(&widen(b))
}

/// The values a schema allows by `const`/`enum`, when it lists them.
fn literals(s: &Value) -> Option<Vec<&Value>> {
    match (s.get("const"), s.get("enum")) {
        (Some(c), _) => Some(vec![c]),
        (None, Some(Value::Array(e))) => Some(e.iter().collect()),
        _ => None,
    }
}

fn disjoint_literals(a: &Value, b: &Value) -> bool {
    match (literals(a), literals(b)) {
        (Some(x), Some(y)) => !x.iter().any(|v| y.contains(v)),
        _ => false,
    }
}

fn required_of(s: &Value) -> Vec<&str> {
    s.get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether object schemas `a` and `b` tell their values apart: a property both limit
/// to disjoint literals that one of them requires (a discriminator), or one `a`
/// requires that `b` forbids.
fn objects_distinct(a: &Value, b: &Value) -> bool {
    let prop = |s: &'_ Value, k: &str| s.get("properties").and_then(|p| p.get(k)).cloned();
    let (ra, rb) = (required_of(a), required_of(b));
    let discriminated = ra.iter().chain(&rb).any(
        |k| matches!((prop(a, k), prop(b, k)), (Some(x), Some(y)) if disjoint_literals(&x, &y)),
    );
    let forbids = |req: &[&str], other: &Value| {
        other.get("additionalProperties") == Some(&Value::Bool(false))
            && req.iter().any(|k| prop(other, k).is_none())
    };
    discriminated || forbids(&ra, b) || forbids(&rb, a)
}

/// Whether some value could be valid under both branches (conservatively: yes unless
/// their types, literals or object shapes tell them apart). `object`: the schema they
/// are branches of takes objects only.
fn overlap(a: &Value, b: &Value, object: bool) -> bool {
    if disjoint_literals(a, b) {
        return false;
    }
    let only_object = |t: &Option<Types>| match t {
        Some(t) => (t.len() == 1 || object) && t.contains("object"),
        None => object,
    };
    let (ta, tb) = (types_of(a), types_of(b));
    if let (Some(x), Some(y)) = (&ta, &tb)
        && !types_overlap(x, y)
    {
        return false;
    }
    if only_object(&ta) && only_object(&tb) {
        return !objects_distinct(a, b);
    }
    true
}

/// A schema the inliner cut (a cycle, depth or size limit): it accepts anything.
fn is_cut(s: &Value) -> bool {
    s.as_object().is_some_and(cut)
}

fn cut(m: &Map<String, Value>) -> bool {
    m.get("$comment")
        .and_then(Value::as_str)
        .is_some_and(|c| c.starts_with("cut:"))
}

/// The property names `m` declares, itself or through its combinator branches;
/// `None` when that cannot be told (a branch was cut while inlining, or property
/// names are open by pattern).
fn declared(m: &Map<String, Value>, out: &mut BTreeSet<String>) -> Option<()> {
    if m.contains_key("patternProperties") || cut(m) {
        return None;
    }
    if let Some(Value::Object(p)) = m.get("properties") {
        out.extend(p.keys().cloned());
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(a)) = m.get(k) {
            for s in a {
                if let Value::Object(sm) = s {
                    declared(sm, out)?;
                }
            }
        }
    }
    Some(())
}

/// Drops `required` names no property declares (when the schema, or the one it is a
/// branch of, declares any).
fn unknown_required(
    m: &mut Map<String, Value>,
    names: Option<&BTreeSet<String>>,
    ptr: &str,
    at: &str,
    notes: &mut Vec<String>,
) {
    let Some(names) = names.filter(|n| !n.is_empty()) else {
        return;
    };
    let Some(Value::Array(required)) = m.get_mut("required") else {
        return;
    };
    let mut dropped = Vec::new();
    required.retain(|r| {
        let known = r.as_str().is_some_and(|r| names.contains(r));
        if !known {
            dropped.push(r.as_str().unwrap_or("?").to_owned());
        }
        known
    });
    if required.is_empty() {
        m.remove("required");
    }
    for name in dropped {
        notes.push(format!(
            "{at}{}: 'required' names '{name}', which is no property; dropped",
            place(ptr)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn relaxed(mut v: Value) -> (Value, Vec<String>) {
        let mut notes = Vec::new();
        relax(&mut v, "body", &mut notes);
        (v, notes)
    }

    #[test]
    fn overlapping_branches_become_any_of() {
        let (v, notes) = relaxed(json!({"properties": {"n": {"oneOf": [
            {"type": "integer"}, {"type": "number"}]}}}));
        assert!(v["properties"]["n"].get("oneOf").is_none());
        assert_eq!(v["properties"]["n"]["anyOf"][1], json!({"type": "number"}));
        assert_eq!(
            notes,
            [
                "body at '/properties/n': oneOf branches 0 and 1 overlap (they accept the same values); read as anyOf"
            ]
        );
        let (_, notes) =
            relaxed(json!({"oneOf": [{"type": ["string", "null"]}, {"type": "null"}]}));
        assert_eq!(notes.len(), 1);
        let (_, notes) = relaxed(json!({"oneOf": [
            {"type": "object", "properties": {"a": {}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {}}, "required": ["b"]}]}));
        assert_eq!(notes.len(), 1, "{{a, b}} is valid under both");
    }

    #[test]
    fn distinct_branches_stay_one_of() {
        for v in [
            json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}),
            json!({"oneOf": [{"type": "string"}, {"type": "null"}]}),
            json!({"oneOf": [{"const": "a"}, {"enum": ["b", "c"]}]}),
            json!({"oneOf": [
                {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"]},
                {"type": "object", "properties": {"kind": {"const": "dog"}}, "required": ["kind"]}]}),
            json!({"type": "object", "properties": {"conclusion": {}}, "oneOf": [
                {"properties": {"status": {"enum": ["completed"]}}, "required": ["status", "conclusion"]},
                {"properties": {"status": {"enum": ["queued", "in_progress"]}}}]}),
            json!({"oneOf": [
                {"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": false},
                {"type": "object", "properties": {"b": {}}, "required": ["b"], "additionalProperties": false}]}),
        ] {
            let (out, notes) = relaxed(v.clone());
            assert_eq!(out, v);
            assert!(notes.is_empty(), "{notes:?}");
        }
    }

    #[test]
    fn required_names_without_a_property_are_dropped() {
        let (v, notes) = relaxed(json!({"type": "object",
            "properties": {"parent": {"type": "object", "properties": {"id": {}},
                                      "required": ["id", "ghost"]}},
            "required": ["parent"]}));
        assert_eq!(v["properties"]["parent"]["required"], json!(["id"]));
        assert_eq!(v["required"], json!(["parent"]));
        assert_eq!(
            notes,
            [
                "body at '/properties/parent': 'required' names 'ghost', which is no property; dropped"
            ]
        );
        // declared through allOf: kept; nothing declared at all, or cut: left alone
        for v in [
            json!({"allOf": [{"properties": {"a": {}}}], "required": ["a"]}),
            json!({"type": "object", "required": ["a"]}),
            json!({"allOf": [{"$comment": "cut: recursive", "description": "x"}],
                   "properties": {"b": {}}, "required": ["a"]}),
        ] {
            let (out, notes) = relaxed(v.clone());
            assert_eq!(out, v);
            assert!(notes.is_empty(), "{notes:?}");
        }
    }
}
