//! The one place where a [`ToolError`] becomes what a surface sends.
//!
//! MCP: an unknown tool is a JSON-RPC error (`-32602`, as the spec asks); every other
//! failure is a tool result with `isError: true`, because clients show those to the
//! model, which can then act on the message (retry, fix arguments, pick another tool).
//! HTTP surfaces use [`http_status`].

use rmcp::ErrorData as McpError;
use serde_json::{Value, json};
use toolgate_adapters::{JsonObject, ToolError};

/// How a failed call reaches an MCP client.
pub enum McpFailure {
    /// A JSON-RPC error response.
    Protocol(McpError),
    /// A `CallToolResult` with `isError: true` (raw JSON).
    ToolResult(JsonObject),
}

/// Maps a call failure for MCP.
pub fn to_mcp(error: &ToolError) -> McpFailure {
    match error {
        ToolError::NotFound(message) => McpFailure::Protocol(McpError::invalid_params(
            message.clone(),
            Some(json!({"code": error.code()})),
        )),
        // MCP asks for "method not found" when a tool's taskSupport is not honoured.
        ToolError::ExecutionMode(message) => McpFailure::Protocol(McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            message.clone(),
            Some(json!({"code": error.code()})),
        )),
        _ => McpFailure::ToolResult(error_result(error)),
    }
}

/// The refusal of a plain call of a tool that runs only as a task.
pub fn task_required(name: &str) -> ToolError {
    ToolError::ExecutionMode(format!(
        "tool '{name}' runs only as a background task: call it as a task (MCP: \
         `\"task\": {{}}` in tools/call, or the tasks extension; REST: \
         `\"background\": true`) and poll the task for its result"
    ))
}

/// The refusal of a task for a tool that may not run as one.
pub fn task_forbidden(name: &str) -> ToolError {
    ToolError::ExecutionMode(format!(
        "tool '{name}' cannot run as a background task (its taskSupport is forbidden): \
         call it plainly"
    ))
}

/// A raw `CallToolResult` carrying the error's message, with its code in `_meta` (and
/// where the user connects, `toolgate/connectUrl`, when authorization is needed).
pub fn error_result(error: &ToolError) -> JsonObject {
    let mut meta = JsonObject::new();
    meta.insert("toolgate/error".into(), Value::String(error.code().into()));
    if let ToolError::RateLimited {
        retry_after: Some(after),
        ..
    } = error
    {
        meta.insert(
            "toolgate/retryAfterMs".into(),
            json!(after.as_millis() as u64),
        );
    }
    if let Some(url) = error.connect_url() {
        meta.insert("toolgate/connectUrl".into(), Value::String(url.to_owned()));
    }
    let mut result = JsonObject::new();
    result.insert(
        "content".into(),
        json!([{"type": "text", "text": error.to_string()}]),
    );
    result.insert("isError".into(), Value::Bool(true));
    result.insert("_meta".into(), Value::Object(meta));
    result
}

/// The HTTP status for a failure on the REST surfaces.
pub fn http_status(error: &ToolError) -> http::StatusCode {
    use http::StatusCode as S;
    match error {
        ToolError::NotFound(_) => S::NOT_FOUND,
        ToolError::InvalidArgs(_) => S::BAD_REQUEST,
        ToolError::Failed(_) => S::BAD_GATEWAY,
        // 499 is the de-facto "client closed request"; unused by the standard.
        ToolError::Cancelled(_) => S::from_u16(499).unwrap_or(S::BAD_REQUEST),
        ToolError::Unavailable(_) => S::SERVICE_UNAVAILABLE,
        ToolError::Timeout(_) => S::GATEWAY_TIMEOUT,
        ToolError::RateLimited { .. } => S::TOO_MANY_REQUESTS,
        ToolError::NotSelected(_) => S::CONFLICT,
        ToolError::ExecutionMode(_) => S::BAD_REQUEST,
        // The caller is authenticated here; what is missing is its authorization at
        // the upstream (401 would tell a client to re-authenticate with the gateway).
        ToolError::AuthorizationRequired { .. } => S::FORBIDDEN,
        // The upstream refused what the gateway sent for this caller: a bad gateway,
        // not a reason for the caller to re-authenticate here.
        ToolError::Unauthorized { .. } => S::BAD_GATEWAY,
    }
}

/// The error for a name that is not in the catalog. It points to what every caller
/// can call — the `tool_search` tool, on every surface — not to a protocol method a
/// function-calling model has no way to send.
pub fn unknown_tool(name: &str) -> ToolError {
    ToolError::NotFound(format!(
        "unknown tool '{name}': no tool of that name is available here; find the right \
         one with the {} tool and call it by the exact name it returns",
        crate::catalog::protocol_tools::SEARCH
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn unknown_tools_are_protocol_errors_the_rest_are_results() {
        assert!(
            matches!(to_mcp(&unknown_tool("x")), McpFailure::Protocol(e) if e.code.0 == -32602)
        );
        for error in [
            ToolError::Failed("f".into()),
            ToolError::unavailable("ev", "process exited"),
            ToolError::timeout("ev", "t", Duration::from_secs(1)),
            ToolError::InvalidArgs("bad".into()),
        ] {
            let McpFailure::ToolResult(result) = to_mcp(&error) else {
                panic!("{error:?} should be a tool result");
            };
            assert_eq!(result["isError"], true);
            assert_eq!(result["_meta"]["toolgate/error"], error.code());
            assert_eq!(result["content"][0]["text"], error.to_string());
        }
    }

    #[test]
    fn unknown_tools_point_to_what_any_caller_can_call() {
        let text = unknown_tool("x").to_string();
        assert!(text.contains("tool_search"), "{text}");
        assert!(!text.contains("tools/list"), "{text}");
    }

    #[test]
    fn statuses() {
        assert_eq!(http_status(&unknown_tool("x")), 404);
        assert_eq!(http_status(&ToolError::unavailable("a", "b")), 503);
    }
}
