//! Console sessions: who signed in (the role, never the credential) and the session's
//! CSRF token. In memory with `state.backend: memory`; in Redis with
//! `state.backend: redis`, so any replica serves a signed-in browser (correctness never
//! depends on sticky routing).
//!
//! A session ends after [`IDLE`] unused or [`LIFETIME`] in all, and at most
//! [`MAX_SESSIONS`] exist: a new one makes room by ending the least recently used (in
//! memory) or the oldest (in Redis).
//!
//! Redis keys (under `state.key_prefix`): `console:session:ID` — JSON `{role, csrf,
//! created}` expiring [`IDLE`] after its last use; `console:sessions` — a sorted set
//! of ids by creation time (Unix seconds), what the bound counts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::state::conn::RedisConn;
use crate::state::conn::Unavailable;

/// The most console sessions at once.
pub(super) const MAX_SESSIONS: usize = 64;
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
        if table.len() >= MAX_SESSIONS
            && let Some(oldest) = table
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(id, _)| id.clone())
        {
            table.remove(&oldest);
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

async fn create_shared(
    conn: &RedisConn,
    id: &str,
    csrf: &str,
    role: &Role,
) -> Result<(), Unavailable> {
    let now = unix_now();
    let value = json!({"role": role.encode(), "csrf": csrf, "created": now}).to_string();
    let key = session_key(conn, id);
    let index = conn.key("console:sessions");
    let expired_before = now.saturating_sub(LIFETIME.as_secs());
    let count: usize = conn
        .run("create console session", |mut c| {
            let (key, index, id) = (key.clone(), index.clone(), id.to_owned());
            async move {
                let (_, _, _, count): ((), (), (), usize) = redis::pipe()
                    .cmd("SET")
                    .arg(&key)
                    .arg(&value)
                    .arg("EX")
                    .arg(IDLE.as_secs())
                    .cmd("ZADD")
                    .arg(&index)
                    .arg(now)
                    .arg(&id)
                    .cmd("ZREMRANGEBYSCORE")
                    .arg(&index)
                    .arg("-inf")
                    .arg(format!("({expired_before}"))
                    .cmd("ZCARD")
                    .arg(&index)
                    .query_async(&mut c)
                    .await?;
                Ok(count)
            }
        })
        .await?;
    if count <= MAX_SESSIONS {
        return Ok(());
    }
    // Over the bound: the oldest sessions make room.
    let surplus = count - MAX_SESSIONS;
    let oldest: Vec<String> = conn
        .run("bound console sessions", |mut c| {
            let index = index.clone();
            async move {
                redis::cmd("ZRANGE")
                    .arg(&index)
                    .arg(0)
                    .arg(surplus.saturating_sub(1))
                    .query_async(&mut c)
                    .await
            }
        })
        .await?;
    for old in oldest {
        remove_shared(conn, &old).await?;
    }
    Ok(())
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

    #[tokio::test]
    async fn memory_sessions_are_bounded() {
        let sessions = Sessions::new(None);
        let (first, _) = sessions.create(Role::Admin).await.unwrap();
        for _ in 0..MAX_SESSIONS + 5 {
            sessions
                .create(Role::Tenant("a".into(), None))
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
