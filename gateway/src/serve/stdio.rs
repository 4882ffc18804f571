//! MCP over stdio (`toolgate stdio`) for desktop clients, answered by the same
//! implementation as `/mcp` ([`super::mcp`]), so the two can never disagree:
//! each line read from stdin becomes an in-process `/mcp` request of this process's
//! tenant, and each JSON-RPC message of its answer (one JSON body, or every event of
//! an SSE stream) becomes one line on stdout.
//!
//! The process is one session: `initialize` makes it, a keep-alive renews it well
//! within `sessions.idle_ttl` (a desktop client idle for hours is not locked out),
//! and its stream of messages that belong to no request (`list_changed`, resource
//! updates) is copied to stdout as well. A 2026-07-28 client needs no `initialize`:
//! the headers that version mirrors from the body are derived from the body. Requests
//! run concurrently, so a long call never holds up `notifications/cancelled` or the
//! client's answer to a sampling request. Logs go to stderr, never stdout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderValue, Method, Request};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::auth::Admitted;
use super::mcp::McpSessions;
use super::mcp::error::McpError;
use crate::app::App;
use crate::gateway::Gateway;
use crate::policy::Tenant;

/// Lines waiting for stdout; a full queue makes the answering tasks wait.
const OUTPUT_QUEUE: usize = 1024;

/// Serves one stdio client as `tenant` until stdin closes.
pub async fn run(app: Arc<App>, tenant: Arc<Tenant>) -> anyhow::Result<()> {
    let stop = CancellationToken::new();
    let gateway = app.gateway.clone();
    let door = Arc::new(Door {
        sessions: McpSessions::new(&app, stop.clone()),
        gateway: gateway.clone(),
        tenant,
        session: std::sync::Mutex::new(None),
    });
    let (out, mut lines) = mpsc::channel::<Bytes>(OUTPUT_QUEUE);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            stdout.write_all(&line).await?;
            stdout.write_all(b"\n").await?;
            stdout.flush().await?;
        }
        anyhow::Ok(())
    });

    let limit = gateway.config().max_request_body_bytes;
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut tasks = tokio::task::JoinSet::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        // Bounded: a line longer than a request body may be is read no further.
        let read = (&mut stdin)
            .take(limit as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            break;
        }
        if line.len() > limit && !line.ends_with(b"\n") {
            let _ = out.send(too_long(limit)).await;
            // Skip the rest of the oversized line.
            let mut rest = Vec::new();
            stdin.read_until(b'\n', &mut rest).await?;
            continue;
        }
        let message = Bytes::copy_from_slice(line.trim_ascii());
        if message.is_empty() {
            continue;
        }
        if is_initialize(&message) {
            // Inline: what follows needs the session it makes.
            door.initialize(message, &out, &stop).await;
        } else {
            let (door, out) = (door.clone(), out.clone());
            tasks.spawn(async move { door.answer(message, &out).await });
        }
        // Finished answers are reaped as we go, so the set stays as large as the
        // requests in flight.
        while tasks.try_join_next().is_some() {}
    }
    door.end().await;
    stop.cancel();
    tasks.abort_all();
    drop(out);
    drop(door);
    writer.await??;
    Ok(())
}

/// What every stdin line's request goes through.
struct Door {
    sessions: McpSessions,
    gateway: Arc<Gateway>,
    tenant: Arc<Tenant>,
    /// The session `initialize` made, and its protocol version.
    session: std::sync::Mutex<Option<(String, String)>>,
}

impl Door {
    fn session(&self) -> Option<(String, String)> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The caller of a request: this tenant, and the process's session (renewed;
    /// made again under its id should the store have lost it).
    async fn admitted(&self) -> Admitted {
        let session = match self.session() {
            Some((id, _)) => match self
                .gateway
                .sessions
                .get_or_create(&id, &self.tenant.name)
                .await
            {
                Ok(session) => Some(session),
                Err(error) => {
                    tracing::warn!(%error, "the stdio session could not be read");
                    None
                }
            },
            None => None,
        };
        Admitted {
            tenant: self.tenant.clone(),
            session,
        }
    }

    async fn answer(&self, message: Bytes, out: &mpsc::Sender<Bytes>) {
        let request = self.request(Method::POST, message);
        let response = self
            .sessions
            .route_trusted(request, self.admitted().await)
            .await;
        copy_messages(response, out).await;
    }

    async fn initialize(
        &self,
        message: Bytes,
        out: &mpsc::Sender<Bytes>,
        stop: &CancellationToken,
    ) {
        let request = self.request(Method::POST, message);
        let response = self
            .sessions
            .route_trusted(
                request,
                Admitted {
                    tenant: self.tenant.clone(),
                    session: None,
                },
            )
            .await;
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        if let Some(id) = id {
            let version = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["result"]["protocolVersion"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let first = self
                .session
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .replace((id.clone(), version))
                .is_none();
            if first {
                self.start_stream(out.clone(), stop.clone()).await;
                self.keep_alive(id, stop.clone());
            }
        }
        if !body.is_empty() {
            let _ = out.send(body).await;
        }
    }

    /// Copies the session's own stream (messages that belong to no request) to stdout.
    async fn start_stream(&self, out: mpsc::Sender<Bytes>, stop: CancellationToken) {
        let mut request = self.request(Method::GET, Bytes::new());
        request.headers_mut().insert(
            http::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let response = self
            .sessions
            .route_trusted(request, self.admitted().await)
            .await;
        tokio::spawn(async move {
            tokio::select! {
                _ = copy_messages(response, &out) => {}
                _ = stop.cancelled() => {}
            }
        });
    }

    /// Renews the session well within `sessions.idle_ttl` until the process ends.
    fn keep_alive(&self, id: String, stop: CancellationToken) {
        let (gateway, tenant) = (self.gateway.clone(), self.tenant.name.clone());
        let every = (gateway.config().sessions.idle_ttl / 3)
            .clamp(Duration::from_millis(200), Duration::from_secs(60));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.cancelled() => return,
                }
                if let Err(error) = gateway.sessions.get_or_create(&id, &tenant).await {
                    tracing::warn!(%error, "renewing the stdio session failed; retrying");
                }
            }
        });
    }

    /// stdin closed: the session ends (DELETE), as an HTTP client's would.
    async fn end(&self) {
        if self.session().is_some() {
            let request = self.request(Method::DELETE, Bytes::new());
            let _ = self
                .sessions
                .route_trusted(request, self.admitted().await)
                .await;
        }
    }

    /// The in-process `/mcp` request for one stdin message: the headers an HTTP
    /// client would send, taken from the session or, for a sessionless
    /// (2026-07-28) message, from its body.
    fn request(&self, method: Method, body: Bytes) -> Request<Body> {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        match self.session() {
            Some((id, version)) => {
                insert(&mut headers, "mcp-session-id", &id);
                insert(&mut headers, "mcp-protocol-version", &version);
            }
            None => mirror_sessionless_headers(&body, &mut headers),
        }
        let mut request = Request::new(Body::from(body));
        *request.method_mut() = method;
        *request.uri_mut() = http::Uri::from_static("/mcp");
        *request.headers_mut() = headers;
        request
    }
}

fn insert(headers: &mut http::HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

/// The version, method and name headers 2026-07-28 mirrors from the body.
fn mirror_sessionless_headers(body: &[u8], headers: &mut http::HeaderMap) {
    #[derive(Deserialize)]
    struct Message {
        #[serde(default)]
        method: Option<String>,
        #[serde(default)]
        params: Option<Value>,
    }
    let Ok(message) = serde_json::from_slice::<Message>(body) else {
        return;
    };
    let params = message.params.unwrap_or(Value::Null);
    if let Some(version) = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str() {
        insert(headers, "mcp-protocol-version", version);
    }
    if let Some(method) = &message.method {
        insert(headers, "mcp-method", method);
        let Some(field) = super::mcp::name_field(method) else {
            return;
        };
        if let Some(name) = params[field].as_str() {
            insert(headers, "mcp-name", name);
        }
    }
}

fn is_initialize(message: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Method<'a> {
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method>(message)
        .is_ok_and(|m| m.method.as_deref() == Some("initialize"))
}

/// Every JSON-RPC message of an `/mcp` answer, one per line: the JSON body, or the
/// `data` of every SSE event (comments and empty events are not messages).
async fn copy_messages(response: axum::response::Response, out: &mpsc::Sender<Bytes>) {
    let is_stream = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let mut body = response.into_body().into_data_stream();
    if !is_stream {
        let mut whole = BytesMut::new();
        while let Some(Ok(chunk)) = body.next().await {
            whole.extend_from_slice(&chunk);
        }
        if !whole.is_empty() {
            let _ = out.send(whole.freeze()).await;
        }
        return;
    }
    let mut pending = BytesMut::new();
    while let Some(Ok(chunk)) = body.next().await {
        pending.extend_from_slice(&chunk);
        while let Some(end) = find(&pending, b"\n\n") {
            let event = pending.split_to(end + 2);
            let mut data = BytesMut::new();
            for line in event[..].split(|b| *b == b'\n') {
                if let Some(value) = line.strip_prefix(b"data:") {
                    if !data.is_empty() {
                        data.extend_from_slice(b"\n");
                    }
                    data.extend_from_slice(value.strip_prefix(b" ").unwrap_or(value));
                }
            }
            if !data.trim_ascii().is_empty() && out.send(data.freeze()).await.is_err() {
                return;
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn too_long(limit: usize) -> Bytes {
    Bytes::from(
        McpError::body_too_large(format!(
            "the message is longer than max_request_body_bytes ({limit} bytes); it was skipped"
        ))
        .into_message("null"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessionless_messages_carry_the_headers_their_body_implies() {
        let mut headers = http::HeaderMap::new();
        mirror_sessionless_headers(
            br#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"toolgate://a/x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            &mut headers,
        );
        assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
        assert_eq!(headers["mcp-method"], "resources/read");
        assert_eq!(headers["mcp-name"], "toolgate://a/x");
        let mut none = http::HeaderMap::new();
        mirror_sessionless_headers(b"not json", &mut none);
        assert!(none.is_empty());
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
    }

    #[tokio::test]
    async fn every_sse_event_becomes_one_line_and_comments_none() {
        let body =
            "id: 0\nretry: 3000\ndata: \n\n: keep-alive\n\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n";
        let mut response = axum::response::Response::new(Body::from(body));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        let (out, mut lines) = mpsc::channel(8);
        copy_messages(response, &out).await;
        drop(out);
        let mut got = Vec::new();
        while let Some(line) = lines.recv().await {
            got.push(String::from_utf8(line.to_vec()).unwrap());
        }
        assert_eq!(got, [r#"{"a":1}"#, r#"{"b":2}"#]);
    }
}
