//! Hot reload through the real binary: `toolgate serve` with a real config file in a
//! temp dir, edited while it runs. Upstreams are the conformance fixture (an MCP server
//! over streamable HTTP, `fx__*`) and an OpenAPI spec on disk.
//!
//! 1. A tenant's allowlist (and API keys) edited in the file take effect without a
//!    restart: same PID, and an MCP session opened before keeps working.
//! 2. Broken edits (invalid YAML, an unknown field, an empty file) are rejected: the
//!    old allowlist keeps serving and the log says why; the next valid edit applies.
//! 3. SIGHUP reloads (here with `--no-watch`, which leaves edits alone until then).
//! 4. A Kubernetes-style ConfigMap update (the `..data` symlink swapped) is seen.
//! 5. Upstreams added to the file join the catalog, removed ones leave it, and
//!    sessions hear `tools/list_changed`.
//!
//! Every wait is bounded (`wait_for`: 100 ms steps within a deadline).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::{
    Fixture, Gateway, McpSession, TempDir, first_text, hash_key, http, tool_names, wait_for,
};

/// Bound for a file edit to show up (debounce is 300 ms; upstreams connect in ~1 s).
const RELOAD_TIMEOUT: Duration = Duration::from_secs(20);

const KEY: &str = "reload-team-key-0123456789abcdef";
const KEY_NEW: &str = "reload-new-key-0123456789abcdef";

const SIMPLE: &str = "fx__test_simple_text";
const METRICS_TOKEN: &str = "hot-reload-metrics-token-0123456789";
const IMAGE: &str = "fx__test_image_content";

fn fixture_bin() -> &'static str {
    env!("CARGO_BIN_EXE_conformance_fixture")
}

/// A config with the fixture as `fx` and one tenant `team` (also the anonymous
/// tenant, so the raw MCP client needs no credentials) allowed `allow`.
fn tenant_config(fixture: &Fixture, allow: &[&str], keys: &[&str]) -> Value {
    let keys: Vec<String> = keys.iter().map(|k| hash_key(k)).collect();
    json!({
        "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
        "upstreams": {"fx": {"streamable_http": {"url": fixture.url}}},
        "tenants": {"team": {"api_keys": keys, "allow": allow}},
        "anonymous_tenant": "team",
        "metrics": {"token": METRICS_TOKEN},
    })
}

/// Writes the file the way editors do: a new file renamed over the old one.
fn write_config(path: &Path, config: &Value) {
    write_text(path, &serde_json::to_string_pretty(config).expect("json"));
}

fn write_text(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp-edit");
    std::fs::write(&tmp, text).expect("write temp config");
    std::fs::rename(&tmp, path).expect("rename config");
}

/// A gateway on a config file in its own temp dir (kept alive by the returned dir).
async fn start(config: &Value, args: &[&str]) -> (Gateway, TempDir) {
    let dir = TempDir::new("reload");
    let path = dir.path().join("toolgate.yaml");
    write_config(&path, config);
    (Gateway::start_with_file_args(&path, args).await, dir)
}

/// The session's `tools/list` names, sorted.
async fn listed(session: &McpSession) -> Vec<String> {
    let mut names = tool_names(&session.list_tools().await.expect("tools/list"));
    names.sort();
    names
}

/// Waits until the session's `tools/list` satisfies `check`; returns the names.
async fn wait_for_list(
    session: &McpSession,
    what: &str,
    check: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    wait_for(what, RELOAD_TIMEOUT, || async {
        let names = listed(session).await;
        check(&names).then_some(names)
    })
    .await
}

/// `POST /v1/tools/{name}/call` with `key`: the HTTP status and body.
async fn rest_call(gateway: &Gateway, name: &str, key: &str) -> (u16, Value) {
    let response = http()
        .post(gateway.url(&format!("/v1/tools/{name}/call")))
        .bearer_auth(key)
        .json(&json!({"arguments": {}}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("REST call");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Scrapes `/metrics` with the tenant configs' metrics token (the file may hold a
/// broken edit; an open gateway ignores the token).
async fn metrics(gateway: &Gateway) -> String {
    toolgate_e2e::scrape_metrics(gateway, Some(METRICS_TOKEN)).await
}

/// The value of `toolgate_config_reloads_total{outcome=…}` (0 when absent).
async fn reloads(gateway: &Gateway, outcome: &str) -> u64 {
    let prefix = format!("toolgate_config_reloads_total{{outcome=\"{outcome}\"}} ");
    metrics(gateway)
        .await
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn wait_reloads(gateway: &Gateway, outcome: &str, at_least: u64) {
    wait_for(
        &format!("{at_least} reload(s) with outcome {outcome}"),
        RELOAD_TIMEOUT,
        || async { (reloads(gateway, outcome).await >= at_least).then_some(()) },
    )
    .await;
}

/// Waits until the gateway's log holds `needle` (a log line may trail the change it
/// reports); returns the log.
async fn wait_log(gateway: &Gateway, needle: &str) -> String {
    wait_for(
        &format!("'{needle}' in the log"),
        RELOAD_TIMEOUT,
        || async {
            let logs = gateway.proc.logs();
            logs.contains(needle).then_some(logs)
        },
    )
    .await
}

async fn assert_simple_text_works(session: &McpSession) {
    let call = session.call_tool(SIMPLE, json!({})).await.expect("call");
    let result = call.result();
    assert_ne!(result["isError"], true, "{result:#}");
    assert!(!first_text(result).is_empty(), "{result:#}");
}

#[tokio::test]
async fn allowlist_and_keys_edited_in_the_file_apply_without_restart() {
    let fixture = Fixture::start(fixture_bin()).await;
    let (mut gateway, dir) = start(&tenant_config(&fixture, &[SIMPLE], &[KEY]), &[]).await;
    let path = dir.path().join("toolgate.yaml");
    let pid = gateway.proc.pid();

    let session = McpSession::connect(&gateway.mcp_url()).await.expect("init");
    assert_eq!(listed(&session).await, [SIMPLE]);
    let (status, body) = rest_call(&gateway, IMAGE, KEY).await;
    assert_eq!(status, 404, "{body}");

    // Widen the allowlist and add a second key to the tenant.
    write_config(
        &path,
        &tenant_config(&fixture, &[SIMPLE, IMAGE], &[KEY, KEY_NEW]),
    );
    let names = wait_for_list(&session, "the image tool listed", |names| {
        names.iter().any(|n| n == IMAGE)
    })
    .await;
    assert_eq!(names, [IMAGE, SIMPLE]);
    // The session opened before the reload still calls, on both tools.
    assert_simple_text_works(&session).await;
    let image = session.call_tool(IMAGE, json!({})).await.expect("call");
    assert_ne!(image.result()["isError"], true, "{:#}", image.result());
    let (status, body) = rest_call(&gateway, IMAGE, KEY_NEW).await;
    assert_eq!(status, 200, "the new key works at once: {body}");

    // Narrow it again and drop the old key.
    write_config(&path, &tenant_config(&fixture, &[IMAGE], &[KEY_NEW]));
    wait_for_list(&session, "the simple tool gone", |names| names == [IMAGE]).await;
    // Now as if it never existed: the same error as for an unknown name.
    let denied = session.call_tool(SIMPLE, json!({})).await.expect("call");
    let error = denied.error().expect("a JSON-RPC error");
    assert_eq!(error["data"]["code"], "not_found", "{error:#}");
    let (status, body) = rest_call(&gateway, IMAGE, KEY).await;
    assert_eq!(status, 401, "the removed key is refused: {body}");

    gateway.assert_alive();
    assert_eq!(gateway.proc.pid(), pid, "same process");
    assert!(reloads(&gateway, "ok").await >= 2);
    assert_eq!(reloads(&gateway, "rejected").await, 0);
    let logs = wait_log(&gateway, "config reloaded").await;
    assert!(logs.contains("tenants_changed=[\"team\"]"), "{logs}");
}

#[tokio::test]
async fn broken_edits_are_rejected_and_the_old_config_keeps_serving() {
    let fixture = Fixture::start(fixture_bin()).await;
    let good = tenant_config(&fixture, &[SIMPLE], &[KEY]);
    let (mut gateway, dir) = start(&good, &[]).await;
    let path = dir.path().join("toolgate.yaml");
    let session = McpSession::connect(&gateway.mcp_url()).await.expect("init");
    assert_eq!(listed(&session).await, [SIMPLE]);

    // Invalid YAML.
    write_text(&path, "tenants: {team: {allow: [fx__test_image_content\n");
    wait_reloads(&gateway, "rejected", 1).await;
    // A valid document with a field the config does not have.
    let mut unknown = tenant_config(&fixture, &[SIMPLE, IMAGE], &[KEY]);
    unknown["tenants"]["team"]["alow"] = json!(["*"]);
    write_config(&path, &unknown);
    wait_reloads(&gateway, "rejected", 2).await;
    // A pattern that is not a glob.
    write_config(&path, &tenant_config(&fixture, &["fx__[", IMAGE], &[KEY]));
    wait_reloads(&gateway, "rejected", 3).await;

    // The old allowlist still serves, on MCP and REST.
    assert_eq!(listed(&session).await, [SIMPLE]);
    assert_simple_text_works(&session).await;
    let (status, body) = rest_call(&gateway, SIMPLE, KEY).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = rest_call(&gateway, IMAGE, KEY).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(reloads(&gateway, "ok").await, 0);

    let logs = gateway.proc.logs();
    let rejections: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("config reload rejected"))
        .collect();
    assert_eq!(rejections.len(), 3, "{logs}");
    assert!(rejections[1].contains("alow"), "names the field: {logs}");
    assert!(rejections[2].contains("fx__["), "names the pattern: {logs}");
    assert!(!logs.contains(&hash_key(KEY)), "no key hashes in the log");

    // The watcher is still there: a valid edit applies.
    write_config(&path, &tenant_config(&fixture, &[SIMPLE, IMAGE], &[KEY]));
    wait_for_list(&session, "the image tool listed", |names| {
        names.iter().any(|n| n == IMAGE)
    })
    .await;
    gateway.assert_alive();
}

#[tokio::test]
async fn sighup_reloads() {
    let fixture = Fixture::start(fixture_bin()).await;
    let (mut gateway, dir) = start(&tenant_config(&fixture, &[SIMPLE], &[]), &["--no-watch"]).await;
    let path = dir.path().join("toolgate.yaml");
    let session = McpSession::connect(&gateway.mcp_url()).await.expect("init");
    write_config(&path, &tenant_config(&fixture, &[SIMPLE, IMAGE], &[]));

    // Not watched: the edit waits for the signal (well past the debounce).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(listed(&session).await, [SIMPLE]);

    let pid = gateway.proc.pid();
    // The gateway child process this test spawned.
    toolgate_e2e::sys::signal(pid, libc::SIGHUP).expect("kill -HUP");
    wait_for_list(&session, "the image tool listed after SIGHUP", |names| {
        names.iter().any(|n| n == IMAGE)
    })
    .await;
    gateway.assert_alive();
    assert_eq!(gateway.proc.pid(), pid);
    wait_log(&gateway, "trigger=\"SIGHUP\"").await;
}

#[tokio::test]
async fn a_configmap_symlink_swap_is_picked_up() {
    use std::os::unix::fs::symlink;
    let fixture = Fixture::start(fixture_bin()).await;
    // The layout the kubelet gives a mounted ConfigMap:
    //   toolgate.yaml -> ..data/toolgate.yaml, ..data -> ..2026_v1
    let dir = TempDir::new("configmap");
    let root = dir.path();
    let v1 = root.join("..2026_v1");
    std::fs::create_dir(&v1).expect("mkdir v1");
    write_config(
        &v1.join("toolgate.yaml"),
        &tenant_config(&fixture, &[SIMPLE], &[]),
    );
    symlink("..2026_v1", root.join("..data")).expect("..data link");
    symlink("..data/toolgate.yaml", root.join("toolgate.yaml")).expect("file link");
    let mut gateway = Gateway::start_with_file(&root.join("toolgate.yaml")).await;
    let session = McpSession::connect(&gateway.mcp_url()).await.expect("init");
    assert_eq!(listed(&session).await, [SIMPLE]);

    // An update: a new timestamped dir, a new link renamed over `..data`, the old
    // dir removed.
    let v2 = root.join("..2026_v2");
    std::fs::create_dir(&v2).expect("mkdir v2");
    write_config(
        &v2.join("toolgate.yaml"),
        &tenant_config(&fixture, &[SIMPLE, IMAGE], &[]),
    );
    symlink("..2026_v2", root.join("..data_tmp")).expect("new link");
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap ..data");
    std::fs::remove_dir_all(&v1).expect("remove v1");

    wait_for_list(&session, "the image tool listed after the swap", |names| {
        names.iter().any(|n| n == IMAGE)
    })
    .await;
    assert_simple_text_works(&session).await;
    gateway.assert_alive();
}

#[tokio::test]
async fn upstreams_added_and_removed_in_the_file() {
    let fixture = Fixture::start(fixture_bin()).await;
    let open = |upstreams: Value| {
        json!({
            "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
            "upstreams": upstreams,
        })
    };
    let fx = json!({"streamable_http": {"url": fixture.url}});
    let (mut gateway, dir) = start(&open(json!({"fx": fx})), &[]).await;
    let path = dir.path().join("toolgate.yaml");
    let spec = dir.path().join("things.json");
    std::fs::write(
        &spec,
        json!({
            "openapi": "3.0.3",
            "info": {"title": "Things", "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {"/things": {"get": {
                "operationId": "listThings",
                "summary": "List things",
                "responses": {"200": {"description": "the things"}}
            }}}
        })
        .to_string(),
    )
    .expect("write spec");

    let session = McpSession::connect(&gateway.mcp_url()).await.expect("init");
    let (tap, mut notes) = tokio::sync::mpsc::unbounded_channel();
    let (status, _stream) = session.open_get_stream(tap).await.expect("GET stream");
    assert_eq!(status, 200);
    let before = listed(&session).await;
    assert!(before.iter().all(|n| n.starts_with("fx__")), "{before:?}");
    assert!(before.iter().any(|n| n == SIMPLE), "{before:?}");

    // Add a second MCP upstream and an OpenAPI one (a relative spec path).
    write_config(
        &path,
        &open(json!({"fx": fx, "fx2": fx, "things": {"openapi": {"spec_path": "things.json"}}})),
    );
    let names = wait_for_list(&session, "fx2 and things in the catalog", |names| {
        names.iter().any(|n| n == "fx2__test_simple_text")
            && names.iter().any(|n| n.starts_with("things__"))
    })
    .await;
    assert!(names.iter().any(|n| n == SIMPLE), "fx stays: {names:?}");
    let call = session
        .call_tool("fx2__test_simple_text", json!({}))
        .await
        .expect("call");
    assert_ne!(call.result()["isError"], true, "{:#}", call.result());
    let note = wait_for(
        "tools/list_changed on the GET stream",
        RELOAD_TIMEOUT,
        || {
            let got = notes.try_recv().ok();
            async move { got.filter(|m| m["method"] == "notifications/tools/list_changed") }
        },
    )
    .await;
    assert!(note.get("id").is_none(), "{note}");

    // Remove the first one: its tools leave, the others stay.
    write_config(
        &path,
        &open(json!({"fx2": fx, "things": {"openapi": {"spec_path": "things.json"}}})),
    );
    let names = wait_for_list(&session, "fx gone", |names| {
        !names.iter().any(|n| n.starts_with("fx__"))
    })
    .await;
    assert!(
        names.iter().any(|n| n == "fx2__test_simple_text")
            && names.iter().any(|n| n.starts_with("things__")),
        "{names:?}"
    );
    let upstreams = gateway.upstreams().await;
    let mut listed_upstreams: Vec<&str> = upstreams
        .as_array()
        .expect("upstreams")
        .iter()
        .filter_map(|u| u["name"].as_str())
        .collect();
    listed_upstreams.sort();
    assert_eq!(listed_upstreams, ["fx2", "things"], "{upstreams}");
    let call = session
        .call_tool("fx2__test_simple_text", json!({}))
        .await
        .expect("call");
    assert_ne!(call.result()["isError"], true, "{:#}", call.result());
    gateway.assert_alive();
    wait_log(&gateway, "upstreams_removed=[\"fx\"]").await;
}
