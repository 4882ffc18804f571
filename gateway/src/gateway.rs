//! The core every surface calls: upstreams, the catalog built from them, and the one
//! call path (`resolve -> upstream.call -> metrics`).
//!
//! Surfaces (MCP over HTTP, MCP over stdio, the ops endpoints) hold an `Arc<Gateway>`
//! and translate their protocol onto [`Gateway::call`] and [`Gateway::catalog`].

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::mcp::{self, McpOptions};
use toolgate_adapters::{CallContext, CallOutput, Connection, DynUpstream, JsonObject, ToolError};
use tracing::Instrument;

use crate::catalog::{Catalog, Collision, Source};
use crate::config::{Config, Namespace};
use crate::errors::unknown_tool;
use crate::health::{self, Tracker};
use crate::metrics::Metrics;
use crate::offerings::{OfferingSource, Offerings};
use crate::policy::{Policy, Refusal, Tenant};
use crate::search::SearchIndex;
use crate::session::{MemoryStore, SessionStore};
use crate::state::Shared;
use toolgate_adapters::openapi::OpenApiConfig;
use toolgate_adapters::skills::SkillsUpstream;

/// One configured upstream with the gateway's per-upstream settings.
pub struct Mounted {
    pub upstream: DynUpstream,
    pub kind: &'static str,
    pub namespace: Namespace,
    pub call_timeout: Duration,
    pub health: Arc<Tracker>,
    /// Bounds the calls running at once on this upstream.
    concurrency: Arc<tokio::sync::Semaphore>,
    /// Log argument values in the audit line.
    audit_arguments: bool,
    /// Token budget of results, when the upstream overrides the global one.
    result_max_tokens: Option<usize>,
    /// Stops this upstream's health and catalog tasks when it is unmounted.
    stop: CancellationToken,
}

impl Mounted {
    /// Wraps an upstream with the gateway's per-upstream settings.
    pub fn new(
        upstream: DynUpstream,
        kind: &'static str,
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
            stop: CancellationToken::new(),
        }
    }

    /// Applies the config's per-upstream limits and audit setting.
    pub fn with_settings(mut self, settings: Option<&crate::config::ResolvedSettings>) -> Self {
        if let Some(settings) = settings {
            self.concurrency = Arc::new(tokio::sync::Semaphore::new(
                settings.max_concurrent_calls.max(1),
            ));
            self.audit_arguments = settings.audit_arguments;
            self.result_max_tokens = settings.result_max_tokens;
        }
        self
    }
}

/// The upstreams by name; replaced whole (copy on write) when one is added or removed,
/// so a call never holds a lock while it runs.
type UpstreamMap = BTreeMap<String, Arc<Mounted>>;

/// A result's size in tokens before and after fitting it to its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResultUsage {
    pub original_tokens: usize,
    pub result_tokens: usize,
    pub truncated: bool,
}

/// What `GET /v1/upstreams` and `toolgate check` report per upstream.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamStatus {
    pub name: String,
    pub kind: &'static str,
    #[serde(flatten)]
    pub health: health::Snapshot,
    pub tools: usize,
}

pub struct Gateway {
    /// The running config; replaced whole on reload (see [`Gateway::config`]).
    config: RwLock<Arc<Config>>,
    upstreams: RwLock<Arc<UpstreamMap>>,
    catalog: RwLock<Arc<Catalog>>,
    rebuild_lock: std::sync::Mutex<()>,
    logged_collisions: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The search index of the newest catalog snapshot, built on first search.
    search_index: std::sync::Mutex<Option<(Arc<Catalog>, Arc<SearchIndex>)>>,
    /// Bumped on every catalog change; MCP sessions watch it to send `list_changed`.
    catalog_version: watch::Sender<u64>,
    pub metrics: Metrics,
    /// Tenants and the one decision function; replaced whole on reload.
    policy: RwLock<Arc<Policy>>,
    /// Sessions and their expanded tools.
    pub sessions: Arc<dyn SessionStore>,
    /// The Redis-backed shared state (`state.backend: redis`); `None` in memory.
    pub shared: Option<Arc<Shared>>,
    /// Runtime registrations mounted in this process, with the config each came from.
    registrations: std::sync::Mutex<BTreeMap<String, OpenApiConfig>>,
    stop: CancellationToken,
    /// Set once, when startup stopped waiting for the upstreams' first answers.
    startup: std::sync::OnceLock<Startup>,
}

/// How startup ended: every upstream answered, or `startup_timeout` passed first.
#[derive(Debug, Clone)]
pub struct Startup {
    /// The upstreams that had not connected when startup stopped waiting (empty when
    /// every one answered); they join the catalog whenever they connect.
    pub unanswered: Vec<String>,
    pub startup_timeout: Duration,
}

impl Gateway {
    /// Starts every upstream (in the background) and the tasks that keep the catalog
    /// and health current. Returns at once; see [`Gateway::wait_for_upstreams`].
    pub fn start(config: Config) -> Result<Arc<Gateway>, String> {
        let policy = Policy::from_config(&config)?;
        let shared = Shared::from_config(&config)?;
        let sessions: Arc<dyn SessionStore> = match &shared {
            Some(shared) => shared.sessions.clone(),
            None => Arc::new(MemoryStore::new(
                config.sessions.idle_ttl,
                crate::session::Limits::from_config(&config.sessions),
            )),
        };
        let gateway = Arc::new(Gateway {
            policy: RwLock::new(Arc::new(policy)),
            sessions,
            shared,
            registrations: std::sync::Mutex::default(),
            upstreams: RwLock::new(Arc::new(UpstreamMap::new())),
            catalog: RwLock::new(Arc::new(Catalog::default())),
            rebuild_lock: std::sync::Mutex::new(()),
            logged_collisions: std::sync::Mutex::default(),
            search_index: std::sync::Mutex::default(),
            catalog_version: watch::channel(0).0,
            metrics: Metrics::new(),
            stop: CancellationToken::new(),
            startup: std::sync::OnceLock::new(),
            config: RwLock::new(Arc::new(config)),
        });
        let config = gateway.config();
        for name in config.upstreams.keys() {
            // OpenAPI upstreams: imported by `registry::start_imports`.
            if let Some(mounted) = local_mounted(&config, name) {
                gateway.mount_quietly(name.clone(), mounted);
            }
        }
        gateway.rebuild_catalog();
        Ok(gateway)
    }

    /// Applies a new config (already validated, `policy` built from it) to the running
    /// gateway without dropping sessions: the config and policy are swapped together,
    /// removed upstreams are unmounted and shut down, added and changed MCP upstreams
    /// are (re)started, unchanged upstreams keep running untouched, and the catalog is
    /// rebuilt once (announcing `list_changed`). Sessions learn of a changed tenant
    /// through `list_changed` too, since their visible set may have changed.
    ///
    /// OpenAPI upstreams added or changed are in the answer for the caller to import
    /// (`registry`); a changed one keeps serving its old spec until then. Upstreams
    /// registered through the admin API are not in the config and are left alone.
    pub async fn apply_config(
        self: &Arc<Self>,
        config: Config,
        policy: Policy,
    ) -> crate::config::UpstreamChanges {
        let old = self.config();
        let changes = crate::config::UpstreamChanges::between(&old, &config);
        let policy_changed = old.tenants != config.tenants
            || old.anonymous_tenant != config.anonymous_tenant
            || old.sessions.initial_max_tools != config.sessions.initial_max_tools;
        let mounts: Vec<(String, Mounted)> = changes
            .added
            .iter()
            .chain(&changes.changed)
            .filter_map(|name| Some((name.clone(), local_mounted(&config, name)?)))
            .collect();
        self.replace_config(config, policy);
        let mut retired = Vec::new();
        for (name, mounted) in mounts {
            retired.extend(self.mount_quietly(name, mounted));
        }
        {
            let mut map = self.upstreams.write().unwrap_or_else(|e| e.into_inner());
            let mut next = (**map).clone();
            for name in &changes.removed {
                if let Some(removed) = next.remove(name) {
                    removed.stop.cancel();
                    retired.push(removed);
                }
            }
            *map = Arc::new(next);
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
        let replaced = self.mount_quietly(name, mounted);
        self.rebuild_catalog();
        if let Some(old) = replaced {
            old.upstream.shutdown().await;
        }
    }

    /// Removes an upstream, rebuilds the catalog and shuts the upstream down. Returns
    /// false when there was none of that name.
    pub async fn unmount(&self, name: &str) -> bool {
        let removed = {
            let mut map = self.upstreams.write().unwrap_or_else(|e| e.into_inner());
            let mut next = (**map).clone();
            let removed = next.remove(name);
            *map = Arc::new(next);
            removed
        };
        let Some(removed) = removed else {
            return false;
        };
        removed.stop.cancel();
        self.rebuild_catalog();
        removed.upstream.shutdown().await;
        true
    }

    fn mount_quietly(self: &Arc<Self>, name: String, mounted: Mounted) -> Option<Arc<Mounted>> {
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
        let replaced = {
            let mut map = self.upstreams.write().unwrap_or_else(|e| e.into_inner());
            let mut next = (**map).clone();
            let replaced = next.insert(name, mounted);
            *map = Arc::new(next);
            replaced
        };
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

    /// Rebuilds the catalog from the upstreams' current tools; returns the collisions
    /// it resolved (already logged).
    pub fn rebuild_catalog(&self) -> Vec<Collision> {
        // One rebuild at a time: two racing rebuilds could otherwise publish an older
        // snapshot after a newer one.
        let _serial = self.rebuild_lock.lock().unwrap_or_else(|e| e.into_inner());
        let upstreams = self.upstreams();
        let tool_lists: Vec<_> = upstreams
            .iter()
            .map(|(name, mounted)| (name, mounted.namespace, mounted.upstream.tools()))
            .collect();
        let sources: Vec<Source<'_>> = tool_lists
            .iter()
            .map(|(name, namespace, tools)| Source {
                upstream: name.as_str(),
                namespace: *namespace,
                tools: tools.as_slice(),
            })
            .collect();
        let (catalog, collisions) = Catalog::build(&sources);
        let offering_lists: Vec<_> = upstreams
            .iter()
            .map(|(name, mounted)| (name, mounted.namespace, mounted.upstream.offerings()))
            .collect();
        let offering_sources: Vec<OfferingSource<'_>> = offering_lists
            .iter()
            .map(|(name, namespace, offerings)| OfferingSource {
                upstream: name.as_str(),
                namespace: *namespace,
                offerings,
            })
            .collect();
        let catalog = catalog.with_offerings(Offerings::build(&offering_sources));
        {
            // Log each collision once, not on every rebuild.
            let mut logged = self
                .logged_collisions
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for collision in &collisions {
                if !logged.insert(collision.name.clone()) {
                    continue;
                }
                if collision.involves_passthrough {
                    tracing::error!(
                        name = %collision.name,
                        claimants = ?collision.claimants,
                        "tool name claimed by more than one upstream, one of them with `namespace: none`"
                    );
                } else {
                    tracing::warn!(
                        name = %collision.name,
                        claimants = ?collision.claimants,
                        "tool name collision resolved: the first claimant keeps the name, the others get a hash suffix"
                    );
                }
            }
        }
        let changed = {
            let mut current = self.catalog.write().unwrap_or_else(|e| e.into_inner());
            let changed = current.entries() != catalog.entries()
                || current.offerings() != catalog.offerings();
            *current = Arc::new(catalog);
            changed
        };
        self.metrics.set_catalog_size(self.catalog().len());
        if changed {
            self.catalog_version.send_modify(|v| *v += 1);
        }
        self.tell_upstreams_their_tenants();
        collisions
    }

    /// Tells each upstream whether one tenant alone can reach it (after every catalog
    /// rebuild and policy swap): only then may its messages that name no call be
    /// passed to the one call in flight.
    fn tell_upstreams_their_tenants(&self) {
        let (policy, catalog) = (self.policy(), self.catalog());
        for (name, mounted) in self.upstreams().iter() {
            mounted
                .upstream
                .set_one_tenant(policy.one_tenant_reaches(&catalog, name));
        }
    }

    /// The running config. A snapshot: a reload swaps in a new one, so read what a
    /// request needs from one snapshot.
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Tenants and the decision function, as of now.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Swaps in a new config and the policy built from it, together (a reader sees
    /// either the old pair or the new one). Upstreams are not touched here.
    pub fn replace_config(&self, config: Config, policy: Policy) {
        // Lock order: config, then policy — same for every writer.
        let mut config_slot = self.config.write().unwrap_or_else(|e| e.into_inner());
        let mut policy_slot = self.policy.write().unwrap_or_else(|e| e.into_inner());
        *config_slot = Arc::new(config);
        *policy_slot = Arc::new(policy);
        drop((config_slot, policy_slot));
        self.tell_upstreams_their_tenants();
    }

    /// How startup ended, once the catalog was built after the upstreams' first
    /// answers (or the startup wait ran out); `None` while it waits.
    pub fn startup(&self) -> Option<&Startup> {
        self.startup.get()
    }

    /// Why this replica cannot serve right now: the shared state store does not answer.
    /// `Ok` with the memory backend.
    pub async fn shared_state_ready(&self) -> Result<(), String> {
        match &self.shared {
            Some(shared) => shared.conn.ready().await,
            None => Ok(()),
        }
    }

    /// Counts one request of `tenant` against its rate limit: shared between replicas
    /// with the Redis backend, in process otherwise.
    pub async fn admit(&self, policy: &Policy, tenant: &Tenant) -> Result<(), Refusal> {
        match &self.shared {
            Some(shared) => shared.limiter.admit(policy, tenant).await,
            None => policy.admit(tenant),
        }
    }

    /// Cancelled when the gateway shuts down (for background tasks).
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Notes that runtime registration `name` is mounted here from `config`.
    pub fn note_registration(&self, name: &str, config: OpenApiConfig) {
        self.registrations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), config);
    }

    /// Forgets runtime registration `name` (it was removed).
    pub fn forget_registration(&self, name: &str) {
        self.registrations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// The config runtime registration `name` was mounted from here, if any.
    pub fn registration(&self, name: &str) -> Option<OpenApiConfig> {
        self.registrations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// The runtime registrations mounted here.
    pub fn registration_names(&self) -> Vec<String> {
        self.registrations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// The current catalog snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Receives a new value every time the catalog changes.
    pub fn catalog_changes(&self) -> watch::Receiver<u64> {
        self.catalog_version.subscribe()
    }

    /// The one call path: resolve the name, check the upstream is up, call it within
    /// its timeout, record metrics and an audit line.
    ///
    /// The policy check happens before, in [`crate::access::call`]; `caller` only
    /// names the tenant and session in the audit line.
    pub async fn call(
        &self,
        caller: &crate::access::Caller,
        name: &str,
        arguments: JsonObject,
        ctx: CallContext,
    ) -> Result<CallOutput, ToolError> {
        self.call_counted(caller, name, arguments, ctx)
            .await
            .map(|(output, _)| output)
    }

    /// [`Gateway::call`], also answering the result's token counts (a result under
    /// its budget carries none in `_meta`: it passes as the upstream sent it, but for
    /// the correlation id the MCP surface adds).
    pub async fn call_counted(
        &self,
        caller: &crate::access::Caller,
        name: &str,
        arguments: JsonObject,
        mut ctx: CallContext,
    ) -> Result<(CallOutput, ResultUsage), ToolError> {
        let catalog = self.catalog();
        let Some(entry) = catalog.get(name).cloned() else {
            return Err(self.refused(caller, name, None, unknown_tool(name)));
        };
        let upstreams = self.upstreams();
        let Some(mounted) = upstreams.get(&entry.upstream) else {
            return Err(self.refused(caller, name, None, unknown_tool(name)));
        };
        let started = Instant::now();
        // The upstream call's span: the parent the upstream hears of (telemetry.rs).
        let span = tracing::info_span!(
            target: crate::telemetry::SPAN_TARGET,
            "toolgate.upstream",
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            tool = name,
            upstream = %entry.upstream,
            outcome = tracing::field::Empty,
        );
        if let Some(trace) = crate::telemetry::child_of(&span, &ctx) {
            ctx.trace = Some(trace);
        }
        let correlation_id = ctx.correlation_id.clone();
        let arguments_for_audit = mounted
            .audit_arguments
            .then(|| serde_json::Value::Object(arguments.clone()).to_string());
        // Checked as a `Value` that owns the arguments (no copy of them).
        let instance = serde_json::Value::Object(arguments);
        let checked = entry.validator.check(name, &entry.definition, &instance);
        let arguments = match instance {
            serde_json::Value::Object(arguments) => arguments,
            _ => JsonObject::new(), // never: built from an object just above
        };
        let permit = match checked {
            Err(error) => Err(error),
            Ok(()) => admit(mounted, &entry.upstream, &ctx).await,
        };
        let outcome = match permit.as_ref().map(|_| mounted.upstream.connection()) {
            Err(error) => Err(error.clone()),
            Ok(connection) => match connection {
                Connection::Connected => {
                    let deadline = started + mounted.call_timeout;
                    if deadline < ctx.deadline {
                        ctx.deadline = deadline;
                    }
                    let timeout = ctx.remaining();
                    // Errors say the limit as it was configured (`2s`): the upstream's
                    // `call_timeout` when it is the one that applies (the caller's
                    // deadline is usually the same setting, measured a moment earlier).
                    let limit = if timeout + Duration::from_millis(500) >= mounted.call_timeout {
                        mounted.call_timeout
                    } else {
                        timeout
                    };
                    let cancel = ctx.cancel.clone();
                    match tokio::time::timeout(
                        timeout + Duration::from_millis(250),
                        mounted
                            .upstream
                            .call(&entry.original, arguments, ctx)
                            .instrument(span.clone()),
                    )
                    .await
                    {
                        Ok(Err(ToolError::Timeout(_))) | Err(_) => {
                            // The adapter should have timed out itself; make sure the
                            // upstream hears about it anyway.
                            cancel.cancel();
                            Err(ToolError::timeout(&entry.upstream, name, limit))
                        }
                        // Adapters name the upstream's own tool; the caller knows it by
                        // the catalog name.
                        Ok(result) => result.map_err(|e| e.naming(&entry.original, name)),
                    }
                }
                Connection::Connecting => {
                    Err(ToolError::unavailable(&entry.upstream, "still starting up"))
                }
                Connection::Reconnecting | Connection::Closed => Err(ToolError::unavailable(
                    &entry.upstream,
                    mounted
                        .upstream
                        .last_error()
                        .unwrap_or_else(|| "connection lost".into()),
                )),
            },
        };
        drop(permit);
        let (outcome, tokens) = match outcome {
            Ok(mut output) => {
                // Links to the upstream's resources, in the form clients read them back.
                crate::offerings::rewrite_tool_result(
                    &mut output.raw,
                    mounted.namespace,
                    &entry.upstream,
                );
                let output_schema = entry.definition.get("outputSchema").cloned();
                let (output, tokens) = self
                    .fit_to_budget(name, mounted, output, output_schema)
                    .await;
                (Ok(output), Some(tokens))
            }
            Err(error) => (Err(error), None),
        };
        let elapsed = started.elapsed();
        let outcome_label = match &outcome {
            Ok(output) if output.is_error() => "tool_error",
            Ok(_) => "ok",
            Err(error) => error.code(),
        };
        span.record("outcome", outcome_label);
        if outcome_label != "ok" {
            span.record("otel.status_code", "ERROR");
        }
        self.metrics
            .record_call(name, &entry.upstream, outcome_label, elapsed.as_secs_f64());
        let (original_tokens, result_tokens, truncated) = tokens.unwrap_or((0, 0, false));
        if tokens.is_some() {
            self.metrics.record_result_tokens(
                name,
                &entry.upstream,
                original_tokens,
                result_tokens,
            );
        }
        tracing::info!(
            target: crate::logging::AUDIT_TARGET,
            tenant = %caller.tenant.name,
            session = caller.session_id().unwrap_or("-"),
            result_tokens,
            original_tokens,
            truncated,
            tool = name,
            upstream = %entry.upstream,
            correlation_id = %correlation_id,
            latency_us = elapsed.as_micros() as u64,
            arguments = arguments_for_audit.as_deref().unwrap_or("-"),
            outcome = outcome_label,
            "tool call"
        );
        outcome.map(|output| {
            let usage = ResultUsage {
                original_tokens,
                result_tokens,
                truncated,
            };
            (output, usage)
        })
    }

    /// Audits and counts a call refused before it reached its upstream, and answers
    /// its error. `visible` is the tool's upstream when the caller may see the tool (its
    /// name may then label the metric); otherwise both labels are `<unknown>`. The
    /// audit line names what was asked for (cut to 128 characters).
    pub fn refused(
        &self,
        caller: &crate::access::Caller,
        name: &str,
        visible: Option<&str>,
        error: ToolError,
    ) -> ToolError {
        let (tool_label, upstream_label) = match visible {
            Some(upstream) => (name, upstream),
            None => (crate::metrics::UNKNOWN, crate::metrics::UNKNOWN),
        };
        self.metrics
            .record_refused_call(tool_label, upstream_label, error.code());
        let asked: String = name.chars().take(128).collect();
        tracing::info!(
            target: crate::logging::AUDIT_TARGET,
            tenant = %caller.tenant.name,
            session = caller.session_id().unwrap_or("-"),
            tool = %asked,
            upstream = upstream_label,
            outcome = error.code(),
            "tool call refused"
        );
        error
    }

    /// Fits a result to the tool's token budget. Large results are cut on the blocking
    /// pool: tokenizing a megabyte takes tens of milliseconds. Returns the result and
    /// `(original tokens, returned tokens, truncated)`.
    async fn fit_to_budget(
        &self,
        name: &str,
        mounted: &Mounted,
        output: CallOutput,
        output_schema: Option<serde_json::Value>,
    ) -> (CallOutput, (usize, usize, bool)) {
        let config = self.config();
        let mut budget = config.results.clone();
        if let Some(max) = config
            .tool_result_max_tokens
            .get(name)
            .copied()
            .or(mounted.result_max_tokens)
        {
            budget.max_tokens = max;
        }
        let large = output
            .raw
            .get("content")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b.get("text").and_then(serde_json::Value::as_str))
                    .map(str::len)
                    .sum::<usize>()
                    > 64 * 1024
            })
            || output.raw.get("structuredContent").is_some_and(|s| {
                s.as_array().is_some_and(|a| a.len() > 256)
                    || s.as_object().is_some_and(|o| {
                        o.values()
                            .any(|v| v.as_array().is_some_and(|a| a.len() > 256))
                    })
            });
        let fitted = if large {
            let raw = output.raw;
            match tokio::task::spawn_blocking(move || {
                crate::truncate::truncate_result_for(raw, &budget, output_schema.as_ref())
            })
            .await
            {
                Ok(fitted) => fitted,
                Err(_) => {
                    let message =
                        format!("the result of '{name}' could not be fitted to its token budget");
                    return (
                        CallOutput {
                            raw: crate::errors::error_result(&ToolError::Failed(message)),
                        },
                        (0, 0, true),
                    );
                }
            }
        } else {
            crate::truncate::truncate_result_for(output.raw, &budget, output_schema.as_ref())
        };
        if let Some(reason) = &fitted.unfit {
            // A result the client would reject (its structured part missing or not
            // matching the output schema) is worse than an error the model can act on.
            let message = format!(
                "the result of '{name}' is too large for its token budget ({} tokens) and \
                 cannot be shortened: {reason}; call it again asking for less (a filter, a \
                 smaller page or limit)",
                fitted.original_tokens
            );
            return (
                CallOutput {
                    raw: crate::errors::error_result(&ToolError::Failed(message)),
                },
                (fitted.original_tokens, 0, true),
            );
        }
        (
            CallOutput { raw: fitted.raw },
            (
                fitted.original_tokens,
                fitted.result_tokens,
                fitted.truncated,
            ),
        )
    }

    /// Sends a request about prompts, resources or completion to `upstream`, with the
    /// upstream's own names and URIs in `params` (see [`crate::serve::features`]).
    pub async fn forward_to(
        &self,
        upstream: &str,
        method: &str,
        params: serde_json::Value,
        ctx: CallContext,
    ) -> Result<Result<serde_json::Value, toolgate_adapters::RpcError>, ToolError> {
        let upstreams = self.upstreams();
        let Some(mounted) = upstreams.get(upstream) else {
            return Err(ToolError::unavailable(
                upstream,
                "it is not mounted any more",
            ));
        };
        if mounted.upstream.connection() != Connection::Connected {
            return Err(ToolError::unavailable(
                upstream,
                mounted
                    .upstream
                    .last_error()
                    .unwrap_or_else(|| "not connected".into()),
            ));
        }
        let timeout = ctx.remaining();
        match tokio::time::timeout(
            timeout + Duration::from_millis(250),
            mounted.upstream.forward(method, Some(params), ctx),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(ToolError::timeout(upstream, method, timeout)),
        }
    }

    /// Ranked tools for `query` among the view's allowed names (`tool_search`).
    pub fn search(
        &self,
        view: &crate::access::View,
        query: &str,
        limit: usize,
    ) -> Vec<serde_json::Value> {
        let index = {
            let mut cached = self.search_index.lock().unwrap_or_else(|e| e.into_inner());
            match cached.as_ref() {
                Some((source, index)) if Arc::ptr_eq(source, &view.catalog) => index.clone(),
                _ => {
                    let index = Arc::new(SearchIndex::build(&view.catalog));
                    *cached = Some((view.catalog.clone(), index.clone()));
                    index
                }
            }
        };
        index
            .search(query, limit, |name| view.allowed.names.contains(name))
            .into_iter()
            .map(|hit| {
                serde_json::json!({
                    "name": hit.name,
                    "description": hit.description,
                    "upstream": hit.upstream,
                })
            })
            .collect()
    }

    /// Status of every upstream, by name.
    pub fn statuses(&self) -> Vec<UpstreamStatus> {
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
                }
            })
            .collect()
    }

    /// The upstreams, by name.
    pub fn upstreams(&self) -> Arc<UpstreamMap> {
        self.upstreams
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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

/// Waits (briefly) for one of `mounted`'s call slots; `RateLimited` when none frees up.
async fn admit(
    mounted: &Mounted,
    upstream: &str,
    ctx: &CallContext,
) -> Result<tokio::sync::OwnedSemaphorePermit, ToolError> {
    if let Ok(permit) = mounted.concurrency.clone().try_acquire_owned() {
        return Ok(permit);
    }
    tokio::time::timeout(
        Duration::from_secs(2).min(ctx.remaining()),
        mounted.concurrency.clone().acquire_owned(),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .ok_or_else(|| ToolError::RateLimited {
        message: format!(
            "upstream '{upstream}' is running as many calls as it is allowed to; retry in a moment"
        ),
        retry_after: Some(Duration::from_secs(1)),
    })
}

/// Starts upstream `name` of `config` when it needs no import first: an MCP upstream
/// (its supervisor connects in the background) or a skills upstream (it scans in the
/// background); `None` for an OpenAPI upstream or a name not in the config.
fn local_mounted(config: &Config, name: &str) -> Option<Mounted> {
    let upstream_config = config.upstreams.get(name)?;
    let settings = config.resolve(&upstream_config.settings);
    let (upstream, kind): (DynUpstream, &'static str) =
        match (upstream_config.skills(), upstream_config.transport()) {
            (Some(skills), _) => (SkillsUpstream::spawn(name, skills), "skills"),
            (None, Some(transport)) => {
                let kind = transport.kind();
                (mcp_upstream(name, transport, config.startup_timeout), kind)
            }
            (None, None) => return None,
        };
    Some(
        Mounted::new(
            upstream,
            kind,
            settings.namespace,
            settings.call_timeout,
            settings.health.clone(),
        )
        .with_settings(Some(&settings)),
    )
}

/// An MCP upstream's supervisor (connecting in the background; quick retries and a
/// long stdio `initialize` during `startup_timeout`).
fn mcp_upstream(
    name: &str,
    transport: mcp::McpTransport,
    startup_timeout: Duration,
) -> DynUpstream {
    // Every upstream sees the downstream client through the gateway: its sampling,
    // elicitation (form and URL) and roots requests during a call go to the caller
    // of that call (a session's stream, or 2026-07-28's input-required round trip).
    let options = McpOptions {
        client_capabilities: serde_json::json!({
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
        }),
        startup_timeout,
        ..McpOptions::default()
    };
    mcp::spawn(name.to_owned(), transport, options)
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
