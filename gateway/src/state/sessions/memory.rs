//! The embedded session store: one bounded table in this process.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use foldhash::{HashMap, HashSet};

use super::*;

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
    async fn create(&self, tenant: &str, subject: Option<&str>) -> Result<Session, Refused> {
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
            subject: subject.map(str::to_owned),
            expanded: Arc::default(),
        };
        table.insert(session.clone(), now);
        Ok(session)
    }

    async fn get_or_create(
        &self,
        id: &str,
        tenant: &str,
        subject: Option<&str>,
    ) -> StoreResult<Session> {
        let now = Instant::now();
        let mut table = self.lock();
        if let Some(slot) = table.live(id, self.idle_ttl, now) {
            return Ok(slot.session.clone());
        }
        let session = Session {
            id: id.to_owned(),
            tenant: tenant.to_owned(),
            subject: subject.map(str::to_owned),
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
        let id = store.create("t", None).await.expect("store").id;
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
