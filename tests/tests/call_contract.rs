//! The call contract a caller relies on, against a real MCP server in this process
//! (an rmcp server that records what reached it):
//! - arguments are checked against the advertised `inputSchema` for MCP tools too: an
//!   invalid call is an `invalid_args` result naming each failing field, and the
//!   upstream never sees it;
//! - a REST caller that hangs up cancels the upstream call, and the abandoned call is
//!   counted (audit line, metric).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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
use toolgate_e2e::{Gateway, McpSession, first_text, heavy_lock, python, require, run_python};

/// A real MCP server that validates nothing and counts every call that reaches it.
#[derive(Clone, Default)]
struct Recorder {
    calls: Arc<AtomicUsize>,
    started: Arc<Notify>,
    cancelled: Arc<Notify>,
}

impl ServerHandler for Recorder {
    fn get_info(&self) -> ServerConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "recorder", "version": "1"}
        }))
        .unwrap()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(serde_json::from_value(json!({"tools": [
            {"name": "count", "description": "Counts to `count`",
             "inputSchema": {"type": "object",
                "properties": {"count": {"type": "integer", "minimum": 1},
                               "label": {"type": "string"}},
                "required": ["count"]}},
            {"name": "wait", "description": "Blocks until cancelled (60 s at most)",
             "inputSchema": {"type": "object", "properties": {}}},
            {"name": "fail0", "description": "Fails with JSON-RPC error code 0",
             "inputSchema": {"type": "object", "properties": {}}},
            {"name": "limited", "description": "Answers a JSON-RPC rate-limit error",
             "inputSchema": {"type": "object", "properties": {}}},
            {"name": "rows", "description": "3000 rows, structured",
             "inputSchema": {"type": "object", "properties": {}},
             "outputSchema": rows_schema(0)},
            {"name": "unfit", "description": "3000 rows that must all be there",
             "inputSchema": {"type": "object", "properties": {}},
             "outputSchema": rows_schema(3000)}
        ]}))
        .unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let text = match request.name.as_ref() {
            "wait" => {
                self.started.notify_one();
                tokio::select! {
                    _ = cx.ct.cancelled() => {
                        self.cancelled.notify_one();
                        "cancelled".to_owned()
                    }
                    _ = tokio::time::sleep(Duration::from_secs(60)) => "ran to completion".to_owned(),
                }
            }
            "fail0" => {
                return Err(McpError::new(
                    rmcp::model::ErrorCode(0),
                    "the widget broke",
                    None,
                ));
            }
            "limited" => {
                return Err(McpError::new(
                    rmcp::model::ErrorCode(-32029),
                    "rate limit exceeded",
                    Some(json!({"retryAfter": 3})),
                ));
            }
            "rows" | "unfit" => {
                let rows: Vec<Value> = (0..3000)
                    .map(|i| json!({"id": i, "name": format!("row number {i}")}))
                    .collect();
                let r: CallToolResult = serde_json::from_value(json!({
                    "content": [{"type": "text", "text": "3000 rows"}],
                    "structuredContent": {"rows": rows, "total": 3000},
                }))
                .unwrap();
                return Ok(r.into());
            }
            _ => format!("counted {}", json!(request.arguments)),
        };
        let r: CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": text}]})).unwrap();
        Ok(r.into())
    }
}

/// The output schema of `rows` (and, with `min_items` 3000, of `unfit`).
fn rows_schema(min_items: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "rows": {"type": "array", "minItems": min_items, "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                "required": ["id", "name"],
                "additionalProperties": false
            }},
            "total": {"type": "integer"}
        },
        "required": ["rows", "total"]
    })
}

async fn start_recorder(recorder: Recorder) -> String {
    let service: StreamableHttpService<Recorder, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(recorder.clone()),
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

async fn recorder_gateway() -> (Recorder, Gateway) {
    recorder_gateway_with(json!({})).await
}

/// A gateway in front of a fresh recorder, `settings` merged into its upstream config.
async fn recorder_gateway_with(settings: Value) -> (Recorder, Gateway) {
    let recorder = Recorder::default();
    let url = start_recorder(recorder.clone()).await;
    let mut upstream = json!({"streamable_http": {"url": url, "headers": {}}});
    if let (Some(upstream), Some(settings)) = (upstream.as_object_mut(), settings.as_object()) {
        upstream.extend(settings.clone());
    }
    let gateway = Gateway::start(json!({"upstreams": {"rec": upstream}})).await;
    (recorder, gateway)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_arguments_to_an_mcp_tool_never_reach_the_upstream() {
    let _serial = heavy_lock().await;
    let (recorder, mut gateway) = recorder_gateway().await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");

    let ex = session
        .call_tool("rec__count", json!({"count": 3}))
        .await
        .expect("valid call");
    assert_eq!(first_text(ex.result()), r#"counted {"count":3}"#);
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 1);

    for (arguments, pointers) in [
        (json!({"count": "three"}), vec!["/count"]),
        (json!({"count": 0, "label": 7}), vec!["/count", "/label"]),
        (json!({}), vec!["/:"]),
    ] {
        let ex = session
            .call_tool("rec__count", arguments.clone())
            .await
            .expect("invalid call");
        let result = ex.result();
        assert_eq!(result["isError"], true, "{arguments}: {result:#}");
        assert_eq!(
            result["_meta"]["toolgate/error"], "invalid_args",
            "{result:#}"
        );
        let text = first_text(result);
        assert!(
            text.contains("'rec__count'"),
            "names the tool called: {text}"
        );
        for pointer in pointers {
            assert!(
                text.contains(pointer),
                "{arguments}: names {pointer}: {text}"
            );
        }
    }
    // The same over REST: 400 invalid_args.
    let (status, body) = toolgate_e2e::rest_post(
        &gateway,
        "/v1/tools/rec__count/call",
        None,
        json!({"arguments": {"count": "three"}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_args", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/count")),
        "{body}"
    );
    assert_eq!(
        recorder.calls.load(Ordering::SeqCst),
        1,
        "no invalid call reached the upstream"
    );
    gateway.assert_alive();
}

/// The count of `rec__wait` calls with outcome `cancelled` in `/metrics`.
async fn cancelled_calls(gateway: &Gateway) -> u64 {
    let prefix =
        r#"toolgate_tool_calls_total{tool="rec__wait",upstream="rec",outcome="cancelled"} "#;
    metric(gateway, prefix).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_caller_that_hangs_up_cancels_the_upstream_call() {
    let _serial = heavy_lock().await;
    let (recorder, mut gateway) = recorder_gateway().await;
    let cases: [(&str, &str, Option<&str>, serde_json::Value); 4] = [
        (
            "plain",
            "/v1/tools/rec__wait/call",
            None,
            json!({"arguments": {}}),
        ),
        (
            "SSE",
            "/v1/tools/rec__wait/call",
            Some("text/event-stream"),
            json!({"arguments": {}}),
        ),
        (
            "NDJSON",
            "/v1/tools/rec__wait/call",
            Some("application/x-ndjson"),
            json!({"arguments": {}}),
        ),
        (
            "tool_calls batch",
            "/v1/tool_calls",
            None,
            json!({"tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "rec__wait", "arguments": "{}"}}]}),
        ),
    ];
    for (round, (what, path, accept, body)) in cases.into_iter().enumerate() {
        let mut request = toolgate_e2e::http().post(gateway.url(path)).json(&body);
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        let call = tokio::spawn(async move {
            // Streams answer their headers at once: read the body until hung up.
            if let Ok(response) = request.send().await {
                let _ = response.bytes().await;
            }
        });
        tokio::time::timeout(Duration::from_secs(30), recorder.started.notified())
            .await
            .unwrap_or_else(|_| panic!("{what}: the upstream never received the call"));
        // Hang up: the request (and its connection) is dropped mid-call.
        call.abort();
        let _ = call.await;
        tokio::time::timeout(Duration::from_secs(15), recorder.cancelled.notified())
            .await
            .unwrap_or_else(|_| panic!("{what}: hanging up did not cancel the upstream call"));
        let counted = round as u64 + 1;
        toolgate_e2e::wait_for(
            &format!("{what}: the abandoned call counted as cancelled"),
            Duration::from_secs(15),
            || async { (cancelled_calls(&gateway).await >= counted).then_some(()) },
        )
        .await;
    }
    let logs = gateway.proc.logs();
    assert!(
        logs.lines()
            .filter(|l| l.contains("tool call")
                && l.contains("rec__wait")
                && l.contains("cancelled"))
            .count()
            >= 4,
        "an audit line per abandoned call: {logs}"
    );
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_called_tool_and_configured_durations() {
    let _serial = heavy_lock().await;
    let (_recorder, mut gateway) = recorder_gateway_with(json!({"call_timeout": "2s"})).await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");

    let result = session
        .call_tool("rec__wait", json!({}))
        .await
        .expect("call that times out");
    let result = result.result();
    assert_eq!(result["_meta"]["toolgate/error"], "timeout", "{result:#}");
    let text = first_text(result);
    assert!(
        text.contains("'rec__wait'"),
        "names what was called: {text}"
    );
    assert!(
        !text.contains("'wait'"),
        "not the upstream's own name: {text}"
    );
    assert!(
        text.contains("within 2s"),
        "the duration as configured: {text}"
    );

    let ex = session
        .call_tool("rec__fail0", json!({}))
        .await
        .expect("fail0");
    let text = first_text(ex.result());
    assert!(text.contains("the widget broke"), "{text}");
    assert!(text.contains("'rec__fail0'"), "{text}");
    assert!(!text.contains("code 0"), "no meaningless code: {text}");

    // A JSON-RPC rate-limit error is `rate_limited`, with the upstream's hint.
    let ex = session
        .call_tool("rec__limited", json!({}))
        .await
        .expect("limited");
    let result = ex.result();
    assert_eq!(
        result["_meta"]["toolgate/error"], "rate_limited",
        "{result:#}"
    );
    assert_eq!(result["_meta"]["toolgate/retryAfterMs"], 3000, "{result:#}");
    let response = toolgate_e2e::http()
        .post(gateway.url("/v1/tools/rec__limited/call"))
        .json(&json!({"arguments": {}}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("REST call");
    assert_eq!(response.status(), 429);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("3")
    );
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_mcp_request_gets_no_response() {
    let _serial = heavy_lock().await;
    let (recorder, mut gateway) = recorder_gateway().await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let call = tokio::spawn({
        let session = session.clone();
        async move {
            session
                .request_with_id(
                    json!(31),
                    "tools/call",
                    json!({"name": "rec__wait", "arguments": {}}),
                    None,
                    Duration::from_secs(60),
                )
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(30), recorder.started.notified())
        .await
        .expect("the upstream never received the call");
    session
        .notify(
            "notifications/cancelled",
            Some(json!({"requestId": 31, "reason": "the user changed their mind"})),
        )
        .await
        .expect("send notifications/cancelled");
    tokio::time::timeout(Duration::from_secs(15), recorder.cancelled.notified())
        .await
        .expect("the upstream call was not cancelled");
    let ex = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the call's stream did not end")
        .expect("join")
        .expect("the POST itself succeeds");
    assert!(
        ex.response.is_none(),
        "a cancelled request is not answered: {:?}",
        ex.response
    );
    gateway.assert_alive();
}

/// An API whose one operation always answers 429 with `Retry-After: 7`.
async fn start_limited_api() -> String {
    let router = axum::Router::new().route(
        "/things",
        axum::routing::get(|| async {
            (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "7")],
                "slow down",
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apis_429_is_rate_limited_with_its_retry_hint() {
    let _serial = heavy_lock().await;
    let base_url = start_limited_api().await;
    let dir = toolgate_e2e::TempDir::new("limited-spec");
    let spec = dir.path().join("limited.json");
    std::fs::write(
        &spec,
        json!({
            "openapi": "3.0.3",
            "info": {"title": "limited", "version": "1"},
            "paths": {"/things": {"get": {
                "operationId": "listThings",
                "responses": {"200": {"description": "ok"}}
            }}}
        })
        .to_string(),
    )
    .unwrap();
    let mut gateway = Gateway::start(json!({"upstreams": {"lim": {"openapi": {
        "spec_path": spec,
        "base_url": base_url,
        "allow_private_networks": true
    }}}}))
    .await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let ex = session
        .call_tool("lim__listThings", json!({}))
        .await
        .expect("call");
    let result = ex.result();
    assert_eq!(
        result["_meta"]["toolgate/error"], "rate_limited",
        "{result:#}"
    );
    assert_eq!(result["_meta"]["toolgate/retryAfterMs"], 7000, "{result:#}");
    let text = first_text(result);
    assert!(
        text.contains("'lim__listThings'") && text.contains("7s"),
        "{text}"
    );
    let response = toolgate_e2e::http()
        .post(gateway.url("/v1/tools/lim__listThings/call"))
        .json(&json!({"arguments": {}}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("REST call");
    assert_eq!(response.status(), 429);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("7")
    );
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shortened_structured_result_still_satisfies_the_python_sdk() {
    let python = require!(python());
    let _serial = heavy_lock().await;
    let (_recorder, mut gateway) = recorder_gateway().await;
    // Both of the client's modes: a session (legacy) and 2026-07-28 (auto).
    for mode in ["legacy", "auto"] {
        let (python, url) = (python.clone(), gateway.mcp_url());
        let out = tokio::task::spawn_blocking(move || {
            run_python(
                &python,
                "structured_truncation.py",
                &[&url, "rec__rows,rec__unfit", mode],
                Duration::from_secs(120),
            )
        })
        .await
        .expect("python run");
        check_structured_truncation(mode, &out);
    }
    gateway.assert_alive();
}

/// What the Python client got in `mode` for a shortened and an unfit structured result.
fn check_structured_truncation(mode: &str, out: &serde_json::Value) {
    // Over the budget (3000 rows ≈ 40k tokens): shorter, still valid, cuts in _meta.
    let rows = &out["rec__rows"];
    assert_eq!(rows["raised"], false, "{mode}: {out:#}");
    assert_eq!(rows["is_error"], false, "{mode}: {out:#}");
    assert_eq!(rows["valid"], true, "{mode}: {out:#}");
    let kept = rows["rows"].as_u64().unwrap_or(0);
    assert!(kept > 0 && kept < 3000, "{mode}: {out:#}");
    let meta = &rows["meta"];
    assert_eq!(meta["toolgate/truncated"], true, "{mode}: {meta:#}");
    let result_tokens = meta["toolgate/resultTokens"].as_u64().unwrap_or(u64::MAX);
    assert!(
        result_tokens <= 12_000,
        "{mode}: the budget bounds structuredContent too: {meta:#}"
    );
    assert!(
        meta["toolgate/structuredCuts"]
            .as_array()
            .is_some_and(|cuts| cuts
                .iter()
                .any(|c| c["path"] == "/rows" && c["kept"] == kept && c["of"] == 3000)),
        "{mode}: {meta:#}"
    );

    // No valid shortening (every row required): an error result, never an exception.
    let unfit = &out["rec__unfit"];
    assert_eq!(unfit["raised"], false, "{mode}: {out:#}");
    assert_eq!(unfit["is_error"], true, "{mode}: {out:#}");
    let text = unfit["text"][0].as_str().unwrap_or_default();
    assert!(
        text.contains("'rec__unfit'") && text.contains("asking for less"),
        "{mode}: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_token_naming_an_unknown_tenant_is_told_so() {
    const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";
    let _serial = heavy_lock().await;
    let mut gateway = Gateway::start(json!({
        "jwt": {"hs256_secret": SECRET},
        "tenants": {"acme": {"allow": ["*"]}}
    }))
    .await;
    let token = |tenant: &str| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &json!({"tenant": tenant, "iat": now, "exp": now + 300}),
            &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap()
    };
    let (status, body) = toolgate_e2e::rest_get(&gateway, "/v1/tools", Some(&token("acme"))).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = toolgate_e2e::rest_get(&gateway, "/v1/tools", Some(&token("ghost"))).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unknown_tenant", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("unknown tenant"), "{message}");
    assert!(
        !message.contains("acme") && !message.contains("ghost"),
        "names no tenant: {message}"
    );
    gateway.assert_alive();
}

/// The metrics token of the tests that scrape a gateway with tenants.
const METRICS_TOKEN: &str = "call-contract-metrics-token-0123456789";

/// The value of the `/metrics` sample starting with `prefix` (0 when absent), and the
/// whole text.
async fn metric(gateway: &Gateway, prefix: &str) -> (u64, String) {
    let text = toolgate_e2e::scrape_metrics(gateway, Some(METRICS_TOKEN)).await;
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (value, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_calls_are_audited_and_counted_without_leaking_names() {
    const KEY: &str = "call-contract-tenant-key-0123456789";
    let _serial = heavy_lock().await;
    let recorder = Recorder::default();
    let url = start_recorder(recorder.clone()).await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"rec": {"streamable_http": {"url": url, "headers": {}}}},
        "tenants": {"t": {"api_keys": [toolgate_e2e::hash_key(KEY)], "allow": ["rec__count"]}},
        "metrics": {"token": METRICS_TOKEN}
    }))
    .await;
    // Unknown, and hidden from this tenant: both refused as not found.
    for name in ["rec__made_up_name", "rec__wait"] {
        let (status, body) = toolgate_e2e::rest_post(
            &gateway,
            &format!("/v1/tools/{name}/call"),
            Some(KEY),
            json!({"arguments": {}}),
        )
        .await;
        assert_eq!(status, 404, "{body}");
    }
    // A wrong key: refused at the door.
    let (status, _) = toolgate_e2e::rest_post(
        &gateway,
        "/v1/tools/rec__count/call",
        Some("not-the-key-at-all-0123456789"),
        json!({"arguments": {"count": 1}}),
    )
    .await;
    assert_eq!(status, 401);

    let (refused, text) = metric(
        &gateway,
        r#"toolgate_tool_calls_total{tool="<unknown>",upstream="<unknown>",outcome="not_found"} "#,
    )
    .await;
    assert_eq!(refused, 2, "{text}");
    assert!(
        !text.contains("rec__made_up_name") && !text.contains("rec__wait"),
        "no label carries a name the tenant may not see: {text}"
    );
    let (unauthorized, text) = metric(
        &gateway,
        r#"toolgate_refusals_total{outcome="invalid_credentials"} "#,
    )
    .await;
    assert_eq!(unauthorized, 1, "{text}");
    let logs = gateway.proc.logs();
    for name in ["rec__made_up_name", "rec__wait"] {
        assert!(
            logs.lines()
                .any(|l| l.contains("tool call refused") && l.contains(name)),
            "an audit line for {name}: {logs}"
        );
    }
    assert!(logs.contains("request refused"), "{logs}");
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 0);
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_a_batch_costs_one_rate_limit_unit() {
    const KEY: &str = "call-contract-batch-key-0123456789";
    let _serial = heavy_lock().await;
    let recorder = Recorder::default();
    let url = start_recorder(recorder.clone()).await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"rec": {"streamable_http": {"url": url, "headers": {}}}},
        "tenants": {"t": {
            "api_keys": [toolgate_e2e::hash_key(KEY)],
            "allow": ["rec__count"],
            "rate_limit": {"per_second": 1, "burst": 3}
        }}
    }))
    .await;
    let calls: Vec<Value> = (0..10)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "function",
                   "function": {"name": "rec__count", "arguments": format!("{{\"count\": {}}}", i + 1)}})
        })
        .collect();
    let (status, body) = toolgate_e2e::rest_post(
        &gateway,
        "/v1/tool_calls",
        Some(KEY),
        json!({"role": "assistant", "tool_calls": calls}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 10, "{body}");
    let limited = messages
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("rate_limited"))
        })
        .count();
    // A burst of 3: the request and two more calls pass, the rest are over the limit
    // (a slow run lets one more through per second it takes).
    assert!(
        (4..=7).contains(&limited),
        "{limited} rate-limited: {body:#}"
    );
    let reached = recorder.calls.load(Ordering::SeqCst);
    assert_eq!(
        reached,
        10 - limited,
        "only admitted calls reach the upstream"
    );
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_calling_callers_are_pointed_to_what_they_can_call() {
    let _serial = heavy_lock().await;
    let (_recorder, mut gateway) = recorder_gateway().await;
    // strict=true is OpenAI's: asked of another format it is refused, not ignored.
    for format in ["anthropic", "gemini", "mcp"] {
        let (status, body) = toolgate_e2e::rest_get(
            &gateway,
            &format!("/v1/tools?format={format}&strict=true"),
            None,
        )
        .await;
        assert_eq!(status, 400, "{format}: {body}");
        assert_eq!(body["error"]["code"], "invalid_strict", "{body}");
    }
    let (status, _) =
        toolgate_e2e::rest_get(&gateway, "/v1/tools?format=openai&strict=true", None).await;
    assert_eq!(status, 200);

    // A query parameter a route does not read is refused, not ignored: a misspelt
    // `format` would list OpenAI schemas, a call's `session` in the query (it goes in
    // the body) would run the call outside the session. Through the router (listing)
    // and the listener's fast path (a call) alike.
    let (status, body) = toolgate_e2e::rest_get(&gateway, "/v1/tools?fromat=gemini", None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "unknown_query_parameter", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"fromat\"") && message.contains("format, strict, session"),
        "{message}"
    );
    let (status, body) = toolgate_e2e::rest_post(
        &gateway,
        "/v1/tools/rec__storeRecord/call?session=s-1",
        None,
        json!({"arguments": {}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "unknown_query_parameter", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"session\"")
            && message.contains("reads none")
            && message.contains("body"),
        "{message}"
    );
    // Names are compared decoded: `%66ormat` is `format`.
    let (status, body) = toolgate_e2e::rest_get(&gateway, "/v1/tools?%66ormat=gemini", None).await;
    assert_eq!((status, &body["format"]), (200, &json!("gemini")), "{body}");

    // An unknown tool points to tool_search (callable on every surface), never to an
    // MCP method a function-calling model cannot send.
    let (status, body) = toolgate_e2e::rest_post(
        &gateway,
        "/v1/tools/rec__nope/call",
        None,
        json!({"arguments": {}}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("tool_search") && !message.contains("tools/list"),
        "{message}"
    );
    let (status, body) = toolgate_e2e::rest_post(
        &gateway,
        "/v1/tool_calls",
        None,
        json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "rec__nope", "arguments": "{}"}}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let content = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(
        content.contains("tool_search") && !content.contains("tools/list"),
        "{content}"
    );
    gateway.assert_alive();
}
