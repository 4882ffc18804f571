//! OpenAPI upstreams: imported from the config file at startup and registered at run
//! time through the admin API; runtime registrations survive restarts.
//!
//! Every import runs through [`import`] (a spec loaded, then mounted only if still
//! wanted); [`import_in_background`] is its one background lifecycle. The registry
//! decides *when* an upstream is imported and whether it is still wanted; *how* a spec
//! becomes a mounted upstream is the gateway's [`factory`](crate::gateway::factory).
//! Until the spec is in, a [`Placeholder`] stands in (state `starting`); a failed
//! import leaves a placeholder that reports the error (state `down`), so
//! `/v1/upstreams` and `toolgate check` show what went wrong.
//! Registrations are kept by a [`RegistrationStore`] (see [`crate::state::registrations`]); with
//! `state.backend: redis` they live in Redis and every replica follows them (see
//! [`crate::state::registrations`]).
//!
//! Modules: [`placeholder`] (the stand-in
//! while an import runs or after it failed), [`follow`] (other replicas' registrations,
//! with `state.backend: redis`).
//!
//! A [`Registry`] is a service beside the gateway core: it holds the core, never the
//! other way round.

mod follow;
pub mod placeholder;

pub use crate::state::registrations::file::FileStore;
pub use crate::state::registrations::{Registration, RegistrationStore, StoreError};
pub use placeholder::Placeholder;

use std::collections::BTreeMap;
use std::sync::Arc;

use toolgate_adapters::Connection;
use toolgate_adapters::openapi::{ImportReport, LoadError, OpenApiConfig, OpenApiUpstream};

use crate::gateway::{Gateway, factory};
use crate::state::registrations::redis::RedisRegistrations;

/// OpenAPI imports and runtime registrations of one gateway: the core they mount into,
/// what this process has mounted, and where registrations are kept.
pub struct Registry {
    pub gateway: Arc<Gateway>,
    /// The runtime registrations mounted in this process.
    mounted: Registrations,
    /// Where registrations are kept: Redis when the gateway shares state, else the
    /// data directory's file.
    store: Arc<dyn RegistrationStore>,
    /// The Redis store again, to follow other replicas' registrations.
    shared: Option<Arc<RedisRegistrations>>,
}

impl Registry {
    /// The registry of `gateway`, its store chosen by the `state` backend.
    pub fn new(gateway: Arc<Gateway>) -> Arc<Registry> {
        let shared = gateway
            .shared
            .as_ref()
            .map(|shared| Arc::new(RedisRegistrations::new(shared.conn.clone())));
        let store: Arc<dyn RegistrationStore> = match &shared {
            Some(redis) => redis.clone(),
            None => Arc::new(FileStore::new(&gateway.config().data_dir)),
        };
        Arc::new(Registry {
            gateway,
            mounted: Registrations::default(),
            store,
            shared,
        })
    }

    /// Where registrations are kept.
    pub fn store(&self) -> &Arc<dyn RegistrationStore> {
        &self.store
    }

    /// The config registration `name` was mounted from in this process, if any.
    pub fn mounted(&self, name: &str) -> Option<OpenApiConfig> {
        self.mounted.get(name)
    }

    /// Notes that registration `name` is mounted here from `config` (the admin API,
    /// once its import is in).
    pub fn note_mounted(&self, name: &str, config: OpenApiConfig) {
        self.mounted.note(name, config);
    }
}

/// The runtime registrations mounted in this process, with the config each came from.
#[derive(Default)]
struct Registrations {
    mounted: std::sync::Mutex<BTreeMap<String, OpenApiConfig>>,
}

impl Registrations {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, OpenApiConfig>> {
        self.mounted.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that registration `name` is mounted here from `config`.
    fn note(&self, name: &str, config: OpenApiConfig) {
        self.lock().insert(name.to_owned(), config);
    }

    /// Forgets registration `name` (it was removed).
    fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    /// The config registration `name` was mounted from here, if any.
    fn get(&self, name: &str) -> Option<OpenApiConfig> {
        self.lock().get(name).cloned()
    }

    /// The registrations mounted here.
    fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
}

/// Why an OpenAPI upstream is imported; it decides whether the import is still wanted
/// once its spec is in (a reload or a removal meanwhile wins over an import).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An upstream of the config file: wanted while the running config has it, with
    /// the same settings.
    Config,
    /// A stored runtime registration (at startup, or announced by another replica):
    /// wanted while it is this process's registration with the same settings, and the
    /// config file does not name that upstream.
    Stored,
    /// An admin API request being answered (the admin API serializes its changes):
    /// wanted unless the config file now names that upstream with other settings.
    Request,
}

impl Origin {
    fn still_wanted(self, registry: &Registry, name: &str, openapi: &OpenApiConfig) -> bool {
        let config = registry.gateway.config();
        let in_config = config.upstreams.get(name);
        match self {
            Origin::Config => in_config.and_then(|u| u.openapi()) == Some(openapi),
            Origin::Stored => {
                in_config.is_none() && registry.mounted.get(name).as_ref() == Some(openapi)
            }
            Origin::Request => in_config.is_none_or(|u| u.openapi() == Some(openapi)),
        }
    }
}

/// Why an import mounted nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A stored registration's `spec_path` is outside `admin.spec_dir`.
    #[error("{0}")]
    Refused(String),
    #[error("the import of '{0}' was made obsolete by a change while it ran")]
    Obsolete(String),
}

/// Imports an OpenAPI upstream and mounts it under `name`, unless it stopped being
/// wanted while its spec loaded (see [`Origin`]).
pub async fn import(
    registry: &Registry,
    name: &str,
    config: OpenApiConfig,
    origin: Origin,
) -> Result<ImportReport, ImportError> {
    let gateway = &registry.gateway;
    let (mounted, report) = factory::import_openapi(gateway, name, config.clone()).await?;
    let wanted = gateway
        .mount_if(name.to_owned(), mounted, |_| {
            origin.still_wanted(registry, name, &config)
        })
        .await;
    if !wanted {
        tracing::debug!(
            upstream = name,
            "import made obsolete by a later change; dropped"
        );
        return Err(ImportError::Obsolete(name.to_owned()));
    }
    tracing::info!(
        upstream = name,
        imported = report.imported,
        skipped = report.skipped.len(),
        "OpenAPI upstream imported"
    );
    for skipped in &report.skipped {
        tracing::warn!(upstream = name, operation = %skipped.operation, reason = %skipped.reason, "operation skipped");
    }
    for repaired in &report.repaired {
        tracing::warn!(upstream = name, operation = %repaired.operation, reason = %repaired.reason, "operation repaired");
    }
    for renamed in &report.renamed {
        tracing::info!(upstream = name, operation = %renamed.operation, tool = %renamed.name, reason = %renamed.reason, "tool renamed");
    }
    Ok(report)
}

/// What importing `config` as `name` would produce, without mounting anything: the
/// tools' catalog names and the import report (the console shows it before the
/// import). The spec is fetched and converted exactly as [`import`] does.
pub async fn preview(
    name: &str,
    config: OpenApiConfig,
) -> Result<(Vec<String>, ImportReport), ImportError> {
    use toolgate_adapters::Upstream;
    let (upstream, report) = OpenApiUpstream::load(name, config).await?;
    let tools = upstream
        .tools()
        .iter()
        .map(|tool| crate::catalog::item_name(name, crate::config::Namespace::Prefix, &tool.name))
        .collect();
    Ok((tools, report))
}

/// Imports an OpenAPI upstream in the background: the one import lifecycle of the
/// config file's upstreams (at startup and on reload) and of stored registrations.
/// Until the spec is in, an upstream of that name that is serving keeps serving (and
/// keeps its previous spec if the new import fails); otherwise a [`Placeholder`]
/// stands in (state `starting`, then `down` with the error if the import fails).
pub async fn import_in_background(
    registry: &Arc<Registry>,
    name: String,
    mut openapi: OpenApiConfig,
    origin: Origin,
) {
    let gateway = &registry.gateway;
    let serving = gateway
        .upstreams()
        .get(&name)
        .is_some_and(|m| m.upstream.connection() == Connection::Connected);
    let placeholder = if serving {
        None
    } else {
        let placeholder = Arc::new(Placeholder::new(name.clone()));
        let mounted = factory::openapi_stand_in(&gateway.config(), &name, placeholder.clone());
        let wanted = gateway
            .mount_if(name.clone(), mounted, |_| {
                origin.still_wanted(registry, &name, &openapi)
            })
            .await;
        if !wanted {
            return;
        }
        Some(placeholder)
    };
    let registry = registry.clone();
    tokio::spawn(async move {
        if origin == Origin::Stored
            && let Err(refused) =
                confine_spec_path(spec_dir(&registry.gateway).as_deref(), &mut openapi).await
        {
            tracing::error!(upstream = %name, error = %refused, "stored registration refused");
            if let Some(placeholder) = placeholder {
                placeholder.fail(refused);
            }
            return;
        }
        match import(&registry, &name, openapi, origin).await {
            Ok(_) | Err(ImportError::Obsolete(_)) => {}
            Err(error) => match placeholder {
                Some(placeholder) => {
                    tracing::error!(upstream = %name, %error, "OpenAPI upstream could not be imported");
                    placeholder.fail(error.to_string());
                }
                None => tracing::error!(
                    upstream = %name,
                    %error,
                    "OpenAPI upstream could not be re-imported; it keeps serving its previous spec"
                ),
            },
        }
    });
}

/// Holds a runtime registration's `spec_path` to `admin.spec_dir`: a registration is
/// written by whoever holds the admin token, not by the operator, and a spec's content
/// ends up in every tenant's tool list. Without `spec_dir` only `spec_url` is accepted;
/// with it, the path (a relative one taken under it) must name a file under it once
/// links are resolved, and is replaced by that resolved path. A refused path gets the
/// same answer whether it exists or not.
pub async fn confine_spec_path(
    spec_dir: Option<&std::path::Path>,
    openapi: &mut OpenApiConfig,
) -> Result<(), String> {
    let Some(path) = openapi.spec_path.clone() else {
        return Ok(());
    };
    let Some(dir) = spec_dir else {
        return Err(format!(
            "spec_path '{path}' is not accepted in a runtime registration: give spec_url, \
             or have the operator set admin.spec_dir and name a file under it"
        ));
    };
    let refused = || {
        format!(
            "spec_path '{path}' is not accepted: runtime registrations read only files \
             under admin.spec_dir ({})",
            dir.display()
        )
    };
    // Judged once resolved (links and `..` alike): where the path leads counts.
    let wanted = std::path::Path::new(&path);
    let root = tokio::fs::canonicalize(dir).await.map_err(|_| refused())?;
    let real = tokio::fs::canonicalize(dir.join(wanted))
        .await
        .map_err(|_| refused())?;
    let is_file = tokio::fs::metadata(&real).await.is_ok_and(|m| m.is_file());
    if !real.starts_with(&root) || !is_file {
        return Err(refused());
    }
    openapi.spec_path = Some(real.display().to_string());
    Ok(())
}

fn spec_dir(gateway: &Gateway) -> Option<std::path::PathBuf> {
    gateway
        .config()
        .admin
        .as_ref()
        .and_then(|a| a.spec_dir.clone())
}

/// Imports a runtime registration (announced by another replica, or found stored) in
/// the background and notes it as this process's.
pub async fn import_registration(registry: &Arc<Registry>, registration: Registration) {
    let Registration { name, openapi } = registration;
    registry.mounted.note(&name, openapi.clone());
    import_in_background(registry, name, openapi, Origin::Stored).await;
}

/// Removes a runtime registration from this process.
pub async fn unmount_registration(registry: &Registry, name: &str) -> bool {
    registry.mounted.forget(name);
    registry.gateway.unmount(name).await
}

/// Starts importing every OpenAPI upstream of the config file and every stored
/// registration, each in the background behind a placeholder. With a shared state
/// backend, also starts following the other replicas' registrations.
pub async fn start_imports(registry: &Arc<Registry>) {
    let config = registry.gateway.config();
    for (name, upstream) in &config.upstreams {
        if let Some(openapi) = upstream.openapi() {
            import_in_background(registry, name.clone(), openapi.clone(), Origin::Config).await;
        }
    }
    match registry.store.load().await {
        Ok(registrations) => {
            for registration in registrations {
                if config.upstreams.contains_key(&registration.name) {
                    tracing::warn!(upstream = %registration.name, "stored registration ignored: the config file defines an upstream of that name");
                    continue;
                }
                import_registration(registry, registration).await;
            }
        }
        Err(error) => tracing::error!(%error, "stored registrations could not be read"),
    }
    // Started after the stored set was noted, so its first reconcile finds those
    // registrations already underway.
    if let Some(shared) = &registry.shared {
        tokio::spawn(follow::follow(
            Arc::downgrade(registry),
            shared.clone(),
            registry.gateway.stop_token(),
        ));
    }
}
