//! Everything besides tools, for a `namespace: none` passthrough upstream: prompts,
//! resources, completion and the logging level are forwarded unchanged, and the
//! upstream's capabilities for them are advertised as the gateway's own.

use rmcp::ErrorData as McpError;
use rmcp::model::{ErrorCode, ServerCapabilities};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use toolgate_adapters::CallContext;

use crate::errors::{self, McpFailure};
use crate::gateway::Gateway;

/// Forwards `method` with `params` and decodes the upstream's answer as `T`.
pub async fn forward<T: DeserializeOwned>(
    gateway: &Gateway,
    method: &str,
    params: Option<impl Serialize>,
    correlation_id: String,
) -> Result<T, McpError> {
    let params = params
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
    let value = forward_value(gateway, method, params, correlation_id).await?;
    serde_json::from_value(value).map_err(|error| {
        McpError::internal_error(
            format!("the upstream's answer to {method} is not valid MCP: {error}"),
            None,
        )
    })
}

/// Forwards `method` with raw `params`: the upstream's raw result, or the error an
/// MCP client gets (the upstream's own JSON-RPC error, or the gateway's).
pub async fn forward_value(
    gateway: &Gateway,
    method: &str,
    params: Option<Value>,
    correlation_id: String,
) -> Result<Value, McpError> {
    let ctx = CallContext::new(gateway.config().call_timeout, correlation_id);
    match gateway.forward(method, params, ctx).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(rpc)) => Err(McpError::new(
            ErrorCode(rpc.code as i32),
            rpc.message,
            rpc.data,
        )),
        Err(error) => Err(match errors::to_mcp(&error) {
            McpFailure::Protocol(error) => error,
            McpFailure::ToolResult(_) => McpError::internal_error(error.to_string(), None),
        }),
    }
}

/// The gateway's capabilities: tools always; prompts, resources and completions as the
/// passthrough upstream declares them.
pub fn capabilities(gateway: &Gateway) -> ServerCapabilities {
    let mut capabilities = serde_json::json!({
        "tools": {"listChanged": true},
        "logging": {},
    });
    if let Some(upstream_caps) = gateway
        .passthrough()
        .and_then(|m| m.upstream.server_info())
        .and_then(|info| info.get("capabilities").cloned())
        && let (Some(ours), Value::Object(theirs)) = (capabilities.as_object_mut(), upstream_caps)
    {
        for key in ["prompts", "resources", "completions"] {
            if let Some(value) = theirs.get(key) {
                ours.insert(key.to_owned(), value.clone());
            }
        }
    }
    serde_json::from_value(capabilities).unwrap_or_default()
}
