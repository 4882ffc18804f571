//! Sessions: which tools a session has expanded beyond its tenant's initial set.
//!
//! [`SessionStore`] is backend-agnostic: the embedded default is [`MemoryStore`];
//! [`crate::state::redis_sessions::RedisSessionStore`] shares sessions between
//! replicas. Expansion is atomic per session: concurrent expansions give the union,
//! never a lost update. A session belongs to the tenant that created it; another
//! tenant's use is answered as "not found". Idle sessions expire (the timer slides on
//! every use). Session ids are opaque: 128 random bits, base64url.
//!
//! Every method can fail with [`Unavailable`] (a shared store that cannot be reached):
//! surfaces answer that with 503 and a retry hint, never with "not found".

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Mutex;

pub use crate::state::Unavailable;

/// What a store operation gives: the answer, or the store being unreachable.
pub type StoreResult<T> = Result<T, Unavailable>;

/// A session as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: String,
    /// The tenant that created it; any other tenant gets "not found".
    pub tenant: String,
    /// Names added with `tool_expand_tools` (the policy still filters them).
    pub expanded: BTreeSet<String>,
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
    /// Creates a session for `tenant` under a fresh random id.
    async fn create(&self, tenant: &str) -> StoreResult<Session>;
    /// Creates a session under a given id (e.g. an MCP transport session id) unless
    /// one exists; returns the stored one (whose tenant may differ: check it).
    async fn get_or_create(&self, id: &str, tenant: &str) -> StoreResult<Session>;
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

    /// The session if it exists and belongs to `tenant` (another tenant's session is
    /// indistinguishable from a missing one).
    async fn get_owned(&self, id: &str, tenant: &str) -> StoreResult<Option<Session>> {
        Ok(self.get(id).await?.filter(|s| s.tenant == tenant))
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

/// The embedded store: an in-memory cache with an idle TTL and a size cap (least
/// recently used sessions go first).
pub struct MemoryStore {
    sessions: moka::future::Cache<String, Arc<Mutex<Session>>>,
}

impl MemoryStore {
    pub fn new(idle_ttl: Duration, max_sessions: u64) -> Self {
        Self {
            sessions: moka::future::Cache::builder()
                .time_to_idle(idle_ttl)
                .max_capacity(max_sessions)
                .build(),
        }
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn create(&self, tenant: &str) -> StoreResult<Session> {
        let session = Session {
            id: new_session_id(),
            tenant: tenant.to_owned(),
            expanded: BTreeSet::new(),
        };
        self.sessions
            .insert(session.id.clone(), Arc::new(Mutex::new(session.clone())))
            .await;
        Ok(session)
    }

    async fn get_or_create(&self, id: &str, tenant: &str) -> StoreResult<Session> {
        let entry = self
            .sessions
            .get_with(id.to_owned(), async {
                Arc::new(Mutex::new(Session {
                    id: id.to_owned(),
                    tenant: tenant.to_owned(),
                    expanded: BTreeSet::new(),
                }))
            })
            .await;
        Ok(entry.lock().await.clone())
    }

    async fn get(&self, id: &str) -> StoreResult<Option<Session>> {
        let Some(entry) = self.sessions.get(id).await else {
            return Ok(None);
        };
        let session = entry.lock().await.clone();
        Ok(Some(session))
    }

    async fn expand(
        &self,
        id: &str,
        tenant: &str,
        names: &[String],
    ) -> StoreResult<Option<Expansion>> {
        let Some(entry) = self.sessions.get(id).await else {
            return Ok(None);
        };
        let mut session = entry.lock().await;
        if session.tenant != tenant {
            return Ok(None);
        }
        let mut expansion = Expansion::default();
        for name in names {
            if session.expanded.insert(name.clone()) {
                expansion.added.push(name.clone());
            } else if !expansion.added.contains(name) && !expansion.already.contains(name) {
                expansion.already.push(name.clone());
            }
        }
        expansion.expanded = session.expanded.clone();
        Ok(Some(expansion))
    }

    async fn delete(&self, id: &str) -> StoreResult<()> {
        self.sessions.invalidate(id).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_128_bit_base64url() {
        let a = new_session_id();
        let b = new_session_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 22);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_eq!(base64url(b"\xff\xff\xff"), "____");
        assert_eq!(base64url(b"Ma"), "TWE");
    }

    #[tokio::test]
    async fn memory_store_passes_the_store_suite() {
        crate::state::suite::run_all(&|ttl| {
            Box::pin(async move {
                let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new(ttl, 1000));
                Some(store)
            })
        })
        .await;
    }
}
