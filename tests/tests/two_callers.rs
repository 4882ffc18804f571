//! Two tenants' calls overlap on one upstream that asks for sampling during each call
//! and, after its result, logs and reports progress on the caller's token: each
//! sampling request and each late progress frame reaches its own caller only, and the
//! late log line — which names no call — reaches no one (two tenants share the
//! upstream, so nothing is guessed). 100 runs.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use toolgate_e2e::mcp_http::McpSession;
use toolgate_e2e::{
    Gateway, NodeDeps, Proc, first_text, free_port, hash_key, require, wait_for, workspace_root,
};

const KEY_A: &str = "two-callers-tenant-a";
const KEY_B: &str = "two-callers-tenant-b";
const RUNS: usize = 100;

async fn start_fixture(deps: &NodeDeps) -> (Proc, String) {
    let port = free_port();
    let mut cmd = std::process::Command::new(deps.node());
    cmd.arg(workspace_root().join("tests/fixtures/two_callers/server.mjs"))
        .env("PORT", port.to_string());
    let proc = Proc::spawn("two-callers", &mut cmd);
    wait_for(
        "the two-callers fixture",
        Duration::from_secs(30),
        || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        },
    )
    .await;
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

/// One call of `fx__ask` as `who`, answering the sampling request it causes; returns
/// the result's text and every frame of the call's own stream.
async fn ask(session: &McpSession, who: &str, id: i64) -> (String, Vec<Value>) {
    let (tap, mut frames) = unbounded_channel::<Value>();
    let answering = {
        let session = session.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(frame) = frames.recv().await {
                if frame["method"] == "sampling/createMessage" {
                    let asked = frame["params"]["messages"][0]["content"]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let answer = json!({"jsonrpc": "2.0", "id": frame["id"], "result": {
                        "role": "assistant",
                        "content": {"type": "text", "text": format!("sampled {asked}")},
                        "model": "test-model",
                        "stopReason": "endTurn"
                    }});
                    let posted = session
                        .send_body(
                            answer.to_string().into_bytes(),
                            None,
                            None,
                            Duration::from_secs(30),
                        )
                        .await
                        .expect("POST the sampling answer");
                    assert_eq!(posted.exchange.status, 202, "{posted:#?}");
                }
                seen.push(frame);
            }
            seen
        })
    };
    let exchange = session
        .request_with_id(
            json!(id),
            "tools/call",
            json!({"name": "fx__ask", "arguments": {"who": who},
                   "_meta": {"progressToken": format!("token-{who}")}}),
            Some(tap),
            Duration::from_secs(60),
        )
        .await
        .expect("the call answers");
    let text = first_text(exchange.result());
    let seen = answering.await.expect("answering task");
    (text, seen)
}

/// Every frame that arrived on a GET stream so far.
fn drain(stream: &mut UnboundedReceiver<Value>, into: &mut Vec<Value>) {
    while let Ok(frame) = stream.try_recv() {
        into.push(frame);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_calls_of_two_tenants_each_get_only_their_own_requests_and_late_frames() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let (_fixture, url) = start_fixture(&deps).await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"fx": {"streamable_http": {"url": url}}},
        "tenants": {
            "a": {"api_keys": [hash_key(KEY_A)], "allow": ["fx__*"]},
            "b": {"api_keys": [hash_key(KEY_B)], "allow": ["fx__*"]}
        }
    }))
    .await;
    let mcp = gateway.mcp_url();
    let sampling = json!({"sampling": {}});
    let a = McpSession::connect_as(&mcp, KEY_A, sampling.clone())
        .await
        .expect("tenant a");
    let b = McpSession::connect_as(&mcp, KEY_B, sampling)
        .await
        .expect("tenant b");
    let (tap_a, mut get_a) = unbounded_channel();
    let (tap_b, mut get_b) = unbounded_channel();
    let (_, _stream_a) = a.open_get_stream(tap_a).await.expect("GET a");
    let (_, _stream_b) = b.open_get_stream(tap_b).await.expect("GET b");

    let (mut late_a, mut late_b) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        let (who_a, who_b) = (format!("A{run}"), format!("B{run}"));
        let id = 100 + run as i64;
        let ((text_a, frames_a), (text_b, frames_b)) =
            tokio::join!(ask(&a, &who_a, id), ask(&b, &who_b, id));
        // Progress the upstream sent just after its result may still overtake the
        // result (they come on two connections); it reached its own caller either way.
        late_a.extend(
            frames_a
                .iter()
                .filter(|f| f["method"] == "notifications/progress")
                .cloned(),
        );
        late_b.extend(
            frames_b
                .iter()
                .filter(|f| f["method"] == "notifications/progress")
                .cloned(),
        );
        for (who, text, frames) in [(&who_a, text_a, frames_a), (&who_b, text_b, frames_b)] {
            assert_eq!(text, format!("{who} got: sampled for {who}"), "run {run}");
            let requests: Vec<&Value> = frames
                .iter()
                .filter(|f| f["method"] == "sampling/createMessage")
                .collect();
            assert_eq!(requests.len(), 1, "run {run}, {who}: {frames:#?}");
            for frame in &frames {
                let text = frame.to_string();
                let other = if who.starts_with('A') { "B" } else { "A" };
                assert!(
                    !text.contains(&format!("for {other}")) && !text.contains("late log"),
                    "run {run}: {who}'s call stream carried {frame}"
                );
            }
        }
        drain(&mut get_a, &mut late_a);
        drain(&mut get_b, &mut late_b);
    }

    // Every late progress frame (3 per call) reaches its own session: on its GET
    // stream (or, when it overtook the result, on the call's own stream).
    let progress = |frames: &[Value]| {
        frames
            .iter()
            .filter(|f| f["method"] == "notifications/progress")
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    for _ in 0..600 {
        drain(&mut get_a, &mut late_a);
        drain(&mut get_b, &mut late_b);
        if progress(&late_a) >= 3 * RUNS && progress(&late_b) >= 3 * RUNS {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "late progress frames within 60 s: {} for a, {} for b, of {} each; gateway log:\n{}",
            progress(&late_a),
            progress(&late_b),
            3 * RUNS,
            gateway.proc.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A little longer: anything misrouted would arrive now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drain(&mut get_a, &mut late_a);
    drain(&mut get_b, &mut late_b);
    for (own, other, frames) in [("A", "B", &late_a), ("B", "A", &late_b)] {
        assert_eq!(progress(frames), 3 * RUNS, "tenant {own}");
        for frame in frames.iter() {
            let text = frame.to_string();
            assert!(
                !text.contains(&format!("token-{other}"))
                    && !text.contains(&format!("late {other}")),
                "tenant {own}'s stream got the other tenant's frame: {frame}"
            );
            assert!(
                !text.contains("late log"),
                "a log line that names no call was guessed to tenant {own}: {frame}"
            );
        }
        // Each call's own frames, in order.
        for run in 0..RUNS {
            let token = json!(format!("token-{own}{run}"));
            let values: Vec<f64> = frames
                .iter()
                .filter(|f| f["params"]["progressToken"] == token)
                .filter_map(|f| f["params"]["progress"].as_f64())
                .collect();
            assert_eq!(values, [1.0, 2.0, 3.0], "tenant {own}, run {run}");
        }
    }
    println!(
        "{RUNS} runs × 2 tenants: every sampling request and late progress frame reached its own caller"
    );
    gateway.assert_alive();
}
