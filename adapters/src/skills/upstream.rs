//! [`SkillsUpstream`]: skill packages behind the [`Upstream`] contract. A background
//! task scans the paths, then rescans after every change it is told of (see
//! [`super::watch`]); each scan that differs from the last replaces the lists at once
//! and bumps `tools_changed`. Reads go to the disk every time, so a client always gets
//! the current content.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::config::SkillsConfig;
use super::files;
use super::listing;
use super::scan::{self, Limits, SKILL_FILE, Scan, Skill};
use super::watch as watching;
use crate::{
    CallContext, CallOutput, Connection, JsonObject, Offerings, RpcError, ToolDef, ToolError,
    Upstream,
};

/// Changes closer together than this are handled by one rescan (an editor's save is
/// several events; `git checkout` is hundreds).
const DEBOUNCE: Duration = Duration::from_millis(150);

/// What one scan serves.
#[derive(Default)]
struct Listing {
    scan: Scan,
    tools: Arc<Vec<ToolDef>>,
    offerings: Arc<Offerings>,
}

/// Skill packages as prompts, resources and tools.
pub struct SkillsUpstream {
    name: String,
    paths: Vec<PathBuf>,
    limits: Limits,
    listing: arc_swap::ArcSwap<Listing>,
    tools_tx: watch::Sender<u64>,
    scanned: std::sync::atomic::AtomicBool,
    closed: std::sync::atomic::AtomicBool,
    last_error: Mutex<Option<String>>,
    stop: CancellationToken,
}

impl SkillsUpstream {
    /// Starts the upstream: the first scan and the watching run in the background
    /// (`connection()` is `Connecting` until the first scan is done). Relative paths
    /// are taken as they are (the gateway resolves them against the config file).
    pub fn spawn(name: impl Into<String>, config: &SkillsConfig) -> Arc<Self> {
        Self::spawn_with_limits(name, config, Limits::default())
    }

    /// [`SkillsUpstream::spawn`] with other caps.
    pub fn spawn_with_limits(
        name: impl Into<String>,
        config: &SkillsConfig,
        limits: Limits,
    ) -> Arc<Self> {
        let upstream = Arc::new(Self {
            name: name.into(),
            paths: config.paths.iter().map(PathBuf::from).collect(),
            limits,
            listing: arc_swap::ArcSwap::default(),
            tools_tx: watch::channel(0).0,
            scanned: Default::default(),
            closed: Default::default(),
            last_error: Mutex::default(),
            stop: CancellationToken::new(),
        });
        tokio::spawn(run(Arc::downgrade(&upstream), upstream.stop.clone()));
        upstream
    }

    fn listing(&self) -> Arc<Listing> {
        self.listing.load_full()
    }

    fn skill(&self, name: &str) -> Option<Skill> {
        self.listing().scan.skills.get(name).cloned()
    }

    /// Scans now and publishes the result when it differs from the last one. Returns
    /// the directories the scan looked into (`None` when the scan could not run).
    async fn rescan(&self) -> Option<Vec<PathBuf>> {
        let (paths, limits) = (self.paths.clone(), self.limits);
        let mut scan = match tokio::task::spawn_blocking(move || scan::scan(&paths, &limits)).await
        {
            Ok(scan) => scan,
            Err(error) => {
                tracing::error!(upstream = %self.name, %error, "skills scan failed");
                return None;
            }
        };
        let dirs = std::mem::take(&mut scan.dirs);
        let previous = self.listing();
        // Only the run loop scans, so reading the flag now and setting it once the
        // lists are published cannot race; `Connected` must never come before them.
        let first = !self.scanned.load(std::sync::atomic::Ordering::Acquire);
        if !first && previous.scan == scan {
            return Some(dirs);
        }
        if first || previous.scan.problems != scan.problems {
            for problem in &scan.problems {
                tracing::warn!(upstream = %self.name, "{problem}");
            }
        }
        if first || previous.scan.errors != scan.errors {
            for error in &scan.errors {
                tracing::error!(upstream = %self.name, "{error}");
            }
        }
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) =
            (!scan.errors.is_empty()).then(|| scan.errors.join("; "));
        let files: usize = scan.skills.values().map(|s| s.files.len()).sum();
        tracing::info!(upstream = %self.name, skills = scan.skills.len(), files, "skills scanned");
        let listing = Listing {
            tools: Arc::new(listing::tools(&scan)),
            offerings: Arc::new(listing::offerings(&scan)),
            scan,
        };
        self.listing.store(Arc::new(listing));
        self.scanned
            .store(true, std::sync::atomic::Ordering::Release);
        self.tools_tx.send_modify(|v| *v += 1);
        Some(dirs)
    }

    /// SKILL.md's current text (read now, not at scan time).
    async fn skill_md(&self, skill: &Skill) -> Result<String, String> {
        let (dir, max) = (skill.dir.clone(), self.limits.max_file_bytes);
        bounded_read(move || {
            let path = scan::inside(&dir, SKILL_FILE).ok_or_else(|| {
                format!(
                    "{SKILL_FILE} is gone, not a regular file, or a link leading out of the skill"
                )
            })?;
            files::read_inside(&dir, &path, max)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .map_err(|reason| format!("{SKILL_FILE} not read: {reason}"))
        })
        .await
        .and_then(|read| read)
    }

    async fn read_resource(&self, uri: &str) -> Result<Value, RpcError> {
        let not_found = || RpcError {
            code: crate::codes::RESOURCE_NOT_FOUND,
            message: "Resource not found".into(),
            data: Some(json!({"uri": uri})),
        };
        let (name, parts) = files::parse_uri(uri).ok_or_else(not_found)?;
        let skill = self.skill(&name).ok_or_else(not_found)?;
        let (owned_uri, max) = (uri.to_owned(), self.limits.max_file_bytes);
        let read = bounded_read(move || {
            let path = files::resolve(&skill.dir, &parts).ok_or(None)?;
            files::read_content(&skill.dir, &path, &owned_uri, max).map_err(Some)
        })
        .await
        .map_err(internal)?;
        match read {
            Ok(content) => Ok(json!({"contents": [content]})),
            Err(None) => Err(not_found()),
            Err(Some(reason)) => Err(internal(format!("cannot read '{uri}': {reason}"))),
        }
    }

    async fn get_prompt(&self, name: &str) -> Result<Value, RpcError> {
        let skill = self.skill(name).ok_or_else(|| RpcError {
            code: crate::codes::INVALID_PARAMS,
            message: format!("Unknown prompt: {name}"),
            data: None,
        })?;
        let text = self.skill_md(&skill).await.map_err(internal)?;
        Ok(listing::prompt_result(&skill, text))
    }
}

/// Runs a blocking file read off the runtime, waiting for it at most a little over
/// [`files::READ_TIME`] (the read checks its own deadline between chunks; this bounds
/// the wait even when one read call stalls, e.g. on a hung network mount).
async fn bounded_read<T: Send + 'static>(
    read: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let wait = files::READ_TIME + Duration::from_secs(1);
    match tokio::time::timeout(wait, tokio::task::spawn_blocking(read)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("reading the file took longer than {wait:?}")),
    }
}

fn internal(message: String) -> RpcError {
    RpcError {
        code: crate::codes::INTERNAL_ERROR,
        message,
        data: None,
    }
}

/// Scans, then rescans on every change until `stop` (or until the upstream is gone).
async fn run(upstream: Weak<SkillsUpstream>, stop: CancellationToken) {
    let Some(name) = upstream.upgrade().map(|u| u.name.clone()) else {
        return;
    };
    let (wake, mut woken) = mpsc::channel::<()>(1);
    let mut watch = watching::Watch::new(&name, wake);
    // Rescans left before waiting for a change (one more after new directories were
    // watched, bounded so a tree that keeps growing cannot spin the loop).
    let mut again = 0u8;
    loop {
        let scanned = match upstream.upgrade() {
            Some(upstream) => upstream.rescan().await,
            None => return,
        };
        let added = match scanned {
            Some(dirs) => watch.set(&dirs),
            // The scan itself failed (it never should): try again on the next tick.
            None => {
                watch.poll = true;
                false
            }
        };
        if added && again == 0 {
            again = 1;
            continue;
        }
        again = 0;
        let poll = watch.poll;
        tokio::select! {
            _ = stop.cancelled() => return,
            got = woken.recv() => if got.is_none() { return },
            _ = tokio::time::sleep(watching::POLL_EVERY), if poll => {}
        }
        // Let a burst of events settle, then drop the wake-up they left behind.
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(DEBOUNCE) => {}
        }
        let _ = woken.try_recv();
    }
}

#[async_trait]
impl Upstream for SkillsUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Arc<Vec<ToolDef>> {
        self.listing().tools.clone()
    }

    fn tools_changed(&self) -> watch::Receiver<u64> {
        self.tools_tx.subscribe()
    }

    fn offerings(&self) -> Arc<Offerings> {
        self.listing().offerings.clone()
    }

    fn connection(&self) -> Connection {
        use std::sync::atomic::Ordering;
        if self.closed.load(Ordering::Acquire) {
            Connection::Closed
        } else if self.scanned.load(Ordering::Acquire) {
            Connection::Connected
        } else {
            Connection::Connecting
        }
    }

    fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn call(
        &self,
        tool: &str,
        _arguments: JsonObject,
        ctx: CallContext,
    ) -> Result<CallOutput, ToolError> {
        let skill = self.skill(tool).ok_or_else(|| {
            ToolError::NotFound(format!(
                "skill '{tool}' not found on upstream '{}': list the tools again",
                self.name
            ))
        })?;
        let limit = ctx.remaining();
        let text = tokio::select! {
            _ = ctx.cancel.cancelled() => return Err(ToolError::cancelled(tool)),
            _ = tokio::time::sleep(limit) => return Err(ToolError::timeout(&self.name, tool, limit)),
            text = self.skill_md(&skill) => text,
        };
        let text = text.map_err(|reason| {
            ToolError::Failed(format!(
                "skill '{tool}' could not be loaded: {reason}; fix the file or try again"
            ))
        })?;
        Ok(CallOutput::new(listing::tool_result(&skill, text)))
    }

    async fn check(&self, timeout: Duration) -> Result<(), ToolError> {
        let paths = self.paths.clone();
        let probe = tokio::task::spawn_blocking(move || {
            paths
                .iter()
                .find_map(|path| {
                    std::fs::read_dir(path)
                        .err()
                        .map(|e| format!("cannot read skills path {}: {e}", path.display()))
                })
                .map_or(Ok(()), Err)
        });
        match tokio::time::timeout(timeout, probe).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(reason))) => Err(ToolError::Unavailable(reason)),
            Ok(Err(join)) => Err(ToolError::Unavailable(join.to_string())),
            Err(_) => Err(ToolError::Unavailable(format!(
                "reading the skills paths took longer than {} ms",
                timeout.as_millis()
            ))),
        }
    }

    async fn shutdown(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.stop.cancel();
    }

    async fn forward(
        &self,
        method: &str,
        params: Option<Value>,
        _ctx: CallContext,
    ) -> Result<Result<Value, RpcError>, ToolError> {
        let param = |key: &str| {
            params
                .as_ref()
                .and_then(|p| p.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let missing = |key: &str| RpcError {
            code: crate::codes::INVALID_PARAMS,
            message: format!("{method} needs a string `{key}`"),
            data: None,
        };
        Ok(match method {
            "prompts/get" => match param("name") {
                Some(name) => self.get_prompt(&name).await,
                None => Err(missing("name")),
            },
            "resources/read" => match param("uri") {
                Some(uri) => self.read_resource(&uri).await,
                None => Err(missing("uri")),
            },
            other => Err(RpcError {
                code: crate::codes::METHOD_NOT_FOUND,
                message: format!("Method not found: {other}"),
                data: None,
            }),
        })
    }
}
