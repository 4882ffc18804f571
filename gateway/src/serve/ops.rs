//! Operations endpoints: `GET /healthz` (liveness: the process answers, nothing else
//! is consulted — not Redis, not the upstreams), `GET /readyz` (config loaded, the
//! catalog built once every upstream answered or `startup_timeout` passed — the body
//! says which — and the shared state store answering when one is configured),
//! `GET /v1/upstreams` (status per upstream as JSON), `GET /metrics` (Prometheus text,
//! or OpenMetrics when asked for) and `GET /.well-known/oauth-protected-resource`
//! (RFC 9728: where MCP clients get a token).
//!
//! Who may see what: with no credentials configured at all (the quick start) every
//! endpoint is open. Otherwise `/v1/upstreams` needs a credential and shows a tenant
//! only the upstreams its policy reaches (the admin token sees all), and `/metrics`
//! needs the admin token or `metrics.token` — or is served only on `metrics.listen`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::auth::{FrontDoor, bearer_is_one_of};
use crate::gateway::Gateway;

/// The ops endpoints of the main listener (`/metrics` only when it has no listener
/// of its own).
pub fn router(door: Arc<FrontDoor>) -> Router {
    let separate_metrics = door.gateway.config().metrics.listen.is_some();
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/v1/upstreams", get(upstreams))
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource),
        );
    let router = if separate_metrics {
        router
    } else {
        router.route("/metrics", get(guarded_metrics))
    };
    router.with_state(door)
}

/// `/metrics` alone, for `metrics.listen`: whoever reaches that address may scrape.
pub fn metrics_router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(
                |State(gateway): State<Arc<Gateway>>, headers: HeaderMap| async move {
                    metrics(&gateway, &headers)
                },
            ),
        )
        .with_state(gateway)
}

/// Whether any credential is configured: tenants (API keys, JWT), the admin token or
/// a metrics token. Without one the gateway is the open quick start.
fn has_credentials(gateway: &Gateway) -> bool {
    let config = gateway.config();
    !gateway.policy().is_open() || config.admin.is_some() || config.metrics.token.is_some()
}

fn admin_token(gateway: &Gateway) -> Option<toolgate_adapters::Secret> {
    gateway.config().admin.as_ref().map(|a| a.token.clone())
}

async fn readyz(State(door): State<Arc<FrontDoor>>) -> Response {
    let (status, body) = readiness(&door.gateway).await;
    (status, Json(body)).into_response()
}

/// What `/readyz` answers: 200 and what startup did, or 503 and why not ready (the
/// console shows the same).
pub async fn readiness(gateway: &Gateway) -> (StatusCode, serde_json::Value) {
    let not_ready = |reason: String| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"ready": false, "reason": reason}),
        )
    };
    let Some(startup) = gateway.startup() else {
        let waiting_for = gateway.awaited_upstreams();
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({
                "ready": false,
                "reason": format!(
                    "waiting for every upstream's first answer (at most startup_timeout, {})",
                    humantime::format_duration(gateway.config().startup_timeout)
                ),
                "waiting_for": waiting_for,
            }),
        );
    };
    if let Err(reason) = gateway.shared_state_ready().await {
        return not_ready(reason.to_string());
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
    (
        StatusCode::OK,
        json!({
            "ready": true,
            "tools": gateway.catalog().len(),
            "startup": startup_ended,
            "unanswered_at_startup": startup.unanswered,
        }),
    )
}

async fn upstreams(State(door): State<Arc<FrontDoor>>, headers: HeaderMap) -> Response {
    let gateway = &door.gateway;
    let admin = admin_token(gateway);
    if gateway.policy().is_open() || bearer_is_one_of(&headers, &[admin.as_ref()]) {
        return Json(gateway.statuses()).into_response();
    }
    let caller = match door.admit(&headers).await {
        Ok(caller) => caller,
        Err(refused) => return refused.rest(),
    };
    Json(visible_statuses(gateway, &caller.tenant)).into_response()
}

/// The statuses of the upstreams `tenant` reaches: the policy decides what the tenant
/// reaches; an upstream it cannot use is as unknown to it as one that does not exist.
pub fn visible_statuses(
    gateway: &Gateway,
    tenant: &crate::policy::Tenant,
) -> Vec<crate::gateway::UpstreamStatus> {
    let statuses = gateway.statuses();
    let catalog = gateway.catalog();
    let allowed = gateway.policy().allowed(tenant, &catalog);
    statuses
        .into_iter()
        .filter(|status| allowed.reaches_upstream(&catalog, &status.name))
        .collect()
}

async fn guarded_metrics(State(door): State<Arc<FrontDoor>>, headers: HeaderMap) -> Response {
    let gateway = &door.gateway;
    if has_credentials(gateway) {
        let config = gateway.config();
        let tokens = [admin_token(gateway), config.metrics.token.clone()];
        let tokens: Vec<Option<&toolgate_adapters::Secret>> =
            tokens.iter().map(Option::as_ref).collect();
        if !bearer_is_one_of(&headers, &tokens) {
            let message = if tokens.iter().all(Option::is_none) {
                "/metrics needs a credential on a gateway with tenants: set `metrics.token` \
                 (or `admin.token`) in the gateway config and send it as `Authorization: \
                 Bearer <token>`, or serve metrics on their own address with `metrics.listen`"
            } else {
                "send `Authorization: Bearer <metrics.token or admin token>`"
            };
            let mut refused = (
                StatusCode::UNAUTHORIZED,
                Json(json!({"error": {"code": "unauthorized", "message": message}})),
            )
                .into_response();
            refused.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer realm=\"toolgate\""),
            );
            return refused;
        }
    }
    metrics(gateway, &headers)
}

/// The metrics in the format the scraper asked for: OpenMetrics when its `Accept`
/// names `application/openmetrics-text`, the classic Prometheus text otherwise.
fn metrics(gateway: &Gateway, headers: &HeaderMap) -> Response {
    // Refresh the health gauges at scrape time.
    let _ = gateway.statuses();
    let wants_openmetrics =
        crate::serve::mcp::wire::accept_lists(headers, &[crate::metrics::OPENMETRICS]);
    let (content_type, body) = if wants_openmetrics {
        (
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            gateway.metrics.render_openmetrics(),
        )
    } else {
        (
            "text/plain; version=0.0.4; charset=utf-8",
            gateway.metrics.render(),
        )
    };
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// RFC 9728 protected resource metadata: the gateway is the resource, the configured
/// JWT issuer its authorization server. 404 without a JWT issuer: then there is no
/// authorization server to send clients to.
async fn protected_resource(State(door): State<Arc<FrontDoor>>, headers: HeaderMap) -> Response {
    let config = door.gateway.config();
    let Some(issuer) = config.jwt.as_ref().and_then(|j| j.issuer.clone()) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": {
                "code": "not_found",
                "message": "this gateway names no authorization server (set `jwt.issuer` \
                            in the gateway config); ask its operator for an API key",
            }})),
        )
            .into_response();
    };
    let Some(resource) = super::auth::resource_url(&config, &headers) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {
                "code": "bad_host",
                "message": "send a Host header (or set `public_url` in the gateway config)",
            }})),
        )
            .into_response();
    };
    Json(json!({
        "resource": resource,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "toolgate",
    }))
    .into_response()
}
