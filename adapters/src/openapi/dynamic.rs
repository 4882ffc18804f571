//! Resolving the dynamic references of JSON Schema 2019-09 (`$recursiveRef` with
//! `$recursiveAnchor`) and 2020-12 (`$dynamicRef` with `$dynamicAnchor`) against the
//! dynamic scope of the inliner: the schemas entered through references on the way to
//! the reference, outermost first. Tool schemas are self-contained copies, so these
//! cannot be left in them (there `#` means the whole tool input); the inliner expands
//! what they resolve to like any `$ref`, cycles and bounds included.

use serde_json::Value;

use super::refs::Refs;

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
