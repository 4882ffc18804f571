//! Scale-out: two gateway processes on 127.0.0.1 sharing one Redis behave as one
//! gateway, with no sticky routing. A session created and expanded on replica A is
//! listed and called on B; overlapping expansions from A and B give the union; a
//! tenant limit of 20 holds across both; a registration made on A appears on B (and
//! goes away likewise); A is killed and its session goes on through B. With a
//! private Redis that the test stops: readiness fails, the fail-open and fail-closed
//! policies apply, and everything recovers when Redis is back, without a restart.
//!
//! The shared Redis comes from `REDIS_URL` (default `redis://127.0.0.1:6379`); each
//! run uses its own key prefix and removes its keys at the end.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, Query};
use axum::routing::get;
use serde_json::{Value, json};
use toolgate_e2e::redis::{RedisServer, delete_prefix, shared_redis, unique_prefix};
use toolgate_e2e::{
    Gateway, McpSession, RpcExchange, RpcExchangeWithHeaders, hash_key, heavy_lock, http, require,
    wait_for,
};

const KEY: &str = "scale-out-tenant-key-0123456789";
const OTHER_KEY: &str = "scale-out-other-key-0123456789";
const LIMITED_KEY: &str = "scale-out-limited-key-0123456789";
const OPEN_KEY: &str = "scale-out-open-key-0123456789";
const ADMIN_TOKEN: &str = "scale-out-admin-token-0123456789";

/// A small HTTP API with its OpenAPI documents: `/openapi.json` (echo, add, t0..t4)
/// and `/pets.json` (listPets), served on a free loopback port.
struct Api {
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Api {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn get_op(id: &str, params: &[(&str, &str)]) -> Value {
    let parameters: Vec<Value> = params
        .iter()
        .map(|(name, kind)| {
            json!({"name": name, "in": "query", "required": true, "schema": {"type": kind}})
        })
        .collect();
    json!({"get": {
        "operationId": id,
        "summary": format!("The {id} operation"),
        "parameters": parameters,
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}
    }})
}

impl Api {
    async fn start() -> Api {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind API");
        let addr: SocketAddr = listener.local_addr().expect("API address");
        let base = format!("http://{addr}");
        let mut paths = serde_json::Map::new();
        paths.insert("/echo".into(), get_op("echo", &[("message", "string")]));
        paths.insert(
            "/add".into(),
            get_op("add", &[("a", "integer"), ("b", "integer")]),
        );
        for n in 0..5 {
            paths.insert(format!("/t{n}"), get_op(&format!("t{n}"), &[]));
        }
        let api_spec = json!({
            "openapi": "3.0.3",
            "info": {"title": "scale-out API", "version": "1"},
            "servers": [{"url": base}],
            "paths": paths,
        });
        let pets_spec = json!({
            "openapi": "3.0.3",
            "info": {"title": "pets", "version": "1"},
            "servers": [{"url": base}],
            "paths": {"/pets": get_op("listPets", &[])},
        });
        let app = axum::Router::new()
            .route(
                "/openapi.json",
                get(move || {
                    let spec = api_spec.clone();
                    async move { Json(spec) }
                }),
            )
            .route(
                "/pets.json",
                get(move || {
                    let spec = pets_spec.clone();
                    async move { Json(spec) }
                }),
            )
            .route(
                "/echo",
                get(
                    |Query(q): Query<std::collections::HashMap<String, String>>| async move {
                        Json(json!({"echo": q.get("message")}))
                    },
                ),
            )
            .route(
                "/add",
                get(
                    |Query(q): Query<std::collections::HashMap<String, i64>>| async move {
                        Json(json!({"sum": q.get("a").unwrap_or(&0) + q.get("b").unwrap_or(&0)}))
                    },
                ),
            )
            .route("/pets", get(|| async { Json(json!({"pets": ["rex"]})) }))
            .route(
                "/{t}",
                get(|Path(t): Path<String>| async move { Json(json!({"tool": t})) }),
            );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Api { base, task }
    }
}

/// The config both replicas run: Redis state under `prefix`, three tenants, the API.
fn replica_config(api: &Api, redis_url: &str, prefix: &str, state: Value) -> Value {
    let mut state_config = json!({
        "backend": "redis",
        "url": redis_url,
        "key_prefix": prefix,
        "replicas": 2,
        "command_timeout": "500ms",
        "connect_timeout": "500ms",
    });
    if let (Some(target), Some(extra)) = (state_config.as_object_mut(), state.as_object()) {
        target.extend(extra.clone());
    }
    json!({
        "state": state_config,
        "admin": {"token": ADMIN_TOKEN},
        "tenants": {
            "t": {"api_keys": [hash_key(KEY)], "allow": ["api__*", "pets__*"], "initial": ["api__echo"]},
            "other": {"api_keys": [hash_key(OTHER_KEY)], "allow": ["api__*"]},
            "open": {"api_keys": [hash_key(OPEN_KEY)], "allow": ["api__*"]},
            "limited": {
                "api_keys": [hash_key(LIMITED_KEY)],
                "allow": ["api__*"],
                "rate_limit": {"per_hour": 20, "burst": 20}
            }
        },
        "upstreams": {"api": {"openapi": {
            "spec_url": format!("{}/openapi.json", api.base),
            "allow_private_networks": true
        }}}
    })
}

/// One MCP 2025-11-25 session, pointed at any replica: the shared raw client, each
/// answer read to its end (bounded: 30 s).
struct Conn;

impl Conn {
    async fn legacy(url: &str, key: &str) -> McpSession {
        let mut conn = McpSession::bare(url)
            .with_bearer(key)
            .with_client_name("toolgate-e2e-scale-out")
            .with_timeout(Duration::from_secs(30))
            .reading_to_end();
        let (init, initialized) = conn
            .handshake(json!({}))
            .await
            .unwrap_or_else(|e| panic!("initialize: {e:#}"));
        assert_eq!(init.status, 200, "initialize: {init:#?}");
        assert!(conn.session_id.is_some(), "Mcp-Session-Id: {init:#?}");
        let status = initialized.expect("initialized sent after a result");
        assert!((200..300).contains(&status), "initialized: {status}");
        conn
    }
}

/// The calls of this test, on the shared client.
trait ReplicaCalls {
    async fn list(&self) -> BTreeSet<String>;
    async fn call(&self, name: &str, arguments: Value) -> RpcExchangeWithHeaders;
    async fn expand(&self, names: &[&str]) -> Value;
}

impl ReplicaCalls for McpSession {
    async fn list(&self) -> BTreeSet<String> {
        let reply = self.rpc("tools/list", json!({})).await;
        assert_eq!(reply.status, 200, "tools/list at {}: {reply:#?}", self.url);
        reply.result()["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| !n.starts_with("tool_"))
            .map(str::to_owned)
            .collect()
    }

    async fn call(&self, name: &str, arguments: Value) -> RpcExchangeWithHeaders {
        self.rpc("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// `tool_expand_tools`; returns its structured result.
    async fn expand(&self, names: &[&str]) -> Value {
        let reply = self
            .call("tool_expand_tools", json!({"tool_names": names}))
            .await;
        assert_eq!(reply.status, 200, "expand: {reply:#?}");
        reply.result()["structuredContent"].clone()
    }
}

fn text_of(reply: &RpcExchange) -> String {
    let result = reply.result();
    assert_ne!(result["isError"], json!(true), "tool error: {reply:#?}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

async fn get_status(url: &str, key: Option<&str>) -> (u16, Value) {
    let mut rb = http().get(url).timeout(Duration::from_secs(10));
    if let Some(key) = key {
        rb = rb.bearer_auth(key);
    }
    let response = rb.send().await.expect("GET");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn upstream_names(gateway: &Gateway) -> Vec<(String, u64)> {
    gateway
        .upstreams()
        .await
        .as_array()
        .expect("upstreams")
        .iter()
        .map(|u| {
            (
                u["name"].as_str().unwrap_or_default().to_owned(),
                u["tools"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_sessions_limits_and_registrations() {
    let redis_url = require!(shared_redis().await);
    let _serial = heavy_lock().await;
    let api = Api::start().await;
    let prefix = unique_prefix("scale-out");
    let config = replica_config(&api, &redis_url, &prefix, json!({}));
    let mut a = Gateway::start(config.clone()).await;
    let b = Gateway::start(config).await;

    // A session created and expanded on A is listed and called on B.
    let on_a = Conn::legacy(&a.mcp_url(), KEY).await;
    assert_eq!(on_a.list().await, names(&["api__echo"]));
    let expanded = on_a.expand(&["api__add"]).await;
    assert_eq!(
        expanded["expanded_tools"],
        json!(["api__add"]),
        "{expanded}"
    );
    let on_b = on_a.at(&b.mcp_url());
    assert_eq!(on_b.list().await, names(&["api__add", "api__echo"]));
    let sum = on_b.call("api__add", json!({"a": 2, "b": 3})).await;
    assert!(text_of(&sum).contains('5'), "{sum:#?}");
    // The session stays its tenant's on every replica.
    let stolen = on_b
        .with_key(Some(OTHER_KEY))
        .rpc("tools/list", json!({}))
        .await;
    assert_eq!(stolen.status, 404, "another tenant on B: {stolen:#?}");

    // REST sessions are shared too.
    let created = http()
        .post(a.url("/v1/sessions"))
        .bearer_auth(KEY)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("POST /v1/sessions");
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.expect("session JSON");
    let id = created["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    let expand = http()
        .post(b.url(&format!("/v1/sessions/{id}/tools/expand")))
        .bearer_auth(KEY)
        .json(&json!({"tool_names": ["api__t1"]}))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("expand on B");
    assert_eq!(expand.status(), 200);
    let (status, tools) = get_status(&a.url(&format!("/v1/sessions/{id}/tools")), Some(KEY)).await;
    assert_eq!(status, 200, "{tools}");
    assert!(tools.to_string().contains("api__t1"), "{tools}");

    // Concurrent overlapping expansions from A and B give the union, each name added
    // by exactly one of them.
    let session = Conn::legacy(&a.mcp_url(), KEY).await;
    let replicas = [session.clone(), session.at(&b.mcp_url())];
    let mut tasks = Vec::new();
    for i in 0..10 {
        let conn = replicas[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            let names = [format!("api__t{}", i % 5), format!("api__t{}", (i + 1) % 5)];
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            conn.expand(&refs).await
        }));
    }
    let mut added = Vec::new();
    for task in tasks {
        let result = task.await.expect("expansion task");
        assert_eq!(result["success"], json!(true), "{result}");
        for name in result["expanded_tools"].as_array().expect("expanded_tools") {
            added.push(name.as_str().unwrap_or_default().to_owned());
        }
    }
    added.sort();
    assert_eq!(
        added,
        ["api__t0", "api__t1", "api__t2", "api__t3", "api__t4"],
        "each name newly added exactly once"
    );
    let union = names(&[
        "api__echo",
        "api__t0",
        "api__t1",
        "api__t2",
        "api__t3",
        "api__t4",
    ]);
    assert_eq!(replicas[0].list().await, union);
    assert_eq!(replicas[1].list().await, union);

    // A limit of 20 per hour holds across both replicas: exactly 20 of 40 pass.
    let mut allowed = 0;
    let mut refused = 0;
    for i in 0..40 {
        let replica = if i % 2 == 0 { &a } else { &b };
        let response = http()
            .get(replica.url("/v1/tools?format=openai"))
            .bearer_auth(LIMITED_KEY)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .expect("GET /v1/tools");
        match response.status().as_u16() {
            200 => allowed += 1,
            429 => {
                let retry_after: u64 = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .expect("Retry-After");
                assert!(retry_after > 60, "Retry-After {retry_after}");
                refused += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!((allowed, refused), (20, 20));

    // A registration made through A's admin API appears on B, and goes away likewise.
    let registered = http()
        .post(a.url("/admin/upstreams"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "pets", "openapi": {
            "spec_url": format!("{}/pets.json", api.base),
            "allow_private_networks": true
        }}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("POST /admin/upstreams");
    assert_eq!(registered.status(), 201, "{:?}", registered.text().await);
    let since = Instant::now();
    wait_for("pets imported on B", Duration::from_secs(10), || async {
        upstream_names(&b)
            .await
            .contains(&("pets".to_owned(), 1))
            .then_some(())
    })
    .await;
    let took = since.elapsed();
    eprintln!("registration reached B in {took:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    let pets = Conn::legacy(&b.mcp_url(), KEY).await;
    pets.expand(&["pets__listPets"]).await;
    let listed = pets.call("pets__listPets", json!({})).await;
    assert!(text_of(&listed).contains("rex"), "{listed:#?}");
    let (status, admin_list) = {
        let r = http()
            .get(b.url("/admin/upstreams"))
            .bearer_auth(ADMIN_TOKEN)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .expect("GET /admin/upstreams");
        (
            r.status().as_u16(),
            r.json::<Value>().await.unwrap_or_default(),
        )
    };
    assert_eq!(status, 200);
    assert!(
        admin_list["upstreams"]
            .as_array()
            .expect("upstreams")
            .iter()
            .any(|u| u["name"] == "pets" && u["origin"] == "admin"),
        "{admin_list}"
    );
    let removed = http()
        .delete(a.url("/admin/upstreams/pets"))
        .bearer_auth(ADMIN_TOKEN)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("DELETE");
    assert_eq!(removed.status(), 204);
    let since = Instant::now();
    wait_for("pets removed on B", Duration::from_secs(10), || async {
        (!upstream_names(&b).await.iter().any(|(n, _)| n == "pets")).then_some(())
    })
    .await;
    assert!(
        since.elapsed() < Duration::from_secs(3),
        "{:?}",
        since.elapsed()
    );

    // A is killed; a session it created (and B never saw) goes on through B.
    let survivor = Conn::legacy(&a.mcp_url(), KEY).await;
    survivor.expand(&["api__t3"]).await;
    a.assert_alive();
    drop(a);
    let on_b = survivor.at(&b.mcp_url());
    assert_eq!(on_b.list().await, names(&["api__echo", "api__t3"]));
    let answer = on_b.call("api__t3", json!({})).await;
    assert!(text_of(&answer).contains("t3"), "{answer:#?}");
    let echo = on_b
        .call("api__echo", json!({"message": "still here"}))
        .await;
    assert!(text_of(&echo).contains("still here"), "{echo:#?}");

    delete_prefix(&redis_url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_fails_readiness_applies_the_policy_and_recovers() {
    let mut redis = require!(RedisServer::start().await);
    let _serial = heavy_lock().await;
    let api = Api::start().await;
    let prefix = unique_prefix("outage");
    let a = Gateway::start(replica_config(
        &api,
        &redis.url(),
        &prefix,
        json!({"on_unavailable": "fail_open"}),
    ))
    .await;
    let b = Gateway::start(replica_config(
        &api,
        &redis.url(),
        &prefix,
        json!({"on_unavailable": "fail_closed"}),
    ))
    .await;
    let session = Conn::legacy(&a.mcp_url(), KEY).await;
    session.expand(&["api__add"]).await;

    redis.stop();
    for replica in [&a, &b] {
        let (status, body) = wait_for(
            "readiness failing while Redis is down",
            Duration::from_secs(10),
            || async {
                let (status, body) = get_status(&replica.url("/readyz"), None).await;
                (status == 503).then_some((status, body))
            },
        )
        .await;
        assert_eq!(status, 503);
        let reason = body["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!("Redis at 127.0.0.1:{}", redis.port)),
            "{body}"
        );
        let (live, _) = get_status(&replica.url("/healthz"), None).await;
        assert_eq!(live, 200, "liveness never depends on Redis");
    }

    // Fail-open (A): the local share of the limit, 20 / 2 replicas = 10.
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let (status, _) = get_status(&a.url("/v1/tools?format=openai"), Some(LIMITED_KEY)).await;
        statuses.push(status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        10,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        2,
        "{statuses:?}"
    );

    // Fail-closed (B): rate-limited tenants are refused with a reason; others pass.
    let (status, body) = get_status(&b.url("/v1/tools?format=openai"), Some(LIMITED_KEY)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "state_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("fail_closed"), "{body}");
    let (status, _) = get_status(&b.url("/v1/tools?format=openai"), Some(OPEN_KEY)).await;
    assert_eq!(status, 200, "a tenant without a limit needs no Redis");

    // A session cannot be read meanwhile: 503 with a retry hint, never "not found".
    let during = session.at(&b.mcp_url()).rpc("tools/list", json!({})).await;
    assert_eq!(during.status, 503, "{during:#?}");
    assert!(during.body.contains("retry"), "{during:#?}");

    // Redis back (empty: it kept nothing): both replicas recover without a restart.
    redis.restart().await;
    for replica in [&a, &b] {
        wait_for(
            "readiness back after Redis returned",
            Duration::from_secs(15),
            || async { (get_status(&replica.url("/readyz"), None).await.0 == 200).then_some(()) },
        )
        .await;
    }
    let (status, body) = get_status(&b.url("/v1/tools?format=openai"), Some(LIMITED_KEY)).await;
    assert_eq!(status, 200, "{body}");
    let fresh = Conn::legacy(&a.mcp_url(), KEY).await;
    fresh.expand(&["api__add"]).await;
    let on_b = fresh.at(&b.mcp_url());
    assert_eq!(on_b.list().await, names(&["api__add", "api__echo"]));
    let sum = on_b.call("api__add", json!({"a": 20, "b": 22})).await;
    assert!(text_of(&sum).contains("42"), "{sum:#?}");
}
