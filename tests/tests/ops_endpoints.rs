//! The ops endpoints and the catalog's fidelity, seen from outside: `/healthz`,
//! `/readyz`, `/v1/upstreams`, `/metrics`, and `tools/list` over `/mcp` keeping every
//! field the upstream sent (rmcp's typed `Tool` alone would drop `execution`).

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, everything_stdio_upstream, first_text, heavy_lock, http,
    require, unique_marker,
};

async fn get_text(gateway: &Gateway, path: &str) -> (u16, String) {
    let response = http()
        .get(gateway.url(path))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_endpoints_report_health_catalog_and_metrics() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("ops"))}
    }))
    .await;

    let (status, body) = get_text(&gateway, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, body) = get_text(&gateway, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    let ready: Value = serde_json::from_str(&body).expect("readyz JSON");
    assert_eq!(ready["ready"], true);
    assert!(ready["tools"].as_u64().unwrap_or(0) >= 10, "{ready}");

    let upstream = gateway
        .wait_upstream_state("everything", "healthy", Duration::from_secs(30))
        .await;
    assert_eq!(upstream["kind"], "stdio");
    assert!(upstream["tools"].as_u64().unwrap_or(0) >= 10, "{upstream}");
    assert!(upstream["last_error"].is_null(), "{upstream}");

    // Raw tools/list through /mcp: namespaced, and nothing the upstream said is lost.
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let list = session.list_tools().await.expect("tools/list");
    let tools = list["tools"].as_array().expect("tools array");
    let echo = tools
        .iter()
        .find(|t| t["name"] == "everything__echo")
        .unwrap_or_else(|| panic!("everything__echo missing: {list}"));
    assert!(
        echo["execution"].is_object(),
        "`execution` must pass through: {echo}"
    );
    assert_eq!(echo["_meta"]["toolgate/upstream"], "everything");
    assert_eq!(echo["_meta"]["toolgate/tool"], "echo");
    assert_eq!(echo["inputSchema"]["type"], "object");
    for protocol_tool in toolgate_e2e::PROTOCOL_TOOLS {
        assert!(
            tools.iter().any(|t| t["name"] == protocol_tool),
            "{protocol_tool} must always be listed: {list}"
        );
    }
    for tool in tools {
        let name = tool["name"].as_str().expect("name");
        if toolgate_e2e::is_protocol_tool(name) {
            continue;
        }
        assert!(name.starts_with("everything__"), "{name}");
        assert!(
            name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{name}"
        );
    }

    let call = session
        .call_tool("everything__echo", json!({"message": "metrics"}))
        .await
        .expect("echo");
    assert_eq!(first_text(call.result()), "Echo: metrics");
    let unknown = session
        .call_tool("everything__nope", json!({}))
        .await
        .expect("unknown tool answer");
    assert_eq!(
        unknown.error().and_then(|e| e["code"].as_i64()),
        Some(-32602)
    );

    let (status, metrics) = get_text(&gateway, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains(
            r#"toolgate_tool_calls_total{tool="everything__echo",upstream="everything",outcome="ok"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            r#"toolgate_tool_call_duration_seconds_count{tool="everything__echo",upstream="everything"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"toolgate_upstream_health{upstream="everything"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("toolgate_catalog_tools "), "{metrics}");
    gateway.assert_alive();
}
