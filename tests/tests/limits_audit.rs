//! Per-upstream concurrency limits and the audit line of every call.

use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, everything_stdio_upstream, first_text, heavy_lock, require,
    unique_marker, wait_for,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_upstream_answers_rate_limited_and_recovers() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut upstream = everything_stdio_upstream(&deps, &unique_marker("limits"));
    upstream["max_concurrent_calls"] = json!(1);
    let mut gateway = Gateway::start(json!({"upstreams": {"everything": upstream}})).await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");

    // One long call holds the only slot for ~4 s.
    let long = {
        let session = McpSession::connect(&gateway.mcp_url())
            .await
            .expect("initialize");
        tokio::spawn(async move {
            session
                .call_tool(
                    "everything__trigger-long-running-operation",
                    json!({"duration": 4, "steps": 2}),
                )
                .await
        })
    };
    // Wait until the long call holds the slot (bounded).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let refused = session
        .call_tool("everything__echo", json!({"message": "queued"}))
        .await
        .expect("echo answer");
    let waited = started.elapsed();
    assert_eq!(refused.result()["isError"], true, "{refused:#?}");
    assert_eq!(
        refused.result()["_meta"]["toolgate/error"],
        "rate_limited",
        "{refused:#?}"
    );
    assert!(
        waited >= Duration::from_millis(1500),
        "a call waits for a slot before it is refused (waited {waited:?})"
    );
    let long = long.await.expect("join").expect("long call");
    assert!(long.result()["isError"].is_null(), "{long:#?}");
    // The slot is free again.
    let ok = session
        .call_tool("everything__echo", json!({"message": "free"}))
        .await
        .expect("echo");
    assert_eq!(first_text(ok.result()), "Echo: free");
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_audited_without_argument_values_unless_enabled() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let quiet = everything_stdio_upstream(&deps, &unique_marker("audit-quiet"));
    let mut loud = everything_stdio_upstream(&deps, &unique_marker("audit-loud"));
    loud["audit_arguments"] = json!(true);
    let mut gateway = Gateway::start(json!({"upstreams": {"quiet": quiet, "loud": loud}})).await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    for upstream in ["quiet", "loud"] {
        let out = session
            .call_tool(
                &format!("{upstream}__echo"),
                json!({"message": format!("value-only-in-{upstream}-arguments")}),
            )
            .await
            .expect("echo");
        assert!(
            first_text(out.result()).contains("value-only-in"),
            "{out:#?}"
        );
    }
    let logs = wait_for("both audit lines", Duration::from_secs(10), || {
        let logs = gateway.proc.logs();
        let ready = logs.matches("toolgate::audit").count() >= 2;
        async move { ready.then_some(logs) }
    })
    .await;
    let audit: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("toolgate::audit"))
        .collect();
    let quiet_line = audit
        .iter()
        .find(|l| l.contains("quiet__echo"))
        .unwrap_or_else(|| panic!("no audit line for quiet__echo:\n{logs}"));
    let loud_line = audit
        .iter()
        .find(|l| l.contains("loud__echo"))
        .unwrap_or_else(|| panic!("no audit line for loud__echo:\n{logs}"));
    for line in [quiet_line, loud_line] {
        for field in [
            "tenant",
            "session",
            "upstream",
            "latency_us",
            "outcome",
            "result_tokens",
        ] {
            assert!(line.contains(field), "audit line lacks {field}: {line}");
        }
    }
    assert!(
        !logs.contains("value-only-in-quiet-arguments"),
        "argument values must not be logged by default:\n{logs}"
    );
    assert!(
        loud_line.contains("value-only-in-loud-arguments"),
        "audit_arguments: true logs them: {loud_line}"
    );
    gateway.assert_alive();
}
