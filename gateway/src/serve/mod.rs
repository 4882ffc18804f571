//! Thin surfaces over the gateway core: MCP over streamable HTTP at `/mcp`, the ops
//! endpoints, the admin API, and MCP over stdio.

pub mod admin;
pub mod auth;
pub mod bridge;
pub mod fidelity;
pub mod mcp;
pub mod mcp_http;
pub mod mcp_shared;
pub mod ops;
mod passthrough;
pub mod protocol_errors;
pub mod rest;
pub mod stdio;

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::credentials::Authenticator;
use crate::gateway::Gateway;
use crate::registry::RegistrationStore;
use mcp::McpHandler;
use mcp_shared::McpShared;

/// The HTTP application: `/mcp` plus the ops endpoints.
pub fn router(
    gateway: Arc<Gateway>,
    store: Arc<dyn RegistrationStore>,
    authenticator: Authenticator,
    stop: CancellationToken,
) -> Router {
    let door = Arc::new(auth::FrontDoor {
        gateway: gateway.clone(),
        authenticator,
    });
    let shared = McpShared::new(gateway.clone());
    let sessions = mcp_http::McpSessions::new(shared.clone(), stop.clone());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(gateway.config().allowed_hosts.clone())
        .with_max_request_body_bytes(gateway.config().max_request_body_bytes)
        .with_cancellation_token(stop);
    let config = if gateway.config().allowed_hosts.is_empty() {
        config.disable_allowed_hosts()
    } else {
        config
    };
    // rmcp's transport only answers the sessionless (2026-07-28) requests that
    // `mcp_http` does not take (every method but a well-formed `tools/call`), and the
    // errors for requests that are neither sessionless nor a session's.
    let service = StreamableHttpService::new(
        move || Ok(McpHandler::new(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let front = Arc::new(McpFront {
        door: door.clone(),
        sessions,
        gateway: gateway.clone(),
        max_body: gateway.config().max_request_body_bytes,
    });
    let mcp = Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(front, mcp_front));
    ops::router(gateway.clone())
        .merge(admin::router(gateway, store))
        .merge(rest::router(door))
        .merge(mcp)
}

/// What the `/mcp` front middleware needs.
struct McpFront {
    door: Arc<auth::FrontDoor>,
    sessions: mcp_http::McpSessions,
    gateway: Arc<Gateway>,
    max_body: usize,
}

/// Everything `/mcp` does, in one middleware (each `from_fn` layer clones the whole
/// service below it per request): refuse oversized bodies, admit the caller and check
/// its session, answer session requests directly ([`mcp_http`]) and hand the rest to
/// rmcp, restoring the raw tool definitions in its answers, and make any error a
/// JSON-RPC error.
async fn mcp_front(
    axum::extract::State(front): axum::extract::State<Arc<McpFront>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if let Some(refused) = protocol_errors::refuse_oversized(request.headers(), front.max_body) {
        return refused;
    }
    let response = match auth::admit_mcp(&front.door, &mut request).await {
        Err(refused) => refused,
        Ok(admitted) => match front.sessions.route(request, admitted).await {
            mcp_http::Routed::Answered(response) => response,
            mcp_http::Routed::Rmcp(request) => {
                let response = next.run(request).await;
                fidelity::restore_raw_definitions(&front.gateway, response).await
            }
        },
    };
    protocol_errors::as_jsonrpc_error(response).await
}
