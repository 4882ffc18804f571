//! `tools/call` on a session: the call runs inside the answer. Whatever the call
//! sends the client before its result — progress, the upstream's notifications, its
//! requests (sampling, elicitation, roots) — goes out in wire order ahead of the
//! result; a call that sends nothing is answered as one JSON body, anything else as an
//! SSE stream. The call is cancelled by `notifications/cancelled` and when the client
//! hangs up (its answer could not be delivered any more).

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
use toolgate_adapters::{CallContext, CallOutput, Progress, ToolError};

use super::live::{InFlight, Live};
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

#[derive(Deserialize)]
struct CallMeta {
    #[serde(default, rename = "progressToken")]
    progress_token: Option<Value>,
}

/// What the call future answers: the output, or the failure, and whether the
/// caller's visible list changed (`tool_expand_tools`).
type Outcome = Result<(CallOutput, bool), ToolError>;

/// Everything one call needs, owned, so it can live in the answer's body.
pub struct CallRequest {
    pub gateway: Arc<Gateway>,
    pub live: Arc<Live>,
    pub caller: Caller,
    pub session: String,
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
    session: String,
    id: String,
    tool: String,
    progress_token: Option<Value>,
    is_passthrough: bool,
    done: bool,
    /// The ids of requests sent to the client that are still unanswered.
    asked: Vec<String>,
    cancel: CancellationToken,
    _in_flight: InFlight,
}

impl CallStream {
    fn start(request: CallRequest) -> CallStream {
        let CallRequest {
            gateway,
            live,
            caller,
            session,
            id,
            params,
            headers,
        } = request;
        let name = params.name;
        let arguments = params.arguments.unwrap_or_default();
        let progress_token = params.meta.and_then(|m| m.progress_token);
        let cancel = CancellationToken::new();
        let in_flight = live.call_started(&session, &id, cancel.clone());

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
        if is_passthrough {
            live.note_passthrough_caller(&session);
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
            session,
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
        if self.done {
            return None;
        }
        if let Some(call) = self.call.as_mut() {
            tokio::select! {
                biased;
                Some(update) = self.updates.recv() => return Some((self.progress(update), false)),
                Some(event) = self.events.recv() => return Some((self.bridged(event), false)),
                outcome = call => {
                    self.call = None;
                    self.outcome = Some(outcome);
                    if self.is_passthrough {
                        // Stray log lines that trail the result belong to this call.
                        self.live.note_passthrough_caller(&self.session);
                    }
                }
            }
        }
        // The adapter queues everything before it resolves the call: what is still
        // queued goes out before the result.
        if let Ok(update) = self.updates.try_recv() {
            return Some((self.progress(update), false));
        }
        if let Ok(event) = self.events.try_recv() {
            return Some((self.bridged(event), false));
        }
        if let Some(Ok((_, changed))) = self.outcome.as_mut()
            && *changed
        {
            // The list grew: tell this session (once), on its GET stream when one is
            // open, otherwise here, before the result.
            *changed = false;
            let message = wire::notification("notifications/tools/list_changed", &json!({}));
            if !self.live.send_to_session(&self.session, &message) {
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
        let result = serde_json::to_string(&raw).unwrap_or_default();
        wire::result_message(&self.id, &result)
    }

    #[allow(deprecated)]
    fn progress(&self, update: Progress) -> Vec<u8> {
        let meta = json!({"toolgate/tool": self.tool});
        match &self.progress_token {
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
        }
    }

    fn bridged(&mut self, event: BridgeEvent) -> Vec<u8> {
        match event {
            BridgeEvent::Notify { method, params } => wire::notification(&method, &params),
            BridgeEvent::Request {
                method,
                params,
                answer,
            } => {
                let id = self.live.request_sent(&self.session, answer);
                let message = wire::request(&id, &method, &params);
                self.asked.push(id);
                message
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
