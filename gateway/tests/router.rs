//! The HTTP app in process, driven with axum's `oneshot` (no listener, no Node, no
//! Python): the front door's Host, Origin and content-type checks, authentication on
//! every surface, who owns an MCP session, and how each kind of call failure reaches
//! an MCP client and a REST client. These are the contracts the end-to-end tests check
//! through the binary (`tests/tests/front_door.rs`, `tenants.rs`, `mcp_sessions.rs`,
//! `call_contract.rs`, `rest.rs`), here against upstreams written in this file, so a
//! broken promise shows in seconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::watch;
use toolgate::app::App;
use toolgate::config::{Config, Kind};
use toolgate::credentials::{Authenticator, hash_key};
use toolgate::gateway::Mounted;
use toolgate::serve::Front;
use toolgate_adapters::{
    CallContext, CallOutput, Connection, JsonObject, ToolDef, ToolError, Upstream,
};
use tower::ServiceExt;

const KEY_A: &str = "router-tenant-a-key-0123456789";
const KEY_B: &str = "router-tenant-b-key-0123456789";
const KEY_C: &str = "router-tenant-c-key-0123456789";
const ADMIN_TOKEN: &str = "router-admin-token-0123456789";
const METRICS_TOKEN: &str = "router-metrics-token-0123456789";
const JWT_SECRET: &str = "router-hs256-secret-of-at-least-32-bytes";
/// The gateway's own authority, as a client on this machine names it.
const HOST: &str = "127.0.0.1:8080";
const SESSION_VERSION: &str = "2025-11-25";
const SESSIONLESS_VERSION: &str = "2026-07-28";
const PROTOCOL_TOOLS: [&str; 4] = [
    "tool_expand_tools",
    "tool_invoke",
    "tool_schema",
    "tool_search",
];
/// Bounds every wait for an answer or a body.
const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------
// The app under test, and the upstreams behind it.
// ---------------------------------------------------------------------------------

/// Tenant `a` may use everything; `b` the `up` tools but `up__secret`; `c` the `up`
/// tools, starting its sessions with `up__echo` only. Admin, metrics and JWT
/// credentials are configured, so every door has something to check.
fn config_yaml() -> String {
    format!(
        r#"
allowed_hosts: ["127.0.0.1", "localhost"]
admin: {{token: "{ADMIN_TOKEN}"}}
metrics: {{token: "{METRICS_TOKEN}"}}
jwt: {{hs256_secret: "{JWT_SECRET}"}}
tenants:
  a: {{api_keys: ["{}"], allow: ["*"]}}
  b: {{api_keys: ["{}"], allow: ["up__*"], deny: ["up__secret"]}}
  c: {{api_keys: ["{}"], allow: ["up__*"], initial: ["up__echo"]}}
"#,
        hash_key(KEY_A),
        hash_key(KEY_B),
        hash_key(KEY_C)
    )
}

struct TestApp {
    router: Front,
    /// The same app as `serve::router` builds it: every request through axum's router,
    /// none on `Front`'s fast paths.
    plain: axum::Router,
    /// Calls that reached an upstream (refused calls must never get there).
    calls: Arc<AtomicUsize>,
}

/// Everything this file knows of how the app is put together, as `main.rs`'s
/// `serve_http` does it: the config, the gateway with the test upstreams mounted
/// (`up` and `slow` connected, `down` reconnecting; `slow`'s calls time out after
/// 50 ms), the authenticator, the registration store, the router.
async fn app(yaml: &str) -> TestApp {
    let mut config = Config::parse(yaml, &|_| None).expect("the test config parses");
    // Only read (no registrations are made here); a directory no test shares.
    config.data_dir = std::env::temp_dir().join(format!(
        "toolgate-router-test-{}-{}",
        std::process::id(),
        toolgate::state::sessions::new_session_id()
    ));
    let app = App::start(config).await.expect("toolgate starts");
    let gateway = &app.gateway;
    let calls = Arc::new(AtomicUsize::new(0));
    for (name, connection, call_timeout) in [
        ("up", Connection::Connected, Duration::from_secs(10)),
        ("down", Connection::Reconnecting, Duration::from_secs(10)),
        ("slow", Connection::Connected, Duration::from_millis(50)),
    ] {
        let upstream = Arc::new(TestUpstream::new(name, connection, calls.clone()));
        let mut mounted = Mounted::configured(&gateway.config(), name, upstream, Kind::Embedded);
        mounted.call_timeout = call_timeout;
        gateway.mount(name.to_owned(), mounted).await;
    }
    gateway.wait_for_upstreams(Duration::ZERO).await;
    let authenticator = Authenticator::for_config(&gateway.config())
        .await
        .expect("the authenticator builds");
    let plain = toolgate::serve::router(app.clone(), authenticator.clone(), app.stop.child_token());
    let router = toolgate::serve::Front::new(app.clone(), authenticator, app.stop.child_token());
    TestApp {
        router,
        plain,
        calls,
    }
}

/// An upstream answering from this process. Tools (`<upstream>__<tool>` in the
/// catalog): `up`: `echo`, `secret`, `tool_error` (the tool's own `isError` result),
/// `fail` (`Failed`), `limited` (`RateLimited`, retry after 3 s); `down`: `echo`
/// (never reached: the upstream is reconnecting); `slow`: `wait` (runs until its
/// deadline, then times out).
struct TestUpstream {
    name: String,
    tools: Arc<Vec<ToolDef>>,
    connection: Connection,
    changed: watch::Sender<u64>,
    calls: Arc<AtomicUsize>,
}

impl TestUpstream {
    fn new(name: &str, connection: Connection, calls: Arc<AtomicUsize>) -> Self {
        let any = json!({"type": "object", "properties": {}});
        let message = json!({
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        });
        let tools = match name {
            "up" => vec![
                tool("echo", "Echoes the message back", &message),
                tool("secret", "Tells a hidden secret value", &any),
                tool("tool_error", "Runs and reports a failure of its own", &any),
                tool("fail", "Breaks on the way", &any),
                tool("limited", "Answers that it is busy", &any),
            ],
            "down" => vec![tool("echo", "Echoes the message back", &message)],
            _ => vec![tool("wait", "Waits until its deadline", &any)],
        };
        TestUpstream {
            name: name.to_owned(),
            tools: Arc::new(tools),
            connection,
            changed: watch::channel(0).0,
            calls,
        }
    }
}

fn tool(name: &str, description: &str, input_schema: &Value) -> ToolDef {
    let raw = json!({"name": name, "description": description, "inputSchema": input_schema});
    ToolDef::from_raw(raw.as_object().cloned().unwrap_or_default()).expect("a named tool")
}

fn text_result(text: &str, is_error: bool) -> CallOutput {
    let mut raw = JsonObject::new();
    raw.insert("content".into(), json!([{"type": "text", "text": text}]));
    if is_error {
        raw.insert("isError".into(), Value::Bool(true));
    }
    CallOutput::new(raw)
}

#[async_trait::async_trait]
impl Upstream for TestUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Arc<Vec<ToolDef>> {
        self.tools.clone()
    }

    fn tools_changed(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn connection(&self) -> Connection {
        self.connection
    }

    fn last_error(&self) -> Option<String> {
        (self.connection != Connection::Connected).then(|| "connection refused".to_owned())
    }

    async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        ctx: CallContext,
    ) -> Result<CallOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match tool {
            "echo" => {
                let message = arguments.get("message").and_then(Value::as_str);
                Ok(text_result(
                    &format!("Echo: {}", message.unwrap_or_default()),
                    false,
                ))
            }
            "secret" => Ok(text_result("the secret is 42", false)),
            "tool_error" => Ok(text_result("the widget broke", true)),
            "fail" => Err(ToolError::Failed(
                "tool 'fail' broke: the server said no".into(),
            )),
            "limited" => Err(ToolError::RateLimited {
                message: "tool 'limited' is busy: slow down".into(),
                retry_after: Some(Duration::from_secs(3)),
            }),
            "wait" => {
                // As an adapter does: stop at the call's deadline (bounded here).
                tokio::select! {
                    _ = tokio::time::sleep(ctx.remaining().min(WAIT)) => {
                        Err(ToolError::Timeout(format!("tool '{tool}' ran out of time")))
                    }
                    _ = ctx.cancel.cancelled() => Err(ToolError::cancelled(tool)),
                }
            }
            other => Err(ToolError::NotFound(format!("no tool '{other}' here"))),
        }
    }

    async fn check(&self, _timeout: Duration) -> Result<(), ToolError> {
        match self.connection {
            Connection::Connected => Ok(()),
            _ => Err(ToolError::unavailable(&self.name, "connection refused")),
        }
    }

    async fn shutdown(&self) {}
}

// ---------------------------------------------------------------------------------
// Requests and answers.
// ---------------------------------------------------------------------------------

/// One answer, read whole.
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}), HTTP {}: {}", self.status, self.text()))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn is_event_stream(&self) -> bool {
        self.header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
    }

    /// The JSON-RPC messages of an MCP answer: one JSON body, or an SSE stream's
    /// `data` frames in order.
    fn messages(&self) -> Vec<Value> {
        if !self.is_event_stream() {
            return vec![self.json()];
        }
        self.text()
            .split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                serde_json::from_str(&data.join("\n")).ok()
            })
            .collect()
    }

    /// The JSON-RPC response (the message with a result or an error).
    fn response(&self) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .unwrap_or_else(|| {
                panic!(
                    "no JSON-RPC response in HTTP {}: {}",
                    self.status,
                    self.text()
                )
            })
    }

    /// The `CallToolResult` of a `tools/call` answer.
    fn result(&self) -> Value {
        let response = self.response();
        assert!(
            response.get("error").is_none(),
            "a JSON-RPC error, not a result: {response}"
        );
        response["result"].clone()
    }
}

/// The first text block of a `CallToolResult`.
fn first_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// `value` as text with every `name` written `X`: two answers that differ only in
/// the name asked for compare equal.
fn normalized(value: &Value, name: &str) -> String {
    value.to_string().replace(name, "X")
}

impl TestApp {
    async fn send(&self, request: Request<Body>) -> Reply {
        Self::read(self.router.clone().oneshot(request)).await
    }

    /// [`TestApp::send`] through axum's router alone (no fast path).
    async fn send_plain(&self, request: Request<Body>) -> Reply {
        Self::read(self.plain.clone().oneshot(request)).await
    }

    async fn read(
        answer: impl std::future::Future<
            Output = Result<axum::response::Response, std::convert::Infallible>,
        >,
    ) -> Reply {
        let response = tokio::time::timeout(WAIT, answer)
            .await
            .expect("an answer in time")
            .expect("the router is infallible");
        let (parts, body) = response.into_parts();
        let body = tokio::time::timeout(WAIT, body.collect())
            .await
            .expect("the whole body in time")
            .expect("a readable body")
            .to_bytes()
            .to_vec();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    /// The status and headers of an answer whose body is a stream that stays open
    /// (a session's GET stream); the body is not read.
    async fn head(&self, request: Request<Body>) -> (StatusCode, HeaderMap) {
        let response = tokio::time::timeout(WAIT, self.router.clone().oneshot(request))
            .await
            .expect("an answer in time")
            .expect("the router is infallible");
        (response.status(), response.headers().clone())
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// `initialize` for the tenant of `key`; the session id.
    async fn initialize(&self, key: &str) -> String {
        let reply = self
            .send(mcp(
                Some(key),
                None,
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": SESSION_VERSION, "capabilities": {},
                    "clientInfo": {"name": "router-test", "version": "1"}}}),
            ))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "initialize: {}", reply.text());
        assert_eq!(
            reply.response()["result"]["protocolVersion"],
            SESSION_VERSION
        );
        reply
            .header("mcp-session-id")
            .expect("initialize answers a session id")
            .to_owned()
    }

    async fn rpc(&self, key: &str, session: &str, method: &str, params: Value) -> Reply {
        let message = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        self.send(mcp(Some(key), Some(session), &message)).await
    }

    async fn call_tool(&self, key: &str, session: &str, name: &str, arguments: Value) -> Reply {
        self.rpc(
            key,
            session,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }

    /// The names `tools/list` answers on `session`.
    async fn listed(&self, key: &str, session: &str) -> Vec<String> {
        let reply = self.rpc(key, session, "tools/list", json!({})).await;
        assert_eq!(reply.status, StatusCode::OK, "tools/list: {}", reply.text());
        names(&reply.response()["result"]["tools"])
    }

    /// A 2026-07-28 `tools/call` (no session), with every header the version asks for.
    async fn sessionless_call(&self, key: &str, name: &str, arguments: Value) -> Reply {
        let message = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": name, "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": SESSIONLESS_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }}});
        let request = to(Method::POST, "/mcp", Some(key))
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", SESSIONLESS_VERSION)
            .header("mcp-method", "tools/call")
            .header("mcp-name", name);
        self.send(with_json(request, &message)).await
    }

    async fn rest_call(&self, key: &str, name: &str, body: Value) -> Reply {
        let request = to(Method::POST, &format!("/v1/tools/{name}/call"), Some(key));
        self.send(with_json(request, &body)).await
    }
}

/// A request to `path` under the gateway's own Host, with `key` as a bearer token.
fn to(method: Method, path: &str, key: Option<&str>) -> http::request::Builder {
    let builder = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, HOST);
    match key {
        Some(key) => builder.header(header::AUTHORIZATION, format!("Bearer {key}")),
        None => builder,
    }
}

fn with_json(builder: http::request::Builder, body: &Value) -> Request<Body> {
    builder
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("a valid request")
}

/// Fails with the answer's text unless it has `status`.
fn expect_status(reply: &Reply, status: StatusCode) {
    assert_eq!(reply.status, status, "{}", reply.text());
}

fn empty(builder: http::request::Builder) -> Request<Body> {
    builder.body(Body::empty()).expect("a valid request")
}

/// A POST of `message` to `/mcp` as an MCP client with sessions sends it.
fn mcp(key: Option<&str>, session: Option<&str>, message: &Value) -> Request<Body> {
    let mut builder = to(Method::POST, "/mcp", key)
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", SESSION_VERSION);
    if let Some(session) = session {
        builder = builder.header("mcp-session-id", session);
    }
    with_json(builder, message)
}

/// A session request other than POST (`GET` opens its stream, `DELETE` ends it).
fn mcp_session(method: Method, key: &str, session: &str) -> Request<Body> {
    empty(
        to(method, "/mcp", Some(key))
            .header(header::ACCEPT, "text/event-stream")
            .header("mcp-protocol-version", SESSION_VERSION)
            .header("mcp-session-id", session),
    )
}

/// The `name`s of a list of tool definitions (or search hits).
fn names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {tools}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

/// The protocol tools and `tools`, sorted.
fn with_protocol_tools(tools: &[&str]) -> Vec<String> {
    sorted(
        PROTOCOL_TOOLS
            .iter()
            .chain(tools)
            .map(|s| (*s).to_owned())
            .collect(),
    )
}

/// An HS256 token naming `tenant`, valid for five minutes.
fn jwt_for(tenant: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"tenant": tenant, "iat": now, "exp": now + 300}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .expect("a signed token")
}

// ---------------------------------------------------------------------------------
// The guard: Host, Origin, CORS, content type.
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn hosts_are_checked_on_every_route_but_the_probes() {
    let app = app(&config_yaml()).await;

    // The gateway's own names are served.
    for host in [HOST, "localhost:8080", "localhost"] {
        let mut request = empty(to(Method::GET, "/v1/tools", Some(KEY_A)));
        request
            .headers_mut()
            .insert(header::HOST, HeaderValue::from_static(host));
        let reply = app.send(request).await;
        assert_eq!(reply.status, StatusCode::OK, "{host}: {}", reply.text());
    }

    // DNS rebinding: a foreign Host is refused before anything else (no credentials
    // are even asked for), in the shape of the path's family.
    for (method, path) in [
        (Method::POST, "/mcp"),
        (Method::POST, "/v1/tool_calls"),
        (Method::POST, "/v1/tools/up__echo/call"),
        (Method::POST, "/admin/upstreams"),
        (Method::GET, "/v1/tools"),
        (Method::GET, "/v1/upstreams"),
        (Method::GET, "/metrics"),
        (Method::GET, "/openapi.json"),
    ] {
        let request = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(header::HOST, "evil.example");
        let reply = app.send(with_json(request, &json!({}))).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{method} {path}");
        let body = reply.json();
        let (code, message) = if path == "/mcp" {
            assert_eq!(body["jsonrpc"], "2.0", "{body}");
            assert_eq!(body["id"], Value::Null, "{body}");
            assert_eq!(body["error"]["code"], -32600, "{body}");
            (&body["error"]["data"]["code"], &body["error"]["message"])
        } else {
            (&body["error"]["code"], &body["error"]["message"])
        };
        assert_eq!(code, "host_not_allowed", "{method} {path}: {body}");
        assert!(
            message
                .as_str()
                .is_some_and(|m| m.contains("allowed_hosts")),
            "the refusal says what to change: {body}"
        );
    }

    // The probes answer under any name, and without one.
    for path in ["/healthz", "/readyz"] {
        let foreign = Request::builder()
            .uri(path)
            .header(header::HOST, "evil.example");
        let reply = app.send(empty(foreign)).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.text());
        let reply = app.send(empty(Request::builder().uri(path))).await;
        assert_eq!(reply.status, StatusCode::OK, "{path} without Host");
    }

    // Ambiguous hosts: two Host headers (even with an allowed one first), an
    // absolute-form target naming another host, or no Host at all.
    let mut two = empty(to(Method::GET, "/v1/tools", Some(KEY_A)));
    two.headers_mut()
        .append(header::HOST, HeaderValue::from_static("evil.example"));
    let absolute = empty(to(Method::GET, "http://evil.example/v1/tools", Some(KEY_A)));
    let missing = empty(
        Request::builder()
            .uri("/v1/tools")
            .header(header::AUTHORIZATION, format!("Bearer {KEY_A}")),
    );
    for (what, request) in [
        ("two Host headers", two),
        ("an absolute target naming another host", absolute),
        ("no Host", missing),
    ] {
        let reply = app.send(request).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{what}");
        assert_eq!(reply.json()["error"]["code"], "bad_host", "{what}");
    }
    // An absolute target naming the gateway itself is fine.
    let same = empty(to(
        Method::GET,
        &format!("http://{HOST}/v1/tools"),
        Some(KEY_A),
    ));
    assert_eq!(app.send(same).await.status, StatusCode::OK);

    assert_eq!(app.calls(), 0, "a refused request reached an upstream");
}

#[tokio::test]
async fn foreign_origins_and_non_json_bodies_are_refused() {
    let app = app(&config_yaml()).await;
    let echo = json!({"arguments": {"message": "hi"}});

    // A JSON body from a page of another site: its Origin gives it away.
    for path in [
        "/mcp",
        "/v1/tool_calls",
        "/v1/tools/up__echo/call",
        "/admin/upstreams",
    ] {
        let request = to(Method::POST, path, Some(KEY_A))
            .header(header::ORIGIN, "http://evil.example")
            .header(header::ACCEPT, "application/json, text/event-stream");
        let reply = app.send(with_json(request, &echo)).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        let body = reply.json();
        let code = if path == "/mcp" {
            &body["error"]["data"]["code"]
        } else {
            &body["error"]["code"]
        };
        assert_eq!(code, "origin_not_allowed", "{path}: {body}");
        assert!(reply.header("access-control-allow-origin").is_none());
    }
    // A page of the gateway's own origin, and a client that sends no Origin, pass.
    let own = to(Method::POST, "/v1/tools/up__echo/call", Some(KEY_A))
        .header(header::ORIGIN, format!("http://{HOST}"));
    let reply = app.send(with_json(own, &echo)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(app.calls(), 1);

    // The bodies a browser sends cross-origin without asking first: 415, in the
    // path's shape, saying what to send.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        for path in [
            "/mcp",
            "/v1/tool_calls",
            "/v1/tools/up__echo/call",
            "/admin/upstreams",
        ] {
            let request = to(Method::POST, path, Some(KEY_A))
                .header(header::CONTENT_TYPE, content_type)
                .header(header::ACCEPT, "application/json, text/event-stream")
                .body(Body::from(echo.to_string()))
                .expect("a valid request");
            let reply = app.send(request).await;
            assert_eq!(
                reply.status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{path} with {content_type}"
            );
            let body = reply.json();
            let (code, message) = if path == "/mcp" {
                (&body["error"]["data"]["code"], &body["error"]["message"])
            } else {
                (&body["error"]["code"], &body["error"]["message"])
            };
            assert_eq!(code, "unsupported_media_type", "{path}: {body}");
            assert!(
                message
                    .as_str()
                    .is_some_and(|m| m.contains("Content-Type: application/json")),
                "{path}: {body}"
            );
        }
    }
    // A body without any Content-Type is refused too; no body at all is fine.
    let untyped = to(Method::POST, "/v1/tools/up__echo/call", Some(KEY_A))
        .header(header::CONTENT_LENGTH, echo.to_string().len())
        .body(Body::from(echo.to_string()))
        .expect("a valid request");
    assert_eq!(
        app.send(untyped).await.status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    let bodiless = to(Method::POST, "/v1/sessions", Some(KEY_A));
    assert_eq!(app.send(empty(bodiless)).await.status, StatusCode::CREATED);

    // Preflights: refused, no origin being listed.
    let preflight = to(Method::OPTIONS, "/v1/tool_calls", None)
        .header(header::ORIGIN, "http://evil.example")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST");
    let reply = app.send(empty(preflight)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(reply.json()["error"]["code"], "origin_not_allowed");
    assert!(reply.header("access-control-allow-origin").is_none());

    assert_eq!(app.calls(), 1, "a refused request reached an upstream");
}

#[tokio::test]
async fn listed_origins_get_cors_and_others_do_not() {
    const APP: &str = "http://app.test:3000";
    let app = app(&format!(
        "{}cors: {{allowed_origins: [\"{APP}\"]}}\n",
        config_yaml()
    ))
    .await;
    let preflight = |path: &'static str, origin: &'static str| {
        empty(
            to(Method::OPTIONS, path, None)
                .header(header::ORIGIN, origin)
                .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
                .header(
                    header::ACCESS_CONTROL_REQUEST_HEADERS,
                    "content-type, authorization",
                ),
        )
    };
    // `/mcp` is served without the router's layers (`serve::Front`): the same answers.
    for path in ["/v1/tools/up__echo/call", "/mcp"] {
        let allowed = app.send(preflight(path, APP)).await;
        assert_eq!(allowed.status, StatusCode::NO_CONTENT, "{path}");
        assert_eq!(allowed.header("access-control-allow-origin"), Some(APP));
        assert!(
            allowed
                .header("access-control-allow-headers")
                .is_some_and(|h| h.contains("authorization") && h.contains("mcp-session-id")),
            "{path}: {:?}",
            allowed.headers
        );
        let refused = app.send(preflight(path, "http://evil.example")).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert!(refused.header("access-control-allow-origin").is_none());
    }

    // A page of a listed origin starts an MCP session and may read its id.
    let initialize = |origin: &'static str| {
        let mut request = mcp(
            Some(KEY_A),
            None,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": SESSION_VERSION, "capabilities": {},
                "clientInfo": {"name": "router-test", "version": "1"}}}),
        );
        request
            .headers_mut()
            .insert(header::ORIGIN, HeaderValue::from_static(origin));
        request
    };
    let reply = app.send(initialize(APP)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(reply.header("mcp-session-id").is_some());
    assert_eq!(reply.header("access-control-allow-origin"), Some(APP));
    assert!(
        reply
            .header("access-control-expose-headers")
            .is_some_and(|h| h.contains("mcp-session-id")),
        "{:?}",
        reply.headers
    );
    let refused = app.send(initialize("http://evil.example")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.header("access-control-allow-origin").is_none());
    assert!(refused.header("mcp-session-id").is_none());

    let call = |origin: &'static str| {
        with_json(
            to(Method::POST, "/v1/tools/up__echo/call", Some(KEY_A)).header(header::ORIGIN, origin),
            &json!({"arguments": {"message": "from a page"}}),
        )
    };
    let reply = app.send(call(APP)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.header("access-control-allow-origin"), Some(APP));
    assert!(
        reply
            .header("access-control-expose-headers")
            .is_some_and(|h| h.contains("mcp-session-id")),
        "{:?}",
        reply.headers
    );
    assert_eq!(
        app.send(call("http://evil.example")).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(app.calls(), 1);
}

/// `POST /v1/tools/{name}/call` is answered by `Front` without the router; every answer
/// must be the router's: percent-encoded names, refusals, bodies too large, other
/// methods, the correlation id on each.
#[tokio::test]
async fn rest_calls_answer_alike_with_and_without_the_router() {
    let app = app(&config_yaml()).await;
    let echo = json!({"arguments": {"message": "hi"}}).to_string();
    let call = |path: &str, key: Option<&str>, body: &str| {
        to(Method::POST, path, key)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned()))
            .expect("a valid request")
    };
    let too_big = format!(
        "{{\"arguments\": {{\"message\": \"{}\"}}}}",
        "x".repeat(4 * 1024 * 1024)
    );
    let cases = [
        (
            "a call",
            "/v1/tools/up__echo/call",
            Some(KEY_A),
            &*echo,
            StatusCode::OK,
            "",
        ),
        (
            "a percent-encoded name",
            "/v1/tools/up%5F%5Fecho/call",
            Some(KEY_A),
            &*echo,
            StatusCode::OK,
            "",
        ),
        (
            "a denied tool",
            "/v1/tools/up__secret/call",
            Some(KEY_B),
            "{}",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "no credentials",
            "/v1/tools/up__echo/call",
            None,
            &*echo,
            StatusCode::UNAUTHORIZED,
            "missing_credentials",
        ),
        (
            "a body that is not JSON",
            "/v1/tools/up__echo/call",
            Some(KEY_A),
            "{",
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            "a misspelt member",
            "/v1/tools/up__echo/call",
            Some(KEY_A),
            r#"{"argument": {"message": "hi"}}"#,
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            "a body over the limit",
            "/v1/tools/up__echo/call",
            Some(KEY_A),
            &*too_big,
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
    ];
    for (what, path, key, body, status, code) in cases {
        let fast = app.send(call(path, key, body)).await;
        let plain = app.send_plain(call(path, key, body)).await;
        for (via, reply) in [("fast path", &fast), ("router", &plain)] {
            assert_eq!(reply.status, status, "{what} ({via}): {}", reply.text());
            assert!(
                reply
                    .header("toolgate-correlation-id")
                    .is_some_and(|id| id.len() == 32),
                "{what} ({via}): a correlation id on every answer: {:?}",
                reply.headers
            );
            if code.is_empty() {
                assert_eq!(reply.json()["content"][0]["text"], "Echo: hi", "{what}");
            } else {
                assert_eq!(reply.json()["error"]["code"], code, "{what} ({via})");
            }
        }
        if code.is_empty() {
            assert_eq!(fast.json(), plain.json(), "{what}");
        } else {
            assert_eq!(fast.body, plain.body, "{what}");
        }
    }
    // Other methods and malformed paths are the router's: the same answer either way.
    for (method, path) in [
        (Method::GET, "/v1/tools/up__echo/call"),
        (Method::POST, "/v1/tools//call"),
        (Method::POST, "/v1/tools/up__echo/call/"),
        (Method::POST, "/v1/tools/a/b/call"),
        (Method::POST, "/v1/tools/%FF/call"),
    ] {
        let request = || empty(to(method.clone(), path, Some(KEY_A)));
        let fast = app.send(request()).await;
        let plain = app.send_plain(request()).await;
        assert_ne!(fast.status, StatusCode::OK, "{method} {path}");
        assert_eq!(
            (fast.status, &fast.body),
            (plain.status, &plain.body),
            "{method} {path}"
        );
    }
    assert_eq!(app.calls(), 4, "the two calls, each both ways");
}

/// A path no route serves and a method a route does not take are answered in the
/// API's JSON error shape (a 405 with its `Allow` header), credentials or not; the
/// guard still comes first.
#[tokio::test]
async fn unrouted_requests_get_json_errors() {
    let app = app(&config_yaml()).await;
    for (method, path, status, code, allow) in [
        (
            Method::GET,
            "/v1/nope",
            StatusCode::NOT_FOUND,
            "not_found",
            None,
        ),
        (
            Method::GET,
            "/nope",
            StatusCode::NOT_FOUND,
            "not_found",
            None,
        ),
        (
            Method::DELETE,
            "/v1/tools",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            Some("GET"),
        ),
        (
            Method::GET,
            "/v1/tools/up__echo/call",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            Some("POST"),
        ),
        (
            Method::PUT,
            "/v1/sessions",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            Some("POST"),
        ),
    ] {
        for key in [Some(KEY_A), None] {
            let reply = app.send(empty(to(method.clone(), path, key))).await;
            assert_eq!(reply.status, status, "{method} {path}: {}", reply.text());
            let body = reply.json();
            assert_eq!(body["error"]["code"], code, "{method} {path}: {body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(path), "{method} {path}: {message}");
            if let Some(allowed) = allow {
                let header = reply.header("allow").unwrap_or_default();
                assert!(
                    header.contains(allowed),
                    "{method} {path}: Allow {header:?}"
                );
            }
        }
    }
    let long = format!("/v1/{}", "x".repeat(5000));
    let reply = app.send(empty(to(Method::GET, &long, Some(KEY_A)))).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(
        reply.body.len() < 600,
        "the path is cut in the message: {}",
        reply.body.len()
    );
    let foreign = app
        .send(empty(
            Request::builder()
                .uri("/v1/nope")
                .header(header::HOST, "evil.example"),
        ))
        .await;
    assert_eq!(
        foreign.status,
        StatusCode::FORBIDDEN,
        "the guard answers first"
    );
}

/// Every REST route that reads a body (`session` for the session's own).
fn body_routes(session: &str) -> [String; 5] {
    [
        "/v1/tools/up__echo/call".to_owned(),
        "/v1/tool_calls".to_owned(),
        "/v1/tool_use".to_owned(),
        format!("/v1/sessions/{session}/tools/expand"),
        "/v1/tasks/no-such-task/input".to_owned(),
    ]
}

/// The test app with `max_request_body_bytes: limit`, and a session of tenant A.
async fn app_with_body_limit(limit: usize) -> (TestApp, String) {
    let app = app(&format!(
        "{}max_request_body_bytes: {limit}\n",
        config_yaml()
    ))
    .await;
    let session = app
        .send(empty(to(Method::POST, "/v1/sessions", Some(KEY_A))))
        .await
        .json()["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    (app, session)
}

/// `max_request_body_bytes` is the one body limit: `/mcp` and every REST route that
/// reads a body answer a larger one with 413, in their own JSON shape, naming the
/// setting, before anything reaches an upstream; a body under it is read.
#[tokio::test]
async fn every_surface_keeps_the_one_body_limit() {
    let limit = 2048;
    let (app, session) = app_with_body_limit(limit).await;
    let post = |path: &str, body: String| {
        to(Method::POST, path, Some(KEY_A))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .expect("a valid request")
    };
    let padded = |size: usize| {
        let call = json!({"arguments": {"message": ""}}).to_string();
        let body = call.replace(
            r#""message":"""#,
            &format!(r#""message":"{}""#, "x".repeat(size - call.len())),
        );
        assert_eq!(body.len(), size);
        body
    };
    let under = app
        .send(post("/v1/tools/up__echo/call", padded(limit)))
        .await;
    assert_eq!(under.status, StatusCode::OK, "{}", under.text());
    let over = padded(limit + 1);
    for path in body_routes(&session) {
        for (via, reply) in [
            ("fast path", app.send(post(&path, over.clone())).await),
            ("router", app.send_plain(post(&path, over.clone())).await),
        ] {
            assert_eq!(
                reply.status,
                StatusCode::PAYLOAD_TOO_LARGE,
                "{path} ({via}): {}",
                reply.text()
            );
            let body = reply.json();
            assert_eq!(
                body["error"]["code"], "body_too_large",
                "{path} ({via}): {body}"
            );
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("max_request_body_bytes") && message.contains(&limit.to_string()),
                "{path} ({via}): the message names the setting and its value: {message}"
            );
        }
    }
    let reply = app
        .send(
            to(Method::POST, "/mcp", Some(KEY_A))
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, text/event-stream")
                .body(Body::from(over.clone()))
                .expect("a valid request"),
        )
        .await;
    expect_status(&reply, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        app.calls(),
        1,
        "only the call under the limit reached the upstream"
    );
}

/// Credentials are checked before a body is read, on every REST route that takes one
/// (as on `/mcp`): a caller without them gets the refusal any request without them
/// gets — not a 413 that tells it the size limit, and not a wait while the gateway
/// reads a body it will refuse. A body that never ends proves nothing was read.
#[tokio::test]
async fn no_body_is_read_before_the_credentials_are_checked() {
    let limit = 2048;
    let (app, session) = app_with_body_limit(limit).await;
    let oversized = || Body::from(format!(r#"{{"arguments": "{}"}}"#, "x".repeat(limit)));
    let endless =
        || Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>());
    for key in [None, Some("not-a-key")] {
        let expected = app.send(empty(to(Method::GET, "/v1/tools", key))).await;
        expect_status(&expected, StatusCode::UNAUTHORIZED);
        for path in body_routes(&session) {
            for what in ["oversized", "endless"] {
                for via in ["fast path", "router"] {
                    let body = if what == "oversized" {
                        oversized()
                    } else {
                        endless()
                    };
                    let request = to(Method::POST, &path, key)
                        .header(header::CONTENT_TYPE, "application/json")
                        .body(body)
                        .expect("a valid request");
                    let sent = async {
                        if via == "router" {
                            app.send_plain(request).await
                        } else {
                            app.send(request).await
                        }
                    };
                    let context = format!("{path} ({via}), {what} body, key {key:?}");
                    let reply = tokio::time::timeout(WAIT, sent).await.unwrap_or_else(|_| {
                        panic!("{context}: no answer in {WAIT:?}: the body was read first")
                    });
                    assert_eq!(
                        (reply.status, reply.text()),
                        (expected.status, expected.text()),
                        "{context}: refused like any request without credentials"
                    );
                }
            }
        }
    }
    assert_eq!(app.calls(), 0, "nothing reached the upstream");
}

// ---------------------------------------------------------------------------------
// Authentication.
// ---------------------------------------------------------------------------------

/// What a refused credential gets on `/mcp` and `/v1`: `(status, code, message,
/// WWW-Authenticate)`, read from either body shape.
fn refusal_of(reply: &Reply, mcp: bool) -> (StatusCode, String, String, String) {
    let body = reply.json();
    let error = &body["error"];
    let code = if mcp {
        assert_eq!(body["jsonrpc"], "2.0", "{body}");
        assert_eq!(error["code"], -32001, "{body}");
        &error["data"]["code"]
    } else {
        &error["code"]
    };
    (
        reply.status,
        code.as_str().unwrap_or_default().to_owned(),
        error["message"].as_str().unwrap_or_default().to_owned(),
        reply
            .header("www-authenticate")
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test]
async fn refused_credentials_are_answered_alike_on_mcp_and_rest() {
    let app = app(&config_yaml()).await;
    let ghost = jwt_for("ghost");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": SESSION_VERSION, "capabilities": {},
        "clientInfo": {"name": "router-test", "version": "1"}}});
    let cases: [(&str, Option<String>, &str); 5] = [
        ("no credentials", None, "missing_credentials"),
        (
            "an empty bearer",
            Some("Bearer ".into()),
            "missing_credentials",
        ),
        (
            "a wrong key",
            Some("Bearer not-a-key-of-anyone-0123456789".into()),
            "invalid_credentials",
        ),
        (
            "another scheme",
            Some(format!("Basic {KEY_A}")),
            "unsupported_scheme",
        ),
        (
            "a valid token naming an unknown tenant",
            Some(format!("Bearer {ghost}")),
            "unknown_tenant",
        ),
    ];
    for (label, authorization, want) in cases {
        let authorize = |builder: http::request::Builder| match &authorization {
            Some(value) => builder.header(header::AUTHORIZATION, value.as_str()),
            None => builder,
        };
        let mcp_post = authorize(
            to(Method::POST, "/mcp", None)
                .header(header::ACCEPT, "application/json, text/event-stream"),
        );
        let mcp_get = authorize(
            to(Method::GET, "/mcp", None)
                .header(header::ACCEPT, "text/event-stream")
                .header("mcp-session-id", "some-session"),
        );
        let answers = [
            (
                "POST /mcp",
                true,
                app.send(with_json(mcp_post, &initialize)).await,
            ),
            ("GET /mcp", true, app.send(empty(mcp_get)).await),
            (
                "GET /v1/tools",
                false,
                app.send(empty(authorize(to(Method::GET, "/v1/tools", None))))
                    .await,
            ),
            (
                "POST /v1/tools/up__echo/call",
                false,
                app.send(with_json(
                    authorize(to(Method::POST, "/v1/tools/up__echo/call", None)),
                    &json!({"arguments": {"message": "hi"}}),
                ))
                .await,
            ),
            (
                "POST /v1/sessions",
                false,
                app.send(empty(authorize(to(Method::POST, "/v1/sessions", None))))
                    .await,
            ),
            (
                "GET /v1/upstreams",
                false,
                app.send(empty(authorize(to(Method::GET, "/v1/upstreams", None))))
                    .await,
            ),
        ];
        let mut first: Option<(StatusCode, String, String, String)> = None;
        for (surface, is_mcp, reply) in &answers {
            let refusal = refusal_of(reply, *is_mcp);
            assert_eq!(
                refusal.0,
                StatusCode::UNAUTHORIZED,
                "{label} on {surface}: {}",
                reply.text()
            );
            assert_eq!(refusal.1, want, "{label} on {surface}: {}", reply.text());
            assert!(
                refusal.3.starts_with("Bearer realm=\"toolgate\""),
                "{label} on {surface}: WWW-Authenticate {:?}",
                refusal.3
            );
            // Nothing about the catalog or the tenants is given away.
            for secret in ["up__", "ghost"] {
                assert!(
                    !reply.text().contains(secret),
                    "{label} on {surface} names {secret}: {}",
                    reply.text()
                );
            }
            // Every surface says the same (status, code, message, challenge).
            match &first {
                None => first = Some(refusal),
                Some(first) => assert_eq!(&refusal, first, "{label}: {surface} vs POST /mcp"),
            }
        }
    }
    // The codes tell a caller what to fix; the tenant's valid credentials pass.
    let valid = to(Method::GET, "/v1/tools", None)
        .header(header::AUTHORIZATION, format!("Bearer {}", jwt_for("a")));
    assert_eq!(app.send(empty(valid)).await.status, StatusCode::OK);
    let valid = to(Method::GET, "/v1/tools", Some(KEY_B));
    assert_eq!(app.send(empty(valid)).await.status, StatusCode::OK);
    assert_eq!(app.calls(), 0, "a refused request reached an upstream");
}

#[tokio::test]
async fn admin_metrics_and_tenant_credentials_open_only_their_own_doors() {
    let app = app(&config_yaml()).await;
    let names_of = |reply: &Reply| -> Vec<String> {
        let body = reply.json();
        let list = body.get("upstreams").unwrap_or(&body);
        names(list)
    };

    // The admin API: the admin token only, every other credential refused alike.
    let admin = app
        .send(empty(to(
            Method::GET,
            "/admin/upstreams",
            Some(ADMIN_TOKEN),
        )))
        .await;
    assert_eq!(admin.status, StatusCode::OK, "{}", admin.text());
    assert_eq!(names_of(&admin), ["down", "slow", "up"]);
    let mut refusals = Vec::new();
    for key in [
        None,
        Some(KEY_A),
        Some(METRICS_TOKEN),
        Some("not-a-key-of-anyone-0123456789"),
    ] {
        let reply = app
            .send(empty(to(Method::GET, "/admin/upstreams", key)))
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{key:?}");
        assert_eq!(reply.json()["error"]["code"], "unauthorized", "{key:?}");
        refusals.push(reply.body);
    }
    assert!(
        refusals.windows(2).all(|pair| pair[0] == pair[1]),
        "the admin API answers every refused credential alike"
    );
    // A registration body is read only once the token is checked, and one over the
    // admin API's limit is refused in its JSON shape.
    let oversized = || {
        to(Method::POST, "/admin/upstreams", Some(ADMIN_TOKEN))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(format!(
                "{{\"name\": \"big\", \"openapi\": {{\"spec_url\": \"{}\"}}}}",
                "x".repeat(1024 * 1024)
            )))
            .expect("a valid request")
    };
    let reply = app.send(oversized()).await;
    expect_status(&reply, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        reply.json()["error"]["code"],
        "body_too_large",
        "{}",
        reply.text()
    );
    let unauthorized = to(Method::POST, "/admin/upstreams", Some(KEY_A))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("x".repeat(2 * 1024 * 1024)))
        .expect("a valid request");
    let reply = app.send(unauthorized).await;
    assert_eq!(
        reply.status,
        StatusCode::UNAUTHORIZED,
        "the token first: {}",
        reply.text()
    );
    assert_eq!(
        reply.body, refusals[0],
        "refused as any other request without the token"
    );

    // `/metrics`: the metrics or admin token; a tenant's key is not enough.
    for (key, want) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some(KEY_A), StatusCode::UNAUTHORIZED),
        (Some(METRICS_TOKEN), StatusCode::OK),
        (Some(ADMIN_TOKEN), StatusCode::OK),
    ] {
        let reply = app.send(empty(to(Method::GET, "/metrics", key))).await;
        assert_eq!(
            reply.status,
            want,
            "/metrics with {key:?}: {}",
            reply.text()
        );
        if want == StatusCode::OK {
            assert!(reply.text().contains("toolgate_catalog_tools"), "{key:?}");
        } else {
            assert_eq!(reply.json()["error"]["code"], "unauthorized");
            assert!(reply.header("www-authenticate").is_some());
        }
    }

    // `/v1/upstreams`: the admin token sees every upstream, a tenant those it can use.
    for (key, want) in [
        (ADMIN_TOKEN, vec!["down", "slow", "up"]),
        (KEY_A, vec!["down", "slow", "up"]),
        (KEY_B, vec!["up"]),
    ] {
        let reply = app
            .send(empty(to(Method::GET, "/v1/upstreams", Some(key))))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(names_of(&reply), want, "{key}");
    }

    // The admin and metrics tokens are no tenant's keys: the tool surfaces refuse them.
    for token in [ADMIN_TOKEN, METRICS_TOKEN] {
        let reply = app
            .send(empty(to(Method::GET, "/v1/tools", Some(token))))
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.json()["error"]["code"], "invalid_credentials");
        let reply = app
            .send(mcp(
                Some(token),
                None,
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            ))
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.json()["error"]["data"]["code"], "invalid_credentials");
    }
    assert_eq!(app.calls(), 0);
}

// ---------------------------------------------------------------------------------
// Session ownership.
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn another_tenants_session_is_answered_like_one_that_does_not_exist() {
    let app = app(&config_yaml()).await;
    let session = app.initialize(KEY_A).await;
    const NO_SUCH: &str = "no-such-session-0123456789abcdef";

    // POST: tools/list and tools/call by b on a's session vs on a session that never
    // existed: the same status and the same bytes.
    for (method, params) in [
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({"name": "up__echo", "arguments": {"message": "hi"}}),
        ),
    ] {
        let on_a = app.rpc(KEY_B, &session, method, params.clone()).await;
        let on_nothing = app.rpc(KEY_B, NO_SUCH, method, params).await;
        assert_eq!(
            on_a.status,
            StatusCode::NOT_FOUND,
            "{method}: {}",
            on_a.text()
        );
        assert_eq!(on_a.status, on_nothing.status, "{method}");
        assert_eq!(on_a.text(), on_nothing.text(), "{method}");
        let body = on_a.json();
        assert_eq!(body["error"]["code"], -32001, "{body}");
        assert_eq!(body["error"]["data"]["code"], "session_not_found", "{body}");
        assert!(body.get("result").is_none(), "{body}");
    }
    // GET (a's stream) and DELETE (ending a's session): the same.
    for method in [Method::GET, Method::DELETE] {
        let on_a = app.send(mcp_session(method.clone(), KEY_B, &session)).await;
        let on_nothing = app.send(mcp_session(method.clone(), KEY_B, NO_SUCH)).await;
        assert_eq!(
            on_a.status,
            StatusCode::NOT_FOUND,
            "{method}: {}",
            on_a.text()
        );
        assert_eq!(on_a.status, on_nothing.status, "{method}");
        assert_eq!(on_a.text(), on_nothing.text(), "{method}");
        assert_eq!(on_a.json()["error"]["data"]["code"], "session_not_found");
    }
    assert_eq!(
        app.calls(),
        0,
        "b's call on a's session reached an upstream"
    );

    // a's session is untouched by all of it: its list, a call, its stream.
    assert!(
        app.listed(KEY_A, &session)
            .await
            .contains(&"up__secret".to_owned())
    );
    let echo = app
        .call_tool(
            KEY_A,
            &session,
            "up__echo",
            json!({"message": "still mine"}),
        )
        .await;
    assert_eq!(first_text(&echo.result()), "Echo: still mine");
    let (status, headers) = app.head(mcp_session(Method::GET, KEY_A, &session)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    // A session a ended is gone like one that never existed, for a too.
    let ended = app.send(mcp_session(Method::DELETE, KEY_A, &session)).await;
    assert_eq!(ended.status, StatusCode::OK, "{}", ended.text());
    let after = app.rpc(KEY_A, &session, "tools/list", json!({})).await;
    let never = app.rpc(KEY_A, NO_SUCH, "tools/list", json!({})).await;
    assert_eq!(after.status, StatusCode::NOT_FOUND);
    assert_eq!(after.text(), never.text());

    // The REST sessions belong to their tenant the same way.
    let created = app
        .send(empty(to(Method::POST, "/v1/sessions", Some(KEY_A))))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let id = created.json()["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    let tools_of = |key: &'static str, id: &str| {
        empty(to(
            Method::GET,
            &format!("/v1/sessions/{id}/tools"),
            Some(key),
        ))
    };
    assert_eq!(app.send(tools_of(KEY_A, &id)).await.status, StatusCode::OK);
    let on_a = app.send(tools_of(KEY_B, &id)).await;
    let on_nothing = app.send(tools_of(KEY_B, NO_SUCH)).await;
    assert_eq!(on_a.status, StatusCode::NOT_FOUND);
    assert_eq!(on_a.json()["error"]["code"], "session_not_found");
    assert_eq!(on_a.text(), on_nothing.text());
    let call_on_a = app
        .rest_call(
            KEY_B,
            "up__echo",
            json!({"arguments": {"message": "hi"}, "session": id}),
        )
        .await;
    assert_eq!(call_on_a.status, StatusCode::NOT_FOUND);
    assert_eq!(call_on_a.text(), on_nothing.text());
    assert_eq!(app.calls(), 1, "only a's own call reached the upstream");
}

// ---------------------------------------------------------------------------------
// Each failure kind on each surface.
// ---------------------------------------------------------------------------------

/// One way a call ends, and what each surface must make of it.
struct Case {
    tool: &'static str,
    arguments: Value,
    /// `_meta["toolgate/error"]` of the MCP `isError` result; `None` for a result the
    /// tool itself marked `isError` (passed on as it came).
    mcp_code: Option<&'static str>,
    /// The REST status, and the error code (`None`: a 200 answer with `is_error`).
    rest: (StatusCode, Option<&'static str>),
    /// Said in the MCP result's text and in the REST message (or content).
    says: &'static [&'static str],
    /// Whether the call reaches the upstream.
    reaches_upstream: bool,
}

/// Every way a call can fail that the test upstreams produce (the unknown tool aside).
fn failure_cases() -> Vec<Case> {
    vec![
        Case {
            tool: "up__echo",
            arguments: json!({"message": 5}),
            mcp_code: Some("invalid_args"),
            rest: (StatusCode::BAD_REQUEST, Some("invalid_args")),
            says: &["'up__echo'", "/message"],
            reaches_upstream: false,
        },
        Case {
            tool: "up__tool_error",
            arguments: json!({}),
            mcp_code: None,
            rest: (StatusCode::OK, None),
            says: &["the widget broke"],
            reaches_upstream: true,
        },
        Case {
            tool: "up__fail",
            arguments: json!({}),
            mcp_code: Some("failed"),
            // Named as the caller called it, not by the upstream's own name.
            rest: (StatusCode::BAD_GATEWAY, Some("failed")),
            says: &["'up__fail' broke: the server said no"],
            reaches_upstream: true,
        },
        Case {
            tool: "down__echo",
            arguments: json!({"message": "hi"}),
            mcp_code: Some("unavailable"),
            rest: (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")),
            says: &["upstream 'down' is unavailable", "connection refused"],
            reaches_upstream: false,
        },
        Case {
            tool: "slow__wait",
            arguments: json!({}),
            mcp_code: Some("timeout"),
            rest: (StatusCode::GATEWAY_TIMEOUT, Some("timeout")),
            // The duration as configured, the tool as called.
            says: &["'slow__wait'", "within 50ms"],
            reaches_upstream: true,
        },
        Case {
            tool: "up__limited",
            arguments: json!({}),
            mcp_code: Some("rate_limited"),
            rest: (StatusCode::TOO_MANY_REQUESTS, Some("rate_limited")),
            says: &["'up__limited' is busy"],
            reaches_upstream: true,
        },
    ]
}

#[tokio::test]
async fn each_failure_kind_reaches_mcp_and_rest_as_documented() {
    let app = app(&config_yaml()).await;
    let session = app.initialize(KEY_A).await;

    // A call that works, for contrast: no isError, a correlation id, 200 on REST.
    let ok = app
        .call_tool(KEY_A, &session, "up__echo", json!({"message": "hi"}))
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    let result = ok.result();
    assert_eq!(first_text(&result), "Echo: hi", "{result}");
    assert_ne!(result["isError"], true, "{result}");
    assert!(
        result["_meta"]["toolgate/correlationId"].is_string(),
        "{result}"
    );
    let rest = app
        .rest_call(KEY_A, "up__echo", json!({"arguments": {"message": "hi"}}))
        .await;
    assert_eq!(rest.status, StatusCode::OK, "{}", rest.text());
    assert_eq!(rest.json()["is_error"], false);
    assert_eq!(rest.json()["content"][0]["text"], "Echo: hi");
    assert_eq!(app.calls(), 2);

    let cases = failure_cases();
    for case in &cases {
        let tool = case.tool;
        let before = app.calls();

        // MCP: a tool result with isError, never a JSON-RPC error.
        let reply = app
            .call_tool(KEY_A, &session, tool, case.arguments.clone())
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{tool}: {}", reply.text());
        let result = reply.result();
        assert_eq!(result["isError"], true, "{tool}: {result}");
        let text = first_text(&result);
        for said in case.says {
            assert!(
                text.contains(said),
                "{tool}: MCP text lacks {said:?}: {text}"
            );
        }
        match case.mcp_code {
            Some(code) => {
                assert_eq!(result["_meta"]["toolgate/error"], code, "{tool}: {result}")
            }
            None => assert!(
                result["_meta"].get("toolgate/error").is_none(),
                "{tool}: the tool's own error result is passed on: {result}"
            ),
        }
        if case.mcp_code == Some("rate_limited") {
            assert_eq!(result["_meta"]["toolgate/retryAfterMs"], 3000, "{result}");
        }

        // REST: the error kind's status and code (or the tool's own error result).
        let reply = app
            .rest_call(KEY_A, tool, json!({"arguments": case.arguments}))
            .await;
        assert_eq!(reply.status, case.rest.0, "{tool}: {}", reply.text());
        let body = reply.json();
        match case.rest.1 {
            Some(code) => {
                assert_eq!(body["error"]["code"], code, "{tool}: {body}");
                let message = body["error"]["message"].as_str().unwrap_or_default();
                for said in case.says {
                    assert!(
                        message.contains(said),
                        "{tool}: REST message lacks {said:?}: {message}"
                    );
                }
            }
            None => {
                assert_eq!(body["is_error"], true, "{tool}: {body}");
                assert_eq!(body["content"][0]["text"], case.says[0], "{tool}: {body}");
            }
        }
        if case.rest.0 == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(reply.header("retry-after"), Some("3"), "{tool}");
        }

        let reached = app.calls() - before;
        assert_eq!(
            reached,
            if case.reaches_upstream { 2 } else { 0 },
            "{tool}: calls that reached the upstream"
        );
    }

    // An unknown tool: a JSON-RPC error on MCP (-32602, as the spec asks), 404 on REST;
    // both point to the tool every caller can use to find the right one.
    let before = app.calls();
    let reply = app
        .call_tool(KEY_A, &session, "up__nowhere", json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let response = reply.response();
    assert!(response.get("result").is_none(), "{response}");
    assert_eq!(response["id"], 7, "{response}");
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert_eq!(response["error"]["data"]["code"], "not_found", "{response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("unknown tool 'up__nowhere'") && message.contains("tool_search"),
        "{message}"
    );
    let reply = app.rest_call(KEY_A, "up__nowhere", json!({})).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["error"]["code"], "not_found", "{body}");
    assert_eq!(
        body["error"]["message"], message,
        "the same words on both surfaces"
    );
    assert_eq!(app.calls(), before, "an unknown tool reached an upstream");
}

#[tokio::test]
async fn a_tool_the_tenant_may_not_use_is_answered_like_one_that_does_not_exist() {
    let app = app(&config_yaml()).await;
    let (hidden, missing) = ("up__secret", "up__nowhere");
    let session = app.initialize(KEY_B).await;

    // tools/call on a session.
    let denied = app.call_tool(KEY_B, &session, hidden, json!({})).await;
    let unknown = app.call_tool(KEY_B, &session, missing, json!({})).await;
    assert_eq!(unknown.response()["error"]["code"], -32602);
    assert_eq!(denied.status, unknown.status);
    assert_eq!(
        normalized(&denied.response(), hidden),
        normalized(&unknown.response(), missing)
    );
    // tool_invoke: the same.
    let invoke = |name: &str| json!({"name": name, "arguments": {}});
    let denied = app
        .call_tool(KEY_B, &session, "tool_invoke", invoke(hidden))
        .await;
    let unknown = app
        .call_tool(KEY_B, &session, "tool_invoke", invoke(missing))
        .await;
    assert_eq!(unknown.response()["error"]["code"], -32602);
    assert_eq!(
        normalized(&denied.response(), hidden),
        normalized(&unknown.response(), missing)
    );
    // Sessionless (2026-07-28): the same.
    let denied = app.sessionless_call(KEY_B, hidden, json!({})).await;
    let unknown = app.sessionless_call(KEY_B, missing, json!({})).await;
    assert_eq!(unknown.status, StatusCode::OK, "{}", unknown.text());
    assert_eq!(unknown.response()["error"]["code"], -32602);
    assert_eq!(denied.status, unknown.status);
    assert_eq!(
        normalized(&denied.response(), hidden),
        normalized(&unknown.response(), missing)
    );
    // REST: the same status and body.
    let denied = app.rest_call(KEY_B, hidden, json!({})).await;
    let unknown = app.rest_call(KEY_B, missing, json!({})).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(denied.status, unknown.status);
    assert_eq!(
        normalized(&denied.json(), hidden),
        normalized(&unknown.json(), missing)
    );
    // tool_expand_tools: both invalid, and nothing else names the hidden tool.
    let reply = app
        .call_tool(
            KEY_B,
            &session,
            "tool_expand_tools",
            json!({"tool_names": [hidden, missing]}),
        )
        .await;
    let mut expanded = reply.result()["structuredContent"].clone();
    assert_eq!(
        expanded["invalid_tools"],
        json!([hidden, missing]),
        "{expanded}"
    );
    assert_eq!(expanded["success"], false, "{expanded}");
    // Named nowhere else: not added, not offered, not suggested.
    let suggested: Vec<Value> = expanded
        .as_object_mut()
        .and_then(|o| {
            o.remove("invalid_tools");
            o.remove("did_you_mean")
        })
        .and_then(|d| d.as_object().map(|d| d.values().cloned().collect()))
        .unwrap_or_default();
    assert!(
        !expanded.to_string().contains(hidden) && !json!(suggested).to_string().contains(hidden),
        "{expanded} {suggested:?}"
    );
    assert_eq!(app.calls(), 0, "a hidden tool reached its upstream");

    // The tool exists: a tenant allowed it calls it.
    let session = app.initialize(KEY_A).await;
    let reply = app.call_tool(KEY_A, &session, hidden, json!({})).await;
    assert_eq!(first_text(&reply.result()), "the secret is 42");
    assert_eq!(app.calls(), 1);
}

#[tokio::test]
async fn batches_hand_every_failure_back_to_the_model_as_a_result() {
    let app = app(&config_yaml()).await;
    let cases = failure_cases();
    // The calls as a model asked for them, the unknown tool last.
    let mut asked: Vec<(&str, Value)> = cases
        .iter()
        .map(|case| (case.tool, case.arguments.clone()))
        .collect();
    asked.push(("up__nowhere", json!({})));
    let tool_calls: Vec<Value> = asked
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    let tool_use: Vec<Value> = asked
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": arguments})
        })
        .collect();

    // OpenAI: one `tool` message per call, in order; a failure is its text.
    let request = to(Method::POST, "/v1/tool_calls", Some(KEY_A));
    let reply = app
        .send(with_json(
            request,
            &json!({"role": "assistant", "tool_calls": tool_calls}),
        ))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let openai = reply.json()["messages"].clone();
    // Anthropic: one `tool_result` per call, in order, failures marked `is_error`.
    let request = to(Method::POST, "/v1/tool_use", Some(KEY_A));
    let reply = app
        .send(with_json(
            request,
            &json!({"role": "assistant", "content": tool_use}),
        ))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let anthropic = reply.json()["content"].clone();

    let expected = cases
        .iter()
        .map(|case| (case.tool, case.rest.1, case.says))
        .chain(std::iter::once((
            "up__nowhere",
            Some("not_found"),
            &["unknown tool 'up__nowhere'", "tool_search"][..],
        )));
    for (i, (tool, code, says)) in expected.enumerate() {
        let message = &openai[i];
        assert_eq!(message["role"], "tool", "{message}");
        assert_eq!(message["tool_call_id"], format!("call_{i}"), "{message}");
        let result = &anthropic[i];
        assert_eq!(result["type"], "tool_result", "{result}");
        assert_eq!(result["tool_use_id"], format!("toolu_{i}"), "{result}");
        assert_eq!(result["is_error"], true, "{tool}: {result}");
        for text in [&message["content"], &result["content"][0]["text"]] {
            let text = text.as_str().unwrap_or_default();
            if let Some(code) = code {
                let kind = format!("Error ({code}): ");
                assert!(text.starts_with(&kind), "{tool}: {text}");
            }
            for said in says {
                assert!(text.contains(said), "{tool}: lacks {said:?}: {text}");
            }
        }
    }
    assert_eq!(openai.as_array().map(Vec::len), Some(cases.len() + 1));
    assert_eq!(anthropic.as_array().map(Vec::len), Some(cases.len() + 1));

    // A tool b may not use reads in a batch exactly like one that does not exist.
    let batch = |name: &str| {
        json!([{"id": "call_0", "type": "function",
                "function": {"name": name, "arguments": "{}"}}])
    };
    let denied = app
        .send(with_json(
            to(Method::POST, "/v1/tool_calls", Some(KEY_B)),
            &batch("up__secret"),
        ))
        .await;
    let unknown = app
        .send(with_json(
            to(Method::POST, "/v1/tool_calls", Some(KEY_B)),
            &batch("up__nowhere"),
        ))
        .await;
    assert_eq!(unknown.status, StatusCode::OK);
    assert_eq!(denied.status, unknown.status);
    assert_eq!(
        normalized(&denied.json(), "up__secret"),
        normalized(&unknown.json(), "up__nowhere")
    );
}

// ---------------------------------------------------------------------------------
// What each tenant lists, and the protocol tools.
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn each_tenant_lists_and_finds_only_its_own_tools() {
    let app = app(&config_yaml()).await;
    let everything = [
        "down__echo",
        "slow__wait",
        "up__echo",
        "up__fail",
        "up__limited",
        "up__secret",
        "up__tool_error",
    ];
    let b_tools = ["up__echo", "up__fail", "up__limited", "up__tool_error"];
    let a = app.initialize(KEY_A).await;
    let b = app.initialize(KEY_B).await;
    let c = app.initialize(KEY_C).await;
    assert_eq!(
        sorted(app.listed(KEY_A, &a).await),
        with_protocol_tools(&everything)
    );
    assert_eq!(
        sorted(app.listed(KEY_B, &b).await),
        with_protocol_tools(&b_tools)
    );
    // c starts with its `initial` tool only.
    assert_eq!(
        sorted(app.listed(KEY_C, &c).await),
        with_protocol_tools(&["up__echo"])
    );
    // The REST list is the same list.
    let reply = app
        .send(empty(to(Method::GET, "/v1/tools?format=mcp", Some(KEY_B))))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(
        sorted(names(&reply.json()["tools"])),
        with_protocol_tools(&b_tools)
    );

    // tool_search finds within the tenant's set only.
    let found_by_a = search(&app, KEY_A, &a).await;
    assert_eq!(
        found_by_a.first().map(String::as_str),
        Some("up__secret"),
        "{found_by_a:?}"
    );
    let found_by_b = search(&app, KEY_B, &b).await;
    assert!(
        found_by_b.iter().all(|n| b_tools.contains(&n.as_str())),
        "b finds only its own tools: {found_by_b:?}"
    );

    // c may use up__secret but has not selected it: told how to, on both surfaces.
    let reply = app.call_tool(KEY_C, &c, "up__secret", json!({})).await;
    let result = reply.result();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["_meta"]["toolgate/error"], "not_selected",
        "{result}"
    );
    assert!(
        first_text(&result).contains("tool_expand_tools"),
        "{result}"
    );
    let created = app
        .send(empty(to(Method::POST, "/v1/sessions", Some(KEY_C))))
        .await;
    let rest_session = created.json()["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let reply = app
        .rest_call(KEY_C, "up__secret", json!({"session": rest_session}))
        .await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text());
    assert_eq!(reply.json()["error"]["code"], "not_selected");
    assert_eq!(app.calls(), 0);

    // tool_expand_tools adds it (partial success), announces the new list before its
    // result, and the session lists and calls it from then on.
    let reply = app
        .call_tool(
            KEY_C,
            &c,
            "tool_expand_tools",
            json!({"tool_names": ["up__secret", "up__nowhere"]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let messages = reply.messages();
    assert_eq!(
        messages.first().and_then(|m| m["method"].as_str()),
        Some("notifications/tools/list_changed"),
        "{messages:?}"
    );
    let expanded = &reply.result()["structuredContent"];
    assert_eq!(expanded["success"], true, "{expanded}");
    assert_eq!(
        expanded["expanded_tools"],
        json!(["up__secret"]),
        "{expanded}"
    );
    assert_eq!(
        expanded["invalid_tools"],
        json!(["up__nowhere"]),
        "{expanded}"
    );
    assert_eq!(expanded["already_selected_tools"], json!([]), "{expanded}");
    assert_eq!(
        names(&expanded["definitions"]),
        ["up__secret"],
        "{expanded}"
    );
    assert_eq!(
        sorted(app.listed(KEY_C, &c).await),
        with_protocol_tools(&["up__echo", "up__secret"])
    );
    let reply = app.call_tool(KEY_C, &c, "up__secret", json!({})).await;
    assert_eq!(first_text(&reply.result()), "the secret is 42");
    // Expanding it again: already selected, nothing announced.
    let reply = app
        .call_tool(
            KEY_C,
            &c,
            "tool_expand_tools",
            json!({"tool_names": ["up__secret"]}),
        )
        .await;
    assert!(!reply.is_event_stream(), "{}", reply.text());
    let expanded = &reply.result()["structuredContent"];
    assert_eq!(
        expanded["already_selected_tools"],
        json!(["up__secret"]),
        "{expanded}"
    );
    assert_eq!(expanded["expanded_tools"], json!([]), "{expanded}");
    assert_eq!(app.calls(), 1);
}

/// The names `tool_search` finds for words that describe `up__secret` only.
async fn search(app: &TestApp, key: &str, session: &str) -> Vec<String> {
    let reply = app
        .call_tool(
            key,
            session,
            "tool_search",
            json!({"query": "hidden secret value"}),
        )
        .await;
    let result = reply.result();
    assert_ne!(result["isError"], true, "{result}");
    names(&result["structuredContent"]["results"])
}
