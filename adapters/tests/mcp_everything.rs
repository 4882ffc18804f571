//! The MCP upstreams against the real reference server
//! (`@modelcontextprotocol/server-everything`, pinned in the workspace's package.json),
//! over all three transports. A scenario that applies to several transports is written
//! once and run for each (see `per_transport!`). Every test is bounded in time.

mod common;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use toolgate_adapters::mcp::{
    HttpConfig, McpOptions, McpTransport, McpUpstream, StdioConfig, spawn,
};
use toolgate_adapters::{CallContext, Connection, JsonObject, ToolError, Upstream};
use toolgate_test_support::{Everything, NodeDeps};

const LONG_OP: &str = "trigger-long-running-operation";

fn options() -> McpOptions {
    McpOptions {
        request_timeout: Duration::from_secs(10),
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        ..McpOptions::default()
    }
}

fn stdio(deps: &NodeDeps) -> McpTransport {
    McpTransport::Stdio(StdioConfig {
        command: deps.node().display().to_string(),
        args: vec![
            deps.everything_entry().display().to_string(),
            "stdio".into(),
        ],
        env: Default::default(),
        inherit_env: Default::default(),
        cwd: None,
        token_env: None,
        max_line_bytes: toolgate_adapters::mcp::DEFAULT_MAX_LINE_BYTES,
    })
}

fn http(url: String) -> HttpConfig {
    HttpConfig {
        url,
        headers: [("X-Test-Secret".to_owned(), "not-logged".into())].into(),
        timeout: Duration::from_secs(10),
    }
}

/// The ways to reach server-everything.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Transport {
    Stdio,
    StreamableHttp,
    Sse,
}

impl Transport {
    /// server-everything's command-line mode.
    fn server_mode(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::StreamableHttp => "streamableHttp",
            Transport::Sse => "sse",
        }
    }
}

/// An upstream on server-everything over `transport`, and the HTTP server it talks to
/// (on a free port; `None` over stdio, where the server is the upstream's own child).
async fn mount(
    deps: &NodeDeps,
    transport: Transport,
    options: McpOptions,
) -> (Arc<McpUpstream>, Option<Everything>) {
    let (config, server) = match transport {
        Transport::Stdio => (stdio(deps), None),
        Transport::StreamableHttp | Transport::Sse => {
            let server = Everything::start(deps, transport.server_mode()).await;
            let config = http(server.url.clone());
            let config = if transport == Transport::Sse {
                McpTransport::Sse(config)
            } else {
                McpTransport::StreamableHttp(config)
            };
            (config, Some(server))
        }
    };
    (spawn("everything".into(), config, options), server)
}

/// One `#[tokio::test]` per listed name, each running a scenario over one transport.
macro_rules! per_transport {
    ($($name:ident => $scenario:ident($transport:ident);)*) => {$(
        #[tokio::test]
        async fn $name() {
            common::init_tracing();
            $scenario(Transport::$transport).await;
        }
    )*};
}

per_transport! {
    stdio_lists_calls_reports_progress_and_cancels =>
        lists_calls_reports_progress_and_cancels(Stdio);
    streamable_http_lists_calls_reports_progress_and_cancels =>
        lists_calls_reports_progress_and_cancels(StreamableHttp);
    legacy_sse_lists_calls_reports_progress_and_cancels =>
        lists_calls_reports_progress_and_cancels(Sse);
    streamable_http_reconnects_after_a_server_restart =>
        reconnects_after_a_server_restart(StreamableHttp);
    legacy_sse_reconnects_after_a_server_restart =>
        reconnects_after_a_server_restart(Sse);
    stdio_sampling_reaches_the_callers_client =>
        sampling_reaches_the_callers_client(Stdio);
    streamable_http_sampling_reaches_the_callers_client =>
        sampling_reaches_the_callers_client(StreamableHttp);
}

fn args(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => panic!("arguments must be an object"),
    }
}

fn ctx(timeout: Duration) -> CallContext {
    CallContext::new(timeout, "test")
}

/// Waits (bounded) until the upstream is connected.
async fn connected(up: &McpUpstream) {
    let mut rx = up.connection_changes();
    let r = tokio::time::timeout(
        Duration::from_secs(20),
        rx.wait_for(|c| *c == Connection::Connected),
    )
    .await;
    assert!(
        matches!(r, Ok(Ok(_))),
        "not connected within 20 s: {:?}, last error: {:?}",
        up.connection(),
        up.last_error()
    );
}

fn text_of(out: &toolgate_adapters::CallOutput) -> String {
    out.object()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Runs the long operation with a progress sink; checks that every update was
/// delivered, strictly increasing, before the call returned.
async fn long_op_with_progress(up: &McpUpstream, duration: f64, steps: u32) {
    let (tx, mut rx) = toolgate_adapters::progress_channel();
    let mut c = ctx(Duration::from_secs(20));
    c.progress = Some(tx);
    let out = up
        .call(
            LONG_OP,
            args(json!({"duration": duration, "steps": steps})),
            c,
        )
        .await
        .expect("long operation");
    assert!(!out.is_error(), "{:?}", out.object());
    // try_recv, not recv: the updates must already be there when the result is.
    let mut got = Vec::new();
    while let Ok(p) = rx.try_recv() {
        got.push(p);
    }
    assert_eq!(
        got.len(),
        steps as usize,
        "progress updates lost or late: {got:?}"
    );
    for (i, p) in got.iter().enumerate() {
        assert_eq!(p.progress, (i + 1) as f64, "{got:?}");
        assert_eq!(p.total, Some(steps as f64));
    }
}

/// Cancels a running call; expects `Cancelled` quickly and a working connection after.
async fn cancel_mid_call(up: &McpUpstream) {
    let c = ctx(Duration::from_secs(30));
    let token = c.cancel.clone();
    let started = tokio::time::Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel();
    });
    let r = up
        .call(LONG_OP, args(json!({"duration": 10, "steps": 5})), c)
        .await;
    assert!(matches!(r, Err(ToolError::Cancelled(_))), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "cancel took {:?}",
        started.elapsed()
    );
    let out = up
        .call(
            "echo",
            args(json!({"message": "after"})),
            ctx(Duration::from_secs(10)),
        )
        .await
        .expect("echo after cancel");
    assert_eq!(text_of(&out), "Echo: after");
}

/// Connect, list, call echo and get-sum, progress, cancellation.
async fn exercise(up: Arc<McpUpstream>) {
    connected(&up).await;
    let names: Vec<String> = up.tools().iter().map(|t| t.name.clone()).collect();
    for want in ["echo", "get-sum", LONG_OP, "get-structured-content"] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    assert!(
        toolgate_adapters::mcp::SUPPORTED_PROTOCOL_VERSIONS
            .contains(&up.protocol_version().unwrap_or_default().as_str())
    );

    let out = up
        .call(
            "echo",
            args(json!({"message": "hello"})),
            ctx(Duration::from_secs(10)),
        )
        .await
        .expect("echo");
    assert_eq!(text_of(&out), "Echo: hello");
    assert!(!out.is_error());

    let out = up
        .call(
            "get-sum",
            args(json!({"a": 2, "b": 40})),
            ctx(Duration::from_secs(10)),
        )
        .await
        .expect("get-sum");
    assert_eq!(text_of(&out), "The sum of 2 and 40 is 42.");

    long_op_with_progress(&up, 0.2, 5).await;
    cancel_mid_call(&up).await;
    up.check(Duration::from_secs(5)).await.expect("check");

    up.shutdown().await;
    assert_eq!(up.connection(), Connection::Closed);
    let r = up
        .call(
            "echo",
            args(json!({"message": "x"})),
            ctx(Duration::from_secs(1)),
        )
        .await;
    assert!(matches!(r, Err(ToolError::Unavailable(_))), "{r:?}");
}

async fn bounded<F: std::future::Future<Output = ()>>(secs: u64, f: F) {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {secs} s"));
}

async fn lists_calls_reports_progress_and_cancels(transport: Transport) {
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    bounded(60, async {
        let (up, _server) = mount(&deps, transport, options()).await;
        exercise(up).await;
    })
    .await;
}

#[tokio::test]
async fn progress_is_never_lost_over_200_stdio_calls() {
    common::init_tracing();
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    bounded(60, async {
        let up = spawn("everything".into(), stdio(&deps), options());
        connected(&up).await;
        // Some calls run concurrently: progress must still reach the right sink.
        futures::stream::iter(0..200)
            .map(|_| long_op_with_progress(&up, 0.005, 5))
            .buffer_unordered(4)
            .collect::<Vec<()>>()
            .await;
        up.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn killed_stdio_child_fails_pending_calls_and_restarts() {
    common::init_tracing();
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    bounded(60, async {
        let up = spawn("everything".into(), stdio(&deps), options());
        connected(&up).await;
        let pid = up.child_pid().expect("child pid");

        // A call that is certainly running upstream (its first progress arrived).
        let (tx, mut rx) = toolgate_adapters::progress_channel();
        let mut c = ctx(Duration::from_secs(30));
        c.progress = Some(tx);
        let call_up = up.clone();
        let call = tokio::spawn(async move {
            call_up
                .call(LONG_OP, args(json!({"duration": 20, "steps": 100})), c)
                .await
        });
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("first progress")
            .expect("progress");

        let mut conn = up.connection_changes();
        let killed_at = tokio::time::Instant::now();
        // Our own child.
        toolgate_test_support::sys::signal(pid, libc::SIGKILL).expect("kill the server");

        let r = tokio::time::timeout(Duration::from_secs(3), call)
            .await
            .expect("pending call failed within 3 s")
            .expect("join");
        match &r {
            Err(ToolError::Unavailable(m)) => assert!(m.contains("everything"), "{m}"),
            other => panic!("expected Unavailable, got {other:?}"),
        }
        assert!(killed_at.elapsed() < Duration::from_secs(3));

        tokio::time::timeout(
            Duration::from_secs(10),
            conn.wait_for(|c| *c == Connection::Reconnecting),
        )
        .await
        .expect("Reconnecting within 10 s")
        .expect("watch");
        tokio::time::timeout(
            Duration::from_secs(20),
            conn.wait_for(|c| *c == Connection::Connected),
        )
        .await
        .expect("Connected again within 20 s")
        .expect("watch");
        assert_ne!(up.child_pid(), Some(pid), "a new child was started");
        assert!(up.last_error().is_some());

        let out = up
            .call(
                "echo",
                args(json!({"message": "back"})),
                ctx(Duration::from_secs(10)),
            )
            .await
            .expect("echo after restart");
        assert_eq!(text_of(&out), "Echo: back");
        up.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn tool_definitions_keep_every_field_the_server_sent() {
    common::init_tracing();
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    bounded(30, async {
        let up = spawn("everything".into(), stdio(&deps), options());
        connected(&up).await;
        // The task-based tool is registered after initialization (then list_changed).
        let mut changed = up.tools_changed();
        tokio::time::timeout(
            Duration::from_secs(10),
            changed.wait_for(|_| {
                up.tools()
                    .iter()
                    .any(|t| t.name == "simulate-research-query")
            }),
        )
        .await
        .expect("simulate-research-query listed within 10 s")
        .expect("watch");

        let raw = up
            .raw_request("tools/list", json!({}), Duration::from_secs(10))
            .await
            .expect("raw tools/list");
        let raw_tools = raw["tools"].as_array().expect("tools array");
        let ours = up.tools();
        assert_eq!(raw_tools.len(), ours.len());
        for (theirs, mine) in raw_tools.iter().zip(ours.iter()) {
            assert_eq!(theirs, &Value::Object((*mine.raw).clone()), "{}", mine.name);
        }

        let research = ours
            .iter()
            .find(|t| t.name == "simulate-research-query")
            .expect("research tool");
        assert_eq!(
            research.raw["execution"]["taskSupport"], "required",
            "execution must survive: {:?}",
            research.raw
        );
        let sum = ours.iter().find(|t| t.name == "get-sum").expect("get-sum");
        assert_eq!(sum.raw["annotations"]["readOnlyHint"], true);
        assert_eq!(sum.raw["title"], "Get Sum Tool");
        let structured = ours
            .iter()
            .find(|t| t.name == "get-structured-content")
            .expect("get-structured-content");
        assert!(structured.raw.contains_key("outputSchema"));
        up.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn list_changed_from_the_server_bumps_tools_changed() {
    common::init_tracing();
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    bounded(30, async {
        let up = spawn("everything".into(), stdio(&deps), options());
        connected(&up).await;
        let pid = up.child_pid();
        // The first listing (after connecting) bumps to 1; server-everything then sends
        // tools/list_changed after registering its post-initialization tools, and the
        // listing that follows bumps again.
        let mut changed = up.tools_changed();
        tokio::time::timeout(Duration::from_secs(10), changed.wait_for(|v| *v >= 2))
            .await
            .expect("tools_changed bumped by list_changed within 10 s")
            .expect("watch");
        assert_eq!(up.child_pid(), pid, "no reconnect in between");
        assert_eq!(up.connection(), Connection::Connected);
        assert!(
            up.tools()
                .iter()
                .any(|t| t.name == "simulate-research-query")
        );
        up.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn upstream_errors_map_to_the_taxonomy() {
    common::init_tracing();
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    bounded(30, async {
        let up = spawn("everything".into(), stdio(&deps), options());
        connected(&up).await;
        // Invalid arguments: the SDK answers either with a JSON-RPC -32602 or with a
        // tool-level error result; both are legitimate, neither may be a panic or a
        // transport error.
        let r = up
            .call(
                "get-sum",
                args(json!({"a": "x"})),
                ctx(Duration::from_secs(10)),
            )
            .await;
        match &r {
            Err(ToolError::InvalidArgs(m)) => assert!(m.contains("get-sum"), "{m}"),
            Ok(out) => assert!(out.is_error(), "{:?}", out.object()),
            other => panic!("unexpected {other:?}"),
        }
        // A deadline shorter than the work: Timeout, and the connection survives.
        let r = up
            .call(
                LONG_OP,
                args(json!({"duration": 5, "steps": 5})),
                ctx(Duration::from_millis(200)),
            )
            .await;
        assert!(matches!(r, Err(ToolError::Timeout(_))), "{r:?}");
        up.check(Duration::from_secs(5)).await.expect("check");
        up.shutdown().await;
    })
    .await;
}

/// Restarts the HTTP server under a connected upstream: the upstream notices, goes
/// Reconnecting, initializes a new session on the new server and works again.
async fn reconnects_after_a_server_restart(transport: Transport) {
    bounded(60, survives_server_restart(transport)).await;
}

async fn survives_server_restart(transport: Transport) {
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    let (up, server) = mount(&deps, transport, options()).await;
    let server = server.expect("a transport over HTTP");
    let port = server.port;
    connected(&up).await;
    let mut conn = up.connection_changes();

    server.stop();
    tokio::time::timeout(
        Duration::from_secs(10),
        conn.wait_for(|c| *c == Connection::Reconnecting),
    )
    .await
    .expect("Reconnecting within 10 s of the server's death")
    .expect("watch");
    let r = up
        .call(
            "echo",
            args(json!({"message": "x"})),
            ctx(Duration::from_secs(5)),
        )
        .await;
    assert!(matches!(r, Err(ToolError::Unavailable(_))), "{r:?}");

    let _server = Everything::start_on(&deps, transport.server_mode(), port).await;
    connected(&up).await;
    let out = up
        .call(
            "echo",
            args(json!({"message": "again"})),
            ctx(Duration::from_secs(10)),
        )
        .await
        .expect("echo after the restart");
    assert_eq!(text_of(&out), "Echo: again");
    up.shutdown().await;
}

/// A server->client request made during a call reaches that call's downstream client,
/// and its answer reaches the server; without a client the request is refused and the
/// call still ends.
async fn sampling_through_the_callers_client(up: Arc<McpUpstream>) {
    connected(&up).await;
    assert!(
        up.tools()
            .iter()
            .any(|t| t.name == "trigger-sampling-request"),
        "the server registers the sampling tool when we declare sampling"
    );
    let client = Arc::new(common::RecordingClient::default());
    let mut c = ctx(Duration::from_secs(20));
    c.client = Some(client.clone());
    let out = up
        .call(
            "trigger-sampling-request",
            args(json!({"prompt": "ping?"})),
            c,
        )
        .await
        .expect("sampling call");
    assert!(
        text_of(&out).contains("hi from the client"),
        "{:?}",
        out.object()
    );
    let seen = client.seen.lock().unwrap().clone();
    let sampling: Vec<_> = seen
        .iter()
        .filter(|(m, _)| m == "sampling/createMessage")
        .collect();
    assert_eq!(sampling.len(), 1, "{seen:?}");
    assert!(
        sampling[0].1["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("ping?")
    );

    let r = tokio::time::timeout(
        Duration::from_secs(10),
        up.call(
            "trigger-sampling-request",
            args(json!({"prompt": "nobody there"})),
            ctx(Duration::from_secs(10)),
        ),
    )
    .await
    .expect("a refused sampling request ends the call promptly");
    match r {
        Ok(out) => assert!(out.is_error(), "{:?}", out.object()),
        Err(ToolError::Failed(_)) => {}
        other => panic!("unexpected {other:?}"),
    }
    up.shutdown().await;
}

fn with_sampling() -> McpOptions {
    McpOptions {
        client_capabilities: json!({"sampling": {}}),
        ..options()
    }
}

async fn sampling_reaches_the_callers_client(transport: Transport) {
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    bounded(30, async {
        let (up, _server) = mount(&deps, transport, with_sampling()).await;
        if transport == Transport::Stdio {
            // Over stdio the request names no call: it may go to the one call in flight
            // only because every caller is one tenant (the gateway says so from its
            // policy).
            up.set_one_tenant(true);
        }
        sampling_through_the_callers_client(up).await;
    })
    .await;
}

#[tokio::test]
async fn forwards_other_requests_and_broadcasts_notifications_outside_calls() {
    common::init_tracing();
    let Some(deps) = NodeDeps::everything() else {
        return;
    };
    bounded(30, async {
        let up = spawn("everything".into(), stdio(&deps), options());
        connected(&up).await;
        let info = up.server_info().expect("initialize result");
        assert_eq!(info["serverInfo"]["name"], "mcp-servers/everything");
        assert!(info["capabilities"]["prompts"].is_object());

        let prompts = up
            .forward("prompts/list", None, ctx(Duration::from_secs(10)))
            .await
            .expect("forwarded")
            .expect("a result");
        assert!(
            prompts["prompts"].as_array().is_some_and(|p| !p.is_empty()),
            "{prompts}"
        );
        let unknown = up
            .forward(
                "no/such-method",
                Some(json!({})),
                ctx(Duration::from_secs(10)),
            )
            .await
            .expect("forwarded");
        assert_eq!(unknown.map_err(|e| e.code), Err(-32601));

        // Simulated logging sends one message at once: no caller has a client, so it
        // goes to the upstream-wide broadcast.
        let mut notes = up.notifications().expect("a notification stream");
        up.call(
            "toggle-simulated-logging",
            JsonObject::new(),
            ctx(Duration::from_secs(10)),
        )
        .await
        .expect("toggle logging");
        let (method, params) = tokio::time::timeout(Duration::from_secs(5), notes.recv())
            .await
            .expect("a notification within 5 s")
            .expect("broadcast");
        assert_eq!(method, "notifications/message");
        assert!(params["level"].is_string(), "{params}");
        up.shutdown().await;
    })
    .await;
}
