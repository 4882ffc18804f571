//! What the two HTTP transports share: one pooled `reqwest::Client` per upstream (kept
//! across reconnects), the configured headers (marked sensitive so they never show in
//! debug output or logs), bounded body reading and SSE stream reading.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Response, Url};

use super::HttpConfig;
use super::framing::{SseDecoder, SseEvent, SseItem};
use super::jsonrpc::truncate_utf8;

/// The per-upstream HTTP side: client, endpoint and headers.
pub(crate) struct HttpClient {
    pub client: reqwest::Client,
    pub url: Url,
    pub headers: HeaderMap,
    /// Bounds connecting and each protocol-level wait (not tool calls).
    pub timeout: Duration,
}

impl HttpClient {
    /// Builds the client; errors name the offending header or URL, never a value.
    pub(crate) fn new(cfg: &HttpConfig) -> Result<Arc<Self>, String> {
        let url = Url::parse(&cfg.url).map_err(|e| format!("invalid url: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("unsupported url scheme '{}'", url.scheme()));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &cfg.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("invalid header name '{name}'"))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("header '{name}' has an invalid value"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(cfg.timeout)
            .tcp_keepalive(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| format!("could not build the HTTP client: {e}"))?;
        Ok(Arc::new(Self {
            client,
            url,
            headers,
            timeout: cfg.timeout,
        }))
    }
}

/// Whether a response declares `content-type` `want` (parameters ignored).
pub(crate) fn has_content_type(resp: &Response, want: &str) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(want))
}

/// Reads a whole body, failing past `max` bytes.
pub(crate) async fn read_body(mut resp: Response, max: usize) -> Result<Vec<u8>, String> {
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
pub(crate) async fn error_excerpt(resp: Response, timeout: Duration) -> String {
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
    mut resp: Response,
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
