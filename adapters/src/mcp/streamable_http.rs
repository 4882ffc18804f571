//! The streamable HTTP transport (MCP 2025-03-26 .. 2025-11-25).
//!
//! Every outgoing message is a POST. Notifications and responses wait for the server's
//! `202 Accepted`, in order. A request's POST is carried on in a task of its own: the
//! answer is either a JSON body or an SSE stream (notifications, e.g. progress, then the
//! response), dispatched in stream order. After `initialize` every POST carries
//! `MCP-Protocol-Version` and, when the server assigned one, `Mcp-Session-Id`; a `404`
//! for a session means it expired, which closes the connection so the supervisor
//! initializes a new one. An optional GET stream carries server-initiated messages
//! (`405` means the server offers none). The session is deleted on shutdown.
//!
//! Not implemented: resuming a broken SSE stream with `Last-Event-ID` (a call whose
//! stream breaks fails and can be retried).

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::framing::MAX_FRAME;
use super::http::{
    HttpClient, Reply, SendError, error_excerpt, has_content_type, read_body, read_sse,
};
use super::jsonrpc::{Outbound, Outgoing, Rpc, RpcFailure};
use super::transport::{Connected, Link};

const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const POST_ACCEPT: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const JSON: HeaderValue = HeaderValue::from_static("application/json");
const EVENT_STREAM: HeaderValue = HeaderValue::from_static("text/event-stream");

/// Opens a connection. Nothing goes on the wire until the first message (`initialize`).
pub(crate) fn connect(upstream: Arc<str>, http: Arc<HttpClient>) -> Connected {
    let stop = CancellationToken::new();
    let out = Arc::new_cyclic(|me| StreamableOut {
        me: me.clone(),
        upstream: upstream.clone(),
        http,
        session_id: Mutex::new(None),
        protocol_version: Mutex::new(None),
        rpc: OnceLock::new(),
        stop: stop.clone(),
    });
    let (rpc, events) = Rpc::new(upstream, out.clone());
    let _ = out.rpc.set(Arc::downgrade(&rpc));
    Connected {
        rpc,
        events,
        link: Box::new(StreamableLink { out, stop }),
    }
}

struct StreamableOut {
    /// Lets `send` hand an owned handle to the task that carries a request on.
    me: Weak<StreamableOut>,
    upstream: Arc<str>,
    http: Arc<HttpClient>,
    session_id: Mutex<Option<HeaderValue>>,
    protocol_version: Mutex<Option<HeaderValue>>,
    /// Weak: the Rpc owns this outbound.
    rpc: OnceLock<Weak<Rpc>>,
    /// Cancels the background POSTs and the GET stream of this connection.
    stop: CancellationToken,
}

impl StreamableOut {
    fn rpc(&self) -> Option<Arc<Rpc>> {
        self.rpc.get().and_then(Weak::upgrade)
    }

    fn session_id(&self) -> Option<HeaderValue> {
        self.session_id
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sends a request with `extra` headers and the session's headers (its id and
    /// the negotiated version, once known).
    async fn send(
        &self,
        method: Method,
        mut extra: Vec<(HeaderName, HeaderValue)>,
        body: Vec<u8>,
    ) -> Result<Reply, SendError> {
        if let Some(sid) = self.session_id() {
            extra.push((SESSION_ID, sid));
        }
        let version = self
            .protocol_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(v) = version {
            extra.push((PROTOCOL_VERSION, v));
        }
        self.http.send(method, extra, body).await
    }

    /// POSTs `body` with `trace` (the message's trace context as headers, see
    /// [`super::http::trace_headers`]).
    async fn post(
        &self,
        body: Vec<u8>,
        trace: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<Reply, SendError> {
        let mut extra = trace;
        extra.reserve(4);
        extra.push((ACCEPT, POST_ACCEPT));
        extra.push((CONTENT_TYPE, JSON));
        self.send(Method::POST, extra, body).await
    }

    /// Remembers the session id the server assigned (on the initialize response).
    fn learn_session(&self, resp: &Reply) {
        if let Some(sid) = resp.headers().get(SESSION_ID) {
            let mut slot = self.session_id.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                let mut sid = sid.clone();
                // The session id is a bearer credential for the session: keep it out of logs.
                sid.set_sensitive(true);
                *slot = Some(sid);
            }
        }
    }

    /// A 404 while we hold a session id: the server forgot the session.
    fn session_expired(&self, status: StatusCode) -> bool {
        if status == StatusCode::NOT_FOUND && self.session_id().is_some() {
            self.session_lost("the server ended the MCP session (HTTP 404)");
            return true;
        }
        false
    }

    /// Closes the connection so the supervisor initializes a new session; pending
    /// calls fail as unavailable (retryable) rather than as tool failures.
    fn session_lost(&self, why: &str) {
        if let Some(rpc) = self.rpc() {
            rpc.close(format!("{why}; re-initializing"));
        }
    }

    /// The spec says a forgotten session gets a 404, but widely used servers (the MCP
    /// TypeScript SDK's examples, server-everything) answer 400 "No valid session ID"
    /// after a restart. Recognized by status and wording, only while we hold a session.
    fn is_session_rejection(&self, status: StatusCode, body: &str) -> bool {
        status == StatusCode::BAD_REQUEST
            && self.session_id().is_some()
            && body.to_ascii_lowercase().contains("session")
    }

    /// Carries a request's POST to its answer, dispatching what the server sends.
    async fn run_request(
        self: Arc<Self>,
        body: Vec<u8>,
        trace: Vec<(HeaderName, HeaderValue)>,
        id: u64,
    ) {
        let Some(rpc) = self.rpc() else { return };
        let resp = match self.post(body, trace).await {
            Ok(r) => r,
            Err(SendError {
                is_connect, detail, ..
            }) => {
                if is_connect {
                    // The server is gone: reconnect (with backoff) rather than failing
                    // calls one by one.
                    rpc.close(format!("cannot reach the server: {detail}"));
                } else {
                    rpc.fail(id, RpcFailure::Transport(format!("POST failed: {detail}")));
                }
                return;
            }
        };
        self.learn_session(&resp);
        let status = resp.status();
        if self.session_expired(status) {
            return;
        }
        if status == StatusCode::ACCEPTED {
            // No answer on this POST; it may come on the GET stream.
            return;
        }
        if !status.is_success() {
            // Servers often put a JSON-RPC error in the body (e.g. 400 with a
            // message); prefer it, it says more than the status.
            let is_json = has_content_type(&resp, "application/json");
            let excerpt = if is_json {
                match tokio::time::timeout(self.http.timeout, read_body(resp, MAX_FRAME)).await {
                    Ok(Ok(body)) => {
                        let text = String::from_utf8_lossy(&body).into_owned();
                        if self.is_session_rejection(status, &text) {
                            self.session_lost("the server no longer knows the MCP session");
                            return;
                        }
                        rpc.dispatch_bytes(&body, Some(id));
                        text
                    }
                    _ => format!("HTTP {status}"),
                }
            } else {
                error_excerpt(resp, self.http.timeout).await
            };
            if rpc.is_pending(id) {
                let mut excerpt = excerpt;
                super::jsonrpc::truncate_utf8(&mut excerpt, 300);
                rpc.fail(
                    id,
                    RpcFailure::Transport(format!("HTTP {status}: {excerpt}")),
                );
            }
            return;
        }
        if has_content_type(&resp, "text/event-stream") {
            let ended = read_sse(&self.upstream, resp, MAX_FRAME, |ev| {
                if ev.event == "message" {
                    rpc.dispatch_bytes(ev.data.as_bytes(), Some(id));
                }
                // The server closes the stream after the response; stop reading then
                // even if it does not.
                rpc.is_pending(id)
            })
            .await;
            if rpc.is_pending(id) {
                rpc.fail(
                    id,
                    RpcFailure::Transport(format!("the response stream ended early ({ended})")),
                );
            }
        } else {
            match read_body(resp, MAX_FRAME).await {
                Ok(body) => rpc.dispatch_bytes(&body, Some(id)),
                Err(e) => rpc.fail(id, RpcFailure::Transport(e)),
            }
            if rpc.is_pending(id) {
                rpc.fail(
                    id,
                    RpcFailure::Transport("the server's answer held no response".into()),
                );
            }
        }
    }

    /// Keeps the optional GET stream open for server-initiated messages.
    async fn run_get_stream(self: Arc<Self>) {
        let mut delay = Duration::from_millis(500);
        // Once the stream has worked, its failures say something about the session
        // (the server restarted); before that they may only mean "no GET stream here".
        let mut worked = false;
        loop {
            let Some(rpc) = self.rpc() else { return };
            if rpc.closed_reason().is_some() {
                return;
            }
            let req = self.send(Method::GET, vec![(ACCEPT, EVENT_STREAM)], Vec::new());
            match tokio::time::timeout(self.http.timeout, req).await {
                Ok(Ok(resp)) if resp.status().is_success() => {
                    worked = true;
                    delay = Duration::from_millis(500);
                    let ended = read_sse(&self.upstream, resp, MAX_FRAME, |ev| {
                        if ev.event == "message" {
                            rpc.dispatch_bytes(ev.data.as_bytes(), None);
                        }
                        true
                    })
                    .await;
                    tracing::debug!(upstream = %self.upstream, reason = %ended, "GET stream ended");
                }
                Ok(Ok(resp)) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => {
                    tracing::debug!(upstream = %self.upstream, "server offers no GET stream");
                    return;
                }
                Ok(Ok(resp)) => {
                    let status = resp.status();
                    if self.session_expired(status) {
                        return;
                    }
                    if worked && status == StatusCode::BAD_REQUEST {
                        self.session_lost("the server no longer knows the MCP session");
                        return;
                    }
                    tracing::debug!(upstream = %self.upstream, status = %status, "GET stream refused");
                    return;
                }
                Ok(Err(SendError {
                    is_connect, detail, ..
                })) => {
                    if is_connect {
                        // The server is unreachable: show it (Reconnecting) now rather
                        // than at the next call.
                        rpc.close(format!("cannot reach the server: {detail}"));
                        return;
                    }
                    tracing::debug!(upstream = %self.upstream, error = %detail, "GET stream failed")
                }
                Err(_) => tracing::debug!(upstream = %self.upstream, "GET stream timed out"),
            }
            drop(rpc);
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }
}

#[async_trait]
impl Outbound for StreamableOut {
    async fn send(&self, msg: Outgoing, id: Option<u64>, _deadline: Instant) -> Result<(), String> {
        let trace = super::http::trace_headers(&msg);
        let body = msg.json;
        if let Some(id) = id {
            let Some(me) = self.me.upgrade() else {
                return Err("connection closed".into());
            };
            // The POST runs inside the request that waits for its answer: no task of
            // its own, no wake-up of another worker thread to hand the answer over
            // (bench/HISTORY.md, "Call overhead against the bare proxy", item 3). The
            // caller's own deadline and cancellation end it by dropping it, which closes
            // the POST's connection: the server sees that.
            tokio::select! {
                biased;
                _ = me.run_request(body, trace, id) => {}
                _ = self.stop.cancelled() => {}
            }
            return Ok(());
        }
        let resp = tokio::time::timeout(self.http.timeout, self.post(body, trace))
            .await
            .map_err(|_| "POST timed out".to_owned())?
            .map_err(|e| format!("POST failed: {}", e.detail))?;
        let status = resp.status();
        if self.session_expired(status) {
            return Err("session expired".into());
        }
        if !status.is_success() {
            let excerpt = error_excerpt(resp, self.http.timeout).await;
            if self.is_session_rejection(status, &excerpt) {
                self.session_lost("the server no longer knows the MCP session");
            }
            return Err(excerpt);
        }
        Ok(())
    }
}

struct StreamableLink {
    out: Arc<StreamableOut>,
    stop: CancellationToken,
}

#[async_trait]
impl Link for StreamableLink {
    fn after_initialize(&self, protocol_version: &str) {
        if let Ok(v) = HeaderValue::from_str(protocol_version) {
            *self
                .out
                .protocol_version
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(v);
        }
        let out = self.out.clone();
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = out.run_get_stream() => {}
                _ = stop.cancelled() => {}
            }
        });
    }

    async fn close(&self) {
        self.stop.cancel();
        if let Some(rpc) = self.out.rpc() {
            rpc.close("shut down");
        }
        if self.out.session_id().is_some() {
            let req = self.out.send(Method::DELETE, Vec::new(), Vec::new());
            let timeout = self.out.http.timeout.min(Duration::from_secs(5));
            match tokio::time::timeout(timeout, req).await {
                Ok(Ok(resp)) => {
                    tracing::debug!(upstream = %self.out.upstream, status = %resp.status(), "deleted MCP session")
                }
                _ => {
                    tracing::debug!(upstream = %self.out.upstream, "could not delete the MCP session")
                }
            }
        }
    }
}

impl Drop for StreamableLink {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
