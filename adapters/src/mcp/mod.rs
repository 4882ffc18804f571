//! MCP upstreams: stdio child processes, streamable HTTP servers and legacy HTTP+SSE
//! servers, behind the [`Upstream`](crate::Upstream) contract.
//!
//! The client side speaks JSON-RPC over raw `serde_json::Value`s rather than rmcp's typed
//! client: rmcp 3.9's typed `Tool` and result types drop fields they do not know, and its
//! client handles each incoming notification in a task of its own, so a final progress
//! notification can race the response. Here one reader task per connection handles
//! messages strictly in wire order: a progress notification is delivered to the call's
//! sink before the response that follows it resolves the call.
//!
//! Each upstream has one supervisor task: it connects, initializes, lists tools (all
//! pages), refreshes the list on `notifications/tools/list_changed`, and reconnects
//! (restarting a stdio child) with exponential backoff when the connection is lost.

mod framing;
mod http;
mod jsonrpc;
mod sse;
mod stdio;
mod streamable_http;
mod supervisor;
mod transport;
mod upstream;

pub use supervisor::{OFFERED_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
pub use upstream::{McpUpstream, spawn};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A stdio MCP server: a child process speaking newline-delimited JSON-RPC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    /// The program to run (looked up on `PATH`).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables (the gateway's environment is inherited).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory (default: the gateway's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

/// An MCP server reached over HTTP (streamable HTTP, or legacy HTTP+SSE).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// The endpoint: `/mcp` for streamable HTTP, the SSE stream (`/sse`) for legacy.
    pub url: String,
    /// Headers sent with every request (e.g. `Authorization: Bearer ${TOKEN}`). Their
    /// values are never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Connect and per-request timeout for protocol requests (not tool calls).
    #[serde(default = "default_request_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

fn default_request_timeout() -> Duration {
    Duration::from_secs(30)
}

/// How an MCP upstream is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    Stdio(StdioConfig),
    StreamableHttp(HttpConfig),
    Sse(HttpConfig),
}

impl McpTransport {
    /// A short label for logs and status output.
    pub fn kind(&self) -> &'static str {
        match self {
            McpTransport::Stdio(_) => "stdio",
            McpTransport::StreamableHttp(_) => "streamable_http",
            McpTransport::Sse(_) => "sse",
        }
    }
}

/// Reconnect behaviour.
#[derive(Debug, Clone, PartialEq)]
pub struct McpOptions {
    /// Timeout of protocol requests (initialize, tools/list, ping).
    pub request_timeout: Duration,
    /// First reconnect delay; doubled after each failure up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
        }
    }
}
