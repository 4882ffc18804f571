//! Inlining local `$ref`s, with recursion, depth and size bounded.
//!
//! A reference is replaced by a copy of its target (its sibling keywords win over the
//! target's). It is cut instead — replaced by a bare schema of the target's type whose
//! description says why — when it is already being expanded further up (recursion),
//! when more than [`MAX_REF_DEPTH`] references are nested, when the output has grown
//! past [`MAX_NODES`] schema nodes, or when it does not point into the document.
//! `$defs` / `definitions` are dropped from the result (nothing refers to them any
//! more). The walk knows which keywords hold schemas, so a property that happens to be
//! called `definitions` or `$ref` is left alone.

use serde_json::{Map, Value, json};

/// Deepest chain of nested references expanded.
pub const MAX_REF_DEPTH: usize = 12;
/// Schema nodes produced before further references are cut.
pub const MAX_NODES: usize = 20_000;
/// Deepest nesting walked at all (deeper subschemas are cut).
pub const MAX_NESTING: usize = 64;

/// Marks a schema standing for a reference that was not expanded.
pub const CUT_MARK: &str = "x-toolgate-cut";

/// Keywords whose value is a map of name -> schema.
pub(crate) const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];
/// Keywords whose value is one schema.
pub(crate) const SCHEMA_ONE: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
];
/// Keywords whose value is a list of schemas.
pub(crate) const SCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// `schema` with every local reference inlined or cut.
pub fn inline(schema: &Value) -> Value {
    let mut w = Walker {
        tuples: false,
        root: schema,
        inline: true,
        stack: Vec::new(),
        nodes: 0,
    };
    w.schema(schema, 0)
}

/// `schema` with its local references kept (and its `$defs`), except those that do
/// not resolve inside the document (dangling or external): those are cut, since a
/// consumer would reject the whole request over one of them.
///
/// Also rewrites a draft-04..07 tuple (`items: [..]`, `additionalItems`) into the 2020-12
/// form (`prefixItems`, `items`) unless the schema declares an older `$schema`: the
/// consumers read 2020-12, where an `items` array is invalid.
pub fn repair(schema: &Value) -> Value {
    let old_draft = schema
        .get("$schema")
        .and_then(Value::as_str)
        .is_some_and(|s| s.contains("draft-0"));
    let mut w = Walker {
        tuples: !old_draft,
        root: schema,
        inline: false,
        stack: Vec::new(),
        nodes: 0,
    };
    w.schema(schema, 0)
}

struct Walker<'a> {
    root: &'a Value,
    /// Inline resolvable references (else keep them).
    inline: bool,
    /// Rewrite `items` arrays as `prefixItems`.
    tuples: bool,
    /// References being expanded, outermost first.
    stack: Vec<String>,
    nodes: usize,
}

impl Walker<'_> {
    fn schema(&mut self, s: &Value, nesting: usize) -> Value {
        self.nodes += 1;
        let Some(m) = s.as_object() else {
            return s.clone();
        };
        if nesting > MAX_NESTING {
            return cut_marked(None, "schema nested too deeply; not expanded", self.inline);
        }
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            return self.reference(r, m, nesting);
        }
        let mut out = Map::new();
        for (k, v) in m {
            let k = k.as_str();
            if self.inline && (k == "$defs" || k == "definitions") {
                continue;
            }
            let nv = if SCHEMA_MAPS.contains(&k) {
                match v.as_object() {
                    Some(props) => Value::Object(
                        props
                            .iter()
                            .map(|(n, p)| (n.clone(), self.schema(p, nesting + 1)))
                            .collect(),
                    ),
                    None => v.clone(),
                }
            } else if SCHEMA_ONE.contains(&k) || (k == "items" && !v.is_array()) {
                self.schema(v, nesting + 1)
            } else if SCHEMA_LISTS.contains(&k) || (k == "items" && v.is_array()) {
                match v.as_array() {
                    Some(list) => {
                        Value::Array(list.iter().map(|b| self.schema(b, nesting + 1)).collect())
                    }
                    None => v.clone(),
                }
            } else {
                v.clone()
            };
            out.insert(k.to_owned(), nv);
        }
        if self.tuples && out.get("items").is_some_and(Value::is_array) {
            let tuple = out.remove("items").unwrap_or_default();
            if let Some(rest) = out.remove("additionalItems") {
                out.insert("items".into(), rest);
            }
            out.insert("prefixItems".into(), tuple);
        }
        Value::Object(out)
    }

    fn reference(&mut self, r: &str, site: &Map<String, Value>, nesting: usize) -> Value {
        let target = resolve(self.root, r);
        let name = r.rsplit('/').next().unwrap_or(r).to_owned();
        let Some(target) = target else {
            return with_siblings(
                cut_marked(None, &format!("reference {r} not resolved"), self.inline),
                site,
            );
        };
        if !self.inline {
            return Value::Object(site.clone());
        }
        let why = if self.stack.iter().any(|s| s == r) {
            Some(format!(
                "recursive: same shape as the enclosing {name}; not expanded further"
            ))
        } else if self.stack.len() >= MAX_REF_DEPTH {
            Some(format!("{name} nested too deeply; not expanded"))
        } else if self.nodes >= MAX_NODES {
            Some(format!("{name} not expanded, to keep the schema small"))
        } else {
            None
        };
        if let Some(why) = why {
            return with_siblings(cut_marked(Some(target), &why, true), site);
        }
        self.stack.push(r.to_owned());
        let expanded = self.schema(target, nesting + 1);
        self.stack.pop();
        // Sibling keywords of the reference (2019-09+) apply too; they win on conflict.
        let mut siblings = site.clone();
        siblings.remove("$ref");
        let siblings = self.schema(&Value::Object(siblings), nesting + 1);
        match expanded {
            Value::Object(mut e) => {
                if let Value::Object(s) = siblings {
                    e.extend(s);
                }
                Value::Object(e)
            }
            other => other,
        }
    }
}

/// A reference's target in `root`: `#` or a JSON pointer fragment.
fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let frag = r.strip_prefix('#')?;
    if frag.is_empty() {
        return Some(root);
    }
    let decoded = percent_decode(frag);
    root.pointer(&decoded)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// The stand-in for a reference that is not expanded: the target's type (declared or
/// implied, so the shape stays right) and a description saying why.
fn cut(target: Option<&Value>, why: &str) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(t) = target.and_then(shape_of) {
        out.insert("type".into(), t);
    }
    let base = target
        .and_then(|t| t.get("description"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty());
    let text = match base {
        Some(d) => format!("{d} ({why})"),
        None => format!("({why})"),
    };
    out.insert("description".into(), json!(super::cap_to(&text, 512)));
    out
}

/// The type a cut stands for: the target's declared type, or the one its keywords
/// imply (properties: an object; items: an array; alternatives that all agree).
fn shape_of(target: &Value) -> Option<Value> {
    if let Some(t) = target.get("type") {
        return Some(t.clone());
    }
    let m = target.as_object()?;
    if [
        "properties",
        "additionalProperties",
        "patternProperties",
        "required",
    ]
    .iter()
    .any(|k| m.contains_key(*k))
    {
        return Some(json!("object"));
    }
    if m.contains_key("items") || m.contains_key("prefixItems") {
        return Some(json!("array"));
    }
    // allOf: every branch applies; a referenced branch adds constraints, not a type.
    if let Some(Value::Array(all)) = m.get("allOf") {
        let shapes: Vec<Value> = all
            .iter()
            .filter(|a| a.get("$ref").is_none())
            .filter_map(shape_of)
            .collect();
        return shapes.first().cloned();
    }
    // anyOf/oneOf: one shape when every alternative but `null` has the same one.
    let alternatives: Vec<&Value> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let (nulls, values): (Vec<&Value>, Vec<&Value>) = alternatives
        .into_iter()
        .partition(|a| a.get("type") == Some(&json!("null")));
    let mut shapes = values.iter().map(|a| shape_of(a));
    let first = shapes.next()??;
    if !first.is_string() || !shapes.all(|s| s.as_ref() == Some(&first)) {
        return None;
    }
    Some(if nulls.is_empty() {
        first
    } else {
        json!([first, "null"])
    })
}

/// [`cut`], marked for the converters (which never copy the mark to an output): a
/// stand-in, not a free-form schema.
fn cut_marked(target: Option<&Value>, why: &str, mark: bool) -> Value {
    let mut out = cut(target, why);
    if mark {
        out.insert(CUT_MARK.into(), json!(true));
    }
    Value::Object(out)
}

/// A cut reference keeps its site's plain annotations (a sibling `description` wins).
fn with_siblings(mut cut: Value, site: &Map<String, Value>) -> Value {
    if let (Value::Object(c), Some(Value::String(d))) = (&mut cut, site.get("description")) {
        let why = c.get("description").and_then(Value::as_str).unwrap_or("");
        let marker = why
            .rfind(" (")
            .map(|i| &why[i + 1..])
            .unwrap_or(why)
            .to_owned();
        c.insert("description".into(), json!(format!("{d} {marker}")));
    }
    cut
}
