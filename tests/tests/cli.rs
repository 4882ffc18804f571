//! The `toolgate` command line, run as a real process: `stdio` (driven by the PyPI `mcp`
//! client and by raw JSON-RPC lines), `check`, `tools --format json` (both failing,
//! naming it, when an OpenAPI upstream does not import), `config-schema`, and `serve`
//! refusing to start on a `namespace: none` name collision.
//!
//! Upstreams are server-everything over stdio (npm, pinned in `package.json`).

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_e2e::{
    Gateway, NodeDeps, TempDir, everything_stdio_upstream, free_port, python, require, run_python,
    toolgate_bin, unique_marker, workspace_root,
};

/// Tools server-everything serves over stdio whatever the client's capabilities.
const BASE_TOOLS: [&str; 5] = [
    "echo",
    "get-sum",
    "trigger-long-running-operation",
    "get-tiny-image",
    "get-structured-content",
];

/// Every tool server-everything 2026.8.31 serves over stdio (the last three only to a
/// client offering roots, elicitation and sampling, as the gateway does for
/// `namespace: none` upstreams).
const EVERYTHING_TOOLS: [&str; 16] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "simulate-research-query",
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-sampling-request",
];

/// Bound for a whole `toolgate check` / `tools` run (startup of node upstreams included).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The tests here each start node upstreams; on 2 cores they run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `^[A-Za-z0-9_-]{1,64}$`
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Writes `config` (JSON is valid YAML) as `name` in `dir`.
fn write_config(dir: &TempDir, name: &str, config: &Value) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_string_pretty(config).unwrap()).expect("write config");
    path
}

/// Writes raw YAML text as `name` in `dir`.
fn write_text(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write config");
    path
}

/// Kills a process group when dropped (the gateway and the upstreams it started).
struct GroupGuard(std::process::Child);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // The process group we created.
        let _ = toolgate_e2e::sys::signal_group(self.0.id(), libc::SIGKILL);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn describe(&self) -> String {
        format!(
            "exit: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `toolgate ARGS` to completion in its own process group, bounded by `timeout`
/// (then the whole group is killed and the test fails).
fn run_toolgate(args: &[&str], timeout: Duration) -> Run {
    use std::os::unix::process::CommandExt;
    let dir = TempDir::new("cli-run");
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    let child = Command::new(toolgate_bin())
        .args(args)
        .env(
            "TOOLGATE_LOG",
            std::env::var("TOOLGATE_LOG").unwrap_or_else(|_| "info,rmcp=warn".into()),
        )
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn toolgate {args:?}: {e}"));
    let mut guard = GroupGuard(child);
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = guard.0.try_wait().expect("try_wait") {
            break Some(st);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    match status {
        Some(status) => Run {
            status,
            stdout: read(&out_path),
            stderr: read(&err_path),
        },
        None => {
            drop(guard);
            panic!(
                "toolgate {args:?} still running after {timeout:?}\n----- stdout -----\n{}\n----- stderr -----\n{}",
                read(&out_path),
                read(&err_path)
            );
        }
    }
}

/// Two mounts of server-everything over stdio, `alpha` and `beta`.
fn two_mounts(deps: &NodeDeps) -> Value {
    json!({
        "startup_timeout": "60s",
        "upstreams": {
            "alpha": everything_stdio_upstream(deps, &unique_marker("cli-alpha")),
            "beta": everything_stdio_upstream(deps, &unique_marker("cli-beta")),
        }
    })
}

// ---------------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------------

#[test]
fn stdio_serves_the_catalog_to_the_python_client() {
    let deps = require!(NodeDeps::find());
    let py = require!(python());
    let _serial = serial();
    let dir = TempDir::new("cli-stdio-py");
    let config = write_config(
        &dir,
        "toolgate.yaml",
        &json!({
            "startup_timeout": "60s",
            "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("cli-stdio-py"))}
        }),
    );
    let bin = toolgate_bin();
    let out = run_python(
        &py,
        "stdio_catalog.py",
        &[
            bin.to_str().unwrap(),
            config.to_str().unwrap(),
            "everything",
        ],
        Duration::from_secs(150),
    );

    assert!(
        ["2025-06-18", "2025-11-25"].contains(&out["protocol_version"].as_str().unwrap_or("")),
        "negotiated protocol: {}",
        out["protocol_version"]
    );
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {out}"))
        .iter()
        .map(|v| v.as_str().expect("tool name"))
        .collect();
    let unique: HashSet<&&str> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "duplicate names: {names:?}");
    for n in names.iter().filter(|n| !toolgate_e2e::is_protocol_tool(n)) {
        assert!(
            n.starts_with("everything__") && valid_name(n),
            "{n:?} is not a valid prefixed name"
        );
    }
    for t in BASE_TOOLS {
        let want = format!("everything__{t}");
        assert!(
            names.contains(&want.as_str()),
            "{want} missing from {names:?}"
        );
    }

    // Raw fields survive: server-everything declares `execution` on its tools.
    let echo_def = &out["definitions"]["everything__echo"];
    assert_eq!(
        echo_def["execution"],
        json!({"taskSupport": "forbidden"}),
        "execution of everything__echo as the client parsed it: {echo_def}"
    );
    assert_eq!(
        echo_def["_meta"]["toolgate/upstream"], "everything",
        "_meta of everything__echo: {echo_def}"
    );

    assert_eq!(out["echo"]["is_error"], false, "echo: {}", out["echo"]);
    assert_eq!(
        out["echo"]["text"][0], "Echo: hello over stdio",
        "echo result: {}",
        out["echo"]
    );
}

/// A desktop client is answered from its first message even while an upstream is not
/// up (`startup_timeout` here is an hour): the upstreams that answer join its list,
/// announced with `list_changed`; a call to the one that never answers says so —
/// `unavailable`, naming it — when the tenant's patterns allow the name, and is an
/// unknown tool, like a name that exists nowhere, when they do not.
#[test]
fn stdio_answers_at_once_and_upstreams_join_as_they_answer() {
    let deps = require!(NodeDeps::find());
    let py = require!(python());
    let _serial = serial();
    let dir = TempDir::new("cli-stdio-startup");
    let config = write_config(
        &dir,
        "toolgate.yaml",
        &json!({
            "startup_timeout": "1h",
            "upstreams": {
                "everything": everything_stdio_upstream(&deps, &unique_marker("cli-stdio-startup")),
                "ghost": {"streamable_http": {"url": format!("http://127.0.0.1:{}/mcp", free_port())}},
            },
            "tenants": {"desk": {"allow": ["everything__*", "ghost__visible_*"]}},
        }),
    );
    let bin = toolgate_bin();
    let out = run_python(
        &py,
        "stdio_startup.py",
        &[bin.to_str().unwrap(), config.to_str().unwrap(), "desk"],
        Duration::from_secs(150),
    );
    let later: Vec<&str> = out["later_list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(later.contains(&"everything__echo"), "{out}");
    assert_eq!(out["list_changed"], true, "{out}");
    assert_eq!(out["echo"]["is_error"], false, "{out}");
    let ghost = &out["ghost_allowed"];
    assert_eq!(
        (&ghost["raised"], &ghost["is_error"]),
        (&json!(false), &json!(true)),
        "{out}"
    );
    let text = ghost["text"][0].as_str().unwrap_or_default();
    assert!(
        text.contains("upstream 'ghost'") && text.contains("still starting"),
        "{text}"
    );
    // Hidden and nonexistent: the same protocol error, but for the name.
    for answer in [&out["ghost_hidden"], &out["nowhere"]] {
        assert_eq!(answer["raised"], true, "{out}");
    }
    assert_eq!(
        out["ghost_hidden"]["error"]
            .as_str()
            .map(|e| e.replace("ghost__hidden_tool", "X")),
        out["nowhere"]["error"]
            .as_str()
            .map(|e| e.replace("nowhere__hidden_tool", "X")),
    );
}

/// The gateway's stdio side driven line by line: every stdout line must be one
/// JSON-RPC message, logs go to stderr, raw tool fields survive, and closing stdin
/// ends the process.
#[test]
fn stdio_stdout_carries_only_json_rpc_lines() {
    use std::os::unix::process::CommandExt;
    let deps = require!(NodeDeps::find());
    let _serial = serial();
    let dir = TempDir::new("cli-stdio-raw");
    let config = write_config(
        &dir,
        "toolgate.yaml",
        &json!({
            "startup_timeout": "60s",
            // Far shorter than the idle pause below: the process is the session, and
            // a desktop client idle for a while must not be locked out.
            "sessions": {"idle_ttl": "2s"},
            "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("cli-stdio-raw"))}
        }),
    );
    let err_path = dir.path().join("stderr");
    let child = Command::new(toolgate_bin())
        .arg("stdio")
        .arg("--config")
        .arg(&config)
        .env("TOOLGATE_LOG", "info,rmcp=warn")
        .current_dir(workspace_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .expect("spawn toolgate stdio");
    let mut guard = GroupGuard(child);
    let stderr = || std::fs::read_to_string(&err_path).unwrap_or_default();

    // Every stdout line goes through a channel so reads are bounded by recv_timeout.
    let stdout = guard.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().take(10_000) {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    let mut stdin = guard.0.stdin.take().unwrap();
    let mut all_lines: Vec<String> = Vec::new();

    // Sends one message; for a request, returns its response (bounded wait).
    let exchange = |stdin: &mut std::process::ChildStdin,
                    all_lines: &mut Vec<String>,
                    msg: Value,
                    timeout: Duration|
     -> Option<Value> {
        writeln!(stdin, "{msg}").expect("write to toolgate stdin");
        stdin.flush().unwrap();
        let id = msg.get("id")?.clone();
        let deadline = Instant::now() + timeout;
        for _ in 0..10_000 {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|e| {
                panic!(
                    "no response to {msg} within {timeout:?} ({e})\nstdout so far: {all_lines:#?}\nstderr:\n{}",
                    stderr()
                )
            });
            all_lines.push(line.clone());
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!(
                    "stdout line is not JSON ({e}): {line:?}\nstderr:\n{}",
                    stderr()
                )
            });
            if v.get("id") == Some(&id) && (v.get("result").is_some() || v.get("error").is_some()) {
                return Some(v);
            }
        }
        panic!("too many stdout lines before the response to {msg}");
    };

    let init = exchange(
        &mut stdin,
        &mut all_lines,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "toolgate-e2e-raw", "version": "0.1.0"}
        }}),
        Duration::from_secs(90),
    )
    .unwrap();
    assert_eq!(
        init["result"]["protocolVersion"], "2025-11-25",
        "initialize: {init}"
    );
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "initialize advertises no tools capability: {init}"
    );
    exchange(
        &mut stdin,
        &mut all_lines,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Duration::from_secs(1),
    );

    // The gateway answers before its upstream is up: its tools join the list as it
    // answers (bounded: 60 s).
    let mut list = Value::Null;
    for n in 0..120 {
        list = exchange(
            &mut stdin,
            &mut all_lines,
            json!({"jsonrpc": "2.0", "id": 200 + n, "method": "tools/list", "params": {}}),
            Duration::from_secs(30),
        )
        .unwrap();
        if list.to_string().contains("everything__echo") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let tools = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list: {list}"));
    let by_name: BTreeMap<&str, &Value> = tools
        .iter()
        .map(|t| (t["name"].as_str().expect("tool name"), t))
        .collect();
    for t in BASE_TOOLS {
        assert!(
            by_name.contains_key(format!("everything__{t}").as_str()),
            "everything__{t} missing: {:?}",
            by_name.keys()
        );
    }
    for (name, def) in by_name
        .iter()
        .filter(|(n, _)| !toolgate_e2e::is_protocol_tool(n))
    {
        assert!(
            name.starts_with("everything__") && valid_name(name),
            "{name:?} is not a valid prefixed name"
        );
        // Every server-everything tool carries `execution`; the gateway must keep it.
        assert!(
            def["execution"]["taskSupport"].is_string(),
            "{name}: `execution` lost on the wire: {def}"
        );
    }
    let echo = by_name["everything__echo"];
    assert_eq!(
        echo["execution"],
        json!({"taskSupport": "forbidden"}),
        "{echo}"
    );
    assert!(echo["annotations"].is_object(), "annotations lost: {echo}");
    assert!(echo["title"].is_string(), "title lost: {echo}");
    assert_eq!(echo["_meta"]["toolgate/upstream"], "everything", "{echo}");
    assert_eq!(echo["_meta"]["toolgate/tool"], "echo", "{echo}");
    if let Some(research) = by_name.get("everything__simulate-research-query") {
        assert_eq!(
            research["execution"]["taskSupport"], "required",
            "{research}"
        );
    }

    let call = exchange(
        &mut stdin,
        &mut all_lines,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "everything__echo", "arguments": {"message": "raw line"}
        }}),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_ne!(call["result"]["isError"], true, "echo failed: {call}");
    assert_eq!(
        call["result"]["content"][0]["text"], "Echo: raw line",
        "echo: {call}"
    );

    // Idle past `sessions.idle_ttl`: the stdio session is still there.
    std::thread::sleep(Duration::from_secs(5));
    let after_idle = exchange(
        &mut stdin,
        &mut all_lines,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "everything__echo", "arguments": {"message": "after idling"}
        }}),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(
        after_idle["result"]["content"][0]["text"], "Echo: after idling",
        "a call after idling past sessions.idle_ttl: {after_idle}"
    );

    // Closing stdin ends the session and the process (bounded).
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = guard.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "toolgate stdio still running 30 s after stdin was closed\nstderr:\n{}",
            stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The reader ends at EOF once the process (and any inheritor of stdout) is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..10_000 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => all_lines.push(line),
            Err(_) => break,
        }
    }
    drop(reader);
    assert!(
        status.success(),
        "toolgate stdio exited with {status} after stdin closed\nstderr:\n{}",
        stderr()
    );

    assert!(all_lines.len() >= 3, "stdout lines: {all_lines:#?}");
    for line in &all_lines {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "stdout line is not JSON-RPC: {line}");
        assert!(
            v.get("method").is_some() || v.get("id").is_some(),
            "stdout line is neither a request, notification nor response: {line}"
        );
    }
    // The logs went to stderr.
    let err = stderr();
    assert!(
        err.contains("catalog ready"),
        "expected the gateway's log on stderr, got:\n{err}"
    );
}

// ---------------------------------------------------------------------------------
// check
// ---------------------------------------------------------------------------------

/// `name kind state N tools[  error: …]` lines of `toolgate check`, by upstream name.
fn check_lines<'a>(stdout: &'a str, names: &[&str]) -> BTreeMap<String, &'a str> {
    let mut found = BTreeMap::new();
    for line in stdout.lines() {
        if let Some(first) = line.split_whitespace().next()
            && names.contains(&first)
        {
            assert!(
                found.insert(first.to_string(), line).is_none(),
                "more than one line for upstream {first}:\n{stdout}"
            );
        }
    }
    found
}

/// The `N` of `… N tools` on a check line.
fn tool_count(line: &str) -> Option<usize> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "tools")?;
    words.get(i.checked_sub(1)?)?.parse().ok()
}

#[test]
fn check_reports_each_healthy_upstream_and_its_tool_count() {
    let deps = require!(NodeDeps::find());
    let _serial = serial();
    let dir = TempDir::new("cli-check");
    let config = write_config(&dir, "toolgate.yaml", &two_mounts(&deps));
    let run = run_toolgate(
        &["check", "--config", config.to_str().unwrap()],
        RUN_TIMEOUT,
    );
    assert!(run.status.success(), "check failed:\n{}", run.describe());
    let lines = check_lines(&run.stdout, &["alpha", "beta"]);
    assert_eq!(
        lines.len(),
        2,
        "one line per upstream expected:\n{}",
        run.describe()
    );

    // The same catalog as `tools --format json` sees it, per upstream.
    let tools = run_toolgate(
        &[
            "tools",
            "--config",
            config.to_str().unwrap(),
            "--format",
            "json",
        ],
        RUN_TIMEOUT,
    );
    assert!(tools.status.success(), "tools:\n{}", tools.describe());
    let defs: Vec<Value> = serde_json::from_str(&tools.stdout)
        .unwrap_or_else(|e| panic!("tools --format json: {e}\n{}", tools.describe()));

    for (name, line) in &lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert!(
            words.contains(&"healthy"),
            "{name} is not reported healthy: {line}"
        );
        let n = tool_count(line).unwrap_or_else(|| panic!("no tool count in {line:?}"));
        assert!(n >= BASE_TOOLS.len(), "{name}: only {n} tools: {line}");
        let listed = defs
            .iter()
            .filter(|d| d["_meta"]["toolgate/upstream"] == name.as_str())
            .count();
        assert_eq!(
            n, listed,
            "{name}: check says {n} tools, `tools --format json` lists {listed}"
        );
        assert!(!line.contains("error:"), "{name}: {line}");
    }
}

#[test]
fn check_fails_when_an_upstream_cannot_start() {
    let deps = require!(NodeDeps::find());
    let _serial = serial();
    let dir = TempDir::new("cli-check-broken");
    let config = write_config(
        &dir,
        "toolgate.yaml",
        &json!({
            // The broken upstream is retried until this bound, then reported; a
            // check that waited longer would run past RUN_TIMEOUT and fail here (no
            // tighter timing is asserted: a loaded machine must not fail it). Long
            // enough for the good one to start on a loaded machine.
            "startup_timeout": "30s",
            "upstreams": {
                "good": everything_stdio_upstream(&deps, &unique_marker("cli-check-good")),
                "broken": {"stdio": {
                    "command": "/nonexistent/toolgate-e2e-no-such-command",
                    "args": []
                }}
            }
        }),
    );
    let run = run_toolgate(
        &["check", "--config", config.to_str().unwrap()],
        RUN_TIMEOUT,
    );
    assert!(
        !run.status.success(),
        "check succeeded with a broken upstream:\n{}",
        run.describe()
    );
    let lines = check_lines(&run.stdout, &["good", "broken"]);
    let broken = lines
        .get("broken")
        .unwrap_or_else(|| panic!("no line for upstream broken:\n{}", run.describe()));
    assert!(
        !broken.split_whitespace().any(|w| w == "healthy"),
        "the broken upstream is reported healthy: {broken}"
    );
    // The good upstream is still checked and reported.
    if let Some(good) = lines.get("good") {
        assert!(
            good.split_whitespace().any(|w| w == "healthy"),
            "good upstream: {good}\n{}",
            run.describe()
        );
    } else {
        panic!("no line for upstream good:\n{}", run.describe());
    }
}

#[test]
fn check_rejects_an_unknown_field_with_its_path() {
    let dir = TempDir::new("cli-check-invalid");
    let config = write_text(
        &dir,
        "toolgate.yaml",
        "upstreams:\n  x:\n    stdio:\n      comand: node\n      args: []\n",
    );
    let run = run_toolgate(
        &["check", "--config", config.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(
        run.status.code(),
        Some(2),
        "unknown field must exit 2:\n{}",
        run.describe()
    );
    assert!(
        run.stderr.contains("upstreams.x.stdio"),
        "the error must name the path upstreams.x.stdio:\n{}",
        run.describe()
    );
    assert!(
        run.stderr.contains("comand"),
        "the error must name the unknown field:\n{}",
        run.describe()
    );
    assert!(
        run.stdout.trim().is_empty(),
        "nothing on stdout for a config error:\n{}",
        run.describe()
    );

    // Other commands load the config the same way.
    let tools = run_toolgate(
        &["tools", "--config", config.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(tools.status.code(), Some(2), "tools:\n{}", tools.describe());
}

// ---------------------------------------------------------------------------------
// tools
// ---------------------------------------------------------------------------------

#[test]
fn tools_json_lists_prefixed_valid_names_with_their_upstream() {
    let deps = require!(NodeDeps::find());
    let _serial = serial();
    let dir = TempDir::new("cli-tools");
    let config = write_config(&dir, "toolgate.yaml", &two_mounts(&deps));
    let run = run_toolgate(
        &[
            "tools",
            "--config",
            config.to_str().unwrap(),
            "--format",
            "json",
        ],
        RUN_TIMEOUT,
    );
    assert!(run.status.success(), "tools failed:\n{}", run.describe());
    let defs: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", run.describe()));
    let defs = defs
        .as_array()
        .unwrap_or_else(|| panic!("not a JSON array:\n{}", run.describe()));
    let mut per_upstream: BTreeMap<String, HashSet<String>> = BTreeMap::new();
    let mut seen = HashSet::new();
    for d in defs {
        let name = d["name"]
            .as_str()
            .unwrap_or_else(|| panic!("a tool without a name: {d}"));
        assert!(seen.insert(name.to_string()), "duplicate name {name}");
        assert!(
            valid_name(name),
            "{name:?} does not match ^[A-Za-z0-9_-]{{1,64}}$"
        );
        let upstream = d["_meta"]["toolgate/upstream"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no _meta[\"toolgate/upstream\"]: {d}"));
        assert!(
            ["alpha", "beta"].contains(&upstream),
            "{name}: unknown upstream {upstream:?}"
        );
        let tool = name
            .strip_prefix(&format!("{upstream}__"))
            .unwrap_or_else(|| panic!("{name} is not prefixed with its upstream {upstream}__"));
        assert_eq!(d["_meta"]["toolgate/tool"], tool, "{name}: {d}");
        assert!(d["inputSchema"].is_object(), "{name}: no inputSchema: {d}");
        per_upstream
            .entry(upstream.to_string())
            .or_default()
            .insert(tool.to_string());
    }
    for up in ["alpha", "beta"] {
        let tools = per_upstream
            .get(up)
            .unwrap_or_else(|| panic!("no tools from {up}: {per_upstream:?}"));
        for t in BASE_TOOLS {
            assert!(tools.contains(t), "{up}__{t} missing: {tools:?}");
        }
    }
    assert_eq!(
        per_upstream["alpha"], per_upstream["beta"],
        "the two mounts of one server differ"
    );

    // The text format names the same tools, one per line.
    let text = run_toolgate(
        &["tools", "--config", config.to_str().unwrap()],
        RUN_TIMEOUT,
    );
    assert!(text.status.success(), "tools (text):\n{}", text.describe());
    let text_names: HashSet<String> = text
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert_eq!(
        text_names, seen,
        "text and JSON formats list different tools"
    );
}

/// `tools` and `check` with OpenAPI upstreams that do not import (a `$ref` to a file
/// that is not there; a spec over `max_total_bytes`) beside one that does: both exit
/// non-zero and name each failed upstream, with its error, on stderr.
#[test]
fn tools_and_check_fail_naming_an_openapi_upstream_that_does_not_import() {
    let _serial = serial();
    let dir = TempDir::new("cli-openapi-broken");
    let spec = |reference: &str| {
        json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {"/pets": {"get": {"operationId": "listPets", "parameters": [
                {"name": "limit", "in": "query", "schema": {"$ref": reference}}],
                "responses": {"200": {"description": "ok"}}}}}})
    };
    let mut good = spec("#/components/schemas/Limit");
    good["components"] = json!({"schemas": {"Limit": {"type": "integer"}}});
    write_config(&dir, "good.json", &good);
    write_config(&dir, "missing.json", &spec("parts/not-there.json#/Limit"));
    let config = write_config(
        &dir,
        "toolgate.yaml",
        &json!({
            "startup_timeout": "30s",
            "upstreams": {
                "pets": {"openapi": {"spec_path": "good.json"}},
                "missingref": {"openapi": {"spec_path": "missing.json"}},
                "toobig": {"openapi": {"spec_path": "good.json", "max_total_bytes": 64}}
            }
        }),
    );
    let config = config.to_str().unwrap();
    let tools = run_toolgate(
        &["tools", "--config", config, "--format", "json"],
        RUN_TIMEOUT,
    );
    assert!(
        !tools.status.success(),
        "tools succeeded with upstreams that did not import:\n{}",
        tools.describe()
    );
    for (name, why) in [
        ("missingref", "not-there.json"),
        ("toobig", "max_total_bytes"),
    ] {
        let line = tools
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("toolgate: upstream '{name}'")))
            .unwrap_or_else(|| panic!("{name} not named on stderr:\n{}", tools.describe()));
        assert!(line.contains(why), "{name}: {line}");
    }
    assert!(
        !tools.stderr.contains("toolgate: upstream 'pets'"),
        "the good upstream is named as failed:\n{}",
        tools.describe()
    );
    // What did import is still listed.
    let defs: Value = serde_json::from_str(&tools.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", tools.describe()));
    let names: Vec<&str> = defs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(names, ["pets__listPets"], "{}", tools.describe());

    let check = run_toolgate(&["check", "--config", config], RUN_TIMEOUT);
    assert!(
        !check.status.success(),
        "check succeeded with upstreams that did not import:\n{}",
        check.describe()
    );
    for name in ["missingref", "toobig"] {
        assert!(
            check
                .stderr
                .contains(&format!("toolgate: upstream '{name}' is down")),
            "{name} not named on stderr:\n{}",
            check.describe()
        );
    }
    assert!(
        check.stderr.contains("max_total_bytes"),
        "the bound is not named:\n{}",
        check.describe()
    );
}

// ---------------------------------------------------------------------------------
// config-schema
// ---------------------------------------------------------------------------------

/// `${VAR:-default}` -> default, `${VAR}` -> the environment's value, `$$` -> `$`;
/// anything else after `$` is kept (as the gateway does for prose in comments).
fn substitute_defaults(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    for _ in 0..100_000 {
        let Some(pos) = rest.find('$') else { break };
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
            continue;
        }
        let sub = after.strip_prefix('{').and_then(|body| {
            let end = body.find('}')?;
            let expr = &body[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (expr, None),
            };
            let is_var = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !is_var {
                return None;
            }
            // The admin token has no default on purpose (an example token is refused).
            let required = (name == "TOOLGATE_ADMIN_TOKEN").then(|| "a".repeat(32));
            let value = default
                .map(String::from)
                .or(required)
                .or_else(|| std::env::var(name).ok())
                .unwrap_or_else(|| panic!("example config uses ${{{name}}} without a default"));
            Some((value, &body[end + 1..]))
        });
        match sub {
            Some((value, tail)) => {
                out.push_str(&value);
                rest = tail;
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn config_schema_is_valid_and_accepts_the_example_configs() {
    let run = run_toolgate(&["config-schema"], Duration::from_secs(30));
    assert!(run.status.success(), "config-schema:\n{}", run.describe());
    let schema: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("config-schema is not JSON ({e}):\n{}", run.describe()));
    assert_eq!(schema["type"], "object", "top-level type: {schema:#}");
    let props = schema["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no properties: {schema:#}"));
    for p in ["upstreams", "listen", "allowed_hosts"] {
        assert!(
            props.contains_key(p),
            "property {p} missing: {:?}",
            props.keys()
        );
    }
    if let Err(e) = jsonschema::meta::validate(&schema) {
        panic!("the printed schema is not a valid JSON Schema: {e}\n{schema:#}");
    }
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("cannot compile the schema: {e}"));

    // Every example config, with its ${VAR:-default}s resolved, validates.
    let config_dir = workspace_root().join("config");
    let mut checked = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&config_dir)
        .expect("read config/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    entries.sort();
    for path in entries.iter().take(1000) {
        let text = std::fs::read_to_string(path).unwrap();
        let yaml: Value = serde_norway::from_str(&substitute_defaults(&text))
            .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
        let errors: Vec<String> = validator
            .iter_errors(&yaml)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} does not validate against `toolgate config-schema`:\n{}",
            path.display(),
            errors.join("\n")
        );
        // The gateway itself accepts it (without connecting: `check` would).
        checked.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    assert!(
        checked.iter().any(|n| n == "quickstart.yaml")
            && checked.iter().any(|n| n == "all-transports.yaml"),
        "example configs found: {checked:?}"
    );

    // The schema rejects what the loader rejects: unknown fields at any depth.
    for bad in [
        json!({"listen": "127.0.0.1:1", "lisen": "x"}),
        json!({"upstreams": {"x": {"stdio": {"comand": "node"}}}}),
        json!({"upstreams": {"x": {"stdio": {"command": "node"}, "namespce": "none"}}}),
    ] {
        assert!(
            !validator.is_valid(&bad),
            "the schema accepts an unknown field: {bad}"
        );
    }
    assert!(
        validator.is_valid(&json!({"upstreams": {"x": {"stdio": {"command": "node"}}}})),
        "the schema rejects a minimal valid config"
    );
}

// ---------------------------------------------------------------------------------
// serve: namespace collisions
// ---------------------------------------------------------------------------------

#[test]
fn serve_exits_on_a_passthrough_name_collision() {
    let deps = require!(NodeDeps::find());
    let _serial = serial();
    let mut one = everything_stdio_upstream(&deps, &unique_marker("cli-none-one"));
    one["namespace"] = json!("none");
    let mut two = everything_stdio_upstream(&deps, &unique_marker("cli-none-two"));
    two["namespace"] = json!("none");
    let mut gw = Gateway::spawn(json!({
        "startup_timeout": "60s",
        "upstreams": {"one": one, "two": two}
    }));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = gw.proc.exited() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "serve still running 120 s after start despite colliding passthrough names:\n{}",
            gw.proc.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let logs = gw.proc.logs();
    assert!(
        !status.success(),
        "serve exited successfully on a collision:\n{logs}"
    );
    // The message names a colliding tool (one of server-everything's names, quoted)
    // and both claimants.
    let line = logs
        .lines()
        .find(|l| {
            l.contains("namespace: none")
                && EVERYTHING_TOOLS
                    .iter()
                    .any(|t| l.contains(&format!("'{t}'")))
        })
        .unwrap_or_else(|| panic!("no colliding tool name in the output:\n{logs}"));
    assert!(
        line.contains("one") && line.contains("two"),
        "the colliding upstreams are not named: {line}\n{logs}"
    );
}
