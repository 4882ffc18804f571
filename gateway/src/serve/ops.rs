//! Operations endpoints: `GET /healthz` (liveness: the process answers, nothing else
//! is consulted — not Redis, not the upstreams), `GET /readyz` (config loaded, the
//! catalog built from every upstream's first answer, and the shared state store
//! answering when one is configured), `GET /v1/upstreams` (status per upstream as JSON) and
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
    if !gateway.is_ready() {
        return not_ready("waiting for the upstreams' first tool lists".into());
    }
    if let Err(reason) = gateway.shared_state_ready().await {
        return not_ready(reason);
    }
    Json(json!({"ready": true, "tools": gateway.catalog().len()})).into_response()
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
