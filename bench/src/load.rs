//! Closed-loop load: `c` workers, each with its own connection (and MCP session), call
//! back to back for a warm-up and then a measured window; every loop is bounded in
//! time and in count.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::client::{ApiDirect, McpHttp, Rest, StdioDirect};

/// One worker's connection.
pub(crate) enum Conn {
    Mcp(Box<McpHttp>),
    Rest(Rest),
    Api(ApiDirect),
    Stdio(Box<StdioDirect>),
}

impl Conn {
    async fn call(&mut self) -> Result<()> {
        match self {
            Conn::Mcp(c) => c.call().await,
            Conn::Rest(c) => c.call().await,
            Conn::Api(c) => c.call().await,
            Conn::Stdio(c) => c.call().await,
        }
    }
}

/// What one round measured.
#[derive(Clone, Debug)]
pub(crate) struct Round {
    /// Completed calls per second in the measured window.
    pub throughput: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub calls: usize,
    /// Calls made in the round, warm-up included.
    pub calls_including_warmup: usize,
    /// CPU time the gateway process used per call (gateway rounds only).
    pub gateway_cpu: Option<Duration>,
}

/// The p-th percentile (0..=100) of sorted values (nearest rank).
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn median_f64(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

pub(crate) fn median_duration(values: &mut [Duration]) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort();
    values[values.len() / 2]
}

/// Runs one round on `conns` (one task each) and hands them back.
pub(crate) async fn round(
    conns: Vec<Conn>,
    warmup: Duration,
    measure: Duration,
    max_calls: usize,
) -> Result<(Vec<Conn>, Round)> {
    let start = Instant::now();
    let measured_from = start + warmup;
    let end = measured_from + measure;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(max_calls.min(100_000));
                let mut last_done = measured_from;
                let mut error = None;
                let mut made = 0usize;
                for _ in 0..max_calls {
                    let t = Instant::now();
                    if t >= end {
                        break;
                    }
                    if let Err(e) = conn.call().await {
                        error = Some(e);
                        break;
                    }
                    made += 1;
                    let done = Instant::now();
                    if t >= measured_from {
                        latencies.push(done - t);
                        last_done = done;
                    }
                }
                (conn, latencies, last_done, error, made)
            })
        })
        .collect();
    let mut conns = Vec::with_capacity(tasks.len());
    let mut all = Vec::new();
    let mut last = measured_from;
    let mut made = 0;
    for task in tasks {
        let (conn, latencies, last_done, error, worker_made) = task.await?;
        made += worker_made;
        if let Some(e) = error {
            bail!("a call failed: {e:#}");
        }
        conns.push(conn);
        all.extend(latencies);
        last = last.max(last_done);
    }
    all.sort();
    let window = (last - measured_from).as_secs_f64();
    let throughput = if window > 0.0 {
        all.len() as f64 / window
    } else {
        0.0
    };
    Ok((
        conns,
        Round {
            throughput,
            p50: percentile(&all, 50.0),
            p99: percentile(&all, 99.0),
            calls: all.len(),
            calls_including_warmup: made,
            gateway_cpu: None,
        },
    ))
}
