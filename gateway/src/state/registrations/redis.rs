//! Runtime registrations in Redis, followed by every replica.
//!
//! Keys: `registrations` — a hash of upstream name -> the registration as JSON (it can
//! hold API credentials: protect Redis like the gateway's data directory);
//! `registrations:events` — a pub/sub channel announcing `put`, `remove` and
//! `refresh` as `{op, name, origin}`.
//!
//! Every replica subscribes (`crate::registry`'s follower): an announcement from another replica makes
//! it import (or unmount) that upstream within moments. On every (re)connect, and
//! every 30 s, it reconciles with the whole hash, so a missed announcement (Redis
//! restarted, a network blip) heals by itself. The subscriber reconnects with backoff.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{Registration, RegistrationStore, StoreError};
use crate::state::conn::RedisConn;

/// How often the follower re-reads the whole set and checks its subscription.
pub(crate) const RECONCILE_EVERY: Duration = Duration::from_secs(30);
pub(crate) const KEEPALIVE_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Announcement {
    pub(crate) op: Op,
    pub(crate) name: String,
    /// The replica that made the change (it has applied it already).
    pub(crate) origin: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
    Put,
    Remove,
    Refresh,
}

pub struct RedisRegistrations {
    pub(crate) conn: Arc<RedisConn>,
    /// This process, in announcements (random per start).
    pub(crate) origin: String,
    hash: String,
    pub(crate) channel: String,
}

impl RedisRegistrations {
    pub fn new(conn: Arc<RedisConn>) -> Self {
        let hash = conn.key("registrations");
        let channel = conn.key("registrations:events");
        Self {
            conn,
            origin: crate::state::sessions::new_session_id(),
            hash,
            channel,
        }
    }

    async fn announce(&self, op: Op, name: &str) -> Result<(), StoreError> {
        let message = serde_json::to_string(&Announcement {
            op,
            name: name.to_owned(),
            origin: self.origin.clone(),
        })
        .map_err(|e| StoreError::Io(e.to_string()))?;
        let channel = self.channel.clone();
        self.conn
            .run("announce registration", |mut c| async move {
                redis::cmd("PUBLISH")
                    .arg(&channel)
                    .arg(&message)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map(drop)
            .map_err(StoreError::from)
    }

    /// One registration, if stored.
    pub(crate) async fn get(&self, name: &str) -> Result<Option<Registration>, StoreError> {
        let hash = self.hash.clone();
        let json: Option<String> = self
            .conn
            .run("read registration", |mut c| async move {
                redis::cmd("HGET")
                    .arg(&hash)
                    .arg(name)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        json.map(|json| {
            serde_json::from_str(&json).map_err(|e| {
                StoreError::Corrupt(format!("stored registration '{name}' is not valid: {e}"))
            })
        })
        .transpose()
    }
}

#[async_trait]
impl RegistrationStore for RedisRegistrations {
    async fn load(&self) -> Result<Vec<Registration>, StoreError> {
        let hash = self.hash.clone();
        let all: Vec<(String, String)> = self
            .conn
            .run("read registrations", |mut c| async move {
                redis::cmd("HGETALL").arg(&hash).query_async(&mut c).await
            })
            .await?;
        let mut registrations = Vec::new();
        for (name, json) in all {
            match serde_json::from_str::<Registration>(&json) {
                Ok(registration) => registrations.push(registration),
                Err(error) => {
                    tracing::error!(upstream = %name, %error, "stored registration is not valid; skipped")
                }
            }
        }
        registrations.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(registrations)
    }

    async fn put(&self, registration: &Registration) -> Result<(), StoreError> {
        let json =
            serde_json::to_string(registration).map_err(|e| StoreError::Io(e.to_string()))?;
        let hash = self.hash.clone();
        let name = registration.name.clone();
        self.conn
            .run("store registration", |mut c| async move {
                redis::cmd("HSET")
                    .arg(&hash)
                    .arg(&name)
                    .arg(&json)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await?;
        self.announce(Op::Put, &registration.name).await
    }

    async fn remove(&self, name: &str) -> Result<bool, StoreError> {
        let hash = self.hash.clone();
        let removed: i64 = self
            .conn
            .run("remove registration", |mut c| async move {
                redis::cmd("HDEL")
                    .arg(&hash)
                    .arg(name)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        self.announce(Op::Remove, name).await?;
        Ok(removed > 0)
    }

    async fn announce_refresh(&self, name: &str) -> Result<(), StoreError> {
        self.announce(Op::Refresh, name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::suite;
    use futures::StreamExt;
    use toolgate_adapters::openapi::OpenApiConfig;

    #[tokio::test]
    async fn registrations_are_stored_and_announced() {
        let state = suite::test_state(&suite::redis_url());
        let Some(conn) = suite::redis_conn(&state).await else {
            return;
        };
        let store = RedisRegistrations::new(conn.clone());
        let mut listener = conn.pubsub().await.unwrap();
        listener.subscribe(&store.channel).await.unwrap();
        let mut messages = listener.into_on_message();
        assert!(store.load().await.unwrap().is_empty());
        let pets = Registration {
            name: "pets".into(),
            openapi: OpenApiConfig::from_url("https://example.com/openapi.json"),
        };
        store.put(&pets).await.unwrap();
        assert_eq!(store.load().await.unwrap(), vec![pets.clone()]);
        assert_eq!(store.get("pets").await.unwrap(), Some(pets.clone()));
        assert!(store.remove("pets").await.unwrap());
        assert!(!store.remove("pets").await.unwrap());
        assert!(store.load().await.unwrap().is_empty());
        let mut ops = Vec::new();
        for _ in 0..3 {
            let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
                .await
                .expect("announcement in time")
                .expect("subscription open");
            let announcement: Announcement =
                serde_json::from_str(&message.get_payload::<String>().unwrap()).unwrap();
            assert_eq!(announcement.name, "pets");
            assert_eq!(announcement.origin, store.origin);
            ops.push(announcement.op);
        }
        assert_eq!(ops, [Op::Put, Op::Remove, Op::Remove]);
    }
}
