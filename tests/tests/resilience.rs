//! Killing the stdio upstream mid-call: the call returns a clear error, health goes
//! down, the gateway restarts the server, the next call succeeds, and the other
//! upstreams (legacy SSE, streamable HTTP) never notice — including a call running on
//! one of them at the moment of the crash.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_e2e::{McpSession, NodeDeps, ThreeMounts, first_text, heavy_lock, pgrep, require};

/// The error text of a failed call: a JSON-RPC error message or an isError result's text.
fn error_text(response: &Value) -> Option<String> {
    if let Some(e) = response.get("error") {
        return Some(
            e["message"].as_str().unwrap_or_default().to_string() + &e["data"].to_string(),
        );
    }
    if response["result"]["isError"] == true {
        return Some(first_text(&response["result"]));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_stdio_upstream_fails_the_call_clearly_and_restarts_alone() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut env = ThreeMounts::start(&deps).await;
    let gw = &env.gateway;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");

    for name in ["everything", "ev_sse", "ev_http"] {
        gw.wait_upstream_state(name, "healthy", Duration::from_secs(30))
            .await;
    }
    let old_pids = pgrep(&env.marker);
    assert_eq!(
        old_pids.len(),
        1,
        "expected one stdio server process, found {old_pids:?}"
    );

    // A call on the HTTP mount that spans the crash; it must finish untouched.
    let (http_tap, mut http_frames) = tokio::sync::mpsc::unbounded_channel();
    let bystander = tokio::spawn({
        let session = session.clone();
        async move {
            session
                .request_with_id(
                    json!("bystander"),
                    "tools/call",
                    json!({"name": "ev_http__trigger-long-running-operation",
                           "arguments": {"duration": 6, "steps": 6},
                           "_meta": {"progressToken": "bystander"}}),
                    Some(http_tap),
                    Duration::from_secs(60),
                )
                .await
        }
    });
    // The victim: a long call on the stdio mount; wait for its first progress frame so
    // the kill lands mid-call.
    let (tap, mut frames) = tokio::sync::mpsc::unbounded_channel();
    let victim = tokio::spawn({
        let session = session.clone();
        async move {
            session
                .request_with_id(
                    json!("victim"),
                    "tools/call",
                    json!({"name": "everything__trigger-long-running-operation",
                           "arguments": {"duration": 30, "steps": 30},
                           "_meta": {"progressToken": "victim"}}),
                    Some(tap),
                    Duration::from_secs(60),
                )
                .await
        }
    });
    for (what, rx) in [("victim", &mut frames), ("bystander", &mut http_frames)] {
        tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(f) = rx.recv().await {
                if f["method"] == "notifications/progress" {
                    return;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{what}: no progress within 20 s"));
    }

    let killed_at = Instant::now();
    for pid in &old_pids {
        // The stdio server we found by its unique marker.
        let _ = toolgate_e2e::sys::signal(*pid, libc::SIGKILL);
    }

    // 1. The call returns a clear error, long before the operation would have finished.
    let ex = tokio::time::timeout(Duration::from_secs(20), victim)
        .await
        .expect("the call on the killed upstream did not return within 20 s")
        .unwrap()
        .expect("the call's HTTP exchange failed instead of returning an error");
    let response = ex
        .response
        .clone()
        .unwrap_or_else(|| panic!("no response for the killed call; frames {:#?}", ex.frames));
    let msg =
        error_text(&response).unwrap_or_else(|| panic!("the killed call did not fail: {response}"));
    let lower = msg.to_lowercase();
    assert!(
        msg.len() >= 10
            && [
                "everything",
                "upstream",
                "unavailable",
                "closed",
                "exit",
                "terminat",
                "disconnect",
                "connection"
            ]
            .iter()
            .any(|w| lower.contains(w)),
        "unclear error for a crashed upstream: {msg:?}"
    );
    println!("killed call failed after {:?}: {msg}", killed_at.elapsed());

    // 2. Health goes down, then healthy again; the others stay healthy throughout.
    let mut saw_not_healthy = None;
    let mut recovered = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..1200 {
        let ups = gw.upstreams().await;
        let entry = |n: &str| {
            ups.as_array()
                .and_then(|a| a.iter().find(|u| u["name"] == n))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let state = |n: &str| entry(n)["state"].as_str().unwrap_or("").to_string();
        for other in ["ev_sse", "ev_http"] {
            assert_eq!(
                state(other),
                "healthy",
                "{other} was disturbed by the crash: {ups}"
            );
        }
        let s = state("everything");
        if s != "healthy" && saw_not_healthy.is_none() {
            saw_not_healthy = Some((s.clone(), entry("everything")));
        }
        if s == "healthy" && saw_not_healthy.is_some() {
            recovered = Some(killed_at.elapsed());
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (down_state, down_entry) = saw_not_healthy
        .expect("/v1/upstreams never showed `everything` as not healthy after the kill");
    assert!(
        ["down", "degraded", "starting"].contains(&down_state.as_str()),
        "unexpected state {down_state:?}"
    );
    assert!(
        down_entry["last_error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "no last_error while `everything` was {down_state}: {down_entry}"
    );
    let recovered = recovered.expect("`everything` did not become healthy again within 60 s");
    println!("everything: {down_state} then healthy after {recovered:?}");

    // 3. A new server process, and the next call succeeds.
    let new_pids = pgrep(&env.marker);
    assert_eq!(
        new_pids.len(),
        1,
        "expected one restarted server, found {new_pids:?}"
    );
    assert_ne!(new_pids, old_pids, "the stdio server was not restarted");
    let ex = session
        .call_tool("everything__echo", json!({"message": "after restart"}))
        .await
        .expect("call after restart");
    assert_eq!(
        first_text(ex.result()),
        "Echo: after restart",
        "{:?}",
        ex.response
    );

    // 4. The bystander call on the HTTP mount finished with all its progress.
    let ex = tokio::time::timeout(Duration::from_secs(30), bystander)
        .await
        .expect("bystander call did not finish")
        .unwrap()
        .expect("bystander exchange");
    let result = ex.result();
    assert_ne!(result["isError"], true, "bystander failed: {result}");
    let progress: Vec<f64> = ex
        .notifications("notifications/progress")
        .iter()
        .map(|p| p["params"]["progress"].as_f64().unwrap_or(0.0))
        .collect();
    assert_eq!(
        progress,
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "bystander progress"
    );
    for name in ["ev_sse", "ev_http"] {
        let ex = session
            .call_tool(&format!("{name}__echo"), json!({"message": "still here"}))
            .await
            .expect("call on an unaffected upstream");
        assert_eq!(first_text(ex.result()), "Echo: still here");
    }
    env.gateway.assert_alive();
}
