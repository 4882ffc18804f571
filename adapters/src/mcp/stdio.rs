//! The stdio transport: a child process speaking newline-delimited JSON-RPC on its
//! stdin/stdout, logging on stderr.
//!
//! The child runs in a process group of its own (so a terminal's Ctrl-C reaches the
//! gateway, which then shuts it down in order, and so the whole tree can be killed) and
//! is killed when its [`StdioLink`] is dropped. When it exits or closes stdout, the
//! connection's [`Rpc`] is closed at once: every pending call fails immediately instead
//! of waiting for its deadline.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::StdioConfig;
use super::framing::{Line, LineSplitter, MAX_FRAME};
use super::jsonrpc::{Outbound, Rpc};
use super::transport::{Connected, Link};

/// stderr lines longer than this are skipped (they are logs, not protocol).
const MAX_STDERR_LINE: usize = 16 * 1024;
/// How long a child gets to exit after its stdin is closed, then after SIGTERM.
const GRACE: Duration = Duration::from_millis(500);

/// Starts the child and its reader tasks.
pub(crate) fn connect(upstream: Arc<str>, cfg: &StdioConfig) -> Result<Connected, String> {
    let mut cmd = Command::new(&cfg.command);
    cmd.args(&cfg.args)
        .envs(&cfg.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &cfg.cwd {
        cmd.current_dir(cwd);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    // The error names the command but not the env (values may be secrets).
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start '{}': {e}", cfg.command))?;
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("child process has no stdio pipes".into());
    };

    let out = Arc::new(StdioOut {
        stdin: Mutex::new(Some(stdin)),
    });
    let (rpc, events) = Rpc::new(upstream.clone(), out.clone());
    let stop = CancellationToken::new();

    tracing::info!(upstream = %upstream, pid, command = %cfg.command, "started MCP server process");
    tokio::spawn(read_stdout(upstream.clone(), rpc.clone(), stdout));
    tokio::spawn(log_stderr(upstream.clone(), stderr));
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(watch_child(
        upstream,
        rpc.clone(),
        child,
        out,
        stop.clone(),
        done_tx,
    ));
    Ok(Connected {
        rpc,
        events,
        link: Box::new(StdioLink {
            pid,
            stop,
            done: done_rx,
        }),
    })
}

struct StdioOut {
    /// `None` once closed (graceful shutdown closes stdin first).
    stdin: Mutex<Option<ChildStdin>>,
}

#[async_trait]
impl Outbound for StdioOut {
    async fn send(&self, msg: Value, _id: Option<u64>, _deadline: Instant) -> Result<(), String> {
        let mut line = serde_json::to_vec(&msg).map_err(|e| e.to_string())?;
        line.push(b'\n');
        // One writer at a time keeps each line whole on the pipe.
        let mut stdin = self.stdin.lock().await;
        let pipe = stdin.as_mut().ok_or("stdin is closed")?;
        pipe.write_all(&line)
            .await
            .map_err(|e| format!("writing to the process failed: {e}"))?;
        pipe.flush()
            .await
            .map_err(|e| format!("writing to the process failed: {e}"))
    }
}

/// Reads stdout line by line and dispatches each message in order.
async fn read_stdout(upstream: Arc<str>, rpc: Arc<Rpc>, mut stdout: impl AsyncRead + Unpin) {
    let mut lines = LineSplitter::new(MAX_FRAME);
    let mut buf = vec![0u8; 64 * 1024];
    let mut handle = |line: Line| match line {
        Line::Line(l) => rpc.dispatch_bytes(&l),
        Line::TooLong(n) => {
            tracing::warn!(upstream = %upstream, bytes = n, "skipping an oversized line from the MCP server")
        }
    };
    let reason = loop {
        match stdout.read(&mut buf).await {
            Ok(0) => break "the process closed its stdout".to_owned(),
            Ok(n) => lines.push(&buf[..n], &mut handle),
            Err(e) => break format!("reading the process's stdout failed: {e}"),
        }
    };
    if let Some(last) = lines.finish() {
        handle(last);
    }
    rpc.close(reason);
}

/// Logs the child's stderr, one event per line, tagged with the upstream.
async fn log_stderr(upstream: Arc<str>, mut stderr: impl AsyncRead + Unpin) {
    let mut lines = LineSplitter::new(MAX_STDERR_LINE);
    let mut buf = vec![0u8; 8 * 1024];
    let log = |line: Line| match line {
        Line::Line(l) => {
            let text = String::from_utf8_lossy(&l);
            if !text.trim().is_empty() {
                tracing::info!(upstream = %upstream, stream = "stderr", "{text}");
            }
        }
        Line::TooLong(n) => {
            tracing::info!(upstream = %upstream, stream = "stderr", bytes = n, "(overlong stderr line skipped)")
        }
    };
    let mut log = log;
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        lines.push(&buf[..n], &mut log);
    }
    if let Some(last) = lines.finish() {
        log(last);
    }
}

/// Owns the child: closes the connection when it exits, or stops it when asked.
async fn watch_child(
    upstream: Arc<str>,
    rpc: Arc<Rpc>,
    mut child: Child,
    out: Arc<StdioOut>,
    stop: CancellationToken,
    done: tokio::sync::watch::Sender<bool>,
) {
    let pid = child.id();
    tokio::select! {
        status = child.wait() => {
            let reason = match status {
                Ok(s) => format!("the process exited ({s})"),
                Err(e) => format!("waiting for the process failed: {e}"),
            };
            tracing::warn!(upstream = %upstream, pid, reason = %reason, "MCP server process ended");
            rpc.close(reason);
        }
        _ = stop.cancelled() => {
            rpc.close("shut down");
            // The MCP stdio shutdown sequence: close stdin, then SIGTERM, then SIGKILL.
            out.stdin.lock().await.take();
            let mut exited = tokio::time::timeout(GRACE, child.wait()).await.is_ok();
            if !exited {
                signal_group(pid, Signal::Term);
                exited = tokio::time::timeout(GRACE, child.wait()).await.is_ok();
            }
            if !exited {
                let _ = child.kill().await;
            }
            tracing::info!(upstream = %upstream, pid, "MCP server process stopped");
        }
    }
    // Whatever the child left behind in its group (helpers it spawned) goes with it.
    signal_group(pid, Signal::Kill);
    let _ = done.send(true);
}

enum Signal {
    Term,
    Kill,
}

#[cfg(unix)]
fn signal_group(pid: Option<u32>, sig: Signal) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    if pid <= 1 {
        return; // never signal "every process" or init by accident
    }
    let sig = match sig {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: kill(2) has no memory-safety preconditions; the child leads its own
    // group (process_group(0)), so -pid addresses exactly that group.
    unsafe {
        libc::kill(-pid, sig);
    }
}

#[cfg(not(unix))]
fn signal_group(_pid: Option<u32>, _sig: Signal) {}

struct StdioLink {
    pid: Option<u32>,
    stop: CancellationToken,
    done: tokio::sync::watch::Receiver<bool>,
}

#[async_trait]
impl Link for StdioLink {
    fn pid(&self) -> Option<u32> {
        self.pid
    }

    async fn close(&self) {
        self.stop.cancel();
        let mut done = self.done.clone();
        // Bounded: the stop sequence itself is bounded by GRACE twice plus a kill.
        let _ = tokio::time::timeout(GRACE * 4, done.wait_for(|d| *d)).await;
    }
}

impl Drop for StdioLink {
    fn drop(&mut self) {
        // Starts the stop sequence in the watcher task if nobody called close().
        self.stop.cancel();
    }
}
