//! The answers to a session's requests besides `tools/call`: `initialize`, `ping`,
//! `tools/list` (written from the catalog's pre-serialized definitions, no tree
//! built), and what is forwarded to the passthrough upstream (prompts, resources,
//! completion, the logging level).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::wire;
use super::{LEGACY_VERSIONS, NEWEST_LEGACY_VERSION};
use crate::access::{Caller, View};
use crate::gateway::Gateway;
use crate::serve::mcp_shared::McpShared;
use crate::serve::passthrough;

#[derive(Deserialize)]
pub struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Option<std::borrow::Cow<'a, str>>,
}

/// The `initialize` result: the client's version when this gateway speaks it (with
/// sessions), otherwise the newest version with sessions.
pub fn initialize_result(gateway: &Gateway, params: &InitializeParams) -> String {
    let version = params
        .protocol_version
        .as_deref()
        .filter(|v| LEGACY_VERSIONS.contains(v))
        .unwrap_or(NEWEST_LEGACY_VERSION);
    let capabilities =
        serde_json::to_value(passthrough::capabilities(gateway)).unwrap_or_else(|_| json!({}));
    json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": "toolgate", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "toolgate: one catalog of tools from many upstreams; names are <upstream>__<tool>.",
    })
    .to_string()
}

/// The `tools/list` result for `caller`: the protocol tools, then the visible catalog
/// tools as the catalog serialized them (every field the upstream sent).
pub fn list_tools(shared: &McpShared, protocol_tools: &[Arc<str>], caller: &Caller) -> String {
    let view = View::of(&shared.gateway, caller);
    // Only definitions valid as MCP are listed (the same set the stdio surface lists).
    let valid = shared.typed(&view.catalog);
    let visible = view.visible(caller);
    let size = protocol_tools.iter().map(|d| d.len() + 1).sum::<usize>()
        + visible
            .iter()
            .map(|e| e.definition_json.len() + 1)
            .sum::<usize>();
    let mut out = String::with_capacity(size + 16);
    out.push_str("{\"tools\":[");
    let definitions = protocol_tools.iter().map(|d| &**d).chain(
        visible
            .iter()
            .filter(|e| valid.by_name.contains_key(&e.name))
            .map(|e| &*e.definition_json),
    );
    for (index, definition) in definitions.enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(definition);
    }
    out.push_str("]}");
    out
}

/// The methods forwarded to the passthrough upstream unchanged.
pub fn is_forwarded(method: &str) -> bool {
    matches!(
        method,
        "prompts/list"
            | "prompts/get"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "completion/complete"
            | "logging/setLevel"
    )
}

/// Forwards `method` to the passthrough upstream; the whole answer message.
pub async fn forward(
    gateway: &Gateway,
    id: &str,
    method: &str,
    params: Option<&RawValue>,
) -> Vec<u8> {
    // Without a passthrough upstream the level only concerns the gateway's own
    // progress log lines, which are always sent.
    if method == "logging/setLevel" && gateway.passthrough().is_none() {
        return wire::result_message(id, "{}");
    }
    let params = match params.map(|p| serde_json::from_str::<Value>(p.get())) {
        None => None,
        Some(Ok(value)) => Some(value),
        Some(Err(error)) => {
            return wire::error_message(id, wire::INVALID_PARAMS, &error.to_string(), None);
        }
    };
    match passthrough::forward_value(gateway, method, params, format!("mcp-{id}")).await {
        Ok(result) => wire::result_message(id, &result.to_string()),
        Err(error) => wire::error_message(id, i64::from(error.code.0), &error.message, error.data),
    }
}
