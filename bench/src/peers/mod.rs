//! Peer gateways: the bench's MCP call through another gateway a user would pick, next
//! to toolgate's, in the same interleaved rounds. Two peers install from PyPI: IBM
//! ContextForge and the LiteLLM proxy. Each lives in a venv of its own (never the
//! project's `.venv`), made by `toolgate-bench peers-install` from the exact pins in
//! `bench/peers/requirements-<peer>.txt`; a peer not installed is skipped with a
//! one-line notice, so nothing here is needed by CI.
//!
//! Every peer is started by the bench on 127.0.0.1 in a process group of its own (its
//! CPU is the whole group's, its workers stopped with it), fronting the bench's own MCP
//! server, with the least auth it accepts, telemetry and fetches off, and a proxy that
//! goes nowhere for any request it would still send off the machine. Before a peer is
//! measured, its answer to the call must equal the upstream's own.

mod contextforge;
mod litellm;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::client::McpHttp;
use crate::proc::{ProcGroup, TempDir, group_cpu_time};

/// A gateway the bench can compare with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PeerKind {
    ContextForge,
    LiteLlm,
}

impl PeerKind {
    pub(crate) const ALL: [PeerKind; 2] = [PeerKind::ContextForge, PeerKind::LiteLlm];

    /// The name in paths and on the command line.
    pub(crate) fn slug(self) -> &'static str {
        match self {
            PeerKind::ContextForge => "contextforge",
            PeerKind::LiteLlm => "litellm",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            PeerKind::ContextForge => "ContextForge",
            PeerKind::LiteLlm => "LiteLLM",
        }
    }

    /// The PyPI distribution whose version the report shows.
    fn distribution(self) -> &'static str {
        match self {
            PeerKind::ContextForge => "mcp_contextforge_gateway",
            PeerKind::LiteLlm => "litellm",
        }
    }

    /// The venv: `$TOOLGATE_BENCH_PEERS/<slug>-venv`, default `target/bench-peers/`
    /// in the workspace.
    pub(crate) fn venv(self) -> PathBuf {
        peers_dir().join(format!("{}-venv", self.slug()))
    }

    fn requirements(self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("peers")
            .join(format!("requirements-{}.txt", self.slug()))
    }

    /// The installed version, read from the venv's `*.dist-info` (no Python started);
    /// `None` when the peer is not installed.
    pub(crate) fn installed_version(self) -> Option<String> {
        let lib = self.venv().join("lib");
        let prefix = format!("{}-", self.distribution());
        for python in std::fs::read_dir(lib).ok()?.flatten() {
            let site = python.path().join("site-packages");
            let Ok(entries) = std::fs::read_dir(site) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(version) = name
                    .strip_prefix(&prefix)
                    .and_then(|rest| rest.strip_suffix(".dist-info"))
                {
                    return Some(version.to_owned());
                }
            }
        }
        None
    }
}

fn peers_dir() -> PathBuf {
    match std::env::var_os("TOOLGATE_BENCH_PEERS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-peers"),
    }
}

/// A running peer, ready to be called: stopped (its whole process group) on drop.
pub(crate) struct Peer {
    pub kind: PeerKind,
    pub version: String,
    /// The streamable-HTTP MCP endpoint that exposes the upstream's tool.
    pub mcp_url: String,
    /// What the peer requires on every MCP request (`Authorization: Bearer …`).
    pub bearer: String,
    /// The upstream's tool under the peer's own name for it.
    pub tool: String,
    group: ProcGroup,
    dir: TempDir,
}

impl Peer {
    /// CPU time of the peer's whole process group so far.
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        group_cpu_time(self.group.pgid())
    }

    pub(crate) fn row_label(&self) -> String {
        format!("MCP via {} {} (peer)", self.kind.label(), self.version)
    }

    fn log_tail(&self) -> String {
        log_tail(self.dir.path())
    }
}

/// What starting a peer came to.
pub(crate) enum Started {
    Ready(Box<Peer>),
    /// Not installed, or installed and failed to start: one line saying which and why.
    Skipped(String),
}

/// Starts `kind` in front of the MCP server at `upstream_mcp` (whose tool is `tool`)
/// and checks that its answer to `tools/call` has the same content as the upstream's.
pub(crate) async fn start(kind: PeerKind, upstream_mcp: &str, tool: &str) -> Started {
    let Some(version) = kind.installed_version() else {
        return Started::Skipped(format!(
            "{} not installed in {} (`toolgate-bench peers-install {}`): its rows are skipped",
            kind.label(),
            kind.venv().display(),
            kind.slug()
        ));
    };
    let started = match kind {
        PeerKind::ContextForge => contextforge::start(kind, version, upstream_mcp, tool).await,
        PeerKind::LiteLlm => litellm::start(kind, version, upstream_mcp, tool).await,
    };
    let peer = match started {
        Ok(peer) => peer,
        Err(error) => {
            return Started::Skipped(format!(
                "{} is installed but did not start: {}; its rows are skipped",
                kind.label(),
                one_line(&format!("{error:#}"))
            ));
        }
    };
    match same_answer(&peer, upstream_mcp, tool).await {
        Ok(()) => Started::Ready(Box::new(peer)),
        Err(error) => Started::Skipped(format!(
            "{} answered differently from the upstream: {}; its rows are skipped (log: {})",
            kind.label(),
            one_line(&format!("{error:#}")),
            one_line(&peer.log_tail())
        )),
    }
}

/// The call's `content` through the peer equals the upstream's own: the same tool is
/// being measured.
async fn same_answer(peer: &Peer, upstream_mcp: &str, tool: &str) -> Result<()> {
    let arguments = json!({"message": "hi"});
    let call = |name: &str| json!({"name": name, "arguments": arguments});
    let mut direct = McpHttp::connect(upstream_mcp, tool, arguments.clone(), None).await?;
    let (expected, _, _) = direct.request("tools/call", call(tool)).await?;
    let mut via = McpHttp::connect(
        &peer.mcp_url,
        &peer.tool,
        arguments.clone(),
        Some(&peer.bearer),
    )
    .await
    .context("MCP session with the peer")?;
    let (got, _, _) = via
        .request("tools/call", call(&peer.tool))
        .await
        .context("tools/call through the peer")?;
    if got.get("content") != expected.get("content") || got.get("isError") == Some(&json!(true)) {
        bail!(
            "content {} through the peer, {} directly",
            got.get("content").unwrap_or(&Value::Null),
            expected.get("content").unwrap_or(&Value::Null)
        );
    }
    Ok(())
}

/// The environment every peer runs in: its own home (nothing read from or written to
/// the user's), and an HTTP(S) proxy on a closed local port for anything but loopback,
/// so a fetch or a report the settings did not turn off fails on this machine instead
/// of leaving it.
fn base_command(program: &Path, dir: &Path) -> Result<Command> {
    let log = std::fs::File::create(dir.join("peer.log"))?;
    let mut cmd = Command::new(program);
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("LANG", "C.UTF-8")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("ALL_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    Ok(cmd)
}

fn log_tail(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("peer.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 600 {
        let cut: String = flat.chars().take(600).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// Waits until `GET url` answers 200, the group's leader dies, or `timeout` passes.
async fn wait_ready(group: &mut ProcGroup, url: &str, dir: &Path, timeout: Duration) -> Result<()> {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Err(error) = group.check_alive() {
            bail!("{error}; log:\n{}", log_tail(dir));
        }
        if http
            .get(url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "not ready within {timeout:?} ({url}); log:\n{}",
                log_tail(dir)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A secret the peer accepts as strong: 32 random bytes as hex.
fn random_hex() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `toolgate-bench peers-install [contextforge] [litellm]`: a venv per peer under
/// `$TOOLGATE_BENCH_PEERS` (default `target/bench-peers`), filled from the pinned
/// requirements with the ordinary `pip`. Python: `$TOOLGATE_BENCH_PYTHON`, else the
/// first of `python3.12`, `python3.13` on `PATH` (ContextForge 1.1.0 needs
/// 3.12 or 3.13).
pub(crate) fn install(args: &[String]) -> Result<()> {
    let kinds: Vec<PeerKind> = if args.is_empty() {
        PeerKind::ALL.to_vec()
    } else {
        args.iter()
            .map(|a| {
                PeerKind::ALL
                    .into_iter()
                    .find(|k| k.slug() == a)
                    .with_context(|| format!("unknown peer '{a}' (contextforge, litellm)"))
            })
            .collect::<Result<_>>()?
    };
    let python = match std::env::var_os("TOOLGATE_BENCH_PYTHON") {
        Some(python) => PathBuf::from(python),
        None => ["python3.12", "python3.13"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| {
                Command::new(p)
                    .arg("--version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .context("no python3.12 or python3.13 on PATH (set TOOLGATE_BENCH_PYTHON)")?,
    };
    std::fs::create_dir_all(peers_dir())?;
    for kind in kinds {
        let venv = kind.venv();
        eprintln!("peers-install: {} into {}", kind.label(), venv.display());
        run_bounded(
            Command::new(&python).arg("-m").arg("venv").arg(&venv),
            Duration::from_secs(120),
        )?;
        run_bounded(
            Command::new(venv.join("bin/pip"))
                .args([
                    "install",
                    "--require-virtualenv",
                    "--disable-pip-version-check",
                    "-r",
                ])
                .arg(kind.requirements()),
            Duration::from_secs(1800),
        )?;
        match kind.installed_version() {
            Some(version) => eprintln!("peers-install: {} {version} ready", kind.label()),
            None => bail!(
                "{} not found in {} after pip install",
                kind.label(),
                venv.display()
            ),
        }
    }
    Ok(())
}

/// Runs a command to completion, killed past `timeout`.
fn run_bounded(cmd: &mut Command, timeout: Duration) -> Result<()> {
    let mut child = cmd
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("run {cmd:?}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            if status.success() {
                return Ok(());
            }
            bail!("{cmd:?} failed ({status})");
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{cmd:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
