//! The bench's upstreams, as small and fast as they can be so the numbers are about the
//! gateway: a minimal MCP server (JSON-RPC over streamable HTTP with plain
//! `application/json` answers, one session id per `initialize`), a large-catalog MCP
//! server, a tiny HTTP API with its OpenAPI spec, and the same MCP server over stdio.
//! Also a bare forwarding proxy in front of the minimal MCP server (`/proxy/mcp`, in a
//! process of its own so its CPU per call can be read): one more HTTP hop and nothing
//! else, the floor any gateway's overhead sits on.
//!
//! Every tool call answers the same fixed result carrying [`MARKER`]. Bad input gets a
//! JSON-RPC error, never a panic.

use std::io::{BufRead, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use toolgate_adapters::mcp::http1_pool::{MCP_LIMITS, Pool};

/// Text every tool result carries (the clients check for it).
pub(crate) const MARKER: &str = "bench-ok";
/// The one tool of the small MCP servers.
pub(crate) const FAST_TOOL: &str = "echo";
/// The HTTP API's operation (`GET /api/items/{id}`).
pub(crate) const API_OPERATION: &str = "getItem";
/// The upstreams process lives at most this long (a bound if its parent vanishes
/// without closing our stdin).
const MAX_LIFETIME: Duration = Duration::from_secs(4 * 3600);

/// One MCP server's fixed answers.
struct McpServer {
    name: &'static str,
    /// The serialized `tools/list` result.
    tools_result: String,
    sessions: AtomicU64,
}

impl McpServer {
    fn new(name: &'static str, tools: Vec<Value>) -> Arc<Self> {
        Arc::new(Self {
            name,
            tools_result: json!({"tools": tools}).to_string(),
            sessions: AtomicU64::new(0),
        })
    }

    /// Answers one JSON-RPC message; `None` for notifications (and responses).
    fn answer(&self, message: &Value) -> Option<String> {
        let id = message.get("id")?;
        let id = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let result = match method {
            "initialize" => {
                let asked = message
                    .pointer("/params/protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("2025-11-25");
                let version = match asked {
                    "2024-11-05" | "2025-03-26" | "2025-06-18" | "2025-11-25" => asked,
                    _ => "2025-11-25",
                };
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": self.name, "version": "1"},
                })
                .to_string()
            }
            "tools/list" => self.tools_result.clone(),
            "tools/call" => format!(r#"{{"content":[{{"type":"text","text":"{MARKER}"}}]}}"#),
            "ping" => "{}".to_owned(),
            _ => {
                return Some(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"method not found"}}}}"#
                ));
            }
        };
        Some(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#
        ))
    }
}

fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn mcp_post(State(server): State<Arc<McpServer>>, body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return rpc_error(StatusCode::BAD_REQUEST, -32700, "parse error");
    };
    if !message.is_object() {
        return rpc_error(StatusCode::BAD_REQUEST, -32600, "batches are not supported");
    }
    let Some(answer) = server.answer(&message) else {
        return StatusCode::ACCEPTED.into_response();
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if message.get("method").and_then(Value::as_str) == Some("initialize") {
        let n = server.sessions.fetch_add(1, Ordering::Relaxed);
        if let Ok(sid) = HeaderValue::from_str(&format!("{}-session-{n}", server.name)) {
            headers.insert("mcp-session-id", sid);
        }
    }
    (headers, answer).into_response()
}

/// The fast server's single tool.
fn fast_tools() -> Vec<Value> {
    vec![json!({
        "name": FAST_TOOL,
        "description": "Returns a small fixed result.",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
    })]
}

/// `n` tools with realistic definitions: half named `a_NNNN`, half `b_NNNN`.
pub(crate) fn big_tools(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let group = if i % 2 == 0 { "a" } else { "b" };
            json!({
                "name": format!("{group}_{i:05}"),
                "description": format!(
                    "Bench tool {i}: looks up one record of kind {group} by id and returns it. \
                     Use it to measure listing a large catalog."
                ),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "The record's id."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                        "verbose": {"type": "boolean", "description": "Include every field."}
                    },
                    "required": ["id"]
                }
            })
        })
        .collect()
}

/// An OpenAPI 3.0 document for the bench API: `getItem` plus `extra` generated
/// operations (for import timings of a given size).
pub(crate) fn openapi_spec(base_url: &str, extra: usize) -> Value {
    let item_op = |operation_id: String| {
        json!({"get": {
            "operationId": operation_id,
            "summary": "Get one item by id",
            "parameters": [
                {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "verbose", "in": "query", "schema": {"type": "boolean"}}
            ],
            "responses": {"200": {
                "description": "The item",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}}
            }}
        }})
    };
    let mut paths = serde_json::Map::new();
    paths.insert("/items/{id}".into(), item_op(API_OPERATION.to_owned()));
    for i in 0..extra {
        paths.insert(
            format!("/things{i}/{{id}}"),
            item_op(format!("getThing{i}")),
        );
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "toolgate bench API", "version": "1"},
        "servers": [{"url": base_url}],
        "paths": paths,
        "components": {"schemas": {"Item": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "status": {"type": "string"}}
        }}}
    })
}

async fn api_item(Path(id): Path<String>) -> Response {
    let id = id.chars().take(64).collect::<String>();
    let body = json!({"id": id, "name": "item", "status": MARKER});
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn mcp_endpoint(server: Arc<McpServer>) -> MethodRouter {
    post(mcp_post)
        // No server-initiated stream: the client is told so with 405.
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .delete(|| async { StatusCode::OK })
        .with_state(server)
}

/// Where the bare proxy forwards to, and its connections: hyper's HTTP/1 client on the
/// pool the gateway keeps for plain-HTTP MCP upstreams, the cheapest forwarding there
/// is (no task per request, no reqwest layers).
struct Proxy {
    pool: Arc<Pool>,
    /// The request target (origin-form) and `Host`.
    target: http::Uri,
    host: HeaderValue,
}

/// The headers an MCP exchange needs, each way.
const FORWARDED: [&str; 4] = [
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
];

/// Forwards one POST to the minimal MCP server and its answer back, untouched.
async fn proxy_post(State(proxy): State<Arc<Proxy>>, headers: HeaderMap, body: Bytes) -> Response {
    let mut request = http::Request::new(Full::new(body));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = proxy.target.clone();
    request
        .headers_mut()
        .insert(header::HOST, proxy.host.clone());
    for name in FORWARDED {
        if let Some(value) = headers.get(name) {
            request.headers_mut().insert(name, value.clone());
        }
    }
    let mut answer = match proxy.pool.send(request).await {
        Ok(answer) => answer,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.detail).into_response(),
    };
    let status = answer.response.status();
    let mut out = HeaderMap::new();
    for name in FORWARDED {
        if let Some(value) = answer.response.headers().get(name) {
            out.insert(name, value.clone());
        }
    }
    let body = match answer.response.body_mut().collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    answer.ended();
    (status, out, body).into_response()
}

/// `toolgate-bench upstreams [--tools N]`: serves `/mcp` (fast), `/big/mcp` (N tools)
/// and `/api/items/{id}` on one loopback port, prints `READY <port>`, and exits when
/// stdin closes.
pub(crate) fn main(args: &[String]) -> Result<()> {
    let tools = match args {
        [] => 5_000,
        [flag, n] if flag == "--tools" => n.parse().context("--tools N")?,
        _ => anyhow::bail!("usage: toolgate-bench upstreams [--tools N]"),
    };
    serve(move || {
        Ok(Router::new()
            .route("/mcp", mcp_endpoint(McpServer::new("fast", fast_tools())))
            .route(
                "/big/mcp",
                mcp_endpoint(McpServer::new("big", big_tools(tools))),
            )
            .route("/api/items/{id}", get(api_item)))
    })
}

/// `toolgate-bench proxy --target URL`: the bare forwarding proxy at `/proxy/mcp`, in
/// front of the MCP server at `URL`, in a process of its own (so the bench can read
/// what one hop costs in CPU); otherwise as [`main`].
pub(crate) fn proxy_main(args: &[String]) -> Result<()> {
    let [flag, target] = args else {
        anyhow::bail!("usage: toolgate-bench proxy --target URL");
    };
    anyhow::ensure!(
        flag == "--target",
        "usage: toolgate-bench proxy --target URL"
    );
    let target: http::Uri = target.parse().context("--target URL")?;
    let authority = target.authority().context("--target needs a host")?.clone();
    serve(move || {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        let proxy = Arc::new(Proxy {
            pool: Pool::new(connector, target.clone(), MCP_LIMITS),
            target: http::Uri::try_from(target.path())?,
            host: HeaderValue::from_str(authority.as_str())?,
        });
        Ok(Router::new().route(
            "/proxy/mcp",
            post(proxy_post)
                .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                .delete(|| async { StatusCode::OK })
                .with_state(proxy),
        ))
    })
}

/// Serves the app `build` makes (inside the runtime) on a loopback port, prints
/// `READY <port>`, and exits when stdin closes (or after [`MAX_LIFETIME`]).
fn serve(build: impl FnOnce() -> Result<Router> + Send + 'static) -> Result<()> {
    // Exit when the parent closes our stdin (or dies).
    std::thread::spawn(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let app = build()?;
        println!("READY {port}");
        std::io::stdout().flush()?;
        tokio::select! {
            served = axum::serve(listener, app) => served?,
            _ = tokio::time::sleep(MAX_LIFETIME) => {}
        }
        Ok(())
    })
}

/// `toolgate-bench stdio-server`: the fast MCP server on stdin/stdout
/// (newline-delimited JSON-RPC) until stdin closes.
pub(crate) fn stdio_server() -> Result<()> {
    let server = McpServer::new("pipe", fast_tools());
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        // Lines longer than this are not ours to answer; they still end the read.
        if input.by_ref().take(16 * 1024 * 1024).read_line(&mut line)? == 0 {
            return Ok(());
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Value>(trimmed) {
            Ok(message) if message.is_object() => server.answer(&message),
            _ => Some(
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#
                    .to_owned(),
            ),
        };
        if let Some(answer) = answer {
            stdout.write_all(answer.as_bytes())?;
            stdout.write_all(b"\n")?;
            stdout.flush()?;
        }
    }
}
