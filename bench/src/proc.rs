//! Child processes: the `toolgate` binary, the bench's own upstreams, temp dirs, ports
//! and memory readings from `/proc`. Every wait is bounded; children are stopped on drop.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

/// A temporary directory removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(label: &str) -> Result<TempDir> {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "toolgate-bench-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).with_context(|| format!("create {}", path.display()))?;
        Ok(TempDir(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child we started: SIGTERM on drop, SIGKILL if it has not exited 10 s later (a
/// gateway under a profiler needs time to write its profile).
pub(crate) struct Proc {
    pub child: Child,
    name: String,
}

impl Proc {
    pub(crate) fn spawn(name: &str, cmd: &mut Command) -> Result<Proc> {
        let child = cmd
            .spawn()
            .with_context(|| format!("start {name} ({cmd:?})"))?;
        Ok(Proc {
            child,
            name: name.to_owned(),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn check_alive(&mut self) -> Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            bail!("{} exited early ({status})", self.name);
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // A child we spawned and have not reaped.
        let _ = toolgate_test_support::sys::signal(self.child.id(), libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child started as the leader of its own process group, with everything it forks
/// (a Python server's workers and helpers): the whole group is the unit that is timed
/// ([`group_cpu_time`]) and stopped. On drop: SIGTERM to the group, SIGKILL to the group
/// 10 s later or as soon as the leader has exited, so no worker outlives the bench.
pub(crate) struct ProcGroup {
    child: Child,
    name: String,
}

impl ProcGroup {
    pub(crate) fn spawn(name: &str, cmd: &mut Command) -> Result<ProcGroup> {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .process_group(0)
            .spawn()
            .with_context(|| format!("start {name} ({cmd:?})"))?;
        Ok(ProcGroup {
            child,
            name: name.to_owned(),
        })
    }

    /// The leader's pid, which is also the group id.
    pub(crate) fn pgid(&self) -> u32 {
        self.child.id()
    }

    /// An error when the leader has exited.
    pub(crate) fn check_alive(&mut self) -> Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            bail!("{} exited early ({status})", self.name);
        }
        Ok(())
    }
}

impl Drop for ProcGroup {
    fn drop(&mut self) {
        let pgid = self.child.id();
        let _ = toolgate_test_support::sys::signal_group(pgid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Workers the leader did not take down with it, and a leader that ignored TERM.
        let _ = toolgate_test_support::sys::signal_group(pgid, libc::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub(crate) fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A field of `/proc/<pid>/status` in kB (`VmRSS`, `VmHWM`).
pub(crate) fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let path = if pid == 0 {
        "/proc/self/status".to_owned()
    } else {
        format!("/proc/{pid}/status")
    };
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// This executable (the bench re-runs itself for its child processes).
pub(crate) fn self_exe() -> Result<PathBuf> {
    std::env::current_exe().context("current_exe")
}

/// The `toolgate` binary: `--toolgate`, else `TOOLGATE_BIN`, else the one next to this
/// executable (same target directory and profile), built first with
/// `cargo build [--release] -p toolgate --bin toolgate` (a no-op when up to date) unless
/// `TOOLGATE_SKIP_BUILD` is set.
pub(crate) fn toolgate_bin(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os("TOOLGATE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = self_exe()?;
    let mut profile_dir = exe.parent().context("executable has a directory")?;
    // Test executables live in target/<profile>/deps.
    if profile_dir.file_name().is_some_and(|n| n == "deps") {
        profile_dir = profile_dir.parent().context("deps has a parent")?;
    }
    let bin = profile_dir.join("toolgate");
    if std::env::var_os("TOOLGATE_SKIP_BUILD").is_none() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("bench/ has a parent")?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "toolgate", "--bin", "toolgate"])
            .current_dir(workspace)
            .stdin(Stdio::null());
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        if let Some(target_dir) = profile_dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target_dir);
        }
        eprintln!("building the toolgate binary ({})", bin.display());
        let mut child = cmd.spawn().context("run cargo build -p toolgate")?;
        let deadline = Instant::now() + Duration::from_secs(1800);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("cargo build -p toolgate timed out");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        if !status.success() {
            bail!("cargo build -p toolgate failed ({status})");
        }
    }
    if !bin.is_file() {
        bail!(
            "toolgate binary not found at {} (pass --toolgate PATH)",
            bin.display()
        );
    }
    Ok(bin)
}

/// The bench's upstreams (`toolgate-bench upstreams`), or its bare proxy
/// (`toolgate-bench proxy`), in a child process: they run on their own runtime, so the
/// load generator does not share threads with them.
pub(crate) struct Upstreams {
    /// Held for its drop (stops the process).
    proc: Proc,
    pub port: u16,
}

impl Upstreams {
    pub(crate) fn start(big_tools: usize) -> Result<Upstreams> {
        Self::spawn(
            "bench upstreams",
            None,
            &["upstreams", "--tools", &big_tools.to_string()],
        )
    }

    /// The bare forwarding proxy in front of the MCP server at `target`. With
    /// `TOOLGATE_BENCH_PROXY_WRAPPER` set, the proxy runs through that program (given
    /// the bench's path and the proxy's arguments; it must `exec` them), e.g. a
    /// profiler's script: what lets the floor be profiled as the gateway is with
    /// `--toolgate`.
    pub(crate) fn start_proxy(target: &str) -> Result<Upstreams> {
        let wrapper = std::env::var_os("TOOLGATE_BENCH_PROXY_WRAPPER");
        Self::spawn("bench proxy", wrapper, &["proxy", "--target", target])
    }

    fn spawn(label: &str, wrapper: Option<std::ffi::OsString>, args: &[&str]) -> Result<Upstreams> {
        let mut cmd = match wrapper {
            Some(wrapper) => {
                let mut cmd = Command::new(wrapper);
                cmd.arg(self_exe()?);
                cmd
            }
            None => Command::new(self_exe()?),
        };
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut proc = Proc::spawn(label, &mut cmd)?;
        let stdout = proc.child.stdout.take().context("upstreams stdout")?;
        // The first line is `READY <port>`; read it on a thread so the wait is bounded.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| anyhow!("{label} did not report their port within 30 s"))?;
        proc.check_alive()?;
        let port = line
            .trim()
            .strip_prefix("READY ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| anyhow!("{label} said {line:?}, expected READY <port>"))?;
        Ok(Upstreams { proc, port })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.proc.pid()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// A running `toolgate serve` with its config and logs in a temp dir.
pub(crate) struct Gateway {
    pub proc: Proc,
    pub base: String,
    pub dir: TempDir,
}

impl Gateway {
    /// Writes `config` (JSON is YAML) and starts the gateway on a free port; returns
    /// once `/readyz` answers 200.
    pub(crate) async fn start(bin: &Path, label: &str, config: &Value) -> Result<Gateway> {
        let dir = TempDir::new(label)?;
        let port = free_port()?;
        let config_path = dir.path().join("toolgate.yaml");
        std::fs::write(&config_path, serde_json::to_string_pretty(config)?)?;
        let log = std::fs::File::create(dir.path().join("toolgate.log"))?;
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let mut gateway = Gateway {
            proc: Proc::spawn("toolgate", &mut cmd)?,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        };
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()?;
        // Generous: profilers (valgrind) start it slowly.
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Err(error) = gateway.proc.check_alive() {
                bail!("{error}; log:\n{}", gateway.log_tail());
            }
            let ready = client
                .get(gateway.url("/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return Ok(gateway);
            }
            if Instant::now() >= deadline {
                bail!(
                    "toolgate not ready within 180 s; log:\n{}",
                    gateway.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn rss_kb(&self) -> Option<u64> {
        status_kb(self.proc.pid(), "VmRSS")
    }

    pub(crate) fn log_tail(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("toolgate.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// The shared corpus of real OpenAPI specs: `$TOOLGATE_SHARED`, default `../shared`
/// next to the workspace.
pub(crate) fn shared_dir() -> PathBuf {
    match std::env::var_os("TOOLGATE_SHARED") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    }
}

/// CPU time (user + system) a process has used so far, from `/proc/<pid>/stat`.
pub(crate) fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, ticks, _) = stat_group_and_ticks(&stat)?;
    Some(ticks_to_duration(ticks))
}

/// CPU time (user + system) of every live process in process group `pgid`, summed, with
/// that of the children they have reaped: a multi-process server (workers, helpers) is
/// timed as a whole. A member that exited but was not reaped by another member (it was
/// re-parented outside the group) takes its time with it.
pub(crate) fn group_cpu_time(pgid: u32) -> Option<Duration> {
    let mut ticks = 0;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // Processes come and go while we read: skip the ones gone.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((group, own, reaped)) = stat_group_and_ticks(&stat)
            && group == pgid
        {
            ticks += own + reaped;
            found = true;
        }
    }
    found.then(|| ticks_to_duration(ticks))
}

/// The process group, the user + system ticks, and those of reaped children, of a
/// `/proc/<pid>/stat` line.
fn stat_group_and_ticks(stat: &str) -> Option<(u32, u64, u64)> {
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let group: u32 = fields.get(2)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let cutime: u64 = fields.get(13)?.parse().ok()?;
    let cstime: u64 = fields.get(14)?.parse().ok()?;
    Some((group, utime + stime, cutime + cstime))
}

fn ticks_to_duration(ticks: u64) -> Duration {
    let per_second = toolgate_test_support::sys::clock_ticks_per_second();
    let per_second = if per_second > 0 {
        per_second as u64
    } else {
        100
    };
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}
