//! The one error taxonomy of a tool call.
//!
//! Every failure on the call path is one of these kinds. The gateway maps them to MCP
//! `isError` results, JSON-RPC errors and HTTP statuses in exactly one place
//! (`toolgate::errors`). Messages are written for an LLM or a human to act on: what
//! failed, and what to do next.

use std::time::Duration;

/// Why a call did not produce a tool result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// No tool of that name (or not one the caller may see: the two are indistinguishable
    /// on purpose).
    #[error("{0}")]
    NotFound(String),
    /// The arguments do not fit the tool's input schema; each violation listed.
    #[error("{0}")]
    InvalidArgs(String),
    /// The upstream ran the call and it failed (protocol error, upstream JSON-RPC error).
    #[error("{0}")]
    Failed(String),
    /// The caller cancelled the call.
    #[error("{0}")]
    Cancelled(String),
    /// The upstream is down or reconnecting; calls fail fast until it is back.
    #[error("{0}")]
    Unavailable(String),
    /// The call did not finish before its deadline.
    #[error("{0}")]
    Timeout(String),
    /// Too many calls; retry after the given time.
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
    },
    /// The tool is allowed but not in the session's visible set yet.
    #[error("{0}")]
    NotSelected(String),
}

impl ToolError {
    /// A short stable code for logs, metrics and REST error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::NotFound(_) => "not_found",
            ToolError::InvalidArgs(_) => "invalid_args",
            ToolError::Failed(_) => "failed",
            ToolError::Cancelled(_) => "cancelled",
            ToolError::Unavailable(_) => "unavailable",
            ToolError::Timeout(_) => "timeout",
            ToolError::RateLimited { .. } => "rate_limited",
            ToolError::NotSelected(_) => "not_selected",
        }
    }

    /// The standard "upstream is down" error, naming it.
    pub fn unavailable(upstream: &str, detail: impl std::fmt::Display) -> Self {
        ToolError::Unavailable(format!(
            "upstream '{upstream}' is unavailable ({detail}); it is being reconnected \
             automatically — retry in a few seconds or use another tool"
        ))
    }

    /// The standard timeout error.
    pub fn timeout(upstream: &str, tool: &str, after: Duration) -> Self {
        ToolError::Timeout(format!(
            "tool '{tool}' on upstream '{upstream}' did not answer within {} ms; \
             retry, or ask for less work in one call",
            after.as_millis()
        ))
    }

    /// The standard cancellation error.
    pub fn cancelled(tool: &str) -> Self {
        ToolError::Cancelled(format!("call to '{tool}' was cancelled by the caller"))
    }
}
