//! One supervisor task per MCP upstream: connect, initialize, list tools, follow
//! `tools/list_changed`, and reconnect with exponential backoff when the connection is
//! lost, until shutdown.
//!
//! The state the [`McpUpstream`](super::McpUpstream) handle reads lives in [`Supervised`];
//! only this task writes the connection state and the tool list.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::http::HttpClient;
use super::jsonrpc::{NotificationSender, Rpc, RpcEvent, RpcFailure};
use super::transport::Connected;
use super::{McpOptions, McpTransport, sse, stdio, streamable_http};
use crate::{Connection, JsonObject, Offerings, ToolDef};

/// The version we offer in `initialize`.
pub const OFFERED_PROTOCOL_VERSION: &str = "2025-11-25";
/// Versions we accept in the server's answer (all use `initialize` and sessions).
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// A server with more pages than this is cut off (and the cut is logged): a cursor loop
/// must end.
const MAX_LIST_PAGES: usize = 100;
/// A connection that stayed up this long was healthy: once it is lost, the next
/// attempt comes after `backoff_initial` again (the doubling starts over), within the
/// [`QUICK_RESTARTS`] budget. A server that dies sooner after each start is a crash
/// loop and backs off, doubling, as after failed attempts.
pub const HEALTHY_AFTER: Duration = Duration::from_secs(1);
/// How many losses after a healthy run may be retried after `backoff_initial` within
/// [`QUICK_RESTART_WINDOW`]; past that the delay doubles again, so a server that dies
/// a second or two after every start is not restarted over and over.
pub const QUICK_RESTARTS: usize = 5;
/// The window [`QUICK_RESTARTS`] is counted in.
pub const QUICK_RESTART_WINDOW: Duration = Duration::from_secs(60);
/// How often a starting stdio server's process tree is looked at (see `progress.rs`).
const START_SAMPLE: Duration = Duration::from_millis(500);
/// The longest pause between attempts while an upstream that never connected is
/// still within its `startup_timeout`: a gateway started before its upstreams picks
/// them up within a second of their start, not after a 30 s backoff.
pub const STARTUP_RETRY_MAX: Duration = Duration::from_secs(1);

/// State shared between the supervisor and the handle.
pub(crate) struct Supervised {
    pub name: Arc<str>,
    pub transport: McpTransport,
    pub options: McpOptions,
    pub inner: Mutex<Inner>,
    pub tools_tx: watch::Sender<u64>,
    pub conn_tx: watch::Sender<Connection>,
    /// Notifications outside any known call; one channel across reconnects.
    pub notifications: NotificationSender,
    /// Every caller of this upstream is one tenant (the gateway says so from its
    /// policy): only then may a message that names no call go to the call in flight.
    pub one_tenant: Arc<std::sync::atomic::AtomicBool>,
    /// The last 401 or 403 an HTTP endpoint answered (see [`super::http::Refusal`]).
    pub refusals: super::http::RefusalSlot,
    pub shutdown: CancellationToken,
}

#[derive(Default)]
pub(crate) struct Inner {
    /// Set only while connected and initialized.
    pub rpc: Option<Arc<Rpc>>,
    pub tools: Arc<Vec<ToolDef>>,
    pub offerings: Arc<Offerings>,
    pub last_error: Option<String>,
    pub pid: Option<u32>,
    pub protocol_version: Option<String>,
    pub initialize_result: Option<JsonObject>,
}

impl Supervised {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every critical section is a plain field update; poisoning cannot leave it
        // half-done.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_connection(&self, c: Connection) {
        self.conn_tx.send_if_modified(|cur| {
            let changed = *cur != c;
            *cur = c;
            changed
        });
    }

    /// Whether this connection is to stop because its credentials were refused.
    fn refused(&self) -> bool {
        self.options.stop_when_refused
            && self
                .refusals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some()
    }

    fn set_error(&self, e: String) {
        self.lock().last_error = Some(e);
    }

    fn set_tools(&self, tools: Vec<ToolDef>) {
        let count = tools.len();
        self.lock().tools = Arc::new(tools);
        // Bumped on every successful listing: the gateway rebuilding an unchanged
        // catalog is cheap, a missed change is not.
        self.tools_tx.send_modify(|v| *v += 1);
        tracing::debug!(upstream = %self.name, count, "tool list updated");
    }

    fn set_offerings(&self, offerings: Offerings) {
        let mut inner = self.lock();
        if *inner.offerings == offerings {
            return;
        }
        inner.offerings = Arc::new(offerings);
        drop(inner);
        self.tools_tx.send_modify(|v| *v += 1);
        tracing::debug!(upstream = %self.name, "prompts and resources updated");
    }
}

/// The delay before each reconnect attempt: `backoff_initial`, doubled after each
/// failure up to a maximum; a connection lost after a healthy run ([`HEALTHY_AFTER`])
/// starts the doubling over, at most [`QUICK_RESTARTS`] times per
/// [`QUICK_RESTART_WINDOW`].
#[derive(Debug)]
pub(crate) struct Backoff {
    initial: Duration,
    next: Duration,
    /// When each recent quick restart was granted.
    quick: VecDeque<Instant>,
}

impl Backoff {
    pub(crate) fn new(initial: Duration) -> Self {
        Self {
            initial,
            next: initial,
            quick: VecDeque::new(),
        }
    }

    /// The delay after a failed attempt (at most `max`); the next one is doubled.
    pub(crate) fn failed(&mut self, max: Duration) -> Duration {
        let max = max.max(self.initial);
        let delay = self.next.min(max);
        self.next = (delay * 2).min(max);
        delay
    }

    /// The delay after a connection that had been up for `up` was lost at `now`.
    pub(crate) fn lost(&mut self, up: Duration, now: Instant, max: Duration) -> Duration {
        while self
            .quick
            .front()
            .is_some_and(|t| now.duration_since(*t) >= QUICK_RESTART_WINDOW)
        {
            self.quick.pop_front();
        }
        if up >= HEALTHY_AFTER && self.quick.len() < QUICK_RESTARTS {
            self.quick.push_back(now);
            self.next = self.initial;
        }
        self.failed(max)
    }
}

/// The supervisor loop. Returns after shutdown.
pub(crate) async fn run(shared: Arc<Supervised>) {
    let mut http: Option<Arc<HttpClient>> = None;
    let mut backoff = Backoff::new(shared.options.backoff_initial);
    let started = Instant::now();
    // Whether any attempt ever connected: a failed first start is retried like a
    // crash, quickly while the startup window lasts.
    let mut answered = false;
    loop {
        let starting = !answered && started.elapsed() < shared.options.startup_timeout;
        let backoff_max = if starting {
            STARTUP_RETRY_MAX
        } else {
            shared.options.backoff_max
        };
        if shared.shutdown.is_cancelled() {
            break;
        }
        let attempt = tokio::select! {
            r = connect_and_initialize(&shared, &mut http) => r,
            _ = shared.shutdown.cancelled() => break,
        };
        let delay = match attempt {
            Ok(mut conn) => {
                answered = true;
                let since = Instant::now();
                let lost = serve(&shared, &mut conn).await;
                {
                    let mut inner = shared.lock();
                    inner.rpc = None;
                    inner.pid = None;
                }
                match lost {
                    None => {
                        conn.link.close().await;
                        break;
                    }
                    Some(_) if shared.refused() => {
                        conn.link.close().await;
                        break;
                    }
                    Some(reason) => {
                        let up = since.elapsed();
                        let delay = backoff.lost(up, Instant::now(), shared.options.backoff_max);
                        tracing::warn!(upstream = %shared.name, reason = %reason, up_ms = up.as_millis() as u64, retry_in_ms = delay.as_millis() as u64, "MCP connection lost; reconnecting");
                        shared.set_error(format!("connection lost: {reason}"));
                        shared.set_connection(Connection::Reconnecting);
                        conn.link.close().await;
                        delay
                    }
                }
            }
            Err(e) if shared.refused() => {
                tracing::info!(upstream = %shared.name, error = %e, "credentials refused; not reconnecting");
                shared.set_error(e);
                break;
            }
            Err(e) => {
                let delay = backoff.failed(backoff_max);
                tracing::warn!(upstream = %shared.name, error = %e, retry_in_ms = delay.as_millis() as u64, "MCP connection failed");
                shared.set_error(e);
                if *shared.conn_tx.borrow() != Connection::Connecting {
                    shared.set_connection(Connection::Reconnecting);
                }
                delay
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shared.shutdown.cancelled() => break,
        }
        if *shared.conn_tx.borrow() == Connection::Connected {
            shared.set_connection(Connection::Reconnecting);
        }
    }
    {
        let mut inner = shared.lock();
        inner.rpc = None;
        inner.pid = None;
    }
    shared.set_connection(Connection::Closed);
    tracing::debug!(upstream = %shared.name, "MCP upstream stopped");
}

/// Connects the transport, runs the MCP handshake and the first listing.
async fn connect_and_initialize(
    shared: &Supervised,
    http: &mut Option<Arc<HttpClient>>,
) -> Result<Connected, String> {
    let name = shared.name.clone();
    let spawned = Instant::now();
    let conn = match &shared.transport {
        McpTransport::Stdio(cfg) => stdio::connect(name, cfg)?,
        McpTransport::StreamableHttp(cfg) => {
            streamable_http::connect(name, http_client(http, cfg, &shared.refusals)?)
        }
        McpTransport::Sse(cfg) => {
            let client = http_client(http, cfg, &shared.refusals)?;
            let deadline = shared.options.request_timeout.max(client.timeout);
            tokio::time::timeout(deadline, sse::connect(name, client))
                .await
                .map_err(|_| "opening the SSE stream timed out".to_owned())??
        }
    };
    let timeout = shared.options.request_timeout;
    let rpc = &conn.rpc;
    rpc.set_notifications(shared.notifications.clone());
    rpc.set_one_tenant(shared.one_tenant.clone());

    let params = json!({
        "protocolVersion": OFFERED_PROTOCOL_VERSION,
        "capabilities": shared.options.client_capabilities,
        "clientInfo": {"name": "toolgate", "version": env!("CARGO_PKG_VERSION")},
    });
    let describe_init = |e: RpcFailure| match e {
        // A 2026-07-28-only server has no `initialize` at all.
        RpcFailure::Error { code, .. } if code == crate::codes::METHOD_NOT_FOUND => {
            format!(
                "initialize failed: {} — the server may speak only MCP 2026-07-28, \
                 which toolgate does not support yet",
                describe(&e)
            )
        }
        _ => format!("initialize failed: {}", describe(&e)),
    };
    let init = match &shared.transport {
        // A stdio server starts with its `initialize`: the answer is due within the
        // startup window (never sooner than any other request's), and a process still
        // starting (a first `npx` download) gets more time while it makes progress.
        McpTransport::Stdio(_) => {
            let start = StartWindow::of(&shared.options, spawned);
            // The watch below decides when to give up, and says why; the request's own
            // deadline only backs it.
            let request = rpc.protocol_request(
                "initialize",
                params,
                start.give_up_by + Duration::from_secs(1),
            );
            tokio::select! {
                r = request => r.map_err(describe_init)?,
                stalled = start.watch(&shared.name, conn.link.pid()) => return Err(stalled),
            }
        }
        _ => rpc
            .protocol_request("initialize", params, Instant::now() + timeout)
            .await
            .map_err(describe_init)?,
    };
    let Value::Object(init) = init else {
        return Err("initialize returned something other than an object".into());
    };
    let version = init
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !SUPPORTED_PROTOCOL_VERSIONS.contains(&version.as_str()) {
        return Err(format!(
            "the server speaks MCP protocol version '{version}', which toolgate does not \
             support (supported: {})",
            SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        ));
    }
    conn.link.after_initialize(&version);
    rpc.notify("notifications/initialized", None, timeout)
        .await
        .map_err(|e| format!("sending notifications/initialized failed: {e}"))?;

    let has_tools = init
        .get("capabilities")
        .and_then(|c| c.get("tools"))
        .is_some();
    let tools = if has_tools {
        list_tools(&shared.name, rpc, timeout).await?
    } else {
        tracing::info!(upstream = %shared.name, "server offers no tools capability");
        Vec::new()
    };

    let offerings =
        super::listing::list_offerings(&shared.name, rpc, init.get("capabilities"), timeout).await;

    let server = init
        .get("serverInfo")
        .and_then(|s| s.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    tracing::info!(upstream = %shared.name, transport = shared.transport.kind(), protocol = %version, server = %server, tools = tools.len(), "MCP upstream connected");
    {
        let mut inner = shared.lock();
        inner.rpc = Some(conn.rpc.clone());
        inner.pid = conn.link.pid();
        inner.protocol_version = Some(version);
        inner.initialize_result = Some(init);
        inner.offerings = Arc::new(offerings);
    }
    shared.set_tools(tools);
    shared.set_connection(Connection::Connected);
    Ok(conn)
}

/// When a starting stdio server's `initialize` must be answered: by `answer_by` (the
/// protocol answer's deadline: `startup_timeout`, at least `request_timeout`), or, while
/// its process tree still makes progress (CPU or I/O within the last `quiet`), by
/// `give_up_by` (`stdio_start_limit` after the start) at the latest.
struct StartWindow {
    spawned: Instant,
    answer_by: Instant,
    quiet: Duration,
    give_up_by: Instant,
}

impl StartWindow {
    fn of(options: &McpOptions, spawned: Instant) -> Self {
        let answer = options.request_timeout.max(options.startup_timeout);
        Self {
            spawned,
            answer_by: spawned + answer,
            // Never longer than the answer's own deadline: a short startup window
            // gives up on an idle process as soon.
            quiet: options.start_quiet_window.min(answer),
            give_up_by: spawned + options.stdio_start_limit.max(answer),
        }
    }

    /// Resolves with the error to report once the server is to be given up: no answer
    /// by `answer_by` and no progress for `quiet`, or none by `give_up_by`. Where the
    /// process tree cannot be seen (no pid, no `/proc`), nothing counts as progress and
    /// `answer_by` is the deadline.
    async fn watch(&self, upstream: &str, pid: Option<u32>) -> String {
        let answer = self.answer_by - self.spawned;
        let no_answer = || {
            format!(
                "initialize failed: timed out — no answer within {} (startup_timeout, at \
                 least the request timeout), and the process made no progress (no CPU, no \
                 I/O by it or its children) for {}: it is up but not answering",
                secs(answer),
                secs(self.quiet)
            )
        };
        let Some(pid) = pid else {
            tokio::time::sleep_until(self.answer_by).await;
            return no_answer();
        };
        // Looking starts one quiet window before the answer is due.
        tokio::time::sleep_until(self.answer_by - self.quiet).await;
        let mut tree = ProgressProbe::new(pid).await;
        let mut last_progress = self.spawned;
        let sample = START_SAMPLE
            .min(self.quiet / 2)
            .max(Duration::from_millis(10));
        let mut noted = false;
        loop {
            tokio::time::sleep_until((Instant::now() + sample).min(self.give_up_by)).await;
            let moved = tree.progressed().await;
            let now = Instant::now();
            if moved {
                last_progress = now;
            }
            if now >= self.give_up_by {
                return format!(
                    "initialize failed: the process was still starting after {} \
                     (stdio_start_limit) without answering",
                    secs(self.give_up_by - self.spawned)
                );
            }
            if now >= self.answer_by {
                if now.duration_since(last_progress) >= self.quiet {
                    return no_answer();
                }
                if !noted {
                    noted = true;
                    tracing::info!(
                        upstream = %upstream,
                        pid,
                        "no answer to initialize within {} but the process is still starting \
                         (using CPU or doing I/O); waiting while it makes progress, up to {} \
                         (stdio_start_limit)",
                        secs(answer),
                        secs(self.give_up_by - self.spawned)
                    );
                }
            }
        }
    }
}

/// A [`ProcessTree`](super::progress::ProcessTree) read off the runtime's threads
/// (reading `/proc` is quick, but blocking).
struct ProgressProbe(Option<super::progress::ProcessTree>);

impl ProgressProbe {
    async fn new(pid: u32) -> Self {
        let tree = tokio::task::spawn_blocking(move || super::progress::ProcessTree::new(pid))
            .await
            .ok();
        Self(tree)
    }

    async fn progressed(&mut self) -> bool {
        let Some(mut tree) = self.0.take() else {
            return false;
        };
        match tokio::task::spawn_blocking(move || {
            let moved = tree.progressed();
            (tree, moved)
        })
        .await
        {
            Ok((tree, moved)) => {
                self.0 = Some(tree);
                moved
            }
            Err(_) => false,
        }
    }
}

/// A duration as configured: `2s`, `1.5s`, `250ms`.
fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn http_client(
    slot: &mut Option<Arc<HttpClient>>,
    cfg: &super::HttpConfig,
    refusals: &super::http::RefusalSlot,
) -> Result<Arc<HttpClient>, String> {
    if let Some(c) = slot {
        return Ok(c.clone());
    }
    let c = HttpClient::noting_refusals(cfg, refusals.clone())?;
    *slot = Some(c.clone());
    Ok(c)
}

/// Follows the connection until it is lost (`Some(reason)`) or shut down (`None`).
async fn serve(shared: &Supervised, conn: &mut Connected) -> Option<String> {
    let rpc = conn.rpc.clone();
    let timeout = shared.options.request_timeout;
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return None,
            reason = rpc.closed() => return Some(reason),
            ev = conn.events.recv() => {
                let Some(first) = ev else {
                    return Some("the connection's event channel closed".into());
                };
                // Several notifications in a row need one listing of each kind.
                let mut tools_changed = first == RpcEvent::ToolsListChanged;
                let mut offerings_changed = first == RpcEvent::OfferingsListChanged;
                while let Ok(more) = conn.events.try_recv() {
                    tools_changed |= more == RpcEvent::ToolsListChanged;
                    offerings_changed |= more == RpcEvent::OfferingsListChanged;
                }
                if tools_changed {
                    // Shutdown must not wait for a slow listing.
                    let listed = tokio::select! {
                        r = list_tools(&shared.name, &rpc, timeout) => r,
                        _ = shared.shutdown.cancelled() => return None,
                    };
                    match listed {
                        Ok(tools) => shared.set_tools(tools),
                        Err(e) => {
                            tracing::warn!(upstream = %shared.name, error = %e, "re-listing tools failed");
                            shared.set_error(e);
                        }
                    }
                }
                if offerings_changed {
                    let capabilities = shared
                        .lock()
                        .initialize_result
                        .as_ref()
                        .and_then(|init| init.get("capabilities").cloned());
                    let listed = tokio::select! {
                        r = super::listing::list_offerings(&shared.name, &rpc, capabilities.as_ref(), timeout) => r,
                        _ = shared.shutdown.cancelled() => return None,
                    };
                    shared.set_offerings(listed);
                }
            }

        }
    }
}

/// `tools/list`, every page (bounded), each definition kept exactly as sent.
pub(crate) async fn list_tools(
    upstream: &str,
    rpc: &Arc<Rpc>,
    timeout: Duration,
) -> Result<Vec<ToolDef>, String> {
    let mut tools: Vec<ToolDef> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut cursor: Option<Value> = None;
    for page in 0..MAX_LIST_PAGES {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let result = rpc
            .protocol_request("tools/list", params, Instant::now() + timeout)
            .await
            .map_err(|e| format!("tools/list failed: {}", describe(&e)))?;
        let Some(list) = result.get("tools").and_then(Value::as_array) else {
            return Err("tools/list returned no 'tools' array".into());
        };
        for (i, entry) in list.iter().enumerate() {
            let def = match entry {
                Value::Object(raw) => ToolDef::from_raw(raw.clone()),
                _ => None,
            };
            match def {
                Some(def) if seen.insert(def.name.clone()) => tools.push(def),
                Some(def) => {
                    tracing::warn!(upstream, tool = %def.name, "skipping a duplicate tool name")
                }
                None => {
                    tracing::warn!(
                        upstream,
                        page,
                        index = i,
                        "skipping a tool without a string name"
                    )
                }
            }
        }
        match result.get("nextCursor") {
            Some(c @ Value::String(s)) if !s.is_empty() => cursor = Some(c.clone()),
            _ => return Ok(tools),
        }
    }
    tracing::warn!(
        upstream,
        pages = MAX_LIST_PAGES,
        "tools/list still had more pages; the rest is ignored"
    );
    Ok(tools)
}

/// A protocol failure as text for `last_error` and logs.
pub(crate) fn describe(f: &RpcFailure) -> String {
    match f {
        RpcFailure::Error { code, message, .. } => {
            format!("{message}{}", crate::error::rpc_code_note(*code))
        }
        RpcFailure::Closed(r) | RpcFailure::Transport(r) => r.clone(),
        RpcFailure::Cancelled => "cancelled".into(),
        RpcFailure::Timeout => "timed out".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INITIAL: Duration = Duration::from_millis(250);
    const MAX: Duration = Duration::from_secs(30);

    fn ms(d: Duration) -> u128 {
        d.as_millis()
    }

    #[test]
    fn a_loss_after_a_healthy_run_is_retried_without_the_doubled_delay() {
        let mut backoff = Backoff::new(INITIAL);
        let t0 = Instant::now();
        // Killed again and again, each time after a healthy run: never doubled.
        let delays: Vec<u128> = (0..QUICK_RESTARTS as u64)
            .map(|i| ms(backoff.lost(HEALTHY_AFTER, t0 + Duration::from_secs(3 * i), MAX)))
            .collect();
        assert_eq!(delays, vec![250; QUICK_RESTARTS]);
        // Failed attempts in between double as before, and a healthy run starts over.
        let mut backoff = Backoff::new(INITIAL);
        assert_eq!(
            [
                backoff.failed(MAX),
                backoff.failed(MAX),
                backoff.failed(MAX)
            ]
            .map(ms),
            [250, 500, 1000]
        );
        assert_eq!(ms(backoff.lost(Duration::from_secs(5), t0, MAX)), 250);
    }

    #[test]
    fn a_crash_loop_still_backs_off() {
        // Dying soon after every start: doubled each time, as failures are.
        let mut backoff = Backoff::new(INITIAL);
        let t0 = Instant::now();
        let short = HEALTHY_AFTER - Duration::from_millis(1);
        let delays: Vec<u128> = (0..8u64)
            .map(|i| ms(backoff.lost(short, t0 + Duration::from_secs(i), MAX)))
            .collect();
        assert_eq!(delays, [250, 500, 1000, 2000, 4000, 8000, 16000, 30000]);

        // Dying after each healthy run, over and over: the quick restarts are a
        // budget per window, then the delay doubles again.
        let mut backoff = Backoff::new(INITIAL);
        let delays: Vec<u128> = (0..QUICK_RESTARTS as u64 + 3)
            .map(|i| ms(backoff.lost(HEALTHY_AFTER, t0 + Duration::from_secs(2 * i), MAX)))
            .collect();
        let mut expected = vec![250; QUICK_RESTARTS];
        expected.extend([500, 1000, 2000]);
        assert_eq!(delays, expected);
        // Once the window has passed, a healthy run is retried at once again.
        let later = t0 + QUICK_RESTART_WINDOW + Duration::from_secs(2 * QUICK_RESTARTS as u64);
        assert_eq!(ms(backoff.lost(HEALTHY_AFTER, later, MAX)), 250);
    }

    #[test]
    fn the_start_window_separates_the_answer_from_the_process_start() {
        let spawned = Instant::now();
        let options = McpOptions {
            request_timeout: Duration::from_secs(1),
            startup_timeout: Duration::from_secs(2),
            ..McpOptions::default()
        };
        let w = StartWindow::of(&options, spawned);
        assert_eq!(w.answer_by - spawned, Duration::from_secs(2));
        assert_eq!(
            w.quiet,
            Duration::from_secs(2),
            "capped at the answer's deadline"
        );
        assert_eq!(w.give_up_by - spawned, DEFAULT_LIMIT);
        // A limit below the answer's deadline never shortens it.
        let w = StartWindow::of(
            &McpOptions {
                stdio_start_limit: Duration::ZERO,
                ..McpOptions::default()
            },
            spawned,
        );
        assert_eq!(w.give_up_by - spawned, Duration::from_secs(30));
        assert_eq!(w.quiet, Duration::from_secs(10));
    }

    const DEFAULT_LIMIT: Duration = super::super::DEFAULT_STDIO_START_LIMIT;
}
