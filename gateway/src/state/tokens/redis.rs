//! Upstream tokens in Redis, shared by every replica (which must hold the same keys).
//!
//! Keys (under `state.key_prefix`), values sealed bytes only:
//!
//! - `tokens:<upstream>:<digest of the principal>` — a token, no TTL (it lives until
//!   removed or replaced);
//! - `tokens-pending:<id>` — a pending record with its TTL (`SET PX`), taken with
//!   `GETDEL`, so of concurrent takers on any replicas one gets it;
//! - `tokens-lock:<upstream>:<digest>` — a refresh lock: `SET NX PX` with a random
//!   owner, freed by a script that deletes it only while it still holds that owner.
//!
//! A re-seal replaces a token through a compare-and-set script, so it never undoes a
//! refresh another replica stored meanwhile. `GETDEL` needs Redis 6.2.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;

use super::{StoreError, TokenBackend};
use crate::state::conn::RedisConn;

/// KEYS: the value's key. ARGV: the value expected, the new value. 1 if replaced.
const REPLACE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
";

/// KEYS: the lock's key. ARGV: its owner. Deletes it only while that owner holds it.
const UNLOCK: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

pub struct RedisBackend {
    conn: Arc<RedisConn>,
    replace: Script,
    unlock: Script,
}

impl RedisBackend {
    pub fn new(conn: Arc<RedisConn>) -> RedisBackend {
        RedisBackend {
            conn,
            replace: Script::new(REPLACE),
            unlock: Script::new(UNLOCK),
        }
    }

    /// `GET`-like commands (`GET`, `GETDEL`) on `name`.
    async fn read(
        &self,
        what: &str,
        command: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let key = self.conn.key(name);
        Ok(self
            .conn
            .run(what, |mut c| async move {
                redis::cmd(command).arg(&key).query_async(&mut c).await
            })
            .await?)
    }
}

/// Milliseconds for `PX`: at least 1.
fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[async_trait]
impl TokenBackend for RedisBackend {
    async fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.read("read upstream token", "GET", name).await
    }

    async fn put(&self, name: &str, value: &[u8]) -> Result<(), StoreError> {
        let key = self.conn.key(name);
        self.conn
            .run("store upstream token", |mut c| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(value)
                    .query_async::<()>(&mut c)
                    .await
            })
            .await?;
        Ok(())
    }

    async fn replace(&self, name: &str, current: &[u8], new: &[u8]) -> Result<bool, StoreError> {
        let key = self.conn.key(name);
        let replaced: i64 = self
            .conn
            .run("re-seal upstream token", |mut c| async move {
                self.replace
                    .key(&key)
                    .arg(current)
                    .arg(new)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(replaced == 1)
    }

    async fn remove(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.read("remove upstream token", "GETDEL", name).await
    }

    async fn put_pending(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let key = self.conn.key(name);
        self.conn
            .run("store pending authorization", |mut c| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(value)
                    .arg("PX")
                    .arg(millis(ttl))
                    .query_async::<()>(&mut c)
                    .await
            })
            .await?;
        Ok(())
    }

    async fn take_pending(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.read("take pending authorization", "GETDEL", name)
            .await
    }

    async fn peek_pending(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.read("read pending authorization", "GET", name).await
    }

    async fn try_lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<bool, StoreError> {
        let key = self.conn.key(name);
        let taken: Option<String> = self
            .conn
            .run("lock token refresh", |mut c| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(owner)
                    .arg("NX")
                    .arg("PX")
                    .arg(millis(ttl))
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(taken.is_some())
    }

    async fn unlock(&self, name: &str, owner: &str) -> Result<(), StoreError> {
        let key = self.conn.key(name);
        self.conn
            .run("unlock token refresh", |mut c| async move {
                self.unlock
                    .key(&key)
                    .arg(owner)
                    .invoke_async::<i64>(&mut c)
                    .await
            })
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::suite as state_suite;
    use crate::state::tokens::keyring::tests::key;
    use crate::state::tokens::{Keyring, TokenKey, TokenStore, suite};

    async fn backend() -> Option<Arc<dyn TokenBackend>> {
        let state = state_suite::test_state(&state_suite::redis_url());
        let conn = state_suite::redis_conn(&state).await?;
        let backend: Arc<dyn TokenBackend> = Arc::new(RedisBackend::new(conn));
        Some(backend)
    }

    #[tokio::test]
    async fn redis_backend_passes_the_token_suite() {
        suite::run_all(&|| Box::pin(backend())).await;
    }

    /// Two connections are two replicas: a token stored by one is read by the other,
    /// a pending record taken on one is gone on the other, and a refresh lock held by
    /// one is refused to the other.
    #[tokio::test]
    async fn two_replicas_share_tokens_pending_records_and_locks() {
        let state = state_suite::test_state(&state_suite::redis_url());
        let Some(a) = state_suite::redis_conn(&state).await else {
            return;
        };
        let b = RedisConn::new(&state).unwrap();
        let keys = || Keyring::new(&[key(3)]).unwrap();
        let a = TokenStore::redis(a, keys()).unwrap();
        let b = TokenStore::redis(b, keys()).unwrap();
        let alice = TokenKey::new("github", "acme", Some("alice"));
        a.put(&alice, &suite::token("from-a")).await.unwrap();
        assert_eq!(b.get(&alice).await.unwrap(), Some(suite::token("from-a")));
        a.put_pending("pending-id-0123456789", b"state", Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(
            b.take_pending("pending-id-0123456789")
                .await
                .unwrap()
                .as_deref(),
            Some(&b"state"[..])
        );
        assert_eq!(a.take_pending("pending-id-0123456789").await.unwrap(), None);
        let lock = a
            .lock_refresh(&alice, Duration::from_secs(30))
            .await
            .unwrap()
            .expect("free");
        assert!(
            b.lock_refresh(&alice, Duration::from_secs(30))
                .await
                .unwrap()
                .is_none()
        );
        lock.release().await.unwrap();
        let lock = b
            .lock_refresh(&alice, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(lock.is_some(), "released for every replica");
        assert!(b.remove(&alice).await.unwrap().is_some());
        assert!(
            TokenStore::redis(
                RedisConn::new(&state).unwrap(),
                Keyring::ephemeral().unwrap()
            )
            .is_err()
        );
    }
}
