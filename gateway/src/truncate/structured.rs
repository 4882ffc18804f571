//! Shrinking `structuredContent` so that it still validates against the tool's
//! `outputSchema`: clients such as the official Python SDK reject a result whose
//! structured part is missing or does not match.
//!
//! Only cuts that keep a value's type are made: arrays get shorter (never below the
//! schema's `minItems`, elements unchanged and of the same type), then properties the
//! schema marks optional are removed, largest first. Every cut is listed (JSON
//! pointer, what happened) for the result's `_meta`. The outcome is checked against the
//! schema; when no such cut fits, the caller answers an error result instead.

use serde_json::{Map, Value, json};

use super::{Encoding, count_till_limit};

/// Binary-search rounds for the fraction of every array that is kept.
const ROUNDS: usize = 16;
/// `$ref` hops followed while resolving one schema location.
const MAX_REF_HOPS: usize = 16;
/// Deepest value walked (deeper values are left as they are).
const MAX_DEPTH: usize = 64;

/// A `structuredContent` that fits, and what was cut to make it fit.
pub(super) struct Shrunk {
    pub value: Value,
    /// `{"path", "kept", "of"}` for a shortened array, `{"path", "removed": true}`
    /// for a removed optional property.
    pub cuts: Vec<Value>,
}

/// Whether `value` fits `max_bytes` (compact JSON) and `max_tokens`.
pub(super) fn fits(value: &Value, max_bytes: usize, max_tokens: usize, enc: Encoding) -> bool {
    let Ok(text) = serde_json::to_string(value) else {
        return false;
    };
    text.len() <= max_bytes && count_till_limit(&text, enc, max_tokens).is_some()
}

/// Shrinks `value` to fit, valid for `schema` when one is given. `Err` says why no
/// valid shrink fits.
pub(super) fn shrink(
    value: &Value,
    schema: Option<&Value>,
    max_bytes: usize,
    max_tokens: usize,
    enc: Encoding,
) -> Result<Shrunk, String> {
    let fits = |v: &Value| fits(v, max_bytes, max_tokens, enc);
    let walk = Walk {
        root: schema.unwrap_or(&Value::Bool(true)),
    };
    let schema_root = schema.unwrap_or(&Value::Bool(true));

    // 1. Shorter arrays: the largest fraction of every array that fits.
    let mut lo = 0.0f64;
    let mut hi = 1.0f64;
    let mut best: Option<(Value, Vec<Value>)> = None;
    let (at_zero, cuts) = walk.shorten(value, Some(schema_root), 0.0, "", 0);
    if fits(&at_zero) {
        best = Some((at_zero, cuts));
        for _ in 0..ROUNDS {
            let mid = (lo + hi) / 2.0;
            let (candidate, cuts) = walk.shorten(value, Some(schema_root), mid, "", 0);
            if fits(&candidate) {
                lo = mid;
                best = Some((candidate, cuts));
            } else {
                hi = mid;
            }
        }
    }
    let (shrunk, mut cuts) = match best {
        Some(best) => best,
        None => {
            // 2. Arrays at their shortest and still too large: remove optional
            // properties, largest first, until it fits.
            let (mut candidate, mut cuts) = walk.shorten(value, Some(schema_root), 0.0, "", 0);
            let mut optional = Vec::new();
            walk.optional_properties(&candidate, Some(schema_root), "", 0, &mut optional);
            optional.sort_by_key(|o| std::cmp::Reverse(o.1));
            let mut fitted = false;
            for (pointer, _) in optional {
                if remove_at(&mut candidate, &pointer) {
                    cuts.push(json!({"path": pointer, "removed": true}));
                }
                if fits(&candidate) {
                    fitted = true;
                    break;
                }
            }
            if !fitted {
                return Err(format!(
                    "its structured content does not fit {max_bytes} bytes and {max_tokens} \
                     tokens even with every array at the shortest its output schema allows \
                     and every optional property removed"
                ));
            }
            (candidate, cuts)
        }
    };
    if let Some(schema) = schema {
        match jsonschema::validator_for(schema) {
            Ok(validator) => {
                if let Some(error) = validator.iter_errors(&shrunk).next() {
                    return Err(format!(
                        "its structured content, shortened to fit, no longer matches the \
                         tool's output schema (at {}: {error})",
                        error.instance_path()
                    ));
                }
            }
            Err(error) => {
                // The schema itself is broken: clients cannot validate against it
                // either. The cuts made keep every type, so the value goes on.
                tracing::debug!(%error, "outputSchema does not compile; shrunk value unchecked");
            }
        }
    }
    cuts.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    Ok(Shrunk {
        value: shrunk,
        cuts,
    })
}

/// Schema lookups for one value walk (`root` is the whole schema, for `$ref`).
struct Walk<'a> {
    root: &'a Value,
}

impl<'a> Walk<'a> {
    /// `schema` with local `$ref`s followed (`#/…` only; anything else is unknown).
    fn resolve(&self, schema: Option<&'a Value>) -> Option<&'a Value> {
        let mut schema = schema?;
        for _ in 0..MAX_REF_HOPS {
            let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
                return Some(schema);
            };
            let pointer = reference.strip_prefix('#')?;
            schema = self.root.pointer(pointer)?;
        }
        None
    }

    /// Whether `schema` combines others at this level (then what it requires of a
    /// property is not known here, and nothing is removed).
    fn combines(schema: &Value) -> bool {
        [
            "anyOf",
            "oneOf",
            "allOf",
            "if",
            "not",
            "dependentRequired",
            "dependentSchemas",
        ]
        .iter()
        .any(|k| schema.get(k).is_some())
    }

    fn property(&self, schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
        let schema = self.resolve(schema)?;
        schema
            .get("properties")
            .and_then(|p| p.get(key))
            .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
    }

    fn item(&self, schema: Option<&'a Value>, index: usize) -> Option<&'a Value> {
        let schema = self.resolve(schema)?;
        if let Some(item) = schema
            .get("prefixItems")
            .and_then(Value::as_array)
            .and_then(|prefix| prefix.get(index))
        {
            return Some(item);
        }
        schema.get("items").filter(|i| i.is_object())
    }

    fn min_items(&self, schema: Option<&'a Value>) -> usize {
        self.resolve(schema)
            .and_then(|s| s.get("minItems"))
            .and_then(Value::as_u64)
            .map_or(0, |n| n as usize)
    }

    /// A copy of `value` with every array cut to `fraction` of its length (rounded
    /// up, at least `minItems`, at least one when it had any and `fraction > 0`).
    fn shorten(
        &self,
        value: &Value,
        schema: Option<&'a Value>,
        fraction: f64,
        pointer: &str,
        depth: usize,
    ) -> (Value, Vec<Value>) {
        let mut cuts = Vec::new();
        let value = self.shorten_into(value, schema, fraction, pointer, depth, &mut cuts);
        (value, cuts)
    }

    fn shorten_into(
        &self,
        value: &Value,
        schema: Option<&'a Value>,
        fraction: f64,
        pointer: &str,
        depth: usize,
        cuts: &mut Vec<Value>,
    ) -> Value {
        if depth >= MAX_DEPTH {
            return value.clone();
        }
        match value {
            Value::Array(items) => {
                let wanted = (items.len() as f64 * fraction).ceil() as usize;
                let keep = wanted
                    .max(self.min_items(schema))
                    .max(usize::from(fraction > 0.0 && !items.is_empty()))
                    .min(items.len());
                if keep < items.len() {
                    cuts.push(
                        json!({"path": pointer_or_root(pointer), "kept": keep, "of": items.len()}),
                    );
                }
                Value::Array(
                    items
                        .iter()
                        .take(keep)
                        .enumerate()
                        .map(|(i, item)| {
                            let at = format!("{pointer}/{i}");
                            self.shorten_into(
                                item,
                                self.item(schema, i),
                                fraction,
                                &at,
                                depth + 1,
                                cuts,
                            )
                        })
                        .collect(),
                )
            }
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(key, member)| {
                        let at = format!("{pointer}/{}", escape(key));
                        let member = self.shorten_into(
                            member,
                            self.property(schema, key),
                            fraction,
                            &at,
                            depth + 1,
                            cuts,
                        );
                        (key.clone(), member)
                    })
                    .collect::<Map<String, Value>>(),
            ),
            _ => value.clone(),
        }
    }

    /// The properties of `value` its schema says are optional, with their sizes.
    fn optional_properties(
        &self,
        value: &Value,
        schema: Option<&'a Value>,
        pointer: &str,
        depth: usize,
        out: &mut Vec<(String, usize)>,
    ) {
        if depth >= MAX_DEPTH {
            return;
        }
        match value {
            Value::Object(members) => {
                let resolved = self.resolve(schema);
                let required: Option<Vec<&str>> = resolved
                    .filter(|s| s.is_object() && !Self::combines(s))
                    .map(|s| {
                        s.get("required")
                            .and_then(Value::as_array)
                            .map(|r| r.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default()
                    });
                for (key, member) in members {
                    let at = format!("{pointer}/{}", escape(key));
                    if let Some(required) = &required
                        && !required.contains(&key.as_str())
                    {
                        let size = serde_json::to_string(member).map_or(0, |s| s.len());
                        out.push((at.clone(), size));
                    }
                    self.optional_properties(
                        member,
                        self.property(schema, key),
                        &at,
                        depth + 1,
                        out,
                    );
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let at = format!("{pointer}/{i}");
                    self.optional_properties(item, self.item(schema, i), &at, depth + 1, out);
                }
            }
            _ => {}
        }
    }
}

fn pointer_or_root(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}

/// A key as a JSON pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Removes the member at `pointer` (its parent must be an object); false when absent.
fn remove_at(value: &mut Value, pointer: &str) -> bool {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return false;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(members)) => members.remove(&key).is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "rows": {"type": "array", "minItems": 2, "items": {"$ref": "#/$defs/row"}},
                "notes": {"type": "string"},
                "total": {"type": "integer"}
            },
            "required": ["rows", "total"],
            "$defs": {"row": {"type": "object",
                "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["id"]}}
        })
    }

    fn rows(n: usize) -> Value {
        json!({
            "rows": (0..n).map(|i| json!({"id": i, "tags": ["a", "b", "c"]})).collect::<Vec<_>>(),
            "total": n,
        })
    }

    #[test]
    fn arrays_get_shorter_and_stay_valid() {
        let schema = schema();
        let value = rows(2_000);
        let shrunk = shrink(&value, Some(&schema), 4_096, 100_000, Encoding::O200kBase)
            .unwrap_or_else(|e| panic!("{e}"));
        let text = serde_json::to_string(&shrunk.value).unwrap();
        assert!(text.len() <= 4_096, "{}", text.len());
        assert!(jsonschema::is_valid(&schema, &shrunk.value));
        let kept = shrunk.value["rows"].as_array().unwrap().len();
        assert!(kept > 10 && kept < 2_000, "{kept}");
        assert!(
            shrunk.value["rows"]
                .as_array()
                .unwrap()
                .iter()
                .all(Value::is_object)
        );
        assert!(
            shrunk
                .cuts
                .iter()
                .any(|c| c["path"] == "/rows" && c["of"] == 2_000),
            "{:?}",
            shrunk.cuts
        );
    }

    #[test]
    fn optional_properties_go_when_arrays_are_not_enough() {
        let schema = schema();
        let mut value = rows(2);
        value["notes"] = json!("x".repeat(10_000));
        let shrunk = shrink(&value, Some(&schema), 1_024, 100_000, Encoding::O200kBase)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(shrunk.value.get("notes").is_none());
        assert_eq!(
            shrunk.value["rows"].as_array().unwrap().len(),
            2,
            "minItems kept"
        );
        assert!(
            shrunk
                .cuts
                .iter()
                .any(|c| c["path"] == "/notes" && c["removed"] == true)
        );
    }

    #[test]
    fn impossible_says_why() {
        let schema = schema();
        let mut value = rows(2);
        value["rows"][0]["id"] = json!(1);
        let error = shrink(&value, Some(&schema), 10, 100_000, Encoding::O200kBase).err();
        assert!(error.is_some_and(|e| e.contains("does not fit")));
    }
}
