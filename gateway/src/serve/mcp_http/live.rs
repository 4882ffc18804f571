//! What this replica holds for the sessions it serves right now, and nothing for an
//! idle one: a session itself is only its record in the session store (any replica
//! serves it). Held here: the open GET streams (where `list_changed` and the
//! passthrough upstream's late log lines go), the calls in flight (so
//! `notifications/cancelled` can stop them), and the requests sent to clients
//! (sampling, elicitation, roots) waiting for their answers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use toolgate_adapters::RpcError;

use super::wire;
use crate::gateway::Gateway;

/// How long after a passthrough call a stray log notification is still taken to be its.
const LATE_NOTIFICATION_WINDOW: Duration = Duration::from_secs(2);

/// How many messages a GET stream may fall behind before it is dropped.
const STREAM_BUFFER: usize = 256;

type Answer = oneshot::Sender<Result<Value, RpcError>>;

#[derive(Default)]
pub struct Live {
    /// Open GET streams by session id.
    streams: Mutex<HashMap<String, Vec<mpsc::Sender<Bytes>>>>,
    /// Calls in flight by (session id, raw JSON-RPC request id).
    calls: Mutex<HashMap<(String, String), CancellationToken>>,
    /// Requests sent to clients by the id the gateway gave them: (session, answer).
    pending: Mutex<HashMap<String, (String, Answer)>>,
    next_request: AtomicU64,
    /// The session whose call on the passthrough upstream finished last, and when.
    last_passthrough_caller: Mutex<Option<(String, Instant)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Live {
    /// Starts the background work: `list_changed` to every open stream on catalog
    /// changes, and the passthrough upstream's late notifications to their session.
    pub fn start(gateway: &Arc<Gateway>) -> Arc<Live> {
        let live = Arc::new(Live::default());
        tokio::spawn(announce_changes(
            Arc::downgrade(&live),
            gateway.catalog_changes(),
        ));
        if let Some(notifications) = gateway
            .passthrough()
            .and_then(|m| m.upstream.notifications())
        {
            tokio::spawn(relay_late_notifications(
                Arc::downgrade(&live),
                notifications,
            ));
        }
        live
    }

    /// Opens a GET stream for `session`.
    pub fn open_stream(&self, session: &str) -> mpsc::Receiver<Bytes> {
        let (sender, receiver) = mpsc::channel(STREAM_BUFFER);
        let mut streams = lock(&self.streams);
        let list = streams.entry(session.to_owned()).or_default();
        list.retain(|s| !s.is_closed());
        list.push(sender);
        receiver
    }

    /// Sends `message` on `session`'s GET streams; false when none took it.
    pub fn send_to_session(&self, session: &str, message: &[u8]) -> bool {
        let frame = wire::sse_frame(message);
        let mut streams = lock(&self.streams);
        let Some(list) = streams.get_mut(session) else {
            return false;
        };
        // A stream that is full has stopped reading: it is dropped, not waited for.
        list.retain(|s| s.try_send(frame.clone()).is_ok());
        let delivered = !list.is_empty();
        if !delivered {
            streams.remove(session);
        }
        delivered
    }

    fn broadcast(&self, message: &[u8]) {
        let frame = wire::sse_frame(message);
        let mut streams = lock(&self.streams);
        streams.retain(|_, list| {
            list.retain(|s| s.try_send(frame.clone()).is_ok());
            !list.is_empty()
        });
    }

    /// Ends a session's streams and pending requests (DELETE).
    pub fn end_session(&self, session: &str) {
        lock(&self.streams).remove(session);
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
    pub fn call_started(
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
    pub fn cancel(&self, session: &str, request_id: &str) -> bool {
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
    pub fn request_sent(&self, session: &str, answer: Answer) -> String {
        let id = format!(
            "toolgate-{}",
            self.next_request.fetch_add(1, Ordering::Relaxed)
        );
        lock(&self.pending).insert(id.clone(), (session.to_owned(), answer));
        id
    }

    /// Forgets a request the client will not answer any more (its call ended).
    pub fn request_abandoned(&self, id: &str) {
        lock(&self.pending).remove(id);
    }

    /// The client's answer to one of the gateway's requests. Answers for another
    /// session's request, or for none, are ignored.
    pub fn answer(&self, session: &str, id: &str, answer: Result<Value, RpcError>) {
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

    /// Notes that `session` is calling (or just finished calling) the passthrough upstream.
    pub fn note_passthrough_caller(&self, session: &str) {
        *lock(&self.last_passthrough_caller) = Some((session.to_owned(), Instant::now()));
    }
}

/// Forgets a call in flight when the call ends, however it ends.
pub struct InFlight {
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

async fn announce_changes(live: Weak<Live>, mut changes: tokio::sync::watch::Receiver<u64>) {
    let message = wire::notification("notifications/tools/list_changed", &serde_json::json!({}));
    while changes.changed().await.is_ok() {
        let Some(live) = live.upgrade() else {
            return;
        };
        live.broadcast(&message);
    }
}

/// The passthrough upstream may send a call's last log line on its own stream, just
/// after the result: it goes to the session whose call finished last, within a short
/// window, and is dropped otherwise (never broadcast: sessions may belong to other
/// tenants).
async fn relay_late_notifications(
    live: Weak<Live>,
    mut notifications: tokio::sync::broadcast::Receiver<(String, Value)>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let (method, params) = match notifications.recv().await {
            Ok(message) => message,
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        if method != "notifications/message" {
            continue;
        }
        let Some(live) = live.upgrade() else {
            return;
        };
        let target = lock(&live.last_passthrough_caller)
            .as_ref()
            .filter(|(_, at)| at.elapsed() <= LATE_NOTIFICATION_WINDOW)
            .map(|(session, _)| session.clone());
        match target {
            Some(session) => {
                live.send_to_session(&session, &wire::notification(&method, &params));
            }
            None => tracing::debug!("upstream log notification outside any call dropped"),
        }
    }
}
