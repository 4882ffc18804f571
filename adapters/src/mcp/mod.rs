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
//!
//! ```text
//! spawn() -> McpUpstream (upstream.rs)        the handle: Upstream impl, reads Supervised
//!              supervisor.rs                  connect, initialize, list, reconnect
//!                transport.rs                 what a transport hands over: Rpc + Link
//!                  stdio.rs                   child process, stdin writer, stdout reader
//!                progress.rs                  is a starting stdio server still working?
//!                  streamable_http.rs         POST per message, GET stream, session
//!                  sse.rs                     legacy GET stream + POST endpoint
//!                  http.rs                    shared reqwest client, bodies, SSE reading
//!                  framing.rs                 bounded line and SSE decoders
//!                jsonrpc/                     ids, pending calls, wire-order dispatch;
//!                  incoming.rs                notifications, server requests, bridges
//! ```
//!
//! Behaviour worth knowing:
//! - A lost connection (child exit, stdout closed, SSE stream end, unreachable server,
//!   expired session) fails every pending call at once with `Unavailable`; calls made
//!   while reconnecting fail fast the same way. `tools()` keeps the last list meanwhile
//!   so the catalog does not flap.
//! - A stdio framing error (a line over `max_line_bytes`, a broken JSON message) is a
//!   lost connection too: the response it carried cannot be matched to its call, so
//!   every call in flight fails at once and the child is restarted (see `stdio.rs`).
//! - A stdio server's `initialize` is due within `startup_timeout` (at least
//!   `request_timeout`) — the protocol answer; a process still starting then (its
//!   process tree using CPU or doing I/O, see `progress.rs`: a first `npx` download) is
//!   waited for while it makes progress, up to `stdio_start_limit` — the process start.
//! - A connection lost after a healthy run (up [`HEALTHY_AFTER`]) is retried after
//!   `backoff_initial` again, a few times a minute; faster losses double the delay.
//! - A stdio child gets a minimal environment ([`BASELINE_ENV`], `inherit_env`, `env`),
//!   never the gateway's whole one.
//! - Cancellation and deadlines send `notifications/cancelled` upstream.
//! - `tools_changed` is bumped on every successful listing (after each connect and each
//!   `list_changed`), even if the list came back the same.
//! - Server->client requests and call notifications reach the caller's
//!   [`ClientBridge`](crate::ClientBridge) only when the call they belong to is known
//!   (see `jsonrpc/mod.rs`); what to declare in `initialize` is
//!   [`McpOptions::client_capabilities`].
//! - Header values, env values and session ids are never logged; the config types'
//!   `Debug` redacts them.
//!
//! Not done yet: resuming a broken streamable HTTP response stream with
//! `Last-Event-ID`; the 2026-07-28 protocol (no `initialize`; servers that only speak
//! it are refused with a clear error).

mod framing;
mod http;
pub mod http1_pool;
mod jsonrpc;
mod listing;
mod per_caller;
mod progress;
mod sse;
mod stdio;
mod streamable_http;
mod supervisor;
mod task_call;
mod transport;
mod upstream;

pub use http::Refusal;
pub use per_caller::{PerCallerUpstream, spawn_per_caller};
pub use supervisor::{
    HEALTHY_AFTER, OFFERED_PROTOCOL_VERSION, QUICK_RESTART_WINDOW, QUICK_RESTARTS,
    STARTUP_RETRY_MAX, SUPPORTED_PROTOCOL_VERSIONS,
};
pub use upstream::{McpUpstream, spawn};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A stdio MCP server: a child process speaking newline-delimited JSON-RPC.
// Env values are `Secret`s: `Debug` shows the names, never the values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    /// The program to run (looked up on `PATH`).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for the process (on top of what it inherits).
    #[serde(default)]
    pub env: BTreeMap<String, crate::Secret>,
    /// Which of the gateway's own environment variables the process inherits besides
    /// the baseline ([`BASELINE_ENV`]: `PATH`, `HOME`, locale, `TZ`, `TMPDIR`): a list
    /// of names, or `all` for the whole environment. Default: none — the gateway's
    /// secrets (admin token, JWT secret, Redis URL, other upstreams' tokens) stay out
    /// of the child.
    #[serde(default, skip_serializing_if = "InheritEnv::is_none")]
    pub inherit_env: InheritEnv,
    /// Working directory (default: the gateway's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// With `credentials` other than `static`: the environment variable each caller's
    /// token is given in (`GITHUB_PERSONAL_ACCESS_TOKEN`). Each holder of a token — a
    /// tenant with `per_tenant`, a user with `token_exchange` — gets a process of its
    /// own, started with that token; a new token replaces the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Longest line (one JSON-RPC message) the process may write to stdout (default
    /// 16 MiB; at least 64 KiB is honoured). A longer line is a framing error: the
    /// calls in flight fail at once and the process is restarted, as after a crash.
    #[serde(
        default = "default_max_line_bytes",
        skip_serializing_if = "is_default_max_line_bytes"
    )]
    pub max_line_bytes: usize,
}

/// 16 MiB: a large tool result (a base64 image or file) fits; a stuck or hostile
/// server cannot make the gateway hold more than this per upstream.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

fn default_max_line_bytes() -> usize {
    DEFAULT_MAX_LINE_BYTES
}

fn is_default_max_line_bytes(n: &usize) -> bool {
    *n == DEFAULT_MAX_LINE_BYTES
}

/// The gateway environment variables every stdio child inherits: what a program needs
/// to be found, to find its home and caches (npm, uv), to format text and times, and
/// to write temporary files. `LC_*` (every locale category) is matched by prefix.
#[cfg(unix)]
pub const BASELINE_ENV: &[&str] = &["PATH", "HOME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR"];
/// The gateway environment variables every stdio child inherits (Windows needs its
/// system directories and profile to start most programs at all).
#[cfg(not(unix))]
pub const BASELINE_ENV: &[&str] = &[
    "PATH",
    "PATHEXT",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "PROGRAMDATA",
    "PROGRAMFILES",
    "LANG",
    "LC_*",
    "TZ",
];

/// `inherit_env`: names of gateway environment variables to pass on, or `all`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum InheritEnv {
    /// `all`: the whole environment (the behaviour before `inherit_env` existed).
    All(AllKeyword),
    /// These names (exact; case-insensitive on Windows only) besides the baseline.
    Names(Vec<String>),
}

/// The keyword `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AllKeyword {
    #[serde(rename = "all")]
    All,
}

impl Default for InheritEnv {
    fn default() -> Self {
        InheritEnv::Names(Vec::new())
    }
}

impl InheritEnv {
    fn is_none(&self) -> bool {
        matches!(self, InheritEnv::Names(n) if n.is_empty())
    }

    /// Whether the gateway's variable `name` goes to the child.
    pub fn passes(&self, name: &str) -> bool {
        // Windows spells `PATH` as `Path`: its variable names are case-insensitive.
        let same = |a: &str, b: &str| {
            if cfg!(windows) {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        let listed = |pattern: &str| match pattern.strip_suffix('*') {
            Some(prefix) => name
                .get(..prefix.len())
                .is_some_and(|head| same(head, prefix)),
            None => same(name, pattern),
        };
        match self {
            InheritEnv::All(_) => true,
            InheritEnv::Names(names) => {
                BASELINE_ENV.iter().any(|p| listed(p)) || names.iter().any(|n| same(n, name))
            }
        }
    }
}

/// An MCP server reached over HTTP (streamable HTTP, or legacy HTTP+SSE).
// Header values are `Secret`s: `Debug` shows the names, never the values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// The endpoint: `/mcp` for streamable HTTP, the SSE stream (`/sse`) for legacy.
    pub url: String,
    /// Headers sent with every request (e.g. `Authorization: Bearer ${TOKEN}`). Their
    /// values are never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, crate::Secret>,
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

/// The default `stdio_start_limit`: a first `npx`/`uvx` download on a slow link.
pub const DEFAULT_STDIO_START_LIMIT: Duration = Duration::from_secs(300);

/// Timeouts, reconnect behaviour and what we tell the server about ourselves.
#[derive(Debug, Clone, PartialEq)]
pub struct McpOptions {
    /// Timeout of protocol requests (initialize, tools/list, ping).
    pub request_timeout: Duration,
    /// First reconnect delay; doubled after each failure up to `backoff_max`. A
    /// connection lost after a healthy run (up at least [`HEALTHY_AFTER`]) is retried
    /// after this delay again, at most [`QUICK_RESTARTS`] times per
    /// [`QUICK_RESTART_WINDOW`] (a crash loop still backs off).
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// How long after it is started the upstream counts as starting. Until it first
    /// connects within this time, attempts come at most
    /// [`STARTUP_RETRY_MAX`] apart (an upstream started
    /// after the gateway joins within a second), and a stdio server's `initialize` may
    /// take this long instead of `request_timeout` (a cold `npx` among seventy others
    /// on a loaded machine needs more than 30 s).
    pub startup_timeout: Duration,
    /// Process start, as opposed to protocol answer: how long a stdio server that has
    /// not answered `initialize` within its deadline (`startup_timeout`, at least
    /// `request_timeout`) may keep starting while its process tree makes progress —
    /// uses CPU or does I/O within `start_quiet_window` (a first `npx`/`uvx` download).
    /// Counted from the process start. Linux only (read from `/proc`); elsewhere the
    /// `initialize` deadline alone applies.
    pub stdio_start_limit: Duration,
    /// How long a starting stdio server's process tree may go without CPU or I/O before
    /// it counts as stalled (capped at the `initialize` deadline, so a short
    /// `startup_timeout` gives up on an idle process as soon).
    pub start_quiet_window: Duration,
    /// The `capabilities` object sent in `initialize`. Default `{}`: the server will
    /// not send sampling, elicitation or roots requests. Declare them (e.g.
    /// `{"sampling": {}, "elicitation": {}, "roots": {}}`) only where callers' clients
    /// can answer them through [`ClientBridge`](crate::ClientBridge): a server asking
    /// during a call without one gets "method not found" (`roots/list`: an empty list),
    /// and a server that would have done without sampling may now fail instead.
    pub client_capabilities: serde_json::Value,
    /// Stop for good (instead of reconnecting) once the server refused the
    /// credentials (HTTP 401 or 403): a connection made with one user's token, which
    /// retrying would not mend.
    pub stop_when_refused: bool,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            startup_timeout: Duration::from_secs(30),
            stdio_start_limit: DEFAULT_STDIO_START_LIMIT,
            start_quiet_window: Duration::from_secs(10),
            client_capabilities: serde_json::Value::Object(Default::default()),
            stop_when_refused: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inherit_env_passes_the_baseline_and_named_variables_only() {
        let none = InheritEnv::default();
        #[cfg(unix)]
        for name in ["PATH", "HOME", "LANG", "LC_ALL", "LC_TIME", "TZ", "TMPDIR"] {
            assert!(none.passes(name), "{name}");
        }
        for name in [
            "TOOLGATE_ADMIN_TOKEN",
            "REDIS_URL",
            "LC",
            "PATHX",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(!none.passes(name), "{name}");
        }
        let named: InheritEnv =
            serde_json::from_value(serde_json::json!(["GITHUB_TOKEN"])).unwrap();
        assert!(named.passes("GITHUB_TOKEN") && named.passes("PATH"));
        assert!(!named.passes("GITHUB_TOKEN_2"));
        let all: InheritEnv = serde_json::from_value(serde_json::json!("all")).unwrap();
        assert!(all.passes("REDIS_URL"));
        assert!(serde_json::from_value::<InheritEnv>(serde_json::json!("some")).is_err());
    }
}
