//! The load generator's clients: an MCP session over streamable HTTP (2025-11-25,
//! `Mcp-Session-Id`; answers as JSON or SSE), one REST call, one plain API request, and
//! an MCP session with a stdio child. Each worker owns one keep-alive connection.
//!
//! The hot path checks a call's answer cheaply (status, the JSON-RPC id, the result
//! marker) instead of parsing it: the client shares the machine with what it measures.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::upstreams::MARKER;

pub(crate) const PROTOCOL: &str = "2025-11-25";
/// The sessionless protocol: no `initialize`, the version and client in each request's
/// `_meta`, `Mcp-Method`/`Mcp-Name` headers. Python `mcp` picks it by default.
pub(crate) const SESSIONLESS_PROTOCOL: &str = "2026-07-28";
/// Bound on every request of the bench.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A client with one keep-alive connection's worth of pool.
pub(crate) fn http_client() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(4)
        .build()?)
}

/// The JSON-RPC messages of a response body: one JSON document, or the `data:` lines
/// of SSE events (priming events without data are skipped).
pub(crate) fn messages(content_type: &str, body: &[u8]) -> Vec<Value> {
    if content_type.starts_with("text/event-stream") {
        let text = String::from_utf8_lossy(body);
        let mut out = Vec::new();
        let mut data = String::new();
        for line in text.lines().chain(std::iter::once("")) {
            if line.is_empty() {
                if let Ok(message) = serde_json::from_str(&data) {
                    out.push(message);
                }
                data.clear();
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
        }
        out
    } else {
        serde_json::from_slice(body)
            .map(|m| vec![m])
            .unwrap_or_default()
    }
}

/// One MCP session over streamable HTTP.
pub(crate) struct McpHttp {
    http: reqwest::Client,
    url: String,
    headers: HeaderMap,
    next_id: u64,
    tool: String,
    arguments: String,
    /// What `params` of a call holds besides the name and arguments (the sessionless
    /// protocol's `_meta`), as JSON text with a leading comma; empty for sessions.
    extra_params: String,
}

impl McpHttp {
    /// `initialize`, then `notifications/initialized`. [`Self::call`] calls `tool` with
    /// `arguments`; `bearer` is sent as `Authorization: Bearer …` on every request.
    pub(crate) async fn connect(
        url: &str,
        tool: &str,
        arguments: Value,
        bearer: Option<&str>,
    ) -> Result<McpHttp> {
        Self::connect_with(http_client()?, url, tool, arguments, bearer).await
    }

    /// [`Self::connect`] on a given client (sessions may share its connections).
    pub(crate) async fn connect_with(
        http: reqwest::Client,
        url: &str,
        tool: &str,
        arguments: Value,
        bearer: Option<&str>,
    ) -> Result<McpHttp> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "accept",
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        if let Some(token) = bearer {
            headers.insert("authorization", format!("Bearer {token}").parse()?);
        }
        let mut session = McpHttp {
            http,
            url: url.to_owned(),
            headers,
            next_id: 0,
            tool: tool.to_owned(),
            arguments: arguments.to_string(),
            extra_params: String::new(),
        };
        let init = json!({"protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "toolgate-bench", "version": "1"}});
        let response = session
            .http
            .post(&session.url)
            .headers(session.headers.clone())
            .body(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
                    .to_string(),
            )
            .send()
            .await
            .with_context(|| format!("initialize {url}"))?;
        let status = response.status();
        let sid = response.headers().get("mcp-session-id").cloned();
        let content_type = content_type(response.headers());
        let body = response.bytes().await?;
        let answer = messages(&content_type, &body);
        if !status.is_success() || !answer.iter().any(|m| m.get("result").is_some()) {
            bail!(
                "initialize {url}: HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        if let Some(sid) = sid {
            session.headers.insert("mcp-session-id", sid);
        }
        session
            .headers
            .insert("mcp-protocol-version", HeaderValue::from_static(PROTOCOL));
        let response = session
            .http
            .post(&session.url)
            .headers(session.headers.clone())
            .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .send()
            .await?;
        if !response.status().is_success() {
            bail!(
                "notifications/initialized {url}: HTTP {}",
                response.status()
            );
        }
        Ok(session)
    }

    /// A sessionless 2026-07-28 client: nothing to open; every call carries the
    /// protocol version, client info and capabilities in `_meta`, and the headers.
    pub(crate) fn sessionless(url: &str, tool: &str, arguments: Value) -> Result<McpHttp> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "accept",
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static(SESSIONLESS_PROTOCOL),
        );
        headers.insert("mcp-method", HeaderValue::from_static("tools/call"));
        headers.insert("mcp-name", tool.parse()?);
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": SESSIONLESS_PROTOCOL,
            "io.modelcontextprotocol/clientInfo": {"name": "toolgate-bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        Ok(McpHttp {
            http: http_client()?,
            url: url.to_owned(),
            headers,
            next_id: 0,
            tool: tool.to_owned(),
            arguments: arguments.to_string(),
            extra_params: format!(r#","_meta":{meta}"#),
        })
    }

    async fn post(&mut self, body: String) -> Result<(String, bytes::Bytes)> {
        let response = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let content_type = content_type(response.headers());
        let body = response.bytes().await?;
        if !status.is_success() {
            bail!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
        }
        Ok((content_type, body))
    }

    /// One `tools/call` of the session's tool; checks the answer carries the marker.
    pub(crate) async fn call(&mut self) -> Result<()> {
        self.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"{}","arguments":{}{}}}}}"#,
            self.next_id, self.tool, self.arguments, self.extra_params
        );
        let (_, body) = self.post(body).await?;
        if !contains(&body, MARKER.as_bytes()) || contains(&body, b"\"isError\":true") {
            bail!(
                "unexpected tools/call answer: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
        }
        Ok(())
    }

    /// Any request, its answer parsed: the `result` of the response with our id, the
    /// body's size, and the round trip (request sent to last body byte received; the
    /// parsing afterwards is not part of it).
    pub(crate) async fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<(Value, usize, Duration)> {
        self.next_id += 1;
        let id = self.next_id;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let start = std::time::Instant::now();
        let (content_type, bytes) = self.post(body.to_string()).await?;
        let took = start.elapsed();
        let answer = messages(&content_type, &bytes)
            .into_iter()
            .find(|m| m.get("id") == Some(&json!(id)))
            .ok_or_else(|| anyhow!("no answer to {method} in {} bytes", bytes.len()))?;
        match answer.get("result") {
            Some(result) => Ok((result.clone(), bytes.len(), took)),
            None => bail!("{method} failed: {answer}"),
        }
    }
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `POST /v1/tools/{name}/call` on the gateway.
pub(crate) struct Rest {
    http: reqwest::Client,
    url: String,
}

impl Rest {
    pub(crate) fn new(base: &str, tool: &str) -> Result<Rest> {
        Ok(Rest {
            http: http_client()?,
            url: format!("{base}/v1/tools/{tool}/call"),
        })
    }

    pub(crate) async fn call(&mut self) -> Result<()> {
        let response = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(r#"{"arguments":{"id":"42"}}"#)
            .send()
            .await?;
        let status = response.status();
        let body = response.bytes().await?;
        if !status.is_success() || !contains(&body, MARKER.as_bytes()) {
            bail!(
                "REST call: HTTP {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
        }
        Ok(())
    }
}

/// The HTTP API called directly: `GET /api/items/42`.
pub(crate) struct ApiDirect {
    http: reqwest::Client,
    url: String,
}

impl ApiDirect {
    pub(crate) fn new(url: String) -> Result<ApiDirect> {
        Ok(ApiDirect {
            http: http_client()?,
            url,
        })
    }

    pub(crate) async fn call(&mut self) -> Result<()> {
        let response = self.http.get(&self.url).send().await?;
        let status = response.status();
        let body = response.bytes().await?;
        if !status.is_success() || !contains(&body, MARKER.as_bytes()) {
            bail!("API call: HTTP {status}");
        }
        Ok(())
    }
}

/// An MCP session with a stdio child (`toolgate-bench stdio-server`), one request at a
/// time.
pub(crate) struct StdioDirect {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: BufReader<tokio::process::ChildStdout>,
    next_id: u64,
    line: String,
}

impl StdioDirect {
    pub(crate) async fn start(exe: &std::path::Path) -> Result<StdioDirect> {
        let mut child = tokio::process::Command::new(exe)
            .arg("stdio-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("start stdio-server")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        let mut direct = StdioDirect {
            child,
            stdin,
            stdout,
            next_id: 0,
            line: String::new(),
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "toolgate-bench", "version": "1"}}});
        direct.exchange(&init.to_string()).await?;
        direct
            .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await?;
        Ok(direct)
    }

    async fn send(&mut self, line: &str) -> Result<()> {
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.write_all(b"\n").await?;
        self.stdin.flush().await?;
        Ok(())
    }

    async fn exchange(&mut self, line: &str) -> Result<()> {
        self.send(line).await?;
        self.line.clear();
        let read = tokio::time::timeout(REQUEST_TIMEOUT, self.stdout.read_line(&mut self.line))
            .await
            .map_err(|_| anyhow!("stdio-server did not answer within {REQUEST_TIMEOUT:?}"))??;
        if read == 0 {
            bail!("stdio-server closed its stdout");
        }
        Ok(())
    }

    pub(crate) async fn call(&mut self) -> Result<()> {
        self.next_id += 1;
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"hi"}}}}}}"#,
            self.next_id
        );
        self.exchange(&line).await?;
        if !self.line.contains(MARKER) {
            bail!("unexpected stdio answer: {}", self.line);
        }
        Ok(())
    }
}

impl Drop for StdioDirect {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
