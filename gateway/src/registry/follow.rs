//! Other replicas' registrations, with `state.backend: redis`: this process subscribes
//! to the store's announcements, reconciles with the stored set, and imports or
//! unmounts what another replica registered or removed.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{RegistrationStore, Registry};
use crate::state::registrations::redis::{
    Announcement, KEEPALIVE_EVERY, Op, RECONCILE_EVERY, RedisRegistrations,
};

/// Follows the registrations of every replica until `stop`: subscribes, reconciles,
/// applies announcements; reconnects with backoff (250 ms doubling to 5 s).
pub(super) async fn follow(
    registry: Weak<Registry>,
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
                if !run_subscription(&registry, &store, pubsub, &stop).await {
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
    registry: &Weak<Registry>,
    store: &RedisRegistrations,
    pubsub: redis::aio::PubSub,
    stop: &CancellationToken,
) -> bool {
    // Subscribed first, then read the whole set: nothing announced in between is lost.
    if !reconcile(registry, store).await {
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
                let Some(registry) = registry.upgrade() else { return false };
                apply(&registry, store, announcement.op, &announcement.name).await;
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
                    if !reconcile(registry, store).await {
                        return false;
                    }
                }
            }
        }
    }
}

/// Applies one announced change by reading the name's current registration (so a
/// late or repeated announcement can do no harm).
async fn apply(registry: &Arc<Registry>, store: &RedisRegistrations, op: Op, name: &str) {
    if registry.gateway.config().upstreams.contains_key(name) {
        return;
    }
    match store.get(name).await {
        Ok(Some(registration)) => {
            let current = registry.mounted(name);
            if op == Op::Refresh || current.as_ref() != Some(&registration.openapi) {
                tracing::info!(upstream = %name, "importing a registration made on another replica");
                super::import_registration(registry, registration).await;
            }
        }
        Ok(None) => {
            if registry.mounted(name).is_some() {
                tracing::info!(upstream = %name, "removing a registration removed on another replica");
                super::unmount_registration(registry, name).await;
            }
        }
        Err(error) => {
            tracing::warn!(upstream = %name, %error, "registration change not applied yet; it is retried on the next reconcile")
        }
    }
}

/// Makes this replica's registrations match the stored set. `false` when the
/// gateway is gone.
async fn reconcile(registry: &Weak<Registry>, store: &RedisRegistrations) -> bool {
    let Some(registry) = registry.upgrade() else {
        return false;
    };
    let stored = match store.load().await {
        Ok(stored) => stored,
        Err(error) => {
            tracing::debug!(%error, "registrations not reconciled");
            return true;
        }
    };
    let config = registry.gateway.config();
    for registration in &stored {
        if config.upstreams.contains_key(&registration.name) {
            continue;
        }
        if registry.mounted(&registration.name).as_ref() != Some(&registration.openapi) {
            tracing::info!(upstream = %registration.name, "importing a stored registration");
            super::import_registration(&registry, registration.clone()).await;
        }
    }
    for name in registry.mounted.names() {
        if !stored.iter().any(|r| r.name == name) {
            tracing::info!(upstream = %name, "removing a registration no longer stored");
            super::unmount_registration(&registry, &name).await;
        }
    }
    true
}
