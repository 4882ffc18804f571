//! An MCP upstream reached with each caller's own token (a tenant's, a user's): every
//! holder of a token gets connections of its own, made with that token, and no
//! message of one holder ever travels on another's connection.
//!
//! Each holder's connection is an ordinary supervised [`McpUpstream`]: over HTTP its
//! `Authorization` header is the holder's token (in place of any configured one); a
//! stdio server is a process of the holder's own, started with the token in the
//! environment variable its config names (`token_env`).
//! A new token for the same holder (refreshed, re-authorized with more scope)
//! replaces the connection. Connections are bounded in number (the least recently
//! used is closed first) and closed when idle.
//!
//! Lists are per holder: each holder's connection lists the tools that holder's token
//! opens ([`PerCallerUpstream::tools_for`]), and the gateway builds that holder's
//! catalog from them. The shared list ([`Upstream::tools`]), which callers who have
//! not connected see, holds only what every holder's list has alike, and never gains
//! a tool on one holder's word alone (see `Lists::share`): a tool one user alone sees
//! shows in no one else's catalog, except that the very first list ever seen (or the
//! list kept from an earlier run) stands for the upstream's list until a second
//! holder's is known.

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
/// The same for a stdio server, where each connection is a process.
const MAX_PROCESSES: usize = 64;
/// A connection unused this long is closed (the next call makes a new one).
const IDLE_CLOSE: Duration = Duration::from_secs(600);
/// How often a connection still being made is looked at.
const POLL: Duration = Duration::from_millis(20);
/// A holder's own list is kept this long after its connection last listed, so a user
/// whose connection closed for idle still sees their tools (and can call them, which
/// opens the connection again).
const LIST_KEEP: Duration = Duration::from_secs(24 * 3600);
/// Own-list changes not yet read by the gateway; past it the oldest are lost, and the
/// reader hears that it lagged.
const OWN_CHANGES_BUFFER: usize = 256;

/// See the module docs.
pub struct PerCallerUpstream {
    name: String,
    transport: McpTransport,
    options: McpOptions,
    held: Mutex<HashMap<Arc<str>, Held>>,
    listed: Arc<Listed>,
}

/// The tool lists: each holder's own, and the shared one made from them.
struct Listed {
    lists: Mutex<Lists>,
    /// Bumped when the shared list changes.
    changes: watch::Sender<u64>,
    /// The holder whose own list changed, each time one does.
    own_changes: tokio::sync::broadcast::Sender<Arc<str>>,
}

#[derive(Default)]
struct Lists {
    shared: Arc<Vec<ToolDef>>,
    own: HashMap<Arc<str>, OwnList>,
}

struct OwnList {
    tools: Arc<Vec<ToolDef>>,
    listed_at: Instant,
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

/// Starts an MCP upstream reached with each caller's own token. A stdio `transport`
/// must name the variable the token is given in (`token_env`).
pub fn spawn_per_caller(
    name: String,
    transport: McpTransport,
    options: McpOptions,
) -> Result<Arc<PerCallerUpstream>, String> {
    if let McpTransport::Stdio(cfg) = &transport
        && cfg.token_env.is_none()
    {
        return Err(format!(
            "upstream '{name}': a stdio server is given each caller's own token in an \
             environment variable, and `token_env` names none"
        ));
    }
    let (changes, _) = watch::channel(0);
    Ok(Arc::new(PerCallerUpstream {
        name,
        transport,
        options,
        held: Mutex::new(HashMap::new()),
        listed: Arc::new(Listed {
            lists: Mutex::new(Lists::default()),
            changes,
            own_changes: tokio::sync::broadcast::channel(OWN_CHANGES_BUFFER).0,
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
            McpTransport::Stdio(cfg) => {
                let mut cfg = cfg.clone();
                // `spawn_per_caller` made sure there is one.
                if let Some(name) = &cfg.token_env {
                    cfg.env.insert(name.clone(), token.clone());
                }
                McpTransport::Stdio(cfg)
            }
        }
    }

    /// Connections held at once before the least recently used closes.
    fn max_held(&self) -> usize {
        match self.transport {
            McpTransport::Stdio(_) => MAX_PROCESSES,
            _ => MAX_HELD,
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
            if held.len() >= self.max_held()
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
        self.follow_tools(holder, &upstream);
        for old in closing {
            tokio::spawn(async move { old.shutdown().await });
        }
        upstream
    }

    /// Keeps what a holder's connection lists as that holder's own list, for as long
    /// as that connection lives.
    fn follow_tools(&self, holder: &Arc<str>, upstream: &Arc<McpUpstream>) {
        let mut changes = upstream.tools_changed();
        let conn: Weak<McpUpstream> = Arc::downgrade(upstream);
        let listed = self.listed.clone();
        let holder = holder.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(conn) = conn.upgrade() else { return };
                let tools = conn.tools();
                if !tools.is_empty() {
                    listed.set_own(&holder, tools);
                }
            }
        });
    }

    /// Starts from `tools` (a list kept from an earlier run) while no connection has
    /// listed yet; the lists of connections replace it.
    pub fn seed(&self, tools: Vec<ToolDef>) {
        let mut lists = self.listed.lock();
        if lists.shared.is_empty() && lists.own.is_empty() && !tools.is_empty() {
            lists.shared = Arc::new(tools);
            drop(lists);
            self.listed.changes.send_modify(|v| *v += 1);
        }
    }

    /// The holder's own list, when its connection has listed (within [`LIST_KEEP`]).
    pub fn tools_for(&self, holder: &str) -> Option<Arc<Vec<ToolDef>>> {
        let lists = self.listed.lock();
        let own = lists.own.get(holder)?;
        (own.listed_at.elapsed() < LIST_KEEP).then(|| own.tools.clone())
    }

    /// The holder, every time a holder's own list changes.
    pub fn own_lists_changed(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.listed.own_changes.subscribe()
    }

    /// Opens the holder's connection with `token` now, without waiting for it: its
    /// tool list is known before the holder's first call.
    pub fn warm(&self, holder: Arc<str>, token: &Secret) {
        let _ = self.held_for(&holder, token);
    }

    /// Forgets the holder's connection and list (after its token was refused or
    /// revoked).
    pub fn disconnect(&self, holder: &str) {
        if let Some(held) = self.lock().remove(holder) {
            tokio::spawn(async move { held.upstream.shutdown().await });
        }
        self.listed.forget(holder);
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

impl Listed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Lists> {
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `tools` as the holder's own list; the shared list follows.
    fn set_own(&self, holder: &Arc<str>, tools: Arc<Vec<ToolDef>>) {
        let mut lists = self.lock();
        // A tool the shared list has alike is held once: the shared definition stands
        // in for the holder's copy, so the holder's catalog reuses the shared entry.
        let tools: Vec<ToolDef> = tools
            .iter()
            .map(|tool| {
                lists
                    .shared
                    .iter()
                    .find(|s| s.name == tool.name && s.raw == tool.raw)
                    .unwrap_or(tool)
                    .clone()
            })
            .collect();
        if lists.own.get(holder).is_some_and(|own| *own.tools == tools) {
            if let Some(own) = lists.own.get_mut(holder) {
                own.listed_at = Instant::now();
            }
            return;
        }
        let now = Instant::now();
        lists
            .own
            .retain(|_, own| now.duration_since(own.listed_at) < LIST_KEEP);
        if !lists.own.contains_key(holder)
            && lists.own.len() >= MAX_HELD
            && let Some(oldest) = lists
                .own
                .iter()
                .min_by_key(|(_, own)| own.listed_at)
                .map(|(k, _)| k.clone())
        {
            lists.own.remove(&oldest);
        }
        lists.own.insert(
            holder.clone(),
            OwnList {
                tools: Arc::new(tools),
                listed_at: now,
            },
        );
        let shared_changed = lists.share();
        drop(lists);
        let _ = self.own_changes.send(holder.clone());
        if shared_changed {
            self.changes.send_modify(|v| *v += 1);
        }
    }

    fn forget(&self, holder: &str) {
        let mut lists = self.lock();
        if lists.own.remove(holder).is_none() {
            return;
        }
        let shared_changed = lists.share();
        drop(lists);
        let _ = self.own_changes.send(Arc::from(holder));
        if shared_changed {
            self.changes.send_modify(|v| *v += 1);
        }
    }
}

impl Lists {
    /// Remakes the shared list from the holders' own and answers whether it changed.
    /// It holds what every list has alike, and never takes a tool on the word of one
    /// holder's list alone: with one list known, the shared list only keeps what that
    /// list has too — except the very first list of all, which stands for the
    /// upstream's list until another holder's says otherwise. With no list left it
    /// stays as it was.
    fn share(&mut self) -> bool {
        let lists: Vec<&[ToolDef]> = self.own.values().map(|own| own.tools.as_slice()).collect();
        let common: Vec<ToolDef> = match lists.as_slice() {
            [] => return false,
            [only] if self.shared.is_empty() => only.to_vec(),
            [only] => common_tools(&self.shared, &[only]),
            [first, rest @ ..] => common_tools(first, rest),
        };
        if *self.shared == common {
            return false;
        }
        self.shared = Arc::new(common);
        true
    }
}

/// The tools of `first` that each of `others` has alike (same name, same definition).
fn common_tools(first: &[ToolDef], others: &[&[ToolDef]]) -> Vec<ToolDef> {
    let mut common: Vec<ToolDef> = first
        .iter()
        .filter(|tool| {
            others.iter().all(|other| {
                other
                    .iter()
                    .any(|t| t.name == tool.name && t.raw == tool.raw)
            })
        })
        .cloned()
        .collect();
    // Holders are kept in a hash map: a stable order keeps the list equal to itself.
    common.sort_by(|a, b| a.name.cmp(&b.name));
    common
}

#[async_trait]
impl Upstream for PerCallerUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Arc<Vec<ToolDef>> {
        self.listed.lock().shared.clone()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ToolDef {
        let raw = serde_json::json!({"name": name, "description": description, "inputSchema": {"type": "object"}});
        ToolDef::from_raw(raw.as_object().cloned().unwrap()).unwrap()
    }

    fn names(tools: &[ToolDef]) -> Vec<&str> {
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        names.sort();
        names
    }

    fn listed() -> Listed {
        Listed {
            lists: Mutex::new(Lists::default()),
            changes: watch::channel(0).0,
            own_changes: tokio::sync::broadcast::channel(OWN_CHANGES_BUFFER).0,
        }
    }

    fn own(tools: &[ToolDef]) -> Arc<Vec<ToolDef>> {
        Arc::new(tools.to_vec())
    }

    /// A tool one holder alone sees never reaches the shared list once a second list
    /// is known, nor after that holder's list is gone; each holder keeps their own.
    #[test]
    fn the_shared_list_holds_only_what_every_list_has() {
        let listed = listed();
        let (alice, bob, carol): (Arc<str>, Arc<str>, Arc<str>) = (
            "t\u{1f}alice".into(),
            "t\u{1f}bob".into(),
            "u\u{1f}carol".into(),
        );
        let common = tool("whoami", "who");
        let mut own_changes = listed.own_changes.subscribe();
        listed.set_own(&alice, own(&[common.clone(), tool("alice_notes", "a")]));
        assert_eq!(own_changes.try_recv().ok().as_deref(), Some(&*alice));
        // The first list ever seen stands for the upstream's.
        assert_eq!(names(&listed.lock().shared), ["alice_notes", "whoami"]);
        listed.set_own(&bob, own(&[common.clone(), tool("bob_notes", "b")]));
        assert_eq!(names(&listed.lock().shared), ["whoami"]);
        // A definition that differs is not shared either.
        listed.set_own(&carol, own(&[tool("whoami", "someone else")]));
        assert!(listed.lock().shared.is_empty());
        listed.forget(&carol);
        assert_eq!(names(&listed.lock().shared), ["whoami"]);
        // Bob goes: Alice's list alone adds nothing to what is shared.
        listed.forget(&bob);
        assert_eq!(names(&listed.lock().shared), ["whoami"]);
        let lists = listed.lock();
        assert_eq!(names(&lists.own[&alice].tools), ["alice_notes", "whoami"]);
        assert!(!lists.own.contains_key(&bob));
        // A tool alike in the shared list is held once.
        assert!(Arc::ptr_eq(
            &lists.own[&alice]
                .tools
                .iter()
                .find(|t| t.name == "whoami")
                .unwrap()
                .raw,
            &lists.shared[0].raw
        ));
    }

    /// A list kept from an earlier run is the starting point, and one holder's list
    /// can only take tools out of it.
    #[test]
    fn a_seeded_list_gains_nothing_from_one_holder() {
        let listed = listed();
        listed.lock().shared = own(&[tool("whoami", "who")]);
        let alice: Arc<str> = "t\u{1f}alice".into();
        listed.set_own(
            &alice,
            own(&[tool("whoami", "who"), tool("alice_notes", "a")]),
        );
        assert_eq!(names(&listed.lock().shared), ["whoami"]);
    }
}
