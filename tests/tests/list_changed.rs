//! An upstream whose tool list changes at runtime: the change reaches downstream
//! clients. The upstream is `fixtures/list_changed/server.mjs` (stdio), whose
//! `add_tool` adds `extra_N` and sends `notifications/tools/list_changed`. A 2025-11-25
//! session with its standalone GET stream open must receive
//! `notifications/tools/list_changed`, and a fresh `tools/list` must show the new tool.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, first_text, require, tool_names, unique_marker, workspace_root,
};

const UP: &str = "dyn";

/// Waits (bounded in time and count) for a `notifications/tools/list_changed` on
/// `rx`; returns every frame seen meanwhile.
async fn wait_list_changed(rx: &mut UnboundedReceiver<Value>, timeout: Duration) -> Vec<Value> {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    for _ in 0..1000 {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(frame)) => {
                let hit = frame["method"] == "notifications/tools/list_changed";
                seen.push(frame);
                if hit {
                    return seen;
                }
            }
            Ok(None) => panic!("the GET stream ended before list_changed; frames: {seen:#?}"),
            Err(_) => break,
        }
    }
    panic!(
        "no notifications/tools/list_changed on the GET stream within {timeout:?}; frames: {seen:#?}"
    );
}

/// The `tools` count of this upstream in `/v1/upstreams`.
async fn upstream_tools(gw: &Gateway) -> u64 {
    let u = gw.upstream(UP).await;
    u["tools"]
        .as_u64()
        .unwrap_or_else(|| panic!("/v1/upstreams entry without a tool count: {u}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_tool_list_change_reaches_the_session() {
    let deps = require!(NodeDeps::find());
    let fixture = workspace_root().join("tests/fixtures/list_changed/server.mjs");
    assert!(fixture.is_file(), "{} missing", fixture.display());
    let mut gw = Gateway::start(json!({
        "startup_timeout": "60s",
        "health": {"interval": "1s", "timeout": "2s"},
        "upstreams": {
            UP: {"stdio": {
                "command": deps.node(),
                "args": [fixture, unique_marker("list-changed")]
            }}
        }
    }))
    .await;

    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize a 2025-11-25 session");
    assert_eq!(session.protocol, "2025-11-25", "{:#}", session.init_result);
    assert!(session.session_id.is_some(), "no Mcp-Session-Id");
    assert_eq!(
        session.init_result["capabilities"]["tools"]["listChanged"], true,
        "the gateway must advertise tools.listChanged: {:#}",
        session.init_result
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (status, stream_task) = session.open_get_stream(tx).await.expect("GET /mcp");
    assert_eq!(status, 200, "GET stream status");

    let before = tool_names(&session.list_tools().await.expect("tools/list"));
    for t in ["add_tool", "count"] {
        assert!(
            before.contains(&format!("{UP}__{t}")),
            "{UP}__{t} missing: {before:?}"
        );
    }
    assert!(
        !before.iter().any(|n| n.contains("extra_")),
        "extra tools before any was added: {before:?}"
    );
    let count_before = upstream_tools(&gw).await;
    assert_eq!(
        count_before,
        2,
        "/v1/upstreams before: {}",
        gw.upstream(UP).await
    );

    // Anything announced so far (there should be nothing) is not what we wait for.
    while let Ok(frame) = rx.try_recv() {
        eprintln!("GET stream frame before the change: {frame}");
    }

    for n in 1..=2u64 {
        let call = session
            .call_tool(&format!("{UP}__add_tool"), json!({}))
            .await
            .expect("call add_tool");
        let result = call.result();
        assert_ne!(result["isError"], true, "add_tool failed: {result}");
        assert_eq!(first_text(result), format!("added extra_{n}"), "{result}");

        let frames = wait_list_changed(&mut rx, Duration::from_secs(20)).await;
        let changed = frames.last().unwrap();
        assert!(
            changed.get("id").is_none(),
            "list_changed must be a notification: {changed}"
        );

        let after = tool_names(&session.list_tools().await.expect("tools/list"));
        for k in 1..=n {
            let want = format!("{UP}__extra_{k}");
            assert!(
                after.contains(&want),
                "round {n}: {want} missing after list_changed: {after:?}"
            );
        }
        assert_eq!(
            after.len(),
            before.len() + n as usize,
            "round {n}: {after:?}"
        );

        // The new tool is callable through the gateway.
        let extra = session
            .call_tool(&format!("{UP}__extra_{n}"), json!({}))
            .await
            .expect("call the new tool");
        assert_eq!(
            first_text(extra.result()),
            format!("extra_{n} called"),
            "{:#?}",
            extra.response
        );

        // The ops view agrees.
        let count = upstream_tools(&gw).await;
        assert_eq!(
            count,
            count_before + n,
            "round {n}: /v1/upstreams: {}",
            gw.upstream(UP).await
        );
    }

    stream_task.abort();
    gw.assert_alive();
}
