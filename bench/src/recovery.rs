//! Crash recovery: how long after a stdio upstream is killed with SIGKILL a tool call
//! through the gateway works again.
//!
//! The gateway serves one stdio upstream. Each round: calls go through for a while (the
//! server's healthy run, [`SERVED`]), the stdio child (found as the gateway's child
//! process) is killed with -9, then `POST /v1/tools/{tool}/call` is sent every 10 ms
//! until one answers with a result; the time from the kill to that answer is the
//! round's recovery. The row gives the median (and the range) of the rounds, for the
//! bench's own stdio server (`toolgate-bench stdio-server`, which starts in
//! milliseconds: the gateway's part — noticing the exit, the restart delay,
//! `initialize`, the first listing) and, when the npm test dependencies are installed,
//! for server-everything run by `node` (a real server's start on top).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::Settings;
use crate::client::http_client;
use crate::load::median_duration;
use crate::proc::{Gateway, self_exe, toolgate_bin};
use crate::report::Report;
use crate::upstreams::FAST_TOOL;

/// How long the server serves calls before each kill: a crash after a short healthy
/// run, not a crash loop.
const SERVED: Duration = Duration::from_secs(2);
/// The target the median is held to.
const TARGET: Duration = Duration::from_millis(1500);

pub(crate) async fn run(settings: &Settings, report: &mut Report) -> Result<()> {
    if !settings.wants("recovery") {
        return Ok(());
    }
    let bin = toolgate_bin(settings.toolgate.as_deref())?;
    let kills = if settings.smoke { 2 } else { 7 };
    let exe = self_exe()?.display().to_string();
    let bench_server = (
        "the bench's stdio server".to_owned(),
        json!({"command": exe, "args": ["stdio-server"]}),
        format!("pipe__{FAST_TOOL}"),
        json!({"message": "hi"}),
    );
    let mut servers = vec![bench_server];
    match everything_entry() {
        Some(entry) => servers.push((
            "server-everything (node)".to_owned(),
            json!({"command": "node", "args": [entry.display().to_string(), "stdio"]}),
            "pipe__echo".to_owned(),
            json!({"message": "hi"}),
        )),
        None => report.note(
            "stdio crash recovery of server-everything not measured: no \
             node_modules/@modelcontextprotocol/server-everything (npm ci) or no node",
        ),
    }
    for (label, stdio, tool, arguments) in servers {
        let config = json!({
            "health": {"interval": "60s"},
            "upstreams": {"pipe": {"stdio": stdio}}
        });
        let gateway = Gateway::start(&bin, "recovery", &config)
            .await
            .context("start the gateway")?;
        let mut times = measure(&gateway, &tool, &arguments, kills).await?;
        let (min, max) = (
            times.iter().min().copied().unwrap_or_default(),
            times.iter().max().copied().unwrap_or_default(),
        );
        let median = median_duration(&mut times);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        report.row(
            format!(
                "stdio crash recovery, {label} (kill -9 after {SERVED:?} of calls, {kills} times)"
            ),
            format!(
                "median {:.0} ms (min {:.0}, max {:.0}) until tools/call answers again",
                ms(median),
                ms(min),
                ms(max)
            ),
        );
        if !settings.smoke {
            report.target(
                &format!("stdio crash recovery median, {label}"),
                "≤ 1.5 s",
                format!("{:.0} ms", ms(median)),
                median <= TARGET,
            );
        }
    }
    Ok(())
}

/// server-everything's entry in the npm test dependencies, when they and `node` are
/// there (`TOOLGATE_NODE_MODULES`, default `node_modules` in the workspace).
fn everything_entry() -> Option<PathBuf> {
    let node_modules = std::env::var_os("TOOLGATE_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../node_modules"));
    let entry = node_modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    (entry.is_file() && node).then_some(entry)
}

/// Kills the gateway's stdio child `kills` times; the time to the first answer after
/// each kill.
async fn measure(
    gateway: &Gateway,
    tool: &str,
    arguments: &Value,
    kills: usize,
) -> Result<Vec<Duration>> {
    let http = http_client()?;
    let url = gateway.url(&format!("/v1/tools/{tool}/call"));
    let call = || async {
        let response = http
            .post(&url)
            .json(&json!({"arguments": arguments}))
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match response {
            Ok(r) if r.status() == 200 => {
                let body: Value = r.json().await.unwrap_or(Value::Null);
                body.get("is_error") != Some(&Value::Bool(true))
                    && body.get("isError") != Some(&Value::Bool(true))
            }
            _ => false,
        }
    };
    let answered_within = |limit: Duration| async move {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if call().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    };
    if !answered_within(Duration::from_secs(60)).await {
        bail!(
            "{tool} never answered through the gateway; log:\n{}",
            gateway.log_tail()
        );
    }
    let mut times = Vec::with_capacity(kills);
    for round in 0..kills {
        let served = Instant::now();
        while served.elapsed() < SERVED {
            call().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let child = stdio_child(gateway.proc.pid())
            .with_context(|| format!("round {round}: the gateway has no stdio child"))?;
        let killed = Instant::now();
        let status = std::process::Command::new("kill")
            .args(["-9", &child.to_string()])
            .status()
            .context("kill -9")?;
        if !status.success() {
            bail!("kill -9 {child} failed");
        }
        let deadline = killed + Duration::from_secs(60);
        loop {
            // A call that lands before the exit is noticed still reaches the old
            // child's closed pipe and fails: only an answer counts.
            if call().await {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "round {round}: {tool} not back 60 s after the kill; log:\n{}",
                    gateway.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        times.push(killed.elapsed());
    }
    Ok(times)
}

/// The gateway's child process (its one stdio upstream), from `/proc/*/stat`.
fn stdio_child(gateway: u32) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    // state, then ppid.
                    let mut fields = rest.split_whitespace();
                    let state = fields.next()?;
                    let ppid: u32 = fields.next()?.parse().ok()?;
                    Some(ppid == gateway && state != "Z")
                })
                .unwrap_or(false)
        })
}
