//! The stdio transport: a child process speaking newline-delimited JSON-RPC on its
//! stdin/stdout, logging on stderr.
//!
//! The child runs in a process group of its own (so a terminal's Ctrl-C reaches the
//! gateway, which then shuts it down in order, and so the whole tree can be killed) and
//! is killed when its [`StdioLink`] is dropped. When it exits or closes stdout, the
//! connection's [`Rpc`] is closed at once: every pending call fails immediately instead
//! of waiting for its deadline.
//!
//! The child's environment is minimal: the baseline of
//! [`BASELINE_ENV`](super::BASELINE_ENV), the gateway variables named in
//! `inherit_env` (or all of them with `inherit_env: all`), then `env`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::StdioConfig;
use super::framing::{Line, LineSplitter};
use super::jsonrpc::{Outbound, Outgoing, Rpc};
use super::transport::{Connected, Link};

/// The smallest stdout line bound honoured: an `initialize` answer must fit.
const MIN_LINE_BYTES: usize = 64 * 1024;
/// stderr lines longer than this are skipped (they are logs, not protocol).
const MAX_STDERR_LINE: usize = 16 * 1024;
/// How long a child gets to exit after its stdin is closed, then after SIGTERM.
const GRACE: Duration = Duration::from_millis(500);

/// Starts the child and its reader tasks.
pub(crate) fn connect(upstream: Arc<str>, cfg: &StdioConfig) -> Result<Connected, String> {
    let mut cmd = Command::new(&cfg.command);
    // A minimal environment: the baseline, the names `inherit_env` lists, then `env`.
    // Everything else the gateway holds (its tokens, secrets, the Redis URL) stays out.
    cmd.env_clear()
        .envs(std::env::vars_os().filter(|(name, _)| {
            name.to_str()
                .is_some_and(|name| cfg.inherit_env.passes(name))
        }))
        .envs(cfg.env.iter().map(|(k, v)| (k, v.expose())))
        .args(&cfg.args)
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

    let (lines_tx, lines_rx) = mpsc::channel(WRITE_QUEUE);
    let (rpc, events) = Rpc::new(upstream.clone(), Arc::new(StdioOut { lines: lines_tx }));
    let stop = CancellationToken::new();
    // The writer stops on its own token so the watcher can close stdin first, then
    // wait for the child to exit.
    let close_stdin = CancellationToken::new();
    tokio::spawn(write_stdin(
        upstream.clone(),
        stdin,
        lines_rx,
        close_stdin.clone(),
    ));

    tracing::info!(upstream = %upstream, pid, command = %cfg.command, "started MCP server process");
    tokio::spawn(read_stdout(
        upstream.clone(),
        rpc.clone(),
        stdout,
        cfg.max_line_bytes.max(MIN_LINE_BYTES),
    ));
    tokio::spawn(log_stderr(upstream.clone(), stderr));
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(watch_child(
        upstream,
        rpc.clone(),
        child,
        close_stdin,
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

/// Queue depth between callers and the writer task; a full queue makes senders wait
/// (cancel-safely) instead of growing memory when the child stops reading.
const WRITE_QUEUE: usize = 256;

struct StdioOut {
    lines: mpsc::Sender<Vec<u8>>,
}

#[async_trait]
impl Outbound for StdioOut {
    async fn send(
        &self,
        msg: Outgoing,
        _id: Option<u64>,
        _deadline: Instant,
    ) -> Result<(), String> {
        let mut line = msg.json;
        line.push(b'\n');
        // Handing the line to the writer task (rather than writing here) matters: a
        // caller cancelled halfway through `write_all` would leave half a line on the
        // pipe and corrupt every later message.
        self.lines
            .send(line)
            .await
            .map_err(|_| "the process's stdin is closed".to_owned())
    }
}

/// Writes queued lines whole, in order, until the queue closes or `stop` fires; then
/// drops stdin, which closes it (the first step of the stdio shutdown sequence).
async fn write_stdin(
    upstream: Arc<str>,
    mut stdin: ChildStdin,
    mut lines: mpsc::Receiver<Vec<u8>>,
    stop: CancellationToken,
) {
    loop {
        let line = tokio::select! {
            l = lines.recv() => l,
            _ = stop.cancelled() => None,
        };
        let Some(line) = line else { break };
        let written = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        if let Err(e) = written.await {
            // The process is going away; its exit is reported by the watcher.
            tracing::debug!(upstream = %upstream, error = %e, "writing to the process failed");
            break;
        }
    }
}

/// Reads stdout line by line and dispatches each message in order, until the stream
/// ends or breaks its framing.
///
/// A framing error — a line over `max_line_bytes` (detected as soon as the bound is
/// passed, newline or not), a line that starts a JSON message but does not parse, a
/// last line cut off by the end of the stream — closes the connection at once: the
/// response it carried is lost and nothing says which call it answered, so every call
/// in flight fails now with the reason (instead of waiting for its deadline) and the
/// supervisor restarts the process, as after a crash. A line that is plain text (a
/// banner some servers print, against the spec) is logged and skipped.
async fn read_stdout(
    upstream: Arc<str>,
    rpc: Arc<Rpc>,
    mut stdout: impl AsyncRead + Unpin,
    max_line: usize,
) {
    let mut lines = LineSplitter::new(max_line);
    let mut buf = vec![0u8; 64 * 1024];
    let mut broken: Option<String> = None;
    let too_long = |n: usize| {
        format!(
            "the MCP server wrote a line of more than {max_line} bytes to stdout (the \
             upstream's `max_line_bytes`; {n} bytes so far); the process is being restarted"
        )
    };
    let reason = loop {
        match stdout.read(&mut buf).await {
            Ok(0) => {
                // A last line without its newline: a whole message is still
                // delivered; a cut one fails the calls with the rest, just below.
                if let Some(Line::Line(last)) = lines.finish()
                    && let Err(cut) = rpc.dispatch_line(&last)
                {
                    tracing::warn!(upstream = %upstream, reason = %cut, "the MCP server's stdout ended in the middle of a line");
                }
                break "the process closed its stdout".to_owned();
            }
            Ok(n) => lines.push(&buf[..n], &mut |line| {
                if broken.is_some() {
                    return;
                }
                broken = match line {
                    Line::Line(l) => rpc.dispatch_line(&l).err(),
                    Line::TooLong(n) => Some(too_long(n)),
                }
            }),
            Err(e) => break format!("reading the process's stdout failed: {e}"),
        }
        if let Some(n) = lines.overflowing() {
            broken = broken.or(Some(too_long(n)));
        }
        if let Some(reason) = broken.take() {
            tracing::warn!(upstream = %upstream, reason = %reason, "framing error on the MCP server's stdout; restarting it");
            break reason;
        }
    };
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
    close_stdin: CancellationToken,
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
            close_stdin.cancel();
        }
        _ = stop.cancelled() => {
            rpc.close("shut down");
            // The MCP stdio shutdown sequence: close stdin, then SIGTERM, then SIGKILL.
            close_stdin.cancel();
            let mut exited = tokio::time::timeout(GRACE, child.wait()).await.is_ok();
            if !exited {
                crate::sys::signal_group(pid, crate::sys::Signal::Term);
                exited = tokio::time::timeout(GRACE, child.wait()).await.is_ok();
            }
            if !exited {
                let _ = child.kill().await;
            }
            tracing::info!(upstream = %upstream, pid, "MCP server process stopped");
        }
    }
    // Whatever the child left behind in its group (helpers it spawned) goes with it.
    crate::sys::signal_group(pid, crate::sys::Signal::Kill);
    let _ = done.send(true);
}

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
