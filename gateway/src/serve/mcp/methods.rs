//! The answers to a session's requests besides `tools/call`: `initialize`, `ping`,
//! `tools/list` (written from the catalog's pre-serialized definitions, no tree
//! built), and prompts, resources and completion from every upstream (see
//! [`features`]).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::features;
use super::{NEWEST_SESSION_VERSION, SESSION_VERSIONS};
use super::{Reply, wire};
use crate::access::{Caller, View};
use crate::gateway::Gateway;
use toolgate_adapters::CallContext;

#[derive(Deserialize)]
pub(super) struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Option<std::borrow::Cow<'a, str>>,
    /// What the client can do (only URL-mode elicitation is read).
    #[serde(default)]
    pub capabilities: Option<serde_json::Value>,
}

/// The version a session speaks: the client's when this gateway speaks it (with
/// sessions), otherwise the newest version with sessions.
pub(super) fn negotiated_version(params: &InitializeParams) -> &'static str {
    let asked = params.protocol_version.as_deref();
    SESSION_VERSIONS
        .iter()
        .find(|v| Some(**v) == asked)
        .copied()
        .unwrap_or(NEWEST_SESSION_VERSION)
}

/// The `initialize` result of a session that speaks `version`.
pub(super) fn initialize_result(gateway: &Gateway, version: &str) -> String {
    let mut capabilities = crate::serve::mcp::features::capabilities(gateway);
    // Core tasks exist in this version only (2026-07-28 has them as an extension).
    if version == super::tasks::SESSION_TASKS_VERSION {
        capabilities["tasks"] = super::tasks::session_capability();
    }
    json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    })
    .to_string()
}

/// What a 2026-07-28 list result adds (see [`crate::serve::mcp::features::decorate_for_stateless`]).
pub(super) const STATELESS_LIST_FIELDS: &str =
    r#","resultType":"complete","ttlMs":0,"cacheScope":"private""#;

/// The protocol tools' definitions as `tools/list` sends them, and what they cost.
pub(super) struct ProtocolTools {
    definitions: Vec<Arc<str>>,
    tokens: usize,
}

impl ProtocolTools {
    pub(super) fn new(encoding: crate::truncate::Encoding) -> ProtocolTools {
        let definitions: Vec<Arc<str>> = crate::catalog::protocol_tools::definitions()
            .into_iter()
            .filter_map(|d| serde_json::to_string(&d).ok())
            .map(Arc::from)
            .collect();
        ProtocolTools {
            definitions,
            tokens: crate::catalog::protocol_tools::listed_tokens(encoding),
        }
    }
}

/// `tools/list`'s `_meta` key: tokens of every definition the caller lists (all pages).
pub(super) const LISTED_TOKENS: &str = "toolgate/listedTokens";
/// `tools/list`'s `_meta` key: allowed tools not in the list (found with `tool_search`).
pub(super) const UNLISTED_TOOLS: &str = "toolgate/unlistedTools";

/// The `tools/list` answer to request `id` for `caller`: the protocol tools, then the
/// visible catalog tools as the catalog serialized them (every field the upstream
/// sent), one page of `sessions.list_page_size` after the request's `cursor`, then
/// `nextCursor` when more follow, then `extra` (more result fields, as JSON text
/// starting with a comma, or empty). Large definitions go out as the catalog holds
/// them, never copied: a large catalog's list is megabytes, and clients may ask for
/// it at once.
pub(super) fn list_tools(
    id: &str,
    gateway: &Gateway,
    protocol_tools: &ProtocolTools,
    caller: &Caller,
    envelope: &wire::Envelope<'_>,
    extra: &str,
) -> Reply {
    #[derive(Deserialize)]
    struct ListParams {
        #[serde(default)]
        cursor: Option<Value>,
    }
    let start = envelope
        .params::<ListParams>()
        .and_then(|p| features::page_start(p.cursor.as_ref()).map_err(|e| e.message));
    let start = match start {
        Ok(start) => start,
        Err(message) => {
            return Reply::Message(wire::error_message(
                id,
                toolgate_adapters::codes::INVALID_PARAMS,
                &message,
                None,
            ));
        }
    };
    let view = View::of(gateway, caller);
    let visible = view.visible(caller);
    // Only definitions a client can take as MCP tools are listed: an object input
    // schema is what every client checks first.
    let listable = || {
        visible
            .iter()
            .filter(|e| e.get("inputSchema").is_some_and(Value::is_object))
    };
    let listed_tokens =
        protocol_tools.tokens + listable().map(|e| e.definition_tokens).sum::<usize>();
    let definitions = protocol_tools
        .definitions
        .iter()
        .chain(listable().map(|e| &e.definition_json));
    let (page, next) = features::page(definitions, start, gateway.config().sessions.list_page_size);
    let next = next.map(|cursor| format!(",\"nextCursor\":{}", Value::String(cursor)));
    // Allowed tools this list leaves out (the first list is bounded): the model finds
    // them with `tool_search`.
    let unlisted = view
        .allowed
        .searchable_tools()
        .len()
        .saturating_sub(visible.len());
    let meta = format!(
        ",\"_meta\":{{\"{LISTED_TOKENS}\":{listed_tokens},\"{UNLISTED_TOOLS}\":{unlisted}}}"
    );
    let copied = page
        .iter()
        .filter(|d| wire::MessageParts::copies(d))
        .map(|d| d.len() + 1)
        .sum::<usize>()
        + extra.len()
        + meta.len()
        + 64;
    let parts = wire::result_message_parts(id, copied, |out| {
        out.push_str("{\"tools\":[");
        for (index, definition) in page.iter().enumerate() {
            if index > 0 {
                out.push_str(",");
            }
            out.push_shared(definition);
        }
        out.push_str("]");
        out.push_str(next.as_deref().unwrap_or(""));
        out.push_str(&meta);
        out.push_str(extra);
        out.push_str("}");
    });
    Reply::Parts(parts)
}

/// The 2026-07-28 `server/discover` result: the versions, capabilities and
/// instructions `initialize` gives a session.
pub(super) fn discover_result(gateway: &Gateway) -> String {
    let mut versions: Vec<&str> = SESSION_VERSIONS.to_vec();
    versions.extend(super::sessionless::SESSIONLESS_VERSIONS);
    let mut capabilities = crate::serve::mcp::features::capabilities(gateway);
    capabilities["extensions"] = json!({super::tasks::EXTENSION: {}});
    json!({
        "resultType": "complete",
        "supportedVersions": versions,
        "capabilities": capabilities,
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
    })
    .to_string()
}

const INSTRUCTIONS: &str = "toolgate: one catalog of tools from many upstreams; names are \
    <upstream>__<tool>. tools/list shows a first set only: find other tools with tool_search \
    and add them with tool_expand_tools. Large tool definitions are listed abbreviated: \
    tool_schema returns any part in full.";

fn server_info() -> Value {
    json!({"name": "toolgate", "version": env!("CARGO_PKG_VERSION")})
}

/// Answers a prompts, resources or completion request for `caller` (see
/// [`features`]); the whole answer message. Sessionless (2026-07-28) answers carry
/// the version's result fields.
pub(super) async fn feature(
    gateway: &Gateway,
    caller: &Caller,
    id: &str,
    method: &str,
    params: Option<&RawValue>,
) -> Vec<u8> {
    let params = match params.map(|p| serde_json::from_str::<Value>(p.get())) {
        None => json!({}),
        Some(Ok(value)) => value,
        Some(Err(error)) => {
            return wire::error_message(
                id,
                toolgate_adapters::codes::INVALID_PARAMS,
                &error.to_string(),
                None,
            );
        }
    };
    let ctx = CallContext::new(
        gateway.config().call_timeout,
        crate::telemetry::new_correlation_id(),
    );
    match features::answer(gateway, caller, method, params, ctx).await {
        Ok(mut result) => {
            if caller.session.is_none() {
                features::decorate_for_stateless(method, &mut result);
            }
            wire::result_message(id, &result.to_string())
        }
        Err(error) => wire::error_message(id, error.code, &error.message, error.data),
    }
}
