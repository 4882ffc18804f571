//! Progress, the no-progressToken log fallback and cancellation through the gateway.
//!
//! - 200 runs of server-everything's `trigger-long-running-operation` with a
//!   progressToken: every run's progress arrives complete, in order, increasing, with
//!   the client's own token, before the response (bounded time).
//! - Without a progressToken the gateway still tells the client what is happening:
//!   `notifications/message` frames on the call's stream.
//! - `notifications/cancelled` from the client stops the upstream call: a real rmcp
//!   server in this test observes its request's cancellation token fire.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
        PaginatedRequestParams, ServerConfig,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use tokio::sync::Notify;
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, ThreeMounts, everything_stdio_upstream, first_text, heavy_lock,
    require, unique_marker,
};

const RUNS: usize = 200;
const CONCURRENCY: usize = 4;
const STEPS: u64 = 5;

/// Checks one run's frames: STEPS progress notifications with `token`, progress 1..=STEPS
/// strictly increasing, all before the response, and a successful result.
fn check_progress_run(frames: &[Value], token: &str) -> Result<(), String> {
    let response_at = frames
        .iter()
        .position(|f| f.get("result").is_some() || f.get("error").is_some())
        .ok_or("no response")?;
    let response = &frames[response_at];
    if response.get("error").is_some() || response["result"]["isError"] == true {
        return Err(format!("call failed: {response}"));
    }
    // Only frames before the response count: a progress event that lost the race
    // against the response is lost for the client.
    let progress: Vec<&Value> = frames[..response_at]
        .iter()
        .filter(|f| f["method"] == "notifications/progress")
        .collect();
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["params"]["progress"].as_f64().unwrap_or(f64::NAN))
        .collect();
    let expected: Vec<f64> = (1..=STEPS).map(|v| v as f64).collect();
    if values != expected {
        return Err(format!("progress values {values:?}, expected {expected:?}"));
    }
    for p in &progress {
        if p["params"]["progressToken"] != token {
            return Err(format!("foreign progressToken in {p}"));
        }
        if p["params"]["total"].as_f64() != Some(STEPS as f64) {
            return Err(format!("total missing or wrong in {p}"));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_arrives_complete_and_in_order_200_runs() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    // All three mounts (stdio, legacy SSE, streamable HTTP), both protocol eras
    // (2025-11-25 session, 2026-07-28 sessionless), round-robin.
    let mut env = ThreeMounts::start(&deps).await;
    let url = env.gateway.mcp_url();
    let session = McpSession::connect(&url)
        .await
        .expect("initialize through the gateway");
    let modern = McpSession::modern(&url);
    const MOUNTS: [&str; 3] = ["everything", "ev_sse", "ev_http"];

    let started = Instant::now();
    let mut failures = Vec::new();
    let mut run = 0usize;
    let budget = Duration::from_secs(300);
    while run < RUNS {
        let batch: Vec<usize> = (run..(run + CONCURRENCY).min(RUNS)).collect();
        run += batch.len();
        let calls = batch.iter().map(|i| {
            let client = if i % 2 == 0 {
                session.clone()
            } else {
                modern.clone()
            };
            let mount = MOUNTS[i % 3];
            let token = format!("tok-{i}");
            async move {
                let ex = client
                    .request_with_id(
                        json!(10_000 + *i as i64),
                        "tools/call",
                        json!({
                            "name": format!("{mount}__trigger-long-running-operation"),
                            "arguments": {"duration": 0.25, "steps": STEPS},
                            "_meta": {"progressToken": token}
                        }),
                        None,
                        Duration::from_secs(60),
                    )
                    .await;
                let label = format!("run {i} ({mount}, {})", client.protocol);
                match ex {
                    Ok(ex) => check_progress_run(&ex.frames, &token)
                        .map_err(|e| format!("{label}: {e}; frames: {:?}", ex.frames)),
                    Err(e) => Err(format!("{label}: {e}")),
                }
            }
        });
        for r in futures::future::join_all(calls).await {
            if let Err(e) = r {
                failures.push(e);
            }
        }
        assert!(
            started.elapsed() < budget,
            "{run} runs took longer than {budget:?}"
        );
    }
    println!(
        "{RUNS} progress runs in {:?}, {} failed",
        started.elapsed(),
        failures.len()
    );
    env.gateway.assert_alive();
    assert!(
        failures.is_empty(),
        "{} of {RUNS} runs lost or reordered progress; first failures:\n{}",
        failures.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_progress_token_progress_becomes_log_messages() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("fallback"))}
    }))
    .await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    // In a 2025-11-25 session, notifications not tied to a progressToken may travel on
    // the call's stream or on the session's GET stream: a client listens on both.
    let (tap, mut get_frames) = tokio::sync::mpsc::unbounded_channel();
    let (get_status, get_task) = session.open_get_stream(tap).await.expect("GET stream");
    assert_eq!(get_status, 200, "GET /mcp (standalone stream) status");
    // A client that wants log messages says so; the result is not what is tested here.
    let _ = session
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    let ex = session
        .call_tool(
            "everything__trigger-long-running-operation",
            json!({"duration": 1, "steps": 4}),
        )
        .await
        .expect("call");
    let result = ex.result();
    assert_ne!(result["isError"], true, "call failed: {result}");
    assert!(
        first_text(result).contains("Long running operation completed"),
        "unexpected result {result}"
    );
    // Frames sent on the GET stream may trail the result a little: wait for them
    // (up to 3 s, for a loaded machine).
    let mut frames: Vec<Value> = ex.frames.clone();
    let count = |frames: &[Value]| {
        frames
            .iter()
            .filter(|f| f["method"] == "notifications/message")
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    while count(&frames) < 4 && Instant::now() < deadline {
        if let Ok(Some(f)) =
            tokio::time::timeout(Duration::from_millis(100), get_frames.recv()).await
        {
            frames.push(f);
        }
    }
    // Anything else already delivered (e.g. a stray progress frame) is checked too.
    tokio::time::sleep(Duration::from_millis(200)).await;
    get_task.abort();
    while let Ok(f) = get_frames.try_recv() {
        frames.push(f);
    }
    let logs: Vec<&Value> = frames
        .iter()
        .filter(|f| f["method"] == "notifications/message")
        .collect();
    assert!(
        !logs.is_empty(),
        "no notifications/message frames (call stream or GET stream) without a progressToken; frames: {frames:#?}"
    );
    assert!(
        logs.len() >= 4,
        "expected one log frame per progress step (4), got {}: {logs:#?}",
        logs.len()
    );
    for l in &logs {
        assert!(
            l["params"]["level"].is_string(),
            "log frame without level: {l}"
        );
        assert!(
            !l["params"]["data"].is_null(),
            "log frame without data: {l}"
        );
    }
    assert!(
        !frames
            .iter()
            .any(|f| f["method"] == "notifications/progress"),
        "progress sent to a client that gave no progressToken: {frames:#?}"
    );
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_progress_token_a_2026_client_that_opted_in_gets_log_messages() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("fallback26"))}
    }))
    .await;
    // 2026-07-28: no session, no GET stream; a request opts in to log messages with
    // `io.modelcontextprotocol/logLevel` in `_meta`, and they ride the call's stream.
    let modern = McpSession::modern(&gateway.mcp_url());
    let ex = modern
        .request(
            "tools/call",
            json!({
                "name": "everything__trigger-long-running-operation",
                "arguments": {"duration": 1, "steps": 4},
                "_meta": {"io.modelcontextprotocol/logLevel": "debug"}
            }),
        )
        .await
        .expect("call");
    let result = ex.result();
    assert_ne!(result["isError"], true, "call failed: {result}");
    let logs = ex.notifications("notifications/message");
    assert!(
        logs.len() >= 4,
        "expected a log frame per progress step (4) on the call's stream, got {}: {:#?}",
        logs.len(),
        ex.frames
    );
    assert!(
        ex.notifications("notifications/progress").is_empty(),
        "progress sent without a progressToken: {:#?}",
        ex.frames
    );
    gateway.assert_alive();
}

/// A real MCP server whose `wait` tool blocks until its request is cancelled.
#[derive(Clone)]
struct Probe {
    started: Arc<Notify>,
    cancelled: Arc<Notify>,
}

impl ServerHandler for Probe {
    fn get_info(&self) -> ServerConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "cancel-probe", "version": "1"}
        }))
        .unwrap()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(serde_json::from_value(json!({"tools": [
            {"name": "wait", "description": "Blocks until cancelled (60 s at most)",
             "inputSchema": {"type": "object", "properties": {}}},
            {"name": "quick", "description": "Returns at once",
             "inputSchema": {"type": "object", "properties": {}}}
        ]}))
        .unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let text = match request.name.as_ref() {
            "wait" => {
                self.started.notify_one();
                tokio::select! {
                    _ = cx.ct.cancelled() => {
                        self.cancelled.notify_one();
                        "cancelled"
                    }
                    _ = tokio::time::sleep(Duration::from_secs(60)) => "ran to completion",
                }
            }
            "quick" => "quick",
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        };
        let r: CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": text}]})).unwrap();
        Ok(r.into())
    }
}

async fn start_probe(probe: Probe) -> String {
    let service: StreamableHttpService<Probe, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(probe.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

/// A gateway in front of a fresh probe.
async fn probe_gateway() -> (Probe, Gateway) {
    let probe = Probe {
        started: Arc::new(Notify::new()),
        cancelled: Arc::new(Notify::new()),
    };
    let url = start_probe(probe.clone()).await;
    let gateway = Gateway::start(json!({
        "upstreams": {"probe": {"streamable_http": {"url": url, "headers": {}}}}
    }))
    .await;
    (probe, gateway)
}

/// Calls `probe__wait` with request id `id` in the background, once the probe has
/// it running.
async fn start_waiting_call(
    probe: &Probe,
    session: &McpSession,
    id: Value,
) -> tokio::task::JoinHandle<anyhow::Result<toolgate_e2e::mcp_http::RpcExchangeWithHeaders>> {
    let call = tokio::spawn({
        let session = session.clone();
        async move {
            session
                .request_with_id(
                    id,
                    "tools/call",
                    json!({"name": "probe__wait", "arguments": {}}),
                    None,
                    Duration::from_secs(90),
                )
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(30), probe.started.notified())
        .await
        .expect("the upstream never received the call");
    call
}

/// The probe's call was cancelled (within 15 s), and the gateway still serves.
async fn assert_cancelled_and_still_serving(
    probe: &Probe,
    gateway: &mut Gateway,
    session: &McpSession,
    what: &str,
) {
    tokio::time::timeout(Duration::from_secs(15), probe.cancelled.notified())
        .await
        .unwrap_or_else(|_| panic!("{what} did not cancel the upstream call within 15 s"));
    let ex = session
        .call_tool("probe__quick", json!({}))
        .await
        .expect("call after the cancellation");
    assert_eq!(first_text(ex.result()), "quick");
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_cancellation_stops_the_upstream_call() {
    // No npm dependency: the upstream is an rmcp server in this process.
    let _serial = heavy_lock().await;
    let (probe, mut gateway) = probe_gateway().await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let call = start_waiting_call(&probe, &session, json!(4242)).await;

    let status = session
        .notify(
            "notifications/cancelled",
            Some(json!({"requestId": 4242, "reason": "test cancels"})),
        )
        .await
        .expect("send notifications/cancelled");
    assert!(
        (200..300).contains(&status),
        "cancel notification got HTTP {status}"
    );
    assert_cancelled_and_still_serving(&probe, &mut gateway, &session, "notifications/cancelled")
        .await;
    // The cancelled call must not report "ran to completion"; its stream may end
    // without a response (the spec lets a receiver of a cancellation not respond).
    if let Ok(Ok(Ok(ex))) = tokio::time::timeout(Duration::from_secs(20), call).await
        && let Some(r) = &ex.response
    {
        assert_ne!(first_text(&r["result"]), "ran to completion", "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_2026_call_stream_cancels_the_upstream_call() {
    // 2026-07-28 has no notifications/cancelled from clients over HTTP: closing the
    // request's stream is the cancellation.
    let _serial = heavy_lock().await;
    let (probe, mut gateway) = probe_gateway().await;
    let modern = McpSession::modern(&gateway.mcp_url());
    let call = start_waiting_call(&probe, &modern, json!(1)).await;
    // Dropping the in-flight request closes its HTTP stream.
    call.abort();
    let _ = call.await;
    assert_cancelled_and_still_serving(
        &probe,
        &mut gateway,
        &modern,
        "closing the 2026-07-28 call stream",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_up_on_a_session_call_cancels_the_upstream_call() {
    // A session's call is answered on its own POST; once the client has hung up the
    // result has nowhere to go (there is no replay), so the call is cancelled.
    let _serial = heavy_lock().await;
    let (probe, mut gateway) = probe_gateway().await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let call = start_waiting_call(&probe, &session, json!(7)).await;
    call.abort();
    let _ = call.await;
    assert_cancelled_and_still_serving(
        &probe,
        &mut gateway,
        &session,
        "hanging up on a session call",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_log_messages_during_a_call_are_never_lost() {
    // A stdio server's log lines carry no link to a call, but they come on one pipe in
    // order: with one tenant behind the upstream, every line sent before the result
    // reaches that call's own stream, before the result, in order.
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let fixture =
        toolgate_e2e::workspace_root().join("tests/fixtures/background_stream/server.mjs");
    let mut gateway = Gateway::start(json!({
        "upstreams": {"fx": {"stdio": {
            "command": deps.node(),
            "args": [fixture, unique_marker("log-lines")]
        }}}
    }))
    .await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let ex = session
        .request("logging/setLevel", json!({"level": "debug"}))
        .await
        .expect("setLevel");
    assert!(
        ex.error().is_none(),
        "logging/setLevel failed: {:?}",
        ex.response
    );

    const CALLS: usize = 40;
    let mut short = Vec::new();
    for i in 0..CALLS {
        let ex = session
            .call_tool("fx__logs", json!({"count": 3}))
            .await
            .expect("call");
        assert_eq!(first_text(ex.result()), "logged 3", "call {i}");
        let logs: Vec<String> = ex
            .notifications("notifications/message")
            .iter()
            .filter_map(|f| f["params"]["data"].as_str())
            .map(|d| d.split(" of call").next().unwrap_or_default().to_owned())
            .collect();
        if logs != ["log 1", "log 2", "log 3"] {
            short.push(format!("call {i}: {logs:?}"));
        }
    }
    gateway.assert_alive();
    assert!(
        short.is_empty(),
        "log lines lost or out of order in {} of {CALLS} calls: {short:?}",
        short.len()
    );
}
