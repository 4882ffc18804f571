//! The JSON-RPC client core shared by every MCP transport.
//!
//! One [`Rpc`] lives per connection. Transports give it an [`Outbound`] (how to put one
//! message on the wire) and feed every incoming message to [`Rpc::dispatch`], strictly
//! in the order they read them. Dispatch is synchronous: a progress notification is
//! pushed into the call's sink before the response that follows it on the wire resolves
//! the call, so a caller that drains its sink after getting the result sees every update.
//!
//! Messages stay raw `serde_json::Value`s: nothing here knows the shape of a tool or a
//! result beyond what routing needs (ids, methods, progress tokens).
//!
//! What the server sends besides responses and progress:
//! - `ping` is answered here;
//! - `sampling/createMessage` and `elicitation/create` go to the downstream client of
//!   the call they belong to ([`ClientBridge`]), when that call is known: the request
//!   arrived on that call's own HTTP response stream. A request with no such link
//!   (stdio and legacy SSE have none on the wire; an HTTP server's standalone stream)
//!   goes to the only call in flight solely when every caller of this upstream is one
//!   tenant ([`Rpc::set_one_tenant`]): a late or unprompted request can then reach
//!   no one the server's data was not already meant for. Otherwise nothing is
//!   guessed: "method not found" with the reason;
//! - `notifications/message` goes to a call's client like those requests (servers
//!   built on rmcp send even a call's own log lines on their standalone stream);
//! - `roots/list` and other notifications go to a call's client only when they
//!   arrived on its own stream: servers send them on their own schedule, not because
//!   of a call. Otherwise `roots/list` gets an empty list and notifications go to the
//!   upstream-wide broadcast;
//! - other notifications (`resources/updated`, `prompts/list_changed`, …) go to the
//!   broadcast; `tools/list_changed` goes to the supervisor.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use foldhash::HashMap;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod incoming;
mod params;

pub(crate) use params::{Params, tool_call_map};

use crate::{ClientBridge, ProgressSink};

use crate::codes::METHOD_NOT_FOUND;

/// How long a best-effort message we do not wait for (a cancellation, a reply to a
/// server's ping) may take to send before it is given up.
const FIRE_AND_FORGET_TIMEOUT: Duration = Duration::from_secs(5);
/// Progress routes kept at most per connection before closed ones are swept.
const MAX_PROGRESS_ROUTES: usize = 1024;

/// How long a server->client request may wait for the downstream client (a human may
/// be answering an elicitation) unless the client says otherwise
/// ([`ClientBridge::answer_within`](crate::ClientBridge::answer_within)); the call's own
/// deadline usually ends it sooner.
const BRIDGE_TIMEOUT: Duration = Duration::from_secs(600);

/// Notifications the upstream sends outside any known call, as `(method, params)`.
pub(crate) type NotificationSender = broadcast::Sender<(String, Value)>;

/// Who a request is for.
#[derive(Clone)]
pub(crate) enum Origin {
    /// The adapter's own protocol traffic (`initialize`, `tools/list`, `ping`).
    Protocol,
    /// A caller's call, with its downstream client when the surface has one.
    Call(Option<Arc<dyn ClientBridge>>),
}

/// One JSON-RPC message as it goes on the wire.
pub(crate) struct Outgoing {
    /// Its JSON text.
    pub json: Vec<u8>,
    /// The W3C trace context it carries in `params._meta` (see [`crate::TraceContext`]),
    /// which the HTTP transports copy into headers.
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

impl Outgoing {
    pub(crate) fn from_value(msg: &Value) -> Outgoing {
        // A `Value` always serializes (its keys are strings).
        let json = serde_json::to_vec(msg).unwrap_or_default();
        let (traceparent, tracestate) =
            params::meta_trace(msg.get("params").and_then(Value::as_object));
        Outgoing {
            json,
            traceparent,
            tracestate,
        }
    }

    /// `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params>}`, written
    /// directly: building the envelope as a map was a dozen allocations a call. With
    /// `token`, `params._meta.progressToken` is that token (see [`Params::write`]).
    fn request(id: u64, method: &str, params: &Params<'_>, token: Option<&str>) -> Outgoing {
        let mut json = Vec::with_capacity(128);
        json.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        // Numbers and strings always serialize.
        let _ = serde_json::to_writer(&mut json, &id);
        json.extend_from_slice(b",\"method\":");
        let _ = serde_json::to_writer(&mut json, method);
        json.extend_from_slice(b",\"params\":");
        params.write(&mut json, token);
        json.push(b'}');
        let (traceparent, tracestate) = params.trace();
        Outgoing {
            json,
            traceparent,
            tracestate,
        }
    }
}

/// Puts one JSON-RPC message on the wire.
#[async_trait]
pub(crate) trait Outbound: Send + Sync + 'static {
    /// Sends `msg`. For a request, `id` is its id and `deadline` bounds how long the
    /// transport may keep working on it (a streamable HTTP POST reading its answer).
    /// A transport that learns of the request's failure after returning (an HTTP error
    /// status for a POST it carries on in the background) reports it with
    /// [`Rpc::fail`].
    async fn send(&self, msg: Outgoing, id: Option<u64>, deadline: Instant) -> Result<(), String>;
}

/// Why a request produced no result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RpcFailure {
    /// The peer answered with a JSON-RPC error.
    Error {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// The connection is gone (or the message could not be sent); the reason says why.
    Closed(String),
    /// The transport could not carry this one request to an answer (an HTTP error
    /// status, a response stream that ended early); the connection itself may be fine.
    Transport(String),
    /// The caller's cancellation token fired.
    Cancelled,
    /// The deadline passed.
    Timeout,
}

/// Something the supervisor has to act on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RpcEvent {
    /// `notifications/tools/list_changed`: list the tools again.
    ToolsListChanged,
    /// `notifications/prompts/list_changed` or `notifications/resources/list_changed`:
    /// list prompts, resources and templates again.
    OfferingsListChanged,
}

pub(crate) type Reply = Result<Value, RpcFailure>;

/// A response's `result`: parsed, or as the peer's JSON text when the message was a
/// plain response (read without building a tree: see [`Rpc::dispatch_bytes`]).
#[derive(Debug)]
pub(crate) enum Answer {
    Value(Value),
    Text(Box<RawValue>),
}

impl Answer {
    pub(crate) fn into_value(self) -> Value {
        match self {
            Answer::Value(value) => value,
            // The text was read as JSON already, so this parses.
            Answer::Text(text) => serde_json::from_str(text.get()).unwrap_or(Value::Null),
        }
    }
}

/// A response with a result, its `result` kept as text. Other members (`jsonrpc`)
/// are skipped; one with a `method` or an `error` is not a result (see
/// [`Rpc::dispatch_result_text`]).
#[derive(serde::Deserialize)]
struct ResultMessage<'a> {
    #[serde(borrow)]
    id: &'a RawValue,
    result: Box<RawValue>,
    #[serde(default, borrow)]
    method: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

/// One connection's request/response bookkeeping.
pub(crate) struct Rpc {
    upstream: Arc<str>,
    next_id: AtomicU64,
    state: Mutex<State>,
    outbound: Arc<dyn Outbound>,
    events: mpsc::Sender<RpcEvent>,
    /// Flips to `Some(reason)` once, when the connection is lost.
    closed_tx: watch::Sender<Option<String>>,
    /// Set by the supervisor before `initialize`; kept across reconnects there.
    notifications: std::sync::OnceLock<NotificationSender>,
    /// Whether every caller of this upstream is one tenant (set by the gateway from
    /// its policy; shared across reconnects). Unset or false: no guessing.
    one_tenant: std::sync::OnceLock<Arc<AtomicBool>>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, oneshot::Sender<Result<Answer, RpcFailure>>>,
    /// progressToken (as its JSON text, so `1` and `"1"` stay distinct) -> sink.
    progress: HashMap<String, ProgressSink>,
    /// Callers' calls in flight (not protocol traffic), with their downstream client.
    calls: HashMap<u64, Option<Arc<dyn ClientBridge>>>,
    closed: Option<String>,
}

impl Rpc {
    pub(crate) fn new(
        upstream: Arc<str>,
        outbound: Arc<dyn Outbound>,
    ) -> (Arc<Self>, mpsc::Receiver<RpcEvent>) {
        // Events are idempotent (list again): a few waiting are as good as many.
        let (events, events_rx) = mpsc::channel(16);
        let (closed_tx, _) = watch::channel(None);
        let rpc = Arc::new(Self {
            upstream,
            next_id: AtomicU64::new(1),
            state: Mutex::new(State::default()),
            outbound,
            events,
            closed_tx,
            notifications: std::sync::OnceLock::new(),
            one_tenant: std::sync::OnceLock::new(),
        });
        (rpc, events_rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the maps inconsistent (every
        // critical section is a single insert/remove), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where notifications outside any known call go.
    pub(crate) fn set_notifications(&self, tx: NotificationSender) {
        let _ = self.notifications.set(tx);
    }

    /// The flag that says every caller of this upstream is one tenant (see the module
    /// docs).
    pub(crate) fn set_one_tenant(&self, flag: Arc<AtomicBool>) {
        let _ = self.one_tenant.set(flag);
    }

    /// Whether a message that names no call may go to the only call in flight.
    fn may_attribute_unlinked(&self) -> bool {
        self.one_tenant
            .get()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    /// The reason the connection was lost, once it is.
    pub(crate) fn closed_reason(&self) -> Option<String> {
        self.lock().closed.clone()
    }

    /// Resolves when the connection is lost, with the reason.
    pub(crate) async fn closed(&self) -> String {
        let mut rx = self.closed_tx.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return "connection dropped".to_owned();
            }
        }
    }

    /// Marks the connection lost: every pending call fails at once with `reason`.
    /// Idempotent; the first reason wins.
    pub(crate) fn close(&self, reason: impl Into<String>) {
        let reason = reason.into();
        let pending = {
            let mut st = self.lock();
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(reason.clone());
            st.progress.clear();
            st.calls.clear();
            std::mem::take(&mut st.pending)
        };
        tracing::debug!(upstream = %self.upstream, reason = %reason, failed = pending.len(), "connection closed");
        for (_, tx) in pending {
            let _ = tx.send(Err(RpcFailure::Closed(reason.clone())));
        }
        self.closed_tx.send_replace(Some(reason));
    }

    /// Fails one pending request (used by transports that carry a request on in the
    /// background and learn of its failure later).
    pub(crate) fn fail(&self, id: u64, failure: RpcFailure) {
        let tx = self.lock().pending.remove(&id);
        if let Some(tx) = tx {
            let _ = tx.send(Err(failure));
        }
    }

    /// Whether `id` is still waiting for its response.
    pub(crate) fn is_pending(&self, id: u64) -> bool {
        self.lock().pending.contains_key(&id)
    }

    /// Sends a notification and waits until the transport has taken it.
    pub(crate) async fn notify(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<(), String> {
        if let Some(reason) = self.closed_reason() {
            return Err(reason);
        }
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            msg["params"] = params;
        }
        let deadline = Instant::now() + timeout;
        let msg = Outgoing::from_value(&msg);
        match tokio::time::timeout_at(deadline, self.outbound.send(msg, None, deadline)).await {
            Ok(r) => r,
            Err(_) => Err(format!("sending {method} timed out")),
        }
    }

    /// Sends a request and waits for its response, the deadline or the cancellation,
    /// whichever comes first. With `progress`, a fresh progressToken is put in
    /// `params._meta` and the upstream's progress notifications for it go to the sink.
    /// On cancellation or timeout the upstream is told with `notifications/cancelled`.
    /// A request of the gateway's own (initialize, listings, health checks,
    /// forwarded prompts and resources): no caller's cancellation, progress or client.
    pub(crate) async fn protocol_request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Reply {
        self.request(
            method,
            params.into(),
            deadline,
            None,
            None,
            Origin::Protocol,
        )
        .await
        .map(Answer::into_value)
    }

    /// The result comes as it arrived: the peer's JSON text when the response was
    /// plain (a tool result passed on without a parse; [`Answer::into_value`] parses).
    pub(crate) async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Params<'_>,
        deadline: Instant,
        cancel: Option<&CancellationToken>,
        progress: Option<ProgressSink>,
        origin: Origin,
    ) -> Result<Answer, RpcFailure> {
        if deadline <= Instant::now() {
            // Sending would only be followed by a cancellation right away.
            return Err(RpcFailure::Timeout);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        let token_key = {
            let mut st = self.lock();
            if let Some(reason) = &st.closed {
                return Err(RpcFailure::Closed(reason.clone()));
            }
            st.pending.insert(id, tx);
            if let Origin::Call(client) = origin {
                st.calls.insert(id, client);
            }
            progress.map(|sink| {
                // A string token cannot collide with another upstream's, and `id` is
                // unique on this connection. The key is the token's JSON text, as
                // progress notifications are looked up by (see `handle_progress`).
                let key = format!("\"tg-{id}\"");
                if st.progress.len() >= MAX_PROGRESS_ROUTES {
                    // Routes kept for progress after a result go once their caller
                    // stopped listening.
                    st.progress.retain(|_, sink| !sink.is_closed());
                }
                st.progress.insert(key.clone(), sink);
                key
            })
        };
        let msg = Outgoing::request(id, method, &params, token_key.as_deref());
        drop(params);

        let never = CancellationToken::new();
        let cancel = cancel.unwrap_or(&never);
        let sleep = tokio::time::sleep_until(deadline);
        tokio::pin!(sleep);

        // Sending may itself wait (a full pipe, an HTTP POST), so it races the
        // cancellation and the deadline too.
        let outcome = tokio::select! {
            biased;
            r = async {
                if let Err(e) = self.outbound.send(msg, Some(id), deadline).await {
                    return Err(RpcFailure::Closed(e));
                }
                match (&mut rx).await {
                    Ok(reply) => reply,
                    Err(_) => Err(RpcFailure::Closed("connection dropped".into())),
                }
            } => r,
            _ = cancel.cancelled() => Err(RpcFailure::Cancelled),
            _ = &mut sleep => Err(RpcFailure::Timeout),
        };

        let was_pending = {
            let mut st = self.lock();
            // A tool may go on reporting progress after its result (a background
            // stream): the route stays while its caller listens (see
            // `handle_progress`); a failed request's goes now.
            if let Some(key) = &token_key
                && outcome.is_err()
            {
                st.progress.remove(key);
            }
            st.calls.remove(&id);
            st.pending.remove(&id).is_some()
        };
        if was_pending && matches!(outcome, Err(RpcFailure::Cancelled | RpcFailure::Timeout)) {
            let reason = if matches!(outcome, Err(RpcFailure::Cancelled)) {
                "cancelled by the caller"
            } else {
                "deadline exceeded"
            };
            self.send_cancelled(id, reason);
        }
        outcome
    }

    /// Tells the upstream to stop working on request `id` (best effort, in the
    /// background: the caller has its answer already).
    fn send_cancelled(self: &Arc<Self>, id: u64, reason: &str) {
        if self.closed_reason().is_some() {
            return;
        }
        let rpc = self.clone();
        let params = json!({"requestId": id, "reason": reason});
        tokio::spawn(async move {
            if let Err(e) = rpc
                .notify(
                    "notifications/cancelled",
                    Some(params),
                    FIRE_AND_FORGET_TIMEOUT,
                )
                .await
            {
                tracing::debug!(upstream = %rpc.upstream, error = %e, "could not send notifications/cancelled");
            }
        });
    }

    /// Handles one incoming message (or batch). Must be called in wire order, from one
    /// task per stream; never blocks. `related` is the id of our request whose response
    /// stream carried the message (streamable HTTP), if any.
    pub(crate) fn dispatch(self: &Arc<Self>, msg: Value, related: Option<u64>) {
        match msg {
            Value::Array(batch) => {
                for m in batch {
                    self.dispatch(m, related);
                }
            }
            Value::Object(obj) => self.dispatch_object(obj, related),
            other => {
                tracing::warn!(upstream = %self.upstream, kind = crate::error::json_kind(&other), "ignoring a JSON-RPC message that is not an object");
            }
        }
    }

    /// Parses and dispatches one line / event body; malformed input is logged and
    /// skipped (a broken message must not take the connection down).
    pub(crate) fn dispatch_bytes(self: &Arc<Self>, bytes: &[u8], related: Option<u64>) {
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() || self.dispatch_result_text(trimmed) {
            return;
        }
        match serde_json::from_slice::<Value>(trimmed) {
            Ok(v) => self.dispatch(v, related),
            Err(e) => {
                tracing::warn!(upstream = %self.upstream, error = %e, len = trimmed.len(), "skipping a message that is not valid JSON");
            }
        }
    }

    /// Parses and dispatches one stdio line. A line of plain text (a banner some
    /// servers print to stdout against the spec) is logged and skipped; a line that
    /// starts a JSON object or array but does not parse is a broken message — the
    /// response it carried is lost — and comes back as `Err` with the reason (the
    /// caller ends the connection). The line's content is never logged: it may hold a
    /// tool result.
    pub(crate) fn dispatch_line(self: &Arc<Self>, bytes: &[u8]) -> Result<(), String> {
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() || self.dispatch_result_text(trimmed) {
            return Ok(());
        }
        match serde_json::from_slice::<Value>(trimmed) {
            Ok(v) => {
                self.dispatch(v, None);
                Ok(())
            }
            Err(e) if matches!(trimmed[0], b'{' | b'[') => Err(format!(
                "the MCP server wrote a broken JSON-RPC message to stdout ({} bytes: {e}); \
                 the process is being restarted",
                trimmed.len()
            )),
            Err(_) => {
                tracing::warn!(upstream = %self.upstream, len = trimmed.len(), "skipping a stdout line that is not JSON (MCP servers must write only JSON-RPC messages to stdout; logs go to stderr)");
                Ok(())
            }
        }
    }

    fn dispatch_object(self: &Arc<Self>, mut obj: Map<String, Value>, related: Option<u64>) {
        let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
        match (method, obj.contains_key("id")) {
            (Some(method), true) => {
                let id = obj.remove("id").unwrap_or(Value::Null);
                let params = obj.remove("params").unwrap_or(Value::Null);
                self.answer_server_request(method, id, params, related);
            }
            (Some(method), false) => {
                let params = obj.remove("params").unwrap_or(Value::Null);
                self.handle_notification(&method, params, related);
            }
            (None, true) => self.handle_response(obj),
            (None, false) => {
                tracing::warn!(upstream = %self.upstream, "ignoring a JSON-RPC message with neither method nor id");
            }
        }
    }

    /// Resolves the request a plain response answers, its `result` kept as the peer's
    /// text (most messages a connection reads are results, and a tool's result is
    /// usually passed on unread: see `CallOutput`). Whether `bytes` was such a
    /// response; anything else (requests, notifications, errors, batches, an id we
    /// do not read as ours) is left to the full parse.
    fn dispatch_result_text(&self, bytes: &[u8]) -> bool {
        if bytes.first() != Some(&b'{') {
            return false;
        }
        let Ok(message) = serde_json::from_slice::<ResultMessage>(bytes) else {
            return false;
        };
        if message.method.is_some() || message.error.is_some() {
            return false;
        }
        let Some(id) = serde_json::from_str::<Value>(message.id.get())
            .ok()
            .as_ref()
            .and_then(id_of)
        else {
            return false;
        };
        self.resolve(id, Ok(Answer::Text(message.result)));
        true
    }

    fn handle_response(&self, mut obj: Map<String, Value>) {
        let Some(id) = obj.get("id").and_then(id_of) else {
            // A response with id null answers a request the server could not parse:
            // nothing to resolve, but worth a log line.
            tracing::warn!(upstream = %self.upstream, error = ?obj.get("error"), "response with an unknown id");
            return;
        };
        let reply = if let Some(err) = obj.remove("error") {
            let code = err
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(crate::codes::INTERNAL_ERROR);
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_owned();
            let data = err.get("data").cloned();
            Err(RpcFailure::Error {
                code,
                message,
                data,
            })
        } else if let Some(result) = obj.remove("result") {
            Ok(Answer::Value(result))
        } else {
            Err(RpcFailure::Error {
                code: crate::codes::INTERNAL_ERROR,
                message: "response has neither result nor error".into(),
                data: None,
            })
        };
        self.resolve(id, reply);
    }

    /// Hands `reply` to the request `id` waits on.
    fn resolve(&self, id: u64, reply: Result<Answer, RpcFailure>) {
        let tx = self.lock().pending.remove(&id);
        match tx {
            Some(tx) => {
                let _ = tx.send(reply);
            }
            // An id we never sent: the server is confused; the call it meant (if any)
            // runs on to its deadline. Logged loudly, dropped.
            None if id >= self.next_id.load(Ordering::Relaxed) => {
                tracing::warn!(upstream = %self.upstream, id, "dropping a response with an id the gateway never sent")
            }
            // Normal after a cancellation or timeout: the server answered anyway.
            None => {
                tracing::debug!(upstream = %self.upstream, id, "response for a request no longer pending")
            }
        }
    }
}

/// Our ids are unsigned integers; a server echoing one back as a string is tolerated.
fn id_of(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Cuts `s` to at most `max` bytes on a char boundary, marking the cut.
pub(crate) fn truncate_utf8(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_written_as_its_tree_would_serialize() {
        let params = json!({"name": "t\"x", "arguments": {"b": 1, "a": [true, null]},
            "_meta": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                      "progressToken": "tg-7"}});
        let Value::Object(map) = params.clone() else {
            unreachable!()
        };
        let written = Outgoing::request(u64::MAX, "tools/call", &Params::Map(map), None);
        let tree = json!({"jsonrpc": "2.0", "id": u64::MAX, "method": "tools/call",
            "params": params});
        assert_eq!(written.json, serde_json::to_vec(&tree).unwrap());
        let from_tree = Outgoing::from_value(&tree);
        assert_eq!(written.json, from_tree.json);
        assert_eq!(written.traceparent, from_tree.traceparent);
        assert!(written.traceparent.is_some());
        assert_eq!(written.tracestate, None);
    }
}
