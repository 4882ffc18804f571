//! A raw MCP streamable-HTTP client for wire-level assertions.
//!
//! SDK clients hide exactly what some tests must see: the order of frames on one
//! response stream, JSON-RPC error codes for malformed input, HTTP statuses. This
//! client speaks the 2025-11-25 session protocol (initialize, `Mcp-Session-Id`) with
//! plain reqwest and returns every JSON-RPC message a POST produced, in wire order.

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
    pub content_type: String,
    /// Every JSON-RPC message received on the response, in wire order (SSE priming
    /// events with empty data are skipped).
    pub frames: Vec<Value>,
    /// The response carrying the request's id, when one arrived.
    pub response: Option<Value>,
    /// The raw body when it was not SSE (or not JSON).
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
            next_id: Arc::new(AtomicI64::new(1)),
        }
    }

    /// The same handle, sending `Authorization: Bearer <key>` with every request.
    pub fn with_bearer(mut self, key: &str) -> McpSession {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {key}").parse().expect("a header value"),
        );
        self.client = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(120))
            .default_headers(headers)
            .build()
            .expect("reqwest client");
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
        let s = &mut self;
        let ex = s
            .request(
                "initialize",
                json!({
                    "protocolVersion": SESSION_PROTOCOL,
                    "capabilities": capabilities,
                    "clientInfo": {"name": "toolgate-e2e", "version": "0.1.0"}
                }),
            )
            .await?;
        let result = ex
            .response
            .as_ref()
            .and_then(|r| r.get("result"))
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("initialize failed: {ex:#?}"))?;
        s.protocol = result["protocolVersion"]
            .as_str()
            .unwrap_or(SESSION_PROTOCOL)
            .to_string();
        s.init_result = result;
        s.session_id = ex.session_id_header;
        s.notify("notifications/initialized", None).await?;
        Ok(self)
    }

    fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn post(&self) -> reqwest::RequestBuilder {
        let mut rb = self
            .client
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", &self.protocol);
        if let Some(id) = &self.session_id {
            rb = rb.header("Mcp-Session-Id", id);
        }
        rb
    }

    /// A request with a fresh numeric id; waits for its response (bounded: 120 s).
    pub async fn request(
        &self,
        method: &str,
        params: Value,
    ) -> anyhow::Result<RpcExchangeWithHeaders> {
        let id = json!(self.next_id());
        self.request_with_id(id, method, params, None, Duration::from_secs(120))
            .await
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
                        json!({"name": "toolgate-e2e", "version": "0.1.0"}),
                    );
                    meta.insert(
                        "io.modelcontextprotocol/clientCapabilities".into(),
                        json!({}),
                    );
                }
            }
            headers.push(("Mcp-Method", method.to_string()));
            // `Mcp-Name` carries the item a request is about: a tool's or prompt's
            // name, or a resource's URI.
            if let Some(name) = params
                .get("name")
                .or_else(|| params.get("uri"))
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
            let session_id_header = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let content_type = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let mut ex = RpcExchange {
                status,
                content_type: content_type.clone(),
                frames: Vec::new(),
                response: None,
                body: String::new(),
            };
            if content_type.starts_with("text/event-stream") {
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
        let mut rb = self
            .client
            .get(&self.url)
            .header("Accept", "text/event-stream")
            .header("MCP-Protocol-Version", &self.protocol)
            // The stream outlives the client's default request timeout.
            .timeout(Duration::from_secs(3600));
        if let Some(id) = &self.session_id {
            rb = rb.header("Mcp-Session-Id", id);
        }
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

    /// `tools/list` result.
    pub async fn list_tools(&self) -> anyhow::Result<Value> {
        let ex = self.request("tools/list", json!({})).await?;
        ex.response
            .as_ref()
            .and_then(|r| r.get("result"))
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("tools/list failed: {:#?}", ex.exchange))
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
