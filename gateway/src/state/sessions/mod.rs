//! Sessions: which tools a session has expanded beyond its tenant's initial set.
//!
//! [`SessionStore`] is backend-agnostic: the embedded default is [`MemoryStore`]
//! ([`memory`]); [`redis::RedisSessionStore`] shares sessions between
//! replicas. Expansion is atomic per session: concurrent expansions give the union,
//! never a lost update. A session belongs to the tenant that created it; another
//! tenant's use is answered as "not found". Idle sessions expire (the timer slides on
//! every use). Session ids are opaque: 128 random bits, base64url.
//!
//! Every method can fail with [`Unavailable`] (a shared store that cannot be reached):
//! surfaces answer that with 503 and a retry hint, never with "not found".
//!
//! The table is bounded ([`Limits`]: `sessions.max_sessions` in all, and
//! `sessions.max_per_tenant` for each tenant). A full table, or a tenant at its quota,
//! refuses a new session ([`Refused::Full`], with the time until a session idles out as
//! the retry hint) rather than evicting a live one: one tenant's initializes must never
//! end another tenant's sessions. Sessions idle past `idle_ttl` are reclaimed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub mod memory;
pub mod redis;

pub use crate::state::conn::Unavailable;
pub use memory::MemoryStore;

/// What a store operation gives: the answer, or the store being unreachable.
pub type StoreResult<T> = Result<T, Unavailable>;

/// How many sessions a store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Sessions in all (every tenant).
    pub max_sessions: u64,
    /// Sessions of one tenant; `None`: only the total bounds a tenant.
    pub max_per_tenant: Option<u64>,
}

impl Limits {
    pub fn from_config(config: &crate::config::SessionsConfig) -> Limits {
        Limits {
            max_sessions: config.max_sessions,
            max_per_tenant: config.max_per_tenant,
        }
    }
}

/// Why [`SessionStore::create`] made no session.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    /// The store could not be reached.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// The table, or the tenant's quota, is full of live sessions.
    #[error("{message}")]
    Full {
        message: String,
        /// When the first of the sessions that fill it idles out (at least 1 s).
        retry_after: Duration,
    },
}

/// Which bound a refused session met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullBound {
    Table,
    Tenant,
}

impl Refused {
    /// The refusal for a full table or quota, with a message saying what to do.
    pub fn full(bound: FullBound, limits: Limits, retry_after: Duration) -> Refused {
        let retry_after = Duration::from_secs(retry_after.as_secs_f64().ceil().max(1.0) as u64);
        let seconds = retry_after.as_secs();
        let message = match bound {
            FullBound::Tenant => format!(
                "these credentials already hold their maximum of {} sessions \
                 (`sessions.max_per_tenant`): end sessions no longer used (DELETE /mcp with \
                 their Mcp-Session-Id) or retry in {seconds} s, when the least recently used \
                 one idles out",
                limits.max_per_tenant.unwrap_or(limits.max_sessions)
            ),
            FullBound::Table => format!(
                "the gateway holds its maximum of {} sessions (`sessions.max_sessions`): retry \
                 in {seconds} s, when the least recently used one idles out",
                limits.max_sessions
            ),
        };
        Refused::Full {
            message,
            retry_after,
        }
    }
}

/// A session as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: String,
    /// The tenant that created it; any other tenant gets "not found".
    pub tenant: String,
    /// The subject that created it, when its credential named one; any other subject
    /// (of the same tenant too) gets "not found".
    pub subject: Option<String>,
    /// Names added with `tool_expand_tools` (the policy still filters them). Shared:
    /// every request reads its session, and a session grown to hundreds of names was
    /// copied name by name on each one; an expansion copies it only while a request
    /// still holds the old set.
    pub expanded: Arc<BTreeSet<String>>,
}

/// What an expansion changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expansion {
    /// Names newly added by this call.
    pub added: Vec<String>,
    /// Names that were already expanded.
    pub already: Vec<String>,
    /// The session's whole expanded set afterwards.
    pub expanded: BTreeSet<String>,
}

#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates a session for `tenant` (and its `subject`) under a fresh random id, unless the table or
    /// the tenant's quota is full of live sessions (see the module docs).
    async fn create(&self, tenant: &str, subject: Option<&str>) -> Result<Session, Refused>;
    /// Creates a session under a given id (e.g. an MCP transport session id) unless
    /// one exists; returns the stored one (whose tenant may differ: check it). Used by
    /// the stdio surface, one session per process: counted, never refused.
    async fn get_or_create(
        &self,
        id: &str,
        tenant: &str,
        subject: Option<&str>,
    ) -> StoreResult<Session>;
    /// The session, if it exists (and has not idled out). Refreshes its idle timer.
    async fn get(&self, id: &str) -> StoreResult<Option<Session>>;
    /// Adds `names` to the expanded set of `tenant`'s session `id` atomically.
    /// `None` when the session does not exist or belongs to another tenant.
    async fn expand(
        &self,
        id: &str,
        tenant: &str,
        names: &[String],
    ) -> StoreResult<Option<Expansion>>;
    async fn delete(&self, id: &str) -> StoreResult<()>;

    /// The session if it exists and belongs to `tenant` and `subject` (another
    /// tenant's or another person's session is indistinguishable from a missing one).
    async fn get_owned(
        &self,
        id: &str,
        tenant: &str,
        subject: Option<&str>,
    ) -> StoreResult<Option<Session>> {
        Ok(self
            .get(id)
            .await?
            .filter(|s| s.tenant == tenant && s.subject.as_deref() == subject))
    }

    /// Live sessions per tenant, when this store can count them without a scan of a
    /// shared store (the memory store); `None` otherwise.
    fn live_by_tenant(&self) -> Option<std::collections::BTreeMap<String, usize>> {
        None
    }
}

/// A fresh opaque session id: 128 random bits, base64url without padding.
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    // The OS random source only fails when the system is unusable; fall back to a
    // hash of the time and a counter rather than panic.
    if getrandom::fill(&mut bytes).is_err() {
        use sha2::{Digest, Sha256};
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seed = format!(
            "{:?}-{}",
            std::time::SystemTime::now(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        bytes.copy_from_slice(&Sha256::digest(seed.as_bytes())[..16]);
    }
    base64url(&bytes)
}

fn base64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
