//! The in-process token backend: one bounded table. Also where the file backend
//! keeps its pending records and locks (they live minutes; a restart may lose them).
//!
//! Bounded by a number of records (tokens and pending records together): when full,
//! expired pending records are purged, then the oldest pending records evicted; a
//! token is never evicted (a caller would have to authorize again without being
//! told): a full table of tokens refuses a new one. Locks are bounded by the same
//! number, expired ones purged when it is reached.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use foldhash::HashMap;

use super::{StoreError, TokenBackend};

pub struct MemoryBackend {
    max_records: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    tokens: HashMap<String, Vec<u8>>,
    pending: HashMap<String, Pending>,
    /// Pending names by age (the sequence number of their put): eviction order.
    by_age: BTreeMap<u64, String>,
    next: u64,
    locks: HashMap<String, Lock>,
}

struct Pending {
    value: Vec<u8>,
    expires: Instant,
    seq: u64,
}

struct Lock {
    owner: String,
    expires: Instant,
}

impl MemoryBackend {
    /// A table of at most `max_records` tokens and pending records (at least 1).
    pub fn new(max_records: usize) -> MemoryBackend {
        MemoryBackend {
            max_records: max_records.max(1),
            table: Mutex::new(Table::default()),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn full(&self) -> StoreError {
        StoreError::Refused(format!(
            "the in-memory token store holds its maximum of {} records",
            self.max_records
        ))
    }
}

impl Table {
    fn records(&self) -> usize {
        self.tokens.len() + self.pending.len()
    }

    /// Room for one more record out of `max`: expired pending records go first, then
    /// the oldest pending ones. Whether there is room.
    fn make_room(&mut self, max: usize, now: Instant) -> bool {
        if self.records() < max {
            return true;
        }
        let expired: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.expires <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in expired {
            self.remove_pending(&name);
        }
        while self.records() >= max {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                return false;
            };
            self.pending.remove(&oldest);
        }
        true
    }

    fn remove_pending(&mut self, name: &str) -> Option<Pending> {
        let pending = self.pending.remove(name)?;
        self.by_age.remove(&pending.seq);
        Some(pending)
    }

    /// The live pending record `name`; an expired one is forgotten.
    fn live_pending(&mut self, name: &str, now: Instant) -> Option<&Pending> {
        if self.pending.get(name)?.expires <= now {
            self.remove_pending(name);
            return None;
        }
        self.pending.get(name)
    }
}

#[async_trait]
impl TokenBackend for MemoryBackend {
    async fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.table().tokens.get(name).cloned())
    }

    async fn put(&self, name: &str, value: &[u8]) -> Result<(), StoreError> {
        let mut table = self.table();
        if let Some(stored) = table.tokens.get_mut(name) {
            *stored = value.to_vec();
            return Ok(());
        }
        if !table.make_room(self.max_records, Instant::now()) {
            return Err(self.full());
        }
        table.tokens.insert(name.to_owned(), value.to_vec());
        Ok(())
    }

    async fn replace(&self, name: &str, current: &[u8], new: &[u8]) -> Result<bool, StoreError> {
        let mut table = self.table();
        match table.tokens.get_mut(name) {
            Some(stored) if stored.as_slice() == current => {
                *stored = new.to_vec();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn remove(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.table().tokens.remove(name))
    }

    async fn put_pending(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut table = self.table();
        table.remove_pending(name);
        if !table.make_room(self.max_records, now) {
            return Err(self.full());
        }
        let seq = table.next;
        table.next += 1;
        table.by_age.insert(seq, name.to_owned());
        table.pending.insert(
            name.to_owned(),
            Pending {
                value: value.to_vec(),
                expires: now + ttl,
                seq,
            },
        );
        Ok(())
    }

    async fn take_pending(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut table = self.table();
        if table.live_pending(name, Instant::now()).is_none() {
            return Ok(None);
        }
        Ok(table.remove_pending(name).map(|p| p.value))
    }

    async fn peek_pending(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut table = self.table();
        Ok(table
            .live_pending(name, Instant::now())
            .map(|p| p.value.clone()))
    }

    async fn try_lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut table = self.table();
        if table.locks.get(name).is_some_and(|l| l.expires > now) {
            return Ok(false);
        }
        if table.locks.len() >= self.max_records {
            table.locks.retain(|_, l| l.expires > now);
            if table.locks.len() >= self.max_records {
                return Err(StoreError::Refused(format!(
                    "the in-memory token store holds its maximum of {} refresh locks",
                    self.max_records
                )));
            }
        }
        table.locks.insert(
            name.to_owned(),
            Lock {
                owner: owner.to_owned(),
                expires: now + ttl,
            },
        );
        Ok(true)
    }

    async fn unlock(&self, name: &str, owner: &str) -> Result<(), StoreError> {
        let mut table = self.table();
        if table.locks.get(name).is_some_and(|l| l.owner == owner) {
            table.locks.remove(name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tokens::suite;

    #[tokio::test]
    async fn memory_backend_passes_the_token_suite() {
        suite::run_all(&|| {
            let backend: std::sync::Arc<dyn TokenBackend> =
                std::sync::Arc::new(MemoryBackend::new(1000));
            Box::pin(async move { Some(backend) })
        })
        .await;
    }

    #[tokio::test]
    async fn a_full_table_evicts_pending_records_oldest_first_never_tokens() {
        let ttl = Duration::from_secs(60);
        let table = MemoryBackend::new(3);
        table.put_pending("p1", b"1", ttl).await.unwrap();
        table.put_pending("p2", b"2", ttl).await.unwrap();
        table.put("t1", b"a").await.unwrap();
        table.put_pending("p3", b"3", ttl).await.unwrap();
        assert_eq!(
            table.peek_pending("p1").await.unwrap(),
            None,
            "oldest evicted"
        );
        assert!(table.peek_pending("p2").await.unwrap().is_some());
        table.put("t2", b"b").await.unwrap();
        table.put("t3", b"c").await.unwrap();
        assert_eq!(table.peek_pending("p2").await.unwrap(), None);
        assert_eq!(table.peek_pending("p3").await.unwrap(), None);
        assert!(matches!(
            table.put("t4", b"d").await,
            Err(StoreError::Refused(m)) if m.contains("maximum of 3")
        ));
        assert!(table.put_pending("p4", b"4", ttl).await.is_err());
        table
            .put("t1", b"replaced")
            .await
            .expect("a replacement is no new record");
        for name in ["t1", "t2", "t3"] {
            assert!(table.get(name).await.unwrap().is_some(), "{name} kept");
        }
        table.remove("t3").await.unwrap();
        table.put_pending("p4", b"4", ttl).await.unwrap();
    }

    #[tokio::test]
    async fn expired_pending_records_make_room_first() {
        let table = MemoryBackend::new(2);
        table
            .put_pending("short", b"s", Duration::from_millis(50))
            .await
            .unwrap();
        table
            .put_pending("long", b"l", Duration::from_secs(60))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
        table.put("t", b"t").await.unwrap();
        assert!(
            table.peek_pending("long").await.unwrap().is_some(),
            "the expired one went, not the oldest live one"
        );
        assert_eq!(table.take_pending("short").await.unwrap(), None);
    }

    #[tokio::test]
    async fn locks_are_bounded_and_expired_ones_purged() {
        let table = MemoryBackend::new(2);
        let short = Duration::from_millis(50);
        assert!(table.try_lock("a", "o", short).await.unwrap());
        assert!(table.try_lock("b", "o", short).await.unwrap());
        assert!(table.try_lock("c", "o", short).await.is_err());
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(table.try_lock("c", "o", short).await.unwrap());
    }
}
