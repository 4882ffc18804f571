//! The first thing every HTTP request meets (the health probes excepted): the checks
//! that keep web pages a user happens to visit from using a gateway on their machine
//! or network (DNS rebinding, cross-site request forgery), one rule for every route.
//!
//! 1. **Host**: exactly one `Host` header (an absolute-form target must name the same
//!    authority), and it is one of `allowed_hosts`. A rebinding page reaches the
//!    gateway under its own name, so its requests carry a foreign `Host`.
//! 2. **CORS preflight** (`OPTIONS` with `Origin` and `Access-Control-Request-Method`):
//!    answered here, allowed only for the origins in `cors.allowed_origins` (none by
//!    default), so a browser never sends the real cross-origin request.
//! 3. **Origin** on `/mcp`, `/v1/…` and `/admin/…`: a request that carries one (every
//!    browser request that could change something does) must come from the gateway's
//!    own origin or one listed in `cors.allowed_origins`. Clients that are not
//!    browsers send none and pass.
//!    `/console` makes the same check itself, with a CSRF token bound to the console
//!    session (see `console::auth`): its forms are posted as HTML forms.
//! 4. **Content type** on the JSON endpoints (the same paths, methods with a body):
//!    `application/json` (or `…+json`) only. Browsers send `text/plain`, form and
//!    multipart bodies cross-origin without a preflight; refusing them closes that door.
//!
//! Allowed origins also get CORS headers on their answers.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::json;

use crate::config::front_door::{CorsConfig, parse_origin, split_authority};
use crate::gateway::Gateway;

impl CorsConfig {
    /// Whether a page on `origin` may call the gateway.
    pub(crate) fn allows(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/');
        self.allowed_origins
            .iter()
            .any(|o| o.trim().trim_end_matches('/').eq_ignore_ascii_case(origin))
    }
}

/// Request headers a preflight may ask for.
const ALLOWED_HEADERS: &str = "authorization, content-type, accept, mcp-session-id, \
     mcp-protocol-version, mcp-method, mcp-name, last-event-id, traceparent, tracestate";
/// Response headers a page on an allowed origin may read.
const EXPOSED_HEADERS: &str =
    "mcp-session-id, mcp-protocol-version, www-authenticate, retry-after, location";

/// The guard, as axum middleware over the whole router.
pub async fn check(State(gateway): State<Arc<Gateway>>, request: Request, next: Next) -> Response {
    match screen(&gateway, &request) {
        Screened::Answer(response) => response,
        Screened::Pass { cors } => finish(next.run(request).await, cors),
    }
}

/// What the guard says about a request.
pub(crate) enum Screened {
    /// Answered here: a refusal or a preflight.
    Answer(Response),
    /// It goes on; `cors` is the listed origin whose page may read the answer.
    Pass { cors: Option<String> },
}

/// The guard's checks, before a request is served. The `/mcp` fast path
/// ([`super::Front`]) and the middleware ([`check`]) both ask this, then [`finish`].
pub(crate) fn screen(gateway: &Gateway, request: &Request) -> Screened {
    let path = request.uri().path();
    if matches!(path, "/healthz" | "/readyz") {
        return Screened::Pass { cors: None };
    }
    let shape = Shape::of(path);
    let config = gateway.config();
    let host = match refuse_host(request.uri(), request.headers(), &config.allowed_hosts) {
        Ok(host) => host,
        Err(refused) => return Screened::Answer(refused.respond(shape)),
    };
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("null").to_owned());
    let is_preflight = request.method() == Method::OPTIONS
        && origin.is_some()
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let listed = origin.as_deref().is_some_and(|o| config.cors.allows(o));
    if is_preflight {
        if !listed {
            return Screened::Answer(
                Refused::new(
                    StatusCode::FORBIDDEN,
                    "origin_not_allowed",
                    "cross-origin requests to this gateway are refused: list the page's \
                     origin under cors.allowed_origins in the gateway config to allow them",
                )
                .respond(shape),
            );
        }
        return Screened::Answer(preflight(origin.as_deref().unwrap_or_default()));
    }
    if shape.is_guarded() {
        if let Some(origin) = origin.as_deref()
            && !listed
            && !same_origin(origin, host)
        {
            tracing::warn!(
                origin,
                "refused a request from a foreign Origin (cross-site request)"
            );
            return Screened::Answer(
                Refused::new(
                    StatusCode::FORBIDDEN,
                    "origin_not_allowed",
                    "Forbidden: requests from this Origin are refused (a web page on another \
                     site); to allow a web app, list its origin under cors.allowed_origins in \
                     the gateway config",
                )
                .respond(shape),
            );
        }
        if let Some(refused) = refuse_content_type(request.method(), request.headers()) {
            return Screened::Answer(refused.respond(shape));
        }
    }
    Screened::Pass {
        cors: origin.filter(|_| listed),
    }
}

/// The guard's part of an answer to a request it let pass: CORS headers for a listed
/// origin.
pub(crate) fn finish(mut response: Response, cors: Option<String>) -> Response {
    if let Some(origin) = cors.as_deref() {
        allow_origin(response.headers_mut(), origin);
        if let Ok(exposed) = HeaderValue::from_str(EXPOSED_HEADERS) {
            response
                .headers_mut()
                .insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, exposed);
        }
    }
    response
}

/// The answer to an allowed preflight.
fn preflight(origin: &str) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    allow_origin(headers, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOWED_HEADERS),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

fn allow_origin(headers: &mut HeaderMap, origin: &str) {
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}

/// Which family a path belongs to: how a refusal looks, and whether the Origin and
/// content-type checks apply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `/mcp`: JSON-RPC error bodies.
    Mcp,
    /// `/v1/…` and `/admin/…`: `{"error": {code, message}}`.
    Api,
    /// Everything else (`/metrics`, `/openapi.json`, discovery documents).
    Other,
}

impl Shape {
    fn of(path: &str) -> Shape {
        if path == "/mcp" || path.starts_with("/mcp/") {
            Shape::Mcp
        } else if path.starts_with("/v1/") || path.starts_with("/admin/") {
            Shape::Api
        } else {
            Shape::Other
        }
    }

    fn is_guarded(self) -> bool {
        self != Shape::Other
    }
}

/// A refusal, answered in the shape of the path's family.
struct Refused {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Refused {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Refused {
        Refused {
            status,
            code,
            message: message.into(),
        }
    }

    fn respond(self, shape: Shape) -> Response {
        match shape {
            Shape::Mcp => {
                super::mcp::error::McpError::guarded(self.status, self.code, self.message)
                    .response()
            }
            Shape::Api | Shape::Other => {
                let body = json!({"error": {"code": self.code, "message": self.message}});
                let mut response = Response::new(Body::from(body.to_string()));
                *response.status_mut() = self.status;
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
        }
    }
}

/// DNS-rebinding protection: exactly one `Host` (an absolute-form target naming the
/// same authority), one of `allowed` (any host when the list is empty; an entry
/// without a port allows every port of that host). `Ok` carries the authority.
fn refuse_host<'a>(
    uri: &'a http::Uri,
    headers: &'a HeaderMap,
    allowed: &[String],
) -> Result<Option<&'a str>, Refused> {
    let malformed = |what: &str| {
        Refused::new(
            StatusCode::BAD_REQUEST,
            "bad_host",
            format!("Bad Request: {what}"),
        )
    };
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(malformed("more than one Host header: send exactly one"));
    }
    let host = match host {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| malformed("malformed Host header"))?,
        ),
        None => None,
    };
    let target = uri.authority().map(http::uri::Authority::as_str);
    if let (Some(host), Some(target)) = (host, target)
        && !host.trim().eq_ignore_ascii_case(target)
    {
        return Err(malformed(
            "the request target names another host than the Host header",
        ));
    }
    let text = host.or(target);
    if allowed.is_empty() {
        return Ok(text);
    }
    let Some((name, port)) = text.and_then(split_authority) else {
        return Err(malformed("missing or malformed Host header"));
    };
    let is_allowed = allowed
        .iter()
        .filter_map(|e| split_authority(e))
        .any(|(host, p)| host.eq_ignore_ascii_case(name) && p.is_none_or(|p| Some(p) == port));
    if is_allowed {
        return Ok(text);
    }
    tracing::warn!(
        host = name,
        "refused a request with a Host header not in allowed_hosts (possible DNS rebinding)"
    );
    Err(Refused::new(
        StatusCode::FORBIDDEN,
        "host_not_allowed",
        "Forbidden: Host header is not allowed (add this host to allowed_hosts in the gateway config)",
    ))
}

/// The origin (`scheme://authority`) of the gateway's `public_url`: behind a proxy
/// that rewrites `Host`, a browser's `Origin` is this one.
pub(crate) fn public_origin(public_url: Option<&str>) -> Option<String> {
    let (scheme, rest) = public_url?.split_once("://")?;
    let authority = rest.split('/').next().unwrap_or_default();
    Some(format!("{scheme}://{authority}"))
}

/// Whether a browser's state-changing request (a form POST) comes from another site:
/// an `Origin` that is neither the gateway's own (its `Host`) nor `public`'s (see
/// [`public_origin`]), or a `Sec-Fetch-Site` other than `same-origin` (browsers send at
/// least one of them on every POST; clients that are not browsers send neither and
/// cannot be tricked into a request).
pub(crate) fn is_cross_site(headers: &HeaderMap, public: Option<&str>) -> bool {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let foreign_origin = headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("null"))
        .is_some_and(|origin| {
            let origin = origin.trim().trim_end_matches('/');
            !same_origin(origin, host) && !public.is_some_and(|p| p.eq_ignore_ascii_case(origin))
        });
    let foreign_fetch = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| !matches!(site, "same-origin" | "none"));
    foreign_origin || foreign_fetch
}

/// Whether `origin` is the gateway's own: the host (and port) the request was sent to.
pub(crate) fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let (Some((_, origin_host, origin_port)), Some((host, port))) =
        (parse_origin(origin), host.and_then(split_authority))
    else {
        return false;
    };
    origin_host.eq_ignore_ascii_case(host) && port.is_none_or(|p| p == origin_port)
}

/// JSON bodies only on the JSON endpoints: a method with a body must say
/// `application/json` (or `…+json`); a request without a body may leave it out.
fn refuse_content_type(method: &Method, headers: &HeaderMap) -> Option<Refused> {
    if !matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        return None;
    }
    // HTTP/1.1: a request has a body when it declares a length or a transfer coding.
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.to_str().map_or(true, |v| v.trim() != "0"));
    let content_type = headers.get(header::CONTENT_TYPE);
    let is_json = content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .is_some_and(|essence| {
            essence == "application/json"
                || essence
                    .strip_prefix("application/")
                    .is_some_and(|sub| sub.ends_with("+json"))
        });
    let missing_and_empty = content_type.is_none() && !has_body;
    if is_json || missing_and_empty {
        return None;
    }
    let got = content_type.map_or_else(
        || "no Content-Type".to_owned(),
        |v| format!("`{}`", String::from_utf8_lossy(v.as_bytes())),
    );
    Some(Refused::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "Unsupported Media Type: this endpoint takes a JSON body sent with \
             `Content-Type: application/json` (got {got})"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn hosts() {
        let allowed = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
            "example.com:8080".to_owned(),
        ];
        let uri = http::Uri::from_static("/mcp");
        let with_host =
            |h: &'static str| refuse_host(&uri, &headers(&[("host", h)]), &allowed).is_ok();
        assert!(with_host("127.0.0.1:3000"));
        assert!(with_host("LOCALHOST"));
        assert!(with_host("[::1]:80"));
        assert!(with_host("example.com:8080"));
        assert!(!with_host("example.com:9090"));
        assert!(!with_host("evil.example"));
        assert!(!with_host("localhost:notaport"));
        assert!(!with_host("[::1"));
        assert!(refuse_host(&uri, &HeaderMap::new(), &[]).is_ok());
    }

    #[test]
    fn every_host_is_judged_not_the_first() {
        let allowed = vec!["127.0.0.1".to_owned()];
        let uri = http::Uri::from_static("/v1/tools");
        let two = headers(&[("host", "127.0.0.1:8080"), ("host", "evil.example")]);
        let refused = refuse_host(&uri, &two, &allowed).err().unwrap();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        // Even with the check disabled, two Hosts are ambiguous.
        assert!(refuse_host(&uri, &two, &[]).is_err());
        let absolute = http::Uri::from_static("http://evil.example/v1/tools");
        let one = headers(&[("host", "127.0.0.1:8080")]);
        assert!(refuse_host(&absolute, &one, &allowed).is_err());
        let same = http::Uri::from_static("http://127.0.0.1:8080/v1/tools");
        assert!(refuse_host(&same, &one, &allowed).is_ok());
        // An absolute target alone is judged like a Host.
        assert!(refuse_host(&absolute, &HeaderMap::new(), &allowed).is_err());
    }

    #[test]
    fn origins() {
        assert!(same_origin("http://127.0.0.1:8080", Some("127.0.0.1:8080")));
        assert!(same_origin("http://LOCALHOST:8080", Some("localhost:8080")));
        assert!(same_origin("http://[::1]:8080", Some("[::1]:8080")));
        assert!(same_origin(
            "https://tools.example.com",
            Some("tools.example.com")
        ));
        assert!(!same_origin(
            "http://127.0.0.1:9999",
            Some("127.0.0.1:8080")
        ));
        assert!(!same_origin("http://evil.example", Some("127.0.0.1:8080")));
        assert!(!same_origin("null", Some("127.0.0.1:8080")));
        assert!(!same_origin("http://127.0.0.1:8080", None));
        let cors = CorsConfig {
            allowed_origins: vec!["https://app.example.com".into()],
        };
        assert!(cors.allows("https://app.example.com"));
        assert!(cors.allows("https://APP.example.com/"));
        assert!(!cors.allows("https://app.example.com.evil.example"));
        assert!(cors.validate().is_ok());
        let bad = CorsConfig {
            allowed_origins: vec!["https://app.example.com/path".into()],
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn json_bodies_only() {
        let refused = |pairs: &[(&'static str, &'static str)]| {
            refuse_content_type(&Method::POST, &headers(pairs)).map(|r| r.status)
        };
        assert_eq!(refused(&[("content-type", "application/json")]), None);
        assert_eq!(
            refused(&[("content-type", "Application/JSON; charset=utf-8")]),
            None
        );
        assert_eq!(
            refused(&[("content-type", "application/merge-patch+json")]),
            None
        );
        for foreign in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
        ] {
            let mut map = HeaderMap::new();
            map.insert(header::CONTENT_TYPE, HeaderValue::from_static(foreign));
            assert_eq!(
                refuse_content_type(&Method::POST, &map).map(|r| r.status),
                Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
                "{foreign}"
            );
        }
        // A body without any Content-Type is refused; no body at all is fine.
        assert!(refused(&[("content-length", "12")]).is_some());
        assert_eq!(refused(&[("content-length", "0")]), None);
        assert!(
            refuse_content_type(&Method::GET, &headers(&[("content-type", "text/plain")]))
                .is_none()
        );
    }
}
