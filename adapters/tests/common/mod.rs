//! Shared helpers for tests that run real MCP servers from npm.
//!
//! The servers come from `node_modules/` at the workspace root (`npm install` there,
//! pinned in `package.json`), or from the directory in `TOOLGATE_NODE_MODULES`. When
//! they are missing a test prints a notice and skips, except under `CI=true`, where a
//! missing dependency is a failure (a CI run that silently skips proves nothing).

#![allow(dead_code)] // each test binary uses a different subset

pub mod echo;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// The `node_modules` directory holding the test servers, if installed.
pub fn node_modules() -> Option<PathBuf> {
    let dir = match std::env::var_os("TOOLGATE_NODE_MODULES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("node_modules"),
    };
    dir.is_dir().then_some(dir)
}

/// The entry script of `@modelcontextprotocol/server-everything`, or `None` (with a
/// notice) when it is not installed. Panics under `CI=true` instead of skipping.
pub fn everything_entry() -> Option<PathBuf> {
    let entry = node_modules()
        .map(|d| d.join("@modelcontextprotocol/server-everything/dist/index.js"))
        .filter(|p| p.is_file());
    if entry.is_none() {
        let msg = "npm package @modelcontextprotocol/server-everything not found: run \
                   `npm install` at the workspace root (or set TOOLGATE_NODE_MODULES)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
    }
    entry
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// A server-everything process serving HTTP (`sse` or `streamableHttp`); killed on drop.
pub struct HttpServer {
    pub port: u16,
    _child: Child,
}

impl HttpServer {
    /// Starts `node <entry> <mode>` on a free port and waits (bounded) until it accepts
    /// connections.
    pub async fn start(entry: &std::path::Path, mode: &str) -> HttpServer {
        Self::start_on(entry, mode, free_port()).await
    }

    /// Like [`HttpServer::start`], on a given port (to restart a server in place).
    pub async fn start_on(entry: &std::path::Path, mode: &str, port: u16) -> HttpServer {
        let child = Command::new("node")
            .arg(entry)
            .arg(mode)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start node");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "server-everything ({mode}) did not listen on port {port} within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        HttpServer {
            port,
            _child: child,
        }
    }

    /// Kills the server and waits until it is gone.
    pub async fn stop(mut self) {
        let _ = self._child.kill().await;
    }
}

/// Logs to the test output when `RUST_LOG` is set.
pub fn init_tracing() {
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
pub struct RecordingClient {
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
