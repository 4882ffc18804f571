//! The pages a user's browser sees while connecting an account at an upstream
//! (`credentials: oauth`; the steps are `crate::upstream_auth`'s):
//!
//! - `GET /oauth/connect/{id}`: whose account connects which upstream, and a button.
//!   Opening the link changes nothing (link previews and prefetchers use nothing up);
//!   the button does.
//! - `POST /oauth/connect/{id}`: uses the link and sends the browser to the upstream's
//!   authorization server (303) — when the gateway's own page sent it, never another
//!   site's.
//! - `GET /oauth/callback`: where the authorization server sends the browser back.
//! - `GET /oauth/client-metadata.json`: the gateway's Client ID Metadata Document.
//!
//! None of them takes the gateway's own credentials: a connect link is itself the
//! proof (single use, short-lived, made for one user), and the callback's `state` is.
//! Pages carry no scripts and may not be framed.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::console::html::esc;
use crate::upstream_auth::{CallbackOutcome, CallbackParams, UpstreamAuth};

pub fn router(auth: Arc<UpstreamAuth>) -> Router {
    Router::new()
        .route("/oauth/connect/{id}", get(connect_page).post(connect))
        .route("/oauth/callback", get(callback))
        .route("/oauth/client-metadata.json", get(client_metadata))
        .with_state(auth)
}

/// A small page: no scripts, no styles, never in a frame, never cached.
fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>",
        title = esc(title)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-store"),
            // Nothing is sent to another origin (the URL holds the link or the code),
            // while the connect form's POST still carries this page's `Origin`, which
            // `no-referrer` would turn into `null` — and the POST be refused as
            // cross-site.
            (header::REFERRER_POLICY, "same-origin"),
        ],
        html,
    )
        .into_response()
}

fn gone() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Link used or expired",
        "<p>This connect link was already used or has expired. Ask the agent to call the \
         tool again: it gets a fresh link.</p>",
    )
}

async fn connect_page(State(auth): State<Arc<UpstreamAuth>>, Path(id): Path<String>) -> Response {
    let Some(link) = auth.link_page(&id).await else {
        return gone();
    };
    let who = match &link.subject {
        Some(subject) => format!(
            "<b>{}</b> of tenant <b>{}</b>",
            esc(subject),
            esc(&link.tenant)
        ),
        None => format!("tenant <b>{}</b>", esc(&link.tenant)),
    };
    let body = format!(
        "<p>Connect your account at <b>{upstream}</b> for {who}. The gateway will call \
         <b>{upstream}</b> as you, for {who} only.</p>\
         <p>If you did not ask for this, close this page.</p>\
         <form method=\"post\" action=\"/oauth/connect/{id}\">\
         <button type=\"submit\">Continue to {upstream}</button></form>",
        upstream = esc(&link.upstream),
        id = esc(&id),
    );
    page(StatusCode::OK, "Connect an account", &body)
}

async fn connect(
    State(auth): State<Arc<UpstreamAuth>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    // Only the gateway's own connect page starts an authorization: another site must
    // not submit a link it holds from a victim's browser, which would connect the
    // victim's account to the link's owner. The link stays usable.
    let public = crate::serve::guard::public_origin(auth.public_url().as_deref());
    if crate::serve::guard::is_cross_site(&headers, public.as_deref()) {
        tracing::warn!("oauth: refused a cross-site connect");
        return page(
            StatusCode::FORBIDDEN,
            "Refused",
            "<p>This request came from another site and was refused. Open the connect \
             link itself to continue.</p>",
        );
    }
    match auth.begin(&id).await {
        Ok(url) => (
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, url.as_str()),
                (header::CACHE_CONTROL, "no-store"),
                (header::REFERRER_POLICY, "no-referrer"),
            ],
        )
            .into_response(),
        Err(message) => page(
            StatusCode::BAD_GATEWAY,
            "Could not connect",
            &format!("<p>{}</p>", esc(&message)),
        ),
    }
}

async fn callback(
    State(auth): State<Arc<UpstreamAuth>>,
    Query(params): Query<CallbackParams>,
) -> Response {
    match auth.finish(params).await {
        CallbackOutcome::Connected { upstream } => page(
            StatusCode::OK,
            "Connected",
            &format!(
                "<p>Your account at <b>{}</b> is connected. You can close this window; \
                 the agent can call its tools now.</p>",
                esc(&upstream)
            ),
        ),
        CallbackOutcome::Failed { message } => page(
            StatusCode::BAD_REQUEST,
            "Could not connect",
            &format!("<p>{}</p>", esc(&message)),
        ),
    }
}

async fn client_metadata(State(auth): State<Arc<UpstreamAuth>>) -> Response {
    match auth.client_metadata() {
        Some(document) => axum::Json(document).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
