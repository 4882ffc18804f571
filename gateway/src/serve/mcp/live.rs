//! What this replica holds for the sessions it serves right now, and nothing for an
//! idle one: a session itself is only its record in the session store (any replica
//! serves it). Held here: the open GET streams (where `list_changed` and
//! `notifications/resources/updated` go), the calls in flight (so
//! `notifications/cancelled` can stop them), the requests sent to clients (sampling,
//! elicitation, roots) waiting for their answers, each session's log level and its
//! resource subscriptions.
//!
//! An upstream message that belongs to no call reaches a session only when it is
//! addressed to it exactly (a `resources/updated` for a URI it subscribed to); it is
//! never handed to whoever called last, which could be another tenant's session.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use foldhash::{HashMap, HashSet};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use toolgate_adapters::RpcError;

use super::call::{CallStream, PARK_TTL};
use super::sessionless::LogLevel;
use super::wire;
use crate::gateway::Gateway;
use crate::policy::Principal;

/// How many messages a GET stream may fall behind before it is dropped.
const STREAM_BUFFER: usize = 256;

pub(super) type Answer = oneshot::Sender<Result<Value, RpcError>>;

/// Calls waiting for a 2026-07-28 client's retry, at most this many per replica.
const MAX_PARKED: usize = 4096;

#[derive(Default)]
pub(super) struct Live {
    /// Open GET streams by session id.
    streams: Mutex<HashMap<String, Vec<mpsc::Sender<Bytes>>>>,
    /// Calls in flight by (session id, raw JSON-RPC request id).
    calls: Mutex<HashMap<(String, String), CancellationToken>>,
    /// Requests sent to clients by the id the gateway gave them: (session, answer).
    pending: Mutex<HashMap<String, (String, Answer)>>,
    next_request: AtomicU64,
    /// The level each session set with `logging/setLevel`.
    log_levels: Mutex<HashMap<String, LogLevel>>,
    /// Resource subscriptions: client URI -> the sessions subscribed to it.
    subscriptions: Mutex<HashMap<String, HashSet<String>>>,
    /// Whose each session with a stream is (its token holder), to tell only that
    /// user's sessions that their own list changed.
    owners: Mutex<HashMap<String, Arc<str>>>,
    /// Sessions whose clients said at `initialize` that they take URL-mode
    /// elicitations (this replica's; elsewhere a session's client is not asked).
    url_elicitors: Mutex<HashSet<String>>,
    /// Upstreams whose out-of-call notifications are relayed, by name, with the
    /// upstream instance (a remounted upstream gets a relay of its own).
    relays: Mutex<HashMap<String, usize>>,
    /// Sessionless calls that answered `input_required`, by the state they named.
    parked: Mutex<HashMap<String, Parked>>,
    /// Per session: stops what outlives its calls (progress after a result) when
    /// the session ends.
    lingering: Mutex<HashMap<String, CancellationToken>>,
    lingering_calls: AtomicU64,
}

/// How long progress after a call's result is waited for without any arriving.
const LINGER_IDLE: std::time::Duration = std::time::Duration::from_secs(120);
/// Calls whose progress is still awaited after their result, at most, per replica.
const MAX_LINGERING: usize = 10_000;
/// Sessions noted as taking URL-mode elicitations, at most, per replica.
const MAX_URL_ELICITORS: usize = 100_000;

/// A sessionless call waiting for its client's input: only the same principal's
/// retry of the same tool resumes it.
struct Parked {
    principal: Principal,
    tool: String,
    call: Box<CallStream>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Live {
    /// Starts the background work: the `list_changed` notifications to every open
    /// stream when the catalog changes.
    pub(super) fn start(gateway: &Arc<Gateway>) -> Arc<Live> {
        let live = Arc::new(Live::default());
        tokio::spawn(announce_changes(
            Arc::downgrade(&live),
            Arc::downgrade(gateway),
            gateway.catalog_changes(),
        ));
        tokio::spawn(announce_own_changes(
            Arc::downgrade(&live),
            gateway.own_list_changes(),
        ));
        live
    }

    /// Opens a stream of `session`'s own messages (each transport frames them);
    /// `owner` is the holder of the caller's upstream tokens.
    pub(super) fn open_stream(&self, session: &str, owner: Arc<str>) -> mpsc::Receiver<Bytes> {
        let (sender, receiver) = mpsc::channel(STREAM_BUFFER);
        let mut streams = lock(&self.streams);
        let list = streams.entry(session.to_owned()).or_default();
        list.retain(|s| !s.is_closed());
        list.push(sender);
        let mut owners = lock(&self.owners);
        if owners.len() >= 2 * streams.len() {
            owners.retain(|session, _| streams.contains_key(session));
        }
        owners.insert(session.to_owned(), owner);
        receiver
    }

    /// Notes that `session`'s client takes URL-mode elicitations (bounded: past
    /// [`MAX_URL_ELICITORS`] sessions, the oldest notes are dropped wholesale and
    /// those clients get the connect link in an error instead).
    pub(super) fn elicits_urls(&self, session: &str) {
        let mut sessions = lock(&self.url_elicitors);
        if sessions.len() >= MAX_URL_ELICITORS {
            sessions.clear();
        }
        sessions.insert(session.to_owned());
    }

    /// Whether `session`'s client takes URL-mode elicitations.
    pub(super) fn takes_url_elicitations(&self, session: &str) -> bool {
        lock(&self.url_elicitors).contains(session)
    }

    /// The sessions with a stream whose owner is `owner`.
    fn sessions_of(&self, owner: &str) -> Vec<String> {
        lock(&self.owners)
            .iter()
            .filter(|(_, o)| &***o == owner)
            .map(|(session, _)| session.clone())
            .collect()
    }

    /// Sends `message` on `session`'s GET streams; false when none took it.
    pub(super) fn send_to_session(&self, session: &str, message: &[u8]) -> bool {
        let message = Bytes::copy_from_slice(message);
        let mut streams = lock(&self.streams);
        let Some(list) = streams.get_mut(session) else {
            return false;
        };
        // A stream that is full has stopped reading: it is dropped, not waited for.
        list.retain(|s| s.try_send(message.clone()).is_ok());
        let delivered = !list.is_empty();
        if !delivered {
            streams.remove(session);
        }
        delivered
    }

    fn broadcast(&self, message: &[u8]) {
        let message = Bytes::copy_from_slice(message);
        let mut streams = lock(&self.streams);
        streams.retain(|_, list| {
            list.retain(|s| s.try_send(message.clone()).is_ok());
            !list.is_empty()
        });
    }

    /// Ends a session's streams, pending requests, level and subscriptions (DELETE).
    pub(super) fn end_session(&self, session: &str) {
        lock(&self.streams).remove(session);
        lock(&self.owners).remove(session);
        lock(&self.url_elicitors).remove(session);
        lock(&self.log_levels).remove(session);
        if let Some(stop) = lock(&self.lingering).remove(session) {
            stop.cancel();
        }
        lock(&self.subscriptions).retain(|_, sessions| {
            sessions.remove(session);
            !sessions.is_empty()
        });
        lock(&self.pending).retain(|_, (owner, _)| owner != session);
        let mut calls = lock(&self.calls);
        calls.retain(|(owner, _), token| {
            if owner == session {
                token.cancel();
            }
            owner != session
        });
    }

    /// Registers a call in flight; dropping the guard forgets it.
    pub(super) fn call_started(
        self: &Arc<Self>,
        session: &str,
        request_id: &str,
        token: CancellationToken,
    ) -> InFlight {
        let key = (session.to_owned(), request_id.to_owned());
        lock(&self.calls).insert(key.clone(), token);
        InFlight {
            live: Arc::downgrade(self),
            key,
        }
    }

    /// `notifications/cancelled`: stops the session's call with that request id.
    pub(super) fn cancel(&self, session: &str, request_id: &str) -> bool {
        let key = (session.to_owned(), request_id.to_owned());
        match lock(&self.calls).get(&key) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Registers a request to the client; its id and where the answer goes.
    pub(super) fn request_sent(&self, session: &str, answer: Answer) -> String {
        let id = format!(
            "toolgate-{}",
            self.next_request.fetch_add(1, Ordering::Relaxed)
        );
        lock(&self.pending).insert(id.clone(), (session.to_owned(), answer));
        id
    }

    /// Forgets a request the client will not answer any more (its call ended).
    pub(super) fn request_abandoned(&self, id: &str) {
        lock(&self.pending).remove(id);
    }

    /// The client's answer to one of the gateway's requests. Answers for another
    /// session's request, or for none, are ignored.
    pub(super) fn answer(&self, session: &str, id: &str, answer: Result<Value, RpcError>) {
        let Ok(id) = serde_json::from_str::<String>(id) else {
            return;
        };
        let mut pending = lock(&self.pending);
        if pending.get(&id).is_some_and(|(owner, _)| owner == session)
            && let Some((_, sender)) = pending.remove(&id)
        {
            let _ = sender.send(answer);
        }
    }

    /// Keeps a call that asked a 2026-07-28 client for input until its retry, at
    /// most [`PARK_TTL`]; dropping it (expiry, a full table) cancels the call.
    pub(super) fn park(
        self: &Arc<Self>,
        token: String,
        principal: Principal,
        tool: String,
        call: CallStream,
    ) {
        {
            let mut parked = lock(&self.parked);
            if parked.len() >= MAX_PARKED {
                tracing::warn!(
                    tool,
                    "too many calls wait for their clients' input; this one is cancelled"
                );
                return;
            }
            let call = Box::new(call);
            parked.insert(
                token.clone(),
                Parked {
                    principal,
                    tool,
                    call,
                },
            );
        }
        let live = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(PARK_TTL).await;
            if let Some(live) = live.upgrade() {
                let expired = lock(&live.parked).remove(&token);
                drop(expired);
            }
        });
    }

    /// The parked call `token` names, when it is `principal`'s call of `tool`.
    pub(super) fn unpark(
        &self,
        token: &str,
        principal: &Principal,
        tool: &str,
    ) -> Option<CallStream> {
        let mut parked = lock(&self.parked);
        match parked.get(token) {
            Some(p) if p.principal == *principal && p.tool == tool => {
                parked.remove(token).map(|p| *p.call)
            }
            _ => None,
        }
    }

    /// Carries a call's progress that arrives after its result (a tool that answered
    /// "started" and works on) to `session`'s stream, bound to the caller's own
    /// `token`, still only forward; until the upstream stops sending (its route is
    /// gone), the session ends, or none arrives for [`LINGER_IDLE`]. A frame no
    /// stream takes is dropped (debug log).
    pub(super) fn linger(
        self: Arc<Self>,
        session: String,
        token: Value,
        tool: String,
        mut updates: tokio::sync::mpsc::Receiver<toolgate_adapters::Progress>,
        mut last: Option<f64>,
    ) {
        if self.lingering_calls.load(Ordering::Relaxed) >= MAX_LINGERING as u64 {
            tracing::debug!(%session, tool, "too many calls stream after their result; this one's later progress is dropped");
            return;
        }
        let stop = lock(&self.lingering)
            .entry(session.clone())
            .or_default()
            .clone();
        self.lingering_calls.fetch_add(1, Ordering::Relaxed);
        let live = Arc::downgrade(&self);
        drop(self);
        tokio::spawn(async move {
            struct Count(Weak<Live>);
            impl Drop for Count {
                fn drop(&mut self) {
                    if let Some(live) = self.0.upgrade() {
                        live.lingering_calls.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            }
            let _count = Count(live.clone());
            loop {
                let update = tokio::select! {
                    update = tokio::time::timeout(LINGER_IDLE, updates.recv()) => match update {
                        Ok(Some(update)) => update,
                        Ok(None) | Err(_) => return,
                    },
                    _ = stop.cancelled() => return,
                };
                let Some(live) = live.upgrade() else { return };
                if !super::call::advances(&mut last, &update) {
                    continue;
                }
                let message = super::call::progress_notification(&token, &tool, update);
                if !live.send_to_session(&session, &message) {
                    tracing::debug!(%session, tool, "progress after the result dropped: no stream open");
                }
            }
        });
    }

    /// `logging/setLevel`: the lowest level of log lines `session` receives.
    pub(super) fn set_log_level(&self, session: &str, level: LogLevel) {
        lock(&self.log_levels).insert(session.to_owned(), level);
    }

    pub(super) fn log_level(&self, session: &str) -> Option<LogLevel> {
        lock(&self.log_levels).get(session).copied()
    }

    /// Records `session`'s subscription to `uri` (the client's form).
    pub(super) fn subscribe(&self, session: &str, uri: &str) {
        lock(&self.subscriptions)
            .entry(uri.to_owned())
            .or_default()
            .insert(session.to_owned());
    }

    /// Drops `session`'s subscription to `uri`; true when no session of this replica
    /// is subscribed to it any more (the upstream may be told to stop).
    pub(super) fn unsubscribe(&self, session: &str, uri: &str) -> bool {
        let mut subscriptions = lock(&self.subscriptions);
        let Some(sessions) = subscriptions.get_mut(uri) else {
            return true;
        };
        sessions.remove(session);
        let last = sessions.is_empty();
        if last {
            subscriptions.remove(uri);
        }
        last
    }

    /// Makes sure `upstream`'s out-of-call notifications are relayed to subscribers.
    pub(super) fn relay(self: &Arc<Self>, gateway: &Arc<Gateway>, upstream: &str) {
        let Some(mounted) = gateway.upstreams().get(upstream).cloned() else {
            return;
        };
        let instance = Arc::as_ptr(&mounted.upstream) as *const () as usize;
        if lock(&self.relays).insert(upstream.to_owned(), instance) == Some(instance) {
            return;
        }
        if let Some(notifications) = mounted.upstream.notifications() {
            tokio::spawn(relay_notifications(
                Arc::downgrade(self),
                Arc::downgrade(gateway),
                upstream.to_owned(),
                instance,
                notifications,
            ));
        }
    }
}

/// Forgets a call in flight when the call ends, however it ends.
pub(super) struct InFlight {
    live: Weak<Live>,
    key: (String, String),
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(live) = self.live.upgrade() {
            lock(&live.calls).remove(&self.key);
        }
    }
}

/// Tells every open stream what changed in the catalog: tools, prompts, resources
/// (each kind's own `list_changed`, only when that kind changed).
async fn announce_changes(
    live: Weak<Live>,
    gateway: Weak<Gateway>,
    mut changes: tokio::sync::watch::Receiver<u64>,
) {
    let notice = |kind: &str| {
        wire::notification(
            &format!("notifications/{kind}/list_changed"),
            &serde_json::json!({}),
        )
    };
    let mut seen = gateway.upgrade().map(|g| g.catalog());
    while changes.changed().await.is_ok() {
        let (Some(live), Some(gateway)) = (live.upgrade(), gateway.upgrade()) else {
            return;
        };
        let now = gateway.catalog();
        let before = seen.replace(now.clone());
        let (tools, prompts, resources) = match &before {
            Some(before) => {
                let (old, new) = (before.offerings(), now.offerings());
                (
                    before.entries() != now.entries(),
                    old.prompts.entries() != new.prompts.entries(),
                    old.resources != new.resources || old.templates != new.templates,
                )
            }
            None => (true, true, true),
        };
        for (changed, kind) in [
            (tools, "tools"),
            (prompts, "prompts"),
            (resources, "resources"),
        ] {
            if changed {
                live.broadcast(&notice(kind));
            }
        }
    }
}

/// Tells a user's sessions that their tools changed when one of their own lists (of
/// an upstream listed per user) did; other users' sessions hear nothing of it.
async fn announce_own_changes(
    live: Weak<Live>,
    mut changes: tokio::sync::broadcast::Receiver<Arc<str>>,
) {
    use tokio::sync::broadcast::error::RecvError;
    let notice = wire::notification("notifications/tools/list_changed", &serde_json::json!({}));
    loop {
        let owner = changes.recv().await;
        let Some(live) = live.upgrade() else { return };
        match owner {
            // The empty holder is no one's: which users changed was lost on the way.
            Ok(owner) if owner.is_empty() => live.broadcast(&notice),
            Ok(owner) => {
                for session in live.sessions_of(&owner) {
                    live.send_to_session(&session, &notice);
                }
            }
            // Which users' lists changed is lost: every session re-lists.
            Err(RecvError::Lagged(_)) => live.broadcast(&notice),
            Err(RecvError::Closed) => return,
        }
    }
}

/// Relays one upstream's `notifications/resources/updated` to the sessions
/// subscribed to that resource, in the client's form of its URI. Anything else the
/// upstream sends outside a call belongs to no caller we could name and is dropped.
async fn relay_notifications(
    live: Weak<Live>,
    gateway: Weak<Gateway>,
    upstream: String,
    instance: usize,
    mut notifications: tokio::sync::broadcast::Receiver<(String, Value)>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let (method, mut params) = match notifications.recv().await {
            Ok(message) => message,
            Err(RecvError::Lagged(missed)) => {
                tracing::debug!(
                    upstream,
                    missed,
                    "notifications dropped: the relay fell behind"
                );
                continue;
            }
            Err(RecvError::Closed) => break,
        };
        let (Some(live), Some(gateway)) = (live.upgrade(), gateway.upgrade()) else {
            return;
        };
        if method != "notifications/resources/updated" {
            tracing::debug!(
                upstream,
                method,
                "upstream notification outside any call dropped"
            );
            continue;
        }
        let Some(original) = params.get("uri").and_then(Value::as_str) else {
            continue;
        };
        let uri = gateway
            .catalog()
            .offerings()
            .client_uri(&upstream, original);
        params["uri"] = Value::String(uri.clone());
        let sessions: Vec<String> = lock(&live.subscriptions)
            .get(&uri)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let message = wire::notification(&method, &params);
        for session in sessions {
            live.send_to_session(&session, &message);
        }
    }
    if let Some(live) = live.upgrade() {
        let mut relays = lock(&live.relays);
        if relays.get(&upstream) == Some(&instance) {
            relays.remove(&upstream);
        }
    }
}
