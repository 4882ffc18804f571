//! Background tasks across replicas: two gateway processes on 127.0.0.1 sharing one
//! Redis. A task created on A is polled and its result fetched on B; another tenant
//! gets 404 for it on both; A is killed mid-task and B reports the task `failed`, with
//! the reason, within the lease (plus one reaper pass).
//!
//! The shared Redis comes from `REDIS_URL` (default `redis://127.0.0.1:6379`); each run
//! uses its own key prefix and removes its keys at the end.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_e2e::redis::{delete_prefix, shared_redis, unique_prefix};
use toolgate_e2e::{Gateway, SlowApi, hash_key, heavy_lock, http, require, wait_for};

const KEY: &str = "tasks-scale-out-key-0123456789";
const OTHER_KEY: &str = "tasks-scale-out-other-0123456789";
/// Short, so the test sees a dead replica's task fail quickly.
const LEASE: Duration = Duration::from_secs(2);

fn replica_config(api: &SlowApi, redis_url: &str, prefix: &str) -> Value {
    json!({
        "state": {
            "backend": "redis",
            "url": redis_url,
            "key_prefix": prefix,
            "replicas": 2,
            "command_timeout": "500ms",
            "connect_timeout": "500ms",
        },
        "tasks": {"lease": format!("{}s", LEASE.as_secs()), "call_timeout": "5m"},
        "tenants": {
            "t": {"api_keys": [hash_key(KEY)], "allow": ["slow__*"]},
            "other": {"api_keys": [hash_key(OTHER_KEY)], "allow": ["slow__*"]},
        },
        "upstreams": {"slow": {"openapi": {
            "spec_url": api.spec_url(),
            "allow_private_networks": true
        }}}
    })
}

/// Starts `slow__sleep` as a background call on `gateway`; answers the task id.
async fn start_sleep(gateway: &Gateway, ms: u64) -> String {
    let response = http()
        .post(gateway.url("/v1/tools/slow__sleep/call"))
        .bearer_auth(KEY)
        .json(&json!({"arguments": {"ms": ms}, "background": true}))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("POST a background call");
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 202, "{body}");
    body["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {body}"))
        .to_owned()
}

async fn task_status(gateway: &Gateway, key: &str, id: &str) -> (u16, Value) {
    let response = http()
        .get(gateway.url(&format!("/v1/tasks/{id}")))
        .bearer_auth(key)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("GET the task");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Polls `id` on `gateway` until it is no longer running (bounded by `max`).
async fn ended(gateway: &Gateway, id: &str, max: Duration) -> Value {
    wait_for("the task to end", max, || async {
        let (status, task) = task_status(gateway, KEY, id).await;
        assert_eq!(status, 200, "{task}");
        let running = matches!(task["status"].as_str(), Some("working" | "input_required"));
        (!running).then_some(task)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_answered_by_every_replica_and_fails_when_its_replica_dies() {
    let redis_url = require!(shared_redis().await);
    let _serial = heavy_lock().await;
    let api = SlowApi::start().await;
    let prefix = unique_prefix("tasks-scale-out");
    let config = replica_config(&api, &redis_url, &prefix);
    let mut a = Gateway::start(config.clone()).await;
    let b = Gateway::start(config).await;

    // Created on A, polled and fetched on B.
    let id = start_sleep(&a, 1500).await;
    let (status, seen) = task_status(&b, KEY, &id).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["status"], "working", "{seen}");
    let done = ended(&b, &id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(done.to_string().contains("slept_ms"), "{done}");
    // Another tenant: the same 404 as an id that never existed, on both replicas.
    for replica in [&a, &b] {
        let (theirs, body) = task_status(replica, OTHER_KEY, &id).await;
        let (never, never_body) = task_status(replica, OTHER_KEY, "AAAAAAAAAAAAAAAAAAAAAA").await;
        assert_eq!((theirs, never), (404, 404), "{body} / {never_body}");
        assert_eq!(
            body.to_string().replace(&id, "ID"),
            never_body
                .to_string()
                .replace("AAAAAAAAAAAAAAAAAAAAAA", "ID")
        );
    }

    // A dies mid-task: B reports it failed, with the reason, within the lease.
    let id = start_sleep(&a, 60_000).await;
    let (_, seen) = task_status(&b, KEY, &id).await;
    assert_eq!(seen["status"], "working", "{seen}");
    a.assert_alive();
    drop(a);
    let killed = Instant::now();
    let done = ended(&b, &id, Duration::from_secs(30)).await;
    let noticed = killed.elapsed();
    assert_eq!(done["status"], "failed", "{done}");
    let reason = done.to_string();
    assert!(reason.contains("lease expired"), "{done}");
    // The lease, one renewal period of the dead replica, one reaper pass and the
    // poll: well inside three leases plus three seconds.
    assert!(
        noticed < LEASE * 3 + Duration::from_secs(3),
        "failed only after {noticed:?}"
    );
    eprintln!("a dead replica's task was reported failed {noticed:?} after the kill");

    delete_prefix(&redis_url, &prefix).await;
}
