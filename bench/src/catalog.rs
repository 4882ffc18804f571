//! Catalog scale: OpenAPI import time and peak RSS per spec (one child process per
//! spec, so the peak is that spec's alone), `tools/list` over a large catalog filtered
//! for a tenant, and the gateway's memory per idle MCP session.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_adapters::Upstream;
use toolgate_adapters::openapi::{OpenApiConfig, OpenApiUpstream};
use toolgate_test_support::cluster_spec::cluster_api_swagger_text;

use crate::Settings;
use crate::client::{McpHttp, http_client};
use crate::load::median_duration;
use crate::proc::{Gateway, TempDir, Upstreams, self_exe, shared_dir, status_kb, toolgate_bin};
use crate::report::Report;
use crate::upstreams::openapi_spec;

/// The real specs timed in a full run (from the shared corpus).
const SPECS: &[(&str, &str)] = &[
    ("stripe", "stripe-spec3.yaml"),
    ("github", "github-api.github.com.json"),
    ("twilio", "twilio_api_v2010.json"),
];
/// The tenant's API key in the `tools/list` measurement.
const API_KEY: &str = "bench-key-0123456789abcdef";
/// The protocol tools every `tools/list` carries.
const PROTOCOL_TOOLS: usize = 4;

/// `toolgate-bench import-one SPEC [--runs N]`: imports the spec N times (median time)
/// and prints one JSON line with the tool count, the median and the process's peak RSS.
pub(crate) fn import_one(args: &[String]) -> Result<()> {
    let (spec, runs) = match args {
        [spec] => (spec.clone(), 3),
        [spec, flag, n] if flag == "--runs" => (
            spec.clone(),
            n.parse::<usize>()
                .ok()
                .filter(|n| (1..=20).contains(n))
                .context("--runs: 1 to 20")?,
        ),
        _ => bail!("usage: toolgate-bench import-one SPEC [--runs N]"),
    };
    let base_rss = status_kb(0, "VmRSS").unwrap_or(0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut times = Vec::new();
    let mut tools = 0;
    let mut skipped = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let (upstream, report) = runtime.block_on(OpenApiUpstream::load(
            "bench",
            OpenApiConfig::from_path(&spec),
        ))?;
        times.push(start.elapsed());
        tools = upstream.tools().len();
        skipped = report.skipped.len();
    }
    let median = median_duration(&mut times);
    println!(
        "{}",
        json!({
            "tools": tools,
            "skipped": skipped,
            "median_ms": median.as_secs_f64() * 1000.0,
            "peak_rss_kb": status_kb(0, "VmHWM").unwrap_or(0),
            "base_rss_kb": base_rss,
        })
    );
    Ok(())
}

/// `toolgate-bench cluster-spec FILE`: writes the generated cluster API spec (the
/// import rows' deep-shared-definitions shape) to try it outside the bench.
pub(crate) fn write_cluster_spec(args: &[String]) -> Result<()> {
    let [file] = args else {
        bail!("usage: toolgate-bench cluster-spec FILE");
    };
    std::fs::write(file, cluster_api_swagger_text())?;
    Ok(())
}

/// Runs `import-one` in a child process (bounded in time) and returns its answer.
fn import_in_child(spec: &Path, runs: usize) -> Result<Value> {
    let mut child = Command::new(self_exe()?)
        .arg("import-one")
        .arg(spec)
        .args(["--runs", &runs.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("import of {} took over 600 s", spec.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "import of {} failed: {}",
            spec.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).with_context(|| format!("import-one said {line:?}"))
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

async fn imports(settings: &Settings, report: &mut Report) -> Result<()> {
    let mut specs = Vec::new();
    let generated = TempDir::new("specs")?;
    // The deep-shared-definitions shape (no licensed copy in the corpus): generated,
    // in both runs, written indented as such specs are published.
    let cluster = generated.path().join("cluster-api-swagger.json");
    std::fs::write(&cluster, cluster_api_swagger_text())?;
    specs.push(("generated cluster API (Swagger 2.0)".to_owned(), cluster));
    if settings.smoke {
        let path = generated.path().join("generated-200.json");
        std::fs::write(
            &path,
            openapi_spec("http://127.0.0.1:9/api", 199).to_string(),
        )?;
        specs.push(("generated (200 operations)".to_owned(), path));
    } else {
        let dir = shared_dir().join("specs");
        for (label, file) in SPECS {
            specs.push(((*label).to_owned(), dir.join(file)));
        }
    }
    let runs = if settings.smoke { 1 } else { 3 };
    for (label, path) in specs {
        let name = format!("import {label}");
        if !path.is_file() {
            eprintln!(
                "notice: {} not found (set TOOLGATE_SHARED); row skipped",
                path.display()
            );
            report.row(name, format!("not measured: {} not found", path.display()));
            continue;
        }
        eprintln!("catalog: importing {}", path.display());
        let answer = import_in_child(&path, runs)?;
        let tools = answer["tools"].as_u64().unwrap_or(0);
        let skipped = answer["skipped"].as_u64().unwrap_or(0);
        let ms = answer["median_ms"].as_f64().unwrap_or(f64::NAN);
        let peak = answer["peak_rss_kb"].as_u64().unwrap_or(0);
        let base = answer["base_rss_kb"].as_u64().unwrap_or(0);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        report.row(
            name,
            format!(
                "{ms:.0} ms (median of {runs}), {tools} tools ({skipped} operations skipped) from {:.1} MB; peak RSS {:.0} MB (process at start: {:.0} MB)",
                size as f64 / 1e6,
                mb(peak),
                mb(base)
            ),
        );
        if label.starts_with("generated cluster API") {
            report.target(
                "cluster API import peak RSS",
                "≤ 150 MB",
                format!("{:.0} MB", mb(peak)),
                mb(peak) <= 150.0,
            );
        }
        if label == "github" {
            report.target(
                "GitHub import",
                "≤ 1 s",
                format!("{ms:.0} ms"),
                ms <= 1000.0,
            );
        }
    }
    Ok(())
}

/// The whole gateway serving the generated cluster API: started on it, `tools/list`
/// answered twice, its peak RSS then (import, catalog, lists), and the peak after one
/// call.
///
/// The target bounds what the gateway allocates for the spec: the peak less the pages
/// of mapped files (the binary, and the token counter's tables embedded in it, which
/// load at startup since every definition is counted). The same measure as the e2e
/// test `a_large_swagger_spec_with_shared_definitions_is_served_within_150_mb`.
async fn serve_cluster_api(settings: &Settings, report: &mut Report) -> Result<()> {
    let bin = toolgate_bin(settings.toolgate.as_deref())?;
    let dir = TempDir::new("cluster")?;
    let spec = dir.path().join("cluster-api-swagger.json");
    std::fs::write(&spec, cluster_api_swagger_text())?;
    // The API: every request answers one small object.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let api = format!("http://{}/", listener.local_addr()?);
    let server = tokio::spawn(async move {
        let app = axum::Router::new().fallback(|| async {
            axum::Json(json!({"kind": "Deployment", "metadata": {"name": "web"}}))
        });
        let _ = axum::serve(listener, app).await;
    });
    let config = json!({
        "health": {"interval": "60s"},
        // The whole catalog in one list.
        "sessions": {"list_page_size": 100_000, "initial_max_tokens": 1_000_000_000},
        "upstreams": {"cluster": {"openapi": {
            "spec_path": spec, "base_url": api, "allow_private_networks": true
        }}}
    });
    // Started until ready: the spec parsed and imported, every definition counted and
    // fitted to its budget, the catalog built (50 ms polls of /readyz).
    let started = Instant::now();
    let gateway = Gateway::start(&bin, "cluster", &config).await?;
    let ready = started.elapsed();
    let mut session = McpHttp::connect(&gateway.url("/mcp"), "", json!({}), None).await?;
    let mut listed = 0;
    let mut bytes = 0;
    for _ in 0..2 {
        let (result, size, _) = session.request("tools/list", json!({})).await?;
        listed = result["tools"].as_array().map_or(0, Vec::len);
        bytes = size;
    }
    let peak = status_kb(gateway.proc.pid(), "VmHWM")
        .ok_or_else(|| anyhow!("cannot read the gateway's VmHWM"))?;
    let mapped = status_kb(gateway.proc.pid(), "RssFile")
        .ok_or_else(|| anyhow!("cannot read the gateway's RssFile"))?;
    let allocated = peak.saturating_sub(mapped);
    let (result, _, _) = session
        .request(
            "tools/call",
            json!({"name": "cluster__readAppsV1NamespacedDeployment",
                "arguments": {"namespace": "prod", "name": "web"}}),
        )
        .await?;
    server.abort();
    if result["isError"] == true {
        bail!("the cluster API call failed: {result}");
    }
    let after_call = status_kb(gateway.proc.pid(), "VmHWM")
        .ok_or_else(|| anyhow!("cannot read the gateway's VmHWM"))?;
    report.row(
        "serve generated cluster API (Swagger 2.0)",
        format!(
            "ready in {} ms; peak RSS {:.0} MB after startup and two tools/list of {listed} \
             tools ({:.1} MB each), {:.0} MB of it mapped files (the binary and the token \
             counter's embedded tables): {:.0} MB allocated; {:.0} MB peak after the first call",
            ready.as_millis(),
            mb(peak),
            bytes as f64 / 1e6,
            mb(mapped),
            mb(allocated),
            mb(after_call)
        ),
    );
    report.target(
        "cluster API served: gateway peak RSS less mapped files",
        "≤ 150 MB",
        format!("{:.0} MB ({:.0} MB with them)", mb(allocated), mb(peak)),
        mb(allocated) <= 150.0,
    );
    Ok(())
}

fn key_hash(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

async fn tools_list(settings: &Settings, report: &mut Report, upstreams: &Upstreams) -> Result<()> {
    let bin = toolgate_bin(settings.toolgate.as_deref())?;
    let n = settings.catalog_tools;
    let config = json!({
        "health": {"interval": "60s"},
        // The whole visible list in one answer (what this row times).
        "sessions": {"list_page_size": 100_000, "initial_max_tokens": 1_000_000_000},
        "tenants": {"bench": {
            "api_keys": [key_hash(API_KEY)],
            "allow": ["big__a_*"],
            "initial": ["big__a_*"]
        }},
        "upstreams": {"big": {"streamable_http": {"url": upstreams.url("/big/mcp")}}}
    });
    let gateway = Gateway::start(&bin, "catalog", &config).await?;
    let mut session = McpHttp::connect(&gateway.url("/mcp"), "", json!({}), Some(API_KEY)).await?;
    let mut direct = McpHttp::connect(&upstreams.url("/big/mcp"), "", json!({}), None).await?;
    let expected = n / 2 + PROTOCOL_TOOLS;
    let mut times = Vec::new();
    let mut direct_times = Vec::new();
    let mut bytes = 0;
    let mut listed = 0;
    // Two warm-up lists, then the timed ones.
    for i in 0..settings.list_runs + 2 {
        let (result, size, took) = session.request("tools/list", json!({})).await?;
        listed = result["tools"].as_array().map_or(0, Vec::len);
        bytes = size;
        let (_, _, direct_took) = direct.request("tools/list", json!({})).await?;
        if i >= 2 {
            times.push(took);
            direct_times.push(direct_took);
        }
    }
    if listed != expected {
        bail!("tools/list listed {listed} tools, expected {expected}");
    }
    let median = median_duration(&mut times);
    let direct_median = median_duration(&mut direct_times);
    report.row(
        format!("tools/list, {n}-tool catalog, tenant allowed half"),
        format!(
            "{:.2} ms median of {} ({listed} tools listed, {:.0} KB); the upstream's own list of {n} tools directly: {:.2} ms",
            median.as_secs_f64() * 1000.0,
            times.len(),
            bytes as f64 / 1024.0,
            direct_median.as_secs_f64() * 1000.0
        ),
    );
    if !settings.smoke {
        report.target(
            "tools/list over 5,000 tools",
            "≤ 5 ms",
            format!("{:.2} ms", median.as_secs_f64() * 1000.0),
            median <= Duration::from_millis(5),
        );
    }
    Ok(())
}

/// Creates `count` MCP sessions (initialize + initialized) on `workers` connections.
async fn create_sessions(url: &str, count: usize, workers: usize) -> Result<()> {
    let per_worker = count.div_ceil(workers);
    let mut tasks = Vec::new();
    for w in 0..workers {
        let url = url.to_owned();
        let n = per_worker.min(count.saturating_sub(w * per_worker));
        tasks.push(tokio::spawn(async move {
            let http = http_client()?;
            let mut sessions = Vec::with_capacity(n);
            for _ in 0..n {
                sessions
                    .push(McpHttp::connect_with(http.clone(), &url, "", json!({}), None).await?);
            }
            Ok::<usize, anyhow::Error>(sessions.len())
        }));
    }
    let mut made = 0;
    for task in tasks {
        made += task.await??;
    }
    if made != count {
        bail!("created {made} sessions, expected {count}");
    }
    Ok(())
}

async fn session_memory(
    settings: &Settings,
    report: &mut Report,
    upstreams: &Upstreams,
) -> Result<()> {
    let bin = toolgate_bin(settings.toolgate.as_deref())?;
    let config = json!({
        "health": {"interval": "60s"},
        "upstreams": {"fast": {"streamable_http": {"url": upstreams.url("/mcp")}}}
    });
    let gateway = Gateway::start(&bin, "sessions", &config).await?;
    let url = gateway.url("/mcp");
    let settle = Duration::from_millis(if settings.smoke { 100 } else { 1000 });
    // Warm up: the runtime's threads, connection buffers, the session map's first growth.
    create_sessions(&url, 100.min(settings.sessions), 8).await?;
    tokio::time::sleep(settle).await;
    let before = gateway
        .rss_kb()
        .ok_or_else(|| anyhow!("cannot read the gateway's VmRSS"))?;
    let n = settings.sessions;
    let start = Instant::now();
    create_sessions(&url, n, 8).await?;
    let took = start.elapsed();
    tokio::time::sleep(settle).await;
    let after = gateway
        .rss_kb()
        .ok_or_else(|| anyhow!("cannot read the gateway's VmRSS"))?;
    let per_session = (after.saturating_sub(before) * 1024) as f64 / n as f64;
    report.row(
        format!("memory per idle MCP session ({n} sessions)"),
        format!(
            "{:.1} KB per session (gateway RSS {:.1} MB before, {:.1} MB after; {:.0} sessions/s created)",
            per_session / 1024.0,
            mb(before),
            mb(after),
            n as f64 / took.as_secs_f64()
        ),
    );
    if !settings.smoke {
        report.target(
            "memory per idle session",
            "≤ 4 KB",
            format!("{:.1} KB", per_session / 1024.0),
            per_session <= 4096.0,
        );
    }
    Ok(())
}

pub(crate) async fn run(settings: &Settings, report: &mut Report) -> Result<()> {
    if settings.wants("imports") {
        imports(settings, report).await?;
        eprintln!("catalog: serving the generated cluster API");
        serve_cluster_api(settings, report).await?;
    }
    if !settings.wants("list") && !settings.wants("sessions") {
        return Ok(());
    }
    let upstreams = Upstreams::start(settings.catalog_tools)?;
    if settings.wants("list") {
        eprintln!("catalog: tools/list over {} tools", settings.catalog_tools);
        tools_list(settings, report, &upstreams).await?;
    }
    if settings.wants("sessions") {
        eprintln!("catalog: {} idle sessions", settings.sessions);
        session_memory(settings, report, &upstreams).await?;
    }
    Ok(())
}
