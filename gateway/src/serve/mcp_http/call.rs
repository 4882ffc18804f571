//! `tools/call` on a session: the call runs inside the answer. Whatever the call
//! sends the client before its result — progress, the upstream's notifications, its
//! requests (sampling, elicitation, roots) — goes out in wire order ahead of the
//! result; a call that sends nothing is answered as one JSON body, anything else as an
//! SSE stream. The call is cancelled by `notifications/cancelled` and when the client
//! hangs up (its answer could not be delivered any more).
//!
//! Sessionless (2026-07-28) calls take the same path with the differences listed in
//! [`super::sessionless`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::{CallContext, CallOutput, Progress, RpcError, ToolError};

use super::live::{InFlight, Live};
use super::sessionless::LogLevel;
use super::wire;
use crate::access::{self, Caller};
use crate::errors::{self, McpFailure};
use crate::gateway::Gateway;
use crate::protocol_tools;
use crate::serve::bridge::{BridgeEvent, QueueBridge};

#[derive(Deserialize)]
pub struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(default, rename = "_meta")]
    meta: Option<CallMeta>,
}

impl CallParams {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn meta(&self) -> Option<&CallMeta> {
        self.meta.as_ref()
    }
}

/// Whose call it is.
pub enum Scope {
    /// A session's (its id).
    Session(String),
    /// A sessionless 2026-07-28 request's, with the log level it asked for.
    Sessionless { log_level: Option<LogLevel> },
}

impl Scope {
    fn session(&self) -> Option<&str> {
        match self {
            Scope::Session(id) => Some(id),
            Scope::Sessionless { .. } => None,
        }
    }

    /// Whether a log line of `level` goes to this caller: a session gets every one
    /// (as before 2026-07-28); a sessionless request only what it asked for.
    fn wants_log(&self, level: LogLevel) -> bool {
        match self {
            Scope::Session(_) => true,
            Scope::Sessionless { log_level } => log_level.is_some_and(|wanted| level >= wanted),
        }
    }
}

/// What a call's `_meta` says to the gateway. Values are kept as sent, whatever
/// their type: only a sessionless call (see [`super::sessionless`]) checks the
/// version's own keys, and a session's call ignores them.
#[derive(Deserialize)]
pub struct CallMeta {
    #[serde(default, rename = "progressToken")]
    progress_token: Option<Value>,
    #[serde(default, rename = "io.modelcontextprotocol/protocolVersion")]
    pub protocol_version: Option<Value>,
    #[serde(default, rename = "io.modelcontextprotocol/clientCapabilities")]
    pub client_capabilities: Option<Value>,
    #[serde(default, rename = "io.modelcontextprotocol/logLevel")]
    pub log_level: Option<Value>,
}

/// What the call future answers: the output, or the failure, and whether the
/// caller's visible list changed (`tool_expand_tools`).
type Outcome = Result<(CallOutput, bool), ToolError>;

/// Everything one call needs, owned, so it can live in the answer's body.
pub struct CallRequest {
    pub gateway: Arc<Gateway>,
    pub live: Arc<Live>,
    pub caller: Caller,
    pub scope: Scope,
    /// The JSON-RPC id, as raw JSON.
    pub id: String,
    pub params: CallParams,
    pub headers: Arc<http::HeaderMap>,
}

/// Answers one `tools/call`. A client that hangs up drops this future or the stream
/// it answers with (the server notices the closed connection), which cancels the call.
pub async fn answer(request: CallRequest) -> Response {
    let mut call = CallStream::start(request);
    let first = match call.next().await {
        Some((message, true)) => return wire::json_response(message),
        Some((message, false)) => wire::sse_frame(&message),
        // Unreachable: the stream always ends with the result.
        None => {
            return wire::refusal(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                -32603,
                "the call ended without a result",
            );
        }
    };
    let stream = futures::stream::unfold((Some(first), Some(call)), |(first, call)| async move {
        if let Some(frame) = first {
            return Some((Ok::<Bytes, std::io::Error>(frame), (None, call)));
        }
        let mut call = call?;
        let (message, is_last) = call.next().await?;
        let rest = if is_last { None } else { Some(call) };
        Some((Ok(wire::sse_frame(&message)), (None, rest)))
    });
    wire::sse_response(Body::from_stream(stream))
}

/// One call and what it sends on its way; dropping it cancels the call.
struct CallStream {
    call: Option<Pin<Box<dyn Future<Output = Outcome> + Send>>>,
    updates: mpsc::UnboundedReceiver<Progress>,
    events: mpsc::UnboundedReceiver<BridgeEvent>,
    outcome: Option<Outcome>,
    live: Arc<Live>,
    scope: Scope,
    id: String,
    tool: String,
    progress_token: Option<Value>,
    is_passthrough: bool,
    done: bool,
    /// The ids of requests sent to the client that are still unanswered.
    asked: Vec<String>,
    cancel: CancellationToken,
    /// Lets `notifications/cancelled` find a session's call.
    _in_flight: Option<InFlight>,
}

impl CallStream {
    fn start(request: CallRequest) -> CallStream {
        let CallRequest {
            gateway,
            live,
            caller,
            scope,
            id,
            params,
            headers,
        } = request;
        let name = params.name;
        let arguments = params.arguments.unwrap_or_default();
        let progress_token = params.meta.and_then(|m| m.progress_token);
        let cancel = CancellationToken::new();
        let in_flight = scope
            .session()
            .map(|session| live.call_started(session, &id, cancel.clone()));

        let (sink, updates) = mpsc::unbounded_channel::<Progress>();
        let (bridge, events) = QueueBridge::new();
        let mut ctx = CallContext::new(gateway.config().call_timeout, format!("mcp-{id}"));
        ctx.cancel = cancel.clone();
        ctx.request_headers = headers;
        ctx.progress = Some(sink);
        ctx.client = Some(Arc::new(bridge));

        let upstream = gateway.catalog().get(&name).map(|e| e.upstream.clone());
        let is_passthrough = upstream.is_some_and(|upstream| {
            gateway
                .passthrough()
                .is_some_and(|m| m.upstream.name() == upstream)
        });
        if is_passthrough && let Some(session) = scope.session() {
            live.note_passthrough_caller(session);
        }
        let tool = name.clone();
        let call = Box::pin(async move {
            if !protocol_tools::is_protocol_tool(&name) {
                return access::call(&gateway, &caller, &name, arguments, ctx)
                    .await
                    .map(|output| (output, false));
            }
            protocol_tools::call(&gateway, &caller, &name, arguments, ctx)
                .await
                .unwrap_or_else(|| Err(errors::unknown_tool(&name)))
        });
        CallStream {
            call: Some(call),
            updates,
            events,
            outcome: None,
            live,
            scope,
            id,
            tool,
            progress_token,
            is_passthrough,
            done: false,
            asked: Vec::new(),
            cancel,
            _in_flight: in_flight,
        }
    }

    /// The next message for the client, and whether it is the last (the result).
    async fn next(&mut self) -> Option<(Vec<u8>, bool)> {
        loop {
            // Bounded: each round takes an update, an event or the outcome.
            if self.done || (self.call.is_none() && self.outcome.is_none()) {
                return None;
            }
            if let Some(message) = self.next_message().await {
                return Some(message);
            }
        }
    }

    /// [`Self::next`], or `None` for an update this caller does not receive.
    async fn next_message(&mut self) -> Option<(Vec<u8>, bool)> {
        if let Some(call) = self.call.as_mut() {
            tokio::select! {
                biased;
                Some(update) = self.updates.recv() => return self.progress(update).map(|m| (m, false)),
                Some(event) = self.events.recv() => return self.bridged(event).map(|m| (m, false)),
                outcome = call => {
                    self.call = None;
                    self.outcome = Some(outcome);
                    if self.is_passthrough && let Some(session) = self.scope.session() {
                        // Stray log lines that trail the result belong to this call.
                        self.live.note_passthrough_caller(session);
                    }
                }
            }
        }
        // The adapter queues everything before it resolves the call: what is still
        // queued goes out before the result.
        if let Ok(update) = self.updates.try_recv() {
            return self.progress(update).map(|m| (m, false));
        }
        if let Ok(event) = self.events.try_recv() {
            return self.bridged(event).map(|m| (m, false));
        }
        if let Some(Ok((_, changed))) = self.outcome.as_mut()
            && *changed
        {
            // The list grew: tell this session (once), on its GET stream when one is
            // open, otherwise here, before the result. Sessionless callers keep no
            // list to announce.
            *changed = false;
            let session = self.scope.session()?;
            let message = wire::notification("notifications/tools/list_changed", &json!({}));
            if !self.live.send_to_session(session, &message) {
                return Some((message, false));
            }
        }
        let outcome = self.outcome.take()?;
        self.done = true;
        Some((self.result(outcome), true))
    }

    fn result(&self, outcome: Outcome) -> Vec<u8> {
        let raw = match outcome {
            Ok((output, _)) => output.raw,
            Err(error) => match errors::to_mcp(&error) {
                McpFailure::Protocol(error) => {
                    return wire::error_message(
                        &self.id,
                        i64::from(error.code.0),
                        &error.message,
                        error.data,
                    );
                }
                McpFailure::ToolResult(raw) => raw,
            },
        };
        if !is_call_tool_result(&raw) {
            tracing::warn!(tool = %self.tool, "upstream result is not a valid CallToolResult");
            let text = format!(
                "tool '{}' returned a result that is not valid MCP (no `content` list); \
                 report this to the tool's owner",
                self.tool
            );
            let error = json!({"content": [{"type": "text", "text": text}], "isError": true});
            return wire::result_message(&self.id, &error.to_string());
        }
        let mut raw = raw;
        if let Scope::Sessionless { .. } = self.scope {
            // The version requires it on every result (Python `mcp` rejects one without).
            raw.entry("resultType").or_insert_with(|| json!("complete"));
        }
        let result = serde_json::to_string(&raw).unwrap_or_default();
        wire::result_message(&self.id, &result)
    }

    #[allow(deprecated)]
    fn progress(&self, update: Progress) -> Option<Vec<u8>> {
        let meta = json!({"toolgate/tool": self.tool});
        if self.progress_token.is_none() && !self.scope.wants_log(LogLevel::Info) {
            return None;
        }
        Some(match &self.progress_token {
            Some(token) => {
                let mut params = json!({
                    "progressToken": token,
                    "progress": update.progress,
                    "_meta": meta,
                });
                if let Some(total) = update.total {
                    params["total"] = json!(total);
                }
                if let Some(message) = update.message {
                    params["message"] = json!(message);
                }
                wire::notification("notifications/progress", &params)
            }
            // Without a progressToken, progress goes out as log lines.
            None => wire::notification(
                "notifications/message",
                &json!({
                    "level": "info",
                    "logger": "toolgate/progress",
                    "data": {
                        "tool": self.tool,
                        "progress": update.progress,
                        "total": update.total,
                        "message": update.message,
                    },
                    "_meta": meta,
                }),
            ),
        })
    }

    fn bridged(&mut self, event: BridgeEvent) -> Option<Vec<u8>> {
        match event {
            BridgeEvent::Notify { method, params } => {
                if method == "notifications/message"
                    && !self.scope.wants_log(LogLevel::of_message(&params))
                {
                    return None;
                }
                Some(wire::notification(&method, &params))
            }
            BridgeEvent::Request {
                method,
                params,
                answer,
            } => {
                let Some(session) = self.scope.session() else {
                    // 2026-07-28 has no server-to-client requests.
                    let _ = answer.send(Err(RpcError {
                        code: wire::METHOD_NOT_FOUND,
                        message: format!(
                            "{method}: the client speaks MCP {}, which has no \
                             server-to-client requests",
                            super::sessionless::VERSION
                        ),
                        data: None,
                    }));
                    return None;
                };
                let id = self.live.request_sent(session, answer);
                let message = wire::request(&id, &method, &params);
                self.asked.push(id);
                Some(message)
            }
        }
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        for id in &self.asked {
            self.live.request_abandoned(id);
        }
        if let Some(call) = self.call.take() {
            // The client is gone before the result. The call is cancelled and left
            // to finish on its own, so the adapter can tell the upstream (MCP
            // `notifications/cancelled`) instead of vanishing mid-request.
            self.cancel.cancel();
            tokio::spawn(call);
        }
    }
}

/// What a `CallToolResult` needs at least: a `content` list (rmcp's typed check
/// before; every other field passes through as sent).
fn is_call_tool_result(raw: &Map<String, Value>) -> bool {
    matches!(raw.get("content"), Some(Value::Array(_)))
        || (raw.get("content").is_none() && raw.contains_key("structuredContent"))
}
