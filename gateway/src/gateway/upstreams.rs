//! The upstream lifecycle: mounting, unmounting, applying a new config, and the tasks
//! that keep each mounted upstream's health and tool list current.
//!
//! The map of upstreams is replaced whole (copy on write), so a call never holds a lock
//! while it runs. Every change to it, and every config swap that decides which
//! upstreams are wanted, happens under one lock ([`Gateway::lifecycle`]): an import that
//! finishes while a reload runs sees either the old config or the new one, never half.

use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::{Connection, DynUpstream};

use super::{Gateway, Startup, factory};
use crate::config::{Config, Kind, Namespace, UpstreamChanges};
use crate::health::{self, Tracker};
use crate::policy::Policy;

/// One mounted upstream with the gateway's per-upstream settings. A clone is the same
/// running upstream (its connection, health, call slots and stop token are shared).
#[derive(Clone)]
pub struct Mounted {
    pub upstream: DynUpstream,
    pub kind: Kind,
    pub namespace: Namespace,
    pub call_timeout: Duration,
    pub health: Arc<Tracker>,
    /// Bounds the calls running at once on this upstream.
    pub(crate) concurrency: Arc<tokio::sync::Semaphore>,
    /// Log argument values in the audit line.
    pub(crate) audit_arguments: bool,
    /// Token budget of results, when the upstream overrides the global one.
    pub(crate) result_max_tokens: Option<usize>,
    /// How the catalog shapes its tools (task modes, definition budgets).
    pub(super) shaping: crate::catalog::Shaping,
    /// Whose credentials its calls carry.
    pub(crate) credentials: crate::config::CredentialSource,
    /// The upstream itself when it is reached with each caller's own token (to drop a
    /// caller's connection on disconnect).
    pub per_caller: Option<Arc<toolgate_adapters::mcp::PerCallerUpstream>>,
    /// An OpenAPI upstream's authorization code flow its users connect through
    /// (`credentials: oauth`).
    pub code_flow: Option<Arc<toolgate_adapters::openapi::CodeFlow>>,
    /// Stops this upstream's health and catalog tasks when it is unmounted.
    pub(super) stop: CancellationToken,
}

impl Mounted {
    /// Cancelled when this upstream is unmounted or replaced, or the gateway stops.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Wraps an upstream with default per-upstream limits; see
    /// [`Mounted::configured`] for the settings a config gives it.
    pub fn new(
        upstream: DynUpstream,
        kind: Kind,
        namespace: Namespace,
        call_timeout: Duration,
        health: crate::config::HealthConfig,
    ) -> Self {
        Self {
            upstream,
            kind,
            namespace,
            call_timeout,
            health: Arc::new(Tracker::new(health)),
            concurrency: Arc::new(tokio::sync::Semaphore::new(64)),
            audit_arguments: false,
            result_max_tokens: None,
            shaping: crate::catalog::Shaping::of_kind(kind),
            credentials: crate::config::CredentialSource::Static,
            per_caller: None,
            code_flow: None,
            stop: CancellationToken::new(),
        }
    }
}

/// The upstreams by name.
pub(crate) type UpstreamMap = BTreeMap<String, Arc<Mounted>>;

/// Proof that the lifecycle lock is held (see the module docs).
pub(super) type Lifecycle<'a> = MutexGuard<'a, ()>;

/// What `GET /v1/upstreams` and `toolgate check` report per upstream.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamStatus {
    pub name: String,
    /// Serialized as [`Kind::name`].
    pub kind: Kind,
    #[serde(flatten)]
    pub health: health::Snapshot,
    pub tools: usize,
    /// What its tools' definitions cost a model, in the catalog.
    pub definition_tokens: DefinitionTokens,
}

/// One upstream's tool definitions in tokens (`results.encoding`): as listed (each
/// within its budget) and whole, and how many are listed abbreviated.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct DefinitionTokens {
    pub listed: usize,
    pub full: usize,
    pub abbreviated: usize,
}

impl Gateway {
    /// Takes the lifecycle lock: held while the upstream map changes or the config
    /// that decides which upstreams are wanted is swapped.
    pub(super) fn lifecycle(&self) -> Lifecycle<'_> {
        self.lifecycle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the upstream map (copy on write); `_held` proves the lock is held.
    fn edit_upstreams<R>(
        &self,
        _held: &Lifecycle<'_>,
        edit: impl FnOnce(&mut UpstreamMap) -> R,
    ) -> R {
        let mut next = (**self.upstreams.load()).clone();
        let result = edit(&mut next);
        self.upstreams.store(Arc::new(next));
        result
    }

    /// Applies a new config (already validated, `policy` built from it) to the running
    /// gateway without dropping sessions: the config and policy are swapped together,
    /// removed upstreams are unmounted and shut down, added and changed MCP and skills
    /// upstreams are (re)started, unchanged upstreams keep running untouched, and the
    /// catalog is rebuilt once (announcing `list_changed`). Sessions learn of a changed
    /// tenant through `list_changed` too, since their visible set may have changed.
    ///
    /// OpenAPI upstreams added or changed are in the answer for the caller to import
    /// (`registry`); a changed one keeps serving its old spec until then. Upstreams
    /// registered through the admin API are not in the config and are left alone.
    pub async fn apply_config(self: &Arc<Self>, config: Config, policy: Policy) -> UpstreamChanges {
        let old = self.config();
        let changes = UpstreamChanges::between(&old, &config);
        let policy_changed = old.tenants != config.tenants
            || old.anonymous_tenant != config.anonymous_tenant
            || old.sessions.initial_max_tools != config.sessions.initial_max_tools;
        let mounts: Vec<(String, Mounted)> = changes
            .added
            .iter()
            .chain(&changes.changed)
            .filter_map(|name| Some((name.clone(), factory::start_local(&config, name)?)))
            .collect();
        let mut retired = Vec::new();
        {
            let held = self.lifecycle();
            self.replace_config(config, policy);
            for (name, mounted) in mounts {
                retired.extend(self.install(&held, name, mounted));
            }
            self.edit_upstreams(&held, |map| {
                for name in &changes.removed {
                    if let Some(removed) = map.remove(name) {
                        removed.stop.cancel();
                        retired.push(removed);
                    }
                }
                // A new `results.encoding` counts every definition anew: the upstreams
                // left running get it too, and the rebuild below refits their tools.
                let encoding = self.config().results.encoding;
                for mounted in map.values_mut() {
                    if mounted.shaping.definitions.encoding != encoding {
                        let mut recounted = (**mounted).clone();
                        recounted.shaping.definitions.encoding = encoding;
                        *mounted = Arc::new(recounted);
                    }
                }
            });
        }
        self.rebuild_catalog();
        if policy_changed {
            self.catalog_version.send_modify(|v| *v += 1);
        }
        for old in retired {
            old.upstream.shutdown().await;
        }
        changes
    }

    /// Adds (or replaces) an upstream and rebuilds the catalog, which announces the
    /// change to MCP sessions. A replaced upstream is shut down.
    pub async fn mount(self: &Arc<Self>, name: String, mounted: Mounted) {
        self.mount_if(name, mounted, |_| true).await;
    }

    /// [`Gateway::mount`], if `wanted` still holds when judged under the lifecycle
    /// lock (an import checks its config is still the one asked for, so a reload or a
    /// removal meanwhile wins). Returns whether it was mounted; an unwanted upstream
    /// is shut down.
    pub async fn mount_if(
        self: &Arc<Self>,
        name: String,
        mounted: Mounted,
        wanted: impl FnOnce(&Gateway) -> bool,
    ) -> bool {
        let replaced = {
            let held = self.lifecycle();
            if !wanted(self) {
                drop(held);
                mounted.upstream.shutdown().await;
                return false;
            }
            self.install(&held, name, mounted)
        };
        self.rebuild_catalog();
        if let Some(old) = replaced {
            old.upstream.shutdown().await;
        }
        true
    }

    /// Removes an upstream, rebuilds the catalog and shuts the upstream down. Returns
    /// false when there was none of that name.
    pub async fn unmount(&self, name: &str) -> bool {
        let removed = {
            let held = self.lifecycle();
            self.edit_upstreams(&held, |map| map.remove(name))
        };
        let Some(removed) = removed else {
            return false;
        };
        removed.stop.cancel();
        self.rebuild_catalog();
        removed.upstream.shutdown().await;
        true
    }

    /// Puts `mounted` in the map and starts its health and tool-list tasks; answers
    /// the upstream it replaced (already told to stop its tasks), for the caller to
    /// shut down.
    pub(super) fn install(
        self: &Arc<Self>,
        held: &Lifecycle<'_>,
        name: String,
        mounted: Mounted,
    ) -> Option<Arc<Mounted>> {
        let mounted = Arc::new(mounted);
        tokio::spawn(health::run(
            mounted.upstream.clone(),
            mounted.health.clone(),
            mounted.stop.clone(),
        ));
        tokio::spawn(watch_tools(
            Arc::downgrade(self),
            mounted.upstream.tools_changed(),
            mounted.stop.clone(),
        ));
        if let Some(per_caller) = &mounted.per_caller {
            if let Some(tokens) = self.upstream_tokens() {
                tokens.mounted(&name, per_caller.clone(), mounted.stop.clone());
            }
            tokio::spawn(relay_own_lists(
                self.own_lists.clone(),
                per_caller.own_lists_changed(),
                mounted.stop.clone(),
            ));
        }
        let replaced = self.edit_upstreams(held, |map| map.insert(name, mounted));
        if let Some(old) = &replaced {
            old.stop.cancel();
        }
        replaced
    }

    /// Waits until every upstream has answered once (or `timeout` passes), then
    /// rebuilds the catalog and turns ready. An upstream that fails meanwhile is
    /// retried (at most a second apart, see the adapters' startup window) and still
    /// waited for. Returns the names of upstreams not connected.
    pub async fn wait_for_upstreams(&self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let pending = self.awaited_upstreams();
            if pending.is_empty() || Instant::now() >= deadline {
                self.rebuild_catalog();
                let _ = self.startup.set(Startup {
                    unanswered: pending.clone(),
                    startup_timeout: timeout,
                });
                return pending;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The upstreams startup waits for: not connected yet, and not closed for good (a
    /// failed import, which no retry would change).
    pub fn awaited_upstreams(&self) -> Vec<String> {
        self.upstreams()
            .iter()
            .filter(|(_, m)| {
                !matches!(
                    m.upstream.connection(),
                    Connection::Connected | Connection::Closed
                )
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Status of every upstream, by name.
    pub fn statuses(&self) -> Vec<UpstreamStatus> {
        let mut costs: BTreeMap<&str, DefinitionTokens> = BTreeMap::new();
        let catalog = self.catalog();
        for entry in catalog.entries() {
            let cost = costs.entry(entry.upstream.as_str()).or_default();
            cost.listed += entry.definition_tokens;
            cost.full += entry.full_tokens;
            cost.abbreviated += usize::from(entry.abbreviated());
        }
        self.upstreams()
            .iter()
            .map(|(name, mounted)| {
                let health = mounted.health.snapshot(&mounted.upstream);
                self.metrics.set_health(name, health.state.gauge());
                UpstreamStatus {
                    name: name.clone(),
                    kind: mounted.kind,
                    health,
                    tools: mounted.upstream.tools().len(),
                    definition_tokens: costs.get(name.as_str()).copied().unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The upstreams, by name (a snapshot).
    pub fn upstreams(&self) -> Arc<UpstreamMap> {
        self.upstreams.load_full()
    }

    /// Stops the background tasks and every upstream.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        for mounted in self.upstreams().values() {
            mounted.stop.cancel();
            mounted.upstream.shutdown().await;
        }
    }
}

/// Passes on which user's own list of a per-user upstream changed.
async fn relay_own_lists(
    to: tokio::sync::broadcast::Sender<Arc<str>>,
    mut changes: tokio::sync::broadcast::Receiver<Arc<str>>,
    stop: CancellationToken,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let holder = tokio::select! {
            _ = stop.cancelled() => return,
            holder = changes.recv() => holder,
        };
        match holder {
            Ok(holder) => {
                let _ = to.send(holder);
            }
            // Lost which: the empty holder (no one's) stands for everyone.
            Err(RecvError::Lagged(_)) => {
                let _ = to.send(Arc::from(""));
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Rebuilds the catalog whenever one upstream's tool list changes.
async fn watch_tools(
    gateway: std::sync::Weak<Gateway>,
    mut changes: watch::Receiver<u64>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        gateway.rebuild_catalog();
    }
}
