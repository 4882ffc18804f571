//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance` 0.1.16)
//! against the gateway:
//! - the five scenarios a gateway passes on its own, with server-everything mounted;
//! - the full active server suite with the gateway in passthrough mode
//!   (`namespace: none`) in front of the conformance fixture, which implements the
//!   suite's `test_*` tools, prompts and resources.
//!
//! The fixture alone is also run through the suite, so a failure through the gateway
//! can be told apart from a broken fixture.

use std::time::Duration;

use serde_json::json;
use toolgate_e2e::{
    ConformanceReport, Fixture, Gateway, NodeDeps, everything_stdio_upstream, require,
    run_conformance, unique_marker,
};

const FIXTURE: &str = env!("CARGO_BIN_EXE_conformance_fixture");

/// Scenarios a gateway must pass without any fixture tools.
const GATEWAY_SCENARIOS: [&str; 5] = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

/// The 30 active server scenarios of conformance 0.1.16.
const ACTIVE_SCENARIOS: [&str; 30] = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
];

fn assert_full_suite(report: &ConformanceReport, what: &str) {
    println!(
        "conformance ({what}): {} checks passed, {} failed; scenarios passing: {}/{}",
        report.total_passed,
        report.total_failed,
        report.scenarios.values().filter(|(_, f)| *f == 0).count(),
        report.scenarios.len()
    );
    let missing: Vec<&str> = ACTIVE_SCENARIOS
        .iter()
        .copied()
        .filter(|s| !report.scenarios.contains_key(*s))
        .collect();
    assert!(
        missing.is_empty(),
        "{what}: scenarios without a result: {missing:?}\n{}",
        report.output
    );
    let failed = report.failed_scenarios();
    assert!(
        failed.is_empty() && report.total_failed == 0 && report.exit_ok,
        "{what}: failing scenarios {failed:?}\nfailed checks:\n{}\n\nsuite output:\n{}",
        report.failures.join("\n"),
        report.output
    );
    for s in ACTIVE_SCENARIOS {
        assert!(report.scenarios[s].0 >= 1, "{what}: {s} passed no check");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_alone_passes_the_active_suite() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let fixture = Fixture::start(FIXTURE).await;
    let url = fixture.url.clone();
    let report = tokio::task::spawn_blocking(move || {
        run_conformance(&deps, &url, None, Duration::from_secs(600))
    })
    .await
    .unwrap();
    assert_full_suite(&report, "fixture directly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_passes_core_scenarios_with_server_everything() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let mut gateway = Gateway::start(json!({
        "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("conf"))}
    }))
    .await;
    let url = gateway.mcp_url();
    let mut failures = Vec::new();
    let mut passed = 0;
    for scenario in GATEWAY_SCENARIOS {
        let (d, u) = (deps.clone(), url.clone());
        let report = tokio::task::spawn_blocking(move || {
            run_conformance(&d, &u, Some(scenario), Duration::from_secs(180))
        })
        .await
        .unwrap();
        match report.scenarios.get(scenario) {
            Some((p, 0)) if *p >= 1 && report.exit_ok => passed += 1,
            other => failures.push(format!(
                "{scenario}: {other:?}\n{}\n{}",
                report.failures.join("\n"),
                report.output
            )),
        }
    }
    println!(
        "conformance (gateway + server-everything): {passed}/{} scenarios pass",
        GATEWAY_SCENARIOS.len()
    );
    gateway.assert_alive();
    assert!(
        failures.is_empty(),
        "failing scenarios:\n{}",
        failures.join("\n\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_passthrough_passes_the_active_suite() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let fixture = Fixture::start(FIXTURE).await;
    let mut gateway = Gateway::start(json!({
        "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
        "upstreams": {
            "fixture": {"namespace": "none", "streamable_http": {"url": fixture.url}}
        }
    }))
    .await;
    let url = gateway.mcp_url();
    let report = tokio::task::spawn_blocking(move || {
        run_conformance(&deps, &url, None, Duration::from_secs(600))
    })
    .await
    .unwrap();
    gateway.assert_alive();
    assert_full_suite(&report, "gateway passthrough in front of the fixture");
}
