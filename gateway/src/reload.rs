//! Hot reload: `toolgate serve` applies a changed config file without a restart and
//! without dropping sessions.
//!
//! **Triggers.** SIGHUP, and changes in the config file's *directory*: editors save by
//! writing a new file and renaming it over the old one, and Kubernetes updates a
//! mounted ConfigMap by swapping the `..data` symlink the file's path goes through;
//! a watch on the file itself would lose track after the first such change, a watch on
//! its directory sees every one. A change to another regular file there (a log written
//! beside the config) wakes nothing (see `concerns`); the other changes are debounced
//! ([`DEBOUNCE`]), and the file's content hash turns those that leave it as it was
//! (its own reads, a swap to the same content) into no-ops. The watcher is the
//! platform's native one (inotify, FSEvents, kqueue via `notify`); when it cannot start
//! (e.g. the inotify watch limit is reached) the file is read every [`POLL_EVERY`]
//! instead.
//!
//! **Validation first.** A reload parses and validates the whole file with the code
//! path startup uses (`Config::load`, `Policy::from_config`, and the authenticator
//! when credentials changed) before it touches anything: an invalid file is rejected
//! with a logged error naming the reason, and the running config keeps serving.
//!
//! **Applying.** [`Gateway::apply_config`] swaps config and policy together, unmounts
//! removed upstreams, starts added and changed ones and leaves the others running;
//! OpenAPI upstreams are imported in the background as at startup. API keys and JWT
//! settings are swapped in the running authenticator. Settings read once at startup
//! ([`crate::config::RESTART_ONLY`]: listen address, allowed hosts, listener limits,
//! metrics listener, body limit, data directory, admin settings, session store size and
//! idle TTL, shared state, telemetry) keep their running values, with a warning that
//! they need a restart.
//!
//! Outcomes are counted in `toolgate_config_reloads_total{outcome="ok"|"rejected"}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, UpstreamChanges, changed_tenants};
use crate::credentials::Authenticator;
use crate::gateway::Gateway;
use crate::policy::Policy;
use crate::registry::{self, Origin, Registry};

/// Quiet time after the last file event before the file is read: one save or one
/// ConfigMap update is a burst of events within a few milliseconds.
pub const DEBOUNCE: Duration = Duration::from_millis(300);
/// The longest a steady stream of events can put a reload off.
const MAX_DELAY: Duration = Duration::from_secs(2);
/// How often the file is read when the native watcher is unavailable.
pub const POLL_EVERY: Duration = Duration::from_secs(2);

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A change in the config file's directory: skipped when the file's content is
    /// the one last read.
    FileChanged,
    /// SIGHUP: always re-reads and applies.
    Signal,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::FileChanged => "file changed",
            Trigger::Signal => "SIGHUP",
        }
    }
}

/// What a reload did.
#[derive(Debug)]
pub enum Outcome {
    /// The file holds what was last read: nothing to do.
    Unchanged,
    /// The new config runs.
    Applied(Summary),
    /// The file was invalid (the reason); the running config was kept.
    Rejected(String),
}

/// What an applied reload changed.
#[derive(Debug, Default)]
pub struct Summary {
    pub upstreams: UpstreamChanges,
    /// Tenants added, removed or changed, by name.
    pub tenants: Vec<String>,
    /// API keys or JWT settings changed (the authenticator was replaced).
    pub credentials: bool,
    /// Settings that changed in the file but need a restart (running values kept).
    pub restart_needed: Vec<&'static str>,
    /// Whether anything at all differs from the running config.
    pub changed: bool,
}

impl Summary {
    /// One line saying what changed, for the reload history.
    pub fn describe(&self) -> String {
        if !self.changed {
            return "no setting changed".to_owned();
        }
        let mut parts = Vec::new();
        let names = |what: &str, list: &[String]| {
            (!list.is_empty()).then(|| format!("{what}: {}", list.join(", ")))
        };
        parts.extend(names("upstreams added", &self.upstreams.added));
        parts.extend(names("upstreams removed", &self.upstreams.removed));
        parts.extend(names("upstreams changed", &self.upstreams.changed));
        parts.extend(names("tenants changed", &self.tenants));
        if self.credentials {
            parts.push("credentials changed".to_owned());
        }
        if !self.restart_needed.is_empty() {
            parts.push(format!(
                "needs a restart: {}",
                self.restart_needed.join(", ")
            ));
        }
        if parts.is_empty() {
            parts.push("settings changed".to_owned());
        }
        parts.join("; ")
    }
}

/// How many reloads [`ReloadLog`] keeps.
pub const RELOADS_KEPT: usize = 20;

/// The last [`RELOADS_KEPT`] reloads that read a changed file (or ran on SIGHUP),
/// oldest first: what the console shows.
#[derive(Debug, Default)]
pub struct ReloadLog {
    entries: std::sync::Mutex<std::collections::VecDeque<ReloadRecord>>,
}

/// One reload in the [`ReloadLog`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadRecord {
    /// Seconds since the Unix epoch.
    pub at: u64,
    pub trigger: &'static str,
    /// Applied (`true`) or rejected, the running config kept (`false`).
    pub accepted: bool,
    /// What changed, or why the file was rejected.
    pub detail: String,
}

impl ReloadLog {
    fn record(&self, trigger: Trigger, accepted: bool, detail: String) {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= RELOADS_KEPT {
            entries.pop_front();
        }
        entries.push_back(ReloadRecord {
            at,
            trigger: trigger.as_str(),
            accepted,
            detail,
        });
    }

    /// The kept reloads, oldest first.
    pub fn entries(&self) -> Vec<ReloadRecord> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.iter().cloned().collect()
    }
}

/// Reloads one config file into a running gateway.
pub struct Reloader {
    gateway: Arc<Gateway>,
    /// OpenAPI upstreams added or changed by a reload are imported through it.
    registry: Arc<Registry>,
    /// Where each reload's outcome is kept for the console.
    log: Arc<ReloadLog>,
    path: PathBuf,
    authenticator: Authenticator,
    /// The hash of the content last read (applied or rejected). The lock also keeps
    /// reloads one at a time.
    last_seen: tokio::sync::Mutex<Option<[u8; 32]>>,
}

impl Reloader {
    /// Reloads `path` into the registry's gateway, recording outcomes in `log`.
    /// `authenticator` is the one the HTTP surfaces use: a reload that changes API keys
    /// or JWT settings swaps them in it.
    pub fn new(
        registry: Arc<Registry>,
        log: Arc<ReloadLog>,
        path: PathBuf,
        authenticator: Authenticator,
    ) -> Reloader {
        Reloader {
            gateway: registry.gateway.clone(),
            registry,
            log,
            path,
            authenticator,
            last_seen: tokio::sync::Mutex::new(None),
        }
    }

    /// Reads the file and, when it is valid and different, applies it; logs and counts
    /// the outcome.
    pub async fn reload(&self, trigger: Trigger) -> Outcome {
        let mut last_seen = self.last_seen.lock().await;
        let bytes = match tokio::fs::read(&self.path).await {
            Ok(bytes) => bytes,
            Err(error) => {
                return self.reject(
                    trigger,
                    format!("cannot read {}: {error}", self.path.display()),
                );
            }
        };
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        if trigger == Trigger::FileChanged && *last_seen == Some(hash) {
            return Outcome::Unchanged;
        }
        *last_seen = Some(hash);
        match self.apply(bytes).await {
            Ok(summary) => {
                // Log, then count: a client that sees the count can find the line.
                log_applied(trigger, &summary);
                self.log.record(trigger, true, summary.describe());
                self.gateway.metrics.record_config_reload("ok");
                Outcome::Applied(summary)
            }
            Err(reason) => self.reject(trigger, reason),
        }
    }

    fn reject(&self, trigger: Trigger, reason: String) -> Outcome {
        tracing::error!(
            path = %self.path.display(),
            trigger = trigger.as_str(),
            error = %reason,
            "config reload rejected; the running config is kept"
        );
        self.log.record(trigger, false, reason.clone());
        self.gateway.metrics.record_config_reload("rejected");
        Outcome::Rejected(reason)
    }

    /// Validates everything, then applies. Nothing changes unless it returns `Ok`.
    async fn apply(&self, bytes: Vec<u8>) -> Result<Summary, String> {
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("{} is not UTF-8 text", self.path.display()))?;
        if text.trim().is_empty() {
            // An empty file would parse as "all defaults" and drop every tenant and
            // upstream; it is far more likely a write caught halfway.
            return Err(format!(
                "{} is empty (caught in the middle of a write?)",
                self.path.display()
            ));
        }
        let mut config = Config::load_text(&self.path, &text).map_err(|e| e.to_string())?;
        let policy = Policy::from_config(&config).map_err(|e| format!("tenants: {e}"))?;
        let running = self.gateway.config();
        let restart_needed = config.restart_only_changes(&running);
        config.keep_restart_only(&running);
        let credentials = config.api_keys() != running.api_keys()
            || config.jwt != running.jwt
            || config.public_url != running.public_url;
        let authenticator = if credentials {
            Some(Authenticator::for_config(&config).await?)
        } else {
            None
        };
        let tenants = changed_tenants(&running, &config);
        let changed = config != *running;
        // Valid: from here on the new config is applied.
        let upstreams = if changed {
            self.gateway.apply_config(config, policy).await
        } else {
            UpstreamChanges::default()
        };
        if let Some(authenticator) = authenticator {
            self.authenticator.replace(authenticator);
        }
        let current = self.gateway.config();
        for name in upstreams.added.iter().chain(&upstreams.changed) {
            if let Some(openapi) = current
                .upstreams
                .get(name)
                .and_then(|u| u.openapi().cloned())
            {
                // A new one (or one whose last import failed) stands as a placeholder
                // meanwhile; a changed one keeps serving its previous spec until the new
                // one is in. An import a later reload made obsolete is dropped.
                registry::import_in_background(
                    &self.registry,
                    name.clone(),
                    openapi,
                    Origin::Config,
                )
                .await;
            }
        }
        if !tenants.is_empty() && upstreams.is_empty() {
            // With upstreams unchanged the catalog is complete: a pattern that matches
            // nothing now is worth a look. (New upstreams' tools are still on their way.)
            for (tenant, pattern) in self
                .gateway
                .policy()
                .unmatched_patterns(&self.gateway.catalog())
            {
                if tenants.contains(&tenant) {
                    tracing::warn!(%tenant, %pattern, "tenant pattern matches no tool in the catalog");
                }
            }
        }
        Ok(Summary {
            upstreams,
            tenants,
            credentials,
            restart_needed,
            changed,
        })
    }

    /// Reloads on every SIGHUP until `stop`. The handler is installed before this
    /// returns, so a SIGHUP sent afterwards never takes the default action (exit).
    #[cfg(unix)]
    pub fn reload_on_sighup(self: &Arc<Self>, stop: CancellationToken) -> Result<(), String> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangup = signal(SignalKind::hangup())
            .map_err(|e| format!("cannot handle SIGHUP (reload): {e}"))?;
        let reloader = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    got = hangup.recv() => if got.is_none() { return },
                }
                reloader.reload(Trigger::Signal).await;
            }
        });
        Ok(())
    }

    /// Watches the config file's directory until `stop` and reloads after changes
    /// (debounced). Falls back to reading the file every [`POLL_EVERY`] when the
    /// native watcher cannot start.
    pub fn watch(self: &Arc<Self>, stop: CancellationToken) {
        // Capacity 1: one pending wake-up stands for any number of events.
        let (wake, mut woken) = mpsc::channel::<()>(1);
        let watcher = match native_watcher(&self.path, wake.clone()) {
            Ok(watcher) => {
                tracing::info!(path = %self.path.display(), "watching the config file for changes (reload also on SIGHUP)");
                Some(watcher)
            }
            Err(error) => {
                tracing::warn!(
                    path = %self.path.display(),
                    %error,
                    every = ?POLL_EVERY,
                    "file watcher unavailable; reading the config file periodically instead"
                );
                tokio::spawn(poll(wake.clone(), stop.clone()));
                None
            }
        };
        drop(wake);
        let reloader = self.clone();
        tokio::spawn(async move {
            // Watching stops when the watcher is dropped, at the end of this task.
            let _watcher = watcher;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    got = woken.recv() => if got.is_none() { return },
                }
                let deadline = tokio::time::Instant::now() + MAX_DELAY;
                while tokio::time::Instant::now() < deadline {
                    match tokio::time::timeout(DEBOUNCE, woken.recv()).await {
                        Ok(Some(())) => continue,
                        Ok(None) => return,
                        Err(_) => break,
                    }
                }
                if stop.is_cancelled() {
                    return;
                }
                reloader.reload(Trigger::FileChanged).await;
            }
        });
    }
}

fn log_applied(trigger: Trigger, summary: &Summary) {
    if !summary.restart_needed.is_empty() {
        tracing::warn!(
            settings = ?summary.restart_needed,
            "changed in the config file but applied only at startup: restart to use them; \
             the running values are kept"
        );
    }
    if !summary.changed {
        tracing::info!(
            trigger = trigger.as_str(),
            "config file re-read: no setting changed"
        );
        return;
    }
    tracing::info!(
        trigger = trigger.as_str(),
        upstreams_added = ?summary.upstreams.added,
        upstreams_removed = ?summary.upstreams.removed,
        upstreams_changed = ?summary.upstreams.changed,
        tenants_changed = ?summary.tenants,
        credentials_changed = summary.credentials,
        "config reloaded"
    );
}

/// Starts the native watcher on the config file's directory and, when the path leads
/// through a symlink into another directory, on that one too (best effort).
fn native_watcher(
    path: &Path,
    wake: mpsc::Sender<()>,
) -> Result<notify::RecommendedWatcher, String> {
    use notify::{RecursiveMode, Watcher};
    let mut relevance = Relevance::new(path.to_path_buf());
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if relevance.wakes(&event) {
            // Full means a wake-up is already pending.
            let _ = wake.try_send(());
        }
    })
    .map_err(|e| e.to_string())?;
    let dir = directory_of(path);
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
    if let Ok(target) = std::fs::canonicalize(path) {
        let target_dir = directory_of(&target);
        if std::fs::canonicalize(&dir).ok().as_deref() != Some(target_dir.as_path())
            && let Err(error) = watcher.watch(&target_dir, RecursiveMode::NonRecursive)
        {
            tracing::debug!(dir = %target_dir.display(), %error, "symlink target's directory not watched");
        }
    }
    Ok(watcher)
}

/// Which watched events can concern the config file ([`concerns`]), remembering the
/// paths found not to: a log written next to the config file sends an event per
/// write, and looking at the file (two `stat`s) each time cost about as many system
/// calls as the tool calls being logged. Only a change of what is where (a file
/// created, removed, renamed, linked, its metadata changed) can make such a path the
/// config file, so any event other than a write forgets what was remembered.
struct Relevance {
    config: PathBuf,
    not_config: std::collections::HashSet<PathBuf>,
}

/// Paths remembered at most (forgotten all at once beyond).
const NOT_CONFIG_KEPT: usize = 64;

impl Relevance {
    fn new(config: PathBuf) -> Relevance {
        Relevance {
            config,
            not_config: std::collections::HashSet::new(),
        }
    }

    fn wakes(&mut self, event: &notify::Result<notify::Event>) -> bool {
        use notify::EventKind;
        use notify::event::{AccessKind, AccessMode, ModifyKind};
        let Ok(event) = event else {
            // An error (e.g. dropped events on overflow): look at the file anyway.
            self.not_config.clear();
            return true;
        };
        let written = match event.kind {
            // Reads (ours included) change nothing; a write that finished does.
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => return false,
            EventKind::Modify(ModifyKind::Data(_)) => true,
            _ => false,
        };
        if !written {
            self.not_config.clear();
        }
        if event.paths.is_empty() {
            return true;
        }
        for changed in &event.paths {
            if written && self.not_config.contains(changed) {
                continue;
            }
            if concerns(changed, &self.config) {
                return true;
            }
            if self.not_config.len() >= NOT_CONFIG_KEPT {
                self.not_config.clear();
            }
            self.not_config.insert(changed.clone());
        }
        false
    }
}

/// Whether a change at `changed` (a path in a watched directory) can concern the config
/// file at `config`. Only one kind of change cannot: to a regular file that is not the
/// one `config` leads to now, such as a log written next to the config file, which
/// would otherwise wake the reloader on every line. Symlinks and directories decide
/// where `config` leads (a Kubernetes `..data` swap), and a path that is gone may have
/// been one: those count.
fn concerns(changed: &Path, config: &Path) -> bool {
    let Ok(entry) = std::fs::symlink_metadata(changed) else {
        return true;
    };
    if !entry.file_type().is_file() {
        return true;
    }
    std::fs::metadata(config).map_or(true, |target| same_file(&entry, &target))
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

/// Without inode numbers every file may be the config file.
#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
}

fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The fallback: a wake-up every [`POLL_EVERY`]; the hash check makes the quiet ones
/// cheap.
async fn poll(wake: mpsc::Sender<()>, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(POLL_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if wake.send(()).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "reload-key-0123456789abcdef";

    /// A log written next to the config file does not wake the reloader; the config
    /// file, whatever path or link leads to it, and the links and directories that
    /// decide where it leads do.
    #[cfg(unix)]
    #[test]
    fn only_changes_that_can_concern_the_config_file_wake_the_reloader() {
        let dir = std::env::temp_dir().join(format!("toolgate-concerns-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("..2026_11_27")).unwrap();
        let real = dir.join("..2026_11_27/config.yaml");
        std::fs::write(&real, "tenants: {}\n").unwrap();
        std::os::unix::fs::symlink("..2026_11_27", dir.join("..data")).unwrap();
        let config = dir.join("config.yaml");
        std::os::unix::fs::symlink("..data/config.yaml", &config).unwrap();
        let log = dir.join("toolgate.log");
        std::fs::write(&log, "a line\n").unwrap();
        let hard_link = dir.join("same-inode.yaml");
        std::fs::hard_link(&real, &hard_link).unwrap();

        assert!(!concerns(&log, &config), "a log beside the config file");
        assert!(
            concerns(&real, &config),
            "the file the config path leads to"
        );
        assert!(concerns(&hard_link, &config), "another name of that file");
        assert!(
            concerns(&config, &config),
            "the config path itself (a symlink)"
        );
        assert!(concerns(&dir.join("..data"), &config), "the swapped link");
        assert!(
            concerns(&dir.join("..2026_11_27"), &config),
            "a data directory"
        );
        assert!(
            concerns(&dir.join("gone.yaml"), &config),
            "a path that is gone"
        );
        // Once the config path leads elsewhere, the old file is just another file.
        let other = dir.join("other.yaml");
        std::fs::write(&other, "tenants: {}\n").unwrap();
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink("other.yaml", &config).unwrap();
        assert!(!concerns(&real, &config), "the file the config path left");
        assert!(concerns(&other, &config), "the file it leads to now");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Writes to a path found not to be the config file are not looked at again; a
    /// change of what is where makes every path count again.
    #[cfg(unix)]
    #[test]
    fn writes_to_a_file_found_not_to_be_the_config_are_not_looked_at_again() {
        use notify::event::{AccessKind, AccessMode, CreateKind, DataChange, ModifyKind};
        use notify::{Event, EventKind};
        let dir = std::env::temp_dir().join(format!("toolgate-relevance-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.yaml");
        std::fs::write(&config, "tenants: {}\n").unwrap();
        let log = dir.join("toolgate.log");
        std::fs::write(&log, "a line\n").unwrap();
        let event = |kind, path: &Path| Ok(Event::new(kind).add_path(path.to_path_buf()));
        let written = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let mut relevance = Relevance::new(config.clone());

        assert!(!relevance.wakes(&event(written, &log)), "a log line");
        assert!(relevance.not_config.contains(&log), "remembered");
        assert!(relevance.wakes(&event(written, &config)), "the config file");
        assert!(relevance.wakes(&event(closed, &config)), "the config file");
        // The log becomes the config file (a rename over it): the rename forgets.
        std::fs::rename(&log, &config).unwrap();
        let renamed = EventKind::Modify(ModifyKind::Name(notify::event::RenameMode::Both));
        assert!(
            relevance.wakes(&Ok(Event::new(renamed)
                .add_path(log.clone())
                .add_path(config.clone())))
        );
        assert!(relevance.not_config.is_empty(), "forgotten");
        assert!(relevance.wakes(&event(written, &config)), "the config file");
        // A new file: looked at, found not to be the config, remembered.
        std::fs::write(&log, "again\n").unwrap();
        assert!(!relevance.wakes(&event(EventKind::Create(CreateKind::File), &log)));
        assert!(!relevance.wakes(&event(written, &log)));
        assert!(relevance.wakes(&Err(notify::Error::generic("overflow"))));
        assert!(relevance.not_config.is_empty(), "an error forgets too");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_reload_history_keeps_the_last_ones() {
        let log = ReloadLog::default();
        for i in 0..RELOADS_KEPT + 5 {
            log.record(Trigger::Signal, i % 2 == 0, format!("reload {i}"));
        }
        let entries = log.entries();
        assert_eq!(entries.len(), RELOADS_KEPT);
        assert_eq!(entries[0].detail, "reload 5");
        assert_eq!(
            entries.last().map(|e| e.detail.as_str()),
            Some(format!("reload {}", RELOADS_KEPT + 4).as_str())
        );
        assert_eq!(Summary::default().describe(), "no setting changed");
    }

    fn tenants_config(allow: &str) -> String {
        format!(
            "tenants:\n  team:\n    api_keys: ['{}']\n    allow: ['{allow}']\n",
            crate::credentials::hash_key(KEY)
        )
    }

    struct Setup {
        dir: PathBuf,
        gateway: Arc<Gateway>,
        authenticator: Authenticator,
        reloader: Arc<Reloader>,
    }

    impl Drop for Setup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    async fn setup(label: &str, text: &str) -> Setup {
        let dir =
            std::env::temp_dir().join(format!("toolgate-reload-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("toolgate.yaml");
        std::fs::write(&path, text).unwrap();
        let config = Config::load(&path).unwrap();
        let authenticator = Authenticator::new(config.api_keys(), None).await.unwrap();
        let gateway = Gateway::start(config, None).unwrap();
        let registry = Registry::new(gateway.clone());
        let reloader = Arc::new(Reloader::new(
            registry,
            Arc::default(),
            path,
            authenticator.clone(),
        ));
        Setup {
            dir,
            gateway,
            authenticator,
            reloader,
        }
    }

    fn allow_of(gateway: &Gateway) -> Vec<String> {
        gateway.config().tenants["team"].allow.clone()
    }

    #[tokio::test]
    async fn valid_edits_apply_and_invalid_ones_are_rejected() {
        let s = setup("apply", &tenants_config("a__*")).await;
        let path = s.dir.join("toolgate.yaml");
        // Same content: a file event is a no-op.
        assert!(matches!(
            s.reloader.reload(Trigger::FileChanged).await,
            Outcome::Applied(Summary { changed: false, .. })
        ));
        assert!(matches!(
            s.reloader.reload(Trigger::FileChanged).await,
            Outcome::Unchanged
        ));

        std::fs::write(&path, tenants_config("b__*")).unwrap();
        match s.reloader.reload(Trigger::FileChanged).await {
            Outcome::Applied(summary) => {
                assert_eq!(summary.tenants, ["team"]);
                assert!(!summary.credentials);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(allow_of(&s.gateway), ["b__*"]);

        for broken in [
            String::new(),
            "tenants: [unclosed\n".to_owned(),
            format!("{}colour: blue\n", tenants_config("c__*")),
            tenants_config("c__[").to_owned(),
        ] {
            std::fs::write(&path, &broken).unwrap();
            match s.reloader.reload(Trigger::FileChanged).await {
                Outcome::Rejected(reason) => assert!(!reason.is_empty()),
                other => panic!("{broken}: {other:?}"),
            }
            assert_eq!(allow_of(&s.gateway), ["b__*"], "{broken}");
        }
        let metrics = s.gateway.metrics.render();
        assert!(
            metrics.contains(r#"toolgate_config_reloads_total{outcome="rejected"} 4"#),
            "{metrics}"
        );
        assert!(
            metrics.contains(r#"toolgate_config_reloads_total{outcome="ok"} 2"#),
            "{metrics}"
        );
        s.gateway.shutdown().await;
    }

    #[tokio::test]
    async fn keys_reload_and_restart_only_settings_are_kept() {
        let s = setup("keys", &tenants_config("*")).await;
        let path = s.dir.join("toolgate.yaml");
        let other = "another-key-0123456789abcdef";
        let text = format!(
            "listen: 127.0.0.1:1\ntenants:\n  team:\n    api_keys: ['{}']\n",
            crate::credentials::hash_key(other)
        );
        std::fs::write(&path, text).unwrap();
        match s.reloader.reload(Trigger::Signal).await {
            Outcome::Applied(summary) => {
                assert!(summary.credentials);
                assert_eq!(summary.restart_needed, ["listen"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.gateway.config().listen, "127.0.0.1:8080");
        assert!(
            s.authenticator
                .authenticate(Some(&format!("Bearer {KEY}")))
                .await
                .is_err()
        );
        assert_eq!(
            s.authenticator
                .authenticate(Some(&format!("Bearer {other}")))
                .await
                .map(|identity| identity.map(|i| i.tenant)),
            Ok(Some("team".into()))
        );
        s.gateway.shutdown().await;
    }

    #[tokio::test]
    async fn a_missing_file_is_rejected() {
        let s = setup("missing", &tenants_config("*")).await;
        std::fs::remove_file(s.dir.join("toolgate.yaml")).unwrap();
        assert!(matches!(
            s.reloader.reload(Trigger::Signal).await,
            Outcome::Rejected(_)
        ));
        assert_eq!(allow_of(&s.gateway), ["*"]);
        s.gateway.shutdown().await;
    }
}
