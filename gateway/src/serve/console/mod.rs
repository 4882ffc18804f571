//! The web console at `/console`: the upstreams, the catalog, the tenants, the reload
//! history and health at a glance; registering an OpenAPI API by URL; trying a tool;
//! a user's own connections to upstreams.
//!
//! Server-rendered HTML with one small embedded script (`assets/console.js`) that
//! refreshes marked regions by polling and streams a tool call's events: no build
//! step, no framework, nothing fetched from elsewhere (air-gapped clusters), and pages
//! that work with the keyboard and a screen reader because they are plain HTML forms,
//! tables and links. Every answer carries a strict Content-Security-Policy (no inline
//! script or style) and may not be framed.
//!
//! The console decides nothing itself: its data comes from the functions behind the
//! REST, ops and admin endpoints (`Admin` for upstreams and registrations,
//! `ops::readiness`, `ops::visible_statuses`, the policy's `allowed` and `explain`,
//! the `tool_search` engine, the export functions, the REST call stream, the
//! connections of `/v1/connections`).
//!
//! - `auth`: sign-in, CSRF and cross-site checks; `sessions`: where sessions are kept;
//!   `throttle`: refused sign-ins counted per address and credential;
//! - `html`: escaping, the page shell, widgets;
//! - `pages`: upstreams, reloads and health;
//! - `catalog`: the catalog, a tool's detail and its try-out form;
//! - `schema`: an input schema as a tree and as form fields;
//! - `tenants`: a tenant's allowed and initial sets and the policy's explanations;
//! - `connections`: the signed-in user's own accounts at upstreams reached with each
//!   user's own token, connected and disconnected there;
//! - `actions`: registering, refreshing and deleting APIs, and calling a tool.

mod actions;
mod auth;
mod catalog;
mod connections;
pub(crate) mod html;
mod pages;
mod schema;
mod sessions;
mod tenants;
mod throttle;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::admin::Admin;
use super::auth::FrontDoor;
use auth::Current;

/// What the console's handlers share.
pub struct Console {
    door: Arc<FrontDoor>,
    admin: Arc<Admin>,
    sessions: sessions::Sessions,
    throttle: throttle::SignInThrottle,
}

/// The console's routes.
pub fn router(door: Arc<FrontDoor>, admin: Arc<Admin>) -> Router {
    let shared = door.gateway.shared.as_ref().map(|s| s.conn.clone());
    let console = Arc::new(Console {
        door,
        admin,
        sessions: sessions::Sessions::new(shared),
        throttle: throttle::SignInThrottle::new(),
    });
    Router::new()
        .route("/console", get(pages::upstreams))
        .route("/console/", get(|| async { redirect("/console") }))
        .route("/console/login", get(login_form).post(actions::login))
        .route("/console/logout", post(actions::logout))
        .route(
            "/console/upstreams/fragment",
            get(pages::upstreams_fragment),
        )
        .route("/console/catalog", get(catalog::catalog))
        .route("/console/tools/{name}", get(catalog::tool))
        .route("/console/tools/{name}/call", post(actions::call))
        .route("/console/tenants", get(tenants::tenants))
        .route("/console/connections", get(connections::page))
        .route(
            "/console/connections/{upstream}/connect",
            post(connections::connect),
        )
        .route(
            "/console/connections/{upstream}/disconnect",
            post(connections::disconnect),
        )
        .route(
            "/console/register",
            get(actions::register_form).post(actions::register),
        )
        .route("/console/upstreams/{name}/refresh", post(actions::refresh))
        .route("/console/upstreams/{name}/delete", post(actions::delete))
        .route("/console/health", get(pages::health))
        .route("/console/health/fragment", get(pages::health_fragment))
        .route("/console/assets/console.css", get(css))
        .route("/console/assets/console.js", get(js))
        .layer(axum::extract::DefaultBodyLimit::max(1024 * 1024))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(console)
}

/// The Content-Security-Policy of every console answer: only the console's own
/// script, style and connections; no framing; forms post only to the console.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: &'static str, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, "content-security-policy", CSP);
    set(headers, "x-frame-options", "DENY");
    set(headers, "x-content-type-options", "nosniff");
    // Not `no-referrer`: with it browsers send `Origin: null` on the console's own
    // form posts, which the cross-site check must then refuse.
    set(headers, "referrer-policy", "same-origin");
    set(headers, "cross-origin-opener-policy", "same-origin");
    if !headers.contains_key(header::CACHE_CONTROL) {
        set(headers, "cache-control", "no-store");
    }
    response
}

fn redirect(to: &'static str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response()
}

/// An HTML answer.
fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// The signed-in user, or the answer for a request without one: the sign-in page for
/// a page, 401 for a region refreshed by the script; 503 while the shared state store
/// (console sessions with Redis) cannot be read.
async fn signed_in(console: &Console, headers: &HeaderMap) -> Result<Current, Box<Response>> {
    match auth::current(console, headers).await {
        Ok(Some(current)) => Ok(current),
        Ok(None) => Err(Box::new(redirect("/console/login"))),
        Err(unavailable) => Err(Box::new(auth::unavailable_page(&unavailable))),
    }
}

async fn signed_in_fragment(
    console: &Console,
    headers: &HeaderMap,
) -> Result<Current, Box<Response>> {
    match auth::current(console, headers).await {
        Ok(Some(current)) => Ok(current),
        Ok(None) => Err(Box::new(html(
            StatusCode::UNAUTHORIZED,
            html::notice("bad", "Your console session ended: sign in again."),
        ))),
        Err(unavailable) => Err(Box::new(auth::unavailable_page(&unavailable))),
    }
}

/// A page only the admin may see: 404 for a tenant (as for a page that does not exist).
fn admin_only(current: &Current) -> Result<(), Box<Response>> {
    if current.viewer.is_admin() {
        Ok(())
    } else {
        Err(Box::new(not_found(current)))
    }
}

fn not_found(current: &Current) -> Response {
    html(
        StatusCode::NOT_FOUND,
        html::page(
            &current.viewer,
            &current.csrf,
            "",
            "Not found",
            &html::notice("bad", "There is nothing here."),
        ),
    )
}

async fn login_form(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Ok(Some(_)) = auth::current(&console, &headers).await {
        return redirect("/console");
    }
    html(StatusCode::OK, auth::login_page(&console, false))
}

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}
