//! Definitions over their token budget, abbreviated to fit (issue: a model should never
//! pay for schema it does not read).
//!
//! A definition over `catalog.definition_max_tokens` is listed *briefly*: first its
//! `outputSchema` is reduced to an open object (clients only check results against it;
//! the model does not need it to call), then the `inputSchema` keeps its structure down
//! to the deepest level that fits, every deeper sub-schema becoming a **stub**: the
//! node's type, title and description, no sub-schemas, and a note naming the JSON
//! pointer `tool_schema` answers for it. A stub accepts anything of its type (an open
//! object, any array), so a model that fills one in from the full schema is never
//! refused by the listed one; calls are validated against the full schema.
//!
//! When even the top-level parameters with their own keywords do not fit, the ladder
//! goes on: top-level parameters with short descriptions, then their names and types
//! only, then the root alone; each with the tool description whole, then cut shorter.
//! Every step is measured with the real tokenizer on the definition as listed.
//!
//! `$ref`s cannot survive abbreviation (their `$defs` would be cut), so an abbreviated
//! schema has none: each reference becomes a stub of its own place, and
//! [`schema_at`] answers a place with the definitions it refers to attached.

use serde::Serialize;
use serde_json::{Map, Value};
use toolgate_adapters::JsonObject;

use crate::truncate::Encoding;

/// Keywords whose values are sub-schemas: a map of them, a list of them, or one.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];
const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SCHEMA_ONES: [&str; 11] = [
    "items",
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];
/// Deepest level the depth search looks at (deeper schemas are cut there first).
const MAX_DEPTH: usize = 32;
/// A stub's own description is cut to this many characters.
const STUB_DESCRIPTION_CHARS: usize = 200;
/// In the short-parameters step: parameter descriptions cut to this many characters,
/// and an `enum` longer than this many values stubbed.
const SHORT_DESCRIPTION_CHARS: usize = 120;
const SHORT_ENUM_VALUES: usize = 16;
/// Tool description lengths tried, longest first, once the schema is as small as it gets.
const DESCRIPTION_CAPS: [Option<usize>; 4] = [None, Some(1000), Some(300), Some(80)];

/// The fields a brief listing replaces (`description`, `inputSchema`, `outputSchema`),
/// or `None` when the definition fits as it is.
pub(super) struct Brief {
    pub fields: JsonObject,
    /// False when even the smallest form is over the limit (the caller says so).
    pub fits: bool,
}

/// What [`abbreviate`] reads of a definition.
pub(super) struct Parts<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub input: Option<&'a JsonObject>,
    pub has_output: bool,
}

/// Abbreviates a definition until `fits` says the definition with a brief's fields in
/// place is within budget (as listed and as exported).
pub(super) fn abbreviate(parts: Parts<'_>, fits: &dyn Fn(&JsonObject) -> bool) -> Brief {
    let Parts {
        name,
        description,
        input,
        has_output,
    } = parts;
    let mut brief = JsonObject::new();
    brief.insert(
        "description".into(),
        Value::String(with_notice(description, None, name)),
    );
    if has_output {
        brief.insert("outputSchema".into(), output_stub());
    }
    let Some(input) = input else {
        return shorten_description(brief, description, name, fits);
    };
    if fits(&brief) {
        return Brief {
            fields: brief,
            fits: true,
        };
    }
    let with_input = |brief: &mut JsonObject, input: JsonObject| {
        brief.insert("inputSchema".into(), Value::Object(input));
    };
    let deepest = deepest_fitting(input, "/inputSchema", &|candidate| {
        let mut trial = brief.clone();
        with_input(&mut trial, candidate.clone());
        fits(&trial)
    });
    if let Some(input) = deepest {
        with_input(&mut brief, input);
        return Brief {
            fields: brief,
            fits: true,
        };
    }
    for shape in [Shape::Short, Shape::NamesOnly] {
        with_input(&mut brief, collapse(input, "/inputSchema", 1, &shape));
        let shortened = shorten_description(brief.clone(), description, name, fits);
        if shortened.fits {
            return shortened;
        }
    }
    with_input(&mut brief, collapse(input, "/inputSchema", 1, &Shape::Root));
    shorten_description(brief, description, name, fits)
}

/// `schema` (at JSON pointer `path`) abbreviated to at most `limit` tokens, the same
/// way a listed definition's input schema is: for a `tool_schema` answer that would
/// not fit a result.
pub fn abbreviate_schema(
    schema: &JsonObject,
    path: &str,
    limit: usize,
    encoding: Encoding,
) -> JsonObject {
    let fits = |candidate: &JsonObject| {
        crate::truncate::count_till_limit(&to_text(candidate), encoding, limit).is_some()
    };
    if let Some(fitting) = deepest_fitting(schema, path, &fits) {
        return fitting;
    }
    for shape in [Shape::Short, Shape::NamesOnly] {
        let candidate = collapse(schema, path, 1, &shape);
        if fits(&candidate) {
            return candidate;
        }
    }
    collapse(schema, path, 1, &Shape::Root)
}

/// `schema` with its sub-schemas kept down to the deepest level at which `fits` says
/// yes (at least the first); `None` when not even that level fits.
fn deepest_fitting(
    schema: &JsonObject,
    path: &str,
    fits: &dyn Fn(&JsonObject) -> bool,
) -> Option<JsonObject> {
    // Levels are monotonic (a deeper cut is never smaller): a binary search.
    let levels = depth(schema).min(MAX_DEPTH);
    let (mut low, mut high) = (1, levels);
    let mut best = None;
    while low <= high {
        let level = (low + high) / 2;
        let candidate = collapse(schema, path, level, &Shape::Whole);
        if fits(&candidate) {
            best = Some(candidate);
            low = level + 1;
        } else {
            high = level - 1;
        }
    }
    best
}

/// `brief` with the tool description cut shorter until it fits (or as short as it gets).
fn shorten_description(
    mut brief: JsonObject,
    description: &str,
    name: &str,
    fits: &dyn Fn(&JsonObject) -> bool,
) -> Brief {
    for cap in DESCRIPTION_CAPS {
        brief.insert(
            "description".into(),
            Value::String(with_notice(description, cap, name)),
        );
        if fits(&brief) {
            return Brief {
                fields: brief,
                fits: true,
            };
        }
    }
    Brief {
        fields: brief,
        fits: false,
    }
}

/// The tool description (cut to `cap` characters, if given) and the notice saying how
/// to read the rest.
fn with_notice(description: &str, cap: Option<usize>, name: &str) -> String {
    let shown = match cap {
        Some(cap) if description.chars().count() > cap => format!(
            "{} (description cut: path \"/description\" has it all)",
            cut_chars(description, cap)
        ),
        _ => description.to_owned(),
    };
    let notice = format!(
        "Parts of this definition are abbreviated; call tool_schema with {{\"name\": \"{name}\", \"path\": \"<path>\"}} for the full schema at a path, or without path for the whole definition."
    );
    if shown.is_empty() {
        notice
    } else {
        format!("{shown}\n\n{notice}")
    }
}

fn output_stub() -> Value {
    serde_json::json!({
        "type": "object",
        "description": "Abbreviated: path \"/outputSchema\" of tool_schema has the full output schema."
    })
}

/// How much of the levels kept by [`collapse`] is written out.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// Every keyword of the kept levels.
    Whole,
    /// Short descriptions and enums at the kept levels.
    Short,
    /// Top-level parameters with their type only.
    NamesOnly,
    /// The root alone.
    Root,
}

/// `schema` (at JSON pointer `path` in the definition) with its levels deeper than
/// `keep` made stubs, and every `$ref` a stub.
fn collapse(schema: &JsonObject, path: &str, keep: usize, shape: &Shape) -> JsonObject {
    if *shape == Shape::Root {
        let mut root = bare_stub(schema, path);
        root.insert("type".into(), Value::String("object".into()));
        return root;
    }
    let mut root = collapse_node(schema, path, 0, keep, shape);
    root.remove("$defs");
    root.remove("definitions");
    root
}

fn collapse_node(
    node: &JsonObject,
    path: &str,
    level: usize,
    keep: usize,
    shape: &Shape,
) -> JsonObject {
    let has_children = node.keys().any(|key| is_schema_keyword(key));
    let long_enum = *shape == Shape::Short
        && level > 0
        && node
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|values| values.len() > SHORT_ENUM_VALUES);
    if node.contains_key("$ref") || (level >= keep && has_children) || long_enum {
        return stub(node, path);
    }
    if *shape == Shape::NamesOnly && level > 0 {
        let mut named = bare_stub(node, path);
        if !has_children {
            named.remove("description");
        }
        return named;
    }
    let mut out = Map::new();
    for (key, value) in node {
        if level == 0 && (key == "$defs" || key == "definitions") {
            continue;
        }
        let here = format!("{path}/{}", escape(key));
        let value = if SCHEMA_MAPS.contains(&key.as_str()) {
            match value {
                Value::Object(children) => Value::Object(
                    children
                        .iter()
                        .map(|(child, schema)| {
                            let at = format!("{here}/{}", escape(child));
                            (
                                child.clone(),
                                collapse_value(schema, &at, level + 1, keep, shape),
                            )
                        })
                        .collect(),
                ),
                other => other.clone(),
            }
        } else if SCHEMA_LISTS.contains(&key.as_str()) || (key == "items" && value.is_array()) {
            match value {
                Value::Array(children) => {
                    let mixed = mixes_objects_and_values(children);
                    Value::Array(
                        children
                            .iter()
                            .enumerate()
                            .map(|(i, schema)| {
                                let at = format!("{here}/{i}");
                                let mut kept = collapse_value(schema, &at, level + 1, keep, shape);
                                if mixed {
                                    name_properties(&mut kept, schema);
                                }
                                kept
                            })
                            .collect(),
                    )
                }
                other => other.clone(),
            }
        } else if SCHEMA_ONES.contains(&key.as_str()) {
            collapse_value(value, &here, level + 1, keep, shape)
        } else if key == "description" && *shape == Shape::Short && level > 0 {
            match value.as_str() {
                Some(text) => Value::String(cut_chars(text, SHORT_DESCRIPTION_CHARS)),
                None => value.clone(),
            }
        } else {
            value.clone()
        };
        out.insert(key.clone(), value);
    }
    out
}

fn collapse_value(value: &Value, path: &str, level: usize, keep: usize, shape: &Shape) -> Value {
    match value {
        Value::Object(node) => Value::Object(collapse_node(node, path, level, keep, shape)),
        // `true`/`false` schemas and anything malformed stay as written.
        other => other.clone(),
    }
}

/// A node without its sub-schemas: its type (said or evident), format, short enum,
/// title and description, and the path that has the rest. An untyped node keeps its
/// alternatives one level deep (see [`shallow`]): a stub that takes anything is one
/// strict consumers (OpenAI strict mode, Gemini) cannot describe at all.
fn stub(node: &JsonObject, path: &str) -> JsonObject {
    let mut out = match shallow(&Value::Object(node.clone())) {
        Value::Object(out) => out,
        _ => JsonObject::new(),
    };
    out.remove("properties");
    if !out.contains_key("type") {
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alternatives)) = node.get(key) {
                out.insert(key.into(), alternatives.iter().map(shallow).collect());
            }
        }
    }
    if let Some(title) = node.get("title").filter(|v| v.is_string()) {
        out.insert("title".into(), title.clone());
    }
    let own = node
        .get("description")
        .and_then(Value::as_str)
        .map(|text| cut_chars(text, STUB_DESCRIPTION_CHARS))
        .unwrap_or_default();
    let note = format!("(abbreviated: tool_schema path \"{path}\")");
    let description = if own.is_empty() {
        note
    } else {
        format!("{own} {note}")
    };
    out.insert("description".into(), Value::String(description));
    out
}

/// Whether alternatives mix objects with other values (an object or a string token):
/// a free-form object stub among them could not be told from a string by strict
/// consumers, so such stubs keep their properties' names (see [`name_properties`]).
fn mixes_objects_and_values(alternatives: &[Value]) -> bool {
    let is_object = |schema: &Value| {
        schema.get("properties").is_some() || schema.get("type") == Some(&Value::from("object"))
    };
    alternatives.iter().any(is_object)
        && alternatives
            .iter()
            .any(|s| !is_object(s) && s.get("type").is_some_and(|t| t != "null"))
}

/// Gives a stub of an object its properties' names and types (see [`shallow`]).
fn name_properties(kept: &mut Value, schema: &Value) {
    if let (Value::Object(kept), Some(Value::Object(_))) = (&mut *kept, schema.get("properties"))
        && !kept.contains_key("properties")
        && let Value::Object(named) = shallow(schema)
        && let Some(properties) = named.get("properties")
    {
        kept.insert("properties".into(), properties.clone());
    }
}

/// A [`stub`] without even its properties' names or its alternatives (the last
/// steps of the ladder).
fn bare_stub(node: &JsonObject, path: &str) -> JsonObject {
    let mut out = stub(node, path);
    for key in ["properties", "anyOf", "oneOf", "enum"] {
        out.remove(key);
    }
    out
}

/// A schema one level deep: its type (said or evident: `properties` make an object,
/// `items` an array), format, short enum, nullability, and its properties' names
/// with their types only.
fn shallow(schema: &Value) -> Value {
    let Value::Object(node) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for key in ["type", "format", "const", "nullable"] {
        if let Some(value) = node.get(key) {
            out.insert(key.into(), value.clone());
        }
    }
    if let Some(Value::Array(values)) = node.get("enum")
        && values.len() <= SHORT_ENUM_VALUES
    {
        out.insert("enum".into(), Value::Array(values.clone()));
    }
    let evident = if node.contains_key("properties") || node.contains_key("additionalProperties") {
        Some("object")
    } else if node.contains_key("items") {
        Some("array")
    } else {
        None
    };
    if let Some(kind) = evident {
        out.entry("type")
            .or_insert_with(|| Value::String(kind.into()));
    }
    if let Some(Value::Object(properties)) = node.get("properties") {
        let bare = |schema: &Value| match (schema.get("type"), schema.get("properties")) {
            (Some(kind), _) => serde_json::json!({"type": kind}),
            (None, Some(_)) => serde_json::json!({"type": "object"}),
            (None, None) => serde_json::json!({}),
        };
        let names: Map<String, Value> = properties
            .iter()
            .map(|(name, schema)| (name.clone(), bare(schema)))
            .collect();
        out.insert("properties".into(), Value::Object(names));
    }
    Value::Object(out)
}

fn is_schema_keyword(key: &str) -> bool {
    SCHEMA_MAPS.contains(&key)
        || SCHEMA_LISTS.contains(&key)
        || SCHEMA_ONES.contains(&key)
        || key == "$ref"
}

/// Levels of sub-schemas below `node` (a node without any: 0).
fn depth(node: &JsonObject) -> usize {
    fn value_depth(value: &Value, budget: usize) -> usize {
        match value {
            Value::Object(node) if budget > 0 => node_depth(node, budget - 1),
            _ => 0,
        }
    }
    fn node_depth(node: &JsonObject, budget: usize) -> usize {
        let mut deepest = 0;
        for (key, value) in node {
            let children: Box<dyn Iterator<Item = &Value>> = if SCHEMA_MAPS.contains(&key.as_str())
            {
                match value {
                    Value::Object(map) => Box::new(map.values()),
                    _ => Box::new(std::iter::empty()),
                }
            } else if SCHEMA_LISTS.contains(&key.as_str()) || (key == "items" && value.is_array()) {
                match value {
                    Value::Array(list) => Box::new(list.iter()),
                    _ => Box::new(std::iter::empty()),
                }
            } else if SCHEMA_ONES.contains(&key.as_str()) {
                Box::new(std::iter::once(value))
            } else {
                Box::new(std::iter::empty())
            };
            for child in children {
                deepest = deepest.max(1 + value_depth(child, budget));
            }
        }
        deepest
    }
    node_depth(node, MAX_DEPTH + 1)
}

/// A JSON pointer segment for `key` (RFC 6901).
fn escape(key: &str) -> std::borrow::Cow<'_, str> {
    if key.contains(['~', '/']) {
        key.replace('~', "~0").replace('/', "~1").into()
    } else {
        key.into()
    }
}

/// `text` cut to at most `max` characters, at a word boundary when one is near, ending
/// with `…` when cut.
fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let end = text
        .char_indices()
        .nth(max.saturating_sub(1))
        .map_or(text.len(), |(i, _)| i);
    let head = &text[..end];
    let head = match head.rfind(char::is_whitespace) {
        Some(space) if space > end / 2 => &head[..space],
        _ => head,
    };
    format!("{}…", head.trim_end())
}

/// What `tool_schema` answers for `path` (a JSON pointer) in a tool's full
/// `definition`: the value there, with the local `$ref` targets it uses attached at
/// their own pointers so the answer stands alone. `None` when nothing is there.
pub fn schema_at(definition: &JsonObject, path: &str) -> Option<Value> {
    if path.is_empty() || path == "/" {
        return Some(Value::Object(definition.clone()));
    }
    // The first segment names a field of the definition, the rest is a pointer in it
    // (split where the text has its `/`, whatever the segment's escapes).
    let after_slash = path.strip_prefix('/')?;
    let (first, rest) = match after_slash.find('/') {
        Some(at) => after_slash.split_at(at),
        None => (after_slash, ""),
    };
    let root = definition.get(&unescape(first))?;
    let node = if rest.is_empty() {
        root.clone()
    } else {
        root.pointer(rest)?.clone()
    };
    if rest.is_empty() {
        return Some(node);
    }
    Some(attach_references(node, root))
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// Most references followed while attaching (a bound on hostile schemas).
const MAX_ATTACHED: usize = 1000;

/// `node` with every local `$ref` target it reaches (transitively) copied from `root`
/// to the same pointer inside `node`, where that place is free.
fn attach_references(node: Value, root: &Value) -> Value {
    let Value::Object(mut object) = node else {
        return node;
    };
    let mut pending = Vec::new();
    collect_refs(&Value::Object(object.clone()), &mut pending);
    let mut seen = std::collections::BTreeSet::new();
    while let Some(reference) = pending.pop() {
        if seen.len() >= MAX_ATTACHED || !seen.insert(reference.clone()) {
            continue;
        }
        let Some(pointer) = reference.strip_prefix('#') else {
            continue;
        };
        let Some(target) = root.pointer(pointer) else {
            continue;
        };
        if pointer.is_empty() {
            continue;
        }
        if place(&mut object, pointer, target.clone()) {
            collect_refs(target, &mut pending);
        }
    }
    Value::Object(object)
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("$ref", Value::String(reference)) if reference.starts_with('#') => {
                        out.push(reference.clone())
                    }
                    _ => collect_refs(child, out),
                }
            }
        }
        Value::Array(list) => list.iter().for_each(|child| collect_refs(child, out)),
        _ => {}
    }
}

/// Puts `value` at `pointer` inside `object`, making the objects on the way; false when
/// the place is taken or the way is not through objects.
fn place(object: &mut JsonObject, pointer: &str, value: Value) -> bool {
    let segments: Vec<String> = pointer.split('/').skip(1).map(unescape).collect();
    let Some((last, way)) = segments.split_last() else {
        return false;
    };
    let mut here = object;
    for segment in way {
        let next = here
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        match next {
            Value::Object(inner) => here = inner,
            _ => return false,
        }
    }
    if here.contains_key(last) {
        return false;
    }
    here.insert(last.clone(), value);
    true
}

/// The exports checked against a definition's budget, the largest of each kind: OpenAI
/// Chat Completions (Responses and Anthropic carry the same schema in a smaller
/// wrapper: no `"function": {…}` level), the same in strict mode, and Gemini. Checking
/// these three instead of all six halves what the check costs a catalog build; the
/// corpus test holds every format to the budget.
const EXPORTS: [(crate::export::Format, bool); 3] = [
    (crate::export::Format::OpenAi, false),
    (crate::export::Format::OpenAi, true),
    (crate::export::Format::Gemini, false),
];

/// Whether every export of `definition` is at most `limit` tokens (a format that cannot
/// express the tool does not list it, so it costs nothing there).
pub(super) fn exports_fit(definition: &JsonObject, limit: usize, encoding: Encoding) -> bool {
    EXPORTS.iter().all(|&(format, strict)| {
        let options = crate::export::ExportOptions { strict };
        match crate::export::export(definition, format, &options) {
            Ok(tool) => {
                let text = to_text(&tool);
                // A token is at least one byte: a text no longer than the limit fits
                // without being counted (most tools' exports).
                text.len() <= limit
                    || crate::truncate::count_till_limit(&text, encoding, limit).is_some()
            }
            Err(_) => true,
        }
    })
}

/// Serializes `fields` to compact JSON (for counting).
pub(super) fn to_text(fields: impl Serialize) -> String {
    serde_json::to_string(&fields).unwrap_or_else(|_| "{}".to_owned())
}

#[cfg(test)]
mod tests;
