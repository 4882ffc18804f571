//! The application assembled from a config: the gateway core and the services built
//! on it (registrations, background calls, the reload log). `toolgate serve`, `stdio`, `check` and
//! `tools` start it, and so do in-process tests: one way to start toolgate.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::gateway::Gateway;
use crate::registry::{self, Registry};
use crate::reload::ReloadLog;
use crate::state::RedisState;
use crate::tasks::Tasks;
use crate::upstream_auth::UpstreamAuth;

/// A started toolgate: the core and the services built on it. The core (config,
/// catalog, policy, upstreams, sessions, the call path) knows none of the services;
/// they hold it. Surfaces take what they need from here.
pub struct App {
    pub gateway: Arc<Gateway>,
    /// OpenAPI imports and runtime registrations (and where those are kept).
    pub registry: Arc<Registry>,
    /// Background calls: the task store (shared like the sessions) and the calls this
    /// replica runs.
    pub tasks: Arc<Tasks>,
    /// The last config reloads and their outcomes (the console shows them).
    pub reloads: Arc<ReloadLog>,
    /// Users' tokens at upstreams reached with each user's own (`credentials: oauth`)
    /// and the connecting of them.
    pub upstream_auth: Arc<UpstreamAuth>,
    /// Cancelled on shutdown: stops the routers' background work.
    pub stop: CancellationToken,
}

/// Why toolgate could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The gateway core could not be built (tenants, shared state).
    #[error("{0}")]
    Core(String),
    /// An upstream with `namespace: none` claims a name another tool has.
    #[error(
        "tool name '{name}' is claimed by {claimants:?}; an upstream with `namespace: none` \
         must not collide with another tool — give it a prefix (remove `namespace: none`)"
    )]
    PassthroughCollision {
        name: String,
        claimants: Vec<(String, String)>,
    },
}

impl App {
    /// Starts the core (MCP and skills upstreams connect in the background) and starts
    /// importing the OpenAPI upstreams and the stored registrations. Returns at once; [`App::finish_startup`] waits for the first
    /// tool lists.
    pub async fn start(config: Config) -> Result<Arc<App>, StartError> {
        let shared = RedisState::from_config(&config).map_err(StartError::Core)?;
        let tasks = Tasks::new(
            &config.tasks,
            crate::state::tasks::store_for(&config, shared.as_deref()),
        );
        let gateway = Gateway::start(config, shared).map_err(StartError::Core)?;
        let upstream_auth = UpstreamAuth::for_gateway(gateway.clone()).map_err(StartError::Core)?;
        gateway.set_upstream_tokens(upstream_auth.clone());
        upstream_auth.watch_mounted();
        tasks.spawn_reaper(&gateway, gateway.stop_token().child_token());
        let registry = Registry::new(gateway.clone());
        registry::start_imports(&registry).await;
        Ok(Arc::new(App {
            gateway,
            registry,
            tasks,
            reloads: Arc::default(),
            upstream_auth,
            stop: CancellationToken::new(),
        }))
    }

    /// Waits for the upstreams' first tool lists (bounded by `startup_timeout`), then
    /// turns ready. Fails (after shutting down) on a passthrough name collision.
    pub async fn finish_startup(&self) -> Result<(), StartError> {
        let gateway = &self.gateway;
        let pending = gateway
            .wait_for_upstreams(gateway.config().startup_timeout)
            .await;
        for name in &pending {
            tracing::warn!(upstream = %name, "not connected yet; its tools join the catalog when it connects");
        }
        let collisions = gateway.rebuild_catalog();
        if let Some(collision) = collisions.into_iter().find(|c| c.involves_passthrough) {
            self.shutdown().await;
            return Err(StartError::PassthroughCollision {
                name: collision.name,
                claimants: collision.claimants,
            });
        }
        for (tenant, pattern) in gateway.policy().unmatched_patterns(&gateway.catalog()) {
            tracing::warn!(%tenant, %pattern, "tenant pattern matches no tool in the catalog");
        }
        tracing::info!(tools = gateway.catalog().len(), "catalog ready");
        Ok(())
    }

    /// Stops the routers' background work, the background calls this replica runs
    /// (their records say why) and every upstream.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.gateway.stop_token().cancel();
        self.tasks.shut_down(&self.gateway).await;
        self.gateway.shutdown().await;
    }
}
