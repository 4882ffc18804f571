//! The session surface of `/mcp` (protocol versions with `initialize`), answered by the
//! gateway itself: the handshake and version negotiation, how answers are shaped
//! (JSON for a call that sends nothing before its result, SSE for one that does), the
//! errors a client can cause, and the end of a session (DELETE, then 404).
//!
//! The upstream is server-everything over stdio.
//!
//! Also the sessionless (2026-07-28) `tools/call`, which the gateway answers itself
//! when every protocol signal checks out: `resultType` on results, log lines only on
//! request (`io.modelcontextprotocol/logLevel`), no server-to-client requests, and a
//! request whose headers contradict its body refused.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::mcp_http::McpSession;
use toolgate_e2e::{Gateway, NodeDeps, everything_stdio_upstream, first_text, http, unique_marker};

async fn start() -> Option<Gateway> {
    let deps = NodeDeps::find()?;
    let marker = unique_marker("sessions");
    // Callers without credentials are the `guest` tenant, which starts with two tools.
    let gateway = Gateway::start(json!({
        "upstreams": {"ev": everything_stdio_upstream(&deps, &marker)},
        "tenants": {"guest": {"allow": ["ev__*"], "initial": ["ev__echo", "ev__trigger-long-running-operation"]}},
        "anonymous_tenant": "guest"
    }))
    .await;
    Some(gateway)
}

async fn initialize(url: &str, version: &str) -> (u16, Option<String>, Value) {
    let response = http()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}
            }})
            .to_string(),
        )
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("POST initialize");
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, session, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_negotiates_a_version_with_sessions() {
    let Some(gateway) = start().await else { return };
    let url = gateway.mcp_url();
    for (asked, answered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2024-11-05", "2024-11-05"),
        // The sessionless version has no initialize: the handshake picks the newest
        // version with sessions, as it does for a version it does not know.
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let (status, session, body) = initialize(&url, asked).await;
        assert_eq!(status, 200, "{asked}: {body}");
        assert!(
            session.is_some_and(|s| s.len() >= 16),
            "{asked}: no Mcp-Session-Id"
        );
        assert_eq!(
            body["result"]["protocolVersion"], answered,
            "{asked}: {body}"
        );
        assert_eq!(body["result"]["serverInfo"]["name"], "toolgate", "{body}");
        assert_eq!(
            body["result"]["capabilities"]["tools"]["listChanged"], true,
            "{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_json_unless_the_call_sends_something_first() {
    let Some(gateway) = start().await else { return };
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");

    let ping = session.request("ping", json!({})).await.expect("ping");
    assert_eq!(
        ping.response.as_ref().unwrap()["result"],
        json!({}),
        "{ping:#?}"
    );

    let echo = session
        .call_tool("ev__echo", json!({"message": "plain"}))
        .await
        .expect("echo");
    assert!(
        echo.content_type.starts_with("application/json"),
        "{echo:#?}"
    );
    assert_eq!(first_text(echo.result()), "Echo: plain");

    let slow = session
        .request(
            "tools/call",
            json!({
                "name": "ev__trigger-long-running-operation",
                "arguments": {"duration": 1, "steps": 3},
                "_meta": {"progressToken": "p-1"}
            }),
        )
        .await
        .expect("long-running call");
    assert!(
        slow.content_type.starts_with("text/event-stream"),
        "{slow:#?}"
    );
    let progress: Vec<&Value> = slow
        .frames
        .iter()
        .filter(|f| f["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{:#?}", slow.frames);
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "p-1")
    );
    let last = slow.frames.last().expect("frames");
    assert!(
        last.get("result").is_some(),
        "the result comes last: {:#?}",
        slow.frames
    );

    // An expansion without a GET stream open: one list_changed on the call's own
    // stream, then the result.
    let expand = session
        .call_tool("tool_expand_tools", json!({"tool_names": ["ev__get-sum"]}))
        .await
        .expect("expand");
    let methods: Vec<&str> = expand
        .frames
        .iter()
        .map(|f| f["method"].as_str().unwrap_or("(result)"))
        .collect();
    assert_eq!(
        methods,
        ["notifications/tools/list_changed", "(result)"],
        "{expand:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_mistakes_get_json_rpc_errors() {
    let Some(gateway) = start().await else { return };
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");

    let unknown = session
        .request("tools/frobnicate", json!({}))
        .await
        .expect("unknown method");
    let error = &unknown.response.as_ref().expect("an answer")["error"];
    assert_eq!(error["code"], -32601, "{unknown:#?}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("tools/frobnicate")
    );

    let again = session
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await
        .expect("initialize again");
    assert_eq!(
        again.response.as_ref().unwrap()["error"]["code"],
        -32600,
        "{again:#?}"
    );

    let no_name = session
        .request("tools/call", json!({"arguments": {}}))
        .await
        .expect("call");
    let error = &no_name.response.as_ref().unwrap()["error"];
    assert_eq!(error["code"], -32602, "{no_name:#?}");
    assert!(
        error["message"].as_str().unwrap().contains("name"),
        "{error}"
    );

    let batch = session
        .send_body(
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_vec(),
            None,
            None,
            Duration::from_secs(30),
        )
        .await
        .expect("batch");
    assert_eq!(batch.status, 400, "{batch:#?}");
    assert!(batch.body.contains("batches"), "{batch:#?}");

    let garbage = session
        .send_body(b"{not json".to_vec(), None, None, Duration::from_secs(30))
        .await
        .expect("garbage");
    assert_eq!(garbage.status, 400, "{garbage:#?}");
    let error: Value = serde_json::from_str(&garbage.body).expect("a JSON-RPC error body");
    assert_eq!(error["error"]["code"], -32700, "{error}");

    // Nothing above broke the session.
    let echo = session
        .call_tool("ev__echo", json!({"message": "still"}))
        .await
        .expect("echo");
    assert_eq!(first_text(echo.result()), "Echo: still");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_the_session() {
    let Some(gateway) = start().await else { return };
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let id = session.session_id.clone().expect("a session id");
    assert!(session.list_tools().await.is_ok());

    let deleted = http()
        .delete(gateway.mcp_url())
        .header("Mcp-Session-Id", &id)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("DELETE");
    // 200, as the TypeScript SDK's server answers; the Python client takes only 200
    // or 204 as success and logs "Session termination failed" for anything else.
    assert_eq!(deleted.status().as_u16(), 200);

    let after = session
        .request("tools/list", json!({}))
        .await
        .expect("POST after DELETE");
    assert_eq!(after.status, 404, "{after:#?}");
    let stream = http()
        .get(gateway.mcp_url())
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", &id)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("GET after DELETE");
    assert_eq!(stream.status().as_u16(), 404);
}

const LONG: &str = "ev__trigger-long-running-operation";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessionless_calls_carry_result_type_and_log_lines_only_when_asked() {
    let Some(gateway) = start().await else { return };
    let modern = McpSession::modern(&gateway.mcp_url());

    let echo = modern
        .call_tool("ev__echo", json!({"message": "modern"}))
        .await
        .expect("echo");
    assert_eq!(first_text(echo.result()), "Echo: modern", "{echo:#?}");
    assert_eq!(echo.result()["resultType"], "complete", "{echo:#?}");

    let long = |meta: Value| json!({"name": LONG, "arguments": {"duration": 1, "steps": 3}, "_meta": meta});
    // No logLevel, no progressToken: nothing but the result.
    let quiet = modern
        .request("tools/call", long(json!({})))
        .await
        .expect("quiet call");
    assert_eq!(quiet.result()["resultType"], "complete", "{quiet:#?}");
    assert_eq!(
        quiet.frames.len(),
        1,
        "only the result: {:#?}",
        quiet.frames
    );

    // Progress lines are `info`: a client asking for `warning` and up gets none.
    let warnings = modern
        .request(
            "tools/call",
            long(json!({"io.modelcontextprotocol/logLevel": "warning"})),
        )
        .await
        .expect("warning-level call");
    assert!(
        warnings.notifications("notifications/message").is_empty(),
        "{:#?}",
        warnings.frames
    );

    // A progressToken gets progress notifications, then the result.
    let progress = modern
        .request("tools/call", long(json!({"progressToken": "t-26"})))
        .await
        .expect("call with a progress token");
    let updates = progress.notifications("notifications/progress");
    assert_eq!(updates.len(), 3, "{:#?}", progress.frames);
    assert!(
        updates
            .iter()
            .all(|u| u["params"]["progressToken"] == "t-26")
    );
    assert!(progress.frames.last().unwrap().get("result").is_some());

    // Headers that contradict the body: refused, and the tool is not run.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "ev__echo", "arguments": {"message": "smuggled"}, "_meta": meta}});
    let contradicted = modern
        .send_body_with_headers(
            body.to_string().into_bytes(),
            &[
                ("Mcp-Method", "tools/call".to_owned()),
                ("Mcp-Name", "ev__get-sum".to_owned()),
            ],
            Some(json!(9)),
            None,
            Duration::from_secs(30),
        )
        .await
        .expect("contradicted call");
    assert!(
        contradicted.status >= 400 || contradicted.error().is_some(),
        "{contradicted:#?}"
    );
    assert!(
        !format!("{contradicted:?}").contains("Echo: smuggled"),
        "the tool ran: {contradicted:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessionless_call_asks_for_upstream_sampling_with_input_required() {
    let Some(deps) = NodeDeps::find() else { return };
    const OTHER_KEY: &str = "sessionless-sampling-other-key";
    // Over streamable HTTP the upstream's sampling request rides the call's own
    // stream: the link that lets two tenants share the upstream.
    let upstream = toolgate_e2e::Everything::start(&deps, "streamableHttp").await;
    let gateway = Gateway::start(json!({
        "upstreams": {"ev": {"streamable_http": {"url": upstream.url}}},
        "tenants": {
            "guest": {"allow": ["*"], "initial": ["*"]},
            "other": {"api_keys": [toolgate_e2e::hash_key(OTHER_KEY)], "allow": ["*"], "initial": ["*"]}
        },
        "anonymous_tenant": "guest"
    }))
    .await;
    let modern = McpSession::modern(&gateway.mcp_url());
    // One tools/call of this test as `session`, answered within 60 s.
    let call_as = |session: McpSession, id: i64, params: Value| async move {
        session
            .request_with_id(
                json!(id),
                "tools/call",
                params,
                None,
                Duration::from_secs(60),
            )
            .await
            .expect("an answer within 60 s, not a wait for the client")
    };
    let call = json!({"name": "ev__trigger-sampling-request", "arguments": {"prompt": "hi", "maxTokens": 5}});
    // 2026-07-28 has no server-to-client requests: the upstream's sampling request
    // comes back as an input-required result (SEP-2322).
    let asked = call_as(modern.clone(), 1, call.clone()).await;
    let result = asked.result();
    assert_eq!(result["resultType"], "input_required", "{asked:#?}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{result}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let state = result["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();

    let retry = |state: &str| {
        let mut params = call.clone();
        params["requestState"] = json!(state);
        params["inputResponses"] = json!({key.as_str(): {
            "role": "assistant",
            "content": {"type": "text", "text": "sampled by the raw test"},
            "model": "raw-test-model",
            "stopReason": "endTurn"
        }});
        params
    };
    // Another tenant cannot take the call up, nor can a state that was never given.
    let foreign = call_as(modern.clone().with_bearer(OTHER_KEY), 2, retry(&state)).await;
    assert_eq!(
        foreign.error().map(|e| e["code"].clone()),
        Some(json!(-32602)),
        "{foreign:#?}"
    );
    let forged = call_as(modern.clone(), 3, retry("forged-state")).await;
    assert_eq!(
        forged.error().map(|e| e["code"].clone()),
        Some(json!(-32602)),
        "{forged:#?}"
    );

    let done = call_as(modern.clone(), 4, retry(&state)).await;
    assert_eq!(done.result()["resultType"], "complete", "{done:#?}");
    assert!(
        toolgate_e2e::first_text(done.result()).contains("sampled by the raw test"),
        "{done:#?}"
    );
    // The state is spent.
    let again = call_as(modern.clone(), 5, retry(&state)).await;
    assert!(again.error().is_some(), "{again:#?}");
}

/// `tools/list` pages with MCP cursors (`sessions.list_page_size`), with sessions and
/// sessionless alike: the pages together list every visible tool once, in the order
/// of one whole list; the last page has no `nextCursor`; a cursor this server did not
/// give is `-32602`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_pages_with_cursors() {
    let Some(deps) = NodeDeps::find() else { return };
    let _serial = toolgate_e2e::heavy_lock().await;
    let marker = unique_marker("pages");
    let page_size = 4;
    let gw = Gateway::start(json!({
        "sessions": {"list_page_size": page_size},
        "upstreams": {"ev": everything_stdio_upstream(&deps, &marker)}
    }))
    .await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");
    let modern = McpSession::modern(&gw.mcp_url());
    let whole = session.list_tools().await.expect("tools/list, every page");
    let names = |list: &Value| -> Vec<String> {
        list["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().expect("a name").to_owned())
            .collect()
    };
    let all = names(&whole);
    assert!(all.len() > 2 * page_size, "{all:?}");
    for client in [&session, &modern] {
        let mut seen = Vec::new();
        let mut params = json!({});
        for page in 0..50 {
            let ex = client.rpc("tools/list", params.clone()).await;
            let result = ex.result();
            let listed = names(result);
            assert!(listed.len() <= page_size, "page {page}: {listed:?}");
            seen.extend(listed);
            match result.get("nextCursor") {
                Some(Value::String(cursor)) => {
                    assert_eq!(result["tools"].as_array().map(Vec::len), Some(page_size));
                    params = json!({"cursor": cursor});
                }
                None => break,
                Some(other) => panic!("nextCursor {other}"),
            }
        }
        assert_eq!(seen, all, "the pages together are the whole list");
        for cursor in [json!("o-1"), json!("nonsense"), json!(7)] {
            let ex = client.rpc("tools/list", json!({"cursor": cursor})).await;
            assert_eq!(ex.rpc_error()["code"], -32602, "cursor {cursor}: {ex:#?}");
        }
    }
}
