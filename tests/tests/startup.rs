//! Startup against upstreams that are not up yet: `/readyz` stays 503 (naming them)
//! until every upstream answered once or `startup_timeout` passed, and says which;
//! meanwhile an upstream that is down is retried at most a second apart, so one
//! started after the gateway joins at once instead of after a 30 s backoff.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::{Everything, Gateway, NodeDeps, free_port, heavy_lock, http, require, wait_for};

async fn readyz(gateway: &Gateway) -> (u16, Value) {
    let response = http()
        .get(gateway.url("/readyz"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("GET /readyz");
    let status = response.status().as_u16();
    (status, response.json().await.expect("readyz JSON"))
}

async fn healthy(gateway: &Gateway) {
    gateway
        .wait_ok(&["/healthz"], Duration::from_secs(60))
        .await;
}

/// The `retry_in_ms` of every failed attempt to reach `upstream` in the gateway's log.
fn retry_delays(logs: &str, upstream: &str) -> Vec<u64> {
    logs.lines()
        .filter(|l| l.contains("MCP connection failed") && l.contains(upstream))
        .filter_map(|l| {
            let (_, rest) = l.split_once("retry_in_ms=")?;
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_started_after_the_gateway_joins_quickly_and_readyz_waits_for_it() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let port = free_port();
    let mut gateway = Gateway::spawn(json!({
        "startup_timeout": "120s",
        "upstreams": {
            "late": {"streamable_http": {"url": format!("http://127.0.0.1:{port}/mcp")}}
        }
    }));
    healthy(&gateway).await;

    // Not up yet: not ready, and the body names what startup waits for.
    let (status, body) = readyz(&gateway).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["ready"], false, "{body}");
    assert_eq!(body["waiting_for"], json!(["late"]), "{body}");
    assert!(
        body["reason"]
            .as_str()
            .unwrap_or("")
            .contains("startup_timeout, 2m"),
        "the reason names the bound: {body}"
    );

    // Let it fail several times (with a 250 ms backoff doubling to 30 s, the fourth
    // failure would already wait 2 s).
    wait_for(
        "five failed attempts to reach the late upstream",
        Duration::from_secs(30),
        || {
            let n = retry_delays(&gateway.proc.logs(), "late").len();
            async move { (n >= 5).then_some(()) }
        },
    )
    .await;
    let delays = retry_delays(&gateway.proc.logs(), "late");
    assert!(
        delays.iter().all(|&ms| ms <= 1000),
        "within startup_timeout an upstream that is not up is retried at most 1 s apart: {delays:?}"
    );
    let (status, body) = readyz(&gateway).await;
    assert_eq!(status, 503, "still waiting: {body}");

    let _server = Everything::start_on(&deps, "streamableHttp", port).await;
    let body = wait_for("/readyz 200", Duration::from_secs(30), || async {
        let (status, body) = readyz(&gateway).await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(body["startup"], "every upstream answered", "{body}");
    assert_eq!(body["unanswered_at_startup"], json!([]), "{body}");
    assert!(body["tools"].as_u64().unwrap_or(0) >= 10, "{body}");
    let upstream = gateway.upstream("late").await;
    assert!(upstream["tools"].as_u64().unwrap_or(0) >= 10, "{upstream}");
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_when_startup_timeout_passed_before_an_upstream_answered() {
    let _serial = heavy_lock().await;
    let port = free_port();
    let gateway = Gateway::spawn(json!({
        "startup_timeout": "2s",
        "upstreams": {
            "ghost": {"streamable_http": {"url": format!("http://127.0.0.1:{port}/mcp")}}
        }
    }));
    healthy(&gateway).await;
    let body = wait_for("/readyz 200", Duration::from_secs(30), || async {
        let (status, body) = readyz(&gateway).await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["unanswered_at_startup"], json!(["ghost"]), "{body}");
    let startup = body["startup"].as_str().unwrap_or_default();
    assert!(
        startup.contains("startup_timeout (2s) passed"),
        "the body says startup stopped waiting: {body}"
    );
}

/// Nothing waits on an upstream that is not up: before `/readyz` turns ready (here it
/// would take an hour), the catalog is served and a call of the down upstream's tool
/// answers at once `unavailable`, naming the upstream, its state and when to retry —
/// for a caller whose patterns allow that name. For one whose patterns do not, the
/// same name is an unknown tool, answered exactly as a name that exists nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_an_upstream_not_up_yet_says_so_without_waiting() {
    const MAY: &str = "tg-startup-may-0123456789abcdef";
    const MAY_NOT: &str = "tg-startup-maynot-0123456789abcdef";
    let _serial = heavy_lock().await;
    let port = free_port();
    let gateway = Gateway::spawn(json!({
        "startup_timeout": "1h",
        "upstreams": {
            "ghost": {"streamable_http": {"url": format!("http://127.0.0.1:{port}/mcp")}}
        },
        "tenants": {
            "may": {"api_keys": [toolgate_e2e::hash_key(MAY)], "allow": ["ghost__*"]},
            "maynot": {"api_keys": [toolgate_e2e::hash_key(MAY_NOT)], "allow": ["other__*"]},
        }
    }));
    healthy(&gateway).await;
    let (status, body) = readyz(&gateway).await;
    assert_eq!(status, 503, "still waiting for the ghost: {body}");
    let (status, tools) = toolgate_e2e::rest_get(&gateway, "/v1/tools", Some(MAY)).await;
    assert_eq!(status, 200, "the catalog is served meanwhile: {tools}");

    let call = |key: &'static str, tool: &'static str| {
        let gateway = &gateway;
        async move {
            toolgate_e2e::rest_post(
                gateway,
                &format!("/v1/tools/{tool}/call"),
                Some(key),
                json!({"arguments": {}}),
            )
            .await
        }
    };
    let (status, body) = call(MAY, "ghost__anything").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("upstream 'ghost'")
            && message.contains("still starting")
            && message.contains("retry"),
        "{message}"
    );
    assert!(!message.contains("tool_search"), "{message}");

    // Not the caller's to use: exactly as a name that exists nowhere.
    let (status, hidden) = call(MAY_NOT, "ghost__anything").await;
    let (status_none, none) = call(MAY_NOT, "nowhere__anything").await;
    assert_eq!((status, status_none), (404, 404), "{hidden} {none}");
    let scrubbed = |body: &Value, name: &str| {
        body["error"]["message"]
            .as_str()
            .map(|m| m.replace(name, "X"))
    };
    assert_eq!(
        scrubbed(&hidden, "ghost__anything"),
        scrubbed(&none, "nowhere__anything")
    );
    assert_eq!(hidden["error"]["code"], none["error"]["code"]);
}

/// The starts a `slow_start_server.py` recorded in its `--starts` file.
fn starts(file: &std::path::Path) -> usize {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .count()
}

/// Process start is not protocol answer — the cold `npx` start, end to end: a
/// stdio server still starting after the 30 s `initialize` deadline (a child of it
/// working in bursts for 36 s, as `npx` waits on `npm`'s download) is not killed at
/// 30 s but waited for while it makes progress: started once, and its tools arrive; a
/// server that is up but idle (no CPU, no I/O) is given up at the 30 s deadline with an
/// error that says so. Readiness keeps its meaning: `/readyz` turns 200 after
/// `startup_timeout` (2 s), naming both as late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_still_starting_is_waited_for_and_an_idle_one_is_given_up() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: a starting process's progress is read from /proc (Linux)");
        return;
    }
    let _serial = heavy_lock().await;
    let dir = std::env::temp_dir().join(format!("toolgate-slow-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let slow_starts = dir.join("slow.starts");
    let idle_starts = dir.join("idle.starts");
    for f in [&slow_starts, &idle_starts] {
        let _ = std::fs::remove_file(f);
    }
    let script = toolgate_e2e::workspace_root().join("tests/python/slow_start_server.py");
    let server = |starts: &std::path::Path, mode: &[&str]| {
        let mut args = vec![
            script.display().to_string(),
            "--starts".to_owned(),
            starts.display().to_string(),
        ];
        args.extend(mode.iter().map(|a| a.to_string()));
        json!({"stdio": {"command": "python3", "args": args}})
    };
    let mut gateway = Gateway::spawn(json!({
        "startup_timeout": "2s",
        "upstreams": {
            "slow": server(&slow_starts, &["--busy", "36"]),
            "idle": server(&idle_starts, &["--idle"]),
        }
    }));
    healthy(&gateway).await;

    // Ready after startup_timeout, waiting for neither.
    let body = wait_for("/readyz 200", Duration::from_secs(30), || async {
        let (status, body) = readyz(&gateway).await;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(
        body["unanswered_at_startup"],
        json!(["idle", "slow"]),
        "{body}"
    );

    let slow = wait_for(
        "the slow starter's tools",
        Duration::from_secs(120),
        || async {
            let u = gateway.upstream("slow").await;
            (u["tools"].as_u64().unwrap_or(0) >= 1).then_some(u)
        },
    )
    .await;
    let logs = gateway.proc.logs();
    assert_eq!(
        starts(&slow_starts),
        1,
        "started once, never killed for being slow: {slow}\n{logs}"
    );
    assert!(
        !logs
            .lines()
            .any(|l| l.contains("upstream=slow") && l.contains("initialize failed")),
        "{logs}"
    );
    assert!(
        logs.lines()
            .any(|l| l.contains("upstream=slow") && l.contains("still starting")),
        "the wait is logged: {logs}"
    );
    // The idle one was given up (and restarted) at 30 s, while the slow one was still
    // starting.
    assert!(
        starts(&idle_starts) >= 2,
        "the idle server was given up at the deadline: {logs}"
    );
    let idle_error = logs
        .lines()
        .find(|l| l.contains("upstream=idle") && l.contains("initialize failed"))
        .unwrap_or_else(|| panic!("no initialize failure for the idle server: {logs}"));
    assert!(
        idle_error.contains("made no progress") && idle_error.contains("not answering"),
        "the error says why: {idle_error}"
    );

    let (status, answer) = toolgate_e2e::rest_post(
        &gateway,
        "/v1/tools/slow__ready/call",
        None,
        json!({"arguments": {}}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    gateway.assert_alive();
    let _ = std::fs::remove_dir_all(&dir);
}
