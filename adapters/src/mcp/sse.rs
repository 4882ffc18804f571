//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer offers as a
//! client.
//!
//! A GET on the configured URL opens an SSE stream. Its first `endpoint` event names the
//! URL to POST messages to (usually relative, with a session id in the query); every
//! message from the server, responses included, arrives as a `message` event on the
//! stream, read in order by one task. Each outgoing message is a POST answered with
//! `202 Accepted`. When the stream ends the connection is closed and the supervisor
//! reconnects with backoff.
//!
//! The endpoint must be on the same origin as the SSE URL: the configured headers (often
//! credentials) go with every POST, and a server must not be able to send them elsewhere.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::framing::MAX_FRAME;
use super::http::{HttpClient, Reply, error_chain, error_excerpt, read_sse};
use super::jsonrpc::{Outbound, Outgoing, Rpc};
use super::transport::{Connected, Link};

/// Opens the SSE stream and waits (bounded by the HTTP timeout) for the endpoint.
pub(crate) async fn connect(
    upstream: Arc<str>,
    http: Arc<HttpClient>,
) -> Result<Connected, String> {
    let req = http
        .client
        .get(http.url.clone())
        .headers(http.headers.clone())
        .header(ACCEPT, "text/event-stream");
    let resp = tokio::time::timeout(http.timeout, req.send())
        .await
        .map_err(|_| "opening the SSE stream timed out".to_owned())?
        .map_err(|e| format!("opening the SSE stream failed: {}", error_chain(e)))?;
    if !resp.status().is_success() {
        return Err(format!(
            "opening the SSE stream failed: {}",
            error_excerpt(Reply::Reqwest(resp), http.timeout).await
        ));
    }

    let out = Arc::new(SseOut {
        http: http.clone(),
        endpoint: OnceLock::new(),
    });
    let (rpc, events) = Rpc::new(upstream.clone(), out.clone());
    let stop = CancellationToken::new();
    let (endpoint_tx, endpoint_rx) = oneshot::channel::<Result<Url, String>>();

    let name = upstream.clone();
    let reader_rpc = rpc.clone();
    let reader_stop = stop.clone();
    let base = http.url.clone();
    tokio::spawn(async move {
        let mut endpoint_tx = Some(endpoint_tx);
        let read = read_sse(&upstream, Reply::Reqwest(resp), MAX_FRAME, |ev| {
            match ev.event.as_str() {
                "endpoint" => {
                    let resolved = resolve_endpoint(&base, ev.data.trim());
                    match (&resolved, out.endpoint.get()) {
                        (Ok(url), None) => {
                            let _ = out.endpoint.set(url.clone());
                        }
                        (Ok(_), Some(_)) => {
                            tracing::debug!(upstream = %upstream, "ignoring a second endpoint event")
                        }
                        (Err(e), _) => {
                            tracing::warn!(upstream = %upstream, error = %e, "bad endpoint event")
                        }
                    }
                    if let Some(tx) = endpoint_tx.take() {
                        let _ = tx.send(resolved);
                    }
                }
                "message" => reader_rpc.dispatch_bytes(ev.data.as_bytes(), None),
                other => tracing::debug!(upstream = %upstream, event = other, "ignoring SSE event"),
            }
            true
        });
        let reason = tokio::select! {
            r = read => format!("the SSE stream ended ({r})"),
            _ = reader_stop.cancelled() => "shut down".to_owned(),
        };
        reader_rpc.close(reason);
    });

    let endpoint = tokio::time::timeout(http.timeout, endpoint_rx).await;
    match endpoint {
        Ok(Ok(Ok(url))) => {
            tracing::debug!(upstream = %name, path = url.path(), "SSE endpoint received");
        }
        Ok(Ok(Err(e))) => {
            stop.cancel();
            return Err(e);
        }
        Ok(Err(_)) => {
            stop.cancel();
            return Err(rpc
                .closed_reason()
                .unwrap_or_else(|| "the SSE stream ended before an endpoint event".into()));
        }
        Err(_) => {
            stop.cancel();
            return Err("the SSE stream sent no endpoint event in time".into());
        }
    }
    Ok(Connected {
        rpc,
        events,
        link: Box::new(SseLink { stop }),
    })
}

/// Resolves the endpoint against the SSE URL, refusing another origin.
fn resolve_endpoint(base: &Url, data: &str) -> Result<Url, String> {
    let url = base
        .join(data)
        .map_err(|e| format!("the endpoint event is not a URL: {e}"))?;
    if url.origin() != base.origin() {
        return Err(format!(
            "the endpoint is on another origin ({}) than the SSE stream; refused so the \
             configured headers are not sent there",
            url.origin().ascii_serialization()
        ));
    }
    Ok(url)
}

struct SseOut {
    http: Arc<HttpClient>,
    endpoint: OnceLock<Url>,
}

#[async_trait]
impl Outbound for SseOut {
    async fn send(
        &self,
        msg: Outgoing,
        _id: Option<u64>,
        _deadline: Instant,
    ) -> Result<(), String> {
        let endpoint = self.endpoint.get().ok_or("no endpoint yet")?.clone();
        let trace = super::http::trace_headers(&msg);
        let body = msg.json;
        let req = self
            .http
            .client
            .post(endpoint)
            .headers(self.http.headers.clone())
            .headers(trace.into_iter().collect())
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let resp = tokio::time::timeout(self.http.timeout, req.send())
            .await
            .map_err(|_| "POST timed out".to_owned())?
            .map_err(|e| format!("POST failed: {}", error_chain(e)))?;
        if !resp.status().is_success() {
            return Err(error_excerpt(Reply::Reqwest(resp), self.http.timeout).await);
        }
        Ok(())
    }
}

struct SseLink {
    stop: CancellationToken,
}

#[async_trait]
impl Link for SseLink {
    async fn close(&self) {
        // Dropping the stream ends the server's session.
        self.stop.cancel();
    }
}

impl Drop for SseLink {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_endpoints_on_the_same_origin_only() {
        let base = Url::parse("http://127.0.0.1:3001/sse").unwrap();
        let url = resolve_endpoint(&base, "/message?sessionId=abc").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:3001/message?sessionId=abc");
        assert!(resolve_endpoint(&base, "http://evil.example/message").is_err());
    }
}
