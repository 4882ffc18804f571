//! The connections page: the signed-in user's own accounts at the upstreams reached
//! with each user's own token (`credentials: oauth`) — connected or not, the scope
//! granted, when the token expires — with **Connect** (the user's connect link, made
//! as `POST /v1/connections/{upstream}` makes it, the browser sent to it) and
//! **Disconnect** (the token forgotten and revoked, as `DELETE
//! /v1/connections/{upstream}`).
//!
//! Which upstreams a user sees and may address are the REST routes' own rules
//! (`rest::connections`): one the tenant may not use is answered like one that does
//! not exist. A tenant's session acts as its API key would (the user a per-user key
//! names, or the tenant as a whole); the admin is nobody's caller and is told whose
//! connections these are.
//!
//! Connect sends the browser to the connect link's own page on the gateway (whose
//! account, which upstream, a button): the console's `form-action 'self'` lets a form
//! post be redirected only to the gateway, and the link's page is where every way of
//! connecting confirms before the upstream's authorization server.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::auth::{self, Current, Viewer};
use super::html::{self, esc, url_part};
use super::{Console, not_found, signed_in};
use crate::access::Caller;
use crate::serve::rest::connections::{reachable, visible};

type Fields = Form<HashMap<String, String>>;

/// `GET /console/connections`.
pub(super) async fn page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let current = match signed_in(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    let (status, body) = body(&console, &current, "").await;
    super::html(status, connections_page(&current, &body))
}

/// `POST /console/connections/{upstream}/connect`: to the user's connect link.
pub(super) async fn connect(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(upstream): Path<String>,
    Form(fields): Fields,
) -> Response {
    let (current, caller) = match user_post(&console, &headers, &fields, &upstream).await {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let auth = &console.door.app.upstream_auth;
    let link = auth
        .connect_link(&upstream, &caller.principal(), None)
        .await
        .map_err(|error| error.to_string())
        .and_then(|link| {
            HeaderValue::from_str(&link)
                .map_err(|_| "the gateway's `public_url` does not make a valid link".to_owned())
        });
    match link {
        Ok(location) => (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response(),
        Err(message) => {
            let notice = html::notice("bad", &format!("Could not connect {upstream}: {message}"));
            let (_, body) = body(&console, &current, &notice).await;
            super::html(
                StatusCode::SERVICE_UNAVAILABLE,
                connections_page(&current, &body),
            )
        }
    }
}

/// `POST /console/connections/{upstream}/disconnect`: forgotten and revoked, and the
/// page again with what happened.
pub(super) async fn disconnect(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(upstream): Path<String>,
    Form(fields): Fields,
) -> Response {
    let (current, caller) = match user_post(&console, &headers, &fields, &upstream).await {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let auth = &console.door.app.upstream_auth;
    let (status, notice) = match auth.disconnect(&upstream, &caller.principal()).await {
        Ok(true) => (
            StatusCode::OK,
            html::notice(
                "ok",
                &format!(
                    "Disconnected from {upstream}: the gateway forgot your token and had {upstream}'s authorization server revoke it."
                ),
            ),
        ),
        Ok(false) => (
            StatusCode::OK,
            html::notice("info", &format!("{upstream} was not connected.")),
        ),
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            html::notice("bad", &format!("Could not disconnect {upstream}: {error}")),
        ),
    };
    let (listed, body) = body(&console, &current, &notice).await;
    let status = if status.is_success() { listed } else { status };
    super::html(status, connections_page(&current, &body))
}

/// A signed-in tenant's POST about `upstream`, with its CSRF form field: the session
/// and the caller it acts as; otherwise the refusal, or "not found" for the admin and
/// for an upstream the caller may not address (as for one that does not exist).
async fn user_post(
    console: &Console,
    headers: &HeaderMap,
    fields: &HashMap<String, String>,
    upstream: &str,
) -> Result<(Current, Caller), Box<Response>> {
    let current = signed_in(console, headers).await?;
    auth::check_post(&current, headers, fields.get("csrf").map(String::as_str))?;
    let caller = match current.viewer.caller() {
        Some(caller) if reachable(&console.door, &caller, upstream) => caller,
        _ => return Err(Box::new(not_found(&current))),
    };
    // Counted against the tenant's rate limit, as the same request over REST is.
    if console
        .door
        .gateway
        .count_request(&caller.tenant)
        .await
        .is_err()
    {
        let notice = html::notice(
            "bad",
            "Your tenant is over its rate limit (or the shared limiter is unavailable): try again shortly.",
        );
        let (_, body) = body(console, &current, &notice).await;
        return Err(Box::new(super::html(
            StatusCode::TOO_MANY_REQUESTS,
            connections_page(&current, &body),
        )));
    }
    Ok((current, caller))
}

fn connections_page(current: &Current, body: &str) -> String {
    html::page(
        &current.viewer,
        &current.csrf,
        "/console/connections",
        "Connections",
        body,
    )
}

/// The page's body under `notice`, and its status (503 while the token store cannot
/// be read).
async fn body(console: &Console, current: &Current, notice: &str) -> (StatusCode, String) {
    let Some(caller) = current.viewer.caller() else {
        return (StatusCode::OK, admin_body(console));
    };
    let whose = match &current.viewer {
        Viewer::Tenant(_, Some(_)) => {
            "Your own accounts at the upstreams the gateway calls with each user's own authorization. \
             Connect sends you to the upstream to sign in and consent; from then on the gateway calls it as you, for you only. \
             Disconnect forgets your token and revokes it."
                .to_owned()
        }
        _ => format!(
            "This API key names no user: connections made here are tenant {}'s as a whole, \
             used for its callers whose credentials name no user. Sign in with a user's own key to connect that user's account.",
            esc(&caller.tenant.name)
        ),
    };
    let mut out = format!("{notice}<p class=\"lead\">{whose}</p>");
    let connections = match visible(&console.door, &caller).await {
        Ok(connections) => connections,
        Err(error) => {
            out.push_str(&html::notice("bad", &error));
            return (StatusCode::SERVICE_UNAVAILABLE, out);
        }
    };
    if connections.is_empty() {
        out.push_str(&html::notice(
            "info",
            "No upstream you may use is reached with each user's own account.",
        ));
        return (StatusCode::OK, out);
    }
    out.push_str(
        "<table class=\"connections\"><caption class=\"sr-only\">Connections</caption><thead><tr>\
         <th scope=\"col\">Upstream</th><th scope=\"col\">State</th>\
         <th scope=\"col\">Scope granted</th><th scope=\"col\">Access token expires</th>\
         <th scope=\"col\">Action</th></tr></thead><tbody>",
    );
    let csrf = html::csrf_field(&current.csrf);
    for connection in &connections {
        let name = esc(&connection.upstream);
        let (badge, action, verb) = if connection.connected {
            (
                "<span class=\"badge ok\"><span aria-hidden=\"true\">●</span> connected</span>",
                "disconnect",
                "<button type=\"submit\" class=\"danger\"",
            )
        } else {
            (
                "<span class=\"badge idle\"><span aria-hidden=\"true\">○</span> not connected</span>",
                "connect",
                "<button type=\"submit\"",
            )
        };
        let label = if connection.connected {
            "Disconnect"
        } else {
            "Connect"
        };
        let scope = connection
            .scope
            .as_deref()
            .map_or("—".to_owned(), |s| format!("<code>{}</code>", esc(s)));
        // The token is refreshed before it expires: this says how fresh it is.
        let expires = connection.expires_at.map_or("—".to_owned(), html::utc);
        let _ = write!(
            out,
            "<tr data-connection=\"{name}\" data-connected=\"{connected}\"><th scope=\"row\">{name}</th>\
             <td class=\"state\">{badge}</td><td>{scope}</td><td>{expires}</td>\
             <td><form method=\"post\" action=\"/console/connections/{u}/{action}\">{csrf}\
             {verb} aria-label=\"{label} {name}\">{label}</button></form></td></tr>",
            connected = connection.connected,
            u = url_part(&connection.upstream),
        );
    }
    out.push_str("</tbody></table>");
    (StatusCode::OK, out)
}

/// The admin's page: whose connections are, and which upstreams take them.
fn admin_body(console: &Console) -> String {
    let mut out = html::notice(
        "info",
        "Connections belong to users: each connects their own account at an upstream reached with each user's own authorization, and the gateway calls it as them. Sign in with a user's own API key to see and change that user's connections.",
    );
    let mut names = console.door.app.upstream_auth.oauth_upstreams();
    names.sort();
    if names.is_empty() {
        out.push_str("<p>No upstream here is reached with each user's own account (<code>credentials: oauth</code>).</p>");
        return out;
    }
    out.push_str("<h2>Upstreams reached with each user's own account</h2><ul class=\"plain\" id=\"oauth-upstreams\">");
    for name in &names {
        let _ = write!(
            out,
            "<li><a href=\"/console/catalog?upstream={}\">{}</a></li>",
            url_part(name),
            esc(name)
        );
    }
    out.push_str("</ul>");
    out
}
