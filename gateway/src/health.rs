//! Upstream health: periodic checks and the state every status surface reports.
//!
//! The state combines what the adapter knows about its connection with the results of
//! the periodic checks:
//! - `starting`: never connected yet;
//! - `healthy`: connected and the last check passed;
//! - `degraded`: connected but the last check(s) failed, fewer than the threshold;
//! - `down`: the connection is lost (the adapter is reconnecting) or the checks failed
//!   `failures_before_down` times in a row.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::{Connection, DynUpstream};

use crate::config::HealthConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Starting,
    Healthy,
    Degraded,
    Down,
}

impl State {
    /// The value of the `toolgate_upstream_health` gauge.
    pub fn gauge(self) -> i64 {
        match self {
            State::Starting => 0,
            State::Healthy => 1,
            State::Degraded => 2,
            State::Down => 3,
        }
    }
}

#[derive(Debug, Default)]
struct Checks {
    ever_connected: bool,
    consecutive_failures: u32,
    last_error: Option<String>,
    latency: Option<Duration>,
    last_check: Option<SystemTime>,
}

/// Check results for one upstream.
#[derive(Debug)]
pub struct Tracker {
    config: HealthConfig,
    checks: Mutex<Checks>,
}

/// A point-in-time view of one upstream's health.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub state: State,
    pub last_error: Option<String>,
    pub latency_ms: Option<f64>,
    /// Seconds since the Unix epoch of the last check.
    pub last_check: Option<u64>,
}

impl Tracker {
    pub fn new(config: HealthConfig) -> Self {
        Self {
            config,
            checks: Mutex::new(Checks::default()),
        }
    }

    pub fn config(&self) -> &HealthConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Checks> {
        // A poisoned lock only means a panic elsewhere mid-update; the data is still
        // a usable set of counters.
        self.checks.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record_success(&self, latency: Duration) {
        let mut checks = self.lock();
        checks.ever_connected = true;
        checks.consecutive_failures = 0;
        checks.latency = Some(latency);
        checks.last_check = Some(SystemTime::now());
    }

    pub fn record_failure(&self, error: String) {
        let mut checks = self.lock();
        checks.consecutive_failures = checks.consecutive_failures.saturating_add(1);
        checks.last_error = Some(error);
        checks.last_check = Some(SystemTime::now());
    }

    /// The state, given the adapter's view of the connection and its last error.
    pub fn snapshot(&self, upstream: &DynUpstream) -> Snapshot {
        let connection = upstream.connection();
        let mut checks = self.lock();
        if connection == Connection::Connected {
            checks.ever_connected = true;
        }
        let adapter_error = upstream.last_error();
        let state = match connection {
            // Still trying for the first time, and nothing has failed yet.
            Connection::Connecting if !checks.ever_connected && adapter_error.is_none() => {
                State::Starting
            }
            Connection::Connected if checks.consecutive_failures == 0 => State::Healthy,
            Connection::Connected
                if checks.consecutive_failures < self.config.failures_before_down =>
            {
                State::Degraded
            }
            _ => State::Down,
        };
        let last_error = match (state, adapter_error) {
            (State::Healthy, _) => None,
            (_, Some(adapter_error)) if connection != Connection::Connected => Some(adapter_error),
            _ => checks.last_error.clone(),
        };
        Snapshot {
            state,
            last_error,
            // The last check's time is a healthy upstream's figure: an upstream down
            // or failing checks has none worth showing.
            latency_ms: checks
                .latency
                .filter(|_| state == State::Healthy)
                .map(|l| l.as_secs_f64() * 1000.0),
            last_check: checks.last_check.and_then(|t| {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_secs())
            }),
        }
    }
}

/// Runs the periodic checks of one upstream until `stop` fires.
pub async fn run(upstream: DynUpstream, tracker: std::sync::Arc<Tracker>, stop: CancellationToken) {
    let interval = tracker.config().interval;
    let timeout = tracker.config().timeout;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if upstream.connection() != Connection::Connected {
            continue;
        }
        probe(&upstream, &tracker, timeout).await;
    }
}

/// One check of a connected upstream, recorded in `tracker`.
pub async fn probe(upstream: &DynUpstream, tracker: &Tracker, timeout: Duration) {
    let started = std::time::Instant::now();
    // The adapter bounds the check by `timeout`; the outer timeout guards against an
    // adapter that does not.
    let outcome = tokio::time::timeout(
        timeout + Duration::from_millis(100),
        upstream.check(timeout),
    )
    .await;
    match outcome {
        Ok(Ok(())) => tracker.record_success(started.elapsed()),
        Ok(Err(error)) => {
            tracing::warn!(upstream = upstream.name(), %error, "health check failed");
            tracker.record_failure(error.to_string());
        }
        Err(_) => {
            tracing::warn!(upstream = upstream.name(), "health check timed out");
            tracker.record_failure(format!(
                "health check timed out after {} ms",
                timeout.as_millis()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use toolgate_adapters::{CallContext, CallOutput, JsonObject, ToolDef, ToolError, Upstream};

    use super::*;

    /// An upstream in a given connection state, nothing more.
    struct InState(Connection);

    #[async_trait]
    impl Upstream for InState {
        fn name(&self) -> &str {
            "u"
        }
        fn tools(&self) -> Arc<Vec<ToolDef>> {
            Arc::default()
        }
        fn tools_changed(&self) -> tokio::sync::watch::Receiver<u64> {
            tokio::sync::watch::channel(0).1
        }
        fn connection(&self) -> Connection {
            self.0
        }
        fn last_error(&self) -> Option<String> {
            (self.0 != Connection::Connected).then(|| "connection refused".into())
        }
        async fn call(
            &self,
            _: &str,
            _: JsonObject,
            _: CallContext,
        ) -> Result<CallOutput, ToolError> {
            Err(ToolError::Failed("not here".into()))
        }
        async fn check(&self, _: Duration) -> Result<(), ToolError> {
            Ok(())
        }
        async fn shutdown(&self) {}
    }

    /// A check's latency is shown for a healthy upstream only: once it is down or
    /// failing its checks, the last good figure would say it answers when it does not.
    #[test]
    fn only_a_healthy_upstream_shows_a_check_latency() {
        let tracker = Tracker::new(crate::config::HealthConfig::default());
        tracker.record_success(Duration::from_millis(3));
        let up: DynUpstream = Arc::new(InState(Connection::Connected));
        let healthy = tracker.snapshot(&up);
        assert_eq!(healthy.state, State::Healthy);
        assert!(healthy.latency_ms.is_some_and(|ms| ms >= 3.0));
        for connection in [Connection::Reconnecting, Connection::Closed] {
            let down: DynUpstream = Arc::new(InState(connection));
            let snapshot = tracker.snapshot(&down);
            assert_eq!(snapshot.state, State::Down, "{connection:?}");
            assert_eq!(snapshot.latency_ms, None, "{connection:?}");
        }
        tracker.record_failure("ping timed out".into());
        let degraded = tracker.snapshot(&up);
        assert_ne!(degraded.state, State::Healthy);
        assert_eq!(degraded.latency_ms, None);
    }
}
