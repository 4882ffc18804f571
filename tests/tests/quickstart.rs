//! The README's quick start works as written: `toolgate serve` on its embedded
//! defaults (config/quickstart.yaml: server-everything through `npx`) serves the
//! prefixed catalog at `/mcp`, and calls go through; `--config config/quickstart.yaml`
//! serves the same.

use serde_json::json;
use toolgate_e2e::{Gateway, McpSession, first_text, heavy_lock, tool_names, workspace_root};

fn npx_available() -> bool {
    let found = std::process::Command::new("npx")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        let msg = "npx (Node.js) is not on PATH; the quick start needs it";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true: {msg}");
        }
        eprintln!("NOTICE: skipping test: {msg}");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_config_serves_server_everything() {
    if !npx_available() {
        return;
    }
    let _serial = heavy_lock().await;
    let mut embedded = Gateway::start_embedded_defaults().await;
    check_quickstart(&mut embedded).await;
    drop(embedded);
    let mut from_file =
        Gateway::start_with_file(&workspace_root().join("config/quickstart.yaml")).await;
    check_quickstart(&mut from_file).await;
}

async fn check_quickstart(gateway: &mut Gateway) {
    gateway
        .wait_upstream_state("everything", "healthy", std::time::Duration::from_secs(60))
        .await;
    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let names = tool_names(&session.list_tools().await.expect("tools/list"));
    for want in ["everything__echo", "everything__get-sum"] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    let ex = session
        .call_tool("everything__get-sum", json!({"a": 2, "b": 40}))
        .await
        .expect("call");
    assert!(first_text(ex.result()).contains("42"), "{:?}", ex.response);
    gateway.assert_alive();
}
