//! Session quotas (a table of 4, 2 per tenant): a full session table, or a tenant at `sessions.max_per_tenant`,
//! refuses a new session (503, `Retry-After`, a body that says which limit) on `/mcp`
//! and `POST /v1/sessions` — it never evicts another tenant's idle session. Run on the
//! memory store and on Redis (skipped with a notice when no Redis answers, except
//! under `CI=true`).

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::redis::{RedisServer, delete_prefix, shared_redis, unique_prefix};
use toolgate_e2e::{Gateway, McpSession, hash_key, http, rest_get, rest_post, wait_for};

const KEY_A: &str = "tg-quota-key-a-0123456789abcdef";
const KEY_B: &str = "tg-quota-key-b-0123456789abcdef";
const KEY_C: &str = "tg-quota-key-c-0123456789abcdef";

fn config(state: Value) -> Value {
    json!({
        "upstreams": {},
        "sessions": {"max_sessions": 4, "max_per_tenant": 2, "idle_ttl": "5m"},
        "state": state,
        "tenants": {
            "a": {"api_keys": [hash_key(KEY_A)], "allow": ["*"]},
            "b": {"api_keys": [hash_key(KEY_B)], "allow": ["*"]},
            "c": {"api_keys": [hash_key(KEY_C)], "allow": ["*"]},
        }
    })
}

/// A raw `initialize` as the tenant of `key`: status, `Retry-After`, session id, body.
async fn initialize(gateway: &Gateway, key: &str) -> (u16, Option<u64>, Option<String>, Value) {
    let response = http()
        .post(gateway.mcp_url())
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "toolgate-e2e-quotas", "version": "0.1.0"}
            }
        }))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("POST /mcp");
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after = header("retry-after").and_then(|v| v.parse().ok());
    let session = header("mcp-session-id");
    let body = response.json().await.unwrap_or(Value::Null);
    (status, retry_after, session, body)
}

/// Asserts a refusal: 503, a retry hint within the idle TTL, a JSON-RPC error naming
/// `limit`.
fn assert_refused(
    (status, retry_after, session, body): &(u16, Option<u64>, Option<String>, Value),
    limit: &str,
) {
    assert_eq!(*status, 503, "{body}");
    assert!(session.is_none(), "no session id on a refusal");
    let seconds = retry_after.unwrap_or_else(|| panic!("no Retry-After: {body}"));
    assert!(
        (1..=300).contains(&seconds),
        "Retry-After {seconds} (idle_ttl 5m)"
    );
    assert_eq!(body["error"]["data"]["code"], "sessions_full", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(limit), "{message}");
}

async fn quotas_hold(gateway: &Gateway) {
    // b starts one session and leaves it idle.
    let (status, _, b_idle, body) = initialize(gateway, KEY_B).await;
    assert_eq!(status, 200, "{body}");
    let b_idle = b_idle.expect("a session id");

    // a fills its quota of 2; its third is refused, on /mcp and on REST.
    for _ in 0..2 {
        let (status, _, _, body) = initialize(gateway, KEY_A).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_refused(&initialize(gateway, KEY_A).await, "max_per_tenant");
    let response = http()
        .post(gateway.url("/v1/sessions"))
        .bearer_auth(KEY_A)
        .json(&json!({}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("POST /v1/sessions");
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(body["error"]["code"], "sessions_full", "{body}");

    // b still gets a session (4 of 4: the table is now full) ...
    let (status, _, _, body) = initialize(gateway, KEY_B).await;
    assert_eq!(status, 200, "b is under its quota: {body}");
    // ... and then nobody does, not even a tenant with none yet: a full table
    // refuses rather than evicts.
    assert_refused(&initialize(gateway, KEY_C).await, "max_sessions");
    let (status, body) = rest_post(gateway, "/v1/sessions", Some(KEY_C), json!({})).await;
    assert_eq!(status, 503, "{body}");

    // b's idle session survived every one of a's initializes.
    let mut idle = McpSession::bare(&gateway.mcp_url()).with_bearer(KEY_B);
    idle.session_id = Some(b_idle);
    idle.list_tools()
        .await
        .expect("b's idle session was not evicted");
}

#[tokio::test]
async fn a_full_table_refuses_new_sessions_and_never_evicts_memory() {
    let gateway = Gateway::start(config(json!({"backend": "memory"}))).await;
    quotas_hold(&gateway).await;
}

#[tokio::test]
async fn a_full_table_refuses_new_sessions_and_never_evicts_redis() {
    let Some(url) = shared_redis().await else {
        return;
    };
    let prefix = unique_prefix("quotas");
    let gateway = Gateway::start(config(
        json!({"backend": "redis", "url": url, "key_prefix": prefix}),
    ))
    .await;
    quotas_hold(&gateway).await;
    drop(gateway);
    delete_prefix(&url, &prefix).await;
}

/// While Redis is down, the REST session endpoints answer like `/mcp`: 503 with a
/// `Retry-After` and `state_unavailable`, never "not found".
#[tokio::test]
async fn rest_sessions_while_redis_is_down_carry_a_retry_hint() {
    let Some(mut redis) = RedisServer::start().await else {
        return;
    };
    let gateway = Gateway::start(config(json!({
        "backend": "redis", "url": redis.url(), "key_prefix": unique_prefix("down"),
        "command_timeout": "300ms", "connect_timeout": "300ms"
    })))
    .await;
    let (status, body) = rest_post(&gateway, "/v1/sessions", Some(KEY_A), json!({})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let (status, body) = rest_get(&gateway, &format!("/v1/sessions/{id}/tools"), Some(KEY_A)).await;
    assert_eq!(status, 200, "{body}");

    redis.stop();
    let session_tools = format!("/v1/sessions/{id}/tools");
    let requests = [
        http().post(gateway.url("/v1/sessions")).json(&json!({})),
        http().get(gateway.url(&session_tools)),
        http()
            .post(gateway.url(&format!("/v1/sessions/{id}/tools/expand")))
            .json(&json!({"tool_names": []})),
    ];
    for request in requests {
        let request = request.bearer_auth(KEY_A).timeout(Duration::from_secs(30));
        let response = wait_for("503 while Redis is down", Duration::from_secs(15), || {
            let request = request.try_clone().expect("a plain request");
            async move {
                let response = request.send().await.ok()?;
                (response.status().as_u16() == 503).then_some(response)
            }
        })
        .await;
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        assert!(retry_after.is_some_and(|s| s >= 1), "{response:?}");
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert_eq!(body["error"]["code"], "state_unavailable", "{body}");
    }
}
