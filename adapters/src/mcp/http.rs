//! What the two HTTP transports share: one pooled client per upstream (kept across
//! reconnects), the configured headers (marked sensitive so they never show in debug
//! output or logs), bounded body reading and SSE stream reading.
//!
//! Requests to the endpoint itself ([`HttpClient::send`]) go through hyper's HTTP/1
//! client directly, on connections kept by [`super::http1_pool`], when the endpoint is
//! plain `http://` and no proxy setting in the environment covers it. reqwest wraps
//! every request in layers a JSON-RPC POST does not need (redirects, retries, the URL
//! parsed twice more per request): a large share of the instructions of a whole call
//! through the gateway (bench/README.md).
//! reqwest carries everything else: `https://` (TLS), proxies, and the legacy SSE
//! transport's requests.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Response, Url};

use super::HttpConfig;
use super::framing::{SseDecoder, SseEvent, SseItem};
pub(crate) use super::http1_pool::SendError;
use super::http1_pool::{Leased, MCP_LIMITS, Pool, host_header, origin_form};
use super::jsonrpc::{Outgoing, truncate_utf8};

/// An HTTP 401 or 403 from the endpoint: the credentials a request carried were
/// refused. `challenge` is the `WWW-Authenticate` header as the server sent it (cut to
/// [`MAX_CHALLENGE`] bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub challenge: Option<String>,
}

/// Where a connection notes its last [`Refusal`], for whoever holds the upstream
/// (one slot per upstream, kept across reconnects).
pub(crate) type RefusalSlot = Arc<std::sync::Mutex<Option<Refusal>>>;

/// A `WWW-Authenticate` header longer than this is cut: it is parsed, never echoed
/// whole, and a server must not make the gateway hold megabytes per refusal.
const MAX_CHALLENGE: usize = 4096;

/// The per-upstream HTTP side: client, endpoint and headers.
pub(crate) struct HttpClient {
    pub client: reqwest::Client,
    /// The endpoint's client when it is plain HTTP without a proxy (see the module
    /// docs), with the endpoint as hyper takes it (parsed once); `None`: reqwest.
    direct: Option<Direct>,
    pub url: Url,
    pub headers: HeaderMap,
    /// Bounds connecting and each protocol-level wait (not tool calls).
    pub timeout: Duration,
    /// The last 401 or 403 the endpoint answered.
    refusals: RefusalSlot,
}

/// hyper's client for a plain-HTTP endpoint (see the module docs).
struct Direct {
    pool: Arc<Pool>,
    /// The request target: the endpoint's path and query (parsed once).
    target: http::Uri,
    /// Its `Host` header, written once: hyper's client would format it again for
    /// every request.
    host: Option<HeaderValue>,
}

/// An answer from the endpoint, from whichever client carried the request.
pub(crate) enum Reply {
    Direct(Leased),
    Reqwest(Response),
}

impl Reply {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Reply::Direct(leased) => leased.response.status(),
            Reply::Reqwest(resp) => resp.status(),
        }
    }

    pub(crate) fn headers(&self) -> &HeaderMap {
        match self {
            Reply::Direct(leased) => leased.response.headers(),
            Reply::Reqwest(resp) => resp.headers(),
        }
    }

    /// The next piece of the body; `None` at its end. The error says what broke.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, String> {
        match self {
            Reply::Direct(leased) => loop {
                match leased.response.body_mut().frame().await {
                    None => {
                        leased.ended();
                        return Ok(None);
                    }
                    Some(Err(e)) => return Err(crate::error::error_chain(&e)),
                    Some(Ok(frame)) => {
                        // Trailers carry nothing for us.
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some(data));
                        }
                    }
                }
            },
            Reply::Reqwest(resp) => resp.chunk().await.map_err(error_chain),
        }
    }
}

impl HttpClient {
    /// Builds the client; errors name the offending header or URL, never a value.
    #[cfg(test)]
    pub(crate) fn new(cfg: &HttpConfig) -> Result<Arc<Self>, String> {
        Self::noting_refusals(cfg, RefusalSlot::default())
    }

    /// [`HttpClient::new`], noting every 401 or 403 the endpoint answers in `refusals`.
    pub(crate) fn noting_refusals(
        cfg: &HttpConfig,
        refusals: RefusalSlot,
    ) -> Result<Arc<Self>, String> {
        let url = Url::parse(&cfg.url).map_err(|e| format!("invalid url: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("unsupported url scheme '{}'", url.scheme()));
        }
        let mut headers = HeaderMap::new();
        for (key, value) in &cfg.headers {
            let name = HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| format!("invalid header name '{key}'"))?;
            let mut value = HeaderValue::from_str(value.expose())
                .map_err(|_| format!("header '{key}' has an invalid value"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            // Configured headers never follow a redirect to another origin.
            .redirect(crate::redirect::policy(10, false, |_| Ok(())))
            .connect_timeout(cfg.timeout)
            .tcp_keepalive(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| format!("could not build the HTTP client: {e}"))?;
        let direct = direct_uri(&url).map(|uri| {
            let mut connector = HttpConnector::new();
            // What the reqwest client above is set to.
            connector.set_connect_timeout(Some(cfg.timeout));
            connector.set_keepalive(Some(Duration::from_secs(30)));
            connector.set_nodelay(true);
            let host = host_header(&uri);
            let target = origin_form(&uri);
            Direct {
                pool: Pool::new(connector, uri, MCP_LIMITS),
                target,
                host,
            }
        });
        Ok(Arc::new(Self {
            client,
            direct,
            url,
            headers,
            timeout: cfg.timeout,
            refusals,
        }))
    }

    /// Notes `reply` when it is a refusal of the request's credentials.
    fn note(&self, reply: Reply) -> Reply {
        let status = reply.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let challenge = reply
                .headers()
                .get(http::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(|v| {
                    let mut v = v.to_owned();
                    truncate_utf8(&mut v, MAX_CHALLENGE);
                    v
                });
            let refusal = Refusal {
                status: status.as_u16(),
                challenge,
            };
            *self.refusals.lock().unwrap_or_else(|e| e.into_inner()) = Some(refusal);
        }
        reply
    }

    /// Sends a request to the endpoint with the configured headers, `extra` in place
    /// of any of the same name (the protocol's own headers win), and `body` (none when
    /// empty). Not bounded here: callers put their own deadline on the answer.
    pub(crate) async fn send(
        &self,
        method: Method,
        extra: Vec<(HeaderName, HeaderValue)>,
        body: Vec<u8>,
    ) -> Result<Reply, SendError> {
        let mut headers = self.headers.clone();
        for (name, value) in extra {
            headers.insert(name, value);
        }
        let Some(direct) = &self.direct else {
            let mut req = self
                .client
                .request(method, self.url.clone())
                .headers(headers);
            if !body.is_empty() {
                req = req.body(body);
            }
            return req
                .send()
                .await
                .map(|r| self.note(Reply::Reqwest(r)))
                .map_err(|e| SendError {
                    is_connect: e.is_connect(),
                    is_timeout: e.is_timeout(),
                    detail: error_chain(e),
                });
        };
        if let Some(host) = &direct.host {
            // A configured `Host` stays, as hyper would keep it.
            headers
                .entry(http::header::HOST)
                .or_insert_with(|| host.clone());
        }
        let mut req = http::Request::new(Full::new(Bytes::from(body)));
        *req.method_mut() = method;
        *req.uri_mut() = direct.target.clone();
        *req.headers_mut() = headers;
        Ok(self.note(Reply::Direct(direct.pool.send(req).await?)))
    }
}

/// The trace context a message carries in `params._meta` (`traceparent`,
/// `tracestate`: see [`crate::TraceContext`]) as HTTP headers too, for the server's
/// HTTP layer and the proxies on the way. Values that are not valid header values
/// are left out.
pub(crate) fn trace_headers(msg: &Outgoing) -> Vec<(HeaderName, HeaderValue)> {
    [
        ("traceparent", &msg.traceparent),
        ("tracestate", &msg.tracestate),
    ]
    .into_iter()
    .filter_map(|(name, value)| {
        let value = HeaderValue::from_str(value.as_deref()?).ok()?;
        Some((HeaderName::from_static(name), value))
    })
    .collect()
}

/// The endpoint for hyper's client, when it may take it: plain `http://`, no
/// credentials in the URL (reqwest turns them into a Basic `Authorization` header;
/// hyper would put them in `Host`), a URL hyper parses, and no proxy setting in the
/// environment covering it.
fn direct_uri(url: &Url) -> Option<http::Uri> {
    if url.scheme() != "http" || !url.username().is_empty() || url.password().is_some() {
        return None;
    }
    let mut url = url.clone();
    // reqwest never sends the fragment either.
    url.set_fragment(None);
    let uri: http::Uri = url.as_str().parse().ok()?;
    let proxied = hyper_util::client::proxy::matcher::Matcher::from_env()
        .intercept(&uri)
        .is_some();
    (!proxied).then_some(uri)
}

/// Whether a response declares `content-type` `want` (parameters ignored).
pub(crate) fn has_content_type(resp: &Reply, want: &str) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(want))
}

/// Reads a whole body, failing past `max` bytes.
pub(crate) async fn read_body(mut resp: Reply, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("reading the response failed: {e}"))?
    {
        if body.len() + chunk.len() > max {
            return Err(format!("response larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A short, bounded excerpt of an error response for messages (bodies of error pages
/// can be large HTML documents).
pub(crate) async fn error_excerpt(resp: Reply, timeout: Duration) -> String {
    let status = resp.status();
    let body = tokio::time::timeout(timeout, read_body(resp, 64 * 1024))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let mut text = String::from_utf8_lossy(&body).trim().to_owned();
    truncate_utf8(&mut text, 300);
    if text.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {text}")
    }
}

/// Reads an SSE response to its end, calling `on_event` for each event in order;
/// `on_event` returns `false` to stop early. Returns why the stream ended.
pub(crate) async fn read_sse(
    upstream: &str,
    mut resp: Reply,
    max: usize,
    mut on_event: impl FnMut(SseEvent) -> bool,
) -> String {
    let mut decoder = SseDecoder::new(max);
    let mut keep_going = true;
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                decoder.push(&chunk, &mut |item| match item {
                    SseItem::Event(ev) if keep_going => keep_going = on_event(ev),
                    SseItem::Event(_) => {}
                    SseItem::TooLong(n) => {
                        tracing::warn!(upstream, bytes = n, "skipping an oversized SSE event")
                    }
                });
                if !keep_going {
                    return "done".into();
                }
            }
            Ok(None) => return "the server closed the stream".into(),
            Err(e) => return format!("reading the stream failed: {e}"),
        }
    }
}

/// A reqwest error with its sources ("error sending request: … connection refused"),
/// without the URL: a URL can carry credentials in its query string.
pub(crate) fn error_chain(e: reqwest::Error) -> String {
    crate::error::error_chain(&e.without_url())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_trace_context_becomes_headers() {
        let msg = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "_meta": {
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "tracestate": "a=1", "progressToken": "tg-1"}}});
        let headers = trace_headers(&Outgoing::from_value(&msg));
        let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["traceparent", "tracestate"]);
        assert_eq!(headers[1].1, "a=1");
        let bad = serde_json::json!({"params": {"_meta": {"traceparent": "bad\nvalue"}}});
        assert!(trace_headers(&Outgoing::from_value(&bad)).is_empty());
        let none = serde_json::json!({"params": {}});
        assert!(trace_headers(&Outgoing::from_value(&none)).is_empty());
    }

    #[test]
    fn config_debug_output_hides_header_values() {
        let cfg = HttpConfig {
            url: "http://127.0.0.1:1/mcp".into(),
            headers: [("Authorization".to_owned(), "Bearer s3cret".into())].into(),
            timeout: Duration::from_secs(1),
        };
        let shown = format!("{cfg:?}");
        assert!(
            shown.contains("Authorization") && !shown.contains("s3cret"),
            "{shown}"
        );
        let client = HttpClient::new(&cfg).expect("client");
        let shown = format!("{:?}", client.headers);
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn only_plain_http_without_credentials_takes_the_direct_client() {
        let direct = |url: &str| direct_uri(&Url::parse(url).unwrap()).map(|u| u.to_string());
        // A proxy in this environment covering loopback sends everything to reqwest
        // (mcp_streamable_proxy.rs tests that path).
        let loopback: http::Uri = "http://127.0.0.1:8080/".parse().unwrap();
        if hyper_util::client::proxy::matcher::Matcher::from_env()
            .intercept(&loopback)
            .is_some()
        {
            eprintln!("SKIPPED: a proxy in the environment covers 127.0.0.1");
            return;
        }
        assert_eq!(
            direct("http://127.0.0.1:8080/mcp?x=1#frag").as_deref(),
            Some("http://127.0.0.1:8080/mcp?x=1")
        );
        assert!(direct("http://[::1]:9/mcp").is_some());
        let host = |url: &str| host_header(&url.parse().unwrap());
        assert_eq!(host("http://127.0.0.1:8080/mcp").unwrap(), "127.0.0.1:8080");
        assert_eq!(host("http://example.test/mcp").unwrap(), "example.test");
        assert_eq!(host("http://example.test:80/mcp").unwrap(), "example.test");
        assert_eq!(host("http://[::1]:9/mcp").unwrap(), "[::1]:9");
        assert_eq!(direct("https://example.com/mcp"), None);
        assert_eq!(direct("http://user:secret@127.0.0.1:8080/mcp"), None);
        assert_eq!(direct("http://user@127.0.0.1:8080/mcp"), None);
    }

    #[test]
    fn invalid_header_values_are_reported_without_the_value() {
        let cfg = HttpConfig {
            url: "http://127.0.0.1:1/mcp".into(),
            headers: [("X-Key".to_owned(), "bad\nvalue".into())].into(),
            timeout: Duration::from_secs(1),
        };
        let err = HttpClient::new(&cfg).err().expect("an error");
        assert!(err.contains("X-Key") && !err.contains("bad"), "{err}");
    }
}
