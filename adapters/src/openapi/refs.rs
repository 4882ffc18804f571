//! `$ref` resolution over the loaded documents.
//!
//! Three services: [`check_refs`] proves up front that every reference of every document
//! points somewhere (an error names the JSON pointer of the bad `$ref`); [`Refs::deref`]
//! follows reference chains to parameters, bodies, responses and path items; and
//! [`Inliner`] turns a schema into a self-contained one (tool schemas cannot point into
//! the spec) while normalizing it. The inliner is cycle-safe: a reference already being
//! expanded, one nested deeper than a bound, or one past a size budget is replaced by
//! a permissive schema marked with a `$comment` saying it was cut. It recurses only as
//! deep as the bound, so no spec can overflow the stack.

use serde_json::{Map, Value, json};

use super::load::{Documents, LoadError, is_data};
use super::normalize::normalize_schema_node;

mod dynamic;

/// Longest `$ref` chain followed (`a -> b -> c`) before giving up.
const MAX_CHAIN: usize = 32;
/// Deepest nesting of plain (non-reference) schema keywords walked.
const MAX_NESTING: usize = 64;

/// Reference lookups over a set of documents.
pub(super) struct Refs<'a> {
    pub docs: &'a Documents,
}

fn decode_fragment(frag: &str) -> String {
    percent_encoding::percent_decode_str(frag)
        .decode_utf8_lossy()
        .into_owned()
}

impl<'a> Refs<'a> {
    /// The target of `reference` seen from document `doc`, and the document it is in.
    pub(super) fn lookup(&self, doc: usize, reference: &str) -> Result<(usize, &'a Value), String> {
        let target = self.docs.doc_for(doc, reference)?;
        let frag = reference.split_once('#').map(|(_, f)| f).unwrap_or("");
        let frag = decode_fragment(frag);
        let root = &self.docs.docs[target].root;
        let found = if frag.is_empty() {
            Some(root)
        } else {
            root.pointer(&frag)
        };
        found
            .map(|v| (target, v))
            .ok_or_else(|| format!("$ref '{reference}' points to nothing"))
    }

    /// Follows `$ref`s until a non-reference object.
    pub(super) fn deref(&self, doc: usize, v: &'a Value) -> Result<(usize, &'a Value), String> {
        let (mut doc, mut cur) = (doc, v);
        for _ in 0..MAX_CHAIN {
            match cur.get("$ref").and_then(Value::as_str) {
                Some(r) => (doc, cur) = self.lookup(doc, r)?,
                None => return Ok((doc, cur)),
            }
        }
        Err(format!("$ref chain longer than {MAX_CHAIN} (a cycle?)"))
    }
}

/// Checks that every `$ref` in every document resolves.
pub(super) fn check_refs(docs: &Documents) -> Result<(), LoadError> {
    let refs = Refs { docs };
    let mut path = Vec::new();
    for (i, d) in docs.docs.iter().enumerate() {
        walk_refs(&refs, i, &d.root, &mut path).map_err(|(ptr, detail)| {
            let where_ = if i == 0 {
                ptr
            } else {
                format!(
                    "{ptr} (in {})",
                    d.base.as_ref().map(|u| u.as_str()).unwrap_or("?")
                )
            };
            LoadError::invalid(&where_, detail)
        })?;
    }
    Ok(())
}

fn walk_refs(
    refs: &Refs,
    doc: usize,
    v: &Value,
    path: &mut Vec<String>,
) -> Result<(), (String, String)> {
    let render = |path: &Vec<String>| {
        path.iter()
            .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
            .collect::<String>()
    };
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref") {
                // `$ref` as a property *name* inside `properties` is legal data
                let is_property_map = path.last().is_some_and(|p| p == "properties");
                if !is_property_map {
                    let Some(r) = r.as_str() else {
                        return Err((render(path), "$ref must be a string".into()));
                    };
                    if let Err(e) = refs.lookup(doc, r) {
                        path.push("$ref".into());
                        let p = render(path);
                        path.pop();
                        return Err((p, e));
                    }
                }
            }
            if path.len() > 200 {
                return Err((render(path), "the document nests too deeply".into()));
            }
            for (k, x) in m {
                let extension =
                    k.starts_with("x-") && path.last().is_none_or(|p| p != "properties");
                if (x.is_object() || x.is_array()) && !extension && !is_data(path, k, x) {
                    path.push(k.clone());
                    walk_refs(refs, doc, x, path)?;
                    path.pop();
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                if x.is_object() || x.is_array() {
                    path.push(i.to_string());
                    walk_refs(refs, doc, x, path)?;
                    path.pop();
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether schemas are for arguments (input) or results (output): `readOnly` properties
/// are dropped from input schemas, `writeOnly` ones from output schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    Input,
    Output,
}

/// Builds self-contained, normalized schemas.
pub(super) struct Inliner<'a> {
    refs: Refs<'a>,
    direction: Direction,
    max_ref_depth: usize,
    budget: usize,
    used: usize,
    /// The references being expanded, by target identity (cycle detection).
    stack: Vec<*const Value>,
    /// The dynamic scope: the schemas entered through references (and the root), outermost
    /// first, where `$recursiveRef` and `$dynamicRef` look for their anchors.
    scope: Vec<dynamic::Scope<'a>>,
    /// How many references were cut (cycles, depth or budget).
    pub cuts: usize,
    /// Dynamic references cut or left unresolved in input schemas since last drained,
    /// each saying what was done (for the operation's repairs in the import report).
    pub notes: Vec<String>,
}

impl<'a> Inliner<'a> {
    /// `max_ref_depth` bounds nested references; `budget` bounds the schema's size in
    /// JSON nodes (references past it are cut).
    pub(super) fn new(
        docs: &'a Documents,
        direction: Direction,
        max_ref_depth: usize,
        budget: usize,
    ) -> Self {
        Self {
            refs: Refs { docs },
            direction,
            max_ref_depth,
            budget,
            used: 0,
            stack: Vec::new(),
            scope: Vec::new(),
            cuts: 0,
            notes: Vec::new(),
        }
    }

    /// The inlined, normalized form of schema `v` found in document `doc`.
    pub(super) fn schema(&mut self, doc: usize, v: &'a Value) -> Result<Value, String> {
        self.used = 0;
        self.stack.clear();
        self.scope.clear();
        self.scope.push((doc, v, "schema".into()));
        self.node(doc, v, 0)
    }

    fn cut(&mut self, why: String, description: String) -> Value {
        self.cuts += 1;
        json!({"$comment": why, "description": description})
    }

    fn node(&mut self, doc: usize, v: &'a Value, nesting: usize) -> Result<Value, String> {
        self.used += 1;
        let m = match v {
            Value::Object(m) => m,
            Value::Bool(_) => return Ok(v.clone()),
            // not a schema: treat as "anything" rather than fail the whole operation
            _ => return Ok(json!({})),
        };
        if nesting > MAX_NESTING {
            return Ok(self.cut(
                format!("cut: schema nested deeper than {MAX_NESTING} levels"),
                "(nested value; schema omitted)".into(),
            ));
        }
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or(r).to_owned();
            let (tdoc, target) = self.refs.lookup(doc, r)?;
            return self.enter(m, r, &name, tdoc, target, nesting);
        }
        // Copied as they are, these would point at the whole tool input (its `#`), a
        // schema that no longer has the anchors: resolved here against the dynamic scope.
        for keyword in ["$recursiveRef", "$dynamicRef"] {
            let Some(r) = m.get(keyword).and_then(Value::as_str) else {
                continue;
            };
            let shown = format!("{keyword} '{r}'");
            return match dynamic::resolve(&self.refs, &self.scope, doc, keyword, r) {
                Some((tdoc, target, name)) => self.enter(m, &shown, &name, tdoc, target, nesting),
                None => {
                    let cut = self.cut(
                        format!("cut: {shown} resolves to no schema"),
                        "(any value; its schema could not be resolved)".into(),
                    );
                    self.note(format!(
                        "{shown} resolves to no schema: any value accepted there"
                    ));
                    Ok(cut)
                }
            };
        }
        let mut out = Map::with_capacity(m.len());
        for (k, x) in m {
            let value = match k.as_str() {
                "properties" | "patternProperties" | "dependentSchemas" => {
                    let Value::Object(props) = x else { continue };
                    let mut o = Map::with_capacity(props.len());
                    for (pk, pv) in props {
                        if self.skip_property(pv) {
                            continue;
                        }
                        o.insert(pk.clone(), self.node(doc, pv, nesting + 1)?);
                    }
                    Value::Object(o)
                }
                "items"
                | "additionalProperties"
                | "not"
                | "if"
                | "then"
                | "else"
                | "contains"
                | "propertyNames"
                | "unevaluatedProperties"
                | "unevaluatedItems"
                | "additionalItems" => match x {
                    Value::Array(a) => {
                        let mut o = Vec::with_capacity(a.len());
                        for s in a {
                            o.push(self.node(doc, s, nesting + 1)?);
                        }
                        Value::Array(o)
                    }
                    _ => self.node(doc, x, nesting + 1)?,
                },
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    let Value::Array(a) = x else { continue };
                    let mut o = Vec::with_capacity(a.len());
                    for s in a {
                        o.push(self.node(doc, s, nesting + 1)?);
                    }
                    Value::Array(o)
                }
                _ if k.starts_with("x-") => continue,
                "$defs" | "definitions" | "xml" | "externalDocs" | "discriminator" => continue,
                _ => x.clone(),
            };
            out.insert(k.clone(), value);
        }
        // `required` may name properties dropped as readOnly/writeOnly
        if let (Some(Value::Object(props)), Some(Value::Array(req))) =
            (m.get("properties"), out.get("required").cloned())
        {
            let dropped: Vec<&String> = props
                .iter()
                .filter(|(_, pv)| self.skip_property(pv))
                .map(|(k, _)| k)
                .collect();
            if !dropped.is_empty() {
                let kept: Vec<Value> = req
                    .into_iter()
                    .filter(|r| !r.as_str().is_some_and(|r| dropped.iter().any(|d| *d == r)))
                    .collect();
                out.insert("required".into(), Value::Array(kept));
            }
        }
        normalize_schema_node(&mut out, self.direction == Direction::Input);
        Ok(Value::Object(out))
    }

    fn note(&mut self, what: String) {
        if self.direction == Direction::Input && !self.notes.contains(&what) {
            self.notes.push(what);
        }
    }

    /// Expands reference `r` (its display form) of object `m`, whose target is `target`
    /// in document `tdoc`: cut when it recurses or goes past the bounds.
    fn enter(
        &mut self,
        m: &'a Map<String, Value>,
        r: &str,
        name: &str,
        tdoc: usize,
        target: &'a Value,
        nesting: usize,
    ) -> Result<Value, String> {
        let key: *const Value = target;
        let dynamic = !m.contains_key("$ref");
        if self.stack.contains(&key) {
            if dynamic {
                self.note(format!(
                    "recursive {r} cut after one level: deeper levels accept any {name}"
                ));
            }
            return Ok(self.cut(
                format!("cut: recursive reference to {r}"),
                format!("A {name} (recursive: same shape as the enclosing {name})"),
            ));
        }
        if self.stack.len() >= self.max_ref_depth {
            return Ok(self.cut(
                format!(
                    "cut: {r} nested deeper than {} references",
                    self.max_ref_depth
                ),
                format!("A {name} (nested schema omitted for size)"),
            ));
        }
        if self.used > self.budget {
            return Ok(self.cut(
                format!("cut: {r} omitted to keep the schema small"),
                format!("A {name} (nested schema omitted for size)"),
            ));
        }
        self.stack.push(key);
        self.scope.push((tdoc, target, name.to_owned()));
        let resolved = self.node(tdoc, target, nesting + 1);
        self.scope.pop();
        self.stack.pop();
        let mut resolved = resolved?;
        // 3.1 allows keywords beside $ref (a description override, most often)
        if m.len() > 1
            && let Value::Object(rm) = &mut resolved
        {
            for (k, x) in m {
                if matches!(
                    k.as_str(),
                    "description"
                        | "title"
                        | "default"
                        | "example"
                        | "deprecated"
                        | "readOnly"
                        | "writeOnly"
                        | "nullable"
                ) {
                    rm.insert(k.clone(), x.clone());
                }
            }
            normalize_schema_node(rm, self.direction == Direction::Input);
        }
        Ok(resolved)
    }

    fn skip_property(&self, pv: &Value) -> bool {
        let key = match self.direction {
            Direction::Input => "readOnly",
            Direction::Output => "writeOnly",
        };
        // look through a reference for the flag without expanding it
        let flag = |v: &Value| v.get(key).and_then(Value::as_bool) == Some(true);
        flag(pv)
    }
}
