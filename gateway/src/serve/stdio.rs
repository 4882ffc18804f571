//! MCP over stdio (`toolgate stdio`) for desktop clients: a transport around the
//! same handler as `/mcp` ([`super::mcp::McpSessions::handle`]), so the two can never
//! disagree. This file only frames: each line read from stdin is one message of this
//! process's tenant, and each message of the handler's [`Reply`] (one, or every one
//! of a stream) becomes one line on stdout.
//!
//! The process is one session: `initialize` makes it, a keep-alive renews it well
//! within `sessions.idle_ttl` (a desktop client idle for hours is not locked out),
//! and its stream of messages that belong to no request (`list_changed`, resource
//! updates) is copied to stdout as well. A 2026-07-28 client needs no `initialize`;
//! there are no headers to mirror its body (that rung of the version's ladder is
//! HTTP's). Requests
//! run concurrently, so a long call never holds up `notifications/cancelled` or the
//! client's answer to a sampling request. Logs go to stderr, never stdout.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::mcp::error::McpError;
use super::mcp::{McpSessions, Reply};
use crate::app::App;
use crate::gateway::Gateway;
use crate::policy::{Caller, Tenant};
use crate::state::sessions::Session;

/// Lines waiting for stdout; a full queue makes the answering tasks wait.
const OUTPUT_QUEUE: usize = 1024;

/// Serves one stdio client as `tenant` until stdin closes.
pub async fn run(app: Arc<App>, tenant: Arc<Tenant>) -> anyhow::Result<()> {
    let stop = CancellationToken::new();
    let gateway = app.gateway.clone();
    let door = Arc::new(Door {
        sessions: McpSessions::new(&app, stop.clone()),
        gateway: gateway.clone(),
        tenant,
        session: std::sync::Mutex::new(None),
    });
    let (out, mut lines) = mpsc::channel::<Bytes>(OUTPUT_QUEUE);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            stdout.write_all(&line).await?;
            stdout.write_all(b"\n").await?;
            stdout.flush().await?;
        }
        anyhow::Ok(())
    });

    let limit = gateway.config().max_request_body_bytes;
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut tasks = tokio::task::JoinSet::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        // Bounded: a line longer than a request body may be is read no further.
        let read = (&mut stdin)
            .take(limit as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            break;
        }
        if line.len() > limit && !line.ends_with(b"\n") {
            let _ = out.send(too_long(limit)).await;
            // Skip the rest of the oversized line.
            let mut rest = Vec::new();
            stdin.read_until(b'\n', &mut rest).await?;
            continue;
        }
        let message = Bytes::copy_from_slice(line.trim_ascii());
        if message.is_empty() {
            continue;
        }
        if is_initialize(&message) {
            // Inline: what follows needs the session it makes.
            door.initialize(message, &out, &stop).await;
        } else {
            let (door, out) = (door.clone(), out.clone());
            tasks.spawn(async move { door.answer(message, &out).await });
        }
        // Finished answers are reaped as we go, so the set stays as large as the
        // requests in flight.
        while tasks.try_join_next().is_some() {}
    }
    door.end().await;
    stop.cancel();
    tasks.abort_all();
    drop(out);
    drop(door);
    writer.await??;
    Ok(())
}

/// What every stdin line's request goes through.
struct Door {
    sessions: McpSessions,
    gateway: Arc<Gateway>,
    tenant: Arc<Tenant>,
    /// The session `initialize` made.
    session: std::sync::Mutex<Option<String>>,
}

impl Door {
    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Who sends every message: the process's tenant (stdio names no person).
    fn caller(&self) -> Caller {
        Caller::new(self.tenant.clone(), None)
    }

    /// The process's session (renewed; made again under its id should the store
    /// have lost it), once `initialize` made one.
    async fn current_session(&self) -> Option<Session> {
        let id = self.session()?;
        match self
            .gateway
            .sessions
            .get_or_create(&id, &self.tenant.name, None)
            .await
        {
            Ok(session) => Some(session),
            Err(error) => {
                tracing::warn!(%error, "the stdio session could not be read");
                None
            }
        }
    }

    async fn answer(&self, message: Bytes, out: &mpsc::Sender<Bytes>) {
        let session = self.current_session().await;
        let reply = self
            .sessions
            .handle(&message, self.caller(), session, None)
            .await;
        write_reply(reply, out).await;
    }

    async fn initialize(
        &self,
        message: Bytes,
        out: &mpsc::Sender<Bytes>,
        stop: &CancellationToken,
    ) {
        let reply = self
            .sessions
            .handle(&message, self.caller(), None, None)
            .await;
        let Reply::Initialized { session, message } = reply else {
            return write_reply(reply, out).await;
        };
        let first = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(session.clone())
            .is_none();
        if first {
            self.start_stream(&session, out.clone(), stop.clone());
            self.keep_alive(session, stop.clone());
        }
        let _ = out.send(Bytes::from(message)).await;
    }

    /// Copies the session's own stream (messages that belong to no request) to stdout.
    fn start_stream(&self, session: &str, out: mpsc::Sender<Bytes>, stop: CancellationToken) {
        let mut messages = self.sessions.session_messages(session, &self.caller());
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    message = messages.recv() => message,
                    _ = stop.cancelled() => None,
                };
                let Some(message) = message else { return };
                if out.send(message).await.is_err() {
                    return;
                }
            }
        });
    }

    /// Renews the session well within `sessions.idle_ttl` until the process ends.
    fn keep_alive(&self, id: String, stop: CancellationToken) {
        let (gateway, tenant) = (self.gateway.clone(), self.tenant.name.clone());
        let every = (gateway.config().sessions.idle_ttl / 3)
            .clamp(Duration::from_millis(200), Duration::from_secs(60));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.cancelled() => return,
                }
                if let Err(error) = gateway.sessions.get_or_create(&id, &tenant, None).await {
                    tracing::warn!(%error, "renewing the stdio session failed; retrying");
                }
            }
        });
    }

    /// stdin closed: the session ends, as an HTTP client's would.
    async fn end(&self) {
        if let Some(id) = self.session()
            && let Err(error) = self.sessions.end(&id).await
        {
            tracing::warn!(%error, "the stdio session could not be ended; it idles out");
        }
    }
}

fn is_initialize(message: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Method<'a> {
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method>(message)
        .is_ok_and(|m| m.method.as_deref() == Some("initialize"))
}

/// Every message of a reply, one per line (a stream's as they come).
async fn write_reply(reply: Reply, out: &mpsc::Sender<Bytes>) {
    let line = match reply {
        Reply::Taken => return,
        Reply::Message(message) | Reply::Initialized { message, .. } => Bytes::from(message),
        Reply::Parts(parts) => {
            let mut line = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
            for part in parts {
                line.extend_from_slice(&part);
            }
            line.freeze()
        }
        Reply::Refused { error, id } => Bytes::from(error.into_message(&id)),
        Reply::Stream(mut messages) => {
            while let Some(message) = messages.next().await {
                if !message.trim_ascii().is_empty() && out.send(message).await.is_err() {
                    return;
                }
            }
            return;
        }
    };
    let _ = out.send(line).await;
}

fn too_long(limit: usize) -> Bytes {
    Bytes::from(
        McpError::body_too_large(format!(
            "the message is longer than max_request_body_bytes ({limit} bytes); it was skipped"
        ))
        .into_message("null"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_is_told_apart() {
        assert!(is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#
        ));
        assert!(!is_initialize(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!is_initialize(b"not json"));
    }

    /// Each message of a reply is one line; a stream's blank messages are none, and
    /// a refusal is its JSON-RPC error.
    #[tokio::test]
    async fn every_message_of_a_reply_becomes_one_line() {
        let lines = |reply: Reply| async move {
            let (out, mut lines) = mpsc::channel(8);
            write_reply(reply, &out).await;
            drop(out);
            let mut got = Vec::new();
            while let Some(line) = lines.recv().await {
                got.push(String::from_utf8(line.to_vec()).unwrap());
            }
            got
        };
        let messages = [&br#"{"a":1}"#[..], b"", br#"{"b":2}"#].map(Bytes::from_static);
        assert_eq!(
            lines(Reply::stream(futures::stream::iter(messages))).await,
            [r#"{"a":1}"#, r#"{"b":2}"#]
        );
        let parts = vec![Bytes::from_static(b"{\"c\":"), Bytes::from_static(b"3}")];
        assert_eq!(lines(Reply::Parts(parts)).await, [r#"{"c":3}"#]);
        assert!(lines(Reply::Taken).await.is_empty());
        let refused = lines(Reply::refused(McpError::invalid_request("no"), "4")).await;
        let refused: serde_json::Value = serde_json::from_str(&refused[0]).unwrap();
        assert_eq!(refused["id"], 4);
        assert_eq!(refused["error"]["message"], "no");
    }
}
