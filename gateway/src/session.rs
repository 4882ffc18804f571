//! Sessions: which tools a session has expanded beyond its tenant's initial set.
//!
//! [`SessionStore`] is backend-agnostic (the embedded default is [`MemoryStore`]; a
//! shared backend can implement the same trait for several replicas). Expansion is
//! atomic per session: concurrent expansions give the union, never a lost update.
//! Session ids are opaque: 128 random bits, base64url.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Mutex;

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
    async fn create(&self, tenant: &str) -> Session;
    /// Creates a session under a given id (e.g. an MCP transport session id) unless
    /// one exists; returns the stored one.
    async fn get_or_create(&self, id: &str, tenant: &str) -> Session;
    /// The session, if it exists (and has not idled out). Refreshes its idle timer.
    async fn get(&self, id: &str) -> Option<Session>;
    /// Adds `names` to the session's expanded set atomically. `None` when the
    /// session does not exist.
    async fn expand(&self, id: &str, names: &[String]) -> Option<Expansion>;
    async fn delete(&self, id: &str);
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
    async fn create(&self, tenant: &str) -> Session {
        let session = Session {
            id: new_session_id(),
            tenant: tenant.to_owned(),
            expanded: BTreeSet::new(),
        };
        self.sessions
            .insert(session.id.clone(), Arc::new(Mutex::new(session.clone())))
            .await;
        session
    }

    async fn get_or_create(&self, id: &str, tenant: &str) -> Session {
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
        entry.lock().await.clone()
    }

    async fn get(&self, id: &str) -> Option<Session> {
        let entry = self.sessions.get(id).await?;
        let session = entry.lock().await.clone();
        Some(session)
    }

    async fn expand(&self, id: &str, names: &[String]) -> Option<Expansion> {
        let entry = self.sessions.get(id).await?;
        let mut session = entry.lock().await;
        let mut expansion = Expansion::default();
        for name in names {
            if session.expanded.insert(name.clone()) {
                expansion.added.push(name.clone());
            } else if !expansion.added.contains(name) && !expansion.already.contains(name) {
                expansion.already.push(name.clone());
            }
        }
        expansion.expanded = session.expanded.clone();
        Some(expansion)
    }

    async fn delete(&self, id: &str) {
        self.sessions.invalidate(id).await;
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
    async fn expansion_is_a_union_under_concurrency() {
        let store = Arc::new(MemoryStore::new(Duration::from_secs(60), 100));
        let session = store.create("t").await;
        let mut tasks = Vec::new();
        for i in 0..32 {
            let store = store.clone();
            let id = session.id.clone();
            tasks.push(tokio::spawn(async move {
                store
                    .expand(&id, &[format!("tool_{i}"), "shared".to_owned()])
                    .await
                    .unwrap()
            }));
        }
        let mut added_shared = 0;
        for task in tasks {
            let expansion = task.await.unwrap();
            added_shared += expansion.added.iter().filter(|n| *n == "shared").count();
        }
        assert_eq!(added_shared, 1, "exactly one expansion adds a shared name");
        let stored = store.get(&session.id).await.unwrap();
        assert_eq!(stored.expanded.len(), 33);
    }

    #[tokio::test]
    async fn sessions_idle_out_and_can_be_deleted() {
        let store = MemoryStore::new(Duration::from_millis(100), 100);
        let session = store.create("t").await;
        assert!(store.get(&session.id).await.is_some());
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            store.get(&session.id).await.is_none(),
            "idle session expired"
        );
        assert!(store.expand(&session.id, &["x".into()]).await.is_none());
        let other = store.get_or_create("fixed-id", "t").await;
        assert_eq!(other.id, "fixed-id");
        store.delete("fixed-id").await;
        assert!(store.get("fixed-id").await.is_none());
    }
}
