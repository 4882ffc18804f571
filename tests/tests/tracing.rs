//! Tracing across processes: a caller's W3C trace context goes through the gateway to
//! every kind of upstream with the gateway's own span as the parent, the gateway's
//! spans reach an OTLP collector, and every call's correlation id (the trace id) is
//! returned to the client and written in the audit line.
//!
//! Real parts: the `toolgate` binary; an OTLP/HTTP receiver (axum, decoding the
//! protobuf export requests); an HTTP API behind an OpenAPI upstream; MCP upstreams
//! that echo the `_meta` of each call (streamable HTTP, served here, and stdio, the
//! `meta_echo` binary).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use prost::Message;
use serde_json::{Value, json};
use toolgate_e2e::{Gateway, McpSession, TempDir, http, wait_for};

/// What a caller sends: a trace, and the caller's span in it.
struct Caller {
    trace: &'static str,
    span: &'static str,
}

impl Caller {
    fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace, self.span)
    }
}

const REST_CALLER: Caller = Caller {
    trace: "4bf92f3577b34da6a3ce929d0e0e4736",
    span: "00f067aa0ba902b7",
};
const HEADER_CALLER: Caller = Caller {
    trace: "0af7651916cd43dd8448eb211c80319c",
    span: "b7ad6b7169203331",
};
const META_CALLER: Caller = Caller {
    trace: "5b8efff798038103d269b633813fc60c",
    span: "eee19b7ec3c1b174",
};
/// An argument value that must never appear in a span.
const ARGUMENT_VALUE: &str = "argument-value-never-in-a-span-71";

/// `00-<trace>-<parent>-<flags>` split into (trace, parent).
fn parts(traceparent: &str) -> (String, String) {
    let fields: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(fields.len(), 4, "traceparent {traceparent}");
    assert_eq!(fields[0], "00", "traceparent {traceparent}");
    (fields[1].to_owned(), fields[2].to_owned())
}

// ---------------------------------------------------------------------------------
// The OTLP/HTTP receiver

#[derive(Debug, Clone)]
struct Exported {
    trace: String,
    span: String,
    parent: String,
    name: String,
    attributes: BTreeMap<String, String>,
}

type Spans = Arc<Mutex<Vec<Exported>>>;

async fn receive(State(spans): State<Spans>, body: Bytes) -> Response {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, "not an ExportTraceServiceRequest").into_response();
    };
    let mut seen = spans.lock().unwrap();
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            for span in scope.spans {
                let attributes = span
                    .attributes
                    .iter()
                    .map(|kv| {
                        let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                            Some(any_value::Value::StringValue(s)) => s.clone(),
                            Some(other) => format!("{other:?}"),
                            None => String::new(),
                        };
                        (kv.key.clone(), value)
                    })
                    .collect();
                seen.push(Exported {
                    trace: hex(&span.trace_id),
                    span: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    name: span.name,
                    attributes,
                });
            }
        }
    }
    (
        [("content-type", "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

// ---------------------------------------------------------------------------------
// The upstreams

/// The `traceparent` headers each upstream received.
type Received = Arc<Mutex<Vec<String>>>;

fn traceparent_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn ping(
    State(received): State<Received>,
    headers: HeaderMap,
    Query(_query): Query<BTreeMap<String, String>>,
) -> axum::Json<Value> {
    received
        .lock()
        .unwrap()
        .push(traceparent_of(&headers).unwrap_or_default());
    axum::Json(json!({"ok": true}))
}

const PING_SPEC: &str = r#"{
  "openapi": "3.0.3",
  "info": {"title": "ping", "version": "1"},
  "paths": {"/ping": {"get": {
    "operationId": "ping",
    "parameters": [{"name": "note", "in": "query", "schema": {"type": "string"}}],
    "responses": {"200": {"description": "ok",
      "content": {"application/json": {"schema": {"type": "object"}}}}}
  }}}
}"#;

/// The `_meta` echo server over streamable HTTP (JSON answers, no standalone
/// stream), recording the `traceparent` header of every `tools/call` POST.
async fn mcp_post(State(received): State<Received>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    if message["method"] == "tools/call" {
        received
            .lock()
            .unwrap()
            .push(traceparent_of(&headers).unwrap_or_default());
    }
    match toolgate_e2e::meta_echo::answer(&message) {
        Some(answer) => axum::Json(answer).into_response(),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

struct Upstreams {
    api: Received,
    mcp_http: Received,
    config: Value,
    _dir: TempDir,
}

async fn upstreams() -> Upstreams {
    let api: Received = Arc::default();
    let api_url = serve(
        axum::Router::new()
            .route("/ping", axum::routing::get(ping))
            .with_state(api.clone()),
    )
    .await;
    let mcp_http: Received = Arc::default();
    let mcp_url = serve(
        axum::Router::new()
            .route(
                "/mcp",
                axum::routing::post(mcp_post)
                    .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                    .delete(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .with_state(mcp_http.clone()),
    )
    .await;
    let dir = TempDir::new("tracing-spec");
    let spec = dir.path().join("ping.json");
    std::fs::write(&spec, PING_SPEC).expect("write the spec");
    let config = json!({
        "api": {"openapi": {
            "spec_path": spec, "base_url": api_url, "allow_private_networks": true
        }},
        "web": {"streamable_http": {"url": format!("{mcp_url}/mcp")}},
        "local": {"stdio": {"command": env!("CARGO_BIN_EXE_meta_echo"), "args": []}},
    });
    Upstreams {
        api,
        mcp_http,
        config,
        _dir: dir,
    }
}

// ---------------------------------------------------------------------------------
// Calls

/// `POST /v1/tools/{tool}/call`, with `traceparent` when given: (status, correlation
/// id header, body).
async fn rest_call(
    gateway: &Gateway,
    tool: &str,
    arguments: Value,
    traceparent: Option<String>,
) -> (u16, Option<String>, Value) {
    let mut request = http()
        .post(gateway.url(&format!("/v1/tools/{tool}/call")))
        .timeout(Duration::from_secs(30))
        .json(&json!({"arguments": arguments}));
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let response = request.send().await.expect("REST call");
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get("toolgate-correlation-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, id, response.json().await.unwrap_or(Value::Null))
}

/// `tools/call` of an echo tool on `session`: the `_meta` the upstream received and
/// the correlation id in the result's `_meta`.
async fn mcp_call(
    session: &McpSession,
    tool: &str,
    meta: Option<Value>,
    header: Option<String>,
) -> (Value, String) {
    let mut params = json!({"name": tool, "arguments": {}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let id = json!(format!("call-{tool}"));
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let headers: Vec<(&str, String)> = header.map(|h| ("traceparent", h)).into_iter().collect();
    let exchange = session
        .send_body_with_headers(
            body.to_string().into_bytes(),
            &headers,
            Some(id),
            None,
            Duration::from_secs(30),
        )
        .await
        .expect("tools/call");
    let result = exchange.result().clone();
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"));
    let echoed: Value = serde_json::from_str(text).expect("the echoed _meta");
    let correlation = result["_meta"]["toolgate/correlationId"]
        .as_str()
        .unwrap_or_else(|| panic!("no correlation id in {result}"))
        .to_owned();
    (echoed, correlation)
}

fn is_trace_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

// ---------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_trace_goes_through_the_gateway_to_each_upstream_and_the_collector() {
    let spans: Spans = Arc::default();
    let collector = serve(
        axum::Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(spans.clone()),
    )
    .await;
    let upstreams = upstreams().await;
    let gateway = Gateway::start(json!({
        "telemetry": {
            "otlp_endpoint": collector,
            "service_name": "toolgate-e2e",
            "export_interval": "100ms",
        },
        "upstreams": upstreams.config,
    }))
    .await;

    // REST, trace context in the HTTP header, an OpenAPI upstream.
    let (status, correlation, body) = rest_call(
        &gateway,
        "api__ping",
        json!({"note": ARGUMENT_VALUE}),
        Some(REST_CALLER.traceparent()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(correlation.as_deref(), Some(REST_CALLER.trace), "{body}");
    let api_saw = upstreams.api.lock().unwrap().clone();
    assert_eq!(api_saw.len(), 1, "{api_saw:?}");
    let (trace, rest_parent) = parts(&api_saw[0]);
    assert_eq!(trace, REST_CALLER.trace);
    assert_ne!(
        rest_parent, REST_CALLER.span,
        "the gateway's span is the parent"
    );

    // MCP over HTTP, trace context in the HTTP header, a streamable HTTP upstream: it
    // gets the context in `_meta` and as its own header.
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let (echoed, correlation) = mcp_call(
        &session,
        "web__echo_meta",
        None,
        Some(HEADER_CALLER.traceparent()),
    )
    .await;
    assert_eq!(correlation, HEADER_CALLER.trace);
    let sent = echoed["traceparent"].as_str().expect("_meta.traceparent");
    let (trace, web_parent) = parts(sent);
    assert_eq!(trace, HEADER_CALLER.trace, "{echoed}");
    assert_ne!(web_parent, HEADER_CALLER.span);
    let header_saw = upstreams.mcp_http.lock().unwrap().clone();
    assert_eq!(header_saw, vec![sent.to_owned()], "the HTTP header too");

    // MCP, trace context in `_meta` (the MCP convention; it wins over a header of
    // another trace), a stdio upstream.
    let (echoed, correlation) = mcp_call(
        &session,
        "local__echo_meta",
        Some(json!({"traceparent": META_CALLER.traceparent(), "tracestate": "vendor=1"})),
        Some(HEADER_CALLER.traceparent()),
    )
    .await;
    assert_eq!(correlation, META_CALLER.trace);
    let (trace, stdio_parent) = parts(echoed["traceparent"].as_str().expect("traceparent"));
    assert_eq!(trace, META_CALLER.trace, "{echoed}");
    assert_ne!(stdio_parent, META_CALLER.span);
    assert_eq!(echoed["tracestate"], "vendor=1", "{echoed}");

    // The collector gets, for each trace: the request's span, child of the caller's,
    // and the upstream call's span, whose id is the parent each upstream was given.
    let expected = [
        (&REST_CALLER, rest_parent, "api__ping", "api"),
        (&HEADER_CALLER, web_parent, "web__echo_meta", "web"),
        (&META_CALLER, stdio_parent, "local__echo_meta", "local"),
    ];
    let exported = wait_for(
        "the spans at the collector",
        Duration::from_secs(30),
        || {
            let spans = spans.lock().unwrap().clone();
            let complete = expected.iter().all(|(caller, parent, _, _)| {
                let of_trace: Vec<&Exported> =
                    spans.iter().filter(|s| s.trace == caller.trace).collect();
                of_trace.iter().any(|s| &s.span == parent)
                    && of_trace.iter().any(|s| s.parent == caller.span)
            });
            async move { complete.then_some(spans) }
        },
    )
    .await;
    for (caller, parent, tool, upstream) in &expected {
        let request = exported
            .iter()
            .find(|s| s.trace == caller.trace && s.parent == caller.span)
            .unwrap();
        assert_eq!(request.name, "toolgate.request", "{request:?}");
        let call = exported
            .iter()
            .find(|s| s.trace == caller.trace && &s.span == parent)
            .unwrap();
        assert_eq!(call.name, "toolgate.upstream", "{call:?}");
        assert_eq!(call.attributes.get("tool").map(String::as_str), Some(*tool));
        assert_eq!(
            call.attributes.get("upstream").map(String::as_str),
            Some(*upstream)
        );
        assert_eq!(
            call.attributes.get("outcome").map(String::as_str),
            Some("ok")
        );
        assert_eq!(
            call.parent, request.span,
            "the upstream call is part of the request"
        );
        let policy = exported
            .iter()
            .find(|s| s.trace == caller.trace && s.name == "toolgate.policy");
        assert!(
            policy.is_some_and(|p| p.parent == request.span),
            "a policy span under the request: {exported:?}"
        );
    }
    for span in &exported {
        for value in span.attributes.values() {
            assert!(
                !value.contains(ARGUMENT_VALUE),
                "an argument value in a span: {span:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_without_a_trace_gets_its_own_correlation_id() {
    let upstreams = upstreams().await;
    // No telemetry section: nothing is exported, ids are still drawn and passed on.
    let gateway = Gateway::start(json!({"upstreams": upstreams.config})).await;

    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, id, body) = rest_call(&gateway, "api__ping", json!({}), None).await;
        assert_eq!(status, 200, "{body}");
        ids.push(id.expect("a toolgate-correlation-id header"));
    }
    let api_saw = upstreams.api.lock().unwrap().clone();
    assert_eq!(api_saw.len(), 2);
    for (id, traceparent) in ids.iter().zip(&api_saw) {
        assert_eq!(&parts(traceparent).0, id, "the API is told the same trace");
    }

    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    for tool in ["web__echo_meta", "local__echo_meta"] {
        let (echoed, id) = mcp_call(&session, tool, None, None).await;
        let traceparent = echoed["traceparent"].as_str().expect("traceparent");
        assert_eq!(parts(traceparent).0, id, "{echoed}");
        ids.push(id);
    }

    // A refused call carries one as well.
    let (status, id, _) = rest_call(&gateway, "api__no_such_tool", json!({}), None).await;
    assert_eq!(status, 404);
    assert!(id.as_deref().is_some_and(is_trace_id), "{id:?}");

    for id in &ids {
        assert!(is_trace_id(id), "{id}");
    }
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");

    // Each call's audit line names its id.
    let logs = wait_for("the audit lines", Duration::from_secs(10), || {
        let logs = gateway.proc.logs();
        let all = ids
            .iter()
            .all(|id| logs.contains(&format!("correlation_id={id}")));
        async move { all.then_some(logs) }
    })
    .await;
    let audited = logs
        .lines()
        .filter(|l| l.contains("toolgate::audit") && l.contains("correlation_id="))
        .count();
    assert!(audited >= ids.len(), "{logs}");
}
