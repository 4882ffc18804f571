//! Shared helpers for toolgate's end-to-end tests.
//!
//! What every crate's tests share (dependency lookup, ports, processes, the raw MCP
//! client, the recording mock API, text generators, tool-error assertions) lives in
//! `toolgate-test-support` and is re-exported here; this crate adds the gateway as a
//! process and what only the end-to-end tests use.
//!
//! The tests run the real `toolgate` binary against real upstreams (npm
//! `@modelcontextprotocol/server-everything`, the conformance fixture) and real clients
//! (PyPI `mcp`, the conformance suite, raw HTTP). This crate finds those parts, starts
//! them on free loopback ports, waits until they answer and kills them on drop.
//!
//! External test dependencies are installed by `scripts/test`. When one is missing a
//! test prints a notice and returns early (skips), except under `CI=true`, where a
//! missing dependency is a failure: CI must never pass by skipping.
//!
//! Every wait here is bounded in time and in attempts.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

pub mod browser;
pub mod build_context;
pub mod meta_echo;
pub mod redis;

// The helpers every crate's tests share live in `toolgate-test-support`; this crate
// re-exports them so its tests name one place.
pub mod oauth_upstream;
pub mod oidc_provider;
pub mod oidc_resource;
pub use toolgate_test_support::mcp_http;
pub use toolgate_test_support::sys;
pub use toolgate_test_support::{
    Everything, McpSession, MockApi, NodeDeps, Proc, Recorded, RpcExchange, RpcExchangeWithHeaders,
    START_TIMEOUT, SlowApi, TempDir, assert_tool_error, first_text, free_port, http, missing,
    python, require, run_bounded, specs_dir, tcp_open, under_ci, wait_for, workspace_root,
};

/// `sha256:…` for a tenant's `api_keys`, from `toolgate hash-key`.
pub fn hash_key(key: &str) -> String {
    let out = std::process::Command::new(toolgate_bin())
        .arg("hash-key")
        .arg(key)
        .output()
        .expect("run toolgate hash-key");
    assert!(out.status.success(), "toolgate hash-key: {out:?}");
    let hash = String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned();
    assert!(hash.starts_with("sha256:"), "hash-key printed {hash:?}");
    hash
}

/// The gateway's `/metrics` text (bearer `token` when given: a gateway with credentials
/// needs the admin or metrics token; an open one ignores it).
pub async fn scrape_metrics(gateway: &Gateway, token: Option<&str>) -> String {
    let mut request = http()
        .get(gateway.url("/metrics"))
        .timeout(Duration::from_secs(10));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the metrics text")
}

/// `GET path` on the gateway's REST surface (bearer `key` when given): status and JSON
/// body (`null` when the body is not JSON).
pub async fn rest_get(gateway: &Gateway, path: &str, key: Option<&str>) -> (u16, Value) {
    let mut request = http()
        .get(gateway.url(path))
        .timeout(Duration::from_secs(60));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("GET");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `POST path` with a JSON body on the gateway's REST surface.
pub async fn rest_post(
    gateway: &Gateway,
    path: &str,
    key: Option<&str>,
    body: Value,
) -> (u16, Value) {
    let mut request = http()
        .post(gateway.url(path))
        .json(&body)
        .timeout(Duration::from_secs(60));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("POST");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The conformance fixture (`conformance_fixture` test binary) on a free port.
pub struct Fixture {
    pub proc: Proc,
    pub url: String,
}

impl Fixture {
    /// `bin` is `env!("CARGO_BIN_EXE_conformance_fixture")` from the calling test.
    pub async fn start(bin: &str) -> Fixture {
        let port = free_port();
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("--listen").arg(format!("127.0.0.1:{port}"));
        let mut proc = Proc::spawn("conformance_fixture", &mut cmd);
        wait_for("conformance fixture", START_TIMEOUT, || {
            let alive = proc.exited().is_none();
            async move {
                assert!(alive, "conformance fixture exited early");
                tcp_open(port).await.then_some(())
            }
        })
        .await;
        Fixture {
            proc,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

/// The `toolgate` binary: `TOOLGATE_BIN`, else built once per test process with
/// `cargo build -p toolgate --bin toolgate` into this workspace's target directory
/// (a no-op when it is up to date).
pub fn toolgate_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("TOOLGATE_BIN") {
            return PathBuf::from(p);
        }
        // target/<profile>/deps/<test-exe> -> target/<profile>/toolgate
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test executable lives in target/<profile>/deps");
        let bin = profile_dir.join("toolgate");
        if std::env::var_os("TOOLGATE_SKIP_BUILD").is_none() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = std::process::Command::new(cargo);
            cmd.args(["build", "--quiet", "-p", "toolgate", "--bin", "toolgate"])
                .current_dir(workspace_root());
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            if let Some(target_dir) = profile_dir.parent() {
                cmd.env("CARGO_TARGET_DIR", target_dir);
            }
            let status = run_bounded(&mut cmd, Duration::from_secs(900))
                .unwrap_or_else(|e| panic!("cargo build -p toolgate: {e}"));
            assert!(status.success(), "cargo build -p toolgate failed: {status}");
        }
        assert!(
            bin.is_file(),
            "toolgate binary not found at {}",
            bin.display()
        );
        bin
    })
    .clone()
}

/// A running gateway (`toolgate serve`) with its config in a temp dir.
pub struct Gateway {
    pub proc: Proc,
    pub port: u16,
    pub base: String,
    pub config_path: PathBuf,
    _dir: TempDir,
}

impl Gateway {
    /// Writes `config` (JSON is valid YAML) and starts `toolgate serve` on a free port,
    /// waiting for `/healthz` then `/readyz` to answer 200.
    pub async fn start(config: Value) -> Gateway {
        let gw = Self::spawn(config);
        gw.wait_ready(START_TIMEOUT).await;
        gw
    }

    /// Starts `toolgate serve --config <path>` (an existing file, e.g. one of
    /// `config/`) on a free port and waits for readiness.
    pub async fn start_with_file(path: &Path) -> Gateway {
        Self::start_with_file_args(path, &[]).await
    }

    /// [`Gateway::start_with_file`] with more `serve` arguments (e.g. `--no-watch`).
    pub async fn start_with_file_args(path: &Path, args: &[&str]) -> Gateway {
        Self::start_serving(Some(path), args).await
    }

    /// Starts `toolgate serve` without `--config` (its embedded defaults), working in
    /// a temp dir, on a free port, and waits for readiness.
    pub async fn start_embedded_defaults() -> Gateway {
        Self::start_serving(None, &[]).await
    }

    async fn start_serving(path: Option<&Path>, args: &[&str]) -> Gateway {
        let port = free_port();
        let dir = TempDir::new("gateway");
        let mut cmd = std::process::Command::new(toolgate_bin());
        cmd.arg("serve");
        if let Some(path) = path {
            cmd.arg("--config").arg(path);
        }
        cmd.arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .env(
                "TOOLGATE_LOG",
                std::env::var("TOOLGATE_LOG").unwrap_or_else(|_| "info,rmcp=warn".into()),
            )
            .env("NO_COLOR", "1")
            // Relative paths in a file resolve against the file; the embedded defaults'
            // data directory lands in the temp dir.
            .current_dir(if path.is_some() {
                workspace_root()
            } else {
                dir.path().to_path_buf()
            });
        let gw = Gateway {
            proc: Proc::spawn("toolgate", &mut cmd),
            port,
            base: format!("http://127.0.0.1:{port}"),
            config_path: path.map(Path::to_path_buf).unwrap_or_default(),
            _dir: dir,
        };
        gw.wait_ready(START_TIMEOUT).await;
        gw
    }

    /// Starts the gateway without waiting for readiness.
    pub fn spawn(config: Value) -> Gateway {
        Self::spawn_with_env(config, &[])
    }

    /// [`Gateway::start`] with these variables added to the gateway's environment.
    pub async fn start_with_env(config: Value, env: &[(&str, &str)]) -> Gateway {
        let gw = Self::spawn_with_env(config, env);
        gw.wait_ready(START_TIMEOUT).await;
        gw
    }

    /// [`Gateway::spawn`] with these variables added to the gateway's environment.
    pub fn spawn_with_env(mut config: Value, env: &[(&str, &str)]) -> Gateway {
        let port = free_port();
        let dir = TempDir::new("gateway");
        let config_path = dir.path().join("toolgate.yaml");
        if let Some(obj) = config.as_object_mut() {
            obj.entry("listen")
                .or_insert_with(|| json!(format!("127.0.0.1:{port}")));
        }
        // `@GATEWAY_BASE@` in the config stands for the gateway's own base URL (its
        // port is chosen here), e.g. in `public_url`.
        let text = serde_json::to_string_pretty(&config)
            .expect("config json")
            .replace("@GATEWAY_BASE@", &format!("http://127.0.0.1:{port}"));
        std::fs::write(&config_path, text).expect("write config");
        let mut cmd = std::process::Command::new(toolgate_bin());
        cmd.arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(env.iter().copied())
            .current_dir(workspace_root());
        let proc = Proc::spawn("toolgate", &mut cmd);
        Gateway {
            proc,
            port,
            base: format!("http://127.0.0.1:{port}"),
            config_path,
            _dir: dir,
        }
    }

    pub async fn wait_ready(&self, timeout: Duration) {
        self.wait_ok(&["/healthz", "/readyz"], timeout).await;
    }

    /// Waits until each of `paths` answers 200, in turn (e.g. only `/healthz`, for a
    /// gateway whose readiness is what a test looks at).
    pub async fn wait_ok(&self, paths: &[&str], timeout: Duration) {
        let client = http();
        for path in paths {
            let url = self.url(path);
            wait_for(&format!("gateway GET {path} == 200"), timeout, || {
                let client = client.clone();
                let url = url.clone();
                async move {
                    let r = client
                        .get(&url)
                        .timeout(Duration::from_secs(2))
                        .send()
                        .await
                        .ok()?;
                    (r.status() == 200).then_some(())
                }
            })
            .await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn mcp_url(&self) -> String {
        self.url("/mcp")
    }

    /// A secret from the gateway's config file by JSON pointer (`/admin/token`,
    /// `/metrics/token`), for the ops endpoints that need one once credentials are
    /// configured; `None` when the file has none (or is not JSON).
    pub fn config_secret(&self, pointer: &str) -> Option<String> {
        let text = std::fs::read_to_string(&self.config_path).ok()?;
        let config: Value = serde_json::from_str(&text).ok()?;
        config.pointer(pointer)?.as_str().map(str::to_owned)
    }

    /// `GET /v1/upstreams` as JSON (with the admin token when the config has one).
    pub async fn upstreams(&self) -> Value {
        let mut request = http()
            .get(self.url("/v1/upstreams"))
            .timeout(Duration::from_secs(10));
        if let Some(token) = self.config_secret("/admin/token") {
            request = request.bearer_auth(token);
        }
        let r = match request.send().await {
            Ok(r) => r,
            Err(e) => panic!("GET /v1/upstreams: {e} ({})", self.liveness()),
        };
        assert_eq!(r.status(), 200, "GET /v1/upstreams status");
        r.json().await.expect("GET /v1/upstreams JSON")
    }

    /// The `/v1/upstreams` entry named `name`.
    pub async fn upstream(&self, name: &str) -> Value {
        let all = self.upstreams().await;
        all.as_array()
            .and_then(|a| a.iter().find(|u| u["name"] == name).cloned())
            .unwrap_or_else(|| panic!("upstream {name} not in /v1/upstreams: {all}"))
    }

    /// Waits until upstream `name` reports `state`; returns its entry.
    pub async fn wait_upstream_state(&self, name: &str, state: &str, timeout: Duration) -> Value {
        wait_for(
            &format!("upstream {name} state {state}"),
            timeout,
            || async {
                let u = self.upstream(name).await;
                (u["state"] == state).then_some(u)
            },
        )
        .await
    }

    /// "running" or how the gateway process ended (for failure messages).
    pub fn liveness(&self) -> String {
        // A process that ended but was not reaped yet is a zombie ("Z") in /proc.
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.proc.pid())).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("");
        let alive = !state.is_empty() && state != "Z" && state != "X";
        if alive {
            "toolgate is still running".into()
        } else {
            "toolgate is no longer running: killed or exited; a graceful \"shutting down\" \
             in its log means something sent it SIGINT/SIGTERM"
                .into()
        }
    }

    /// Asserts the gateway process is still running.
    pub fn assert_alive(&mut self) {
        if let Some(st) = self.proc.exited() {
            panic!("toolgate exited ({st}):\n{}", self.proc.logs());
        }
    }
}

/// A gateway upstream entry for server-everything over stdio. `marker` is an extra
/// argument (ignored by the server) that makes its process findable with `pgrep -f`.
pub fn everything_stdio_upstream(deps: &NodeDeps, marker: &str) -> Value {
    json!({"stdio": {
        "command": deps.node(),
        "args": [deps.everything_entry(), "stdio", marker],
        "env": {},
        "cwd": null
    }})
}

/// The standard three-mount config: `everything` (stdio), `ev_sse`, `ev_http`.
pub fn three_mounts_config(
    deps: &NodeDeps,
    sse: &Everything,
    http: &Everything,
    marker: &str,
) -> Value {
    json!({
        "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
        "call_timeout": "60s",
        "health": {"interval": "1s", "timeout": "5s"},
        // Small pages: every client of these tests (the Python SDK in both protocol
        // modes, over HTTP and stdio) must follow `nextCursor` to see the catalog.
        // And every tool in a session's first list (bounded in tokens otherwise).
        "sessions": {"list_page_size": 7, "initial_max_tokens": 1_000_000_000},
        "upstreams": {
            "everything": everything_stdio_upstream(deps, marker),
            "ev_sse": {"sse": {"url": sse.url}},
            "ev_http": {"streamable_http": {"url": http.url, "headers": {}}}
        }
    })
}

/// Everything a three-mount test needs, started together.
pub struct ThreeMounts {
    pub gateway: Gateway,
    pub sse: Everything,
    pub http: Everything,
    pub marker: String,
}

impl ThreeMounts {
    pub async fn start(deps: &NodeDeps) -> ThreeMounts {
        let (sse, http) = tokio::join!(
            Everything::start(deps, "sse"),
            Everything::start(deps, "streamableHttp")
        );
        let marker = unique_marker("stdio");
        let gateway = Gateway::start(three_mounts_config(deps, &sse, &http, &marker)).await;
        ThreeMounts {
            gateway,
            sse,
            http,
            marker,
        }
    }
}

/// A string unique to this test process and call, for `pgrep -f`.
pub fn unique_marker(label: &str) -> String {
    static N: AtomicI64 = AtomicI64::new(0);
    format!(
        "toolgate-e2e-{label}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Pids of processes whose command line contains `pattern` (via `pgrep -f`).
pub fn pgrep(pattern: &str) -> Vec<u32> {
    let out = std::process::Command::new("pgrep")
        .arg("-f")
        .arg(pattern)
        .output()
        .expect("run pgrep");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|pid| *pid != std::process::id())
        .collect()
}

/// Runs a Python script from `tests/python/` with the venv's interpreter; returns the
/// JSON object the script prints as its last stdout line. Panics with the script's
/// output when it fails or times out.
pub fn run_python(python: &Path, script: &str, args: &[&str], timeout: Duration) -> Value {
    let path = workspace_root().join("tests/python").join(script);
    let dir = TempDir::new("py");
    let out_path = dir.path().join("out");
    let err_path = dir.path().join("err");
    let mut cmd = std::process::Command::new(python);
    cmd.arg(&path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let status = run_bounded(&mut cmd, timeout);
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    match status {
        Ok(st) if st.success() => {}
        Ok(st) => panic!("{script} {args:?} failed ({st}):\nstdout:\n{stdout}\nstderr:\n{stderr}"),
        Err(e) => panic!("{script} {args:?}: {e}\nstdout:\n{stdout}\nstderr:\n{stderr}"),
    }
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| panic!("{script} printed nothing; stderr:\n{stderr}"));
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!("{script} last line is not JSON ({e}): {last}\nstderr:\n{stderr}")
    })
}

/// The outcome of one conformance suite run.
#[derive(Debug, Default)]
pub struct ConformanceReport {
    /// scenario -> (passed checks, failed checks)
    pub scenarios: HashMap<String, (u32, u32)>,
    pub total_passed: u32,
    pub total_failed: u32,
    pub exit_ok: bool,
    pub output: String,
    /// `scenario/check: errorMessage` of every failed check (from the suite's
    /// `checks.json` files).
    pub failures: Vec<String>,
}

impl ConformanceReport {
    /// Scenarios with at least one failed check.
    pub fn failed_scenarios(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .scenarios
            .iter()
            .filter(|(_, (_, f))| *f > 0)
            .map(|(s, _)| s.clone())
            .collect();
        v.sort();
        v
    }
}

/// Runs `conformance server --url URL [--scenario S | --suite SUITE]` and parses its
/// summary. Bounded by `timeout`.
pub fn run_conformance(
    deps: &NodeDeps,
    url: &str,
    scenario: Option<&str>,
    timeout: Duration,
) -> ConformanceReport {
    let dir = TempDir::new("conformance");
    let out_path = dir.path().join("out");
    let mut cmd = std::process::Command::new(deps.node());
    cmd.arg(deps.conformance_entry())
        .arg("server")
        .arg("--url")
        .arg(url);
    match scenario {
        Some(s) => cmd.arg("--scenario").arg(s),
        None => cmd.arg("--suite").arg("active"),
    };
    let results_dir = dir.path().join("results");
    cmd.arg("-o").arg(&results_dir);
    let out = std::fs::File::create(&out_path).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .env("NO_COLOR", "1");
    let status = run_bounded(&mut cmd, timeout);
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let status = status.unwrap_or_else(|e| panic!("conformance run: {e}\n{output}"));
    let mut report = ConformanceReport {
        exit_ok: status.success(),
        ..Default::default()
    };
    parse_conformance_output(&output, scenario, &mut report);
    report.failures = failed_checks(&results_dir);
    report.output = output;
    report
}

/// Failed checks recorded in the `checks.json` files under `dir` (bounded walk).
fn failed_checks(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut visited = 0;
    while let Some(d) = stack.pop() {
        visited += 1;
        if visited > 1000 {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "checks.json") {
                let scenario = p
                    .parent()
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let checks: Value = std::fs::read_to_string(&p)
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or(Value::Null);
                for c in checks.as_array().into_iter().flatten() {
                    if c["status"] == "FAILURE" {
                        out.push(format!(
                            "{scenario}/{}: {}",
                            c["id"].as_str().unwrap_or("?"),
                            c["errorMessage"].as_str().unwrap_or("(no message)")
                        ));
                    }
                }
            }
        }
    }
    out.sort();
    out
}

fn parse_conformance_output(output: &str, scenario: Option<&str>, report: &mut ConformanceReport) {
    let nums = |s: &str| -> Option<(u32, u32)> {
        // "N passed, M failed"
        let (p, rest) = s.trim().split_once(" passed, ")?;
        let f = rest.split_whitespace().next()?;
        Some((p.trim().parse().ok()?, f.parse().ok()?))
    };
    let reader = BufReader::new(output.as_bytes());
    for line in reader.lines().map_while(Result::ok) {
        let l = line.trim();
        // Suite summary: "✓ name: N passed, M failed" / "✗ name: ..."
        if let Some(rest) = l.strip_prefix("✓ ").or_else(|| l.strip_prefix("✗ ")) {
            if let Some((name, c)) = rest
                .split_once(": ")
                .and_then(|(name, counts)| Some((name, nums(counts)?)))
            {
                report.scenarios.insert(name.to_string(), c);
            }
        } else if let Some(rest) = l.strip_prefix("Total: ") {
            if let Some((p, f)) = nums(rest) {
                report.total_passed = p;
                report.total_failed = f;
            }
        } else if let Some(rest) = l.strip_prefix("Passed: ") {
            // Single scenario: "Passed: N/D, M failed, W warnings"
            if let (Some(s), Some((pd, rest))) = (scenario, rest.split_once(", ")) {
                let passed = pd.split('/').next().and_then(|p| p.parse().ok());
                let failed = rest.split_whitespace().next().and_then(|f| f.parse().ok());
                if let (Some(p), Some(f)) = (passed, failed) {
                    report.scenarios.insert(s.to_string(), (p, f));
                    report.total_passed = p;
                    report.total_failed = f;
                }
            }
        }
    }
}

/// The gateway's own tools, listed to every caller besides the catalog.
pub const PROTOCOL_TOOLS: [&str; 4] = [
    "tool_expand_tools",
    "tool_search",
    "tool_invoke",
    "tool_schema",
];

/// True for the gateway's own tools (not from any upstream).
pub fn is_protocol_tool(name: &str) -> bool {
    PROTOCOL_TOOLS.contains(&name)
}

/// A tools/list result's catalog tool names (the protocol tools left out).
pub fn tool_names(list_result: &Value) -> Vec<String> {
    list_result["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .filter(|n| !is_protocol_tool(n))
                .collect()
        })
        .unwrap_or_default()
}

/// Serializes the heavy end-to-end tests of one test binary: each starts node servers
/// and a gateway, and timing-sensitive assertions (progress order, log delivery) should
/// not compete for the 2 cores of CI with another such test.
pub async fn heavy_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// The output of a documentation example that must have succeeded: its stdout and
/// stderr as text; fails the test with both when it did not.
pub fn example_succeeded(output: &std::process::Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the example failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// Runs a shell example as written (`sh -euc`), bounded by two minutes.
pub async fn run_shell_example(script: &str) -> std::process::Output {
    tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("sh")
            .args(["-euc", script])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the example finishes within 120 s")
    .expect("run sh")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suite_summary() {
        let out = "=== SUMMARY ===\n✓ ping: 1 passed, 0 failed\n✗ tools-list: 0 passed, 1 failed\n\nTotal: 1 passed, 1 failed\n";
        let mut r = ConformanceReport::default();
        parse_conformance_output(out, None, &mut r);
        assert_eq!(r.scenarios["ping"], (1, 0));
        assert_eq!(r.scenarios["tools-list"], (0, 1));
        assert_eq!((r.total_passed, r.total_failed), (1, 1));
        assert_eq!(r.failed_scenarios(), vec!["tools-list".to_string()]);
    }

    #[test]
    fn parses_single_scenario() {
        let out = "Test Results:\nPassed: 2/2, 0 failed, 1 warnings\n";
        let mut r = ConformanceReport::default();
        parse_conformance_output(out, Some("server-sse-multiple-streams"), &mut r);
        assert_eq!(r.scenarios["server-sse-multiple-streams"], (2, 0));
    }
}
