//! Background calls over REST (`"background": true`, `/v1/tasks/{id}`), through the
//! binary: an OpenAPI API served in the test (a slow operation that notices when its
//! request is dropped) and server-everything over stdio (progress). A background call
//! is polled to its result, which is the plain call's answer; a batch starts tasks
//! and stays valid for its model API; the event stream read in part, dropped and
//! resumed with `Last-Event-ID` equals one uninterrupted read; DELETE cancels a
//! running task and stops its upstream request; another tenant gets exactly the 404
//! of an id that never existed on every route; refusals are a plain call's; a tenant
//! at its share of kept tasks does not stop another.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::response::IntoResponse;
use futures::StreamExt;
use serde_json::{Value, json};
use toolgate_e2e::{
    Gateway, MockApi, NodeDeps, TempDir, everything_stdio_upstream, example_succeeded, hash_key,
    heavy_lock, http, require, rest_get, rest_post, run_shell_example, unique_marker,
    workspace_root,
};

const KEY_A: &str = "rest-tasks-tenant-a-key-0123456789";
const KEY_B: &str = "rest-tasks-tenant-b-key-0123456789";
const SLOW: &str = "api__slow";

/// The slow API: `GET /slow?ms=N` answers `{"slept": N}` after N ms; `started` counts
/// requests received, `dropped` those abandoned before their answer (the gateway
/// closed the connection).
struct SlowApi {
    api: MockApi,
    dropped: Arc<AtomicUsize>,
    _spec_dir: TempDir,
    spec: std::path::PathBuf,
}

/// Counts a request abandoned before its answer when dropped unfinished.
struct DropFlag {
    dropped: Arc<AtomicUsize>,
    finished: bool,
}

impl Drop for DropFlag {
    fn drop(&mut self) {
        if !self.finished {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl SlowApi {
    async fn start() -> SlowApi {
        let dropped = Arc::new(AtomicUsize::new(0));
        let counter = dropped.clone();
        let api = MockApi::start(move |request| {
            let dropped = counter.clone();
            async move {
                let ms: u64 = request
                    .query
                    .as_deref()
                    .and_then(|q| q.strip_prefix("ms="))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let mut flag = DropFlag {
                    dropped,
                    finished: false,
                };
                tokio::time::sleep(Duration::from_millis(ms.min(120_000))).await;
                flag.finished = true;
                axum::Json(json!({"slept": ms})).into_response()
            }
        })
        .await;
        let spec_dir = TempDir::new("rest-tasks-spec");
        let spec = spec_dir.path().join("slow.json");
        std::fs::write(
            &spec,
            json!({
                "openapi": "3.0.3",
                "info": {"title": "slow", "version": "1"},
                "paths": {"/slow": {"get": {
                    "operationId": "slow",
                    "parameters": [{"name": "ms", "in": "query", "required": true,
                        "schema": {"type": "integer"}}],
                    "responses": {"200": {"description": "ok", "content": {"application/json": {
                        "schema": {"type": "object", "properties": {"slept": {"type": "integer"}}}}}}}
                }}}
            })
            .to_string(),
        )
        .expect("write the spec");
        SlowApi {
            api,
            dropped,
            _spec_dir: spec_dir,
            spec,
        }
    }

    fn upstream(&self) -> Value {
        json!({"openapi": {
            "spec_path": self.spec,
            "base_url": self.api.url(""),
            "allow_private_networks": true
        }})
    }
}

/// Tenants `a` (everything) and `b` (everything but the slow tool).
fn tenants() -> Value {
    json!({
        "a": {"api_keys": [hash_key(KEY_A)], "allow": ["*"]},
        "b": {"api_keys": [hash_key(KEY_B)], "allow": ["*"], "deny": [SLOW]}
    })
}

/// `method path` with bearer `key`: status, headers and the JSON body (`null` if none).
async fn send(
    gateway: &Gateway,
    method: reqwest::Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = http()
        .request(method, gateway.url(path))
        .bearer_auth(key)
        .timeout(Duration::from_secs(30));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (
        status,
        headers,
        response.json().await.unwrap_or(Value::Null),
    )
}

/// Polls `status_url` (every poll_interval_ms, at most 400 times or `within`) until the
/// task is over; answers its last view.
async fn poll_until_over(
    gateway: &Gateway,
    key: &str,
    status_url: &str,
    within: Duration,
) -> Value {
    let deadline = Instant::now() + within;
    let mut last = Value::Null;
    for _ in 0..400 {
        let (status, body) = rest_get(gateway, status_url, Some(key)).await;
        assert_eq!(status, 200, "{body}");
        if ["completed", "failed", "cancelled"].contains(&body["status"].as_str().unwrap_or("")) {
            return body;
        }
        let pause = body["poll_interval_ms"]
            .as_u64()
            .unwrap_or(200)
            .clamp(50, 1000);
        last = body;
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    panic!("the task did not finish within {within:?}: {last}");
}

/// One SSE event as the stream sent it.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    id: u64,
    name: String,
    data: Value,
}

/// Reads the task's event stream (from after `last_id`), at most `max` events or until
/// it ends, within `within`; answers the events and whether the stream ended.
async fn read_events(
    gateway: &Gateway,
    key: &str,
    events_url: &str,
    last_id: Option<u64>,
    max: usize,
    within: Duration,
) -> (Vec<Event>, bool) {
    let mut request = http()
        .get(gateway.url(events_url))
        .bearer_auth(key)
        .header("accept", "text/event-stream")
        .timeout(within);
    if let Some(id) = last_id {
        request = request.header("last-event-id", id.to_string());
    }
    let response = request.send().await.expect("GET events");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    for _ in 0..10_000 {
        if events.len() >= max {
            return (events, false);
        }
        let chunk = match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(chunk))) => chunk,
            Ok(None) => return (events, true),
            Ok(Some(Err(e))) => panic!("the event stream broke: {e}"),
            Err(_) => panic!("no end of the event stream within {within:?}: {events:#?}"),
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            if let Some(event) = parse_frame(&frame) {
                events.push(event);
                if events.len() >= max {
                    return (events, false);
                }
            }
        }
    }
    panic!("too many chunks");
}

/// An event frame (`id:`, `event:`, `data:`); `None` for comments and `retry:`.
fn parse_frame(frame: &str) -> Option<Event> {
    let (mut id, mut name, mut data) = (None, None, None);
    for line in frame.lines() {
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.parse().expect("numeric ids"));
        } else if let Some(v) = line.strip_prefix("event: ") {
            name = Some(v.to_owned());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = Some(serde_json::from_str(v).expect("JSON data"));
        }
    }
    Some(Event {
        id: id?,
        name: name.expect("every event is named"),
        data: data.expect("every event has data"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_call_is_polled_to_the_plain_calls_result() {
    let _serial = heavy_lock().await;
    let slow = SlowApi::start().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"api": slow.upstream()},
        "tenants": tenants()
    }))
    .await;
    let path = format!("/v1/tools/{SLOW}/call");
    let arguments = json!({"ms": 300});
    let (status, headers, started) = send(
        &gateway,
        reqwest::Method::POST,
        &path,
        KEY_A,
        Some(json!({"arguments": arguments, "background": true})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let id = started["task_id"].as_str().expect("task_id").to_owned();
    assert_eq!(started["status"], "working");
    assert_eq!(started["tool"], SLOW);
    assert_eq!(started["status_url"], format!("/v1/tasks/{id}"));
    assert_eq!(started["events_url"], format!("/v1/tasks/{id}/events"));
    assert_eq!(
        headers["location"].to_str().unwrap(),
        format!("/v1/tasks/{id}")
    );

    let done = poll_until_over(
        &gateway,
        KEY_A,
        &format!("/v1/tasks/{id}"),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["task_id"], id.as_str());
    assert!(done.get("error").is_none(), "{done}");
    // The task's call continues the request's trace: its audit line carries the
    // correlation id the 202 answered with.
    let correlation = headers["toolgate-correlation-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let logs = gateway.proc.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("toolgate::audit: tool call ")
                && l.contains(SLOW)
                && l.contains(&format!("correlation_id={correlation}"))),
        "no audit line of the task's call with correlation id {correlation}:\n{logs}"
    );
    for key in ["created_at", "updated_at"] {
        let at = done[key].as_str().expect(key);
        assert!(
            at.len() == 24 && at.ends_with('Z') && at.contains('T'),
            "{key}: {at}"
        );
    }
    let (status, plain) = rest_post(
        &gateway,
        &path,
        Some(KEY_A),
        json!({"arguments": arguments}),
    )
    .await;
    assert_eq!(status, 200, "{plain}");
    let result = &done["result"];
    for field in ["content", "structured_content", "is_error", "summary"] {
        assert_eq!(result[field], plain[field], "{field}: {result} vs {plain}");
    }
    assert_eq!(result["structured_content"]["slept"], 300);

    // Batches: the background calls' entries carry the task, as JSON text the model
    // reads, in messages its API accepts; the plain call beside them is answered.
    let (status, answer) = rest_post(
        &gateway,
        "/v1/tool_calls",
        Some(KEY_A),
        json!({"tool_calls": [
            {"id": "call_bg", "type": "function", "background": true,
             "function": {"name": SLOW, "arguments": "{\"ms\": 50}"}},
            {"id": "call_plain", "type": "function",
             "function": {"name": SLOW, "arguments": "{\"ms\": 10}"}}
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let messages = answer["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    for message in messages {
        let mut keys: Vec<&String> = message.as_object().unwrap().keys().collect();
        keys.sort_unstable();
        assert_eq!(keys, ["content", "role", "tool_call_id"], "{message}");
    }
    let told: Value = serde_json::from_str(messages[0]["content"].as_str().unwrap())
        .expect("the background call's content is JSON text");
    let listed = &answer["tasks"][0];
    assert_eq!(listed["tool_call_id"], "call_bg");
    assert_eq!(listed["task_id"], told["task_id"]);
    assert_eq!(told["status"], "working");
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .contains("\"slept\""),
        "{answer}"
    );
    let done = poll_until_over(
        &gateway,
        KEY_A,
        told["status_url"].as_str().unwrap(),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(done["result"]["structured_content"]["slept"], 50, "{done}");

    let (status, answer) = rest_post(
        &gateway,
        "/v1/tool_use",
        Some(KEY_A),
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Starting it."},
            {"type": "tool_use", "id": "toolu_bg", "name": SLOW, "input": {"ms": 20}, "background": true}
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer.as_object().unwrap().len(),
        2,
        "only role and content: {answer}"
    );
    let block = &answer["content"][0];
    assert_eq!(block["type"], "tool_result");
    assert_eq!(block["tool_use_id"], "toolu_bg");
    assert!(block.get("is_error").is_none(), "{block}");
    let told: Value =
        serde_json::from_str(block["content"][0]["text"].as_str().unwrap()).expect("JSON text");
    let done = poll_until_over(
        &gateway,
        KEY_A,
        told["status_url"].as_str().unwrap(),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");

    // A call made in a session starts a task of that session: found with it (its URLs
    // carry it), and not without it.
    let (status, created) = rest_post(&gateway, "/v1/sessions", Some(KEY_A), json!({})).await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"].as_str().expect("session_id");
    let (status, started) = rest_post(
        &gateway,
        &path,
        Some(KEY_A),
        json!({"arguments": {"ms": 10}, "background": true, "session": session}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let status_url = started["status_url"].as_str().unwrap();
    assert!(
        status_url.ends_with(&format!("?session={session}")),
        "{status_url}"
    );
    let done = poll_until_over(&gateway, KEY_A, status_url, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let without = status_url.split('?').next().unwrap();
    let (status, body) = rest_get(&gateway, without, Some(KEY_A)).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("not_found")),
        "{body}"
    );
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_running_task_cancels_it_and_stops_its_upstream_request() {
    let _serial = heavy_lock().await;
    let slow = SlowApi::start().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"api": slow.upstream()},
        "tenants": tenants()
    }))
    .await;
    let (status, _, started) = send(
        &gateway,
        reqwest::Method::POST,
        &format!("/v1/tools/{SLOW}/call"),
        KEY_A,
        Some(json!({"arguments": {"ms": 60_000}, "background": true})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let status_url = started["status_url"].as_str().unwrap().to_owned();
    let events_url = started["events_url"].as_str().unwrap().to_owned();
    // The request reached the API (bounded wait).
    let deadline = Instant::now() + Duration::from_secs(20);
    while slow.api.count() == 0 {
        assert!(Instant::now() < deadline, "the call never reached the API");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(slow.dropped.load(Ordering::SeqCst), 0);

    // Another tenant: every route answers exactly what an id that never existed gets.
    let never = format!("/v1/tasks/{}", "A".repeat(22));
    for (method, suffix) in [
        (reqwest::Method::GET, ""),
        (reqwest::Method::GET, "/events"),
        (reqwest::Method::DELETE, ""),
    ] {
        let theirs = send(
            &gateway,
            method.clone(),
            &format!("{status_url}{suffix}"),
            KEY_B,
            None,
        )
        .await;
        let missing = send(
            &gateway,
            method.clone(),
            &format!("{never}{suffix}"),
            KEY_B,
            None,
        )
        .await;
        assert_eq!(theirs.0, 404, "{method} {suffix}: {}", theirs.2);
        assert_eq!(
            (theirs.0, &theirs.2),
            (missing.0, &missing.2),
            "{method} {suffix}"
        );
        assert_eq!(theirs.2["error"]["code"], "not_found");
    }
    let (status, _, view) = send(&gateway, reqwest::Method::GET, &status_url, KEY_A, None).await;
    assert_eq!(
        (status, view["status"].as_str()),
        (200, Some("working")),
        "another tenant changed nothing: {view}"
    );

    let (status, _, cancelled) =
        send(&gateway, reqwest::Method::DELETE, &status_url, KEY_A, None).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["error"]["code"], "cancelled");
    let deadline = Instant::now() + Duration::from_secs(10);
    while slow.dropped.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the upstream request was not stopped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, _, again) =
        send(&gateway, reqwest::Method::DELETE, &status_url, KEY_A, None).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["status"], "cancelled");
    assert_eq!(again["error"]["code"], "task_finished");
    let (status, body) = rest_get(&gateway, &status_url, Some(KEY_A)).await;
    assert_eq!((status, &body["status"]), (200, &json!("cancelled")));

    // Its event stream ends with the cancellation.
    let (events, ended) = read_events(
        &gateway,
        KEY_A,
        &events_url,
        None,
        100,
        Duration::from_secs(20),
    )
    .await;
    assert!(ended);
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["tool_call_start", "tool_call_complete", "result"]);
    assert_eq!(events[1].data["is_error"], true);
    assert_eq!(events[2].data["error"]["code"], "cancelled");
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_of_a_background_call_are_the_plain_calls() {
    let _serial = heavy_lock().await;
    let slow = SlowApi::start().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"api": slow.upstream()},
        "tenants": tenants()
    }))
    .await;
    // An unknown tool, and one hidden from the tenant: the same 404 either way.
    for (tool, key) in [("api__no_such_tool", KEY_A), (SLOW, KEY_B)] {
        let path = format!("/v1/tools/{tool}/call");
        let plain = send(
            &gateway,
            reqwest::Method::POST,
            &path,
            key,
            Some(json!({"arguments": {"ms": 1}})),
        )
        .await;
        let background = send(
            &gateway,
            reqwest::Method::POST,
            &path,
            key,
            Some(json!({"arguments": {"ms": 1}, "background": true})),
        )
        .await;
        assert_eq!(plain.0, 404, "{tool}: {}", plain.2);
        assert_eq!((background.0, &background.2), (plain.0, &plain.2), "{tool}");
    }
    // The gateway's own tools answer at once: never a task.
    let (status, _, body) = send(
        &gateway,
        reqwest::Method::POST,
        "/v1/tools/tool_search/call",
        KEY_A,
        Some(json!({"arguments": {"query": "slow"}, "background": true})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("execution_mode")),
        "{body}"
    );
    let (status, _, body) = send(
        &gateway,
        reqwest::Method::POST,
        &format!("/v1/tools/{SLOW}/call"),
        KEY_A,
        Some(json!({"arguments": {"ms": 1}, "background": "yes"})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_body")),
        "{body}"
    );
    // Without credentials: 401 on every task route, as on every /v1 route.
    for (method, path) in [
        (reqwest::Method::GET, "/v1/tasks/AAAAAAAAAAAAAAAAAAAAAA"),
        (
            reqwest::Method::GET,
            "/v1/tasks/AAAAAAAAAAAAAAAAAAAAAA/events",
        ),
        (reqwest::Method::DELETE, "/v1/tasks/AAAAAAAAAAAAAAAAAAAAAA"),
    ] {
        let response = http()
            .request(method.clone(), gateway.url(path))
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 401, "{method} {path}");
    }
    assert_eq!(slow.api.count(), 0, "no refused call reached the API");
    gateway.assert_alive();
}

/// Tenant `a` starting background calls past its share of kept tasks
/// (`tasks.max_stored_per_tenant`) is refused with its own limit (429, naming it and
/// what frees a place), and tenant `b` still starts and runs tasks: one tenant cannot
/// fill the shared store (`max_stored`, 503 for everyone) for the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_at_its_share_of_kept_tasks_does_not_stop_another() {
    let _serial = heavy_lock().await;
    let slow = SlowApi::start().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"api": slow.upstream()},
        "tenants": {
            "a": {"api_keys": [hash_key(KEY_A)], "allow": ["*"]},
            "b": {"api_keys": [hash_key(KEY_B)], "allow": ["*"]}
        },
        "tasks": {"max_stored": 6, "max_stored_per_tenant": 3}
    }))
    .await;
    let path = format!("/v1/tools/{SLOW}/call");
    let background = Some(json!({"arguments": {"ms": 1}, "background": true}));
    let mut started = 0;
    for _ in 0..6 {
        let (status, _, body) = send(
            &gateway,
            reqwest::Method::POST,
            &path,
            KEY_A,
            background.clone(),
        )
        .await;
        match status {
            202 => started += 1,
            429 => {
                let message = body["error"]["message"].as_str().unwrap_or_default();
                for part in [
                    "tenant 'a'",
                    "3 tasks",
                    "tasks.max_stored_per_tenant",
                    "tasks.ttl",
                ] {
                    assert!(message.contains(part), "{body}");
                }
            }
            other => panic!("tenant a: unexpected {other}: {body}"),
        }
    }
    assert_eq!(started, 3, "exactly tenant a's share was started");
    for _ in 0..2 {
        let (status, _, body) = send(
            &gateway,
            reqwest::Method::POST,
            &path,
            KEY_B,
            background.clone(),
        )
        .await;
        assert_eq!(status, 202, "tenant b is not held back by tenant a: {body}");
        let id = body["task_id"].as_str().expect("task_id");
        let done = poll_until_over(
            &gateway,
            KEY_B,
            &format!("/v1/tasks/{id}"),
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_resumes_after_a_disconnect_with_nothing_lost_or_repeated() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut everything = everything_stdio_upstream(&deps, &unique_marker("rest-tasks"));
    everything["background"] = json!("optional");
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": everything},
        "tenants": tenants()
    }))
    .await;
    let steps = 8;
    let (status, _, started) = send(
        &gateway,
        reqwest::Method::POST,
        "/v1/tools/everything__trigger-long-running-operation/call",
        KEY_A,
        Some(json!({"arguments": {"duration": 4, "steps": steps}, "background": true})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let events_url = started["events_url"].as_str().unwrap().to_owned();

    // Part of the stream: the start and the first progress update, then hang up.
    let (first, ended) = read_events(
        &gateway,
        KEY_A,
        &events_url,
        None,
        2,
        Duration::from_secs(30),
    )
    .await;
    assert!(!ended);
    assert_eq!(first[0].name, "tool_call_start");
    assert_eq!(first[1].name, "tool_progress");
    // Resume after the last event seen, while the task still runs, and read to the end.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let last = first.last().unwrap().id;
    let (rest, ended) = read_events(
        &gateway,
        KEY_A,
        &events_url,
        Some(last),
        1000,
        Duration::from_secs(60),
    )
    .await;
    assert!(ended, "the stream ends after its result");
    let resumed: Vec<Event> = first.into_iter().chain(rest).collect();

    // One uninterrupted read of the finished task: the same events.
    let (whole, ended) = read_events(
        &gateway,
        KEY_A,
        &events_url,
        None,
        1000,
        Duration::from_secs(30),
    )
    .await;
    assert!(ended);
    assert_eq!(resumed, whole, "a resumed read equals an uninterrupted one");
    let ids: Vec<u64> = whole.iter().map(|e| e.id).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids strictly increase: {ids:?}"
    );
    let names: Vec<&str> = whole.iter().map(|e| e.name.as_str()).collect();
    let progress: Vec<&Event> = whole
        .iter()
        .filter(|e| e.name == "tool_progress" && e.data["closed"] == false)
        .collect();
    assert_eq!(
        progress.len(),
        steps,
        "one event per progress update: {names:?}"
    );
    for (i, event) in progress.iter().enumerate() {
        assert_eq!(event.data["progress"], json!((i + 1) as f64), "{event:?}");
        assert_eq!(event.data["total"], json!(steps as f64));
        assert_eq!(event.data["stream"], "info");
    }
    assert_eq!(
        &names[names.len() - 3..],
        ["tool_progress", "tool_call_complete", "result"]
    );
    let result = &whole.last().unwrap().data;
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Long running operation completed"),
        "{result}"
    );
    // Resuming after the result gets nothing more.
    let (after, ended) = read_events(
        &gateway,
        KEY_A,
        &events_url,
        Some(*ids.last().unwrap()),
        10,
        Duration::from_secs(10),
    )
    .await;
    assert!(ended && after.is_empty(), "{after:?}");
    let (status, view) = rest_get(
        &gateway,
        started["status_url"].as_str().unwrap(),
        Some(KEY_A),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        view["result"], *result,
        "the stream's result is the status' result"
    );
    assert_eq!(view["progress"]["progress"], json!(steps as f64));
    gateway.assert_alive();
}

/// The "Background calls (REST)" example of docs/endpoints.md, run as written (only
/// the gateway's URL differs) against server-everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_background_call_example_runs_as_written() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let readme = std::fs::read_to_string(workspace_root().join("docs/endpoints.md"))
        .expect("docs/endpoints.md");
    let section = &readme[readme
        .find("## Background calls (REST)")
        .expect("the section")..];
    let start = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let example = &section[start..start + section[start..].find("```").expect("its end")];
    let mut everything = everything_stdio_upstream(&deps, &unique_marker("rest-tasks-readme"));
    everything["background"] = json!("optional");
    let mut gateway = Gateway::start(json!({"upstreams": {"everything": everything}})).await;
    let script = example.replace("http://127.0.0.1:8080", &gateway.base);
    assert_ne!(script, example, "the example names http://127.0.0.1:8080");
    let output = run_shell_example(&script).await;
    let (stdout, stderr) = example_succeeded(&output);
    for want in [
        "event: tool_call_start",
        "event: tool_progress",
        "event: result",
        "\"status\":\"completed\"",
        "Long running operation completed",
    ] {
        assert!(
            stdout.contains(want),
            "{want} missing from:\n{stdout}\n{stderr}"
        );
    }
    gateway.assert_alive();
}

/// Two replicas on one Redis: a task started on A is followed on B — its events read
/// in part on A and resumed on B equal one read on B — and cancelled on B, which stops
/// its upstream request on A; another tenant gets 404 on B too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_started_on_one_replica_is_followed_and_cancelled_on_another() {
    let deps = require!(NodeDeps::find());
    let redis_url = require!(toolgate_e2e::redis::shared_redis().await);
    let _serial = heavy_lock().await;
    let slow = SlowApi::start().await;
    let prefix = toolgate_e2e::redis::unique_prefix("rest-tasks");
    let config = || {
        let mut everything = everything_stdio_upstream(&deps, &unique_marker("rest-tasks-replica"));
        everything["background"] = json!("optional");
        json!({
            "state": {"backend": "redis", "url": redis_url, "key_prefix": prefix, "replicas": 2},
            "upstreams": {"api": slow.upstream(), "everything": everything},
            "tenants": tenants()
        })
    };
    let (mut a, mut b) = tokio::join!(Gateway::start(config()), Gateway::start(config()));

    let (status, _, started) = send(
        &a,
        reqwest::Method::POST,
        "/v1/tools/everything__trigger-long-running-operation/call",
        KEY_A,
        Some(json!({"arguments": {"duration": 3, "steps": 6}, "background": true})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let events_url = started["events_url"].as_str().unwrap().to_owned();
    let (first, _) = read_events(&a, KEY_A, &events_url, None, 3, Duration::from_secs(30)).await;
    let last = first.last().unwrap().id;
    let (rest, ended) = read_events(
        &b,
        KEY_A,
        &events_url,
        Some(last),
        1000,
        Duration::from_secs(60),
    )
    .await;
    assert!(ended);
    let resumed: Vec<Event> = first.into_iter().chain(rest).collect();
    let (whole, _) = read_events(&b, KEY_A, &events_url, None, 1000, Duration::from_secs(30)).await;
    assert_eq!(
        resumed, whole,
        "resumed on another replica: nothing lost or repeated"
    );
    assert_eq!(whole.last().unwrap().name, "result");
    let (status, view) = rest_get(&b, started["status_url"].as_str().unwrap(), Some(KEY_A)).await;
    assert_eq!(
        (status, view["status"].as_str()),
        (200, Some("completed")),
        "{view}"
    );
    let (status, _) = rest_get(&b, started["status_url"].as_str().unwrap(), Some(KEY_B)).await;
    assert_eq!(status, 404, "another tenant, on another replica");

    // Cancelled on B while A runs it: A stops its upstream request.
    let (status, _, started) = send(
        &a,
        reqwest::Method::POST,
        &format!("/v1/tools/{SLOW}/call"),
        KEY_A,
        Some(json!({"arguments": {"ms": 60_000}, "background": true})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while slow.api.count() == 0 {
        assert!(Instant::now() < deadline, "the call never reached the API");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status_url = started["status_url"].as_str().unwrap();
    let (status, _, cancelled) = send(&b, reqwest::Method::DELETE, status_url, KEY_A, None).await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (200, Some("cancelled")),
        "{cancelled}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while slow.dropped.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "A did not stop the upstream request"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, view) = rest_get(&a, status_url, Some(KEY_A)).await;
    assert_eq!(
        (status, view["status"].as_str()),
        (200, Some("cancelled")),
        "{view}"
    );
    a.assert_alive();
    b.assert_alive();
    toolgate_e2e::redis::delete_prefix(&redis_url, &prefix).await;
}
