//! The tool-call event stream: `POST /v1/tools/{name}/call` with `Accept:
//! text/event-stream` (SSE) or `application/x-ndjson` sends, in order,
//!
//! 1. `tool_call_start` `{tool_call_id, tool, summary, input | input_omitted}`;
//! 2. `tool_progress` `{tool_call_id, text, stream, progress?, total?, closed}` — the
//!    upstream's progress (`info`) and its log lines during the call (`log`, one
//!    `<level> [<logger>:] <data>` line each, as MCP clients get `notifications/message`),
//!    coalesced (see [`crate::coalesce`]); each stream used ends with one
//!    `closed: true` event;
//! 3. `tool_call_complete` `{tool_call_id, is_error, summary, duration_ms, result_tokens}`;
//! 4. `result`: the same object the plain call answers (or `{"error": {code, message}}`).
//!
//! Progress never enters the result. SSE frames are `event: <name>` + `data: <json>`;
//! NDJSON lines are `{"event": <name>, "data": <json>}`. A client that hangs up cancels
//! the call.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolgate_adapters::{CallContext, JsonObject, Progress, RpcError};

use super::call;
use super::types::{ErrorBody, ErrorDetail};
use crate::access::Caller;
use crate::coalesce::{Coalescer, Emitted, Settings, Stream, Update};
use crate::serve::auth::FrontDoor;
use crate::serve::bridge::{BridgeEvent, QueueBridge};

/// Inputs larger than this are left out of `tool_call_start` (only their size is sent).
const MAX_ECHOED_INPUT_BYTES: usize = 512 * 1024;

/// A longer upstream log line is cut to this many bytes (at a character boundary).
const MAX_LOG_LINE_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    Sse,
    Ndjson,
}

/// The framing the request's `Accept` header asks for, if it asks for a stream.
pub(super) fn wanted(headers: &HeaderMap) -> Option<Framing> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    accept
        .split(',')
        .map(|part| part.split(';').next().unwrap_or("").trim())
        .find_map(|media| match media {
            "text/event-stream" => Some(Framing::Sse),
            "application/x-ndjson" => Some(Framing::Ndjson),
            _ => None,
        })
}

/// Starts the call and answers with its event stream.
pub(crate) fn respond(
    door: Arc<FrontDoor>,
    caller: Caller,
    tool: String,
    arguments: JsonObject,
    mut ctx: CallContext,
    framing: Framing,
) -> Response {
    let tool_call_id = format!("call_{}", crate::state::sessions::new_session_id());
    let (events, body) = mpsc::channel::<Bytes>(64);
    let (progress, updates) = toolgate_adapters::progress_channel();
    ctx.progress = Some(progress);
    // The upstream's log lines during the call come through the call's client bridge,
    // as they do for MCP callers.
    let (bridge, bridged) = QueueBridge::new();
    ctx.client = Some(Arc::new(bridge));
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        let run = Run {
            events,
            framing,
            tool_call_id,
        };
        // Cancels the upstream call when the client hangs up (the send fails) or the
        // task ends for any other reason.
        let _cancel_on_exit = cancel.drop_guard();
        let inbox = Inbox { updates, bridged };
        run.drive(&door, &caller, tool, arguments, ctx, inbox).await;
    });
    event_stream_response(body, framing)
}

/// The response streaming what `body` receives, framed as `framing` says, until its
/// sender is dropped.
pub(super) fn event_stream_response(body: mpsc::Receiver<Bytes>, framing: Framing) -> Response {
    let content_type = match framing {
        Framing::Sse => "text/event-stream",
        Framing::Ndjson => "application/x-ndjson",
    };
    let stream = futures::stream::unfold(body, |mut body| async move {
        body.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), body))
    });
    let mut response = Body::from_stream(stream).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx must not hold the events back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

struct Run {
    events: mpsc::Sender<Bytes>,
    framing: Framing,
    tool_call_id: String,
}

/// The client hung up.
struct Gone;

impl Run {
    async fn drive(
        &self,
        door: &FrontDoor,
        caller: &Caller,
        tool: String,
        arguments: JsonObject,
        ctx: CallContext,
        mut inbox: Inbox,
    ) -> Option<()> {
        let gateway = &door.gateway;
        let name = call::resolve_name(gateway, caller, &tool);
        let mut start = json!({
            "tool_call_id": self.tool_call_id,
            "tool": name,
            "summary": crate::summary::start(&name, &arguments),
        });
        let input_bytes = serde_json::to_vec(&arguments).map_or(0, |b| b.len());
        if input_bytes <= MAX_ECHOED_INPUT_BYTES {
            start["input"] = Value::Object(arguments.clone());
        } else {
            start["input_omitted"] = json!(true);
            start["input_bytes"] = json!(input_bytes);
        }
        self.send("tool_call_start", &start).await.ok()?;

        let config = gateway.config();
        let mut coalescer = Coalescer::new(Settings {
            window: config.rest.coalesce_window,
            max_bytes: config.rest.coalesce_max_bytes,
        });
        // A client that hangs up cancels the call, which then runs to its end here (the
        // upstream told, the audit line and metric written with outcome `cancelled`).
        let cancel = ctx.cancel.clone();
        let mut hung_up = false;
        let execution = call::execute(gateway, caller, &name, arguments, ctx);
        tokio::pin!(execution);
        let finished = loop {
            let deadline = coalescer.next_deadline();
            tokio::select! {
                biased;
                update = inbox.next(), if !hung_up => {
                    if let Some(update) = update {
                        let due = coalescer.push(update, Instant::now());
                        hung_up = self.progress(due).await.is_err();
                    }
                }
                _ = sleep_until(deadline), if deadline.is_some() && !hung_up => {
                    let due = coalescer.due(Instant::now());
                    hung_up = self.progress(due).await.is_err();
                }
                _ = self.events.closed(), if !hung_up => hung_up = true,
                finished = &mut execution => break finished,
            }
            if hung_up {
                cancel.cancel();
            }
        };
        if hung_up {
            return None;
        }
        // Updates sent just before the result are still queued: they come first.
        for update in inbox.drain() {
            let due = coalescer.push(update, Instant::now());
            self.progress(due).await.ok()?;
        }
        self.progress(coalescer.finish()).await.ok()?;
        let complete = json!({
            "tool_call_id": self.tool_call_id,
            "is_error": finished.is_error(),
            "summary": finished.summary,
            "duration_ms": finished.duration.as_millis() as u64,
            "result_tokens": finished.result_tokens(),
        });
        self.send("tool_call_complete", &complete).await.ok()?;
        let result = match (&finished.outcome, finished.answer()) {
            (_, Some(answer)) => serde_json::to_value(answer),
            (Err(error), None) => serde_json::to_value(ErrorBody::from(ErrorDetail::of(error))),
            (Ok(_), None) => {
                serde_json::to_value(ErrorBody::from(ErrorDetail::new("failed", "no result")))
            }
        };
        let result = result.unwrap_or_default();
        self.send("result", &result).await.ok()
    }

    async fn progress(&self, emitted: Vec<Emitted>) -> Result<(), Gone> {
        for event in emitted {
            let mut data = json!({
                "tool_call_id": self.tool_call_id,
                "text": event.text,
                "stream": event.stream.as_str(),
                "closed": event.closed,
            });
            if let Some(progress) = event.progress {
                data["progress"] = json!(progress);
            }
            if let Some(total) = event.total {
                data["total"] = json!(total);
            }
            self.send("tool_progress", &data).await?;
        }
        Ok(())
    }

    async fn send(&self, event: &str, data: &Value) -> Result<(), Gone> {
        let frame = match self.framing {
            Framing::Sse => format!("event: {event}\ndata: {data}\n\n"),
            Framing::Ndjson => format!("{}\n", json!({"event": event, "data": data})),
        };
        self.events.send(Bytes::from(frame)).await.map_err(|_| Gone)
    }
}

/// What the upstream sends the caller during the call: progress, and what comes
/// through the call's client bridge.
struct Inbox {
    updates: mpsc::Receiver<Progress>,
    bridged: mpsc::Receiver<BridgeEvent>,
}

impl Inbox {
    /// The next update, `None` for something that makes none (a refused request);
    /// never ready once both queues are closed (the call is finishing).
    async fn next(&mut self) -> Option<Update> {
        tokio::select! {
            Some(progress) = self.updates.recv() => Some(progress_update(progress)),
            Some(event) = self.bridged.recv() => bridged_update(event),
            else => std::future::pending().await,
        }
    }

    /// What is still queued once the call has its result (it was sent before).
    fn drain(&mut self) -> Vec<Update> {
        let mut queued: Vec<Update> =
            std::iter::from_fn(|| self.updates.try_recv().ok().map(progress_update)).collect();
        queued
            .extend(std::iter::from_fn(|| self.bridged.try_recv().ok()).filter_map(bridged_update));
        queued
    }
}

/// An MCP progress notification as an `info` update: its message as one line.
fn progress_update(progress: Progress) -> Update {
    Update {
        stream: Stream::Info,
        text: progress.message.map(|m| m + "\n").unwrap_or_default(),
        progress: Some(progress.progress),
        total: progress.total,
    }
}

/// What an upstream sent the call's client: a log line becomes a `log` update; a
/// request (sampling, elicitation) is refused at once — a REST caller has no way to
/// answer it — and roots are none.
fn bridged_update(event: BridgeEvent) -> Option<Update> {
    match event {
        BridgeEvent::Notify { method, params } if method == "notifications/message" => {
            Some(Update {
                stream: Stream::Log,
                text: log_line(&params),
                progress: None,
                total: None,
            })
        }
        BridgeEvent::Notify { .. } => None,
        BridgeEvent::Request { method, answer, .. } => {
            let answered = if method == "roots/list" {
                Ok(json!({"roots": []}))
            } else {
                Err(RpcError {
                    code: toolgate_adapters::codes::METHOD_NOT_FOUND,
                    message: format!(
                        "'{method}' is not available: this call came over the plain-HTTP \
                         surface, whose caller cannot answer it (call the tool over MCP \
                         at /mcp to answer {method})"
                    ),
                    data: None,
                })
            };
            let _ = answer.send(answered);
            None
        }
    }
}

/// `notifications/message` params as one line: `<level> [<logger>: ]<data>`, the data
/// as text when it is a string and as compact JSON otherwise, cut to
/// [`MAX_LOG_LINE_BYTES`].
fn log_line(params: &Value) -> String {
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .unwrap_or("info");
    let data = match params.get("data") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let mut line = match params.get("logger").and_then(Value::as_str) {
        Some(logger) => format!("{level} {logger}: {data}"),
        None => format!("{level} {data}"),
    };
    if line.len() > MAX_LOG_LINE_BYTES {
        let mut cut = MAX_LOG_LINE_BYTES;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    line.push('\n');
    line
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
