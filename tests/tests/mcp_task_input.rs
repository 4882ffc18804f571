//! Background calls that ask their owner for input (`input_required`), through the
//! gateway, against server-everything over stdio:
//!
//! - relayed: its `simulate-research-query` with `ambiguous: true` runs as the
//!   server's own task, goes `input_required` and elicits a clarification (delivered on
//!   the upstream's `tasks/result`); a 2026-07-28 client sees it in `tasks/get`'s
//!   `inputRequests` and answers with `tasks/update`, a 2025-11-25 session (PyPI `mcp`
//!   2.3, `python/mcp_tasks.py input`) gets the elicitation on its `tasks/result`
//!   stream and answers it;
//! - gateway-hosted: its `trigger-elicitation-request` (a plain tool that elicits
//!   during its call) run as the gateway's task with `background: optional`.
//!
//! REST has the same round trip: `GET /v1/tasks/{id}` shows `input_requests`,
//! `POST /v1/tasks/{id}/input` answers. Another tenant's answer changes nothing, on
//! either surface. With state in Redis, the answer may reach any replica: the one
//! running the call sees it in the store. Every wait is bounded.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::redis::{delete_prefix, shared_redis, unique_prefix};
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, RpcExchange, everything_stdio_upstream, hash_key, python,
    require, rest_get, rest_post, run_python, unique_marker, wait_for,
};

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";
const EXT: &str = "io.modelcontextprotocol/tasks";

const KEY_A: &str = "input-tenant-a-key-0123456789abcdef";
const KEY_B: &str = "input-tenant-b-key-0123456789abcdef";

const RESEARCH: &str = "everything__simulate-research-query";
const ELICIT: &str = "everything__trigger-elicitation-request";

/// server-everything behind a gateway; tenant B reaches none of its tools (so one
/// tenant reaches the upstream, and its stdio requests can be tied to the one call in
/// flight), but may try every task method.
async fn gateway(deps: &NodeDeps, label: &str, background: Option<&str>) -> Gateway {
    let mut upstream = everything_stdio_upstream(deps, &unique_marker(label));
    if let Some(background) = background {
        upstream["background"] = json!(background);
    }
    Gateway::start(json!({
        "startup_timeout": "60s",
        "upstreams": {"everything": upstream},
        "tenants": {
            "a": {"api_keys": [hash_key(KEY_A)], "allow": ["everything__*"]},
            "b": {"api_keys": [hash_key(KEY_B)], "allow": ["nothing__*"]}
        }
    }))
    .await
}

fn bare(gateway: &Gateway, key: &str, protocol: &str) -> McpSession {
    let mut c = McpSession::bare(&gateway.mcp_url())
        .with_bearer(key)
        .with_timeout(Duration::from_secs(60))
        .reading_to_end();
    c.protocol = protocol.to_string();
    c
}

/// A 2026-07-28 request that declares the tasks extension.
async fn modern(c: &McpSession, method: &str, mut params: Value) -> RpcExchange {
    params["_meta"] =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}});
    c.rpc(method, params).await.exchange
}

/// Waits until server-everything registered `tool` (it does after initializing).
async fn wait_for_tool(gateway: &Gateway, tool: &str) {
    let mut s = bare(gateway, KEY_A, LEGACY);
    s.handshake(json!({})).await.expect("initialize");
    wait_for(tool, Duration::from_secs(30), || async {
        let listed = s.rpc("tools/list", json!({})).await.exchange;
        listed.result()["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == tool))
            .cloned()
    })
    .await;
}

/// Polls `tasks/get` until the task is neither working nor (when `past_input`)
/// waiting for input: its last read.
async fn poll(c: &McpSession, id: &str, past_input: bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = modern(c, "tasks/get", json!({"taskId": id}))
            .await
            .result()
            .clone();
        let waiting =
            last["status"] == "working" || (past_input && last["status"] == "input_required");
        if !waiting {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

/// The one input request of a task read as `input_required`: its key and request.
fn the_request(task: &Value) -> (String, Value) {
    assert_eq!(task["status"], "input_required", "{task:#}");
    let requests = task["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{task:#}");
    let (key, request) = requests.iter().next().unwrap();
    (key.clone(), request.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_task_asks_its_owner_in_both_generations() {
    let deps = require!(NodeDeps::find());
    let gateway = gateway(&deps, "task-input-relay", None).await;
    wait_for_tool(&gateway, RESEARCH).await;

    // 2026-07-28: created, then input_required with the server's elicitation.
    let a = bare(&gateway, KEY_A, MODERN);
    let created = modern(
        &a,
        "tools/call",
        json!({"name": RESEARCH, "arguments": {"topic": "gateways", "ambiguous": true}}),
    )
    .await;
    assert_eq!(created.result()["resultType"], "task", "{created:#?}");
    let id = created.result()["taskId"].as_str().unwrap().to_owned();
    let asking = poll(&a, &id, false).await;
    let (key, request) = the_request(&asking);
    assert_eq!(request["method"], "elicitation/create", "{request:#}");
    assert!(
        request["params"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("gateways"),
        "{request:#}"
    );
    let choice =
        request["params"]["requestedSchema"]["properties"]["interpretation"]["oneOf"][0]["const"]
            .as_str()
            .expect("the server offers interpretations")
            .to_owned();
    let answer = json!({"action": "accept", "content": {"interpretation": choice}});

    // Another tenant's answer changes nothing: "no such task", still waiting.
    let b = bare(&gateway, KEY_B, MODERN);
    let stolen = modern(
        &b,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: {"action": "decline"}}}),
    )
    .await;
    assert_eq!(stolen.rpc_error()["code"], -32602, "{stolen:#?}");
    let still = modern(&a, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(still.result()["status"], "input_required", "{still:#?}");

    // The owner's answer (an unknown key beside it is ignored): the task goes on and
    // completes with the report of the chosen interpretation.
    let ack = modern(
        &a,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: answer, "no-such-key": {"action": "cancel"}}}),
    )
    .await;
    assert_eq!(ack.result(), &json!({"resultType": "complete"}), "{ack:#?}");
    let done = poll(&a, &id, true).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    let report = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(report.contains("# Research Report"), "{done:#}");
    assert!(
        report.contains(&choice),
        "the answer reached the server: {report}"
    );
    assert!(done.get("inputRequests").is_none(), "{done:#}");

    // 2025-11-25 (Python mcp 2.3): the elicitation arrives on tasks/result.
    let py = require!(python());
    let url = gateway.mcp_url();
    let out = tokio::task::spawn_blocking(move || {
        run_python(
            &py,
            "mcp_tasks.py",
            &[&url, KEY_A, "input", "everything"],
            Duration::from_secs(170),
        )
    })
    .await
    .unwrap();
    let seen: Vec<&str> = out["seen"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(seen.last(), Some(&"input_required"), "{out:#}");
    let asked = out["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "one elicitation: {out:#}");
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("python"),
        "{out:#}"
    );
    assert_eq!(asked[0]["related"]["taskId"], out["task_id"], "{out:#}");
    let report = out["result"][0].as_str().unwrap_or_default();
    assert!(report.contains("# Research Report"), "{out:#}");
    assert!(
        report.contains("Clarification") && !report.contains("unavailable"),
        "the session's answer reached the server: {report}"
    );
    assert_eq!(out["final"], "completed", "{out:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_hosted_task_asks_its_owner_through_tasks_update() {
    let deps = require!(NodeDeps::find());
    let gateway = gateway(&deps, "task-input-hosted", Some("optional")).await;
    wait_for_tool(&gateway, ELICIT).await;

    let a = bare(&gateway, KEY_A, MODERN);
    let created = modern(&a, "tools/call", json!({"name": ELICIT, "arguments": {}})).await;
    assert_eq!(created.result()["resultType"], "task", "{created:#?}");
    let id = created.result()["taskId"].as_str().unwrap().to_owned();
    let asking = poll(&a, &id, false).await;
    let (key, request) = the_request(&asking);
    assert_eq!(request["method"], "elicitation/create", "{request:#}");
    assert!(
        request["params"]["requestedSchema"]["properties"]["name"].is_object(),
        "{request:#}"
    );

    let b = bare(&gateway, KEY_B, MODERN);
    let stolen = modern(
        &b,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: {"action": "accept", "content": {"name": "Mallory"}}}}),
    )
    .await;
    assert_eq!(stolen.rpc_error()["code"], -32602, "{stolen:#?}");

    let ack = modern(
        &a,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: {"action": "accept", "content": {"name": "Ada Lovelace"}}}}),
    )
    .await;
    assert_eq!(ack.result(), &json!({"resultType": "complete"}), "{ack:#?}");
    let done = poll(&a, &id, true).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    let text = done["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("Ada Lovelace"), "{done:#}");
    assert!(!text.contains("Mallory"), "{done:#}");

    // A second answer to the same key, after the task ended: acknowledged, ignored.
    let late = modern(
        &a,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: {"action": "decline"}}}),
    )
    .await;
    assert_eq!(late.result()["resultType"], "complete", "{late:#?}");
}

/// Polls `GET status_url` until the task is neither working nor (when `past_input`)
/// waiting for input: its last read.
async fn rest_poll(gateway: &Gateway, status_url: &str, past_input: bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        let (status, body) = rest_get(gateway, status_url, Some(KEY_A)).await;
        assert_eq!(status, 200, "{body}");
        last = body;
        let waiting =
            last["status"] == "working" || (past_input && last["status"] == "input_required");
        if !waiting {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_background_call_is_answered_with_post_input() {
    let deps = require!(NodeDeps::find());
    let gateway = gateway(&deps, "task-input-rest", Some("optional")).await;
    wait_for_tool(&gateway, ELICIT).await;

    let (status, started) = rest_post(
        &gateway,
        &format!("/v1/tools/{ELICIT}/call"),
        Some(KEY_A),
        json!({"arguments": {}, "background": true}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let status_url = started["status_url"].as_str().unwrap().to_owned();
    let asking = rest_poll(&gateway, &status_url, false).await;
    assert_eq!(asking["status"], "input_required", "{asking:#}");
    let requests = asking["input_requests"]
        .as_object()
        .expect("input_requests");
    assert_eq!(requests.len(), 1, "{asking:#}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create", "{asking:#}");

    // Another tenant: the same 404 as for no task; nothing changes.
    let input_url = format!("/v1/tasks/{}/input", started["task_id"].as_str().unwrap());
    let (status, body) = rest_post(
        &gateway,
        &input_url,
        Some(KEY_B),
        json!({key: {"action": "accept", "content": {"name": "Mallory"}}}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) =
        rest_post(&gateway, &input_url, Some(KEY_A), json!(["not", "a map"])).await;
    assert_eq!(status, 400, "{body}");

    let (status, answered) = rest_post(
        &gateway,
        &input_url,
        Some(KEY_A),
        json!({key: {"action": "accept", "content": {"name": "Grace Hopper"}}}),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    assert_ne!(answered["status"], "input_required", "{answered:#}");
    let done = rest_poll(&gateway, &status_url, true).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    let text = done["result"].to_string();
    assert!(
        text.contains("Grace Hopper") && !text.contains("Mallory"),
        "{done:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_sent_to_another_replica_reaches_the_call() {
    let deps = require!(NodeDeps::find());
    let redis_url = require!(shared_redis().await);
    let prefix = unique_prefix("task-input");
    let config = |label: &str| {
        let mut upstream = everything_stdio_upstream(&deps, &unique_marker(label));
        upstream["background"] = json!("optional");
        json!({
            "startup_timeout": "60s",
            "state": {"backend": "redis", "url": redis_url, "key_prefix": prefix},
            "upstreams": {"everything": upstream},
            "tenants": {"a": {"api_keys": [hash_key(KEY_A)], "allow": ["everything__*"]}}
        })
    };
    let (a, b) = tokio::join!(
        Gateway::start(config("task-input-replica-a")),
        Gateway::start(config("task-input-replica-b"))
    );
    wait_for_tool(&a, ELICIT).await;

    let on_a = bare(&a, KEY_A, MODERN);
    let on_b = on_a.at(&b.mcp_url());
    let created = modern(
        &on_a,
        "tools/call",
        json!({"name": ELICIT, "arguments": {}}),
    )
    .await;
    let id = created.result()["taskId"].as_str().unwrap().to_owned();
    let (key, _) = the_request(&poll(&on_b, &id, false).await);
    let ack = modern(
        &on_b,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: {"action": "accept", "content": {"name": "Ada via B"}}}}),
    )
    .await;
    assert_eq!(ack.result()["resultType"], "complete", "{ack:#?}");
    let done = poll(&on_a, &id, true).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert!(done["result"].to_string().contains("Ada via B"), "{done:#}");
    delete_prefix(&redis_url, &prefix).await;
}
