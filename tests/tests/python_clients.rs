//! A real client (PyPI `mcp` 2.3.0) lists and calls through the gateway, which mounts
//! server-everything three times at once: stdio (`everything`), legacy HTTP+SSE
//! (`ev_sse`) and streamable HTTP (`ev_http`). Both the legacy handshake mode and the
//! default auto mode must see one catalog of correctly prefixed names.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;
use toolgate_e2e::{NodeDeps, ThreeMounts, python, require, run_python};

const PREFIXES: [&str; 3] = ["everything", "ev_sse", "ev_http"];
/// Tools server-everything serves in every transport mode.
const BASE_TOOLS: [&str; 5] = [
    "echo",
    "get-sum",
    "trigger-long-running-operation",
    "get-tiny-image",
    "get-structured-content",
];

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_client_run(out: &Value, mode: &str) {
    let names: Vec<String> = out["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{mode}: no tools in {out}"))
        .iter()
        .map(|v| v.as_str().expect("tool name").to_string())
        .collect();
    let unique: HashSet<&String> = names.iter().collect();
    assert_eq!(
        unique.len(),
        names.len(),
        "{mode}: duplicate names in {names:?}"
    );
    for n in names.iter().filter(|n| !toolgate_e2e::is_protocol_tool(n)) {
        assert!(valid_name(n), "{mode}: invalid tool name {n:?}");
        assert!(
            PREFIXES.iter().any(|p| n.starts_with(&format!("{p}__"))),
            "{mode}: {n:?} is not prefixed with one of {PREFIXES:?}"
        );
    }
    for p in PREFIXES {
        for t in BASE_TOOLS {
            let want = format!("{p}__{t}");
            assert!(
                names.contains(&want),
                "{mode}: {want} missing from {names:?}"
            );
        }
        let calls = &out["calls"][p];
        assert_eq!(
            calls["echo"]["is_error"], false,
            "{mode}: {p}__echo: {calls}"
        );
        assert_eq!(
            calls["echo"]["text"][0],
            format!("Echo: hello from {p}"),
            "{mode}: {p}__echo result"
        );
        assert_eq!(
            calls["get-sum"]["is_error"], false,
            "{mode}: {p}__get-sum: {calls}"
        );
        let sum = calls["get-sum"]["text"][0].as_str().unwrap_or_default();
        assert!(sum.contains("42"), "{mode}: {p}__get-sum returned {sum:?}");
    }
    let unknown = &out["unknown_tool"];
    assert!(
        unknown["raised"] == true || unknown["is_error"] == true,
        "{mode}: unknown tool did not produce an error: {unknown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_legacy_and_auto_see_one_prefixed_catalog() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let py = require!(python());
    let mut env = ThreeMounts::start(&deps).await;
    let url = env.gateway.mcp_url();
    let prefixes = PREFIXES.join(",");

    let legacy = tokio::task::spawn_blocking({
        let (py, url, prefixes) = (py.clone(), url.clone(), prefixes.clone());
        move || {
            run_python(
                &py,
                "catalog_calls.py",
                &[&url, "legacy", &prefixes],
                Duration::from_secs(150),
            )
        }
    })
    .await
    .unwrap();
    assert!(
        ["2025-06-18", "2025-11-25"].contains(&legacy["protocol_version"].as_str().unwrap_or("")),
        "legacy mode negotiated {}",
        legacy["protocol_version"]
    );
    check_client_run(&legacy, "legacy");

    let auto = tokio::task::spawn_blocking({
        let (py, url, prefixes) = (py.clone(), url.clone(), prefixes.clone());
        move || {
            run_python(
                &py,
                "catalog_calls.py",
                &[&url, "auto", &prefixes],
                Duration::from_secs(150),
            )
        }
    })
    .await
    .unwrap();
    // The gateway serves 2026-07-28: auto mode must pick it (not fall back).
    assert_eq!(
        auto["protocol_version"], "2026-07-28",
        "auto mode negotiated"
    );
    check_client_run(&auto, "auto");

    // Both eras see the same catalog.
    let set = |v: &Value| -> HashSet<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(set(&legacy), set(&auto), "legacy and auto catalogs differ");

    // The ops surfaces agree with what the clients saw.
    // Upstream tools only: the gateway's own protocol tools belong to no upstream.
    let total = set(&legacy)
        .iter()
        .filter(|n| !toolgate_e2e::is_protocol_tool(n))
        .count() as u64;
    let ups = env.gateway.upstreams().await;
    let mut listed = 0;
    for (name, kind) in [
        ("everything", "stdio"),
        ("ev_sse", "sse"),
        ("ev_http", "streamable_http"),
    ] {
        let u = ups
            .as_array()
            .and_then(|a| a.iter().find(|u| u["name"] == name))
            .unwrap_or_else(|| panic!("{name} missing from /v1/upstreams: {ups}"));
        assert_eq!(u["state"], "healthy", "{u}");
        assert_eq!(u["kind"], kind, "{u}");
        listed += u["tools"]
            .as_u64()
            .unwrap_or_else(|| panic!("tools count in {u}"));
    }
    assert_eq!(
        listed, total,
        "/v1/upstreams tool counts vs the catalog: {ups}"
    );
    let metrics = toolgate_e2e::scrape_metrics(&env.gateway, None).await;
    assert!(
        metrics
            .lines()
            .any(|l| l == format!("toolgate_catalog_tools {total}")),
        "toolgate_catalog_tools is not {total}:\n{metrics}"
    );
    for p in PREFIXES {
        let label = format!("upstream=\"{p}\"");
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("toolgate_tool_calls_total{") && l.contains(&label)),
            "no toolgate_tool_calls_total for {p}:\n{metrics}"
        );
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("toolgate_upstream_health{")
                    && l.contains(&label)
                    && l.ends_with(" 1")),
            "{p} not healthy (1) in toolgate_upstream_health:\n{metrics}"
        );
    }
    env.gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_the_stdio_front_door_sees_the_same_catalog() {
    let deps = require!(NodeDeps::find());
    let py = require!(python());
    let _serial = toolgate_e2e::heavy_lock().await;
    let mut env = ThreeMounts::start(&deps).await;
    let prefixes = PREFIXES.join(",");
    let over_http = tokio::task::spawn_blocking({
        let (py, url, prefixes) = (py.clone(), env.gateway.mcp_url(), prefixes.clone());
        move || {
            run_python(
                &py,
                "catalog_calls.py",
                &[&url, "legacy", &prefixes],
                Duration::from_secs(150),
            )
        }
    })
    .await
    .unwrap();
    // The same config file, served by `toolgate stdio` as the client's child process.
    let command = serde_json::to_string(&[
        toolgate_e2e::toolgate_bin().display().to_string(),
        "stdio".into(),
        "--config".into(),
        env.gateway.config_path.display().to_string(),
    ])
    .unwrap();
    for mode in ["legacy", "auto"] {
        let out = tokio::task::spawn_blocking({
            let (py, command, prefixes) = (py.clone(), command.clone(), prefixes.clone());
            move || {
                run_python(
                    &py,
                    "catalog_calls.py",
                    &[&command, mode, &prefixes],
                    Duration::from_secs(150),
                )
            }
        })
        .await
        .unwrap();
        println!(
            "stdio front door, {mode} mode: protocol {}",
            out["protocol_version"]
        );
        check_client_run(&out, &format!("stdio {mode}"));
        let set = |v: &Value| -> HashSet<String> {
            v["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            set(&out),
            set(&over_http),
            "stdio ({mode}) and HTTP catalogs differ"
        );
    }
    // `toolgate stdio` exits with its client and takes its own stdio upstream with it:
    // only the HTTP gateway's server process carries the marker afterwards.
    let mut left = Vec::new();
    for _ in 0..50 {
        left = toolgate_e2e::pgrep(&env.marker);
        if left.len() <= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for pid in left.iter().skip(1) {
        // Cleanup of a leaked process carrying this test's unique marker.
        let _ = toolgate_e2e::sys::signal(*pid, libc::SIGKILL);
    }
    assert_eq!(
        left.len(),
        1,
        "stdio upstream processes left behind by `toolgate stdio`: {left:?}"
    );
    env.gateway.assert_alive();
}
