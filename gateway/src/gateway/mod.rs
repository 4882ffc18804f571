//! The core every surface calls: the upstreams mounted, the catalog built from them,
//! and the one call path. By concern:
//! - `upstreams`: the upstream lifecycle (mount, unmount, apply a config, watch tools);
//! - [`factory`]: the one way from an upstream's config to a mounted upstream, for
//!   every kind (OpenAPI imports included);
//! - `rebuild`: the catalog rebuilt from the upstreams' tools and offerings;
//! - [`openapi_oauth`]: an OpenAPI upstream's authorization code flow, for
//!   `credentials: oauth`;
//! - `forward`: requests about prompts, resources and completion sent on to their
//!   upstream.
//!
//! Surfaces (MCP over HTTP and stdio, REST, the ops endpoints) hold an `Arc<Gateway>`
//! and translate their protocol onto the one call path ([`crate::call::call`]) and
//! [`Gateway::catalog`].
//! What changes at run time (config and policy, upstreams, catalog) is held in
//! [`ArcSwap`]s: a reader takes a snapshot without a lock and keeps it for its request.

pub mod factory;
mod forward;
pub mod openapi_oauth;
mod personal;
mod rebuild;
mod upstream_tokens;
mod upstreams;

pub use upstream_tokens::UpstreamTokens;
pub use upstreams::{Mounted, UpstreamStatus};

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_search::SearchCache;

use crate::catalog::Catalog;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::policy::{Policy, Refusal, Tenant};
use crate::state::RedisState;
use crate::state::ratelimit::Verdict;
use crate::state::sessions::{MemoryStore, SessionStore};
use upstreams::UpstreamMap;

pub struct Gateway {
    /// The running config and the policy built from it, swapped together on reload.
    running: ArcSwap<Running>,
    upstreams: ArcSwap<UpstreamMap>,
    /// Serializes changes of the upstream map and config swaps (see [`upstreams`]).
    lifecycle: std::sync::Mutex<()>,
    catalog: ArcSwap<Catalog>,
    /// One catalog rebuild at a time (see [`Gateway::rebuild_catalog`]).
    rebuild_lock: std::sync::Mutex<()>,
    logged_collisions: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The search index of the newest catalog snapshot, built on first search.
    search: SearchCache<Catalog>,
    /// Users' own catalogs (see [`personal`]).
    personal: personal::PersonalCatalogs,
    /// The holder, each time one of a user's own tool lists changes.
    own_lists: tokio::sync::broadcast::Sender<Arc<str>>,
    /// Bumped on every catalog change; MCP sessions watch it to send `list_changed`.
    catalog_version: watch::Sender<u64>,
    pub metrics: Metrics,
    /// Sessions and their expanded tools.
    pub sessions: Arc<dyn SessionStore>,
    /// The Redis-backed shared state (`state.backend: redis`); `None` in memory.
    pub shared: Option<Arc<RedisState>>,
    stop: CancellationToken,
    /// Set once, when startup stopped waiting for the upstreams' first answers.
    startup: std::sync::OnceLock<Startup>,
    /// The tokens users hold at upstreams reached with each user's own (handed in by
    /// the service that keeps them).
    upstream_tokens: std::sync::OnceLock<Arc<dyn UpstreamTokens>>,
}

/// A config and the policy built from it.
struct Running {
    config: Arc<Config>,
    policy: Arc<Policy>,
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
    /// Starts every upstream that needs no import (in the background) and the tasks
    /// that keep the catalog and health current. Returns at once; OpenAPI upstreams
    /// are imported by the application that holds this core (`App::start`), and
    /// [`Gateway::wait_for_upstreams`] waits for the first answers. `shared` is the
    /// Redis-backed state when `state.backend` is `redis` ([`RedisState::from_config`]).
    pub fn start(config: Config, shared: Option<Arc<RedisState>>) -> Result<Arc<Gateway>, String> {
        let policy = Policy::from_config(&config)?;
        // The model is read before anything starts: a configured model that cannot be
        // used stops startup with the file at fault rather than searching without it.
        let embedder = match &config.search.embedding_model {
            Some(dir) => Some(Arc::new(
                toolgate_search::embed::Embedder::load(dir)
                    .map_err(|e| format!("search.embedding_model: {e}"))?,
            )),
            None => None,
        };
        let sessions: Arc<dyn SessionStore> = match &shared {
            Some(shared) => shared.sessions.clone(),
            None => Arc::new(MemoryStore::new(
                config.sessions.idle_ttl,
                crate::state::sessions::Limits::from_config(&config.sessions),
            )),
        };
        let gateway = Arc::new(Gateway {
            running: ArcSwap::from_pointee(Running {
                config: Arc::new(config),
                policy: Arc::new(policy),
            }),
            sessions,
            shared,
            upstreams: ArcSwap::default(),
            lifecycle: std::sync::Mutex::new(()),
            catalog: ArcSwap::default(),
            rebuild_lock: std::sync::Mutex::new(()),
            logged_collisions: std::sync::Mutex::default(),
            search: SearchCache::with_embedder(embedder),
            personal: Default::default(),
            own_lists: tokio::sync::broadcast::channel(256).0,
            catalog_version: watch::channel(0).0,
            metrics: Metrics::new(),
            stop: CancellationToken::new(),
            startup: std::sync::OnceLock::new(),
            upstream_tokens: std::sync::OnceLock::new(),
        });
        let config = gateway.config();
        {
            let held = gateway.lifecycle();
            for name in config.upstreams.keys() {
                if let Some(mounted) = factory::start_local(&config, name) {
                    gateway.install(&held, name.clone(), mounted);
                }
            }
        }
        gateway.rebuild_catalog();
        Ok(gateway)
    }

    /// The running config. A snapshot: a reload swaps in a new one, so read what a
    /// request needs from one snapshot.
    pub fn config(&self) -> Arc<Config> {
        self.running.load().config.clone()
    }

    /// Tenants and the decision function, as of now.
    pub fn policy(&self) -> Arc<Policy> {
        self.running.load().policy.clone()
    }

    /// Swaps in a new config and the policy built from it, together. Upstreams are not
    /// touched here (see [`Gateway::apply_config`]).
    pub fn replace_config(&self, config: Config, policy: Policy) {
        self.running.store(Arc::new(Running {
            config: Arc::new(config),
            policy: Arc::new(policy),
        }));
        self.tell_upstreams_their_tenants();
    }

    /// How startup ended, once the catalog was built after the upstreams' first
    /// answers (or the startup wait ran out); `None` while it waits.
    pub fn startup(&self) -> Option<&Startup> {
        self.startup.get()
    }

    /// Why this replica cannot serve right now: the shared state store does not answer.
    /// `Ok` with the memory backend.
    pub async fn shared_state_ready(&self) -> Result<(), crate::state::conn::Unavailable> {
        match &self.shared {
            Some(shared) => shared.conn.ready().await,
            None => Ok(()),
        }
    }

    /// Counts one request of `tenant` against its rate limit: shared between replicas
    /// with the Redis backend, in process otherwise. A request over the limit, or one
    /// the shared limiter cannot count (`fail_closed`), is refused.
    pub async fn count_request(&self, tenant: &Tenant) -> Result<(), Refusal> {
        let (Some(rate), Some(local)) = (tenant.rate(), tenant.local_limiter()) else {
            return Ok(());
        };
        let verdict = match &self.shared {
            Some(shared) => shared.limiter.check(&tenant.name, rate, local).await,
            None => local.check(),
        };
        match verdict {
            Verdict::Admitted => Ok(()),
            Verdict::Wait(retry_after) => Err(Refusal::RateLimited { retry_after }),
            Verdict::Unavailable(message) => Err(Refusal::LimiterUnavailable { message }),
        }
    }

    /// Hands in the service keeping users' upstream tokens (once; later calls are
    /// ignored).
    pub fn set_upstream_tokens(&self, tokens: Arc<dyn UpstreamTokens>) {
        let _ = self.upstream_tokens.set(tokens);
    }

    /// The service keeping users' upstream tokens, when one was handed in.
    pub fn upstream_tokens(&self) -> Option<Arc<dyn UpstreamTokens>> {
        self.upstream_tokens.get().cloned()
    }

    /// Cancelled when the gateway shuts down (for background tasks).
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// The current catalog snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }

    /// Receives a new value every time the catalog changes.
    pub fn catalog_changes(&self) -> watch::Receiver<u64> {
        self.catalog_version.subscribe()
    }

    /// The holder, each time one of a user's own tool lists changes (an upstream listed
    /// per user): that user's sessions re-list.
    pub fn own_list_changes(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.own_lists.subscribe()
    }

    /// Ranked tools for `query` among the names `include` admits: the `tool_search`
    /// engine, for a caller that is not a tenant (the admin console sees every tool).
    pub fn search_where(
        &self,
        catalog: &Arc<Catalog>,
        query: &str,
        limit: usize,
        include: impl Fn(&str) -> bool,
    ) -> Vec<serde_json::Value> {
        let own = self.search_cache_for(catalog);
        let cache = own.as_deref().unwrap_or(&self.search);
        let search = || cache.index_for(catalog).search(query, limit, include);
        // With an embedding model a query costs milliseconds of encoder work; the first
        // query after a catalog change builds the index (50 ms for 1,400 tools, release).
        let hits = if cache.embeds() || !cache.has_index_for(catalog) {
            off_the_workers(search)
        } else {
            search()
        };
        hits.into_iter()
            .map(|hit| {
                serde_json::json!({
                    "name": hit.name,
                    "description": hit.description,
                    "upstream": hit.upstream,
                })
            })
            .collect()
    }
}

/// Runs `work` (CPU-bound for long: an encoder pass, a catalog rebuild over thousands
/// of large definitions) with this runtime thread's other tasks moved to another
/// thread meanwhile, so `/healthz` and calls in flight are still served. On a
/// current-thread runtime or outside one, where that is not possible, it simply runs.
pub(crate) fn off_the_workers<R>(work: impl FnOnce() -> R) -> R {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}
