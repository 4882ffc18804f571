//! Token budgets on the MCP surface: a result over its upstream's budget is cut to fit
//! and says so; a result under it passes through untouched.

use axum::Json;
use serde_json::{Value, json};
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

/// What the test's HTTP MCP server answers to `tools/call`: text blocks written the
/// way a serializer other than the gateway's might (`\u00e9`, `\/`, `isError` first),
/// so an answer that carries these bytes was passed on as the upstream wrote it. The
/// second block is about 400 tokens.
fn hand_written() -> String {
    let long = "lorem ipsum dolor ".repeat(100);
    format!(
        r#"{{"isError":false,"content":[{{"type":"text","text":"caf\u00e9 \/ plain"}},{{"text":"second block: {long}end","type":"text"}}]}}"#
    )
}

async fn hand_written_upstream(Json(message): Json<Value>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let id = message.get("id").cloned();
    let method = message["method"].as_str().unwrap_or("");
    let Some(id) = id else {
        return axum::http::StatusCode::ACCEPTED.into_response();
    };
    let result = match method {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hand-written", "version": "1.0.0"},
        })
        .to_string(),
        "tools/list" => json!({"tools": [{
            "name": "say",
            "description": "Answers with hand-written JSON",
            "inputSchema": {"type": "object", "properties": {}},
        }]})
        .to_string(),
        "tools/call" => hand_written(),
        _ => "{}".to_owned(),
    };
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#),
    )
        .into_response()
}

/// A text-only result under budget reaches the client as the upstream wrote it (no
/// parse and re-serialization on the way), with the gateway's correlation id added
/// and a well-formed answer every client reads; the same result over a tighter
/// budget is cut as any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_text_results_pass_through_as_written_and_are_still_cut_over_budget() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/mcp", axum::routing::post(hand_written_upstream));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut gateway = Gateway::start(json!({"upstreams": {
        "loose": {"streamable_http": {"url": url}},
        "tight": {"streamable_http": {"url": url}, "result_max_tokens": 100},
    }}))
    .await;

    for session in [
        McpSession::bare(&gateway.mcp_url())
            .reading_to_end()
            .initialize()
            .await
            .expect("initialize"),
        McpSession::modern(&gateway.mcp_url()).reading_to_end(),
    ] {
        let said = session
            .call_tool("loose__say", json!({}))
            .await
            .expect("call");
        let result = said.result();
        assert!(
            said.body.contains(r#""text":"caf\u00e9 \/ plain""#),
            "the upstream's own bytes: {}",
            said.body
        );
        assert_eq!(first_text(result), "café / plain", "{result:#}");
        assert!(
            result["content"][1]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("second block: ") && t.ends_with(" end")),
            "{result:#}"
        );
        assert_eq!(result["isError"], false);
        assert!(
            result["_meta"]["toolgate/correlationId"].is_string(),
            "{result:#}"
        );
        let meta_keys = result["_meta"].as_object().map(|m| m.len());
        assert_eq!(meta_keys, Some(1), "{result:#}");

        let cut = session
            .call_tool("tight__say", json!({}))
            .await
            .expect("call");
        let result = cut.result();
        assert_eq!(result["_meta"]["toolgate/truncated"], true, "{result:#}");
        assert!(!cut.body.contains(r#"\u00e9"#), "{}", cut.body);
    }
    // Sessionless answers carry the version's resultType, plain or not.
    let modern = McpSession::modern(&gateway.mcp_url());
    let said = modern.call_tool("loose__say", json!({})).await.unwrap();
    assert_eq!(
        said.result()["resultType"],
        "complete",
        "{:#}",
        said.result()
    );

    let metrics = toolgate_e2e::scrape_metrics(&gateway, None).await;
    assert!(
        metrics.contains(
            r#"toolgate_tool_result_original_tokens_total{tool="loose__say",upstream="loose"}"#
        ),
        "a passed-on result is counted: {metrics}"
    );
    gateway.assert_alive();
}
