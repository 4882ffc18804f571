//! OpenAPI upstreams: imported from the config file at startup and registered at run
//! time through the admin API; runtime registrations survive restarts.
//!
//! Every import runs through [`import`] (a spec loaded, then mounted only if still
//! wanted); [`import_in_background`] is its one background lifecycle. Until the spec
//! is in, a [`Placeholder`] stands in (state `starting`); a failed import leaves a
//! placeholder that reports the error (state `down`), so `/v1/upstreams` and
//! `toolgate check` show what went wrong.
//! Registrations are kept by a [`RegistrationStore`]; the embedded default is a JSON
//! file in the data directory, replaced atomically (write, fsync, rename). With
//! `state.backend: redis` they live in Redis and every replica follows them (see
//! [`crate::state::registrations`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use toolgate_adapters::openapi::{ImportReport, LoadError, OpenApiConfig, OpenApiUpstream};
use toolgate_adapters::{
    CallContext, CallOutput, Connection, JsonObject, ToolDef, ToolError, Upstream,
};

use crate::gateway::{Gateway, Mounted};

/// One upstream registered through the admin API, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    pub name: String,
    pub openapi: OpenApiConfig,
}

/// Why the registration store could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The shared store (Redis) does not answer: retry later.
    #[error(transparent)]
    Unavailable(#[from] crate::state::Unavailable),
    /// The file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// What is stored cannot be read back (not a registration file, or an entry that
    /// is not a registration).
    #[error("{0}")]
    Corrupt(String),
}

/// Where registrations are kept between restarts.
#[async_trait]
pub trait RegistrationStore: Send + Sync {
    async fn load(&self) -> Result<Vec<Registration>, StoreError>;
    /// Adds or replaces one registration.
    async fn put(&self, registration: &Registration) -> Result<(), StoreError>;
    /// Removes one registration; `false` when there was none of that name.
    async fn remove(&self, name: &str) -> Result<bool, StoreError>;
    /// Tells other replicas sharing this store that `name`'s spec was re-fetched.
    async fn announce_refresh(&self, _name: &str) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The store for this gateway's `state` backend: Redis when shared, else the file.
pub fn store_for(gateway: &Gateway) -> Arc<dyn RegistrationStore> {
    match &gateway.shared {
        Some(shared) => shared.registrations.clone(),
        None => Arc::new(FileStore::new(&gateway.config().data_dir)),
    }
}

/// The embedded store: `<data_dir>/registrations.json`.
pub struct FileStore {
    path: PathBuf,
    /// One change at a time: the file is read, changed and written whole.
    changes: tokio::sync::Mutex<()>,
}

impl FileStore {
    pub fn new(data_dir: &std::path::Path) -> Self {
        Self {
            path: data_dir.join("registrations.json"),
            changes: tokio::sync::Mutex::new(()),
        }
    }

    async fn save(&self, all: &[Registration]) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(all).map_err(|e| StoreError::Io(e.to_string()))?;
        let path = self.path.clone();
        // Blocking file I/O (fsync) off the runtime.
        tokio::task::spawn_blocking(move || write_atomically(&path, &bytes))
            .await
            .map_err(|e| StoreError::Io(e.to_string()))?
            .map_err(StoreError::Io)
    }
}

#[async_trait]
impl RegistrationStore for FileStore {
    async fn load(&self) -> Result<Vec<Registration>, StoreError> {
        match tokio::fs::read(&self.path).await {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                StoreError::Corrupt(format!(
                    "{} is not a valid registration file: {e}",
                    self.path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(StoreError::Io(format!(
                "cannot read {}: {e}",
                self.path.display()
            ))),
        }
    }

    async fn put(&self, registration: &Registration) -> Result<(), StoreError> {
        let _serial = self.changes.lock().await;
        let mut all = self.load().await?;
        all.retain(|r| r.name != registration.name);
        all.push(registration.clone());
        all.sort_by(|a, b| a.name.cmp(&b.name));
        self.save(&all).await
    }

    async fn remove(&self, name: &str) -> Result<bool, StoreError> {
        let _serial = self.changes.lock().await;
        let mut all = self.load().await?;
        let before = all.len();
        all.retain(|r| r.name != name);
        if all.len() == before {
            return Ok(false);
        }
        self.save(&all).await.map(|()| true)
    }
}

fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = path.with_extension("json.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    // Registrations can carry API credentials: readable by the gateway's user only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(&tmp)
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    #[cfg(unix)]
    {
        // `mode` only applies when the file is created; a leftover temp file keeps its
        // old mode unless set explicitly.
        use std::os::unix::fs::PermissionsExt;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    }
    file.write_all(bytes)
        .and_then(|_| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot replace {}: {e}", path.display()))?;
    // Make the rename itself durable.
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// The runtime registrations mounted in this process, with the config each came from.
#[derive(Default)]
pub struct Registrations {
    mounted: std::sync::Mutex<BTreeMap<String, OpenApiConfig>>,
}

impl Registrations {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, OpenApiConfig>> {
        self.mounted.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that registration `name` is mounted here from `config`.
    pub fn note(&self, name: &str, config: OpenApiConfig) {
        self.lock().insert(name.to_owned(), config);
    }

    /// Forgets registration `name` (it was removed).
    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    /// The config registration `name` was mounted from here, if any.
    pub fn get(&self, name: &str) -> Option<OpenApiConfig> {
        self.lock().get(name).cloned()
    }

    /// The registrations mounted here.
    pub fn names(&self) -> Vec<String> {
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
    fn still_wanted(self, gateway: &Gateway, name: &str, openapi: &OpenApiConfig) -> bool {
        let config = gateway.config();
        let in_config = config.upstreams.get(name);
        match self {
            Origin::Config => in_config.and_then(|u| u.openapi()) == Some(openapi),
            Origin::Stored => {
                in_config.is_none() && gateway.registrations.get(name).as_ref() == Some(openapi)
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
    gateway: &Arc<Gateway>,
    name: &str,
    config: OpenApiConfig,
    origin: Origin,
) -> Result<ImportReport, ImportError> {
    let (upstream, report) = OpenApiUpstream::load(name, config.clone()).await?;
    let mounted = Mounted::configured(&gateway.config(), name, Arc::new(upstream), "openapi");
    let wanted = gateway
        .mount_if(name.to_owned(), mounted, |gateway| {
            origin.still_wanted(gateway, name, &config)
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
    Ok(report)
}

/// Imports an OpenAPI upstream in the background: the one import lifecycle of the
/// config file's upstreams (at startup and on reload) and of stored registrations.
/// Until the spec is in, an upstream of that name that is serving keeps serving (and
/// keeps its previous spec if the new import fails); otherwise a [`Placeholder`]
/// stands in (state `starting`, then `down` with the error if the import fails).
pub async fn import_in_background(
    gateway: &Arc<Gateway>,
    name: String,
    mut openapi: OpenApiConfig,
    origin: Origin,
) {
    let serving = gateway
        .upstreams()
        .get(&name)
        .is_some_and(|m| m.upstream.connection() == Connection::Connected);
    let placeholder = if serving {
        None
    } else {
        let placeholder = Arc::new(Placeholder::new(name.clone()));
        let mounted = Mounted::configured(&gateway.config(), &name, placeholder.clone(), "openapi");
        let wanted = gateway
            .mount_if(name.clone(), mounted, |gateway| {
                origin.still_wanted(gateway, &name, &openapi)
            })
            .await;
        if !wanted {
            return;
        }
        Some(placeholder)
    };
    let gateway = gateway.clone();
    tokio::spawn(async move {
        if origin == Origin::Stored
            && let Err(refused) =
                confine_spec_path(spec_dir(&gateway).as_deref(), &mut openapi).await
        {
            tracing::error!(upstream = %name, error = %refused, "stored registration refused");
            if let Some(placeholder) = placeholder {
                placeholder.fail(refused);
            }
            return;
        }
        match import(&gateway, &name, openapi, origin).await {
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
pub async fn import_registration(gateway: &Arc<Gateway>, registration: Registration) {
    let Registration { name, openapi } = registration;
    gateway.registrations.note(&name, openapi.clone());
    import_in_background(gateway, name, openapi, Origin::Stored).await;
}

/// Removes a runtime registration from this process.
pub async fn unmount_registration(gateway: &Gateway, name: &str) -> bool {
    gateway.registrations.forget(name);
    gateway.unmount(name).await
}

/// Starts importing every OpenAPI upstream of the config file and every stored
/// registration, each in the background behind a placeholder. With a shared state
/// backend, also starts following the other replicas' registrations.
pub async fn start_imports(gateway: &Arc<Gateway>, store: &dyn RegistrationStore) {
    let config = gateway.config();
    for (name, upstream) in &config.upstreams {
        if let Some(openapi) = upstream.openapi() {
            import_in_background(gateway, name.clone(), openapi.clone(), Origin::Config).await;
        }
    }
    match store.load().await {
        Ok(registrations) => {
            for registration in registrations {
                if config.upstreams.contains_key(&registration.name) {
                    tracing::warn!(upstream = %registration.name, "stored registration ignored: the config file defines an upstream of that name");
                    continue;
                }
                import_registration(gateway, registration).await;
            }
        }
        Err(error) => tracing::error!(%error, "stored registrations could not be read"),
    }
    // Started after the stored set was noted, so its first reconcile finds those
    // registrations already underway.
    if let Some(shared) = &gateway.shared {
        tokio::spawn(crate::state::registrations::follow(
            Arc::downgrade(gateway),
            shared.registrations.clone(),
            gateway.stop_token(),
        ));
    }
}

/// Stands in for an upstream that is still importing, or whose import failed.
pub struct Placeholder {
    name: String,
    error: std::sync::Mutex<Option<String>>,
    changed: watch::Sender<u64>,
}

impl Placeholder {
    pub fn new(name: String) -> Self {
        Self {
            name,
            error: std::sync::Mutex::new(None),
            changed: watch::channel(0).0,
        }
    }

    pub(crate) fn fail(&self, error: String) {
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
    }

    fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[async_trait]
impl Upstream for Placeholder {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Arc<Vec<ToolDef>> {
        Arc::default()
    }

    fn tools_changed(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn connection(&self) -> Connection {
        if self.error().is_some() {
            Connection::Closed
        } else {
            Connection::Connecting
        }
    }

    fn last_error(&self) -> Option<String> {
        self.error()
    }

    async fn call(&self, _: &str, _: JsonObject, _: CallContext) -> Result<CallOutput, ToolError> {
        Err(ToolError::unavailable(
            &self.name,
            self.error()
                .unwrap_or_else(|| "its spec is still being imported".into()),
        ))
    }

    async fn check(&self, _: Duration) -> Result<(), ToolError> {
        Err(ToolError::unavailable(
            &self.name,
            self.error().unwrap_or_else(|| "still importing".into()),
        ))
    }

    async fn shutdown(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn file_store_round_trips_and_replaces_atomically() {
        let dir = std::env::temp_dir().join(format!("toolgate-store-{}", std::process::id()));
        let store = FileStore::new(&dir);
        assert_eq!(store.load().await.unwrap(), Vec::new());
        let one = Registration {
            name: "pets".into(),
            openapi: OpenApiConfig::from_url("https://example.com/openapi.json"),
        };
        store.put(&one).await.unwrap();
        assert_eq!(store.load().await.unwrap(), vec![one.clone()]);
        store.put(&one).await.unwrap();
        assert_eq!(
            store.load().await.unwrap(),
            vec![one.clone()],
            "put replaces"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("registrations.json"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(
                mode & 0o777,
                0o600,
                "credentials must not be world-readable"
            );
        }
        assert!(store.remove("pets").await.unwrap());
        assert!(!store.remove("pets").await.unwrap());
        assert_eq!(store.load().await.unwrap(), Vec::new());
        assert!(!dir.join("registrations.json.tmp").exists());
        std::fs::write(dir.join("registrations.json"), b"{not json").unwrap();
        assert!(
            store
                .load()
                .await
                .unwrap_err()
                .to_string()
                .contains("not a valid registration file")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
