//! `/v1/connections`: the caller's own authorizations at upstreams reached with each
//! user's own token (`credentials: oauth`): which are connected, a connect link for
//! one, and disconnecting (the token is forgotten and revoked).
//!
//! An upstream the caller's tenant may not use is answered like one that does not
//! exist, on every method here. The console's connections page follows the same
//! rules through [`visible`] and [`reachable`].

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Serialize;

use super::{caller, error};
use crate::access::Caller;
use crate::serve::auth::FrontDoor;
use crate::upstream_auth::Connection;

/// The caller's connections, one per upstream it may use that takes each user's own
/// authorization.
#[derive(Serialize, JsonSchema)]
pub(super) struct Connections {
    connections: Vec<Connection>,
}

/// Where the user connects their account at `upstream`.
#[derive(Serialize, JsonSchema)]
pub(super) struct ConnectLink {
    upstream: String,
    /// Open it in a browser (once, within the gateway's `oauth.connect_ttl`).
    connect_url: String,
}

/// Whether `caller`'s tenant may use anything of `upstream`: one of its listed tools,
/// or, before any is known, the tenant's patterns admitting the upstream's prefix.
fn may_use(door: &FrontDoor, caller: &Caller, upstream: &str) -> bool {
    let catalog = door.gateway.catalog();
    let mut known = catalog
        .entries()
        .iter()
        .filter(|entry| entry.upstream == upstream)
        .peekable();
    if known.peek().is_none() {
        return caller.tenant.allows(&format!("{upstream}__*"));
    }
    known.any(|entry| caller.tenant.allows(&entry.name))
}

fn no_such_upstream(upstream: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no upstream '{}' takes a user's own authorization here: GET /v1/connections \
             lists the ones that do",
            crate::summary::cut(upstream, 64)
        ),
    )
}

/// `caller`'s connections at the upstreams taking a user's own authorization that its
/// tenant may use (an error when the token store cannot be read).
pub(crate) async fn visible(door: &FrontDoor, caller: &Caller) -> Result<Vec<Connection>, String> {
    let all = door
        .app
        .upstream_auth
        .connections(&caller.principal())
        .await?;
    Ok(all
        .into_iter()
        .filter(|c| may_use(door, caller, &c.upstream))
        .collect())
}

/// Whether `upstream` takes a user's own authorization and `caller`'s tenant may use
/// it: what connecting and disconnecting there need (anything else is answered like
/// an upstream that does not exist).
pub(crate) fn reachable(door: &FrontDoor, caller: &Caller, upstream: &str) -> bool {
    door.app.upstream_auth.is_oauth(upstream) && may_use(door, caller, upstream)
}

pub(super) async fn list(State(door): State<Arc<FrontDoor>>, headers: HeaderMap) -> Response {
    let caller = match caller(&door, &headers, None).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    match visible(&door, &caller).await {
        Ok(connections) => Json(Connections { connections }).into_response(),
        Err(e) => crate::serve::auth::state_unavailable(&e).rest(),
    }
}

/// The caller of a request about `upstream`, when that is an upstream taking a
/// user's own authorization that the caller may use; otherwise the answer (a refusal
/// at the door, or the same 404 as for an upstream that does not exist).
async fn caller_at(
    door: &FrontDoor,
    headers: &HeaderMap,
    upstream: &str,
) -> Result<Caller, Response> {
    let caller = caller(door, headers, None).await?;
    if !reachable(door, &caller, upstream) {
        return Err(no_such_upstream(upstream));
    }
    Ok(caller)
}

pub(super) async fn connect(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Path(upstream): Path<String>,
) -> Response {
    let caller = match caller_at(&door, &headers, &upstream).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let auth = &door.app.upstream_auth;
    match auth
        .connect_link(&upstream, &caller.principal(), None)
        .await
    {
        Ok(connect_url) => Json(ConnectLink {
            upstream,
            connect_url,
        })
        .into_response(),
        Err(e) => super::tool_error(&e),
    }
}

pub(super) async fn disconnect(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Path(upstream): Path<String>,
) -> Response {
    let caller = match caller_at(&door, &headers, &upstream).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let auth = &door.app.upstream_auth;
    match auth.disconnect(&upstream, &caller.principal()).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => crate::serve::auth::state_unavailable(&e).rest(),
    }
}
