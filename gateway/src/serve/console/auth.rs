//! Who is using the console, and the checks in front of everything it does.
//!
//! - **Sign-in**: a form posting the admin token (everything) or a tenant's API key
//!   (read-only, only what that tenant's policy reaches). A refused credential gets
//!   one answer whatever was wrong with it. The credential itself is never stored,
//!   logged or written back into a page: the session remembers only the role (the
//!   admin, or a tenant and the user a per-user key names).
//! - **Session cookie**: 128 random bits, `HttpOnly; SameSite=Strict; Path=/console`,
//!   `Secure` when `public_url` is `https://…` or the request says it came over TLS
//!   (`X-Forwarded-Proto: https`; trusting it can only add the flag). Sessions expire
//!   after 30 minutes unused or 12 hours in all; one principal keeps at most 8 (its
//!   next sign-in ends its own oldest) and at most 64 exist (see `sessions`: in
//!   memory, or in Redis shared by every replica).
//! - **Cross-site requests**: every state-changing POST needs the session's CSRF token
//!   (a form field or the `X-CSRF-Token` header, compared in constant time) and must not
//!   come from another site (`Origin` the gateway's own or its `public_url`'s,
//!   `Sec-Fetch-Site` same-origin).
//!   The sign-in form, which has no session yet, gets the Origin check.
//! - **Throttling**: refused sign-ins are counted per client address and per
//!   credential (`throttle`); past a burst, sign-ins from there get 429 with
//!   `Retry-After` until the count refills. Correct sign-ins are not counted.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

use super::Console;
use super::sessions::{LIFETIME, Role};
use crate::access::Caller;
use crate::policy::Tenant;
use crate::state::conn::Unavailable;

/// The session cookie's name.
pub(super) const COOKIE: &str = "toolgate_console";
/// The signed-in user of a request.
pub(super) enum Viewer {
    Admin,
    /// A tenant, as the user its API key named (`None`: the tenant as a whole).
    Tenant(Arc<Tenant>, Option<Arc<str>>),
}

impl Viewer {
    pub(super) fn is_admin(&self) -> bool {
        matches!(self, Viewer::Admin)
    }

    /// The caller a tenant's session acts as, as a request with its API key would be
    /// admitted (its tenant and subject); `None` for the admin, who is no caller.
    pub(super) fn caller(&self) -> Option<Caller> {
        match self {
            Viewer::Admin => None,
            Viewer::Tenant(tenant, subject) => Some(Caller::new(tenant.clone(), subject.clone())),
        }
    }
}

/// A request's signed-in user, its session id and CSRF token.
pub(super) struct Current {
    pub(super) viewer: Viewer,
    pub(super) csrf: String,
    id: String,
    /// See [`public_origin`].
    public_origin: Option<String>,
}

/// The session cookie's value, if the request carries one.
fn cookie_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty() && v.len() <= 64)
}

/// The signed-in user of a request, if its session is live and its tenant still
/// exists; an error when the shared state store cannot be read.
pub(super) async fn current(
    console: &Console,
    headers: &HeaderMap,
) -> Result<Option<Current>, Unavailable> {
    let Some(id) = cookie_id(headers) else {
        return Ok(None);
    };
    let Some((role, csrf)) = console.sessions.get(&id).await? else {
        return Ok(None);
    };
    Ok(resolve(console, role, csrf, id))
}

fn resolve(console: &Console, role: Role, csrf: String, id: String) -> Option<Current> {
    let viewer = match role {
        Role::Admin => {
            // An admin session ends with the admin API (a reload cannot change it,
            // but be explicit).
            console.admin.token()?;
            Viewer::Admin
        }
        Role::Tenant(name, subject) => Viewer::Tenant(
            console.door.gateway.policy().tenant(&name)?,
            subject.map(Arc::from),
        ),
    };
    Some(Current {
        viewer,
        csrf,
        id,
        public_origin: public_origin(console),
    })
}

/// Whether two texts are equal, in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    let a: [u8; 32] = Sha256::digest(a.as_bytes()).into();
    let b: [u8; 32] = Sha256::digest(b.as_bytes()).into();
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// The origin (`scheme://authority`) of the gateway's `public_url`, when set: behind a
/// proxy that rewrites `Host`, the browser's `Origin` is this one.
fn public_origin(console: &Console) -> Option<String> {
    crate::serve::guard::public_origin(console.door.gateway.config().public_url.as_deref())
}

/// `Some(refusal)` when the request comes from another site (the rule is
/// [`crate::serve::guard::is_cross_site`]).
pub(super) fn refuse_cross_site(headers: &HeaderMap, public: Option<&str>) -> Option<Response> {
    crate::serve::guard::is_cross_site(headers, public).then(|| {
        tracing::warn!("console: refused a cross-site POST");
        forbidden("This request came from another site and was refused.")
    })
}

/// Checks a state-changing request: same site, and the session's CSRF token
/// (`presented`: the form field, or the `X-CSRF-Token` header when `None`).
pub(super) fn check_post(
    current: &Current,
    headers: &HeaderMap,
    presented: Option<&str>,
) -> Result<(), Box<Response>> {
    if let Some(refused) = refuse_cross_site(headers, current.public_origin.as_deref()) {
        return Err(Box::new(refused));
    }
    let presented = presented.or_else(|| headers.get("x-csrf-token").and_then(|v| v.to_str().ok()));
    match presented {
        Some(token) if same(token, &current.csrf) => Ok(()),
        _ => {
            tracing::warn!("console: refused a POST without its session's CSRF token");
            Err(Box::new(forbidden(
                "This request did not carry the page's form token and was refused: reload the page and try again.",
            )))
        }
    }
}

fn forbidden(message: &str) -> Response {
    let body = super::html::bare_page("Refused", &super::html::notice("bad", message));
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// The `Set-Cookie` value of a new session.
fn session_cookie(console: &Console, headers: &HeaderMap, id: &str) -> Option<HeaderValue> {
    let https_config = console
        .door
        .gateway
        .config()
        .public_url
        .as_deref()
        .is_some_and(|u| u.to_ascii_lowercase().starts_with("https://"));
    let https_request = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    let secure = if https_config || https_request {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/console; Max-Age={}{secure}",
        LIFETIME.as_secs()
    ))
    .ok()
}

const CLEARED: &str = "toolgate_console=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0";

/// The sign-in form (`refused`: after a refused credential).
pub(super) fn login_page(console: &Console, refused: bool) -> String {
    let mut body = String::new();
    if refused {
        body.push_str(&super::html::notice(
            "bad",
            "Sign-in refused: that is not this gateway's admin token nor a tenant's API key.",
        ));
    }
    if console.admin.token().is_none() && console.door.gateway.policy().is_open() {
        body.push_str(&super::html::notice(
            "info",
            "This gateway has no admin token and no tenants: set `admin.token` in its config to use the console.",
        ));
    }
    body.push_str(
        "<form method=\"post\" action=\"/console/login\" class=\"stack\">\
         <label for=\"token\">Admin token or tenant API key</label>\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus>\
         <p class=\"hint\">The admin token shows and changes everything; a tenant's API key shows, read-only, what that tenant may use.</p>\
         <button type=\"submit\">Sign in</button></form>",
    );
    super::html::bare_page("Sign in to the toolgate console", &body)
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// `POST /console/login` from `address` (the client's, when known).
pub(super) async fn login(
    console: &Console,
    headers: &HeaderMap,
    address: Option<std::net::IpAddr>,
    token: &str,
) -> Response {
    if let Some(refused) = refuse_cross_site(headers, public_origin(console).as_deref()) {
        return refused;
    }
    let token = token.trim();
    // Throttled before the credential is checked: a guesser learns nothing more.
    if let Some(wait) = console.throttle.wait(address, token) {
        return throttled(console, wait);
    }
    let role = if token.is_empty() || token.len() > 8192 {
        None
    } else if console.admin.token().is_some_and(|t| t.matches(token)) {
        Some(Role::Admin)
    } else if console.door.gateway.policy().is_open() {
        None
    } else {
        let authorization = format!("Bearer {token}");
        match console
            .door
            .authenticator
            .authenticate(Some(&authorization))
            .await
        {
            // The console signs in tenants (its pages show a tenant's view); a
            // personal key signs in as its tenant and remembers its user (whose
            // connections the connections page shows).
            Ok(Some(identity))
                if console
                    .door
                    .gateway
                    .policy()
                    .tenant(&identity.tenant)
                    .is_some() =>
            {
                Some(Role::Tenant(identity.tenant, identity.subject))
            }
            _ => None,
        }
    };
    let Some(role) = role else {
        console.throttle.refused(address, token);
        console
            .door
            .gateway
            .metrics
            .record_refusal("invalid_credentials");
        tracing::info!(
            target: crate::logging::AUDIT_TARGET,
            outcome = "invalid_credentials",
            "console sign-in refused"
        );
        return html(StatusCode::UNAUTHORIZED, login_page(console, true));
    };
    tracing::info!(
        target: crate::logging::AUDIT_TARGET,
        role = match &role {
            Role::Admin => "admin",
            Role::Tenant(..) => "tenant",
        },
        "console sign-in"
    );
    let id = match console.sessions.create(role).await {
        Ok((id, _)) => id,
        Err(unavailable) => return unavailable_page(&unavailable),
    };
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/console")]).into_response();
    if let Some(cookie) = session_cookie(console, headers, &id) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The answer to a sign-in from an address, or with a credential, refused too often.
fn throttled(console: &Console, wait: std::time::Duration) -> Response {
    console
        .door
        .gateway
        .metrics
        .record_refusal("sign_in_throttled");
    tracing::info!(
        target: crate::logging::AUDIT_TARGET,
        outcome = "sign_in_throttled",
        "console sign-in throttled"
    );
    let seconds = super::throttle::retry_after_secs(wait);
    let body = super::html::bare_page(
        "Too many sign-in attempts",
        &super::html::notice(
            "bad",
            &format!(
                "Too many refused sign-ins from this address or with this credential: \
                 wait {seconds} s, then sign in with the admin token or a tenant's API key."
            ),
        ),
    );
    let mut response = html(StatusCode::TOO_MANY_REQUESTS, body);
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The answer while the shared state store (console sessions with Redis) is down.
pub(super) fn unavailable_page(unavailable: &Unavailable) -> Response {
    let body = super::html::bare_page(
        "Unavailable",
        &super::html::notice("bad", &unavailable.to_string()),
    );
    let mut response = html(StatusCode::SERVICE_UNAVAILABLE, body);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// `POST /console/logout`.
pub(super) async fn logout(console: &Console, current: &Current) -> Response {
    if let Err(unavailable) = console.sessions.remove(&current.id).await {
        return unavailable_page(&unavailable);
    }
    let mut response = (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, "/console/login")],
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, HeaderValue::from_static(CLEARED));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_parsed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; toolgate_console=xyz ; c=d"),
        );
        assert_eq!(cookie_id(&headers).as_deref(), Some("xyz"));
        assert!(same("abc", "abc") && !same("abc", "abd"));
    }

    #[test]
    fn cross_site_requests_are_told_apart() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(
            refuse_cross_site(&headers, None).is_none(),
            "no browser headers"
        );
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        headers.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(refuse_cross_site(&headers, None).is_none());
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(refuse_cross_site(&headers, None).is_some());
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(refuse_cross_site(&headers, None).is_some());
        // Behind a proxy that rewrites Host: the public URL's origin is the gateway's.
        headers.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        headers.insert(header::HOST, HeaderValue::from_static("toolgate:8080"));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://tools.example.com"),
        );
        assert!(refuse_cross_site(&headers, None).is_some());
        assert!(refuse_cross_site(&headers, Some("https://tools.example.com")).is_none());
    }
}
