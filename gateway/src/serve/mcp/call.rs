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

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::{CallOutput, Progress, RpcError, ToolError};

use super::live::{InFlight, Live};
use super::sessionless::LogLevel;
use super::{Reply, wire};
use crate::access::Caller;
use crate::errors::{self, McpFailure};
use crate::gateway::Gateway;
use crate::serve::bridge::{BridgeEvent, QueueBridge};
use crate::telemetry::CallTrace;

#[derive(Deserialize)]
pub(super) struct CallParams {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<CallMeta>,
    /// 2025-11-25: run the call as a task (`{ttl?}`; see [`super::tasks`]).
    /// 2026-07-28 ignores it, as that version asks.
    #[serde(default)]
    pub task: Option<Value>,
    /// 2026-07-28 retry of a call that answered `input_required`: the client's
    /// answers, keyed as the gateway asked, and the state it echoes.
    #[serde(default, rename = "inputResponses")]
    input_responses: Option<Map<String, Value>>,
    #[serde(default, rename = "requestState")]
    request_state: Option<String>,
}

impl CallParams {
    /// The state a 2026-07-28 retry echoes, when this is one.
    pub(super) fn request_state(&self) -> Option<&str> {
        self.request_state.as_deref()
    }
}

/// Where a call answers: on its session, or on the sessionless request itself.
pub(super) enum Channel {
    /// A session's (its id).
    Session(String),
    /// A sessionless 2026-07-28 request's, with the log level it asked for.
    Sessionless { log_level: Option<LogLevel> },
}

impl Channel {
    fn session(&self) -> Option<&str> {
        match self {
            Channel::Session(id) => Some(id),
            Channel::Sessionless { .. } => None,
        }
    }

    /// Whether a log line of `level` goes to this caller: a session gets every one
    /// at or above the level it set with `logging/setLevel` (every one before it
    /// set any, as before 2026-07-28); a sessionless request only what it asked for.
    fn wants_log(&self, live: &Live, level: LogLevel) -> bool {
        match self {
            Channel::Session(session) => {
                live.log_level(session).is_none_or(|wanted| level >= wanted)
            }
            Channel::Sessionless { log_level } => log_level.is_some_and(|wanted| level >= wanted),
        }
    }
}

/// What a call's `_meta` says to the gateway. Values are kept as sent, whatever
/// their type: only a sessionless call (see [`super::sessionless`]) checks the
/// version's own keys, and a session's call ignores them.
#[derive(Deserialize)]
pub(super) struct CallMeta {
    #[serde(default, rename = "progressToken")]
    progress_token: Option<Value>,
    #[serde(default, rename = "io.modelcontextprotocol/protocolVersion")]
    pub protocol_version: Option<Value>,
    #[serde(default, rename = "io.modelcontextprotocol/clientCapabilities")]
    pub client_capabilities: Option<Value>,
    #[serde(default, rename = "io.modelcontextprotocol/logLevel")]
    pub log_level: Option<Value>,
    /// W3C trace context, the MCP convention (see [`crate::telemetry`]).
    #[serde(default)]
    traceparent: Option<Value>,
    #[serde(default)]
    tracestate: Option<Value>,
}

impl CallMeta {
    /// `traceparent` and `tracestate`, when the first is a string.
    fn trace(&self) -> Option<(&str, Option<&str>)> {
        let traceparent = self.traceparent.as_ref()?.as_str()?;
        Some((
            traceparent,
            self.tracestate.as_ref().and_then(Value::as_str),
        ))
    }
}

/// What the call future answers: the output, or the failure, and whether the
/// caller's visible list changed (`tool_expand_tools`).
type Outcome = Result<(CallOutput, bool), ToolError>;

/// Everything one call needs, owned, so it can live in the answer's body.
pub(super) struct CallRequest {
    pub gateway: Arc<Gateway>,
    pub live: Arc<Live>,
    pub caller: Caller,
    pub channel: Channel,
    /// The JSON-RPC id, as raw JSON.
    pub id: String,
    pub params: CallParams,
    pub headers: Arc<http::HeaderMap>,
}

/// Answers one `tools/call`. A client that hangs up drops this future or the stream
/// it answers with (the transport notices the closed connection), which cancels the
/// call.
pub(super) async fn answer(request: CallRequest) -> Reply {
    serve(CallStream::start(request)).await
}

/// Answers a 2026-07-28 retry that carries `requestState`: the parked call it names
/// gets the client's answers and goes on, or the retry is told to start over.
pub(super) async fn resume(
    live: &Arc<Live>,
    caller: &Caller,
    id: String,
    params: CallParams,
    log_level: Option<LogLevel>,
) -> Reply {
    let token = params.request_state.clone().unwrap_or_default();
    match live.unpark(&token, &caller.principal(), &params.name) {
        Some(mut call) => {
            call.resumed(id, params, log_level);
            serve(call).await
        }
        None => Reply::Message(wire::error_message(
            &id,
            toolgate_adapters::codes::INVALID_PARAMS,
            &format!(
                "requestState is unknown or expired (a call waits {} s for the client's \
                 answers, on the replica that asked): call '{}' again without it",
                PARK_TTL.as_secs(),
                params.name
            ),
            None,
        )),
    }
}

/// How long a call that asked a 2026-07-28 client for input waits for the retry.
pub(super) const PARK_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// The call's messages: the result alone as one message, or everything it sends
/// before the result as a stream that ends with it.
async fn serve(mut call: CallStream) -> Reply {
    let first = match call.next().await {
        Some((message, true)) => {
            call.finish();
            return Reply::Message(message);
        }
        Some((message, false)) => Bytes::from(message),
        // The caller cancelled the call before anything was sent: no answer, a
        // stream that ends empty.
        None => return Reply::stream(futures::stream::empty()),
    };
    let stream = futures::stream::unfold((Some(first), Some(call)), |(first, call)| async move {
        if let Some(message) = first {
            return Some((message, (None, call)));
        }
        let mut call = call?;
        let (message, is_last) = call.next().await?;
        let rest = if is_last {
            call.finish();
            None
        } else {
            Some(call)
        };
        Some((Bytes::from(message), (None, rest)))
    });
    Reply::stream(stream)
}

/// One call and what it sends on its way; dropping it cancels the call.
pub(super) struct CallStream {
    call: Option<Pin<Box<dyn Future<Output = Outcome> + Send>>>,
    updates: mpsc::Receiver<Progress>,
    events: mpsc::Receiver<BridgeEvent>,
    outcome: Option<Outcome>,
    live: Arc<Live>,
    channel: Channel,
    id: String,
    tool: String,
    /// Goes back to the client in the result's `_meta` (see [`crate::telemetry`]).
    correlation_id: String,
    progress_token: Option<Value>,
    done: bool,
    /// The ids of requests sent to the client that are still unanswered.
    asked: Vec<String>,
    cancel: CancellationToken,
    /// Lets `notifications/cancelled` find a session's call.
    _in_flight: Option<InFlight>,
    /// Whose call it is (a parked call resumes only for the same principal).
    principal: crate::policy::Principal,
    /// Sessionless: the upstream's requests to put in the next `input_required`
    /// answer, and those already put there, waiting for the client's retry.
    to_ask: Vec<(String, String, Value, super::live::Answer)>,
    awaiting: Vec<(String, super::live::Answer)>,
    next_key: u32,
    /// Set when the last message was `input_required`: the state it named.
    parking: Option<String>,
    /// The last progress value sent (progress must increase).
    last_progress: Option<f64>,
    /// Once the outcome is known: how many queued updates and events the upstream
    /// sent before it (they go out before the result). What it sends after the
    /// result — a background stream, a flood — is not waited for here.
    before_result: Option<(usize, usize)>,
}

/// Whether `update` advances past `last` (and records it when it does): MCP progress
/// values must increase, whatever an upstream sends.
pub(super) fn advances(last: &mut Option<f64>, update: &Progress) -> bool {
    if last.is_some_and(|last| update.progress <= last) {
        return false;
    }
    *last = Some(update.progress);
    true
}

/// `notifications/progress` for the caller's `token`.
pub(super) fn progress_notification(token: &Value, tool: &str, update: Progress) -> Vec<u8> {
    let mut params = json!({
        "progressToken": token,
        "progress": update.progress,
        "_meta": {"toolgate/tool": tool},
    });
    if let Some(total) = update.total {
        params["total"] = json!(total);
    }
    if let Some(message) = update.message {
        params["message"] = json!(message);
    }
    wire::notification("notifications/progress", &params)
}

impl CallStream {
    fn start(request: CallRequest) -> CallStream {
        let CallRequest {
            gateway,
            live,
            caller,
            channel,
            id,
            params,
            headers,
        } = request;
        let principal = caller.principal();
        let name = params.name;
        let arguments = params.arguments.unwrap_or_default();
        let trace = CallTrace::start(
            "mcp",
            &headers,
            params.meta.as_ref().and_then(CallMeta::trace),
        );
        // A session's client said so at `initialize`; a 2026-07-28 request says so
        // itself.
        let elicits_urls = match channel.session() {
            Some(session) => live.takes_url_elicitations(session),
            None => crate::serve::bridge::elicits_urls(
                params
                    .meta
                    .as_ref()
                    .and_then(|m| m.client_capabilities.as_ref()),
            ),
        };
        let progress_token = params.meta.and_then(|m| m.progress_token);
        let cancel = CancellationToken::new();
        let in_flight = channel
            .session()
            .map(|session| live.call_started(session, &id, cancel.clone()));

        let (sink, updates) = toolgate_adapters::progress_channel();
        let (bridge, events) = QueueBridge::new();
        let bridge = bridge.eliciting_urls(elicits_urls);
        let mut ctx = trace.call_context(gateway.config().call_timeout);
        ctx.cancel = cancel.clone();
        ctx.request_headers = headers;
        ctx.progress = Some(sink);
        ctx.client = Some(Arc::new(bridge));

        let tool = name.clone();
        let request_span = trace.span;
        let call = Box::pin(async move {
            // The request's span lasts as long as its call (its children name it as
            // their parent through `ctx`).
            let _request_span = request_span;
            crate::call::call(&gateway, &caller, &name, arguments, ctx)
                .await
                .map(|called| (called.output, called.list_changed))
        });
        CallStream {
            call: Some(call),
            updates,
            events,
            outcome: None,
            live,
            channel,
            id,
            tool,
            correlation_id: trace.correlation_id,
            progress_token,
            done: false,
            asked: Vec::new(),
            cancel,
            _in_flight: in_flight,
            principal,
            to_ask: Vec::new(),
            awaiting: Vec::new(),
            next_key: 0,
            parking: None,
            last_progress: None,
            before_result: None,
        }
    }

    /// After the last message: a call that asked for input is parked for the
    /// client's retry (see [`resume`]); any other is done.
    fn finish(mut self) {
        if let Some(token) = self.parking.take() {
            let live = self.live.clone();
            let (principal, tool) = (self.principal.clone(), self.tool.clone());
            live.park(token, principal, tool, self);
            return;
        }
        // A tool may go on reporting progress after its result (a background
        // stream): a session's caller that gave a progressToken gets it on the
        // session's stream (see `Live::linger`).
        if let (Some(session), Some(token)) = (self.channel.session(), self.progress_token.take()) {
            let (_, closed) = toolgate_adapters::progress_channel();
            let updates = std::mem::replace(&mut self.updates, closed);
            self.live.clone().linger(
                session.to_owned(),
                token,
                self.tool.clone(),
                updates,
                self.last_progress,
            );
        }
    }

    /// A parked call taken up again by the client's retry: its answers go to the
    /// upstream requests that asked, and the rest of the call answers the retry.
    fn resumed(&mut self, id: String, params: CallParams, log_level: Option<LogLevel>) {
        let mut responses = params.input_responses.unwrap_or_default();
        for (key, answer) in self.awaiting.drain(..) {
            let _ = answer.send(responses.remove(&key).ok_or_else(|| RpcError {
                code: toolgate_adapters::codes::INVALID_PARAMS,
                message: format!("the client sent no answer for input request '{key}'"),
                data: None,
            }));
        }
        self.id = id;
        self.done = false;
        self.before_result = None;
        self.channel = Channel::Sessionless { log_level };
        if let Some(token) = params.meta.and_then(|m| m.progress_token) {
            self.progress_token = Some(token);
        }
    }

    /// 2026-07-28's answer when the upstream asked for input (SEP-2322): the
    /// requests, keyed, and the state the client echoes in its retry.
    fn input_required(&mut self) -> Vec<u8> {
        let mut requests = Map::new();
        for (key, method, params, answer) in self.to_ask.drain(..) {
            requests.insert(key.clone(), json!({"method": method, "params": params}));
            self.awaiting.push((key, answer));
        }
        let token = crate::state::sessions::new_session_id();
        self.parking = Some(token.clone());
        self.done = true;
        let result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": token,
        });
        wire::result_message(&self.id, &result.to_string())
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
        if !self.to_ask.is_empty() {
            // What the call queued before it asked goes out first.
            if let Ok(update) = self.updates.try_recv() {
                return self.progress(update).map(|m| (m, false));
            }
            if let Ok(event) = self.events.try_recv() {
                return self.bridged(event).map(|m| (m, false));
            }
            return Some((self.input_required(), true));
        }
        if let Some(call) = self.call.as_mut() {
            tokio::select! {
                biased;
                Some(update) = self.updates.recv() => return self.progress(update).map(|m| (m, false)),
                Some(event) = self.events.recv() => return self.bridged(event).map(|m| (m, false)),
                outcome = call => {
                    self.call = None;
                    self.outcome = Some(outcome);
                }
            }
        }
        // The adapter queues everything before it resolves the call: what was queued
        // when the outcome came goes out before the result, and nothing more (what
        // the upstream sends after its result reaches the session later, see
        // `finish`).
        let (updates, events) = self
            .before_result
            .get_or_insert_with(|| (self.updates.len(), self.events.len()));
        if *updates > 0 {
            *updates -= 1;
            if let Ok(update) = self.updates.try_recv() {
                return self.progress(update).map(|m| (m, false));
            }
        }
        if *events > 0 {
            *events -= 1;
            if let Ok(event) = self.events.try_recv() {
                return self.bridged(event).map(|m| (m, false));
            }
        }
        if let Some(Ok((_, changed))) = self.outcome.as_mut()
            && *changed
        {
            // The list grew: tell this session (once), on its GET stream when one is
            // open, otherwise here, before the result. Sessionless callers keep no
            // list to announce.
            *changed = false;
            let session = self.channel.session()?;
            let message = wire::notification("notifications/tools/list_changed", &json!({}));
            if !self.live.send_to_session(session, &message) {
                return Some((message, false));
            }
        }
        let outcome = self.outcome.take()?;
        self.done = true;
        if matches!(outcome, Err(ToolError::Cancelled(_))) && self.cancel.is_cancelled() {
            // The caller cancelled (`notifications/cancelled`): the spec says the
            // receiver SHOULD NOT answer a cancelled request, so its stream ends bare.
            return None;
        }
        Some((self.result(outcome), true))
    }

    fn result(&self, outcome: Outcome) -> Vec<u8> {
        let raw = match outcome {
            Ok((output, _)) => match output.plain_json() {
                Some(json) => return wire::result_message(&self.id, &self.plain_result(json)),
                None => output.into_object(),
            },
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
        if let Value::Object(meta) = raw
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()))
        {
            meta.insert(
                crate::telemetry::CORRELATION_META.into(),
                Value::String(self.correlation_id.clone()),
            );
        }
        if let Channel::Sessionless { .. } = self.channel {
            // The version requires it on every result (Python `mcp` rejects one without).
            raw.entry("resultType").or_insert_with(|| json!("complete"));
        }
        let result = serde_json::to_string(&raw).unwrap_or_default();
        wire::result_message(&self.id, &result)
    }

    /// A plain result (text blocks and `isError` only, see `CallOutput`) as the
    /// upstream wrote it, with what [`CallStream::result`] adds to any result (its
    /// `_meta` correlation id, the sessionless `resultType`) written in front: a plain
    /// result has neither key, and holds `content`, so the rest follows a comma.
    fn plain_result(&self, json: &str) -> String {
        let correlation = serde_json::to_string(&self.correlation_id).unwrap_or_default();
        let mut out = String::with_capacity(json.len() + correlation.len() + 80);
        out.push_str("{\"_meta\":{\"");
        out.push_str(crate::telemetry::CORRELATION_META);
        out.push_str("\":");
        out.push_str(&correlation);
        out.push('}');
        if let Channel::Sessionless { .. } = self.channel {
            out.push_str(",\"resultType\":\"complete\"");
        }
        out.push(',');
        out.push_str(&json[1..]);
        out
    }

    #[allow(deprecated)]
    fn progress(&mut self, update: Progress) -> Option<Vec<u8>> {
        if self.progress_token.is_none() && !self.channel.wants_log(&self.live, LogLevel::Info) {
            return None;
        }
        if !advances(&mut self.last_progress, &update) {
            tracing::debug!(tool = %self.tool, "progress that does not advance dropped");
            return None;
        }
        let meta = json!({"toolgate/tool": self.tool});
        Some(match &self.progress_token {
            Some(token) => progress_notification(token, &self.tool, update),
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
                    && !self
                        .channel
                        .wants_log(&self.live, LogLevel::of_message(&params))
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
                let Some(session) = self.channel.session() else {
                    // 2026-07-28 has no server-to-client requests: the call answers
                    // `input_required` with it, and the client's retry brings the
                    // answer (see `input_required` and `resume`).
                    self.next_key += 1;
                    let key = format!("toolgate-{}", self.next_key);
                    self.to_ask.push((key, method, params, answer));
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
