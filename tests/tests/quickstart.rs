//! The README's quick start works as written: `toolgate serve` on its embedded
//! defaults (config/quickstart.yaml: server-everything through `npx`) serves the
//! prefixed catalog at `/mcp`, and calls go through; `--config config/quickstart.yaml`
//! serves the same.

use serde_json::json;
use toolgate_e2e::{
    Gateway, McpSession, example_succeeded, first_text, heavy_lock, tool_names, workspace_root,
};

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

/// The README's Python client example, run as written with the pinned `mcp` 2.3
/// (only the gateway's URL differs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_python_example_runs_as_written() {
    let deps = toolgate_e2e::require!(toolgate_e2e::NodeDeps::find());
    let py = toolgate_e2e::require!(toolgate_e2e::python());
    let _serial = heavy_lock().await;
    let example = readme_block("## Connecting clients", "```python\n");
    let mut gateway = Gateway::start(json!({
        "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
        "upstreams": {"everything": toolgate_e2e::everything_stdio_upstream(
            &deps, &toolgate_e2e::unique_marker("readme"))}
    }))
    .await;
    let script = example.replace("http://127.0.0.1:8080/mcp", &gateway.mcp_url());
    assert_ne!(
        script, example,
        "the example names http://127.0.0.1:8080/mcp"
    );
    let output = run_python(py, &script, &[]).await;
    let (stdout, stderr) = example_succeeded(&output);
    assert!(
        stdout.contains("Echo: hi"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("everything__simple-prompt"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The client warns on stderr when it does not like an answer (e.g. a DELETE
    // answered 202); a clean run warns about nothing.
    assert!(!stderr.contains("failed"), "stderr:\n{stderr}");
    gateway.assert_alive();
}

/// The README's Python example as a tenant, run as written: its config block (the
/// tenant, the key's hash from the environment) added to a gateway over server-everything,
/// its script run with the key (only the gateway's URL differs). The same script with
/// a wrong key is refused and calls nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_tenant_python_example_runs_as_written() {
    let deps = toolgate_e2e::require!(toolgate_e2e::NodeDeps::find());
    let py = toolgate_e2e::require!(toolgate_e2e::python());
    let _serial = heavy_lock().await;
    let key = "acme-readme-key-0123456789";
    let tenants: serde_json::Value =
        serde_norway::from_str(&readme_block("**Python, as a tenant.**", "```yaml\n"))
            .expect("the YAML block");
    let example = readme_block("**Python, as a tenant.**", "```python\n");
    let mut config = json!({
        "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
        "upstreams": {"everything": toolgate_e2e::everything_stdio_upstream(
            &deps, &toolgate_e2e::unique_marker("readme-tenant"))}
    });
    for (field, value) in tenants.as_object().expect("a mapping") {
        config[field] = value.clone();
    }
    assert!(
        config["tenants"].is_object(),
        "the block configures tenants"
    );
    let hash = toolgate_e2e::hash_key(key);
    let mut gateway = Gateway::start_with_env(config, &[("ACME_KEY_HASH", hash.as_str())]).await;
    let script = example.replace("http://127.0.0.1:8080/mcp", &gateway.mcp_url());
    assert_ne!(
        script, example,
        "the example names http://127.0.0.1:8080/mcp"
    );

    let output = run_python(py.clone(), &script, &[("ACME_API_KEY", key)]).await;
    let (stdout, stderr) = example_succeeded(&output);
    assert!(
        stdout.contains("Echo: hi"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );

    let refused = run_python(py, &script, &[("ACME_API_KEY", "not-the-key-0123456789")]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr),
    );
    assert!(
        !refused.status.success() && !stdout.contains("Echo: hi"),
        "a wrong key went through:\n{stdout}\n{stderr}"
    );
    assert!(stderr.contains("invalid credentials"), "stderr:\n{stderr}");
    gateway.assert_alive();
}

/// The README's MCP Inspector CLI example, run as written with the pinned inspector
/// (only the gateway's URL differs; npx finds the installed package, offline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_inspector_cli_example_runs_as_written() {
    let deps = toolgate_e2e::require!(toolgate_e2e::NodeDeps::find());
    if !npx_available() {
        return;
    }
    let block = readme_block("**MCP Inspector CLI**", "```sh\n");
    let example = block.trim();
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": toolgate_e2e::everything_stdio_upstream(
            &deps, &toolgate_e2e::unique_marker("readme-inspector"))}
    }))
    .await;
    let command = example.replace("http://127.0.0.1:8080/mcp", &gateway.mcp_url());
    assert_ne!(
        command, example,
        "the example names http://127.0.0.1:8080/mcp"
    );
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new("sh")
            .args(["-c", &command])
            .current_dir(workspace_root())
            .env("npm_config_offline", "true")
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the inspector finishes within 120 s")
    .expect("run the inspector");
    let (stdout, stderr) = example_succeeded(&output);
    let listed: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("the inspector printed no JSON ({e}):\n{stdout}\n{stderr}"));
    let names = tool_names(&listed);
    for want in ["everything__echo", "everything__get-sum"] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    gateway.assert_alive();
}

/// The first `fence` block (e.g. "```python\n") after `marker` in the README.
fn readme_block(marker: &str, fence: &str) -> String {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README");
    let section = &readme[readme.find(marker).expect("the section")..];
    let start = section.find(fence).expect("a code block") + fence.len();
    section[start..start + section[start..].find("```").expect("its end")].to_owned()
}

/// Runs `script` with the venv's Python and `env` added, for at most 120 s.
async fn run_python(
    py: std::path::PathBuf,
    script: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    let dir = toolgate_e2e::TempDir::new("readme-python");
    let path = dir.path().join("example.py");
    std::fs::write(&path, script).unwrap();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(py)
            .arg(&path)
            .envs(env)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the example ran over 120 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}
