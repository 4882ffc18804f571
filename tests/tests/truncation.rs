//! Token budgets on the MCP surface: a result over its upstream's budget is cut to fit
//! and says so; a result under it passes through untouched.

use serde_json::json;
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, everything_stdio_upstream, first_text, heavy_lock, require,
    unique_marker,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_over_budget_are_cut_and_flagged_small_ones_untouched() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut tight = everything_stdio_upstream(&deps, &unique_marker("budget"));
    tight["result_max_tokens"] = json!(64);
    // A long environment makes get-env's answer far larger than 64 tokens.
    tight["stdio"]["env"] = json!({"TOOLGATE_E2E_PADDING": "lorem ipsum dolor ".repeat(200)});
    let mut gateway = Gateway::start(json!({"upstreams": {"tight": tight}})).await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");

    let big = session
        .call_tool("tight__get-env", json!({}))
        .await
        .expect("get-env");
    let result = big.result();
    let meta = &result["_meta"];
    assert_eq!(meta["toolgate/truncated"], true, "{result:#}");
    let original = meta["toolgate/originalTokens"]
        .as_u64()
        .expect("original count");
    let returned = meta["toolgate/resultTokens"]
        .as_u64()
        .expect("returned count");
    assert!(original > 64, "original {original}");
    assert!(
        returned <= 64,
        "returned {returned} over the 64-token budget"
    );
    let text = first_text(result);
    assert!(text.contains("truncated"), "a cut result says so: {text}");

    // Under budget: what the upstream sent, no token bookkeeping added (only the
    // call's correlation id, which every result carries).
    let echo = session
        .call_tool("tight__echo", json!({"message": "short"}))
        .await
        .expect("echo");
    assert_eq!(first_text(echo.result()), "Echo: short");
    let meta_keys: Vec<&String> = echo.result()["_meta"]
        .as_object()
        .map(|meta| meta.keys().collect())
        .unwrap_or_default();
    assert_eq!(meta_keys, ["toolgate/correlationId"], "{:#}", echo.result());

    let metrics = toolgate_e2e::scrape_metrics(&gateway, None).await;
    assert!(
        metrics.contains(
            r#"toolgate_tool_result_original_tokens_total{tool="tight__get-env",upstream="tight"}"#
        ),
        "{metrics}"
    );
    gateway.assert_alive();
}
