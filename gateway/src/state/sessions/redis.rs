//! Sessions in Redis, shared by every replica.
//!
//! Keys (under `state.key_prefix`, `{id}` is a Redis Cluster hash tag so both keys of
//! a session live together):
//!
//! - `session:{ID}` — a hash: `tenant`, `subject` (`''` for none) and `created` (Unix
//!   ms);
//! - `session:{ID}:expanded` — a set: the names `tool_expand_tools` added;
//! - `sessions:live` and `sessions:tenant:TENANT` — sorted sets of session ids scored
//!   by their last use (Redis' clock, ms): what the limits count.
//!
//! Both session keys expire after `sessions.idle_ttl` without use; every read and
//! write refreshes both and the session's scores (a sliding TTL). Each operation is one
//! Lua script, so it is atomic: overlapping expansions from several replicas give the
//! union, and each name is reported as newly added by exactly one of them; creations
//! from several replicas never pass a limit together. A creation first drops ids idle
//! past the TTL from the sorted sets, then counts (the limits are
//! [`Limits`](crate::state::sessions::Limits); a full table refuses, never evicts).
//!
//! The scripts that refresh a session name its tenant's sorted set from the stored
//! tenant, inside the script: right for one Redis server (what [`RedisConn`] speaks
//! to), not for Redis Cluster.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;

use crate::state::conn::RedisConn;
use crate::state::sessions::{
    Expansion, FullBound, Limits, Refused, Session, SessionStore, StoreResult, new_session_id,
};

/// Redis' clock in ms, as `now` in the scripts below.
const NOW: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
";

/// Marks session `id` of `tenant` used now in both sorted sets.
const TOUCH: &str = r"
local function touch(prefix, ttl, id, tenant)
  local per_tenant = prefix .. 'sessions:tenant:' .. tenant
  redis.call('ZADD', prefix .. 'sessions:live', now, id)
  redis.call('ZADD', per_tenant, now, id)
  redis.call('PEXPIRE', per_tenant, ttl)
end
";

/// Creates a session under a fresh id unless a limit is reached:
/// `{'ok'}`, or `{'tenant' | 'table', ms until the first counted session idles out}`.
/// KEYS: hash, set. ARGV: prefix, ttl (ms), id, tenant, max sessions, max per tenant
/// (0: none), subject ('' for none).
const CREATE: &str = r"
local prefix, ttl, id, tenant = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local max_all, max_tenant = tonumber(ARGV[5]), tonumber(ARGV[6])
local live = prefix .. 'sessions:live'
local per_tenant = prefix .. 'sessions:tenant:' .. tenant
redis.call('ZREMRANGEBYSCORE', live, '-inf', now - ttl)
redis.call('ZREMRANGEBYSCORE', per_tenant, '-inf', now - ttl)
local function first_out(key)
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if oldest[2] then return tonumber(oldest[2]) + ttl - now end
  return ttl
end
if max_tenant > 0 and redis.call('ZCARD', per_tenant) >= max_tenant then
  return {'tenant', first_out(per_tenant)}
end
if redis.call('ZCARD', live) >= max_all then
  return {'table', first_out(live)}
end
redis.call('HSETNX', KEYS[1], 'tenant', tenant)
redis.call('HSETNX', KEYS[1], 'subject', ARGV[7])
redis.call('HSETNX', KEYS[1], 'created', now)
redis.call('PEXPIRE', KEYS[1], ttl)
touch(prefix, ttl, id, tenant)
return {'ok', 0}
";

/// Creates the session unless it exists; returns `{tenant, expanded members,
/// subject}`. Counted, never refused (see `SessionStore::get_or_create`).
/// KEYS: hash, set. ARGV: prefix, ttl (ms), id, tenant, subject ('' for none).
const GET_OR_CREATE: &str = r"
local prefix, ttl, id = ARGV[1], tonumber(ARGV[2]), ARGV[3]
redis.call('HSETNX', KEYS[1], 'tenant', ARGV[4])
redis.call('HSETNX', KEYS[1], 'subject', ARGV[5])
redis.call('HSETNX', KEYS[1], 'created', now)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
local tenant = redis.call('HGET', KEYS[1], 'tenant')
touch(prefix, ttl, id, tenant)
local subject = redis.call('HGET', KEYS[1], 'subject') or ''
return {tenant, redis.call('SMEMBERS', KEYS[2]), subject}
";

/// `{tenant, expanded members, subject ('' for none)}` or nil; refreshes the TTL.
/// KEYS: hash, set. ARGV: prefix, ttl (ms), id.
const GET: &str = r"
local prefix, ttl, id = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local tenant = redis.call('HGET', KEYS[1], 'tenant')
if not tenant then return false end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
touch(prefix, ttl, id, tenant)
local subject = redis.call('HGET', KEYS[1], 'subject') or ''
return {tenant, redis.call('SMEMBERS', KEYS[2]), subject}
";

/// Forgets a session and its places in the counts.
/// KEYS: hash, set. ARGV: prefix, id.
const DELETE: &str = r"
local prefix, id = ARGV[1], ARGV[2]
local tenant = redis.call('HGET', KEYS[1], 'tenant')
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', prefix .. 'sessions:live', id)
if tenant then redis.call('ZREM', prefix .. 'sessions:tenant:' .. tenant, id) end
return 1
";

/// Adds names to the set of a session owned by the tenant: `{added, already, all}`,
/// or nil when the session is missing or another tenant's. Duplicates in the request
/// count once.
/// KEYS: hash, set. ARGV: prefix, ttl (ms), id, tenant, names...
const EXPAND: &str = r"
local prefix, ttl, id = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local owner = redis.call('HGET', KEYS[1], 'tenant')
if (not owner) or owner ~= ARGV[4] then return false end
local added, already, seen = {}, {}, {}
for i = 5, #ARGV do
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
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
touch(prefix, ttl, id, owner)
return {added, already, redis.call('SMEMBERS', KEYS[2])}
";

pub struct RedisSessionStore {
    conn: Arc<RedisConn>,
    ttl_ms: u64,
    idle_ttl: Duration,
    limits: Limits,
    create: Script,
    get_or_create: Script,
    get: Script,
    expand: Script,
    delete: Script,
}

/// A script with the clock and the touch helper in front.
fn script(body: &str) -> Script {
    Script::new(&format!("{NOW}{TOUCH}{body}"))
}

impl RedisSessionStore {
    pub fn new(conn: Arc<RedisConn>, idle_ttl: Duration, limits: Limits) -> Self {
        Self {
            conn,
            ttl_ms: (idle_ttl.as_millis() as u64).max(1),
            idle_ttl,
            limits,
            create: script(CREATE),
            get_or_create: script(GET_OR_CREATE),
            get: script(GET),
            expand: script(EXPAND),
            delete: script(DELETE),
        }
    }

    fn keys(&self, id: &str) -> (String, String) {
        let hash = self.conn.key(&format!("session:{{{id}}}"));
        let set = format!("{hash}:expanded");
        (hash, set)
    }

    fn prefix(&self) -> String {
        self.conn.key("")
    }
}

/// A session as read: `subject` is stored as `''` for none (a record written before
/// subjects were stored has no field, read as none too).
fn session(id: &str, tenant: String, members: Vec<String>, subject: String) -> Session {
    Session {
        id: id.to_owned(),
        tenant,
        subject: (!subject.is_empty()).then_some(subject),
        expanded: std::sync::Arc::new(members.into_iter().collect()),
    }
}

#[async_trait]
impl SessionStore for RedisSessionStore {
    async fn create(&self, tenant: &str, subject: Option<&str>) -> Result<Session, Refused> {
        let id = new_session_id();
        let (hash, set) = self.keys(&id);
        let prefix = self.prefix();
        let id_arg = id.as_str();
        let (outcome, wait_ms): (String, i64) = self
            .conn
            .run("create session", |mut c| async move {
                self.create
                    .key(hash)
                    .key(set)
                    .arg(prefix)
                    .arg(self.ttl_ms)
                    .arg(id_arg)
                    .arg(tenant)
                    .arg(self.limits.max_sessions)
                    .arg(self.limits.max_per_tenant.unwrap_or(0))
                    .arg(subject.unwrap_or(""))
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        let wait = Duration::from_millis(wait_ms.max(0) as u64).min(self.idle_ttl);
        match outcome.as_str() {
            "ok" => Ok(session(
                &id,
                tenant.to_owned(),
                Vec::new(),
                subject.unwrap_or("").to_owned(),
            )),
            "tenant" => Err(Refused::full(FullBound::Tenant, self.limits, wait)),
            _ => Err(Refused::full(FullBound::Table, self.limits, wait)),
        }
    }

    async fn get_or_create(
        &self,
        id: &str,
        tenant: &str,
        subject: Option<&str>,
    ) -> StoreResult<Session> {
        let (hash, set) = self.keys(id);
        let prefix = self.prefix();
        let (owner, members, stored_subject): (String, Vec<String>, String) = self
            .conn
            .run("create session", |mut c| async move {
                self.get_or_create
                    .key(hash)
                    .key(set)
                    .arg(prefix)
                    .arg(self.ttl_ms)
                    .arg(id)
                    .arg(tenant)
                    .arg(subject.unwrap_or(""))
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(session(id, owner, members, stored_subject))
    }

    async fn get(&self, id: &str) -> StoreResult<Option<Session>> {
        let (hash, set) = self.keys(id);
        let prefix = self.prefix();
        let found: Option<(String, Vec<String>, String)> = self
            .conn
            .run("read session", |mut c| async move {
                self.get
                    .key(hash)
                    .key(set)
                    .arg(prefix)
                    .arg(self.ttl_ms)
                    .arg(id)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(found.map(|(owner, members, subject)| session(id, owner, members, subject)))
    }

    async fn expand(
        &self,
        id: &str,
        tenant: &str,
        names: &[String],
    ) -> StoreResult<Option<Expansion>> {
        let (hash, set) = self.keys(id);
        let prefix = self.prefix();
        let found: Option<(Vec<String>, Vec<String>, Vec<String>)> = self
            .conn
            .run("expand session", |mut c| async move {
                let mut invocation = self.expand.key(hash);
                invocation
                    .key(set)
                    .arg(prefix)
                    .arg(self.ttl_ms)
                    .arg(id)
                    .arg(tenant);
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
        let prefix = self.prefix();
        self.conn
            .run("delete session", |mut c| async move {
                self.delete
                    .key(hash)
                    .key(set)
                    .arg(prefix)
                    .arg(id)
                    .invoke_async::<i64>(&mut c)
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
        suite::run_all(&|ttl, limits| Box::pin(suite::redis_store(ttl, limits))).await;
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
        let a = Arc::new(RedisSessionStore::new(
            a,
            Duration::from_secs(60),
            suite::LIMITS,
        ));
        let b = Arc::new(RedisSessionStore::new(
            b,
            Duration::from_secs(60),
            suite::LIMITS,
        ));
        let session = a.create("acme", None).await.unwrap();
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
        let store = RedisSessionStore::new(conn.clone(), Duration::from_secs(60), suite::LIMITS);
        let started = std::time::Instant::now();
        let error = store.get("x").await.unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(3), "bounded wait");
        assert!(error.contains("127.0.0.1:1"), "{error}");
        assert!(error.contains("retry"), "{error}");
        assert!(!error.contains("s3cret"), "{error}");
        let reason = conn.ready().await.unwrap_err();
        assert!(!reason.to_string().contains("s3cret"), "{reason}");
    }
}
