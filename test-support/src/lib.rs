//! Helpers the tests of every crate share, so each exists once.
//!
//! - [`deps`]: where the external test dependencies are (workspace root, npm packages,
//!   the Python venv) and the rule for a missing one: skip with a notice, except under
//!   `CI=true`, where it is a failure (CI must never pass by skipping).
//! - [`process`]: free loopback ports, temporary directories, child processes killed
//!   with their group on drop, bounded polling, server-everything over HTTP.
//! - [`mcp_http`]: a raw MCP streamable-HTTP client for wire-level assertions
//!   (sessions, credentials, headers, SSE frames, both protocol eras).
//! - [`mock_api`]: an HTTP API on 127.0.0.1 that records every request it receives.
//! - [`slow_api`]: an HTTP API on 127.0.0.1 whose calls take as long as asked.
//! - [`text`]: deterministic payloads (prose, JSON records, ids, base64) for the token
//!   budget's tests and benchmarks.
//! - [`cluster_spec`]: a generated ~4 MB Swagger 2.0 spec shaped like a cluster API
//!   (deeply shared definitions), for memory tests and the bench.
//! - [`assert`]: assertions on tool results (a tool error mentioning something).
//! - [`sys`]: signals, open-file limits and clock ticks: the tests' only `unsafe`.
//!
//! Nothing here depends on `toolgate` or `toolgate-adapters`, so any crate of the
//! workspace can use it. Every wait is bounded in time and in attempts.

pub mod assert;
pub mod cluster_spec;
pub mod deps;
pub mod mcp_http;
pub mod mock_api;
pub mod process;
pub mod slow_api;
pub mod sys;
pub mod text;

pub use assert::{assert_tool_error, first_text};
pub use deps::{NodeDeps, missing, python, specs_dir, under_ci, workspace_root};
pub use mcp_http::{McpSession, RpcExchange, RpcExchangeWithHeaders};
pub use mock_api::{MockApi, Recorded};
pub use process::{
    Everything, Proc, START_TIMEOUT, TempDir, free_port, run_bounded, tcp_open, wait_for,
};
pub use slow_api::SlowApi;

/// Skip the current test (return early) when `$e` is `None`.
#[macro_export]
macro_rules! require {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return,
        }
    };
}

/// A plain HTTP client for the tests (short connect timeout, no proxy).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(120))
        .build()
        .expect("reqwest client")
}
