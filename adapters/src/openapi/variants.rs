//! Bodies offered in several JSON media types. A PATCH often takes
//! `application/json-patch+json` (an array of operations), `merge-patch+json` and
//! `strategic-merge-patch+json` (objects): the media type follows the argument's shape
//! (an array is a JSON Patch, an object a merge patch where offered, else plain JSON),
//! and when the types mean different things the caller may name one (`content_type`).
//!
//! Specs often give a JSON Patch body an object schema (Kubernetes' opaque `Patch`):
//! evidently wrong, since RFC 6902 makes it an array, so the array is accepted and the
//! repair noted. A JSON Patch type under the schema of a plain JSON type, or one
//! declaring object properties, is an alias of plain JSON (ASP.NET lists
//! `json-patch+json` beside `application/json` for every body) and is read as such.

use serde_json::{Value, json};

use super::model::MediaChoice;

/// What a JSON media type means for the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meaning {
    Plain,
    JsonPatch,
    MergePatch,
    StrategicMerge,
}

fn essence(mt: &str) -> String {
    mt.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

fn meaning(mt: &str) -> Meaning {
    match essence(mt).as_str() {
        "application/json-patch+json" => Meaning::JsonPatch,
        "application/merge-patch+json" => Meaning::MergePatch,
        "application/strategic-merge-patch+json" => Meaning::StrategicMerge,
        _ => Meaning::Plain,
    }
}

/// RFC 6902, for JSON Patch bodies whose spec gives no array schema.
fn json_patch_schema() -> Value {
    json!({"type": "array",
        "description": "A JSON Patch (RFC 6902): operations applied in order",
        "items": {"type": "object", "properties": {
            "op": {"type": "string", "enum": ["add", "remove", "replace", "move", "copy", "test"]},
            "path": {"type": "string", "description": "JSON Pointer to the target"},
            "value": {"description": "The value (add, replace, test)"},
            "from": {"type": "string", "description": "JSON Pointer to the source (move, copy)"}},
            "required": ["op", "path"]}})
}

fn is_array_schema(s: &Value) -> bool {
    match s.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(a)) => a.iter().any(|t| t == "array"),
        _ => s.get("items").is_some() || s.get("prefixItems").is_some(),
    }
}

fn declares_properties(s: &Value) -> bool {
    s.get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty())
}

/// How a body offered in several JSON media types is read and sent.
#[derive(Debug)]
pub(super) struct Plan {
    /// Sent for an object, and the default.
    pub media_type: String,
    /// What the body argument accepts (both shapes when both are offered).
    pub schema: Value,
    /// The types a caller may name, when they differ in meaning; else empty.
    pub choices: Vec<MediaChoice>,
    pub repairs: Vec<String>,
}

/// The plan for `entries`: each offered JSON media type with its (inlined) schema,
/// in the spec's order.
pub(super) fn plan(entries: Vec<(String, Value)>) -> Plan {
    let mut repairs = Vec::new();
    // (media type, meaning, takes an array, schema)
    let mut read: Vec<(String, Meaning, bool, Value)> = Vec::new();
    // a JSON Patch type under the same schema as plain JSON is an alias of it
    let plain: Vec<Value> = entries
        .iter()
        .filter(|(mt, _)| meaning(mt) == Meaning::Plain)
        .map(|(_, s)| s.clone())
        .collect();
    for (mt, schema) in entries {
        if read.iter().any(|r| r.0 == mt) {
            continue;
        }
        let m = meaning(&mt);
        let alias = plain.contains(&schema) || declares_properties(&schema);
        let entry = match m {
            Meaning::JsonPatch if alias => (mt, Meaning::Plain, false, schema),
            Meaning::JsonPatch if is_array_schema(&schema) => (mt, m, true, schema),
            Meaning::JsonPatch => {
                repairs.push(format!(
                    "request body: {mt} is declared without an array schema; read as a JSON \
                     Patch (an array of operations, RFC 6902)"
                ));
                (mt, m, true, json_patch_schema())
            }
            _ => (mt, m, false, schema),
        };
        read.push(entry);
    }
    let object = read.iter().filter(|r| !r.2).min_by_key(|r| match r.1 {
        Meaning::MergePatch => 0,
        Meaning::Plain if essence(&r.0) == "application/json" => 1,
        Meaning::Plain => 2,
        _ => 3,
    });
    let array = read.iter().find(|r| r.2);
    let (media_type, schema) = match (object, array) {
        (Some(o), Some(a)) => (
            o.0.clone(),
            json!({"anyOf": [o.3, a.3],
                "description": format!(
                    "An object (sent as {}) or an array of JSON Patch operations (sent as {}); \
                     content_type names another type", o.0, a.0)}),
        ),
        (Some(o), None) => (o.0.clone(), o.3.clone()),
        (None, Some(a)) => (a.0.clone(), a.3.clone()),
        (None, None) => ("application/json".into(), json!({})),
    };
    let differ = read.iter().any(|r| r.1 != read[0].1);
    let choices = if differ {
        read.iter()
            .map(|r| MediaChoice {
                media_type: r.0.clone(),
                takes_array: r.2,
            })
            .collect()
    } else {
        vec![]
    };
    Plan {
        media_type,
        schema,
        choices,
        repairs,
    }
}

/// The schema of the `content_type` argument, when there is a choice to make.
pub(super) fn arg_schema(default: &str, choices: &[MediaChoice]) -> Option<Value> {
    if choices.is_empty() {
        return None;
    }
    let offered: Vec<&str> = choices.iter().map(|c| c.media_type.as_str()).collect();
    let follows = match choices.iter().find(|c| c.takes_array) {
        Some(a) => format!("an array goes as {}, an object as {default}", a.media_type),
        None => format!("the body goes as {default}"),
    };
    Some(json!({"type": "string", "enum": offered,
        "description": format!("The body's media type. Left out, {follows}")}))
}

/// The media type to send `value` as: the one `requested`, else the one its shape
/// calls for. `Err` when the requested type does not take that shape.
pub(super) fn choose(
    default: &str,
    choices: &[MediaChoice],
    value: &Value,
    requested: Option<&str>,
) -> Result<String, String> {
    if let Some(r) = requested {
        let Some(c) = choices.iter().find(|c| c.media_type == r) else {
            let offered: Vec<&str> = choices.iter().map(|c| c.media_type.as_str()).collect();
            return Err(format!("content_type '{r}' is not one of {offered:?}"));
        };
        if c.takes_array != value.is_array() {
            let wants = if c.takes_array {
                "an array of JSON Patch operations"
            } else {
                "an object"
            };
            return Err(format!("content_type '{r}' takes {wants}"));
        }
        return Ok(r.to_owned());
    }
    if value.is_array()
        && let Some(c) = choices.iter().find(|c| c.takes_array)
    {
        return Ok(c.media_type.clone());
    }
    Ok(default.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_style_patch_takes_both_shapes() {
        let opaque = json!({"type": "object", "description": "Patch"});
        let p = plan(vec![
            ("application/json-patch+json".into(), opaque.clone()),
            ("application/merge-patch+json".into(), opaque.clone()),
            (
                "application/strategic-merge-patch+json".into(),
                opaque.clone(),
            ),
        ]);
        assert_eq!(p.media_type, "application/merge-patch+json");
        assert_eq!(p.schema["anyOf"][0], opaque);
        assert_eq!(p.schema["anyOf"][1]["type"], "array");
        assert_eq!(p.choices.len(), 3);
        assert_eq!(p.repairs.len(), 1);
        let ch = |v: Value, r: Option<&str>| choose(&p.media_type, &p.choices, &v, r);
        assert_eq!(ch(json!([]), None).unwrap(), "application/json-patch+json");
        assert_eq!(ch(json!({}), None).unwrap(), "application/merge-patch+json");
        assert_eq!(
            ch(json!({}), Some("application/strategic-merge-patch+json")).unwrap(),
            "application/strategic-merge-patch+json"
        );
        assert!(ch(json!({}), Some("application/json-patch+json")).is_err());
    }

    #[test]
    fn aspnet_style_aliases_are_plain_json() {
        let obj = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let p = plan(vec![
            ("application/json-patch+json".into(), obj.clone()),
            ("application/json".into(), obj.clone()),
            ("text/json".into(), obj.clone()),
            ("application/*+json".into(), obj.clone()),
        ]);
        assert_eq!(p.media_type, "application/json");
        assert_eq!(p.schema, obj);
        assert!(p.choices.is_empty());
        assert!(p.repairs.is_empty());
        // a batch of items under both: plain JSON, arrays included
        let batch = json!({"type": "array", "items": obj});
        let p = plan(vec![
            ("application/json-patch+json".into(), batch.clone()),
            ("application/json".into(), batch.clone()),
        ]);
        assert_eq!(
            (p.media_type.as_str(), &p.schema),
            ("application/json", &batch)
        );
        assert!(p.choices.is_empty());
    }
}
