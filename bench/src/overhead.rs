//! Call overhead: the same tool call directly and through the gateway, at each
//! concurrency, in interleaved rounds.
//!
//! Paths: the MCP server over streamable HTTP (direct vs the gateway's `/mcp`); the HTTP
//! API (direct `GET` vs the gateway's REST `POST /v1/tools/{name}/call` and its `/mcp`);
//! the stdio MCP server through the gateway (direct stdio from the bench at c=1 only,
//! since one pipe answers one request at a time). A bare forwarding proxy in front of
//! the MCP server is measured beside them: what one more hop costs with no gateway
//! work at all. So are the peer gateways that are installed (`peers`): the same MCP
//! call through each, in the same rounds.

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::Settings;
use crate::client::{ApiDirect, McpHttp, Rest, StdioDirect};
use crate::load::{self, Conn, Round};
use crate::peers::{self, Peer, PeerKind, Started};
use crate::proc::{Gateway, TempDir, Upstreams, cpu_time, self_exe, toolgate_bin};
use crate::report::{OverheadRow, Report, Summary};
use crate::upstreams::{API_OPERATION, FAST_TOOL, openapi_spec};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    McpDirect,
    /// The bare forwarding proxy: the cost of one more hop and nothing else.
    McpProxy,
    McpGateway,
    /// The same call as a sessionless 2026-07-28 request, directly and via the gateway.
    McpSessionlessDirect,
    McpSessionlessGateway,
    ApiDirect,
    ApiRest,
    ApiMcp,
    StdioGateway,
    StdioDirect,
    /// The MCP call through a peer gateway.
    Peer(PeerKind),
}

/// The rows of the overhead table (the floor's is [`crate::report::FLOOR_ROW`]).
const MCP_ROW: &str = "MCP streamable HTTP";
const SESSIONLESS_ROW: &str = "MCP 2026-07-28, sessionless";
const REST_ROW: &str = "OpenAPI via REST";
const API_MCP_ROW: &str = "OpenAPI via MCP";
const STDIO_ROW: &str = "stdio via MCP";

/// Peers run up to this concurrency only: a one-process Python peer already queues at
/// c=16, and more callers would only lengthen its queue and the run.
const PEER_MAX_CONCURRENCY: usize = 16;

impl Target {
    fn via_gateway(self) -> bool {
        matches!(
            self,
            Target::McpGateway
                | Target::McpSessionlessGateway
                | Target::ApiRest
                | Target::ApiMcp
                | Target::StdioGateway
        )
    }
}

/// The gateway config: the three upstreams, health checks out of the way, the call
/// limiter above the highest concurrency measured.
pub(crate) fn gateway_config(upstreams: &Upstreams, spec_path: &str) -> Result<Value> {
    let exe = self_exe()?;
    Ok(json!({
        "health": {"interval": "60s"},
        "upstreams": {
            "fast": {
                "streamable_http": {"url": upstreams.url("/mcp")},
                "max_concurrent_calls": 256
            },
            "api": {
                "openapi": {"spec_path": spec_path, "allow_private_networks": true},
                "max_concurrent_calls": 256
            },
            "pipe": {
                "stdio": {"command": exe, "args": ["stdio-server"]},
                "max_concurrent_calls": 256
            }
        }
    }))
}

async fn connect(
    target: Target,
    upstreams: &Upstreams,
    floor: &Upstreams,
    gateway: &Gateway,
    peers: &[Peer],
    count: usize,
) -> Result<Vec<Conn>> {
    let api_tool = format!("api__{API_OPERATION}");
    let fast_tool = format!("fast__{FAST_TOOL}");
    let mut conns = Vec::with_capacity(count);
    for _ in 0..count {
        let hi = || json!({"message": "hi"});
        // An MCP session with the given endpoint, calling `tool`.
        let session = |url: String, tool: &str, arguments: Value| {
            let tool = tool.to_owned();
            async move {
                let session = McpHttp::connect(&url, &tool, arguments, None).await?;
                anyhow::Ok(Conn::Mcp(Box::new(session)))
            }
        };
        let sessionless = |url: String, tool: &str| {
            McpHttp::sessionless(&url, tool, hi()).map(|client| Conn::Mcp(Box::new(client)))
        };
        let conn = match target {
            Target::McpDirect => session(upstreams.url("/mcp"), FAST_TOOL, hi()).await?,
            Target::McpProxy => session(floor.url("/proxy/mcp"), FAST_TOOL, hi()).await?,
            Target::McpGateway => session(gateway.url("/mcp"), &fast_tool, hi()).await?,
            Target::McpSessionlessDirect => sessionless(upstreams.url("/mcp"), FAST_TOOL)?,
            Target::McpSessionlessGateway => sessionless(gateway.url("/mcp"), &fast_tool)?,
            Target::ApiDirect => Conn::Api(ApiDirect::new(upstreams.url("/api/items/42"))?),
            Target::ApiRest => Conn::Rest(Rest::new(&gateway.base, &api_tool)?),
            Target::ApiMcp => session(gateway.url("/mcp"), &api_tool, json!({"id": "42"})).await?,
            Target::StdioGateway => session(gateway.url("/mcp"), "pipe__echo", hi()).await?,
            Target::StdioDirect => Conn::Stdio(Box::new(StdioDirect::start(&self_exe()?).await?)),
            Target::Peer(kind) => {
                let peer = peers
                    .iter()
                    .find(|p| p.kind == kind)
                    .context("peer not running")?;
                let mut session =
                    McpHttp::connect(&peer.mcp_url, &peer.tool, hi(), Some(&peer.bearer)).await?;
                // A peer opens its upstream session on a session's first call (seconds
                // for 16 at once): done here, outside the rounds, as the gateway's is
                // open before its first round.
                session
                    .call()
                    .await
                    .context("first call through the peer")?;
                Conn::Mcp(Box::new(session))
            }
        };
        conns.push(conn);
    }
    Ok(conns)
}

/// What `--only` may name of this part.
pub(crate) const PATHS: [&str; 6] = [
    "mcp",
    "mcp-sessionless",
    "rest",
    "api-mcp",
    "stdio",
    "peers",
];

pub(crate) async fn run(settings: &Settings, report: &mut Report) -> Result<()> {
    if !PATHS.iter().any(|p| settings.wants(p)) {
        return Ok(());
    }
    let bin = toolgate_bin(settings.toolgate.as_deref())?;
    let upstreams = Upstreams::start(settings.catalog_tools.min(10))?;
    let floor = Upstreams::start_proxy(&upstreams.url("/mcp"))?;
    let dir = TempDir::new("overhead")?;
    let spec_path = dir.path().join("bench-api.json");
    std::fs::write(
        &spec_path,
        openapi_spec(&upstreams.url("/api"), 0).to_string(),
    )?;
    let config = gateway_config(&upstreams, &spec_path.display().to_string())?;
    let gateway = Gateway::start(&bin, "overhead", &config)
        .await
        .context("start the gateway")?;
    let peers = start_peers(settings, &upstreams, report).await;

    for &c in &settings.concurrency {
        eprintln!("overhead: concurrency {c}");
        let targets = targets_at(settings, c, &peers);
        let mut pools = Vec::new();
        for &target in &targets {
            let conns = connect(target, &upstreams, &floor, &gateway, &peers, c)
                .await
                .with_context(|| format!("connect {target:?} x{c}"))?;
            pools.push((target, Some(conns), Vec::<Round>::new()));
        }
        for round in 0..settings.rounds {
            // Alternate the order so slow drift of the machine hits both sides alike.
            let order: Vec<usize> = if round % 2 == 0 {
                (0..pools.len()).collect()
            } else {
                (0..pools.len()).rev().collect()
            };
            for index in order {
                let (target, conns, rounds) = &mut pools[index];
                let taken = conns.take().unwrap_or_default();
                let total = taken.len() * settings.max_calls;
                // The gateway's process, the bare proxy's, or a peer's whole process
                // group: whatever is in the middle.
                let current = *target;
                let cpu = || match current {
                    Target::Peer(kind) => peers.iter().find(|p| p.kind == kind)?.cpu_time(),
                    Target::McpProxy => cpu_time(floor.pid()),
                    t if t.via_gateway() => cpu_time(gateway.proc.pid()),
                    _ => None,
                };
                let cpu_before = cpu();
                let (back, mut result) =
                    load::round(taken, settings.warmup, settings.measure, settings.max_calls)
                        .await
                        .with_context(|| format!("{target:?} at c={c}"))?;
                // Per call over the whole round (warm-up included): CPU time is only
                // readable per process, not per window.
                let all_calls = result.calls_including_warmup.min(total).max(1);
                if let (Some(before), Some(after)) = (cpu_before, cpu()) {
                    // Saturating: a peer's helper process that exited took its time along.
                    result.gateway_cpu = Some(after.saturating_sub(before) / all_calls as u32);
                }
                *conns = Some(back);
                eprintln!(
                    "overhead: c={c} round {} {target:?}: {:.0} calls/s, p50 {:.0} µs",
                    round + 1,
                    result.throughput,
                    result.p50.as_secs_f64() * 1e6
                );
                if result.calls == 0 {
                    anyhow::bail!("{target:?} at c={c}: no call completed in the round");
                }
                rounds.push(result);
            }
            // Let sockets and the allocator settle between rounds.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        report_rows(report, c, &pools, &peers);
    }
    // Stops every peer's process group.
    drop(peers);
    drop(gateway);

    if !settings.smoke {
        overhead_targets(report);
    }
    Ok(())
}

/// One target's connections (taken out while a round runs) and its rounds so far.
type Pool = (Target, Option<Vec<Conn>>, Vec<Round>);

/// What is measured at concurrency `c`: the paths `--only` asks for, each with the
/// direct call it reads against (and the peers, up to their concurrency).
fn targets_at(settings: &Settings, c: usize, peers: &[Peer]) -> Vec<Target> {
    let wanted = |path: &str| settings.only.is_empty() || settings.only.iter().any(|p| p == path);
    let mut targets = Vec::new();
    if wanted("mcp") {
        targets.extend([Target::McpDirect, Target::McpProxy, Target::McpGateway]);
    }
    if wanted("mcp-sessionless") {
        targets.extend([Target::McpSessionlessDirect, Target::McpSessionlessGateway]);
    }
    if wanted("rest") || wanted("api-mcp") {
        targets.push(Target::ApiDirect);
    }
    if wanted("rest") {
        targets.push(Target::ApiRest);
    }
    if wanted("api-mcp") {
        targets.push(Target::ApiMcp);
    }
    if wanted("stdio") {
        targets.push(Target::StdioGateway);
        if c == 1 {
            targets.push(Target::StdioDirect);
        }
    }
    if !peers.is_empty() && c <= PEER_MAX_CONCURRENCY {
        // A peer's row reads against the direct call and the bare proxy.
        for needed in [Target::McpDirect, Target::McpProxy] {
            if !targets.contains(&needed) {
                targets.push(needed);
            }
        }
        targets.extend(peers.iter().map(|p| Target::Peer(p.kind)));
    }
    targets
}

/// The report's overhead rows at concurrency `c`, from the rounds of each target.
fn report_rows(report: &mut Report, c: usize, pools: &[Pool], peers: &[Peer]) {
    let summary = |t: Target| {
        pools
            .iter()
            .find(|(target, _, _)| *target == t)
            .map(|(_, _, rounds)| Summary::of(rounds))
    };
    let mut rows = vec![
        (MCP_ROW.to_owned(), Target::McpDirect, Target::McpGateway),
        (
            crate::report::FLOOR_ROW.to_owned(),
            Target::McpDirect,
            Target::McpProxy,
        ),
    ];
    rows.extend(
        peers
            .iter()
            .map(|p| (p.row_label(), Target::McpDirect, Target::Peer(p.kind))),
    );
    rows.extend(
        [
            (
                SESSIONLESS_ROW,
                Target::McpSessionlessDirect,
                Target::McpSessionlessGateway,
            ),
            (REST_ROW, Target::ApiDirect, Target::ApiRest),
            (API_MCP_ROW, Target::ApiDirect, Target::ApiMcp),
            (STDIO_ROW, Target::StdioDirect, Target::StdioGateway),
        ]
        .map(|(path, direct, via)| (path.to_owned(), direct, via)),
    );
    for (path, direct, via) in rows {
        if let Some(gateway) = summary(via) {
            report.overhead.push(OverheadRow {
                path,
                concurrency: c,
                direct: summary(direct),
                gateway,
            });
        }
    }
}

/// Issue 19's targets, read at c=16: throughput and p99 against the bare proxy in the
/// same rounds, and the gateway's CPU per call on each path (the proxy's own CPU per
/// call is the floor row's, for comparison).
fn overhead_targets(report: &mut Report) {
    const C: usize = 16;
    let row = |path: &str| {
        report
            .overhead
            .iter()
            .find(|r| r.path == path && r.concurrency == C)
    };
    let floor = row(crate::report::FLOOR_ROW).map(|r| &r.gateway);
    let floor_cpu = floor
        .and_then(|f| f.gateway_cpu)
        .map_or_else(String::new, |cpu| {
            format!("; the bare proxy: {:.0} µs", crate::report::micros(cpu))
        });
    let mut targets = Vec::new();
    if let (Some(mcp), Some(floor)) = (row(MCP_ROW), floor) {
        let ratio = mcp.gateway.throughput / floor.throughput.max(f64::MIN_POSITIVE);
        targets.push((
            "throughput gateway/bare proxy, MCP, c=16".to_owned(),
            "≥ 0.85×",
            format!("{ratio:.2}×"),
            ratio >= 0.85,
        ));
        let p99 = mcp.gateway.p99.as_secs_f64() / floor.p99.as_secs_f64().max(1e-9);
        targets.push((
            "p99 gateway/bare proxy, MCP, c=16".to_owned(),
            "≤ 1.5×",
            format!("{p99:.2}×"),
            p99 <= 1.5,
        ));
    }
    for (path, limit, goal) in [
        (MCP_ROW, 25.0, "≤ 25 µs"),
        (SESSIONLESS_ROW, 25.0, "≤ 25 µs"),
        (REST_ROW, 30.0, "≤ 30 µs"),
        (API_MCP_ROW, 30.0, "≤ 30 µs"),
        (STDIO_ROW, 20.0, "≤ 20 µs"),
    ] {
        if let Some(cpu) = row(path).and_then(|r| r.gateway.gateway_cpu) {
            let cpu = crate::report::micros(cpu);
            targets.push((
                format!("gateway CPU per call, {path}, c=16"),
                goal,
                format!("{cpu:.0} µs{floor_cpu}"),
                cpu <= limit,
            ));
        }
    }
    for (what, goal, measured, met) in targets {
        report.target(&what, goal, measured, met);
    }
}

/// The installed peers, started in front of the bench's MCP server; each one not
/// installed or not starting is one line in the report instead.
async fn start_peers(settings: &Settings, upstreams: &Upstreams, report: &mut Report) -> Vec<Peer> {
    let mut running = Vec::new();
    if !settings.wants("peers") {
        return running;
    }
    for kind in PeerKind::ALL {
        eprintln!("overhead: starting peer {}", kind.label());
        match peers::start(kind, &upstreams.url("/mcp"), FAST_TOOL).await {
            Started::Ready(peer) => {
                eprintln!("overhead: {} ready at {}", peer.row_label(), peer.mcp_url);
                running.push(*peer);
            }
            Started::Skipped(line) => {
                eprintln!("overhead: {line}");
                report.note(line);
            }
        }
    }
    running
}
