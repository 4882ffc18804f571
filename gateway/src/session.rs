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
//!
//! The table is bounded ([`Limits`]: `sessions.max_sessions` in all, and
//! `sessions.max_per_tenant` for each tenant). A full table, or a tenant at its quota,
//! refuses a new session ([`Refused::Full`], with the time until a session idles out as
//! the retry hint) rather than evicting a live one: one tenant's initializes must never
//! end another tenant's sessions. Sessions idle past `idle_ttl` are reclaimed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use foldhash::{HashMap, HashSet};

pub use crate::state::Unavailable;

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
    /// Creates a session for `tenant` under a fresh random id, unless the table or
    /// the tenant's quota is full of live sessions (see the module docs).
    async fn create(&self, tenant: &str) -> Result<Session, Refused>;
    /// Creates a session under a given id (e.g. an MCP transport session id) unless
    /// one exists; returns the stored one (whose tenant may differ: check it). Used by
    /// the stdio surface, one session per process: counted, never refused.
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

/// The embedded store: a table in memory with a sliding idle TTL, bounded by
/// [`Limits`] (a full table refuses; it never evicts a live session).
pub struct MemoryStore {
    idle_ttl: Duration,
    limits: Limits,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    sessions: HashMap<String, Slot>,
    /// Each tenant's session ids (for its quota, without scanning the table).
    by_tenant: HashMap<String, HashSet<String>>,
    /// After a scan of a full table: no session idles out before this instant, so a
    /// request meanwhile is refused without another scan.
    full_until: Option<Instant>,
    /// When the table was last swept of idle sessions.
    swept: Option<Instant>,
}

struct Slot {
    session: Session,
    used: Instant,
}

/// A full table is swept at most this often on its own (sweeps also happen whenever
/// the table or a quota is full).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

impl Table {
    fn insert(&mut self, session: Session, now: Instant) {
        self.by_tenant
            .entry(session.tenant.clone())
            .or_default()
            .insert(session.id.clone());
        self.sessions
            .insert(session.id.clone(), Slot { session, used: now });
    }

    fn remove(&mut self, id: &str) {
        let Some(slot) = self.sessions.remove(id) else {
            return;
        };
        if let Some(ids) = self.by_tenant.get_mut(&slot.session.tenant) {
            ids.remove(id);
            if ids.is_empty() {
                self.by_tenant.remove(&slot.session.tenant);
            }
        }
        self.full_until = None;
    }

    /// The live session `id` (its idle timer refreshed), forgetting it if it idled out.
    fn live(&mut self, id: &str, ttl: Duration, now: Instant) -> Option<&mut Slot> {
        let expired = now.duration_since(self.sessions.get(id)?.used) >= ttl;
        if expired {
            self.remove(id);
            return None;
        }
        let slot = self.sessions.get_mut(id)?;
        slot.used = now;
        Some(slot)
    }

    /// Forgets the idle sessions among `ids`; returns when the first live one of them
    /// will idle out (from `now`).
    fn sweep(&mut self, ids: Vec<String>, ttl: Duration, now: Instant) -> Option<Duration> {
        let mut soonest: Option<Duration> = None;
        for id in ids {
            let Some(used) = self.sessions.get(&id).map(|s| s.used) else {
                continue;
            };
            let idle = now.duration_since(used);
            if idle >= ttl {
                self.remove(&id);
            } else {
                let left = ttl - idle;
                soonest = Some(soonest.map_or(left, |s| s.min(left)));
            }
        }
        soonest
    }

    fn sweep_all(&mut self, ttl: Duration, now: Instant) -> Option<Duration> {
        self.swept = Some(now);
        let ids = self.sessions.keys().cloned().collect();
        self.sweep(ids, ttl, now)
    }
}

impl MemoryStore {
    pub fn new(idle_ttl: Duration, limits: Limits) -> Self {
        Self {
            idle_ttl,
            limits,
            table: Mutex::new(Table::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every critical section leaves the maps consistent at each step.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn create(&self, tenant: &str) -> Result<Session, Refused> {
        let ttl = self.idle_ttl;
        let now = Instant::now();
        let mut table = self.lock();
        if table
            .swept
            .is_none_or(|at| now.duration_since(at) >= SWEEP_EVERY)
        {
            table.sweep_all(ttl, now);
        }
        if let Some(quota) = self.limits.max_per_tenant {
            let ids: Vec<String> = table
                .by_tenant
                .get(tenant)
                .map(|ids| ids.iter().cloned().collect())
                .unwrap_or_default();
            if ids.len() as u64 >= quota {
                let soonest = table.sweep(ids, ttl, now);
                let held = table.by_tenant.get(tenant).map_or(0, HashSet::len);
                if held as u64 >= quota {
                    return Err(Refused::full(
                        FullBound::Tenant,
                        self.limits,
                        soonest.unwrap_or(ttl),
                    ));
                }
            }
        }
        if table.sessions.len() as u64 >= self.limits.max_sessions {
            let soonest = match table.full_until {
                Some(until) if until > now => Some(until - now),
                _ => {
                    let soonest = table.sweep_all(ttl, now);
                    table.full_until = soonest.map(|d| now + d);
                    soonest
                }
            };
            if table.sessions.len() as u64 >= self.limits.max_sessions {
                return Err(Refused::full(
                    FullBound::Table,
                    self.limits,
                    soonest.unwrap_or(ttl),
                ));
            }
        }
        let session = Session {
            id: new_session_id(),
            tenant: tenant.to_owned(),
            expanded: Arc::default(),
        };
        table.insert(session.clone(), now);
        Ok(session)
    }

    async fn get_or_create(&self, id: &str, tenant: &str) -> StoreResult<Session> {
        let now = Instant::now();
        let mut table = self.lock();
        if let Some(slot) = table.live(id, self.idle_ttl, now) {
            return Ok(slot.session.clone());
        }
        let session = Session {
            id: id.to_owned(),
            tenant: tenant.to_owned(),
            expanded: Arc::default(),
        };
        table.insert(session.clone(), now);
        Ok(session)
    }

    async fn get(&self, id: &str) -> StoreResult<Option<Session>> {
        let mut table = self.lock();
        Ok(table
            .live(id, self.idle_ttl, Instant::now())
            .map(|slot| slot.session.clone()))
    }

    async fn expand(
        &self,
        id: &str,
        tenant: &str,
        names: &[String],
    ) -> StoreResult<Option<Expansion>> {
        let mut table = self.lock();
        let Some(slot) = table.live(id, self.idle_ttl, Instant::now()) else {
            return Ok(None);
        };
        let session = &mut slot.session;
        if session.tenant != tenant {
            return Ok(None);
        }
        let mut expansion = Expansion::default();
        for name in names {
            if Arc::make_mut(&mut session.expanded).insert(name.clone()) {
                expansion.added.push(name.clone());
            } else if !expansion.added.contains(name) && !expansion.already.contains(name) {
                expansion.already.push(name.clone());
            }
        }
        expansion.expanded = BTreeSet::clone(&session.expanded);
        Ok(Some(expansion))
    }

    fn live_by_tenant(&self) -> Option<std::collections::BTreeMap<String, usize>> {
        let now = Instant::now();
        let table = self.lock();
        let live = |id: &String| {
            table
                .sessions
                .get(id)
                .is_some_and(|slot| now.duration_since(slot.used) < self.idle_ttl)
        };
        Some(
            table
                .by_tenant
                .iter()
                .map(|(tenant, ids)| (tenant.clone(), ids.iter().filter(|id| live(id)).count()))
                .filter(|(_, n)| *n > 0)
                .collect(),
        )
    }

    async fn delete(&self, id: &str) -> StoreResult<()> {
        self.lock().remove(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

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

    /// Reading a session shares its expanded set (a session grown to hundreds of names
    /// is not copied on every request); an expansion leaves a set already read as it
    /// was and shows in the next read.
    #[tokio::test]
    async fn reads_share_the_expanded_set_and_expansions_do_not_change_one_read() {
        let store = MemoryStore::new(Duration::from_secs(60), crate::state::suite::LIMITS);
        let id = store.create("t").await.expect("store").id;
        let names: Vec<String> = (0..300).map(|i| format!("up__tool_{i}")).collect();
        store
            .expand(&id, "t", &names)
            .await
            .expect("store")
            .expect("the session");
        let first = store.get(&id).await.expect("store").expect("the session");
        let second = store.get(&id).await.expect("store").expect("the session");
        assert!(
            Arc::ptr_eq(&first.expanded, &second.expanded),
            "two reads share one set"
        );
        assert_eq!(first.expanded.len(), 300);
        let more = ["up__one_more".to_owned()];
        store
            .expand(&id, "t", &more)
            .await
            .expect("store")
            .expect("the session");
        assert_eq!(
            first.expanded.len(),
            300,
            "a set already read stays as it was"
        );
        let third = store.get(&id).await.expect("store").expect("the session");
        assert_eq!(third.expanded.len(), 301);
        assert!(third.expanded.contains("up__one_more"));
    }

    #[tokio::test]
    async fn memory_store_passes_the_store_suite() {
        crate::state::suite::run_all(&|ttl, limits| {
            Box::pin(async move {
                let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new(ttl, limits));
                Some(store)
            })
        })
        .await;
    }
}
