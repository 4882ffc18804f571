//! A streamable HTTP upstream behind an HTTP proxy named in the environment
//! (`HTTP_PROXY`): every request goes through the proxy. Plain `http://` endpoints
//! without a proxy use hyper's client directly; this covers the other path (reqwest,
//! which also carries `https://`), and that the proxy setting is honoured.
//!
//! One test in its own binary: it sets the process environment before any thread
//! starts.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use toolgate_adapters::mcp::{HttpConfig, McpOptions, McpTransport, spawn};
use toolgate_adapters::{CallContext, Connection, JsonObject, Upstream};

use common::echo::Echo;

async fn bind() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    (listener, addr)
}

/// A forward proxy: takes absolute-form requests, counts them, sends them on.
async fn forward(State(seen): State<Arc<AtomicUsize>>, request: Request) -> Response {
    seen.fetch_add(1, Ordering::SeqCst);
    let onward = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let answer = onward
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await;
    match answer {
        Ok(answer) => {
            let mut response = Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                response = response.header(name, value);
            }
            response
                .body(Body::from_stream(answer.bytes_stream()))
                .expect("response")
        }
        Err(error) => Response::builder()
            .status(502)
            .body(Body::from(error.to_string()))
            .expect("response"),
    }
}

#[test]
fn requests_go_through_the_proxy_the_environment_names() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (proxy_listener, proxy_addr) = runtime.block_on(bind());
    // SAFETY: no other thread of this process reads the environment yet: the runtime's
    // workers are idle and this binary holds this one test. (What is under test is
    // reqwest reading the proxy from the environment, so the environment must change.)
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("NO_PROXY");
        std::env::remove_var("no_proxy");
        std::env::remove_var("http_proxy");
        std::env::set_var("HTTP_PROXY", format!("http://{proxy_addr}"));
    }
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), async move {
            let mut config = StreamableHttpServerConfig::default();
            config.json_response = true;
            let service = StreamableHttpService::new(
                || Ok(Echo),
                Arc::new(LocalSessionManager::default()),
                config,
            );
            let (listener, addr) = bind().await;
            let app = axum::Router::new().nest_service("/mcp", service);
            tokio::spawn(async move { axum::serve(listener, app).await });

            let seen = Arc::new(AtomicUsize::new(0));
            let proxy = axum::Router::new()
                .fallback(forward)
                .with_state(seen.clone());
            tokio::spawn(async move { axum::serve(proxy_listener, proxy).await });

            let up = spawn(
                "proxied".into(),
                McpTransport::StreamableHttp(HttpConfig {
                    url: format!("http://{addr}/mcp"),
                    headers: Default::default(),
                    timeout: Duration::from_secs(5),
                }),
                McpOptions {
                    request_timeout: Duration::from_secs(5),
                    ..McpOptions::default()
                },
            );
            let mut changes = up.connection_changes();
            let connected = tokio::time::timeout(
                Duration::from_secs(10),
                changes.wait_for(|c| *c == Connection::Connected),
            )
            .await
            // The watch's read guard must not outlive this line: shutdown writes the
            // state, and a held guard would block that write (and a runtime worker).
            .map(|r| r.map(|_| ()));
            assert!(
                matches!(connected, Ok(Ok(_))),
                "not connected: {:?}",
                up.last_error()
            );
            let mut args = JsonObject::new();
            args.insert("message".into(), json!("via the proxy"));
            let out = up
                .call("echo", args, CallContext::new(Duration::from_secs(5), "t"))
                .await
                .expect("call");
            assert_eq!(out.object()["content"][0]["text"], "echo: via the proxy");
            // initialize, initialized, tools/list, the call (and maybe the GET stream).
            let through = seen.load(Ordering::SeqCst);
            assert!(through >= 4, "{through} requests went through the proxy");
            up.shutdown().await;
        })
        .await
        .expect("bounded: 60 s");
    });
}
