//! State shared by every MCP session of one gateway: the typed stand-ins of the current
//! catalog's tools (made once per snapshot, so `tools/list` only filters and clones),
//! and the live legacy sessions, told when the catalog changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CustomNotification, ServerNotification, Tool};
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use crate::catalog::Catalog;
use crate::gateway::Gateway;
use crate::protocol_tools;

/// The typed stand-ins of one catalog snapshot's tools: each is only the tool's name
/// (and a minimal input schema). rmcp serializes them; [`crate::serve::fidelity`]
/// swaps each for the catalog's pre-serialized raw definition on the way out, so the
/// full definitions are never serialized, parsed or copied per request by rmcp.
pub struct TypedCatalog {
    source: Arc<Catalog>,
    pub by_name: HashMap<String, Tool>,
}

/// Shared by every MCP session of one gateway.
pub struct McpShared {
    pub gateway: Arc<Gateway>,
    typed: Mutex<Option<Arc<TypedCatalog>>>,
    /// The protocol tools (`tool_expand_tools`, `tool_search`, `tool_invoke`).
    pub protocol_tools: Vec<Tool>,
    /// Live legacy sessions, told about catalog changes.
    pub peers: Mutex<Vec<Peer<RoleServer>>>,
    /// The length of `peers` at which the next sweep of ended sessions runs.
    peers_sweep_at: Mutex<usize>,
    /// The session whose call on the passthrough upstream finished last, and when:
    /// where that upstream's late notifications go (see [`relay_late_notifications`]).
    last_passthrough_caller: Mutex<Option<(Peer<RoleServer>, Instant)>>,
}

/// How long after a passthrough call a stray notification is still taken to be its.
const LATE_NOTIFICATION_WINDOW: Duration = Duration::from_secs(2);

impl McpShared {
    pub fn new(gateway: Arc<Gateway>) -> Arc<Self> {
        let protocol_tools = protocol_tools::definitions()
            .into_iter()
            .filter_map(|d| serde_json::from_value::<Tool>(Value::Object(d)).ok())
            .collect();
        let shared = Arc::new(Self {
            gateway,
            typed: Mutex::new(None),
            protocol_tools,
            peers: Mutex::new(Vec::new()),
            peers_sweep_at: Mutex::new(64),
            last_passthrough_caller: Mutex::new(None),
        });
        tokio::spawn(announce_changes(Arc::downgrade(&shared)));
        if let Some(notifications) = shared
            .gateway
            .passthrough()
            .and_then(|m| m.upstream.notifications())
        {
            tokio::spawn(relay_late_notifications(
                Arc::downgrade(&shared),
                notifications,
            ));
        }
        shared
    }

    /// Notes that `peer` is calling (or just finished calling) `upstream`.
    pub fn note_passthrough_caller(&self, upstream: &str, peer: &Peer<RoleServer>) {
        let is_passthrough = self
            .gateway
            .passthrough()
            .is_some_and(|m| m.upstream.name() == upstream);
        if is_passthrough {
            *self
                .last_passthrough_caller
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some((peer.clone(), Instant::now()));
        }
    }

    /// The typed definitions of `catalog` (cached per snapshot).
    pub fn typed(&self, catalog: &Arc<Catalog>) -> Arc<TypedCatalog> {
        let mut cached = self.typed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(typed) = cached.as_ref()
            && Arc::ptr_eq(&typed.source, catalog)
        {
            return typed.clone();
        }
        let by_name = catalog
            .entries()
            .iter()
            .filter_map(|entry| {
                // Only definitions rmcp accepts as MCP are listed.
                match serde_json::from_value::<Tool>(Value::Object(entry.definition.clone())) {
                    Ok(_) => Some((entry.name.clone(), stand_in(&entry.name)?)),
                    Err(error) => {
                        tracing::warn!(tool = %entry.name, %error, "tool definition is not valid MCP; left out of tools/list");
                        None
                    }
                }
            })
            .collect();
        let typed = Arc::new(TypedCatalog {
            source: catalog.clone(),
            by_name,
        });
        *cached = Some(typed.clone());
        typed
    }
}

impl McpShared {
    /// Remembers a session's peer for `list_changed`. Peers of ended sessions are
    /// dropped whenever the list has doubled since the last sweep, so the list stays
    /// proportional to the live sessions without a sweep per session.
    pub fn add_peer(&self, peer: Peer<RoleServer>) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let mut sweep_at = self
            .peers_sweep_at
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if peers.len() >= *sweep_at {
            peers.retain(|p| !p.is_transport_closed());
            *sweep_at = (peers.len() * 2).max(64);
        }
        peers.push(peer);
    }
}

/// A tool reduced to its name: what rmcp serializes before the raw definition is
/// spliced in.
fn stand_in(name: &str) -> Option<Tool> {
    serde_json::from_value(serde_json::json!({"name": name, "inputSchema": {"type": "object"}}))
        .ok()
}

/// Sends `notifications/tools/list_changed` to every live session when the catalog
/// changes; sessions whose transport is gone are dropped from the list.
async fn announce_changes(shared: std::sync::Weak<McpShared>) {
    let Some(mut changes) = shared.upgrade().map(|s| s.gateway.catalog_changes()) else {
        return;
    };
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let peers: Vec<Peer<RoleServer>> = shared
            .peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut dead = Vec::new();
        for (index, peer) in peers.iter().enumerate() {
            let sent =
                tokio::time::timeout(Duration::from_secs(5), peer.notify_tool_list_changed()).await;
            if !matches!(sent, Ok(Ok(()))) {
                dead.push(index);
            }
        }
        if !dead.is_empty() {
            let mut live = shared.peers.lock().unwrap_or_else(|e| e.into_inner());
            // Only remove peers that are still the ones we tried (the list may have grown).
            let mut index = 0;
            live.retain(|_| {
                let keep = !dead.contains(&index);
                index += 1;
                keep
            });
        }
    }
}

/// Relays the passthrough upstream's log notifications that arrive after their call
/// finished. An upstream may send them on its own stream (not the call's), so the last
/// one can reach the gateway just after the result; it goes to the session whose call
/// finished last, when that was within a short window, and is dropped otherwise (never
/// broadcast: other sessions may belong to other tenants).
async fn relay_late_notifications(
    shared: std::sync::Weak<McpShared>,
    mut notifications: tokio::sync::broadcast::Receiver<(String, Value)>,
) {
    loop {
        let (method, params) = match notifications.recv().await {
            Ok(message) => message,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        if method != "notifications/message" {
            continue;
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let target = shared
            .last_passthrough_caller
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(_, at)| at.elapsed() <= LATE_NOTIFICATION_WINDOW)
            .map(|(peer, _)| peer.clone());
        match target {
            Some(peer) => {
                let notification = ServerNotification::CustomNotification(CustomNotification::new(
                    method,
                    Some(params),
                ));
                let _ = tokio::time::timeout(
                    Duration::from_secs(5),
                    peer.send_notification(notification),
                )
                .await;
            }
            None => tracing::debug!("upstream log notification outside any call dropped"),
        }
    }
}
