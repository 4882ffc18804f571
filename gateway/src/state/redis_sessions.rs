//! Sessions in Redis, shared by every replica.
//!
//! Keys (under `state.key_prefix`, `{id}` is a Redis Cluster hash tag so both keys of
//! a session live together):
//!
//! - `session:{ID}` — a hash: `tenant` and `created` (Unix ms);
//! - `session:{ID}:expanded` — a set: the names `tool_expand_tools` added.
//!
//! Both keys expire after `sessions.idle_ttl` without use; every read and write
//! refreshes both (a sliding TTL). Each operation is one Lua script, so it is atomic:
//! overlapping expansions from several replicas give the union, and each name is
//! reported as newly added by exactly one of them.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;

use super::conn::RedisConn;
use crate::session::{Expansion, Session, SessionStore, StoreResult, new_session_id};

/// Creates the session unless it exists; returns `{tenant, expanded members}`.
/// KEYS: hash, set. ARGV: tenant, created (ms), ttl (ms).
const GET_OR_CREATE: &str = r"
redis.call('HSETNX', KEYS[1], 'tenant', ARGV[1])
redis.call('HSETNX', KEYS[1], 'created', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {redis.call('HGET', KEYS[1], 'tenant'), redis.call('SMEMBERS', KEYS[2])}
";

/// `{tenant, expanded members}` or nil; refreshes the TTL.
/// KEYS: hash, set. ARGV: ttl (ms).
const GET: &str = r"
local tenant = redis.call('HGET', KEYS[1], 'tenant')
if not tenant then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return {tenant, redis.call('SMEMBERS', KEYS[2])}
";

/// Adds names to the set of a session owned by the tenant: `{added, already, all}`,
/// or nil when the session is missing or another tenant's. Duplicates in the request
/// count once.
/// KEYS: hash, set. ARGV: ttl (ms), tenant, names...
const EXPAND: &str = r"
local owner = redis.call('HGET', KEYS[1], 'tenant')
if (not owner) or owner ~= ARGV[2] then return false end
local added, already, seen = {}, {}, {}
for i = 3, #ARGV do
  local name = ARGV[i]
  if not seen[name] then
    seen[name] = true
    if redis.call('SADD', KEYS[2], name) == 1 then
      added[#added + 1] = name
    else
      already[#already + 1] = name
    end
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return {added, already, redis.call('SMEMBERS', KEYS[2])}
";

pub struct RedisSessionStore {
    conn: Arc<RedisConn>,
    ttl_ms: u64,
    get_or_create: Script,
    get: Script,
    expand: Script,
}

impl RedisSessionStore {
    pub fn new(conn: Arc<RedisConn>, idle_ttl: Duration) -> Self {
        Self {
            conn,
            ttl_ms: (idle_ttl.as_millis() as u64).max(1),
            get_or_create: Script::new(GET_OR_CREATE),
            get: Script::new(GET),
            expand: Script::new(EXPAND),
        }
    }

    fn keys(&self, id: &str) -> (String, String) {
        let hash = self.conn.key(&format!("session:{{{id}}}"));
        let set = format!("{hash}:expanded");
        (hash, set)
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn session(id: &str, tenant: String, members: Vec<String>) -> Session {
    Session {
        id: id.to_owned(),
        tenant,
        expanded: members.into_iter().collect(),
    }
}

#[async_trait]
impl SessionStore for RedisSessionStore {
    async fn create(&self, tenant: &str) -> StoreResult<Session> {
        self.get_or_create(&new_session_id(), tenant).await
    }

    async fn get_or_create(&self, id: &str, tenant: &str) -> StoreResult<Session> {
        let (hash, set) = self.keys(id);
        let (owner, members): (String, Vec<String>) = self
            .conn
            .run("create session", |mut c| async move {
                self.get_or_create
                    .key(hash)
                    .key(set)
                    .arg(tenant)
                    .arg(now_ms())
                    .arg(self.ttl_ms)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(session(id, owner, members))
    }

    async fn get(&self, id: &str) -> StoreResult<Option<Session>> {
        let (hash, set) = self.keys(id);
        let found: Option<(String, Vec<String>)> = self
            .conn
            .run("read session", |mut c| async move {
                self.get
                    .key(hash)
                    .key(set)
                    .arg(self.ttl_ms)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(found.map(|(owner, members)| session(id, owner, members)))
    }

    async fn expand(
        &self,
        id: &str,
        tenant: &str,
        names: &[String],
    ) -> StoreResult<Option<Expansion>> {
        let (hash, set) = self.keys(id);
        let found: Option<(Vec<String>, Vec<String>, Vec<String>)> = self
            .conn
            .run("expand session", |mut c| async move {
                let mut invocation = self.expand.key(hash);
                invocation.key(set).arg(self.ttl_ms).arg(tenant);
                for name in names {
                    invocation.arg(name);
                }
                invocation.invoke_async(&mut c).await
            })
            .await?;
        Ok(found.map(|(added, already, all)| Expansion {
            added,
            already,
            expanded: all.into_iter().collect::<BTreeSet<String>>(),
        }))
    }

    async fn delete(&self, id: &str) -> StoreResult<()> {
        let (hash, set) = self.keys(id);
        self.conn
            .run("delete session", |mut c| async move {
                redis::cmd("DEL")
                    .arg(&hash)
                    .arg(&set)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::suite;

    #[tokio::test]
    async fn redis_store_passes_the_store_suite() {
        suite::run_all(&|ttl| Box::pin(suite::redis_store(ttl))).await;
    }

    /// Two connections are two replicas: overlapping expansions give the union, and
    /// each name is newly added by exactly one of them.
    #[tokio::test]
    async fn two_replicas_expand_one_session_atomically() {
        let state = suite::test_state(&suite::redis_url());
        let Some(a) = suite::redis_conn(&state).await else {
            return;
        };
        let b = RedisConn::new(&state).unwrap();
        let a = Arc::new(RedisSessionStore::new(a, Duration::from_secs(60)));
        let b = Arc::new(RedisSessionStore::new(b, Duration::from_secs(60)));
        let session = a.create("acme").await.unwrap();
        assert_eq!(b.get(&session.id).await.unwrap().unwrap().tenant, "acme");
        let mut tasks = Vec::new();
        for i in 0..20 {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            let id = session.id.clone();
            let names = vec![format!("t_{}", i % 5), format!("t_{}", (i + 1) % 5)];
            tasks.push(tokio::spawn(async move {
                store.expand(&id, "acme", &names).await.unwrap().unwrap()
            }));
        }
        let mut added = Vec::new();
        for task in tasks {
            added.extend(task.await.unwrap().added);
        }
        added.sort();
        assert_eq!(
            added,
            ["t_0", "t_1", "t_2", "t_3", "t_4"],
            "each added once"
        );
        assert_eq!(a.get(&session.id).await.unwrap().unwrap().expanded.len(), 5);
    }

    #[tokio::test]
    async fn unreachable_redis_is_unavailable_and_never_leaks_the_url() {
        let mut state = suite::test_state("redis://:s3cret-pass@127.0.0.1:1");
        state.connect_timeout = Duration::from_millis(300);
        state.command_timeout = Duration::from_millis(300);
        let conn = RedisConn::new(&state).unwrap();
        let store = RedisSessionStore::new(conn.clone(), Duration::from_secs(60));
        let started = std::time::Instant::now();
        let error = store.get("x").await.unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(3), "bounded wait");
        assert!(error.contains("127.0.0.1:1"), "{error}");
        assert!(error.contains("retry"), "{error}");
        assert!(!error.contains("s3cret"), "{error}");
        let reason = conn.ready().await.unwrap_err();
        assert!(!reason.contains("s3cret"), "{reason}");
    }
}
