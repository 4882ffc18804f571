//! Processes and ports: free loopback ports, temporary directories, child processes
//! killed with their process group on drop (their logs printed when a test panics),
//! bounded polling, and server-everything serving HTTP on a free port.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::deps::{NodeDeps, workspace_root};

/// Default bound for a process or server to start answering.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    // Ports handed out in this process are remembered so parallel tests never get
    // the same one twice between release and re-bind.
    static GIVEN: OnceLock<Mutex<Vec<u16>>> = OnceLock::new();
    let given = GIVEN.get_or_init(|| Mutex::new(Vec::new()));
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("bind 127.0.0.1:0")
            .port();
        let mut g = given.lock().unwrap_or_else(|e| e.into_inner());
        if !g.contains(&port) {
            g.push(port);
            return port;
        }
    }
    panic!("no free port found in 100 attempts");
}

/// A temporary directory removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "toolgate-e2e-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A child process in its own process group, killed (with its descendants) on drop.
/// Its stdout and stderr go to log files; they are printed when a test panics.
pub struct Proc {
    name: String,
    child: std::process::Child,
    log_dir: TempDir,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut std::process::Command) -> Proc {
        use std::os::unix::process::CommandExt;
        let log_dir = TempDir::new(&format!("{name}-logs"));
        let out = std::fs::File::create(log_dir.path().join("stdout.log")).expect("log file");
        let err = std::fs::File::create(log_dir.path().join("stderr.log")).expect("log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name} ({cmd:?}): {e}"));
        Proc {
            name: name.to_string(),
            child,
            log_dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The process's stdout and stderr so far.
    pub fn logs(&self) -> String {
        let read =
            |f: &str| std::fs::read_to_string(self.log_dir.path().join(f)).unwrap_or_default();
        format!(
            "----- {} stdout -----\n{}\n----- {} stderr -----\n{}",
            self.name,
            read("stdout.log"),
            self.name,
            read("stderr.log")
        )
    }

    fn tail_logs(&self, lines: usize) -> String {
        let all = self.logs();
        let v: Vec<&str> = all.lines().collect();
        v[v.len().saturating_sub(lines)..].join("\n")
    }

    fn kill_group(&mut self) {
        // The process group we created (process_group(0)); gone already is fine.
        let _ = crate::sys::signal_group(self.child.id(), libc::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.tail_logs(80));
        }
        self.kill_group();
    }
}

/// Poll `check` until it returns `Some`, at most `attempts` times within `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() >= deadline || attempts >= 2000 {
            panic!("timed out after {timeout:?} ({attempts} attempts) waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// True when something accepts TCP connections on 127.0.0.1:`port` (1 s bound).
pub async fn tcp_open(port: u16) -> bool {
    matches!(
        tokio::time::timeout(
            Duration::from_secs(1),
            tokio::net::TcpStream::connect(("127.0.0.1", port))
        )
        .await,
        Ok(Ok(_))
    )
}

/// Runs `cmd` to completion, killing it after `timeout`.
pub fn run_bounded(
    cmd: &mut std::process::Command,
    timeout: Duration,
) -> Result<std::process::ExitStatus, String> {
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("timed out after {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// server-everything in `sse` or `streamableHttp` mode on a free port.
pub struct Everything {
    pub proc: Proc,
    pub port: u16,
    /// `http://127.0.0.1:P/sse` or `http://127.0.0.1:P/mcp`.
    pub url: String,
}

impl Everything {
    pub async fn start(deps: &NodeDeps, mode: &str) -> Everything {
        Self::start_on(deps, mode, free_port()).await
    }

    /// [`Everything::start`] on a port chosen beforehand (e.g. one a gateway was
    /// configured with before the server existed, or to restart a server in place).
    pub async fn start_on(deps: &NodeDeps, mode: &str, port: u16) -> Everything {
        let path = match mode {
            "sse" => "/sse",
            "streamableHttp" => "/mcp",
            other => panic!("unknown server-everything mode {other}"),
        };
        let mut cmd = std::process::Command::new(deps.node());
        cmd.arg(deps.everything_entry())
            .arg(mode)
            .env("PORT", port.to_string())
            .current_dir(workspace_root());
        let mut proc = Proc::spawn(&format!("everything-{mode}"), &mut cmd);
        wait_for(
            &format!("server-everything {mode} on port {port}"),
            START_TIMEOUT,
            || {
                let alive = proc.exited().is_none();
                async move {
                    if !alive {
                        panic!("server-everything {mode} exited early");
                    }
                    tcp_open(port).await.then_some(())
                }
            },
        )
        .await;
        Everything {
            proc,
            port,
            url: format!("http://127.0.0.1:{port}{path}"),
        }
    }

    /// Kills the server (and its process group) and waits until it is gone.
    pub fn stop(self) {
        drop(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct() {
        let a = free_port();
        let b = free_port();
        assert_ne!(a, b);
    }
}
