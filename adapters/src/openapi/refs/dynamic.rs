//! Resolving the dynamic references of JSON Schema 2019-09 (`$recursiveRef` with
//! `$recursiveAnchor`) and 2020-12 (`$dynamicRef` with `$dynamicAnchor`) against the
//! dynamic scope of the inliner: the schemas entered through references on the way to
//! the reference, outermost first. Tool schemas are self-contained copies, so these
//! cannot be left in them (there `#` means the whole tool input); the inliner expands
//! what they resolve to like any `$ref`, cycles and bounds included.

use serde_json::Value;

use super::Refs;

/// Most nodes searched for an anchor in one schema (a spec's size is its author's choice).
const MAX_SEARCH: usize = 100_000;

/// One entry of the dynamic scope: document, schema, and a name to describe it by.
pub(super) type Scope<'a> = (usize, &'a Value, String);

/// The schema `keyword` (`$recursiveRef` or `$dynamicRef`) with value `r`, met in
/// document `doc` within `scope`, points to: its document, the schema, and a name.
pub(super) fn resolve<'a>(
    refs: &Refs<'a>,
    scope: &[Scope<'a>],
    doc: usize,
    keyword: &str,
    r: &str,
) -> Option<(usize, &'a Value, String)> {
    let (doc_part, frag) = r.split_once('#').unwrap_or((r, ""));
    let plain_ref = || {
        let name = r.rsplit('/').next().unwrap_or(r).to_owned();
        refs.lookup(doc, r).ok().map(|(d, v)| (d, v, name))
    };
    if keyword == "$recursiveRef" {
        if r != "#" {
            return plain_ref();
        }
        // `#` is the current schema resource: the innermost schema entered; when that
        // one says `$recursiveAnchor: true`, the outermost in scope that says so too
        let current = scope.last()?;
        if !recursive_anchor(current.1) {
            return Some(current.clone());
        }
        return scope.iter().find(|s| recursive_anchor(s.1)).cloned();
    }
    // `$dynamicRef` to a JSON pointer (or a whole document) is a plain `$ref`
    if frag.is_empty() || frag.starts_with('/') {
        return plain_ref();
    }
    let initial = if doc_part.is_empty() {
        let (cdoc, current, _) = scope.last()?;
        find_anchor(current, frag, true)
            .map(|v| (*cdoc, v))
            .or_else(|| {
                let root = &refs.docs.docs[*cdoc].root;
                find_anchor(root, frag, true).map(|v| (*cdoc, v))
            })
    } else {
        let tdoc = refs.docs.doc_for(doc, r).ok()?;
        find_anchor(&refs.docs.docs[tdoc].root, frag, true).map(|v| (tdoc, v))
    }?;
    let name = frag.to_owned();
    // only a `$dynamicAnchor` makes the reference dynamic: the outermost schema in
    // scope that declares the same anchor wins
    if initial.1.get("$dynamicAnchor").and_then(Value::as_str) == Some(frag) {
        for (sdoc, s, _) in scope {
            if let Some(v) = find_anchor(s, frag, false) {
                return Some((*sdoc, v, name));
            }
        }
    }
    Some((initial.0, initial.1, name))
}

fn recursive_anchor(v: &Value) -> bool {
    v.get("$recursiveAnchor").and_then(Value::as_bool) == Some(true)
}

/// The subschema of `root` declaring `$dynamicAnchor` `name` (or `$anchor`, with
/// `plain`), searched breadth-first without following references or entering data.
fn find_anchor<'a>(root: &'a Value, name: &str, plain: bool) -> Option<&'a Value> {
    let mut queue = std::collections::VecDeque::from([root]);
    let mut seen = 0;
    while let Some(v) = queue.pop_front() {
        seen += 1;
        if seen > MAX_SEARCH {
            return None;
        }
        match v {
            Value::Object(m) => {
                let declares = |k: &str| m.get(k).and_then(Value::as_str) == Some(name);
                if declares("$dynamicAnchor") || (plain && declares("$anchor")) {
                    return Some(v);
                }
                for (k, x) in m {
                    let data = matches!(
                        k.as_str(),
                        "example" | "examples" | "default" | "enum" | "const"
                    ) || k.starts_with("x-");
                    if !data && (x.is_object() || x.is_array()) {
                        queue.push_back(x);
                    }
                }
            }
            Value::Array(a) => queue.extend(a.iter().filter(|x| x.is_object() || x.is_array())),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::super::load::{Document, Documents};
    use super::super::{Direction, Inliner};

    /// The inlined input schema of `components/schemas/<name>` in a document whose
    /// schemas are `schemas`, and the notes left for the import report.
    fn inline(schemas: Value, name: &str) -> (Value, Vec<String>) {
        let mut docs = Documents::default();
        docs.docs.push(Document {
            base: None,
            root: json!({"components": {"schemas": schemas}}),
        });
        let root = json!({"$ref": format!("#/components/schemas/{name}")});
        let mut inliner = Inliner::new(&docs, Direction::Input, 16, 10_000);
        let out = inliner.schema(0, &root).unwrap();
        (out, inliner.notes)
    }

    #[test]
    fn recursive_ref_without_an_anchor_is_the_current_schema() {
        // Inner has no `$recursiveAnchor`: `#` is Inner itself, whatever encloses it
        let (out, notes) = inline(
            json!({
                "Outer": {"$recursiveAnchor": true, "type": "object",
                          "properties": {"inner": {"$ref": "#/components/schemas/Inner"}}},
                "Inner": {"type": "object", "properties": {
                    "n": {"type": "integer"},
                    "next": {"$recursiveRef": "#"}}}
            }),
            "Outer",
        );
        let next = &out["properties"]["inner"]["properties"]["next"];
        assert_eq!(
            next["description"],
            "A Inner (recursive: same shape as the enclosing Inner)"
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
    }

    #[test]
    fn dynamic_ref_forms_that_are_plain_refs() {
        let (out, notes) = inline(
            json!({
                "List": {"type": "object", "properties": {
                    "byPointer": {"$dynamicRef": "#/components/schemas/Item"},
                    // an `$anchor` (not dynamic) is not overridden by an outer scope
                    "byAnchor": {"$dynamicRef": "#plain"}}},
                "Item": {"$anchor": "plain", "type": "string"},
                "Other": {"$dynamicAnchor": "plain", "type": "integer"}
            }),
            "List",
        );
        assert_eq!(out["properties"]["byPointer"], json!({"type": "string"}));
        assert_eq!(out["properties"]["byAnchor"], json!({"type": "string"}));
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn self_recursion_is_cut_without_running_away() {
        let (out, _) = inline(
            json!({"Loop": {"$dynamicAnchor": "me", "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"$dynamicRef": "#me"}}
            ]}}),
            "Loop",
        );
        let text = out.to_string();
        assert!(!text.contains("\"$dynamicRef\""), "{text}");
        jsonschema::validator_for(&out).unwrap();
        assert!(jsonschema::meta::is_valid(&out));
    }
}
