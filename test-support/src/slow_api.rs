//! An HTTP API on 127.0.0.1 whose calls take as long as asked: background calls and
//! timeouts are tested against it. Its OpenAPI document is at `/openapi.json`:
//!
//! - `sleep` and `sleep_only_task` (`GET /sleep`, `GET /sleep-only-task`, query `ms`):
//!   answer `{"slept_ms": ms}` after `ms` milliseconds (at most ten minutes);
//! - `ping` (`GET /ping`): answers at once;
//! - `big` (`GET /big`): a 20 KB answer.
//!
//! It counts the requests dropped before they were answered (a cancelled call's).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::Query;
use axum::routing::get;
use serde_json::{Value, json};

/// The running API; stops when dropped.
pub struct SlowApi {
    pub base: String,
    abandoned: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SlowApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts a handler dropped before it finished.
struct Unfinished(Arc<AtomicUsize>, bool);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl SlowApi {
    pub async fn start() -> SlowApi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let abandoned = Arc::new(AtomicUsize::new(0));
        let spec = spec(&base);
        let counter = abandoned.clone();
        let sleep = move |Query(query): Query<HashMap<String, String>>| {
            let counter = counter.clone();
            let ms: u64 = query.get("ms").and_then(|ms| ms.parse().ok()).unwrap_or(0);
            async move {
                let mut guard = Unfinished(counter, false);
                tokio::time::sleep(Duration::from_millis(ms.min(600_000))).await;
                guard.1 = true;
                axum::Json(json!({"slept_ms": ms}))
            }
        };
        let app = Router::new()
            .route(
                "/openapi.json",
                get(move || async move { axum::Json(spec) }),
            )
            .route("/sleep", get(sleep.clone()))
            .route("/sleep-only-task", get(sleep))
            .route("/ping", get(|| async { axum::Json(json!({"pong": true})) }))
            .route(
                "/big",
                get(|| async { axum::Json(json!({"data": "x".repeat(20_000)})) }),
            );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SlowApi {
            base,
            abandoned,
            task,
        }
    }

    /// The OpenAPI document's URL.
    pub fn spec_url(&self) -> String {
        format!("{}/openapi.json", self.base)
    }

    /// Requests dropped before they were answered.
    pub fn abandoned(&self) -> usize {
        self.abandoned.load(Ordering::SeqCst)
    }
}

fn spec(base: &str) -> Value {
    let sleep = |id: &str| {
        json!({"get": {"operationId": id, "parameters": [
            {"name": "ms", "in": "query", "required": true, "schema": {"type": "integer"}}
        ], "responses": {"200": {"description": "ok"}}}})
    };
    json!({
        "openapi": "3.0.3",
        "info": {"title": "slow", "version": "1"},
        "servers": [{"url": base}],
        "paths": {
            "/sleep": sleep("sleep"),
            "/sleep-only-task": sleep("sleep_only_task"),
            "/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}},
            "/big": {"get": {"operationId": "big", "responses": {"200": {"description": "ok"}}}},
        }
    })
}
