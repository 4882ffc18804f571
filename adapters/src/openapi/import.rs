//! Importing a spec: the synchronous pipeline from loaded documents to tool definitions
//! (normalize, check references, model, filter, name, convert), within the import's
//! limits, with the [`ImportReport`] saying what was left out, shortened or repaired.
//! Runs on a blocking thread (see [`super::upstream`]).

use std::collections::HashMap;

use serde::Serialize;
use url::Url;

use super::auth::Auth;
use super::config::OpenApiConfig;
use super::convert;
use super::load::{self, LoadError};
use super::model;
use super::naming;
use super::normalize;
use super::oauth_flows;
use super::operations;
use super::refs;
use crate::{JsonObject, ToolDef};

/// One tool: its operation, conversion and base URL.
pub(super) struct Endpoint {
    pub op: model::Operation,
    pub conv: convert::Converted,
    pub base: Result<Url, String>,
}

/// The gateway names tools `<upstream>__<tool>` within 64 characters.
const MAX_QUALIFIED: usize = 64;
/// Bare names never get shorter than this, whatever the upstream's name.
const MIN_BARE: usize = 16;

/// What an import did, for the operator.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    /// The spec's version family (`2.0`, `3.0`, `3.1`).
    pub spec_version: String,
    pub operations: usize,
    pub imported: usize,
    /// Operations left out, each with why.
    pub skipped: Vec<SkippedOperation>,
    /// Operations imported after a repair where the spec is evidently wrong, each with
    /// what was done: a keyword the validator could not use dropped (an invalid
    /// `pattern`, a keyword of the wrong type), an overlapping `oneOf` read as `anyOf`,
    /// a `required` entry naming no property dropped, a JSON Patch body read as an array.
    pub repaired: Vec<SkippedOperation>,
    /// Names cut to the length budget: (full name, name used).
    pub shortened: Vec<(String, String)>,
    /// Tools not named after their operationId alone, because several operations share
    /// it (one per API version in some specs): each with the name used and why.
    pub renamed: Vec<RenamedOperation>,
    /// The longest bare name allowed (64 minus the `<upstream>__` prefix).
    pub name_budget: usize,
    /// `$ref`s cut while inlining schemas (cycles, depth or size limits).
    pub cut_references: usize,
    /// Approximate tokens of the whole tool list (serialized bytes / 4).
    pub approx_tokens: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SkippedOperation {
    /// operationId, or `METHOD /path` when there is none.
    pub operation: String,
    pub reason: String,
}

/// An operation whose tool name differs from its operationId (see `naming`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RenamedOperation {
    /// operationId, or `METHOD /path` when there is none.
    pub operation: String,
    /// The method and path it calls.
    pub call: String,
    /// The tool's name.
    pub name: String,
    pub reason: String,
}

fn resolve_base(
    config: &OpenApiConfig,
    spec: Option<&Url>,
    servers: &[String],
) -> Result<Url, String> {
    if let Some(b) = &config.base_url {
        return Url::parse(b).map_err(|e| format!("base_url '{b}' is not a URL: {e}"));
    }
    let server = servers.first().map(String::as_str).unwrap_or("/");
    if let Ok(u) = Url::parse(server) {
        return Ok(u);
    }
    match spec.filter(|s| s.scheme() != "file") {
        Some(s) => s
            .join(server)
            .map_err(|e| format!("server '{server}' cannot be resolved: {e}")),
        None => Err(format!(
            "the server URL '{server}' is relative and the spec was read from a file; set base_url"
        )),
    }
}

/// The JSON nodes of a tool definition (iteratively: depth is the spec's choice).
fn json_nodes(tool: &JsonObject) -> usize {
    let mut count = 1;
    let mut stack: Vec<&serde_json::Value> = tool.values().collect();
    while let Some(v) = stack.pop() {
        count += 1;
        match v {
            serde_json::Value::Array(a) => stack.extend(a),
            serde_json::Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    count
}

/// How long `tool` is as compact JSON, without building the text.
fn serialized_len(tool: &JsonObject) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, tool);
    count.0
}

/// Most keywords dropped from one input schema before the operation is skipped instead.
const MAX_REPAIRS: usize = 16;

/// Makes `schema` one the call-time validator can compile: a keyword it refuses (an
/// invalid `pattern` for its regex engine, `minLength: "three"`) would otherwise fail
/// every call of the tool. Each such keyword is dropped; the answer says which and why
/// (for the import report), or why the schema is beyond repair.
fn repair_schema(schema: &mut serde_json::Value) -> Result<Vec<String>, String> {
    let mut dropped = Vec::new();
    loop {
        let (at, why) = match jsonschema::validator_for(schema) {
            Ok(_) => return Ok(dropped),
            Err(e) => (e.instance_path().to_string(), e.to_string()),
        };
        if dropped.len() >= MAX_REPAIRS || !remove_at(schema, &at) {
            return Err(format!(
                "its input schema cannot be used for validation ({why} at '{at}')"
            ));
        }
        dropped.push(format!("input schema keyword '{at}' dropped: {why}"));
    }
}

/// Removes the member or element `pointer` names; `false` when there is none (or it
/// is the root).
fn remove_at(root: &mut serde_json::Value, pointer: &str) -> bool {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return false;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match root.pointer_mut(parent) {
        Some(serde_json::Value::Object(m)) => m.remove(&last).is_some(),
        Some(serde_json::Value::Array(a)) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => {
                a.remove(i);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// What [`build`] makes of the loaded documents.
pub(super) struct Built {
    pub tools: Vec<ToolDef>,
    pub entries: HashMap<String, Endpoint>,
    pub auth: Auth,
    pub health_base: Option<Url>,
    /// The spec's authorization code flows (for `credentials: oauth`).
    pub flows: oauth_flows::Flows,
    pub report: ImportReport,
}

/// The synchronous part of an import: normalize, check references, model, convert.
pub(super) fn build(
    name: &str,
    config: &OpenApiConfig,
    mut docs: load::Documents,
    deadline: std::time::Instant,
) -> Result<Built, LoadError> {
    let in_time = || {
        if std::time::Instant::now() > deadline {
            Err(load::over_time(config))
        } else {
            Ok(())
        }
    };
    let spec_url = docs.docs[0].base.clone();
    let version = normalize::normalize_document(&mut docs.docs[0].root, spec_url.as_ref())?;
    in_time()?;
    refs::check_refs(&docs)?;
    in_time()?;
    let api = operations::build(&docs)?;
    in_time()?;
    let root_servers = api.servers.clone();
    drop(docs);
    let schemes = api.security_schemes.clone();
    let auth = Auth::new(schemes.clone(), config.auth.clone(), spec_url.clone())?;
    let mut report = first_report(version, &api);
    let kept = kept_by_filters(config, api.operations, &mut report);
    let budget = MAX_QUALIFIED.saturating_sub(name.len() + 2).max(MIN_BARE);
    let naming::Names {
        names,
        shortened,
        renamed,
    } = naming::assign(&kept, budget);
    report.shortened = shortened;
    report.name_budget = budget;
    let mut tools = Vec::with_capacity(kept.len());
    let mut entries = HashMap::with_capacity(kept.len());
    let mut size = Size::default();
    for ((op, tool_name), renamed) in kept.into_iter().zip(names).zip(renamed) {
        in_time()?;
        let label = label(&op);
        let Some((raw, op, conv)) = tool(op, &label, &tool_name, renamed, &mut report) else {
            continue;
        };
        size.add(&raw, config, &label)?;
        let base = resolve_base(config, spec_url.as_ref(), &op.servers);
        tools.push(ToolDef {
            name: tool_name.clone(),
            raw: raw.into(),
        });
        entries.insert(tool_name, Endpoint { op, conv, base });
    }
    report.imported = tools.len();
    report.approx_tokens = size.bytes / 4;
    let health_base = resolve_base(config, spec_url.as_ref(), &root_servers).ok();
    let flows_base = spec_url
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .or_else(|| health_base.clone());
    let flows = oauth_flows::read(&schemes, entries.values().map(|e| &e.op), flows_base);
    Ok(Built {
        tools,
        entries,
        auth,
        health_base,
        flows,
        report,
    })
}

/// The report as the model leaves it: the spec's version, how many operations it has,
/// those skipped and the references cut.
fn first_report(version: normalize::Version, api: &model::Api) -> ImportReport {
    ImportReport {
        spec_version: match version {
            normalize::Version::Swagger2 => "2.0",
            normalize::Version::V30 => "3.0",
            normalize::Version::V31 => "3.1",
        }
        .into(),
        operations: api.operations.len() + api.skipped.len(),
        cut_references: api.cuts,
        skipped: api
            .skipped
            .iter()
            .map(|(o, r)| SkippedOperation {
                operation: o.clone(),
                reason: r.clone(),
            })
            .collect(),
        ..ImportReport::default()
    }
}

/// The operations the configured filters keep; the others go in the report as skipped.
fn kept_by_filters(
    config: &OpenApiConfig,
    operations: Vec<model::Operation>,
    report: &mut ImportReport,
) -> Vec<model::Operation> {
    let mut kept = Vec::new();
    for op in operations {
        match convert::filter(&config.filters, &op) {
            Ok(()) => kept.push(op),
            Err(reason) => report.skipped.push(SkippedOperation {
                operation: label(&op),
                reason,
            }),
        }
    }
    kept
}

/// How an operation is named in the report: its operationId, or `METHOD /path`.
fn label(op: &model::Operation) -> String {
    op.operation_id
        .clone()
        .unwrap_or_else(|| format!("{} {}", op.method, op.path))
}

/// The tool definition of `op` (reported as `label`) named `tool_name`, with the
/// operation (kept to what calls need) and its conversion; `None` when its input schema
/// is beyond repair (the report says so). Repairs and a rename go in the report.
fn tool(
    mut op: model::Operation,
    label: &str,
    tool_name: &str,
    renamed: Option<naming::Renamed>,
    report: &mut ImportReport,
) -> Option<(JsonObject, model::Operation, convert::Converted)> {
    let mut conv = convert::convert(&op);
    match repair_schema(&mut conv.input_schema) {
        Ok(dropped) => {
            let spec_repairs = std::mem::take(&mut op.repairs);
            report
                .repaired
                .extend(
                    spec_repairs
                        .into_iter()
                        .chain(dropped)
                        .map(|reason| SkippedOperation {
                            operation: label.to_owned(),
                            reason,
                        }),
                )
        }
        Err(reason) => {
            report.skipped.push(SkippedOperation {
                operation: label.to_owned(),
                reason,
            });
            return None;
        }
    }
    let mut raw = convert::tool_json(tool_name, &mut op, &mut conv);
    op.keep_what_calls_need();
    if let Some(renamed) = renamed {
        // Operations sharing an operationId often share their description too:
        // say which one this tool calls, first, where a model reads it.
        if let Some(serde_json::Value::String(d)) = raw.get_mut("description") {
            *d = convert::cap(
                &format!(
                    "({} {}; one of {} operations named '{label}') {d}",
                    op.method, op.path, renamed.shared_by
                ),
                convert::MAX_DESCRIPTION,
            );
        }
        report.renamed.push(RenamedOperation {
            operation: label.to_owned(),
            call: format!("{} {}", op.method, op.path),
            name: tool_name.to_owned(),
            reason: renamed.reason,
        });
    }
    Some((raw, op, conv))
}

/// The size of the tools made so far.
#[derive(Default)]
struct Size {
    /// Serialized bytes.
    bytes: usize,
    /// JSON nodes.
    nodes: usize,
}

impl Size {
    /// Counts one more tool, `raw` (of the operation `label`); `Err` once the tools hold
    /// more JSON nodes than the configuration allows.
    fn add(
        &mut self,
        raw: &JsonObject,
        config: &OpenApiConfig,
        label: &str,
    ) -> Result<(), LoadError> {
        // A schema is copied into every tool that uses it: a spec small enough to
        // load could still make tools without end.
        self.nodes += json_nodes(raw);
        if self.nodes > config.max_schema_nodes {
            return Err(LoadError::Invalid {
                pointer: format!("operation {label}"),
                detail: format!(
                    "the tools made from this spec hold more JSON nodes than \
                     max_schema_nodes allows ({}): schemas used by many operations are \
                     copied into each; raise max_schema_nodes if this spec is trusted",
                    config.max_schema_nodes
                ),
            });
        }
        self.bytes += serialized_len(raw);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unusable_keywords_are_dropped_and_named() {
        let mut schema = json!({"type": "object", "properties": {
            "q": {"type": "string", "pattern": "(?<!x"},
            "n": {"type": "string", "minLength": "three"},
            "a/b": {"type": "string", "pattern": "["},
            "ok": {"type": "string", "pattern": "^[a-z]+$"}
        }, "required": ["q"]});
        let dropped = repair_schema(&mut schema).unwrap();
        assert_eq!(dropped.len(), 3, "{dropped:?}");
        assert!(dropped.iter().any(|d| d.contains("/properties/q/pattern")));
        assert!(
            dropped
                .iter()
                .any(|d| d.contains("/properties/n/minLength"))
        );
        assert!(schema["properties"]["a/b"].get("pattern").is_none());
        assert_eq!(schema["properties"]["ok"]["pattern"], "^[a-z]+$");
        assert_eq!(schema["required"], json!(["q"]));
        let mut fine = json!({"type": "object"});
        assert_eq!(repair_schema(&mut fine).unwrap(), Vec::<String>::new());
        let mut typed = json!({"type": 5});
        assert_eq!(repair_schema(&mut typed).unwrap().len(), 1);
        assert_eq!(typed, json!({}));
        // beyond repair: the root itself
        let e = repair_schema(&mut json!(5)).unwrap_err();
        assert!(e.contains("cannot be used for validation"), "{e}");
    }
}
