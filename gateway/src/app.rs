//! The application assembled from a config: the gateway core, its registration store
//! and the HTTP router. `toolgate serve`, `stdio`, `check` and
//! `tools` start it, and so do in-process tests: one way to start toolgate.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::credentials::Authenticator;
use crate::gateway::Gateway;
use crate::registry::{self, RegistrationStore};

/// A started toolgate: the core plus what its surfaces need.
pub struct App {
    pub gateway: Arc<Gateway>,
    /// Where runtime registrations are kept (the data directory's file, or Redis).
    pub store: Arc<dyn RegistrationStore>,
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
    pub async fn start(config: Config) -> Result<App, StartError> {
        let gateway = Gateway::start(config).map_err(StartError::Core)?;
        let store = registry::store_for(&gateway);
        registry::start_imports(&gateway, store.as_ref()).await;
        Ok(App {
            gateway,
            store,
            stop: CancellationToken::new(),
        })
    }

    /// The HTTP application: `/mcp`, the REST surface, the ops and admin endpoints,
    /// admitting callers with `authenticator` (see [`Authenticator::for_config`]; only
    /// the HTTP surfaces need one, so `check` and `tools` never fetch a JWKS).
    pub fn router(&self, authenticator: Authenticator) -> crate::serve::Front {
        crate::serve::Front::new(
            self.gateway.clone(),
            self.store.clone(),
            authenticator,
            self.stop.child_token(),
        )
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

    /// Stops the routers' background work and every upstream.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.gateway.shutdown().await;
    }
}
