//! Thin surfaces over the gateway core: MCP over streamable HTTP at `/mcp` and over
//! stdio (one implementation, [`mcp_http`], for both), the ops endpoints, the admin
//! API and the plain-HTTP function surface.
//!
//! Every HTTP request passes the [`guard`] first (Host, Origin, CORS, JSON bodies)
//! and is served by the [`listener`] (timeouts, connection cap). The web [`console`]
//! at `/console` reads the same data through the same functions.

pub mod admin;
pub mod auth;
pub mod bridge;
pub mod console;
pub mod features;
pub mod guard;
pub mod listener;
pub mod mcp_http;
pub mod ops;
pub mod protocol_errors;
pub mod rest;
pub mod stdio;

use std::sync::Arc;

use axum::Router;
use axum::routing::any;
use tokio_util::sync::CancellationToken;

use crate::credentials::Authenticator;
use crate::gateway::Gateway;
use crate::registry::RegistrationStore;

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
    let front = Arc::new(McpFront {
        door: door.clone(),
        sessions: mcp_http::McpSessions::new(gateway.clone(), stop),
        max_body: gateway.config().max_request_body_bytes,
    });
    let mcp = Router::new()
        .route("/mcp", any(mcp_front))
        .with_state(front);
    let admin = admin::Admin::new(gateway.clone(), store);
    ops::router(door.clone())
        .merge(admin::router(admin.clone()))
        .merge(console::router(door.clone(), admin))
        .merge(rest::router(door))
        .merge(mcp)
        .layer(axum::middleware::from_fn_with_state(gateway, guard::check))
}

/// What `/mcp` needs.
struct McpFront {
    door: Arc<auth::FrontDoor>,
    sessions: mcp_http::McpSessions,
    max_body: usize,
}

/// Everything `/mcp` does: refuse oversized bodies, admit the caller and check its
/// session, answer ([`mcp_http`]), and make any error a JSON-RPC error.
async fn mcp_front(
    axum::extract::State(front): axum::extract::State<Arc<McpFront>>,
    mut request: axum::extract::Request,
) -> axum::response::Response {
    if let Some(refused) = protocol_errors::refuse_oversized(request.headers(), front.max_body) {
        return refused;
    }
    let response = match auth::admit_mcp(&front.door, &mut request).await {
        Err(refused) => refused,
        Ok(admitted) => front.sessions.route_trusted(request, admitted).await,
    };
    protocol_errors::as_jsonrpc_error(response).await
}
