//! An HTTP MCP upstream reached with each caller's own token (OAuth per user): every
//! holder of a token gets connections of its own, made with that token, and no
//! message of one holder ever travels on another's connection.
//!
//! Each holder's connection is an ordinary supervised [`McpUpstream`] whose
//! `Authorization` header is the holder's token (in place of any configured one).
//! A new token for the same holder (refreshed, re-authorized with more scope)
//! replaces the connection. Connections are bounded in number (the least recently
//! used is closed first) and closed when idle.
//!
//! The tools listed are the last list any holder's connection saw: an upstream whose
//! lists differ per user is the gateway's to list per user; this keeps the shared
//! catalog that users who have not connected yet see.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::time::Instant;

use super::http::Refusal;
use super::upstream::{McpUpstream, spawn};
use super::{McpOptions, McpTransport};
use crate::{
    CallContext, CallOutput, CallerCredentials, Connection, JsonObject, RpcError, Secret, ToolDef,
    ToolError, Upstream,
};

/// Connections held at once, across holders; past it the least recently used closes.
const MAX_HELD: usize = 1024;
/// A connection unused this long is closed (the next call makes a new one).
const IDLE_CLOSE: Duration = Duration::from_secs(600);
/// How often a connection still being made is looked at.
const POLL: Duration = Duration::from_millis(20);

/// See the module docs.
pub struct PerCallerUpstream {
    name: String,
    transport: McpTransport,
    options: McpOptions,
    held: Mutex<HashMap<Arc<str>, Held>>,
    listed: Arc<Listed>,
}

/// The shared tool list, which every holder's connection updates.
struct Listed {
    tools: Mutex<Arc<Vec<ToolDef>>>,
    changes: watch::Sender<u64>,
}

struct Held {
    /// SHA-256 of the token the connection was made with.
    fingerprint: [u8; 32],
    upstream: Arc<McpUpstream>,
    last_used: Instant,
}

impl std::fmt::Debug for PerCallerUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Deliberately not the transport config (headers) nor the holders.
        f.debug_struct("PerCallerUpstream")
            .field("name", &self.name)
            .field("held", &self.lock().len())
            .finish()
    }
}

/// Starts an MCP upstream reached with each caller's own token. `transport` must be
/// streamable HTTP or legacy SSE (a stdio server has no per-request credentials).
pub fn spawn_per_caller(
    name: String,
    transport: McpTransport,
    options: McpOptions,
) -> Result<Arc<PerCallerUpstream>, String> {
    if matches!(transport, McpTransport::Stdio(_)) {
        return Err(format!(
            "upstream '{name}': a stdio server cannot be reached with each caller's own token"
        ));
    }
    let (changes, _) = watch::channel(0);
    Ok(Arc::new(PerCallerUpstream {
        name,
        transport,
        options,
        held: Mutex::new(HashMap::new()),
        listed: Arc::new(Listed {
            tools: Mutex::new(Arc::default()),
            changes,
        }),
    }))
}

fn fingerprint(token: &Secret) -> [u8; 32] {
    Sha256::digest(token.expose().as_bytes()).into()
}

impl PerCallerUpstream {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Held>> {
        // Every critical section is a plain map update.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The transport with `token` as its only `Authorization`.
    fn transport_with(&self, token: &Secret) -> McpTransport {
        let with = |cfg: &super::HttpConfig| {
            let mut cfg = cfg.clone();
            cfg.headers
                .retain(|name, _| !name.eq_ignore_ascii_case("authorization"));
            cfg.headers.insert(
                "Authorization".to_owned(),
                Secret::from(format!("Bearer {}", token.expose())),
            );
            cfg
        };
        match &self.transport {
            McpTransport::StreamableHttp(cfg) => McpTransport::StreamableHttp(with(cfg)),
            McpTransport::Sse(cfg) => McpTransport::Sse(with(cfg)),
            // Refused by `spawn_per_caller`.
            McpTransport::Stdio(cfg) => McpTransport::Stdio(cfg.clone()),
        }
    }

    /// The holder's connection made with `token`: the one held, or a new one (which
    /// replaces one made with another token).
    fn held_for(&self, holder: &Arc<str>, token: &Secret) -> Arc<McpUpstream> {
        let fingerprint = fingerprint(token);
        let now = Instant::now();
        let mut closing = Vec::new();
        let upstream = {
            let mut held = self.lock();
            match held.get_mut(holder) {
                Some(h) if crate::secret::digests_equal(&h.fingerprint, &fingerprint) => {
                    h.last_used = now;
                    return h.upstream.clone();
                }
                _ => {}
            }
            if let Some(old) = held.remove(holder) {
                closing.push(old.upstream);
            }
            let idle: Vec<Arc<str>> = held
                .iter()
                .filter(|(_, h)| now.duration_since(h.last_used) >= IDLE_CLOSE)
                .map(|(k, _)| k.clone())
                .collect();
            for key in idle {
                closing.extend(held.remove(&key).map(|h| h.upstream));
            }
            if held.len() >= MAX_HELD
                && let Some(oldest) = held
                    .iter()
                    .min_by_key(|(_, h)| h.last_used)
                    .map(|(k, _)| k.clone())
            {
                closing.extend(held.remove(&oldest).map(|h| h.upstream));
            }
            let options = McpOptions {
                stop_when_refused: true,
                ..self.options.clone()
            };
            let upstream = spawn(self.name.clone(), self.transport_with(token), options);
            // One holder per connection: whatever it sends belongs to that holder.
            upstream.set_one_tenant(true);
            held.insert(
                holder.clone(),
                Held {
                    fingerprint,
                    upstream: upstream.clone(),
                    last_used: now,
                },
            );
            upstream
        };
        self.follow_tools(&upstream);
        for old in closing {
            tokio::spawn(async move { old.shutdown().await });
        }
        upstream
    }

    /// Copies what a holder's connection lists into the shared list, for as long as
    /// that connection lives.
    fn follow_tools(&self, upstream: &Arc<McpUpstream>) {
        let mut changes = upstream.tools_changed();
        let conn: Weak<McpUpstream> = Arc::downgrade(upstream);
        let listed = self.listed.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(conn) = conn.upgrade() else { return };
                let tools = conn.tools();
                if tools.is_empty() {
                    continue;
                }
                let mut shared = listed.tools.lock().unwrap_or_else(|e| e.into_inner());
                if **shared != *tools {
                    *shared = tools;
                    drop(shared);
                    listed.changes.send_modify(|v| *v += 1);
                }
            }
        });
    }

    /// Starts from `tools` (a list kept from an earlier run) while no connection has
    /// listed yet; a connection's own list replaces it.
    pub fn seed(&self, tools: Vec<ToolDef>) {
        let mut shared = self.listed.tools.lock().unwrap_or_else(|e| e.into_inner());
        if shared.is_empty() && !tools.is_empty() {
            *shared = Arc::new(tools);
            drop(shared);
            self.listed.changes.send_modify(|v| *v += 1);
        }
    }

    /// Opens the holder's connection with `token` now, without waiting for it: its
    /// tool list is known before the holder's first call.
    pub fn warm(&self, holder: Arc<str>, token: &Secret) {
        let _ = self.held_for(&holder, token);
    }

    /// Forgets the holder's connection (after its token was refused or revoked).
    pub fn disconnect(&self, holder: &str) {
        if let Some(held) = self.lock().remove(holder) {
            tokio::spawn(async move { held.upstream.shutdown().await });
        }
    }

    /// How many holders have a connection now (for tests and status).
    pub fn held(&self) -> usize {
        self.lock().len()
    }

    /// The holder's connection, once it is initialized; the refusal of its token
    /// when the server refused it.
    async fn ready(
        &self,
        credentials: Option<&CallerCredentials>,
        deadline: std::time::Instant,
    ) -> Result<(Arc<str>, Arc<McpUpstream>), ToolError> {
        let Some(CallerCredentials::Bearer { holder, token }) = credentials else {
            return Err(ToolError::authorization_required(format!(
                "upstream '{}' is reached with each caller's own authorization, and this \
                 call carries none",
                self.name
            )));
        };
        let upstream = self.held_for(holder, token);
        let deadline = Instant::from_std(deadline);
        loop {
            if let Some(refusal) = upstream.take_refusal() {
                self.disconnect(holder);
                return Err(self.refused(refusal));
            }
            match upstream.connection() {
                Connection::Connected => return Ok((holder.clone(), upstream)),
                Connection::Closed => {
                    return Err(ToolError::unavailable(&self.name, "connection closed"));
                }
                Connection::Connecting | Connection::Reconnecting => {
                    if let Some(error) = upstream.last_error() {
                        // The first attempt failed for another reason: the next call
                        // starts afresh rather than waiting out a backoff.
                        self.disconnect(holder);
                        return Err(ToolError::unavailable(&self.name, error));
                    }
                }
            }
            if Instant::now() + POLL > deadline {
                self.disconnect(holder);
                return Err(ToolError::unavailable(
                    &self.name,
                    "the connection made with the caller's authorization did not open in time",
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn refused(&self, refusal: Refusal) -> ToolError {
        ToolError::Unauthorized {
            message: format!(
                "upstream '{}' refused the caller's authorization (HTTP {})",
                self.name, refusal.status
            ),
            status: refusal.status,
            challenge: refusal.challenge,
        }
    }

    /// `result` as the caller gets it: a refusal of the token noted during the
    /// request wins over the error it caused.
    fn after<T>(
        &self,
        holder: &str,
        upstream: &McpUpstream,
        result: Result<T, ToolError>,
    ) -> Result<T, ToolError> {
        match result {
            Err(error) => match upstream.take_refusal() {
                Some(refusal) => {
                    self.disconnect(holder);
                    Err(self.refused(refusal))
                }
                None => Err(error),
            },
            ok => ok,
        }
    }
}

#[async_trait]
impl Upstream for PerCallerUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Arc<Vec<ToolDef>> {
        self.listed
            .tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn tools_changed(&self) -> watch::Receiver<u64> {
        self.listed.changes.subscribe()
    }

    /// Always ready: each caller's connection is made when that caller calls.
    fn connection(&self) -> Connection {
        Connection::Connected
    }

    fn last_error(&self) -> Option<String> {
        None
    }

    async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        ctx: CallContext,
    ) -> Result<CallOutput, ToolError> {
        let (holder, upstream) = self.ready(ctx.credentials.as_ref(), ctx.deadline).await?;
        let result = upstream.call(tool, arguments, ctx).await;
        self.after(&holder, &upstream, result)
    }

    /// Nothing to probe without a caller: each caller's connection is checked by its
    /// own supervisor while it lives.
    async fn check(&self, _timeout: Duration) -> Result<(), ToolError> {
        Ok(())
    }

    async fn shutdown(&self) {
        let all: Vec<Held> = self.lock().drain().map(|(_, h)| h).collect();
        for held in all {
            held.upstream.shutdown().await;
        }
    }

    async fn forward(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: CallContext,
    ) -> Result<Result<Value, RpcError>, ToolError> {
        let (holder, upstream) = self.ready(ctx.credentials.as_ref(), ctx.deadline).await?;
        let result = upstream.forward(method, params, ctx).await;
        self.after(&holder, &upstream, result)
    }
}
