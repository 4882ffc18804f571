//! Operation -> tool: the flat input schema (parameters and body properties side by
//! side, collisions renamed), the description, annotations, output schema, and the
//! bindings that tell the invoker where each argument goes. Also the import filters.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::config::{FilterSet, Filters};
use super::files;
use super::model::{Body, BodyKind, Location, Operation};
use super::naming::arg_name;
use super::variants;
use crate::JsonObject;

/// Where one argument goes in the request.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Target {
    /// The operation's parameter at this index.
    Param(usize),
    /// A property of the (object) body, by its name in the spec.
    BodyProp(String),
    /// The whole body.
    Body,
    /// The body's media type, out of those the operation offers.
    ContentType,
}

/// Whether an argument must be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Optional,
    Required,
    /// A required property of an optional body: required once any body property is sent.
    WithBody,
}

/// One argument before its final name is settled.
struct Arg {
    name: String,
    location: Option<Location>,
    target: Target,
    schema: Value,
    need: Need,
}

/// One argument and its destination.
#[derive(Debug, Clone)]
pub(super) struct Binding {
    pub arg: String,
    pub target: Target,
}

/// What a tool needs at call time besides its operation.
#[derive(Debug, Clone)]
pub(super) struct Converted {
    pub input_schema: Value,
    pub bindings: Vec<Binding>,
    /// The body accepts properties beyond the declared ones; extra arguments go there.
    pub body_takes_extra: bool,
}

/// Longest description kept (characters).
pub(super) const MAX_DESCRIPTION: usize = 1024;

/// Properties, required names and `additionalProperties` of an object schema.
type ObjectParts = (Map<String, Value>, Vec<String>, Option<Value>);

/// An object schema's properties, required names and `additionalProperties`, merging
/// `allOf` branches; `None` when the schema is not a plain object.
fn object_parts(schema: &Value) -> Option<ObjectParts> {
    let m = schema.as_object()?;
    if m.contains_key("oneOf") || m.contains_key("anyOf") {
        return None;
    }
    match m.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        None => {}
        _ => return None,
    }
    let mut props = Map::new();
    let mut required = Vec::new();
    let mut additional = m.get("additionalProperties").cloned();
    if let Some(Value::Array(all)) = m.get("allOf") {
        for part in all {
            let (p, r, a) = object_parts(part)?;
            props.extend(p);
            required.extend(r);
            if a.is_some() {
                additional = a;
            }
        }
    }
    if let Some(Value::Object(p)) = m.get("properties") {
        props.extend(p.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(Value::Array(r)) = m.get("required") {
        required.extend(r.iter().filter_map(|x| x.as_str().map(str::to_owned)));
    }
    if props.is_empty() {
        return None;
    }
    Some((props, required, additional))
}

/// Builds the flat input schema and the argument bindings of `op`.
pub(super) fn convert(op: &Operation) -> Converted {
    let mut entries = parameter_args(op);
    let mut body_takes_extra = false;
    if let Some(body) = &op.body {
        body_takes_extra = body_args(body, &mut entries);
    }
    let Settled {
        properties,
        required,
        with_body,
        body_prop_args,
        bindings,
    } = settle_names(entries);
    // `json!` serializes `properties` into a new tree, each map and list allocated at
    // its exact size: the copy is what the tool keeps, and it is smaller than the tree
    // built up by inserts (moving `properties` in instead saved 8 % of a large import's
    // time but kept the slack: a 4 MB cluster API served at 153 MB less mapped files
    // against 150 MB allowed, `openapi_gateway.rs`).
    let mut input = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        input["required"] = Value::Array(required);
    }
    if !with_body.is_empty() {
        // The body is optional, but once any of its properties is sent, it is sent
        // whole: each property then needs the body's required ones.
        let deps: Map<String, Value> = body_prop_args
            .iter()
            .map(|b| {
                let others: Vec<&String> = with_body.iter().filter(|r| *r != b).collect();
                (b.clone(), json!(others))
            })
            .filter(|(_, others)| others.as_array().is_some_and(|a| !a.is_empty()))
            .collect();
        input["dependentRequired"] = Value::Object(deps);
    }
    if !body_takes_extra {
        input["additionalProperties"] = json!(false);
    }
    Converted {
        input_schema: input,
        bindings,
        body_takes_extra,
    }
}

/// One argument per parameter of `op`, under its argument name; a parameter whose name
/// had to change says in its description what it is sent as.
fn parameter_args(op: &Operation) -> Vec<Arg> {
    let mut entries = Vec::new();
    for (i, p) in op.parameters.iter().enumerate() {
        let mut schema = p.schema.clone();
        if arg_name(&p.name) != p.name
            && let Value::Object(m) = &mut schema
        {
            let d = m
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let note = format!("(sent as {} parameter '{}')", p.location.as_str(), p.name);
            m.insert(
                "description".into(),
                json!(if d.is_empty() {
                    note
                } else {
                    format!("{d} {note}")
                }),
            );
        }
        entries.push(Arg {
            name: arg_name(&p.name),
            location: Some(p.location),
            target: Target::Param(i),
            schema,
            need: if p.required {
                Need::Required
            } else {
                Need::Optional
            },
        });
    }
    entries
}

/// Appends the arguments of `body` to `entries`: one per property of an object body
/// (JSON, form, multipart), else one for the whole body, and one for its media type
/// when it offers several. Whether the body accepts properties beyond the declared ones.
fn body_args(body: &Body, entries: &mut Vec<Arg>) -> bool {
    let mut body_takes_extra = false;
    let flat = matches!(
        body.kind,
        BodyKind::Json | BodyKind::Form | BodyKind::Multipart
    )
    .then(|| object_parts(&body.schema))
    .flatten();
    match flat {
        Some((props, required, additional)) => {
            body_takes_extra =
                matches!(additional, Some(Value::Bool(true)) | Some(Value::Object(_)));
            for (k, v) in props {
                let need = match (required.contains(&k), body.required) {
                    (false, _) => Need::Optional,
                    (true, true) => Need::Required,
                    (true, false) => Need::WithBody,
                };
                let v = match body.kind {
                    BodyKind::Multipart => files::prop_schema(v, body.encoding.get(&k)),
                    _ => v,
                };
                entries.push(Arg {
                    name: arg_name(&k),
                    location: None,
                    target: Target::BodyProp(k),
                    schema: v,
                    need,
                });
            }
        }
        None => entries.push(Arg {
            name: "body".into(),
            location: None,
            target: Target::Body,
            schema: whole_body_schema(body),
            need: if body.required {
                Need::Required
            } else {
                Need::Optional
            },
        }),
    }
    if let Some(schema) = variants::arg_schema(&body.media_type, &body.choices) {
        entries.push(Arg {
            name: "content_type".into(),
            location: None,
            target: Target::ContentType,
            schema,
            need: Need::Optional,
        });
    }
    body_takes_extra
}

/// The schema of the one argument that is the whole body: a string for binary (base64)
/// and non-string text bodies, else the body's own, with the body's description.
fn whole_body_schema(body: &Body) -> Value {
    let mut schema = match body.kind {
        BodyKind::Binary => json!({"type": "string", "contentEncoding": "base64",
            "description": format!("The request body ({}), base64-encoded", body.media_type)}),
        BodyKind::Text if body.schema.get("type").and_then(Value::as_str) != Some("string") => {
            json!({"type": "string", "description": format!("The request body as {} text", body.media_type)})
        }
        _ => body.schema.clone(),
    };
    if let (Some(d), Value::Object(m)) = (&body.description, &mut schema)
        && !m.contains_key("description")
    {
        m.insert("description".into(), json!(d.trim()));
    }
    schema
}

/// The arguments under their final names, sorted into what the input schema lists.
struct Settled {
    properties: Map<String, Value>,
    /// Names of the arguments that must be given.
    required: Vec<Value>,
    /// Names of the arguments required once the (optional) body is sent.
    with_body: Vec<String>,
    /// Names of the arguments that are body properties.
    body_prop_args: Vec<String>,
    bindings: Vec<Binding>,
}

/// Settles each argument's name (on a collision parameters take a `__<location>`
/// suffix, body properties keep the name; a name still taken gets a number) and sorts
/// the arguments into properties, required names and bindings.
fn settle_names(entries: Vec<Arg>) -> Settled {
    let mut count: HashMap<String, usize> = HashMap::new();
    for e in &entries {
        *count.entry(e.name.clone()).or_default() += 1;
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut with_body = Vec::new();
    let mut body_prop_args = Vec::new();
    let mut bindings = Vec::new();
    let mut taken: BTreeMap<String, ()> = BTreeMap::new();
    for Arg {
        name,
        location,
        target,
        mut schema,
        need,
    } in entries
    {
        let mut name = match location {
            Some(l) if count[&name] > 1 => format!("{name}__{}", l.as_str()),
            _ => name,
        };
        let mut n = 2;
        while taken.contains_key(&name) {
            name = format!("{name}_{n}");
            n += 1;
        }
        taken.insert(name.clone(), ());
        match need {
            Need::Required => required.push(Value::String(name.clone())),
            Need::WithBody => {
                with_body.push(name.clone());
                note(&mut schema, "(required when the body is sent)");
            }
            Need::Optional => {}
        }
        if matches!(target, Target::BodyProp(_)) {
            body_prop_args.push(name.clone());
        }
        properties.insert(name.clone(), schema);
        bindings.push(Binding { arg: name, target });
    }
    Settled {
        properties,
        required,
        with_body,
        body_prop_args,
        bindings,
    }
}

/// Appends `text` to a schema's description.
fn note(schema: &mut Value, text: &str) {
    if let Value::Object(m) = schema {
        let d = m
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        let d = if d.is_empty() {
            text.to_owned()
        } else {
            format!("{d} {text}")
        };
        m.insert("description".into(), Value::String(d));
    }
}

pub(super) fn cap(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let cut: String = s.chars().take(max - 1).collect();
    format!("{}…", cut.trim_end())
}

/// Summary, then description (without repeating the summary), capped; a method and
/// path sentence when the spec has neither.
pub(super) fn description(op: &Operation) -> String {
    let summary = op
        .summary
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let desc = op
        .description
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let mut text = match (summary, desc) {
        (Some(s), Some(d)) if d.starts_with(s.trim_end_matches('.')) => d.to_owned(),
        (Some(s), Some(d)) => {
            let s = s.trim_end_matches('.');
            format!("{s}.\n\n{d}")
        }
        (Some(s), None) => s.to_owned(),
        (None, Some(d)) => d.to_owned(),
        (None, None) => match op
            .operation_id
            .as_deref()
            .map(humanize)
            .filter(|h| !h.is_empty())
        {
            Some(h) => format!("{h} ({} {}).", op.method, op.path),
            None => format!("{} {}", op.method, op.path),
        },
    };
    if op.deprecated {
        text = format!("(Deprecated) {text}");
    }
    cap(&text, MAX_DESCRIPTION)
}

/// `listGuildMembers` / `list_guild_members` / `repos/get` -> "List guild members".
fn humanize(id: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in id.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    let mut text = words.join(" ");
    if let Some(first) = text.get(..1) {
        text = first.to_uppercase() + &text[1..];
    }
    text
}

/// The MCP tool definition. The input and output schemas move into it (they are the
/// largest part of an import and are kept once: calls need neither).
pub(super) fn tool_json(name: &str, op: &mut Operation, conv: &mut Converted) -> JsonObject {
    let mut t = Map::new();
    t.insert("name".into(), json!(name));
    if let Some(s) = op
        .summary
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        t.insert("title".into(), json!(cap(s, 120)));
    }
    t.insert("description".into(), json!(description(op)));
    t.insert("inputSchema".into(), std::mem::take(&mut conv.input_schema));
    if let Some(o) = op.output_schema.take() {
        t.insert("outputSchema".into(), o);
    }
    // QUERY (OpenAPI 3.2) is safe like GET: a read with its question in the body.
    let read_only = matches!(op.method.as_str(), "GET" | "HEAD" | "QUERY");
    let mut ann = Map::new();
    ann.insert("readOnlyHint".into(), json!(read_only));
    if !read_only {
        ann.insert("destructiveHint".into(), json!(op.method == "DELETE"));
        ann.insert(
            "idempotentHint".into(),
            json!(op.method == "PUT" || op.method == "DELETE"),
        );
    }
    ann.insert("openWorldHint".into(), json!(true));
    t.insert("annotations".into(), Value::Object(ann));
    t
}

/// `*` matches any run, `?` one character.
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Which entry of `set` matches `op`, per kind: `Some(description)` of the first match.
fn matches(set: &FilterSet, op: &Operation) -> Vec<(&'static str, bool, String)> {
    let id = op.operation_id.as_deref().unwrap_or("");
    let mut out = Vec::new();
    if !set.operation_ids.is_empty() {
        let hit = set.operation_ids.iter().find(|g| glob(g, id));
        out.push((
            "operation_ids",
            hit.is_some(),
            hit.cloned().unwrap_or_default(),
        ));
    }
    if !set.tags.is_empty() {
        let hit = set.tags.iter().find(|t| op.tags.contains(t));
        out.push(("tags", hit.is_some(), hit.cloned().unwrap_or_default()));
    }
    if !set.methods.is_empty() {
        let hit = set
            .methods
            .iter()
            .find(|m| m.eq_ignore_ascii_case(&op.method));
        out.push(("methods", hit.is_some(), hit.cloned().unwrap_or_default()));
    }
    if !set.path_prefixes.is_empty() {
        let hit = set
            .path_prefixes
            .iter()
            .find(|p| op.path.starts_with(p.as_str()));
        out.push((
            "path_prefixes",
            hit.is_some(),
            hit.cloned().unwrap_or_default(),
        ));
    }
    out
}

/// `Err(reason)` when the filters leave `op` out.
pub(super) fn filter(filters: &Filters, op: &Operation) -> Result<(), String> {
    for (kind, hit, _) in matches(&filters.include, op) {
        if !hit {
            return Err(format!("not matched by filters.include.{kind}"));
        }
    }
    for (kind, hit, entry) in matches(&filters.exclude, op) {
        if hit {
            return Err(format!("excluded by filters.exclude.{kind} ('{entry}')"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn humanized_operation_ids() {
        assert_eq!(humanize("create_message"), "Create message");
        assert_eq!(humanize("listGuildMembers"), "List guild members");
        assert_eq!(humanize("repos/get-content"), "Repos get content");
    }

    #[test]
    fn globbing() {
        assert!(glob("repos/*", "repos/get"));
        assert!(glob("*issue?", "list-issues"));
        assert!(!glob("repos/*", "users/get"));
        assert!(glob("*", ""));
    }
}
