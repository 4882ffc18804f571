//! A raw MCP streamable-HTTP client for wire-level assertions.
//!
//! SDK clients hide exactly what some tests must see: the order of frames on one
//! response stream, JSON-RPC error codes for malformed input, HTTP statuses and
//! headers, byte-for-byte error objects. This client speaks the 2025-11-25 session
//! protocol (initialize, `Mcp-Session-Id`) and the sessionless 2026-07-28 one with
//! plain reqwest, optionally as a tenant (`Authorization: Bearer`), and returns every
//! JSON-RPC message a POST produced, in wire order.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Protocol version used by [`McpSession::connect`].
pub const SESSION_PROTOCOL: &str = "2025-11-25";
/// The sessionless protocol version used by [`McpSession::modern`].
pub const MODERN_PROTOCOL: &str = "2026-07-28";

/// Everything one POST produced.
#[derive(Debug, Clone)]
pub struct RpcExchange {
    pub status: u16,
    /// The response's headers (`WWW-Authenticate`, `Retry-After`, …).
    pub headers: reqwest::header::HeaderMap,
    pub content_type: String,
    /// Every JSON-RPC message received on the response, in wire order (SSE priming
    /// events with empty data are skipped).
    pub frames: Vec<Value>,
    /// The response carrying the request's id, when one arrived.
    pub response: Option<Value>,
    /// The raw body when it was not SSE (or not JSON); the whole body, SSE included,
    /// for a handle made with [`McpSession::reading_to_end`].
    pub body: String,
}

impl RpcExchange {
    /// The `result` of the response; panics with the exchange when there is none.
    pub fn result(&self) -> &Value {
        self.response
            .as_ref()
            .and_then(|r| r.get("result"))
            .unwrap_or_else(|| panic!("no JSON-RPC result in exchange: {self:#?}"))
    }

    /// The `error` of the response, when it is an error.
    pub fn error(&self) -> Option<&Value> {
        self.response.as_ref().and_then(|r| r.get("error"))
    }

    /// The `error` of the response; panics with the exchange when there is none.
    pub fn rpc_error(&self) -> &Value {
        self.error()
            .unwrap_or_else(|| panic!("no JSON-RPC error in exchange: {self:#?}"))
    }

    /// A response header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    }

    /// Notifications (frames with a method and no id) named `method`.
    pub fn notifications(&self, method: &str) -> Vec<&Value> {
        self.frames
            .iter()
            .filter(|f| f["method"] == method && f.get("id").is_none())
            .collect()
    }
}

/// One MCP session with a server (or the gateway) over streamable HTTP.
#[derive(Clone)]
pub struct McpSession {
    client: reqwest::Client,
    pub url: String,
    pub session_id: Option<String>,
    pub protocol: String,
    pub init_result: Value,
    /// Sent as `Authorization: Bearer <key>` with every request.
    bearer: Option<String>,
    /// `clientInfo.name` in `initialize` and in the 2026-07-28 `_meta`.
    client_name: String,
    /// Bound on one request's answer ([`Self::request`], [`Self::rpc`]).
    timeout: Duration,
    /// Read every response body to its end (see [`Self::reading_to_end`]).
    read_to_end: bool,
    next_id: Arc<AtomicI64>,
}

impl McpSession {
    /// A session-less handle for sending arbitrary bodies (no initialize).
    pub fn bare(url: &str) -> McpSession {
        McpSession {
            client: crate::http(),
            url: url.to_string(),
            session_id: None,
            protocol: SESSION_PROTOCOL.to_string(),
            init_result: Value::Null,
            bearer: None,
            client_name: "toolgate-e2e".to_string(),
            timeout: Duration::from_secs(120),
            read_to_end: false,
            next_id: Arc::new(AtomicI64::new(1)),
        }
    }

    /// The same handle, sending `Authorization: Bearer <key>` with every request.
    pub fn with_bearer(mut self, key: &str) -> McpSession {
        self.bearer = Some(key.to_string());
        self
    }

    /// A copy of this handle (same session, same request ids) presenting other
    /// credentials, or none.
    pub fn with_key(&self, key: Option<&str>) -> McpSession {
        let mut s = self.clone();
        s.bearer = key.map(String::from);
        s
    }

    /// A copy of this handle (same session) sending to another URL, e.g. another
    /// replica of the gateway.
    pub fn at(&self, url: &str) -> McpSession {
        let mut s = self.clone();
        s.url = url.to_string();
        s
    }

    /// The client name this handle announces.
    pub fn with_client_name(mut self, name: &str) -> McpSession {
        self.client_name = name.to_string();
        self
    }

    /// The bound on each request's answer (default 120 s).
    pub fn with_timeout(mut self, timeout: Duration) -> McpSession {
        self.timeout = timeout;
        self
    }

    /// Every response is read to its end: [`RpcExchange::body`] holds the whole body
    /// (SSE too) and [`RpcExchange::frames`] every message in it, including any sent
    /// after the response. When no message carries the request's id, the first error
    /// message is the response (front-door refusals answer with `id: null`).
    pub fn reading_to_end(mut self) -> McpSession {
        self.read_to_end = true;
        self
    }

    /// A sessionless 2026-07-28 handle: no initialize; every request carries the
    /// protocol version, client info and capabilities in `_meta` and the
    /// `Mcp-Method` / `Mcp-Name` headers.
    pub fn modern(url: &str) -> McpSession {
        let mut s = Self::bare(url);
        s.protocol = MODERN_PROTOCOL.to_string();
        s
    }

    fn is_modern(&self) -> bool {
        self.protocol.as_str() >= MODERN_PROTOCOL
    }

    /// `initialize` (2025-11-25) + `notifications/initialized`.
    pub async fn connect(url: &str) -> anyhow::Result<McpSession> {
        Self::bare(url).initialize().await
    }

    /// [`Self::connect`] as the tenant of `key` (a bearer token), declaring
    /// `capabilities` (e.g. `{"sampling": {}}` to be sent sampling requests).
    pub async fn connect_as(
        url: &str,
        key: &str,
        capabilities: Value,
    ) -> anyhow::Result<McpSession> {
        Self::bare(url)
            .with_bearer(key)
            .initialize_with(capabilities)
            .await
    }

    /// Initializes this handle (e.g. one made with [`McpSession::with_bearer`]) as a
    /// 2025-11-25 session.
    pub async fn initialize(self) -> anyhow::Result<McpSession> {
        self.initialize_with(json!({})).await
    }

    /// [`Self::initialize`] declaring the client's `capabilities`.
    pub async fn initialize_with(mut self, capabilities: Value) -> anyhow::Result<McpSession> {
        let (ex, _) = self.handshake(capabilities).await?;
        if ex.response.as_ref().and_then(|r| r.get("result")).is_none() {
            anyhow::bail!("initialize failed: {ex:#?}");
        }
        Ok(self)
    }

    /// `initialize` (2025-11-25) declaring `capabilities`; when it succeeds, adopts the
    /// answer's protocol version and `Mcp-Session-Id` and sends
    /// `notifications/initialized`. Returns the `initialize` exchange and the HTTP
    /// status of the notification (`None` when `initialize` failed), for tests that
    /// assert on the handshake itself.
    pub async fn handshake(
        &mut self,
        capabilities: Value,
    ) -> anyhow::Result<(RpcExchangeWithHeaders, Option<u16>)> {
        let ex = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": SESSION_PROTOCOL,
                    "capabilities": capabilities,
                    "clientInfo": {"name": self.client_name, "version": "0.1.0"}
                }),
            )
            .await?;
        let Some(result) = ex.response.as_ref().and_then(|r| r.get("result")).cloned() else {
            return Ok((ex, None));
        };
        self.protocol = result["protocolVersion"]
            .as_str()
            .unwrap_or(SESSION_PROTOCOL)
            .to_string();
        self.init_result = result;
        self.session_id = ex.session_id_header.clone();
        let status = self.notify("notifications/initialized", None).await?;
        Ok((ex, Some(status)))
    }

    fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The session's headers: credentials, protocol version, session id.
    fn session_headers(&self, mut rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        rb = rb.header("MCP-Protocol-Version", &self.protocol);
        if let Some(key) = &self.bearer {
            rb = rb.bearer_auth(key);
        }
        if let Some(id) = &self.session_id {
            rb = rb.header("Mcp-Session-Id", id);
        }
        rb
    }

    fn post(&self) -> reqwest::RequestBuilder {
        let rb = self
            .client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        self.session_headers(rb)
    }

    /// A request with a fresh numeric id; waits for its response (bounded: 120 s, or
    /// the handle's [`Self::with_timeout`]).
    pub async fn request(
        &self,
        method: &str,
        params: Value,
    ) -> anyhow::Result<RpcExchangeWithHeaders> {
        let id = json!(self.next_id());
        self.request_with_id(id, method, params, None, self.timeout)
            .await
    }

    /// [`Self::request`] for tests: panics (naming the method) when no complete
    /// answer arrives.
    pub async fn rpc(&self, method: &str, params: Value) -> RpcExchangeWithHeaders {
        self.request(method, params)
            .await
            .unwrap_or_else(|e| panic!("{method} at {}: {e:#}", self.url))
    }

    /// `DELETE` of the session (with its credentials); returns the HTTP status.
    pub async fn delete(&self) -> anyhow::Result<u16> {
        let rb = self
            .client
            .delete(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .timeout(Duration::from_secs(30));
        Ok(self.session_headers(rb).send().await?.status().as_u16())
    }

    /// A request with the given id. Each frame is also sent to `tap` as it arrives.
    pub async fn request_with_id(
        &self,
        id: Value,
        method: &str,
        params: Value,
        tap: Option<UnboundedSender<Value>>,
        timeout: Duration,
    ) -> anyhow::Result<RpcExchangeWithHeaders> {
        let mut params = params;
        let mut headers = Vec::new();
        if self.is_modern() {
            if let Some(obj) = params.as_object_mut() {
                let meta = obj.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(
                        "io.modelcontextprotocol/protocolVersion".into(),
                        json!(self.protocol),
                    );
                    meta.insert(
                        "io.modelcontextprotocol/clientInfo".into(),
                        json!({"name": self.client_name, "version": "0.1.0"}),
                    );
                    // A request may declare its own (an extension, per request).
                    meta.entry("io.modelcontextprotocol/clientCapabilities")
                        .or_insert_with(|| json!({}));
                }
            }
            headers.push(("Mcp-Method", method.to_string()));
            // `Mcp-Name` carries the item a request is about: a tool's or prompt's
            // name, a resource's URI, or a task's id.
            if let Some(name) = params
                .get("name")
                .or_else(|| params.get("uri"))
                .or_else(|| params.get("taskId"))
                .and_then(Value::as_str)
            {
                headers.push(("Mcp-Name", name.to_string()));
            }
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_body_with_headers(
            body.to_string().into_bytes(),
            &headers,
            Some(id),
            tap,
            timeout,
        )
        .await
    }

    /// A notification (no id); returns the HTTP status.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> anyhow::Result<u16> {
        let mut body = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            body["params"] = p;
        }
        let r = self
            .post()
            .body(body.to_string())
            .timeout(Duration::from_secs(30))
            .send()
            .await?;
        Ok(r.status().as_u16())
    }

    /// POSTs raw bytes; collects frames until the response with `id` arrives (when
    /// given), the stream ends, or `timeout` passes.
    pub async fn send_body(
        &self,
        body: Vec<u8>,
        id: Option<Value>,
        tap: Option<UnboundedSender<Value>>,
        timeout: Duration,
    ) -> anyhow::Result<RpcExchangeWithHeaders> {
        self.send_body_with_headers(body, &[], id, tap, timeout)
            .await
    }

    /// [`Self::send_body`] with extra request headers.
    pub async fn send_body_with_headers(
        &self,
        body: Vec<u8>,
        headers: &[(&str, String)],
        id: Option<Value>,
        tap: Option<UnboundedSender<Value>>,
        timeout: Duration,
    ) -> anyhow::Result<RpcExchangeWithHeaders> {
        let fut = async {
            let mut rb = self.post();
            for (k, v) in headers {
                rb = rb.header(*k, v);
            }
            let resp = rb.body(body).send().await?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let session_id_header = headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let content_type = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let mut ex = RpcExchange {
                status,
                headers,
                content_type: content_type.clone(),
                frames: Vec::new(),
                response: None,
                body: String::new(),
            };
            let sse = content_type.starts_with("text/event-stream");
            if sse && self.read_to_end {
                ex.body = resp.text().await?;
                let mut buf = ex.body.clone().into_bytes();
                // The last event may end with the stream instead of a blank line.
                buf.extend_from_slice(b"\n\n");
                for _ in 0..1_000_000 {
                    let Some(event) = take_event(&mut buf) else {
                        break;
                    };
                    if let Some(msg) = event_json(&event) {
                        if let Some(tap) = &tap {
                            let _ = tap.send(msg.clone());
                        }
                        ex.frames.push(msg);
                    }
                }
                ex.response = ex
                    .frames
                    .iter()
                    .find(|m| {
                        id.as_ref().is_some_and(|id| m.get("id") == Some(id))
                            && (m.get("result").is_some() || m.get("error").is_some())
                    })
                    // Front-door refusals answer with `id: null`.
                    .or_else(|| ex.frames.iter().find(|m| m.get("error").is_some()))
                    .cloned();
            } else if sse {
                let mut stream = resp.bytes_stream();
                let mut buf: Vec<u8> = Vec::new();
                'outer: while let Some(chunk) = stream.next().await {
                    let chunk = chunk?;
                    buf.extend_from_slice(&chunk);
                    while let Some(event) = take_event(&mut buf) {
                        let Some(msg) = event_json(&event) else {
                            continue;
                        };
                        if let Some(tap) = &tap {
                            let _ = tap.send(msg.clone());
                        }
                        let is_response = id.as_ref().is_some_and(|id| {
                            msg.get("id") == Some(id)
                                && (msg.get("result").is_some() || msg.get("error").is_some())
                        });
                        ex.frames.push(msg.clone());
                        if is_response {
                            ex.response = Some(msg);
                            break 'outer;
                        }
                    }
                }
            } else {
                let bytes = resp.bytes().await?;
                ex.body = String::from_utf8_lossy(&bytes).into_owned();
                if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                    let msgs = match v {
                        Value::Array(a) => a,
                        other => vec![other],
                    };
                    for m in msgs {
                        if let Some(tap) = &tap {
                            let _ = tap.send(m.clone());
                        }
                        if m.get("result").is_some() || m.get("error").is_some() {
                            ex.response = Some(m.clone());
                        }
                        ex.frames.push(m);
                    }
                }
            }
            anyhow::Ok(RpcExchangeWithHeaders {
                exchange: ex,
                session_id_header,
            })
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| anyhow::anyhow!("no response within {timeout:?}"))?
    }

    /// Opens the session's standalone GET stream; every JSON-RPC message on it is sent
    /// to `tap` until the stream ends or the returned task is aborted. Returns the HTTP
    /// status of the GET.
    pub async fn open_get_stream(
        &self,
        tap: UnboundedSender<Value>,
    ) -> anyhow::Result<(u16, tokio::task::JoinHandle<()>)> {
        let rb = self
            .client
            .get(&self.url)
            .header("Accept", "text/event-stream")
            // The stream outlives the client's default request timeout.
            .timeout(Duration::from_secs(3600));
        let rb = self.session_headers(rb);
        let resp = tokio::time::timeout(Duration::from_secs(30), rb.send())
            .await
            .map_err(|_| anyhow::anyhow!("GET stream: no answer within 30 s"))??;
        let status = resp.status().as_u16();
        let task = tokio::spawn(async move {
            let mut stream = resp.bytes_stream();
            let mut buf: Vec<u8> = Vec::new();
            while let Some(Ok(chunk)) = stream.next().await {
                buf.extend_from_slice(&chunk);
                while let Some(event) = take_event(&mut buf) {
                    if let Some(msg) = event_json(&event)
                        && tap.send(msg).is_err()
                    {
                        return;
                    }
                }
            }
        });
        Ok((status, task))
    }

    /// `tools/list` result, every page of it: the first page's result with the tools
    /// of the pages its `nextCursor`s lead to appended (at most 1,000 pages).
    pub async fn list_tools(&self) -> anyhow::Result<Value> {
        let mut all: Option<Value> = None;
        let mut params = json!({});
        for _ in 0..1_000 {
            let ex = self.request("tools/list", params).await?;
            let page = ex
                .response
                .as_ref()
                .and_then(|r| r.get("result"))
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("tools/list failed: {:#?}", ex.exchange))?;
            let cursor = page.get("nextCursor").cloned();
            match &mut all {
                None => all = Some(page),
                Some(all) => {
                    let more = page["tools"].as_array().cloned().unwrap_or_default();
                    if let Some(tools) = all["tools"].as_array_mut() {
                        tools.extend(more);
                    }
                }
            }
            match cursor {
                Some(Value::String(cursor)) => params = json!({ "cursor": cursor }),
                _ => {
                    let mut all = all.unwrap_or_default();
                    if let Some(result) = all.as_object_mut() {
                        result.remove("nextCursor");
                    }
                    return Ok(all);
                }
            }
        }
        anyhow::bail!("tools/list: more than 1,000 pages")
    }

    /// `tools/call`; returns the whole exchange.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> anyhow::Result<RpcExchange> {
        Ok(self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await?
            .exchange)
    }
}

/// An [`RpcExchange`] plus the `Mcp-Session-Id` header of the response.
#[derive(Debug, Clone)]
pub struct RpcExchangeWithHeaders {
    pub exchange: RpcExchange,
    pub session_id_header: Option<String>,
}

impl std::ops::Deref for RpcExchangeWithHeaders {
    type Target = RpcExchange;
    fn deref(&self) -> &RpcExchange {
        &self.exchange
    }
}

/// Removes one complete SSE event (terminated by a blank line) from `buf`.
fn take_event(buf: &mut Vec<u8>) -> Option<String> {
    let text = std::str::from_utf8(buf).ok()?;
    let (end, sep) = [("\r\n\r\n", 4), ("\n\n", 2), ("\r\r", 2)]
        .iter()
        .filter_map(|(s, n)| text.find(s).map(|i| (i, *n)))
        .min_by_key(|(i, _)| *i)?;
    let event = text[..end].to_string();
    buf.drain(..end + sep);
    Some(event)
}

/// The JSON message in an SSE event's `data:` lines, if any.
fn event_json(event: &str) -> Option<Value> {
    let data: Vec<&str> = event
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return None;
    }
    let joined = data.join("\n");
    if joined.trim().is_empty() {
        return None;
    }
    serde_json::from_str(&joined).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_sse_events() {
        let mut buf = b"id: 1\ndata:\n\nevent: message\ndata: {\"a\":1}\n\ndata: {\"b\"".to_vec();
        let e1 = take_event(&mut buf).unwrap();
        assert_eq!(event_json(&e1), None, "priming event has no data");
        let e2 = take_event(&mut buf).unwrap();
        assert_eq!(event_json(&e2), Some(json!({"a": 1})));
        assert!(
            take_event(&mut buf).is_none(),
            "partial event stays buffered"
        );
        assert_eq!(buf, b"data: {\"b\"");
    }
}
