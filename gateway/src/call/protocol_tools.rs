//! The gateway's own tools, always visible to every caller:
//!
//! - `tool_expand_tools` `{"tool_names": [...]}` — adds tools (exact names) to the
//!   session's visible set, within the tenant's allowed set only; partial success;
//!   returns the new tools' full definitions so a client that cannot refresh its list
//!   can still call them;
//! - `tool_search` `{"query", "limit"?}` — ranked tools within the allowed set;
//! - `tool_invoke` `{"name", "arguments"}` — calls an allowed tool by name, for
//!   clients that only call what they listed;
//! - `tool_schema` `{"name", "path"?}` — an allowed tool's whole definition, or the
//!   part at a JSON pointer: what an abbreviated listing (see `catalog::brief`) left
//!   out.
//!
//! Results carry the same JSON as `structuredContent` and as text.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_adapters::{CallContext, CallOutput, JsonObject, ToolError};

use crate::access::{Caller, View};
use crate::gateway::Gateway;
use crate::policy::{Item, Method, Scope};

pub use crate::catalog::protocol_tools::{
    EXPAND, INVOKE, MAX_NAMES_PER_EXPAND, SCHEMA, SEARCH, definition, definitions,
    is_protocol_tool, listed_tokens,
};

/// Tokens a `tool_schema` answer keeps free under the result budget for its envelope.
const SCHEMA_ENVELOPE_TOKENS: usize = 200;

/// Runs a protocol tool. `Ok(None)` when `name` is not one; the `bool` says whether
/// the caller's visible set changed (the surface then announces `list_changed`).
pub(super) async fn call(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    arguments: JsonObject,
    ctx: CallContext,
) -> Option<Result<(CallOutput, bool), ToolError>> {
    Some(match name {
        EXPAND => expand(gateway, caller, &arguments).await,
        SEARCH => search(gateway, caller, &arguments).map(|out| (out, false)),
        INVOKE => invoke(gateway, caller, arguments, ctx)
            .await
            .map(|out| (out, false)),
        SCHEMA => schema(gateway, caller, &arguments).map(|out| (out, false)),
        _ => return None,
    })
}

fn output(value: Value) -> CallOutput {
    let mut raw = JsonObject::new();
    raw.insert(
        "content".into(),
        json!([{"type": "text", "text": value.to_string()}]),
    );
    raw.insert("structuredContent".into(), value);
    CallOutput::new(raw)
}

/// `tool_expand_tools`.
async fn expand(
    gateway: &Gateway,
    caller: &Caller,
    arguments: &JsonObject,
) -> Result<(CallOutput, bool), ToolError> {
    let requested = string_list(arguments.get("tool_names"));
    let result = expand_requested(gateway, caller, requested).await?;
    let changed = result
        .get("expanded_tools")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
        && caller.session.is_some();
    Ok((output(result), changed))
}

/// The expansion of the names `tool_expand_tools` was given (`None`: its `tool_names`
/// is not a list of strings), checked alike for the MCP tool and the REST endpoint.
pub async fn expand_requested(
    gateway: &Gateway,
    caller: &Caller,
    requested: Option<Vec<String>>,
) -> Result<Value, ToolError> {
    let requested = requested.ok_or_else(|| {
        ToolError::InvalidArgs(format!(
            "{EXPAND} takes {{\"tool_names\": [\"exact_tool_name\", …]}}: a list of strings"
        ))
    })?;
    if requested.len() > MAX_NAMES_PER_EXPAND {
        return Err(ToolError::InvalidArgs(format!(
            "{EXPAND} takes at most {MAX_NAMES_PER_EXPAND} names per call"
        )));
    }
    expand_names(gateway, caller, &requested).await
}

/// The expansion itself.
async fn expand_names(
    gateway: &Gateway,
    caller: &Caller,
    requested: &[String],
) -> Result<Value, ToolError> {
    let view = View::of(gateway, caller);
    let mut invalid = Vec::new();
    let mut already_visible = Vec::new();
    let mut to_add = Vec::new();
    for name in dedupe(requested) {
        if !view.permits(caller, Item::Tool(&name), Method::Expand) {
            invalid.push(name);
        } else if view.permits(caller, Item::Tool(&name), Method::List) {
            already_visible.push(name);
        } else {
            to_add.push(name);
        }
    }

    let (expanded_tools, already_selected, expanded_after) = match &caller.session {
        Some((id, _)) => {
            let expansion = gateway
                .sessions
                .expand(id, &caller.tenant.name, &to_add)
                .await
                .map_err(|e| ToolError::Unavailable(e.to_string()))?
                .ok_or_else(|| {
                    ToolError::NotFound(
                        "this session has expired: start a new one (initialize again)".into(),
                    )
                })?;
            let mut already = already_visible;
            already.extend(expansion.already);
            (expansion.added, already, expansion.expanded)
        }
        // Sessionless: nothing is stored; the definitions are the expansion.
        None => (to_add, already_visible, BTreeSet::new()),
    };

    let cap = gateway.config().sessions.expandable_list_cap;
    let expandable: Vec<&String> = view
        .allowed
        .expandable_tools(Scope::Session(&expanded_after))
        .filter(|n| !expanded_tools.contains(n))
        .collect();
    let total_expandable = expandable.len();
    let available: Vec<&String> = expandable.into_iter().take(cap).collect();

    let did_you_mean: serde_json::Map<String, Value> = invalid
        .iter()
        .filter_map(|bad| {
            closest(bad, view.allowed.searchable_tools())
                .map(|good| (bad.clone(), Value::String(good)))
        })
        .collect();
    let definitions: Vec<Value> = expanded_tools
        .iter()
        .filter_map(|n| view.catalog.get(n))
        .map(|e| Value::Object(e.definition()))
        .collect();

    let success = !expanded_tools.is_empty() || !already_selected.is_empty();
    let mut result = json!({
        "success": success,
        "expanded_tools": expanded_tools,
        "invalid_tools": invalid,
        "already_selected_tools": already_selected,
        "available_expandable_tools": available,
        "available_expandable_total": total_expandable,
        "definitions": definitions,
    });
    if !did_you_mean.is_empty() {
        result["did_you_mean"] = Value::Object(did_you_mean);
    }
    if total_expandable > cap {
        result["note"] = Value::String(format!(
            "available_expandable_tools lists the first {cap} of {total_expandable} (sorted); use {SEARCH} to find others"
        ));
    }
    Ok(result)
}

/// `tool_search`.
fn search(
    gateway: &Gateway,
    caller: &Caller,
    arguments: &JsonObject,
) -> Result<CallOutput, ToolError> {
    let query = arguments
        .get("query")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ToolError::InvalidArgs(format!(
                "{SEARCH} takes {{\"query\": \"what you want to do\"}}"
            ))
        })?;
    let limit = arguments
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(10)
        .clamp(1, 50) as usize;
    let view = View::of(gateway, caller);
    let results = gateway.search_where(&view.catalog, query, limit, |name| {
        view.permits(caller, Item::Tool(name), Method::Search)
    });
    Ok(output(json!({"query": query, "results": results})))
}

/// `tool_schema`.
fn schema(
    gateway: &Gateway,
    caller: &Caller,
    arguments: &JsonObject,
) -> Result<CallOutput, ToolError> {
    let usage = || {
        ToolError::InvalidArgs(format!(
            "{SCHEMA} takes {{\"name\": \"exact_tool_name\", \"path\"?: \"/inputSchema/properties/…\"}}"
        ))
    };
    let name = arguments
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(usage)?;
    let path = match arguments.get("path") {
        None | Some(Value::Null) => None,
        Some(Value::String(path)) => Some(path.as_str()),
        Some(_) => return Err(usage()),
    };
    // Over MCP an unknown *argument* must not read as an unknown `tool_schema`.
    let fit = Some(gateway.config().results.max_tokens);
    schema_answer(gateway, caller, name, path, fit)
        .map(|answer| output(serde_json::to_value(answer).unwrap_or_default()))
        .map_err(|error| match error {
            ToolError::NotFound(message) => ToolError::InvalidArgs(message),
            other => other,
        })
}

/// A tool's definition, or the part at JSON pointer `path` (see
/// [`crate::catalog::schema_at`]), for a tool the caller may use — shared by
/// `tool_schema` and `GET /v1/tools/{name}/schema`. A tool the caller may not use is
/// answered as one that does not exist. With `fit` (a model reads it: `tool_schema`),
/// a part over that many tokens comes abbreviated the way listings are, naming the
/// deeper paths; without (a program reads it: REST) it comes whole.
pub fn schema_answer(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    path: Option<&str>,
    fit: Option<usize>,
) -> Result<SchemaAnswer, ToolError> {
    let unknown = || crate::errors::unknown_tool(name);
    // A protocol tool's own definition, or a catalog entry the caller may use.
    let (entry, definition) = match definition(name) {
        Some(definition) => (None, definition),
        None => {
            let view = View::of(gateway, caller);
            if !view.permits(caller, Item::Tool(name), Method::Describe) {
                return Err(unknown());
            }
            let entry = Arc::clone(view.catalog.get(name).ok_or_else(unknown)?);
            let definition = entry.full_definition();
            (Some(entry), definition)
        }
    };
    let path = path.unwrap_or("");
    if !path.is_empty() && !path.starts_with('/') {
        return Err(ToolError::InvalidArgs(format!(
            "path '{path}' is not a JSON pointer: start it with '/', as in /inputSchema/properties/<parameter>"
        )));
    }
    let found = crate::catalog::schema_at(&definition, path).ok_or_else(|| {
        ToolError::NotFound(format!(
            "the definition of '{name}' has nothing at path '{path}': paths are JSON pointers such as /inputSchema/properties/<parameter>; call {SCHEMA} without path for the whole definition"
        ))
    })?;
    let encoding = gateway.config().results.encoding;
    let limit = fit.map(|tokens| tokens.saturating_sub(SCHEMA_ENVELOPE_TOKENS).max(1));
    let fits = limit.is_none_or(|limit| {
        crate::truncate::count_till_limit(&found.to_string(), encoding, limit).is_some()
    });
    let (schema, abbreviated) = match found {
        // The whole definition, too large: its listing, which names every part.
        Value::Object(_) if !fits && path.is_empty() => {
            let listed = entry.map(|entry| entry.definition()).unwrap_or(definition);
            (Value::Object(listed), Some(true))
        }
        Value::Object(part) if !fits => {
            let part = crate::catalog::abbreviate_schema(
                &part,
                path,
                limit.unwrap_or(usize::MAX),
                encoding,
            );
            (Value::Object(part), Some(true))
        }
        found => (found, None),
    };
    Ok(SchemaAnswer {
        name: name.to_owned(),
        path: path.to_owned(),
        schema,
        abbreviated,
    })
}

/// What `tool_schema` and `GET /v1/tools/{name}/schema` answer (`ToolSchema` in
/// `/openapi.json`, which describes it from this type).
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "ToolSchema", description = "`GET /v1/tools/{name}/schema`.")]
pub struct SchemaAnswer {
    pub name: String,
    /// The JSON pointer asked for (empty: the whole definition).
    pub path: String,
    /// The value at `path` in the whole definition, with the local `$ref` targets it
    /// uses attached.
    pub schema: Value,
    /// Never set over REST (that answer is always whole); `tool_schema` sets it when a
    /// part too large for one result comes abbreviated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abbreviated: Option<bool>,
}

/// `tool_invoke`.
async fn invoke(
    gateway: &Gateway,
    caller: &Caller,
    arguments: JsonObject,
    ctx: CallContext,
) -> Result<CallOutput, ToolError> {
    let name = arguments
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ToolError::InvalidArgs(format!(
                "{INVOKE} takes {{\"name\": \"exact_tool_name\", \"arguments\": {{…}}}}"
            ))
        })?
        .to_owned();
    if is_protocol_tool(&name) {
        return Err(ToolError::InvalidArgs(format!(
            "{INVOKE} calls catalog tools; call '{name}' directly"
        )));
    }
    let mut tool_arguments = match arguments.get("arguments") {
        None | Some(Value::Null) => JsonObject::new(),
        Some(Value::Object(object)) => object.clone(),
        Some(_) => {
            return Err(ToolError::InvalidArgs(format!(
                "{INVOKE}: `arguments` must be an object"
            )));
        }
    };
    // A model that read the tool's strict or Gemini export may send the values it
    // declares as JSON strings that way here too.
    if let Some(entry) = View::of(gateway, caller).catalog.get(&name) {
        crate::export::decode::decode(entry.get("inputSchema"), &mut tool_arguments);
    }
    super::call_catalog_tool(gateway, caller, &name, tool_arguments, ctx)
        .await
        .map(|(output, _)| output)
}

fn string_list(value: Option<&Value>) -> Option<Vec<String>> {
    value?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn dedupe(names: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    names
        .iter()
        .filter(|n| seen.insert(n.as_str()))
        .cloned()
        .collect()
}

/// The allowed name closest to `bad`, when it is close enough to be a likely typo.
fn closest(bad: &str, allowed: &BTreeSet<String>) -> Option<String> {
    allowed
        .iter()
        .map(|name| (strsim::jaro_winkler(bad, name), name))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, name)| name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_valid_tools() {
        let defs = definitions();
        assert_eq!(defs.len(), 4);
        for def in defs {
            let name = def["name"].as_str().unwrap();
            assert!(is_protocol_tool(name));
            assert_eq!(def["inputSchema"]["type"], "object");
        }
    }

    #[test]
    fn did_you_mean_only_close_allowed_names() {
        let allowed: BTreeSet<String> = ["gh__get_repo", "gh__list_issues"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            closest("gh__get_rep", &allowed).as_deref(),
            Some("gh__get_repo")
        );
        assert_eq!(closest("stripe__refund", &allowed), None);
    }
}
