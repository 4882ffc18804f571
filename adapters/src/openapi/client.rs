//! The client every call to an OpenAPI upstream's API goes through: hyper-util's pooled
//! client over [`GuardedConnector`] (the SSRF guard where connections are made, TLS as
//! reqwest set it up), following redirects itself.
//!
//! reqwest carried these calls before. Its redirect, retry and timeout layers and the
//! URL parsed again on the way cost about a tenth of a REST tool call's instructions
//! (bench/HISTORY.md, "Call overhead against the bare proxy", item 6), and its SSRF
//! guard had to live in reqwest's resolver and redirect policy. What reqwest did that a
//! call relies on is kept here, and nothing more (no proxies: the guard must see every
//! name resolved; no decompression: reqwest had no such feature on):
//!
//! - `Accept: */*` unless the request sets one; credentials in the URL sent as Basic
//!   auth ([`take_credentials`]); the fragment never sent;
//! - redirects (301, 302, 303, 307, 308) followed at most [`MAX_REDIRECTS`] times,
//!   each hop judged by [`crate::redirect::judge`] (never to another origin: the
//!   request carries the operator's credentials) and [`ssrf::check_url`], POST turned
//!   into a body-less GET on 301/302 and every method but HEAD on 303, `Referer` set
//!   to the previous URL;
//! - TCP keepalive and connect timeouts (in [`GuardedConnector`]), idle connections
//!   kept 60 s (at most [`MAX_IDLE_PER_HOST`] per host).
//!
//! `http://` origins go on HTTP/1 connections of toolgate's own
//! ([`crate::mcp::http1_pool`], the same [`GuardedConnector`] dialing): hyper-util's
//! client spawns a task per HTTP/1 request to put its connection back after the body,
//! which the reader of the body does here ([`ApiResponse`]). `https://` keeps
//! hyper-util's client (TLS, HTTP/2 by ALPN, whose connections need no putting back).
//!
//! Bounding a whole call is the caller's (the call's deadline covers every hop and
//! the body).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    ACCEPT, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderValue, LOCATION,
    REFERER, TRANSFER_ENCODING,
};
use http::{Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Body as _;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use url::Url;

use super::connector::{GuardedConnector, tls_config};
use super::ssrf::{self, MAX_REDIRECTS};
use crate::error::{error_chain, is_timeout};
use crate::mcp::http1_pool::{self, Leased, Limits, Pool};

/// Idle connections kept per host: enough for a busy API's concurrency, bounded so
/// that a burst does not leave hundreds of sockets open for a minute.
const MAX_IDLE_PER_HOST: usize = 32;
/// How long an idle connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A request to an API.
pub(super) struct ApiRequest {
    pub method: Method,
    /// Without credentials (see [`take_credentials`]) or fragment.
    pub url: Url,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The API's answer to the last hop (an `http::Response` by `Deref`): read its body to
/// the end and its connection serves the next request.
pub(super) type ApiResponse = Leased;

/// Plain-HTTP origins with a pool of their own at most, per upstream: a spec names one
/// or a few servers (redirects never leave the first request's origin); past the
/// bound, requests take hyper-util's client.
const MAX_PLAIN_ORIGINS: usize = 16;

/// Why a request got no answer.
#[derive(Debug)]
pub(super) enum SendError {
    /// The URL did not pass the guard: nothing was sent.
    Refused(String),
    /// A wait on the way ran out (resolving or connecting).
    Timeout,
    /// The error and its causes in one line, without the URL (whose query may carry a
    /// key).
    Failed(String),
}

/// One upstream's API client (see the module docs).
#[derive(Clone)]
pub(super) struct ApiClient {
    client: Client<HttpsConnector<GuardedConnector>, Full<Bytes>>,
    /// The connector of `client`, for the `http://` pools.
    connector: GuardedConnector,
    /// One pool per `http://` origin (`host:port`).
    plain: Arc<Mutex<HashMap<String, Arc<Pool<GuardedConnector>>>>>,
    allow_private: bool,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl ApiClient {
    /// `timeout` bounds resolving and connecting.
    pub(super) fn new(allow_private: bool, timeout: Duration) -> Result<ApiClient, String> {
        ApiClient::with_connector(GuardedConnector::new(allow_private, timeout), allow_private)
    }

    fn with_connector(
        connector: GuardedConnector,
        allow_private: bool,
    ) -> Result<ApiClient, String> {
        let https = HttpsConnector::from((connector.clone(), tls_config()?));
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            // Without a timer the idle timeout is never applied.
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(MAX_IDLE_PER_HOST)
            .build(https);
        Ok(ApiClient {
            client,
            connector,
            plain: Arc::default(),
            allow_private,
        })
    }

    /// The pool for `uri`'s origin when it is plain HTTP (and the bound allows one).
    fn plain_pool(&self, uri: &Uri) -> Option<Arc<Pool<GuardedConnector>>> {
        if uri.scheme() != Some(&http::uri::Scheme::HTTP) {
            return None;
        }
        let origin = uri.authority()?.as_str();
        let mut pools = self.plain.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = pools.get(origin) {
            return Some(pool.clone());
        }
        if pools.len() >= MAX_PLAIN_ORIGINS {
            return None;
        }
        let endpoint: Uri = format!("http://{origin}/").parse().ok()?;
        let limits = Limits {
            idle_timeout: IDLE_TIMEOUT,
            max_idle: MAX_IDLE_PER_HOST,
        };
        let pool = Pool::new(self.connector.clone(), endpoint, limits);
        pools.insert(origin.to_owned(), pool.clone());
        Some(pool)
    }

    /// One hop: on the origin's own pool when it is plain HTTP, else hyper-util's
    /// client.
    async fn hop(&self, mut req: http::Request<Full<Bytes>>) -> Result<ApiResponse, SendError> {
        let Some(pool) = self.plain_pool(req.uri()) else {
            return match self.client.request(req).await {
                Ok(response) => Ok(Leased::unpooled(response)),
                Err(e) if is_timeout(&e) => Err(SendError::Timeout),
                Err(e) => Err(not_sent(&error_chain(&e))),
            };
        };
        // What hyper-util's client does before sending on HTTP/1: `Host` unless set,
        // the target in origin form.
        if let Some(host) = http1_pool::host_header(req.uri()) {
            req.headers_mut().entry(http::header::HOST).or_insert(host);
        }
        *req.uri_mut() = http1_pool::origin_form(req.uri());
        match pool.send(req).await {
            Ok(leased) => Ok(leased),
            Err(e) if e.is_timeout => Err(SendError::Timeout),
            Err(e) => Err(not_sent(&e.detail)),
        }
    }

    /// Sends `request`, following redirects (see the module docs). The first URL is
    /// the caller's to check ([`super::ssrf::Guard::call`] does); every hop after it is
    /// checked here.
    pub(super) async fn send(&self, request: ApiRequest) -> Result<ApiResponse, SendError> {
        let ApiRequest {
            mut method,
            mut url,
            mut headers,
            mut body,
        } = request;
        if !headers.contains_key(ACCEPT) {
            headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        }
        let mut previous: Vec<Url> = Vec::new();
        loop {
            let uri: Uri = url[..url::Position::AfterQuery]
                .parse()
                .map_err(|e| SendError::Failed(format!("builder error: {e}")))?;
            let mut req = http::Request::new(Full::new(body.clone()));
            *req.method_mut() = method.clone();
            *req.uri_mut() = uri;
            *req.headers_mut() = headers.clone();
            let resp = self.hop(req).await?;
            let status = resp.status();
            if !matches!(
                status,
                StatusCode::MOVED_PERMANENTLY
                    | StatusCode::FOUND
                    | StatusCode::SEE_OTHER
                    | StatusCode::TEMPORARY_REDIRECT
                    | StatusCode::PERMANENT_REDIRECT
            ) {
                return Ok(resp);
            }
            // Without a usable Location the redirect is the answer, as reqwest had it.
            let Some(mut next) = resp
                .headers()
                .get(LOCATION)
                .and_then(|l| std::str::from_utf8(l.as_bytes()).ok())
                .and_then(|l| url.join(l).ok())
            else {
                return Ok(resp);
            };
            // RFC 9110 15.4: 301 and 302 may turn a POST into a GET, 303 asks for one.
            let drop_body = match status {
                StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND => method == Method::POST,
                StatusCode::SEE_OTHER => true,
                _ => false,
            };
            if drop_body {
                if method != Method::HEAD {
                    method = Method::GET;
                }
                body = Bytes::new();
                for name in [
                    CONTENT_TYPE,
                    CONTENT_LENGTH,
                    CONTENT_ENCODING,
                    TRANSFER_ENCODING,
                ] {
                    headers.remove(name);
                }
            }
            previous.push(url);
            let allow_private = self.allow_private;
            crate::redirect::judge(MAX_REDIRECTS, false, &previous, &next, |u| {
                ssrf::check_url(u, allow_private)
            })
            .map_err(|e| SendError::Failed(format!("error following redirect: {e}")))?;
            // Every hop stays within the first request's origin, so the credentials on
            // it stay too (reqwest strips them only when the host changes).
            if let Some(referer) = previous.last().and_then(|from| referer(&next, from)) {
                headers.insert(REFERER, referer);
            }
            next.set_fragment(None);
            let _ = next.set_username("");
            let _ = next.set_password(None);
            url = next;
        }
    }
}

/// Moves credentials out of `url` into a Basic `Authorization` value, as reqwest did
/// with the user and password of a URL.
pub(super) fn take_credentials(url: &mut Url) -> Option<HeaderValue> {
    use base64::Engine;
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .ok()
            .map(String::from)
    };
    let user = decode(url.username())?;
    let password = match url.password() {
        Some(p) => Some(decode(p)?),
        None => None,
    };
    if user.is_empty() && password.is_none() {
        return None;
    }
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let raw = format!("{user}:{}", password.unwrap_or_default());
    let encoded = base64::engine::general_purpose::STANDARD.encode(raw);
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// The `Referer` for a hop from `from` to `next`: `from` without credentials or
/// fragment, and none from https to http.
fn referer(next: &Url, from: &Url) -> Option<HeaderValue> {
    if next.scheme() == "http" && from.scheme() == "https" {
        return None;
    }
    let mut referer = from.clone();
    let _ = referer.set_username("");
    let _ = referer.set_password(None);
    referer.set_fragment(None);
    HeaderValue::from_str(referer.as_str()).ok()
}

/// A request that got no answer, whichever client carried it.
fn not_sent(detail: &str) -> SendError {
    SendError::Failed(format!("error sending request: {detail}"))
}

/// Reads at most `max` bytes of the body; `true` when it was cut.
pub(super) async fn read_capped(
    mut resp: ApiResponse,
    max: u64,
) -> Result<(Vec<u8>, bool), SendError> {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let incoming = resp.body_mut();
    // The declared length sizes the buffer, within the limit and never more than 1 MB
    // on the API's word alone.
    let declared = incoming.size_hint().exact().unwrap_or(0);
    let mut body = Vec::with_capacity((declared.min(1 << 20) as usize).min(max));
    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(|e| {
            if is_timeout(&e) {
                SendError::Timeout
            } else {
                SendError::Failed(format!("error decoding response body: {}", error_chain(&e)))
            }
        })?;
        // Trailers carry nothing for us.
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let room = max.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    resp.ended();
    Ok((body, false))
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
