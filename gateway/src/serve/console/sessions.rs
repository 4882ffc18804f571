//! Console sessions: who signed in (the role, never the credential) and the session's
//! CSRF token. In memory with `state.backend: memory`; in Redis with
//! `state.backend: redis`, so any replica serves a signed-in browser (correctness never
//! depends on sticky routing).
//!
//! A session ends after [`IDLE`] unused or [`LIFETIME`] in all. One principal (the
//! admin, a tenant's key, one user's key: a [`Role`]) keeps at most
//! [`MAX_SESSIONS_PER_PRINCIPAL`]: its next sign-in ends its own least recently used
//! (in memory) or oldest (in Redis) session, so signing in over and over never signs
//! anybody else out. At most [`MAX_SESSIONS`] exist in all: past that a new one ends
//! the least recently used, or oldest, of all — which takes that many sign-ins of
//! several principals.
//!
//! Redis keys (under `state.key_prefix`): `console:session:ID` — JSON `{role, csrf,
//! created}` expiring [`IDLE`] after its last use; `console:sessions` — a sorted set
//! of ids by creation time (Unix µs of Redis' clock), what the global bound counts;
//! `console:principal:HASH` — the same for one principal (`HASH`: of its role), what
//! its own bound counts. One Lua script creates a session and applies both bounds,
//! so replicas signing the same principal in at once cannot pass them.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::state::conn::RedisConn;
use crate::state::conn::Unavailable;

/// The most console sessions at once.
pub(super) const MAX_SESSIONS: usize = 64;
/// The most console sessions one principal keeps at once (a person with a few
/// browsers and devices; a script signing in in a loop only ends its own).
pub(super) const MAX_SESSIONS_PER_PRINCIPAL: usize = 8;
/// A session unused this long is over.
pub(super) const IDLE: Duration = Duration::from_secs(30 * 60);
/// No session lasts longer than this.
pub(super) const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Who a session is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Role {
    Admin,
    /// A tenant, by name, and the user its API key named (a per-user key): resolved
    /// against the running policy on every request, so a tenant removed by a reload
    /// loses its console sessions.
    Tenant(String, Option<String>),
}

impl Role {
    fn encode(&self) -> Value {
        match self {
            Role::Admin => json!("admin"),
            Role::Tenant(name, None) => json!({"tenant": name}),
            Role::Tenant(name, Some(subject)) => json!({"tenant": name, "subject": subject}),
        }
    }

    /// A short name of the principal for store keys: a hash of its role (tenant
    /// names and subjects never appear in a key as they are).
    fn principal_key(&self) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(self.encode().to_string().as_bytes());
        digest[..12].iter().map(|b| format!("{b:02x}")).collect()
    }

    fn decode(value: &Value) -> Option<Role> {
        match value {
            Value::String(s) if s == "admin" => Some(Role::Admin),
            other => other["tenant"]
                .as_str()
                .map(|t| Role::Tenant(t.to_owned(), other["subject"].as_str().map(str::to_owned))),
        }
    }
}

struct Session {
    role: Role,
    csrf: String,
    created: Instant,
    used: Instant,
}

fn alive(session: &Session, now: Instant) -> bool {
    now.duration_since(session.used) < IDLE && now.duration_since(session.created) < LIFETIME
}

/// The console's sessions.
pub(super) struct Sessions {
    memory: Mutex<HashMap<String, Session>>,
    /// The shared store, with `state.backend: redis`.
    shared: Option<Arc<RedisConn>>,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Sessions {
    pub(super) fn new(shared: Option<Arc<RedisConn>>) -> Sessions {
        Sessions {
            memory: Mutex::new(HashMap::new()),
            shared,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new session for `role`: its id and CSRF token.
    pub(super) async fn create(&self, role: Role) -> Result<(String, String), Unavailable> {
        let id = crate::state::sessions::new_session_id();
        let csrf = crate::state::sessions::new_session_id();
        match &self.shared {
            None => self.create_in_memory(&id, &csrf, role),
            Some(conn) => create_shared(conn, &id, &csrf, &role).await?,
        }
        Ok((id, csrf))
    }

    fn create_in_memory(&self, id: &str, csrf: &str, role: Role) {
        let now = Instant::now();
        let mut table = self.lock();
        table.retain(|_, s| alive(s, now));
        // The principal's own sessions make room first; then, if still full, the
        // least recently used of all. Each pass ends one session: bounded by the table.
        for _ in 0..=table.len() {
            let mine = table.values().filter(|s| s.role == role).count();
            let full = mine >= MAX_SESSIONS_PER_PRINCIPAL || table.len() >= MAX_SESSIONS;
            if !full {
                break;
            }
            let oldest = table
                .iter()
                .filter(|(_, s)| mine < MAX_SESSIONS_PER_PRINCIPAL || s.role == role)
                .min_by_key(|(_, s)| s.used)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(oldest) => table.remove(&oldest),
                None => break,
            };
        }
        table.insert(
            id.to_owned(),
            Session {
                role,
                csrf: csrf.to_owned(),
                created: now,
                used: now,
            },
        );
    }

    /// The live session `id` (its idle timer restarted): role and CSRF token.
    pub(super) async fn get(&self, id: &str) -> Result<Option<(Role, String)>, Unavailable> {
        let Some(conn) = &self.shared else {
            return Ok(self.get_in_memory(id));
        };
        get_shared(conn, id).await
    }

    fn get_in_memory(&self, id: &str) -> Option<(Role, String)> {
        let now = Instant::now();
        let mut table = self.lock();
        let live = table.get(id).is_some_and(|s| alive(s, now));
        if !live {
            table.remove(id);
            return None;
        }
        let session = table.get_mut(id)?;
        session.used = now;
        Some((session.role.clone(), session.csrf.clone()))
    }

    pub(super) async fn remove(&self, id: &str) -> Result<(), Unavailable> {
        match &self.shared {
            None => {
                self.lock().remove(id);
                Ok(())
            }
            Some(conn) => remove_shared(conn, id).await,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

fn session_key(conn: &RedisConn, id: &str) -> String {
    conn.key(&format!("console:session:{id}"))
}

/// Creates a session and applies both bounds, atomically. ARGV: prefix, id, the
/// session's JSON, idle (s), principal, its bound, the global bound, lifetime (s).
/// Sessions are scored by creation in microseconds of Redis' clock: one clock for
/// every replica, and fine enough that sign-ins in a loop keep their order.
const CREATE_SESSION: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local expired_before = now - tonumber(ARGV[8]) * 1000000
local prefix, id = ARGV[1], ARGV[2]
local function key(sid) return prefix .. 'console:session:' .. sid end
local index = prefix .. 'console:sessions'
local mine = prefix .. 'console:principal:' .. ARGV[5]
local per, global = tonumber(ARGV[6]), tonumber(ARGV[7])
redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. expired_before)
redis.call('ZREMRANGEBYSCORE', mine, '-inf', '(' .. expired_before)
-- Sessions that ended unused (their key expired) no longer count for the principal.
for _, sid in ipairs(redis.call('ZRANGE', mine, 0, -1)) do
  if redis.call('EXISTS', key(sid)) == 0 then
    redis.call('ZREM', mine, sid)
    redis.call('ZREM', index, sid)
  end
end
local n = redis.call('ZCARD', mine)
if n >= per then
  for _, sid in ipairs(redis.call('ZRANGE', mine, 0, n - per)) do
    redis.call('DEL', key(sid))
    redis.call('ZREM', index, sid)
    redis.call('ZREM', mine, sid)
  end
end
redis.call('SET', key(id), ARGV[3], 'EX', tonumber(ARGV[4]))
redis.call('ZADD', index, now, id)
redis.call('ZADD', mine, now, id)
redis.call('EXPIRE', mine, tonumber(ARGV[8]))
local total = redis.call('ZCARD', index)
if total > global then
  for _, sid in ipairs(redis.call('ZRANGE', index, 0, total - global - 1)) do
    redis.call('DEL', key(sid))
    redis.call('ZREM', index, sid)
  end
end
return total
";

async fn create_shared(
    conn: &RedisConn,
    id: &str,
    csrf: &str,
    role: &Role,
) -> Result<(), Unavailable> {
    let now = unix_now();
    let value = json!({"role": role.encode(), "csrf": csrf, "created": now}).to_string();
    let args = [
        conn.key(""),
        id.to_owned(),
        value,
        IDLE.as_secs().to_string(),
        role.principal_key(),
        MAX_SESSIONS_PER_PRINCIPAL.to_string(),
        MAX_SESSIONS.to_string(),
        LIFETIME.as_secs().to_string(),
    ];
    static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(CREATE_SESSION));
    conn.run("create console session", |mut c| async move {
        let mut invocation = SCRIPT.prepare_invoke();
        for arg in &args {
            invocation.arg(arg);
        }
        invocation.invoke_async::<i64>(&mut c).await.map(|_| ())
    })
    .await
}

async fn get_shared(conn: &RedisConn, id: &str) -> Result<Option<(Role, String)>, Unavailable> {
    let key = session_key(conn, id);
    let stored: Option<String> = conn
        .run("read console session", |mut c| {
            let key = key.clone();
            async move {
                let (value, _): (Option<String>, ()) = redis::pipe()
                    .cmd("GET")
                    .arg(&key)
                    .cmd("EXPIRE")
                    .arg(&key)
                    .arg(IDLE.as_secs())
                    .query_async(&mut c)
                    .await?;
                Ok(value)
            }
        })
        .await?;
    let Some(stored) = stored.and_then(|s| serde_json::from_str::<Value>(&s).ok()) else {
        return Ok(None);
    };
    let created = stored["created"].as_u64().unwrap_or(0);
    let (Some(role), Some(csrf)) = (Role::decode(&stored["role"]), stored["csrf"].as_str()) else {
        return Ok(None);
    };
    if unix_now().saturating_sub(created) >= LIFETIME.as_secs() {
        remove_shared(conn, id).await?;
        return Ok(None);
    }
    Ok(Some((role, csrf.to_owned())))
}

async fn remove_shared(conn: &RedisConn, id: &str) -> Result<(), Unavailable> {
    let key = session_key(conn, id);
    let index = conn.key("console:sessions");
    conn.run("end console session", |mut c| {
        let (key, index, id) = (key.clone(), index.clone(), id.to_owned());
        async move {
            redis::pipe()
                .cmd("DEL")
                .arg(&key)
                .ignore()
                .cmd("ZREM")
                .arg(&index)
                .arg(&id)
                .ignore()
                .query_async::<()>(&mut c)
                .await
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tenant's key signing in 70 times (a script in a loop) ends only its own
    /// sessions: the admin stays signed in, the tenant keeps its latest
    /// [`MAX_SESSIONS_PER_PRINCIPAL`], and another user of the same tenant keeps theirs.
    async fn one_principal_cannot_sign_others_out(sessions: &Sessions) {
        let (admin, admin_csrf) = sessions.create(Role::Admin).await.unwrap();
        let alice = Role::Tenant("acme".into(), Some("alice".into()));
        let (alices, _) = sessions.create(alice.clone()).await.unwrap();
        let tenant = Role::Tenant("acme".into(), None);
        let mut ids = Vec::new();
        for _ in 0..70 {
            ids.push(sessions.create(tenant.clone()).await.unwrap().0);
        }
        assert_eq!(
            sessions.get(&admin).await.unwrap(),
            Some((Role::Admin, admin_csrf)),
            "the admin is still signed in"
        );
        assert!(sessions.get(&alices).await.unwrap().is_some());
        let mut live = 0;
        for id in &ids {
            live += usize::from(sessions.get(id).await.unwrap().is_some());
        }
        assert_eq!(
            live, MAX_SESSIONS_PER_PRINCIPAL,
            "the tenant keeps its own few"
        );
        for id in &ids[ids.len() - MAX_SESSIONS_PER_PRINCIPAL..] {
            assert!(sessions.get(id).await.unwrap().is_some(), "its latest");
        }
    }

    #[tokio::test]
    async fn memory_sessions_are_bounded_per_principal() {
        one_principal_cannot_sign_others_out(&Sessions::new(None)).await;
    }

    #[tokio::test]
    async fn redis_sessions_are_bounded_per_principal() {
        let state = crate::state::suite::test_state(&crate::state::suite::redis_url());
        let Some(conn) = crate::state::suite::redis_conn(&state).await else {
            return;
        };
        let sessions = Sessions::new(Some(conn.clone()));
        one_principal_cannot_sign_others_out(&sessions).await;
        // Many principals still meet the global bound.
        for n in 0..MAX_SESSIONS + 10 {
            sessions
                .create(Role::Tenant("t".into(), Some(format!("user{n}"))))
                .await
                .unwrap();
        }
        let index = conn.key("console:sessions");
        let count: usize = conn
            .run("count", |mut c| async move {
                redis::cmd("ZCARD").arg(index).query_async(&mut c).await
            })
            .await
            .unwrap();
        assert_eq!(count, MAX_SESSIONS);
    }

    #[tokio::test]
    async fn memory_sessions_are_bounded() {
        let sessions = Sessions::new(None);
        let (first, _) = sessions.create(Role::Admin).await.unwrap();
        // As many principals as sessions (one user each): the global bound holds.
        for n in 0..MAX_SESSIONS + 5 {
            sessions
                .create(Role::Tenant("a".into(), Some(format!("user{n}"))))
                .await
                .unwrap();
        }
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert!(
            sessions.get(&first).await.unwrap().is_none(),
            "the oldest made room"
        );
        let (id, csrf) = sessions.create(Role::Admin).await.unwrap();
        assert_eq!(sessions.get(&id).await.unwrap(), Some((Role::Admin, csrf)));
        sessions.remove(&id).await.unwrap();
        assert!(sessions.get(&id).await.unwrap().is_none());
        for role in [
            Role::Admin,
            Role::Tenant("t".into(), None),
            Role::Tenant("t".into(), Some("alice".into())),
        ] {
            assert_eq!(Role::decode(&role.encode()), Some(role));
        }
    }
}
