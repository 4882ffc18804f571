//! Operations endpoints: `GET /healthz` (liveness: the process answers, nothing else
//! is consulted — not Redis, not the upstreams), `GET /readyz` (config loaded, the
//! catalog built once every upstream answered or `startup_timeout` passed — the body
//! says which — and the shared state store answering when one is configured), `GET /v1/upstreams` (status per upstream as JSON) and
//! `GET /metrics` (Prometheus text).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::gateway::Gateway;

pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/v1/upstreams", get(upstreams))
        .route("/metrics", get(metrics))
        .with_state(gateway)
}

async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let not_ready = |reason: String| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ready": false, "reason": reason})),
        )
            .into_response()
    };
    let Some(startup) = gateway.startup() else {
        let waiting_for = gateway.awaited_upstreams();
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "ready": false,
                "reason": format!(
                    "waiting for every upstream's first answer (at most startup_timeout, {})",
                    humantime::format_duration(gateway.config().startup_timeout)
                ),
                "waiting_for": waiting_for,
            })),
        )
            .into_response();
    };
    if let Err(reason) = gateway.shared_state_ready().await {
        return not_ready(reason);
    }
    let startup_ended = if startup.unanswered.is_empty() {
        "every upstream answered".to_owned()
    } else {
        format!(
            "startup_timeout ({}) passed before every upstream answered; the others join \
             the catalog when they connect",
            humantime::format_duration(startup.startup_timeout)
        )
    };
    Json(json!({
        "ready": true,
        "tools": gateway.catalog().len(),
        "startup": startup_ended,
        "unanswered_at_startup": startup.unanswered,
    }))
    .into_response()
}

async fn upstreams(State(gateway): State<Arc<Gateway>>) -> Response {
    Json(gateway.statuses()).into_response()
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> Response {
    // Refresh the health gauges at scrape time.
    let _ = gateway.statuses();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        gateway.metrics.render(),
    )
        .into_response()
}
