//! The streamable HTTP upstream against a real rmcp server, in process: JSON response
//! bodies (server-everything always answers with SSE), a session the server forgets
//! (404 -> re-initialize), and the session deleted on shutdown.

mod common;

use common::echo::Echo;

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::mcp::{HttpConfig, McpOptions, McpTransport, McpUpstream, spawn};
use toolgate_adapters::{CallContext, Connection, JsonObject, ToolError, Upstream};

/// Serves `Echo` on 127.0.0.1 (a free port); returns the URL, the session manager and
/// a token that stops the server.
async fn serve(json_response: bool) -> (String, Arc<LocalSessionManager>, CancellationToken) {
    let stop = CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(stop.clone());
    config.json_response = json_response;
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(|| Ok(Echo), sessions.clone(), config);
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    (url, sessions, stop)
}

fn upstream(url: String) -> Arc<McpUpstream> {
    spawn(
        "rmcp".into(),
        McpTransport::StreamableHttp(HttpConfig {
            url,
            headers: Default::default(),
            timeout: Duration::from_secs(5),
        }),
        McpOptions {
            request_timeout: Duration::from_secs(5),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_millis(200),
            ..McpOptions::default()
        },
    )
}

async fn wait_for(up: &McpUpstream, want: Connection) {
    let mut rx = up.connection_changes();
    let r = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|c| *c == want)).await;
    assert!(
        matches!(r, Ok(Ok(_))),
        "not {want:?} within 10 s: {:?}, last error {:?}",
        up.connection(),
        up.last_error()
    );
}

async fn echo(up: &McpUpstream, message: &str) -> Result<String, ToolError> {
    let mut args = JsonObject::new();
    args.insert("message".into(), json!(message));
    let out = up
        .call("echo", args, CallContext::new(Duration::from_secs(5), "t"))
        .await?;
    Ok(out.object()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

async fn lists_and_calls(json_response: bool) {
    let (url, sessions, stop) = serve(json_response).await;
    let up = upstream(url);
    wait_for(&up, Connection::Connected).await;
    assert_eq!(up.protocol_version().as_deref(), Some("2025-11-25"));
    let names: Vec<String> = up.tools().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["echo"]);
    assert_eq!(echo(&up, "hi").await.expect("echo"), "echo: hi");
    assert_eq!(sessions.sessions.read().await.len(), 1);

    // Shutdown deletes the session on the server.
    up.shutdown().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !sessions.sessions.read().await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "session not deleted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
}

#[tokio::test]
async fn json_response_bodies() {
    common::init_tracing();
    tokio::time::timeout(Duration::from_secs(30), lists_and_calls(true))
        .await
        .expect("bounded");
}

#[tokio::test]
async fn sse_response_streams() {
    common::init_tracing();
    tokio::time::timeout(Duration::from_secs(30), lists_and_calls(false))
        .await
        .expect("bounded");
}

#[tokio::test]
async fn a_session_the_server_forgot_is_initialized_again() {
    common::init_tracing();
    tokio::time::timeout(Duration::from_secs(30), async {
        let (url, sessions, stop) = serve(true).await;
        let up = upstream(url);
        wait_for(&up, Connection::Connected).await;
        assert_eq!(echo(&up, "one").await.expect("echo"), "echo: one");

        // The server drops the session (as after an expiry or a restart).
        let ids: Vec<_> = sessions.sessions.read().await.keys().cloned().collect();
        assert_eq!(ids.len(), 1);
        for id in &ids {
            sessions.close_session(id).await.expect("close session");
        }

        // The next request meets a 404: the connection is re-initialized with a new
        // session, and calls work again.
        let lost = echo(&up, "lost").await;
        assert!(matches!(lost, Err(ToolError::Unavailable(_))), "{lost:?}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let error = up.last_error().unwrap_or_default();
            if error.contains("404") && up.connection() == Connection::Connected {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not re-initialized: {:?}, {error}",
                up.connection()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(echo(&up, "two").await.expect("echo"), "echo: two");
        let now: Vec<_> = sessions.sessions.read().await.keys().cloned().collect();
        assert_eq!(now.len(), 1);
        assert_ne!(now, ids, "a new session");
        up.shutdown().await;
        stop.cancel();
    })
    .await
    .expect("bounded");
}
