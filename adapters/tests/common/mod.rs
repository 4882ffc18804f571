//! Helpers of the MCP tests of this crate: a recording downstream client, log setup,
//! an rmcp echo server. Finding and starting the npm servers (server-everything from
//! `node_modules/`, or `TOOLGATE_NODE_MODULES`; a notice and a skip when missing, a
//! failure under `CI=true`) is `toolgate-test-support`'s, shared with every crate.

#![allow(dead_code)] // each test binary uses a different subset

pub(crate) mod echo;

use std::path::PathBuf;

use toolgate_test_support::NodeDeps;

/// The entry script of `@modelcontextprotocol/server-everything`, or `None` (with a
/// notice) when it is not installed. Panics under `CI=true` instead of skipping.
pub(crate) fn everything_entry() -> Option<PathBuf> {
    NodeDeps::everything().map(|deps| deps.everything_entry())
}

/// Logs to the test output when `RUST_LOG` is set.
pub(crate) fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A downstream client for tests: records what the upstream sent it during a call and
/// answers requests with canned results.
#[derive(Default)]
pub(crate) struct RecordingClient {
    pub seen: std::sync::Mutex<Vec<(String, serde_json::Value)>>,
}

#[async_trait::async_trait]
impl toolgate_adapters::ClientBridge for RecordingClient {
    async fn request(
        &self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, toolgate_adapters::RpcError> {
        self.seen
            .lock()
            .unwrap()
            .push((method.to_owned(), params.clone()));
        match method {
            "sampling/createMessage" => Ok(serde_json::json!({
                "role": "assistant",
                "content": {"type": "text", "text": "hi from the client"},
                "model": "test-model",
                "stopReason": "endTurn",
            })),
            "roots/list" => Ok(serde_json::json!({
                "roots": [{"uri": "file:///work", "name": "work"}]
            })),
            _ => Err(toolgate_adapters::RpcError {
                code: -32601,
                message: format!("test client does not do {method}"),
                data: None,
            }),
        }
    }

    fn notify(&self, method: &str, params: serde_json::Value) {
        self.seen.lock().unwrap().push((method.to_owned(), params));
    }
}
