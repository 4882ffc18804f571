//! Background tool streams: a tool answers "started" and goes on reporting progress
//! on the caller's token after its result. The progress reaches the session that
//! owns the token — on its GET stream — in order and only forward, and no other
//! session; an upstream flooding progress does not take the gateway down.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, first_text, heavy_lock, require, unique_marker, workspace_root,
};

/// A gateway in front of `fixtures/background_stream/server.mjs` (stdio) as `fx`.
async fn gateway(deps: &NodeDeps) -> Gateway {
    let fixture = workspace_root().join("tests/fixtures/background_stream/server.mjs");
    Gateway::start(json!({
        "startup_timeout": "60s",
        "upstreams": {"fx": {"stdio": {
            "command": deps.node(),
            "args": [fixture, unique_marker("background-stream")]
        }}}
    }))
    .await
}

/// Progress frames for `token` among what `frames` received within `timeout`,
/// stopping once `want` arrived.
async fn progress_for(
    frames: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    token: &str,
    want: usize,
    timeout: Duration,
) -> Vec<Value> {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    for _ in 0..100_000 {
        if seen.len() >= want {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, frames.recv()).await {
            Ok(Some(frame)) => {
                if frame["method"] == "notifications/progress"
                    && frame["params"]["progressToken"] == token
                {
                    seen.push(frame["params"].clone());
                }
            }
            _ => break,
        }
    }
    seen
}

/// The progress a call's caller got for `token`: what went out on the call's own
/// stream (progress the gateway took before it handled the result — on a loaded
/// machine, some sent after it), then what reached the GET stream `frames` within
/// `timeout`, until `want` in all. Also returns how many came on the call's stream.
async fn caller_progress(
    call: &toolgate_e2e::RpcExchange,
    frames: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    token: &str,
    want: usize,
    timeout: Duration,
) -> (usize, Vec<Value>) {
    let on_call: Vec<Value> = call
        .notifications("notifications/progress")
        .into_iter()
        .map(|f| f["params"].clone())
        .collect();
    let before = on_call.len();
    let after = progress_for(frames, token, want.saturating_sub(before), timeout).await;
    (before, on_call.into_iter().chain(after).collect())
}

/// The peak resident memory of process `pid` (Linux `VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_after_the_result_reaches_the_owner_s_stream_only() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut gateway = gateway(&deps).await;
    let owner = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let other = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let (owner_tap, mut owner_frames) = tokio::sync::mpsc::unbounded_channel();
    let (other_tap, mut other_frames) = tokio::sync::mpsc::unbounded_channel();
    let (status, _owner_stream) = owner.open_get_stream(owner_tap).await.expect("GET");
    assert_eq!(status, 200);
    let (status, _other_stream) = other.open_get_stream(other_tap).await.expect("GET");
    assert_eq!(status, 200);

    let call = owner
        .request(
            "tools/call",
            json!({"name": "fx__background_stream", "arguments": {"count": 3},
                   "_meta": {"progressToken": "bg-owner"}}),
        )
        .await
        .expect("call");
    assert_eq!(first_text(call.result()), "started", "{call:#?}");

    // Each frame once, in order, on whichever stream it reached the caller.
    let (_, progress) = caller_progress(
        &call,
        &mut owner_frames,
        "bg-owner",
        3,
        Duration::from_secs(20),
    )
    .await;
    let values: Vec<f64> = progress
        .iter()
        .filter_map(|p| p["progress"].as_f64())
        .collect();
    assert_eq!(values, [1.0, 2.0, 3.0], "{progress:#?}");
    assert_eq!(progress[2]["message"], "step 3");
    assert_eq!(
        progress[0]["_meta"]["toolgate/tool"],
        "fx__background_stream"
    );

    // The other session saw none of it.
    let leaked: Vec<Value> = std::iter::from_fn(|| other_frames.try_recv().ok())
        .filter(|f| f["method"] == "notifications/progress")
        .collect();
    assert!(leaked.is_empty(), "another session got {leaked:#?}");
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_late_progress_is_bounded_and_stays_forward() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut gateway = gateway(&deps).await;
    let owner = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let (tap, mut frames) = tokio::sync::mpsc::unbounded_channel();
    let (_, _stream) = owner.open_get_stream(tap).await.expect("GET");
    let call = owner
        .request(
            "tools/call",
            json!({"name": "fx__background_stream", "arguments": {"count": 20000, "interval_ms": 0},
                   "_meta": {"progressToken": "bg-flood"}}),
        )
        .await
        .expect("call");
    assert_eq!(first_text(call.result()), "started");
    // What the gateway took before it handled the result goes out on the call's own
    // stream (the writer drains the bounded queue while the flood fills it, so that
    // count has no fixed bound); the rest on the session's GET stream; what no queue
    // takes is dropped. Either way: only forward across both streams, and the
    // gateway's memory stays bounded.
    let (_, progress) = caller_progress(
        &call,
        &mut frames,
        "bg-flood",
        20000,
        Duration::from_secs(20),
    )
    .await;
    let peak_kib = peak_rss_kib(gateway.proc.pid());
    assert!(
        peak_kib < 256 * 1024,
        "the gateway peaked at {peak_kib} KiB during a flood of 20,000 frames"
    );
    assert!(!progress.is_empty(), "no late progress arrived");
    let values: Vec<f64> = progress
        .iter()
        .filter_map(|p| p["progress"].as_f64())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress went backwards or repeated"
    );
    // The gateway still answers at once.
    let echo = owner
        .call_tool("fx__echo", json!({"message": "still here"}))
        .await
        .expect("a call after the flood");
    assert_eq!(first_text(echo.result()), "Echo: still here");
    gateway.assert_alive();
}
