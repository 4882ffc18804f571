//! Runtime registrations in Redis, followed by every replica.
//!
//! Keys: `registrations` — a hash of upstream name -> the registration as JSON (it can
//! hold API credentials: protect Redis like the gateway's data directory);
//! `registrations:events` — a pub/sub channel announcing `put`, `remove` and
//! `refresh` as `{op, name, origin}`.
//!
//! Every replica subscribes ([`follow`]): an announcement from another replica makes
//! it import (or unmount) that upstream within moments. On every (re)connect, and
//! every 30 s, it reconciles with the whole hash, so a missed announcement (Redis
//! restarted, a network blip) heals by itself. The subscriber reconnects with backoff.

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::conn::RedisConn;
use crate::gateway::Gateway;
use crate::registry::{self, Registration, RegistrationStore};

/// How often the follower re-reads the whole set and checks its subscription.
const RECONCILE_EVERY: Duration = Duration::from_secs(30);
const KEEPALIVE_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Serialize, Deserialize)]
struct Announcement {
    op: Op,
    name: String,
    /// The replica that made the change (it has applied it already).
    origin: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Op {
    Put,
    Remove,
    Refresh,
}

pub struct RedisRegistrations {
    conn: Arc<RedisConn>,
    /// This process, in announcements (random per start).
    origin: String,
    hash: String,
    channel: String,
}

impl RedisRegistrations {
    pub fn new(conn: Arc<RedisConn>) -> Self {
        let hash = conn.key("registrations");
        let channel = conn.key("registrations:events");
        Self {
            conn,
            origin: crate::session::new_session_id(),
            hash,
            channel,
        }
    }

    async fn announce(&self, op: Op, name: &str) -> Result<(), String> {
        let message = serde_json::to_string(&Announcement {
            op,
            name: name.to_owned(),
            origin: self.origin.clone(),
        })
        .map_err(|e| e.to_string())?;
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
            .map_err(|e| e.0)
    }

    /// One registration, if stored.
    async fn get(&self, name: &str) -> Result<Option<Registration>, String> {
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
            .await
            .map_err(|e| e.0)?;
        json.map(|json| {
            serde_json::from_str(&json)
                .map_err(|e| format!("stored registration '{name}' is not valid: {e}"))
        })
        .transpose()
    }
}

#[async_trait]
impl RegistrationStore for RedisRegistrations {
    async fn load(&self) -> Result<Vec<Registration>, String> {
        let hash = self.hash.clone();
        let all: Vec<(String, String)> = self
            .conn
            .run("read registrations", |mut c| async move {
                redis::cmd("HGETALL").arg(&hash).query_async(&mut c).await
            })
            .await
            .map_err(|e| e.0)?;
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

    async fn put(&self, registration: &Registration) -> Result<(), String> {
        let json = serde_json::to_string(registration).map_err(|e| e.to_string())?;
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
            .await
            .map_err(|e| e.0)?;
        self.announce(Op::Put, &registration.name).await
    }

    async fn remove(&self, name: &str) -> Result<bool, String> {
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
            .await
            .map_err(|e| e.0)?;
        self.announce(Op::Remove, name).await?;
        Ok(removed > 0)
    }

    async fn announce_refresh(&self, name: &str) -> Result<(), String> {
        self.announce(Op::Refresh, name).await
    }
}

/// Follows the registrations of every replica until `stop`: subscribes, reconciles,
/// applies announcements; reconnects with backoff (250 ms doubling to 5 s).
pub async fn follow(
    gateway: Weak<Gateway>,
    store: Arc<RedisRegistrations>,
    stop: CancellationToken,
) {
    let mut backoff = Duration::from_millis(250);
    loop {
        let connected = tokio::select! {
            _ = stop.cancelled() => return,
            connected = subscribe(&store) => connected,
        };
        match connected {
            Ok(pubsub) => {
                backoff = Duration::from_millis(250);
                tracing::debug!(redis = %store.conn.address(), "following registrations");
                if !run_subscription(&gateway, &store, pubsub, &stop).await {
                    return;
                }
                tracing::debug!("registration subscription lost; reconnecting");
            }
            Err(error) => tracing::debug!(%error, "registration subscription not possible yet"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

async fn subscribe(store: &RedisRegistrations) -> Result<redis::aio::PubSub, String> {
    let mut pubsub = store.conn.pubsub().await.map_err(|e| e.0)?;
    match tokio::time::timeout(
        store.conn.command_timeout(),
        pubsub.subscribe(&store.channel),
    )
    .await
    {
        Ok(Ok(())) => Ok(pubsub),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("SUBSCRIBE got no answer in time".into()),
    }
}

/// Serves one subscription until it breaks (`true`: reconnect) or the gateway stops
/// (`false`).
async fn run_subscription(
    gateway: &Weak<Gateway>,
    store: &RedisRegistrations,
    pubsub: redis::aio::PubSub,
    stop: &CancellationToken,
) -> bool {
    // Subscribed first, then read the whole set: nothing announced in between is lost.
    if !reconcile(gateway, store).await {
        return false;
    }
    let (mut sink, mut messages) = pubsub.split();
    let mut keepalive = tokio::time::interval(KEEPALIVE_EVERY);
    keepalive.tick().await;
    let mut last_reconcile = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return false,
            message = messages.next() => {
                let Some(message) = message else { return true };
                let Ok(payload) = message.get_payload::<String>() else { continue };
                let announcement: Announcement = match serde_json::from_str(&payload) {
                    Ok(a) => a,
                    Err(error) => {
                        tracing::warn!(%error, "unreadable registration announcement ignored");
                        continue;
                    }
                };
                if announcement.origin == store.origin {
                    continue;
                }
                let Some(gateway) = gateway.upgrade() else { return false };
                apply(&gateway, store, announcement.op, &announcement.name).await;
            }
            _ = keepalive.tick() => {
                let alive = tokio::time::timeout(
                    store.conn.command_timeout(),
                    sink.ping::<redis::Value>(),
                )
                .await;
                if !matches!(alive, Ok(Ok(_))) {
                    return true;
                }
                if last_reconcile.elapsed() >= RECONCILE_EVERY {
                    last_reconcile = tokio::time::Instant::now();
                    if !reconcile(gateway, store).await {
                        return false;
                    }
                }
            }
        }
    }
}

/// Applies one announced change by reading the name's current registration (so a
/// late or repeated announcement can do no harm).
async fn apply(gateway: &Arc<Gateway>, store: &RedisRegistrations, op: Op, name: &str) {
    if gateway.config().upstreams.contains_key(name) {
        return;
    }
    match store.get(name).await {
        Ok(Some(registration)) => {
            let current = gateway.registrations.get(name);
            if op == Op::Refresh || current.as_ref() != Some(&registration.openapi) {
                tracing::info!(upstream = %name, "importing a registration made on another replica");
                registry::import_registration(gateway, registration).await;
            }
        }
        Ok(None) => {
            if gateway.registrations.get(name).is_some() {
                tracing::info!(upstream = %name, "removing a registration removed on another replica");
                registry::unmount_registration(gateway, name).await;
            }
        }
        Err(error) => {
            tracing::warn!(upstream = %name, %error, "registration change not applied yet; it is retried on the next reconcile")
        }
    }
}

/// Makes this replica's registrations match the stored set. `false` when the
/// gateway is gone.
async fn reconcile(gateway: &Weak<Gateway>, store: &RedisRegistrations) -> bool {
    let Some(gateway) = gateway.upgrade() else {
        return false;
    };
    let stored = match store.load().await {
        Ok(stored) => stored,
        Err(error) => {
            tracing::debug!(%error, "registrations not reconciled");
            return true;
        }
    };
    let config = gateway.config();
    for registration in &stored {
        if config.upstreams.contains_key(&registration.name) {
            continue;
        }
        if gateway.registrations.get(&registration.name).as_ref() != Some(&registration.openapi) {
            tracing::info!(upstream = %registration.name, "importing a stored registration");
            registry::import_registration(&gateway, registration.clone()).await;
        }
    }
    for name in gateway.registrations.names() {
        if !stored.iter().any(|r| r.name == name) {
            tracing::info!(upstream = %name, "removing a registration no longer stored");
            registry::unmount_registration(&gateway, &name).await;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::suite;
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
