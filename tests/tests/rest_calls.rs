//! Function-calling clients over plain HTTP: OpenAI `tool_calls` and Anthropic
//! `tool_use` batches, call summaries, strict-mode nulls and Gemini names mapped back,
//! and the tool-call event stream (order and coalescing with server-everything's
//! long-running operation as the slow upstream).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use serde_json::{Value, json};
use toolgate_e2e::{
    Gateway, NodeDeps, TempDir, everything_stdio_upstream, hash_key, heavy_lock, http, require,
    rest_get, rest_post, unique_marker, workspace_root,
};

const KEY: &str = "rest-calls-tenant-key-0123456789";

fn openai_call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_and_tool_use_batches_answer_in_each_apis_message_format() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("rest-batch"))},
        "tenants": {"t": {
            "api_keys": [hash_key(KEY)],
            "allow": ["everything__echo", "everything__get-sum", "everything__get-tiny-image"],
            "initial": ["everything__echo", "everything__get-tiny-image"]
        }}
    }))
    .await;
    let (status, created) = rest_post(&gateway, "/v1/sessions", Some(KEY), json!({})).await;
    assert_eq!(status, 201, "{created}");
    let session = created["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();

    // An assistant message as the OpenAI API returns it.
    let assistant = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [
            openai_call("call_ok", "everything__echo", r#"{"message": "hello batch"}"#),
            openai_call("call_bad_json", "everything__echo", r#"{"message": "unterminated"#),
            openai_call("call_not_visible", "everything__get-sum", r#"{"a": 1, "b": 2}"#),
            openai_call("call_unknown", "everything__no_such_tool", "{}"),
            openai_call("call_wrong_type", "everything__echo", "[1, 2]"),
        ]
    });
    let (status, body) = rest_post(
        &gateway,
        &format!("/v1/tool_calls?session={session}"),
        Some(KEY),
        assistant.clone(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let messages = body["messages"].as_array().expect("messages");
    let ids: Vec<&str> = messages
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        ids,
        [
            "call_ok",
            "call_bad_json",
            "call_not_visible",
            "call_unknown",
            "call_wrong_type"
        ],
        "one message per call, in order"
    );
    for message in messages {
        assert_eq!(message["role"], "tool", "{message}");
        assert!(message["content"].is_string(), "content is text: {message}");
        let keys: Vec<&String> = message.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["role", "tool_call_id", "content"],
            "only the message fields"
        );
    }
    let content = |i: usize| messages[i]["content"].as_str().unwrap_or_default();
    assert!(content(0).contains("hello batch"), "{}", content(0));
    assert!(
        content(1).starts_with("Error (invalid_args)") && content(1).contains("not valid JSON"),
        "malformed arguments become an error the model can act on: {}",
        content(1)
    );
    assert!(
        content(2).starts_with("Error (not_selected)") && content(2).contains("tool_expand_tools"),
        "an allowed tool outside the session's visible set says how to select it: {}",
        content(2)
    );
    assert!(
        content(3).starts_with("Error (not_found)"),
        "{}",
        content(3)
    );
    assert!(
        content(4).starts_with("Error (invalid_args)") && content(4).contains("an array"),
        "{}",
        content(4)
    );

    // After expanding, the same call succeeds; the bare array form is accepted too.
    let (status, _) = rest_post(
        &gateway,
        &format!("/v1/sessions/{session}/tools/expand"),
        Some(KEY),
        json!({"tool_names": ["everything__get-sum"]}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = rest_post(
        &gateway,
        "/v1/tool_calls",
        Some(KEY),
        json!([openai_call(
            "again",
            "everything__get-sum",
            r#"{"a": 1, "b": 2}"#
        )]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains('3'),
        "{body}"
    );

    // A batch that is not a batch is an HTTP error; so is a call without an id.
    let (status, body) = rest_post(&gateway, "/v1/tool_calls", Some(KEY), json!({"x": 1})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_body"))
    );
    let (status, _) = rest_post(
        &gateway,
        "/v1/tool_calls",
        Some(KEY),
        json!([{"function": {"name": "everything__echo", "arguments": "{}"}}]),
    )
    .await;
    assert_eq!(status, 400);
    // Credentials are checked like everywhere else, with a REST-shaped error.
    let (status, body) = rest_post(&gateway, "/v1/tool_calls", None, assistant).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "missing_credentials", "{body}");

    // Anthropic: tool_use blocks in, tool_result blocks out (text and images).
    let message = json!({
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "everything__echo", "input": {"message": "hi anthropic"}},
            {"type": "tool_use", "id": "toolu_2", "name": "everything__get-tiny-image", "input": {}},
            {"type": "tool_use", "id": "toolu_3", "name": "everything__echo", "input": "not an object"},
        ]
    });
    let (status, body) = rest_post(&gateway, "/v1/tool_use", Some(KEY), message).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "user");
    let results = body["content"].as_array().expect("content");
    assert_eq!(results.len(), 3, "the text block carries no call: {body}");
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_1");
    assert!(results[0].get("is_error").is_none(), "{}", results[0]);
    assert!(
        results[0]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("hi anthropic"),
        "{}",
        results[0]
    );
    let image = results[1]["content"]
        .as_array()
        .expect("blocks")
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("an image block: {}", results[1]));
    assert_eq!(image["source"]["type"], "base64");
    assert_eq!(image["source"]["media_type"], "image/png");
    assert_eq!(results[2]["tool_use_id"], "toolu_3");
    assert_eq!(results[2]["is_error"], true, "{}", results[2]);
    assert!(
        results[2]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("invalid_args"),
        "{}",
        results[2]
    );
    // Every block's fields are typed as the document says, call or not: a text block
    // with a `background` that is no boolean is a bad request, not skipped.
    let (status, body) = rest_post(
        &gateway,
        "/v1/tool_use",
        Some(KEY),
        json!([{"type": "text", "text": "thinking", "background": 7}]),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("content[0]: `background`"),
        "{body}"
    );
    gateway.assert_alive();
}

/// A pet API with an optional boolean query parameter, served by axum in the test.
const PET_SPEC: &str = r#"{
  "openapi": "3.0.3",
  "info": {"title": "pets", "version": "1"},
  "paths": {"/pets/{petId}": {"get": {
    "operationId": "getPet",
    "parameters": [
      {"name": "petId", "in": "path", "required": true, "schema": {"type": "integer"}},
      {"name": "verbose", "in": "query", "required": false, "schema": {"type": "boolean"}}
    ],
    "responses": {"200": {"description": "a pet", "content": {"application/json": {"schema": {"type": "object"}}}}}
  }}}
}"#;

type Queries = Arc<Mutex<Vec<Option<String>>>>;

async fn pet(
    State(queries): State<Queries>,
    Path(id): Path<u64>,
    RawQuery(query): RawQuery,
) -> axum::Json<Value> {
    queries.lock().unwrap().push(query);
    axum::Json(json!({"id": id, "name": "Rex", "tags": ["good", "dog"]}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_strict_nulls_and_gemini_names_on_an_openapi_upstream() {
    let queries: Queries = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let api = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/pets/{id}", axum::routing::get(pet))
        .with_state(queries.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let dir = TempDir::new("rest-pets");
    let spec = dir.path().join("pets.json");
    std::fs::write(&spec, PET_SPEC).expect("write the spec");
    // An upstream name starting with a digit: Gemini needs a letter or `_` first.
    let gateway = Gateway::start(json!({
        "upstreams": {"9pets": {"openapi": {
            "spec_path": spec, "base_url": api, "allow_private_networks": true
        }}}
    }))
    .await;

    let (status, body) = rest_post(
        &gateway,
        "/v1/tools/9pets__getPet/call",
        None,
        json!({"arguments": {"petId": 42}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let summary = body["summary"].as_str().expect("a summary");
    assert!(summary.starts_with("GET /pets/42 → 200 ("), "{summary}");
    assert_eq!(body["is_error"], false);
    assert_eq!(body["structured_content"]["name"], "Rex");
    assert_eq!(body["usage"]["truncated"], false);
    assert!(
        body["usage"]["result_tokens"].as_u64().unwrap_or(0) > 0,
        "{body}"
    );

    // A strict-mode client sends `null` for the optional parameter; it is dropped
    // before the call (the API's schema says boolean, not null).
    let (status, list) = rest_get(&gateway, "/v1/tools?format=openai&strict=true", None).await;
    assert_eq!(status, 200);
    let strict_tool = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "9pets__getPet")
        .expect("the pet tool in strict form");
    assert_eq!(
        strict_tool["function"]["parameters"]["required"],
        json!(["petId", "verbose"]),
        "strict mode makes every property required"
    );
    let (status, body) = rest_post(
        &gateway,
        "/v1/tool_calls",
        None,
        json!([openai_call(
            "c1",
            "9pets__getPet",
            r#"{"petId": 7, "verbose": null}"#
        )]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let content = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(content.contains("\"id\":7"), "{content}");
    assert_eq!(
        queries.lock().unwrap().last().cloned(),
        Some(None),
        "no `verbose` reached the API"
    );

    // Gemini's name for the tool is called back and mapped to the catalog name.
    let (status, list) = rest_get(&gateway, "/v1/tools?format=gemini", None).await;
    assert_eq!(status, 200);
    let gemini_name = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .find(|n| n.ends_with("getPet"))
        .expect("the pet tool in Gemini form")
        .to_owned();
    assert_eq!(gemini_name, "_9pets__getPet");
    let (status, body) = rest_post(
        &gateway,
        &format!("/v1/tools/{gemini_name}/call"),
        None,
        json!({"arguments": {"petId": 5, "verbose": true}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["summary"]
            .as_str()
            .unwrap_or_default()
            .starts_with("GET /pets/5 → 200")
    );
    assert_eq!(
        queries.lock().unwrap().last().cloned(),
        Some(Some("verbose=true".to_owned()))
    );
}

/// One event of the stream: its name and data.
#[derive(Debug)]
struct Event {
    name: String,
    data: Value,
}

/// Posts a streamed call and reads every event (bounded in time and count).
async fn stream_call(
    gateway: &Gateway,
    tool: &str,
    arguments: Value,
    accept: &str,
) -> (String, Vec<Event>) {
    let response = http()
        .post(gateway.url(&format!("/v1/tools/{tool}/call")))
        .header("accept", accept)
        .json(&json!({"arguments": arguments}))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("POST a streamed call");
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.text().await.expect("the whole stream");
    let mut events = Vec::new();
    if accept == "text/event-stream" {
        for frame in body
            .split("\n\n")
            .filter(|f| !f.trim().is_empty())
            .take(10_000)
        {
            let mut name = String::new();
            let mut data = String::new();
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            let data = serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {frame}"));
            events.push(Event { name, data });
        }
    } else {
        for line in body.lines().filter(|l| !l.trim().is_empty()).take(10_000) {
            let line: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            events.push(Event {
                name: line["event"].as_str().unwrap_or_default().to_owned(),
                data: line["data"].clone(),
            });
        }
    }
    (content_type, events)
}

/// Checks start → progress… → complete → result and returns the progress events.
fn check_order(events: &[Event]) -> Vec<&Value> {
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert!(names.len() >= 3, "{names:?}");
    assert_eq!(names[0], "tool_call_start", "{names:?}");
    assert_eq!(names[names.len() - 2], "tool_call_complete", "{names:?}");
    assert_eq!(names[names.len() - 1], "result", "{names:?}");
    assert!(
        names[1..names.len() - 2]
            .iter()
            .all(|n| *n == "tool_progress"),
        "{names:?}"
    );
    let id = &events[0].data["tool_call_id"];
    assert!(id.as_str().is_some_and(|s| s.starts_with("call_")), "{id}");
    for event in &events[..events.len() - 1] {
        assert_eq!(
            &event.data["tool_call_id"], id,
            "one id throughout: {event:?}"
        );
    }
    let complete = &events[events.len() - 2].data;
    let result = &events[events.len() - 1].data;
    assert!(complete["summary"].is_string(), "{complete}");
    assert!(complete["duration_ms"].is_u64(), "{complete}");
    if result.get("error").is_none() {
        assert_eq!(complete["summary"], result["summary"]);
        assert_eq!(complete["is_error"], result["is_error"]);
        assert_eq!(complete["result_tokens"], result["usage"]["result_tokens"]);
    }
    events[1..events.len() - 2]
        .iter()
        .map(|e| &e.data)
        .collect()
}

/// The progress events but the upstream's log lines (`stream: "log"`): server-everything
/// logs on its own (e.g. "Roots updated" after it asked for roots), and such a line goes
/// to whichever call is in flight.
fn without_logs(progress: Vec<&Value>) -> Vec<&Value> {
    progress
        .into_iter()
        .filter(|p| p["stream"] != "log")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_orders_events_and_coalesces_progress() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let start = |window: &str, marker: &str| {
        Gateway::start(json!({
            "rest": {"coalesce_window": window},
            "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker(marker))},
        }))
    };
    let uncoalesced = start("0ms", "rest-stream-raw").await;
    let coalesced = start("1s", "rest-stream-merged").await;
    // 20 progress updates, one every 50 ms.
    let slow = json!({"duration": 1, "steps": 20});
    let tool = "everything__trigger-long-running-operation";

    let (content_type, events) =
        stream_call(&uncoalesced, tool, slow.clone(), "text/event-stream").await;
    assert_eq!(content_type, "text/event-stream");
    let progress = without_logs(check_order(&events));
    let open: Vec<&&Value> = progress.iter().filter(|p| p["closed"] == false).collect();
    let steps: Vec<f64> = open.iter().filter_map(|p| p["progress"].as_f64()).collect();
    let expected: Vec<f64> = (1..=20).map(f64::from).collect();
    assert_eq!(
        steps, expected,
        "coalescing off: one event per update, in order"
    );
    assert!(
        open.iter()
            .all(|p| p["stream"] == "info" && p["total"] == 20.0)
    );
    let closed: Vec<&&Value> = progress.iter().filter(|p| p["closed"] == true).collect();
    assert_eq!(
        closed.len(),
        1,
        "the info stream closes once, last: {progress:?}"
    );
    assert_eq!(progress.last().unwrap()["closed"], true);
    let start = &events[0].data;
    assert_eq!(start["tool"], tool);
    assert_eq!(start["input"], slow);
    assert!(
        start["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("steps=20")
    );
    let result = &events.last().unwrap().data;
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("completed"),
        "{result}"
    );
    assert!(
        !result.to_string().contains("tool_progress"),
        "progress never enters the result"
    );

    let (_, events) = stream_call(&coalesced, tool, slow.clone(), "text/event-stream").await;
    let progress = without_logs(check_order(&events));
    let open: Vec<f64> = progress
        .iter()
        .filter(|p| p["closed"] == false)
        .filter_map(|p| p["progress"].as_f64())
        .collect();
    assert!(
        !open.is_empty() && open.len() <= 5,
        "20 updates in ~1 s merge into a few events with a 1 s window: {open:?}"
    );
    assert!(open.windows(2).all(|w| w[0] < w[1]), "{open:?}");
    assert_eq!(
        open.last(),
        Some(&20.0),
        "completion flushes the last update"
    );
    assert_eq!(progress.last().unwrap()["closed"], true);

    // NDJSON framing; a call without progress has no progress events.
    let (content_type, events) = stream_call(
        &coalesced,
        "everything__echo",
        json!({"message": "ndjson"}),
        "application/x-ndjson",
    )
    .await;
    assert_eq!(content_type, "application/x-ndjson");
    let progress = without_logs(check_order(&events));
    assert!(progress.is_empty(), "{progress:?}");
    assert!(
        events[events.len() - 2].data["summary"]
            .as_str()
            .unwrap_or_default()
            .starts_with("everything__echo → ok (1 text block"),
        "{:?}",
        events[events.len() - 2]
    );

    // A failing call still completes the stream, with the error as the result.
    let (_, events) = stream_call(
        &coalesced,
        "everything__no_such_tool",
        json!({}),
        "text/event-stream",
    )
    .await;
    check_order(&events);
    assert_eq!(events.last().unwrap().data["error"]["code"], "not_found");
    assert_eq!(events[events.len() - 2].data["is_error"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_log_lines_during_a_call_reach_the_event_stream_on_their_own_stream() {
    let deps = require!(NodeDeps::find());
    let fixture = workspace_root().join("tests/fixtures/background_stream/server.mjs");
    let gateway = Gateway::start(json!({
        "rest": {"coalesce_window": "0s"},
        "upstreams": {"fx": {"stdio": {
            "command": deps.node(),
            "args": [fixture, unique_marker("rest-logs")]
        }}}
    }))
    .await;
    for accept in ["text/event-stream", "application/x-ndjson"] {
        let (_, events) = stream_call(&gateway, "fx__logs", json!({"count": 3}), accept).await;
        let streamed = check_order(&events);
        let logs: Vec<&str> = streamed
            .iter()
            .filter(|e| e["stream"] == "log" && e["closed"] == false)
            .filter_map(|e| e["text"].as_str())
            .collect();
        assert_eq!(logs.len(), 3, "{accept}: one event per line: {streamed:#?}");
        for (i, line) in logs.iter().enumerate() {
            let want = format!("info fixture: log {} of call ", i + 1);
            assert!(line.starts_with(&want), "{accept}: {line:?}");
        }
        assert!(
            streamed
                .iter()
                .any(|e| e["stream"] == "log" && e["closed"] == true),
            "{accept}: the log stream is closed at the end: {streamed:#?}"
        );
        assert_eq!(events.last().unwrap().data["is_error"], false);
    }
}
