//! Tenants on every MCP path, through the real binary with server-everything mounted
//! over stdio (`everything__*`).
//!
//! A tenant's allowed set is its allow patterns minus its deny patterns; a session's
//! visible set is the tenant's initial set plus what it expanded. A tool outside the
//! allowed set must look exactly like a tool that does not exist, on `tools/list`,
//! `tools/call`, `tool_expand_tools`, `tool_search` and `tool_invoke`, in both protocol
//! eras (2025-11-25 sessions, 2026-07-28 sessionless). Also: expansion and
//! `list_changed`, the partial-success answer, a real client (PyPI `mcp`), idle
//! expiry, concurrent expansions, 401 / 429, the anonymous tenant, and sessions that
//! belong to the tenant that opened them.
//!
//! The test speaks raw JSON-RPC over HTTP (the shared raw client, with an
//! `Authorization` header) so it can compare error objects byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, RpcExchange, RpcExchangeWithHeaders, TempDir, assert_tool_error,
    everything_stdio_upstream, first_text, hash_key, http, python, require, run_python,
    toolgate_bin, unique_marker,
};

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";
use toolgate_e2e::PROTOCOL_TOOLS;

const KEY_A: &str = "tenant-a-key-0123456789abcdef";
const KEY_B: &str = "tenant-b-key-0123456789abcdef";
const KEY_SEED: &str = "tenant-seed-key-0123456789abcdef";
const KEY_C: &str = "tenant-c-key-0123456789abcdef";
const KEY_LIMITED: &str = "tenant-limited-key-0123456789abcdef";
const KEY_WRONG: &str = "not-a-configured-key-0123456789";

const ECHO: &str = "everything__echo";
const SUM: &str = "everything__get-sum";
const IMAGE: &str = "everything__get-tiny-image";
const ENV: &str = "everything__get-env";
/// A name that exists nowhere, shaped like a real one.
const NOWHERE: &str = "everything__no-such-tool";

// ---------------------------------------------------------------------------------
// The shared raw MCP client, with credentials.
// ---------------------------------------------------------------------------------

/// Connections of this test: the shared raw client, reading each answer to its end
/// (bounded: 60 s) so error objects and whole bodies can be compared.
struct Conn;

impl Conn {
    fn bare(url: &str, key: Option<&str>, protocol: &'static str) -> McpSession {
        let mut c = McpSession::bare(url)
            .with_key(key)
            .with_client_name("toolgate-e2e-tenants")
            .with_timeout(Duration::from_secs(60))
            .reading_to_end();
        c.protocol = protocol.to_string();
        c
    }

    /// A sessionless 2026-07-28 connection (nothing to open).
    fn modern(url: &str, key: Option<&str>) -> McpSession {
        Conn::bare(url, key, MODERN)
    }

    /// A 2025-11-25 session: `initialize` + `notifications/initialized`.
    async fn legacy(url: &str, key: Option<&str>) -> McpSession {
        let mut c = Conn::bare(url, key, LEGACY);
        let (init, initialized) = c
            .handshake(json!({}))
            .await
            .unwrap_or_else(|e| panic!("initialize: {e:#}"));
        assert_eq!(init.status, 200, "initialize: {init:#?}");
        assert_eq!(
            init.result()["protocolVersion"],
            LEGACY,
            "initialize: {init:#?}"
        );
        assert!(
            c.session_id.is_some(),
            "initialize without Mcp-Session-Id: {init:#?}"
        );
        let st = initialized.expect("notifications/initialized sent after a result");
        assert!((200..300).contains(&st), "notifications/initialized: {st}");
        c
    }
}

/// The calls of this test, on the shared client.
trait TenantCalls {
    async fn list(&self) -> Vec<String>;
    async fn list_defs(&self) -> Vec<Value>;
    async fn call(&self, name: &str, arguments: Value) -> RpcExchangeWithHeaders;
    async fn expand(&self, names: &[&str]) -> RpcExchangeWithHeaders;
    async fn search(&self, query: &str) -> RpcExchangeWithHeaders;
    async fn invoke(&self, name: &str, arguments: Value) -> RpcExchangeWithHeaders;
    async fn get_stream(&self, tap: UnboundedSender<Value>) -> (u16, tokio::task::JoinHandle<()>);
}

impl TenantCalls for McpSession {
    async fn list(&self) -> Vec<String> {
        let r = self.rpc("tools/list", json!({})).await;
        assert_eq!(r.status, 200, "tools/list: {r:#?}");
        names_of(&r.result()["tools"])
    }

    /// The full `tools` array of `tools/list`.
    async fn list_defs(&self) -> Vec<Value> {
        let r = self.rpc("tools/list", json!({})).await;
        r.result()["tools"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("tools/list without tools: {r:#?}"))
    }

    async fn call(&self, name: &str, arguments: Value) -> RpcExchangeWithHeaders {
        self.rpc("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    async fn expand(&self, names: &[&str]) -> RpcExchangeWithHeaders {
        self.call("tool_expand_tools", json!({"tool_names": names}))
            .await
    }

    async fn search(&self, query: &str) -> RpcExchangeWithHeaders {
        self.call("tool_search", json!({"query": query, "limit": 50}))
            .await
    }

    async fn invoke(&self, name: &str, arguments: Value) -> RpcExchangeWithHeaders {
        self.call("tool_invoke", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// Opens the session's GET stream; its messages go to `tap`.
    async fn get_stream(&self, tap: UnboundedSender<Value>) -> (u16, tokio::task::JoinHandle<()>) {
        self.open_get_stream(tap).await.expect("GET /mcp")
    }
}

/// The `structuredContent` of a successful protocol-tool result.
trait Structured {
    fn structured(&self) -> &Value;
}

impl Structured for RpcExchange {
    fn structured(&self) -> &Value {
        let result = self.result();
        assert_ne!(
            result["isError"], true,
            "tool result is an error: {result:#}"
        );
        let sc = &result["structuredContent"];
        assert!(sc.is_object(), "no structuredContent: {result:#}");
        // The text block carries the same JSON.
        let text: Value = serde_json::from_str(&first_text(result))
            .unwrap_or_else(|e| panic!("text block is not JSON ({e}): {result:#}"));
        assert_eq!(&text, sc, "text and structuredContent differ");
        sc
    }
}

fn names_of(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .unwrap_or_else(|| panic!("not a tool array: {tools}"))
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .unwrap_or_else(|| panic!("tool without name: {t}"))
                .to_string()
        })
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("not a string: {s}"))
                .to_string()
        })
        .collect()
}

fn set<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> BTreeSet<String> {
    items.into_iter().map(|s| s.as_ref().to_string()).collect()
}

/// The error object with every occurrence of `name` replaced by a placeholder.
fn normalized(error: &Value, name: &str) -> Value {
    let text = error.to_string().replace(name, "<TOOL>");
    serde_json::from_str(&text).expect("normalized error is JSON")
}

/// Waits (bounded in time and count) for `notifications/tools/list_changed`.
async fn wait_list_changed(rx: &mut UnboundedReceiver<Value>, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    for _ in 0..1000 {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(frame)) if frame["method"] == "notifications/tools/list_changed" => {
                return true;
            }
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return false,
        }
    }
    false
}

// ---------------------------------------------------------------------------------
// Gateways.
// ---------------------------------------------------------------------------------

/// The whole catalog, as the gateway without tenants serves it (`toolgate tools`):
/// the oracle for every allowed set below.
fn full_catalog(deps: &NodeDeps) -> BTreeSet<String> {
    let dir = TempDir::new("tenants-catalog");
    let config = dir.path().join("toolgate.yaml");
    let cfg = json!({
        "startup_timeout": "60s",
        "upstreams": {"everything": everything_stdio_upstream(deps, &unique_marker("catalog"))}
    });
    std::fs::write(&config, cfg.to_string()).unwrap();
    let out = std::process::Command::new(toolgate_bin())
        .args(["tools", "--format", "json", "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run toolgate tools");
    assert!(out.status.success(), "toolgate tools: {out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("toolgate tools JSON");
    let names = set(names_of(&v));
    for t in [ECHO, SUM, IMAGE, ENV] {
        assert!(names.contains(t), "{t} missing from the catalog {names:?}");
    }
    assert!(!names.contains(NOWHERE));
    names
}

/// The gateway with the tenants of most tests.
async fn start_gateway(deps: &NodeDeps, extra: Value) -> Gateway {
    let mut cfg = json!({
        "startup_timeout": "60s",
        "call_timeout": "60s",
        "health": {"interval": "5s", "timeout": "5s"},
        "upstreams": {"everything": everything_stdio_upstream(deps, &unique_marker("tenants"))},
        "tenants": {
            "a": {
                "api_keys": [hash_key(KEY_A)],
                "allow": ["everything__*"],
                "deny": [ENV]
            },
            "b": {
                "api_keys": [hash_key(KEY_B)],
                "allow": [ECHO, SUM]
            },
            "seed": {
                "api_keys": [hash_key(KEY_SEED)],
                "allow": [ECHO, SUM, IMAGE],
                "initial": [SUM]
            },
            "c": {
                "api_keys": [hash_key(KEY_C)],
                "allow": ["everything__*"],
                "initial": []
            },
            "limited": {
                "api_keys": [hash_key(KEY_LIMITED)],
                "allow": [ECHO],
                "rate_limit": {"per_second": 1, "burst": 3}
            }
        }
    });
    if let (Some(base), Some(extra)) = (cfg.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    Gateway::start(cfg).await
}

/// Calls of every allowed-name-bearing answer field of `tool_expand_tools`.
fn expand_names_out(sc: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for field in [
        "expanded_tools",
        "already_selected_tools",
        "available_expandable_tools",
    ] {
        out.extend(strings(&sc[field]));
    }
    out.extend(names_of(&sc["definitions"]));
    if let Some(m) = sc.get("did_you_mean") {
        let m = m.as_object().unwrap_or_else(|| panic!("did_you_mean: {m}"));
        out.extend(
            m.values()
                .map(|v| v.as_str().expect("did_you_mean value").to_string()),
        );
    }
    out
}

// ---------------------------------------------------------------------------------
// 1. Two tenants × every path × both protocol versions: zero leaks.
// ---------------------------------------------------------------------------------

/// Every path for one tenant in one protocol era.
async fn check_no_leaks(
    conn: &McpSession,
    label: &str,
    allowed: &BTreeSet<String>,
    hidden: &[String],
) {
    let protocol = set(PROTOCOL_TOOLS);

    // tools/list: the protocol tools and this tenant's initial set (all of it: the
    // allowed sets here hold at most sessions.initial_max_tools tools), nothing else.
    let listed = conn.list().await;
    assert_eq!(
        listed.len(),
        set(&listed).len(),
        "{label}: duplicates in {listed:?}"
    );
    for n in &listed {
        assert!(
            protocol.contains(n) || allowed.contains(n),
            "{label}: tools/list leaks {n}: {listed:?}"
        );
    }
    let want: BTreeSet<String> = protocol.union(allowed).cloned().collect();
    assert_eq!(set(&listed), want, "{label}: tools/list");

    // An allowed tool works (the paths below are not failing for another reason).
    let ok = conn.call(ECHO, json!({"message": label})).await;
    assert_ne!(ok.result()["isError"], true, "{label}: echo: {ok:#?}");
    assert_eq!(first_text(ok.result()), format!("Echo: {label}"), "{label}");

    // tools/call: a hidden name gets exactly the unknown name's error.
    let unknown = conn.call(NOWHERE, json!({})).await;
    let unknown_error = unknown.rpc_error();
    assert_eq!(unknown_error["code"], -32602, "{label}: {unknown:#?}");
    assert!(
        unknown_error["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown tool")),
        "{label}: {unknown_error}"
    );
    for h in hidden {
        let r = conn.call(h, json!({})).await;
        assert_eq!(r.status, unknown.status, "{label}: HTTP status for {h}");
        assert_eq!(
            normalized(r.rpc_error(), h),
            normalized(unknown_error, NOWHERE),
            "{label}: tools/call {h} differs from an unknown tool"
        );
    }

    // tool_invoke: the same.
    let inv_unknown = conn.invoke(NOWHERE, json!({})).await;
    let inv_unknown_error = normalized(inv_unknown.rpc_error(), NOWHERE);
    assert_eq!(
        inv_unknown_error,
        normalized(unknown_error, NOWHERE),
        "{label}: tool_invoke of an unknown name vs tools/call"
    );
    for h in hidden {
        let r = conn.invoke(h, json!({})).await;
        assert_eq!(
            normalized(r.rpc_error(), h),
            inv_unknown_error,
            "{label}: tool_invoke {h} differs from an unknown tool: {r:#?}"
        );
    }
    let inv_ok = conn.invoke(ECHO, json!({"message": "via invoke"})).await;
    assert_eq!(
        first_text(inv_ok.result()),
        "Echo: via invoke",
        "{label}: tool_invoke echo: {inv_ok:#?}"
    );

    // tool_expand_tools with the hidden names: all invalid, none anywhere else.
    let mut asked: Vec<&str> = hidden.iter().map(String::as_str).collect();
    asked.push(NOWHERE);
    let r = conn.expand(&asked).await;
    let sc = r.structured();
    assert_eq!(
        set(strings(&sc["invalid_tools"])),
        set(&asked),
        "{label}: invalid_tools: {sc:#}"
    );
    assert_eq!(sc["success"], false, "{label}: {sc:#}");
    let out = expand_names_out(sc);
    for h in hidden {
        assert!(
            !out.contains(h),
            "{label}: tool_expand_tools leaks {h}: {sc:#}"
        );
    }
    for n in &out {
        assert!(
            allowed.contains(n),
            "{label}: tool_expand_tools names {n} outside the allowed set: {sc:#}"
        );
    }
    // The same names one at a time (did_you_mean differs per name).
    for h in hidden {
        let r = conn.expand(&[h]).await;
        let sc = r.structured();
        assert_eq!(
            strings(&sc["invalid_tools"]),
            vec![h.clone()],
            "{label}: {sc:#}"
        );
        let out = expand_names_out(sc);
        assert!(
            out.is_subset(allowed),
            "{label}: tool_expand_tools [{h}] answers with names outside the allowed set: {sc:#}"
        );
    }
    // A mix: the allowed name is accepted, the hidden ones stay invalid.
    let mut mix = asked.clone();
    mix.push(ECHO);
    let r = conn.expand(&mix).await;
    let sc = r.structured();
    assert_eq!(sc["success"], true, "{label}: {sc:#}");
    assert_eq!(
        set(strings(&sc["invalid_tools"])),
        set(&asked),
        "{label}: {sc:#}"
    );
    assert!(expand_names_out(sc).is_subset(allowed), "{label}: {sc:#}");

    // tool_search: only allowed names, whatever the words.
    for query in [
        "environment variables",
        "get env",
        "get-env",
        "image",
        "long running operation",
        "sum two numbers",
        "echo",
        "everything",
        "structured content",
        "annotated message",
        "resource",
    ] {
        let r = conn.search(query).await;
        let sc = r.structured();
        let results = sc["results"]
            .as_array()
            .unwrap_or_else(|| panic!("{label}: search {query}: {sc:#}"));
        for hit in results {
            let n = hit["name"].as_str().unwrap_or_default();
            assert!(
                allowed.contains(n),
                "{label}: tool_search {query:?} returns {n} outside the allowed set: {sc:#}"
            );
        }
        assert!(
            !hidden.iter().any(|h| r.body.contains(h.as_str())),
            "{label}: tool_search {query:?} mentions a hidden tool: {sc:#}"
        );
    }
    // Nothing of the above changed what the tenant sees.
    assert_eq!(
        set(conn.list().await),
        want,
        "{label}: tools/list after the probes"
    );

    let r = conn.search("echo").await;
    assert!(
        names_of(&r.structured()["results"]).contains(&ECHO.to_string()),
        "{label}: search 'echo' does not find {ECHO}: {:#}",
        r.structured()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_every_path_both_protocols_zero_leaks() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let catalog = full_catalog(&deps);
    let mut gw = start_gateway(&deps, json!({})).await;
    let url = gw.mcp_url();

    let allowed_a: BTreeSet<String> = catalog.iter().filter(|n| *n != ENV).cloned().collect();
    let allowed_b = set([ECHO, SUM]);
    assert!(
        allowed_a.len() <= 20,
        "tenant a's initial set is its whole allowed set: {allowed_a:?}"
    );
    // Tenant a guesses b's names (all allowed to a too) and the denied one; tenant b
    // guesses a's names.
    let hidden_a = vec![ENV.to_string()];
    let hidden_b: Vec<String> = catalog.difference(&allowed_b).cloned().collect();
    assert!(hidden_b.contains(&IMAGE.to_string()) && hidden_b.contains(&ENV.to_string()));

    // Positive control: a tenant allowed everything does find get-env by these words,
    // so the absence below means filtering, not a weak search.
    let c = Conn::modern(&url, Some(KEY_C));
    let r = c.search("environment variables").await;
    assert!(
        names_of(&r.structured()["results"]).contains(&ENV.to_string()),
        "control: tenant c's search for 'environment variables' misses {ENV}: {:#}",
        r.structured()
    );

    for (tenant, key, allowed, hidden) in [
        ("a", KEY_A, &allowed_a, &hidden_a),
        ("b", KEY_B, &allowed_b, &hidden_b),
    ] {
        let legacy = Conn::legacy(&url, Some(key)).await;
        check_no_leaks(
            &legacy,
            &format!("tenant {tenant} {LEGACY}"),
            allowed,
            hidden,
        )
        .await;
        let modern = Conn::modern(&url, Some(key));
        check_no_leaks(
            &modern,
            &format!("tenant {tenant} {MODERN}"),
            allowed,
            hidden,
        )
        .await;
    }
    gw.assert_alive();
}

// ---------------------------------------------------------------------------------
// 2. The partial-success example; expansion in both eras.
// ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_success_expansion_and_list_changed() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let mut gw = start_gateway(&deps, json!({})).await;
    let url = gw.mcp_url();
    let protocol = set(PROTOCOL_TOOLS);
    let with = |names: &[&str]| -> BTreeSet<String> {
        protocol
            .iter()
            .cloned()
            .chain(names.iter().map(|s| s.to_string()))
            .collect()
    };

    // --- 2025-11-25 session ---
    let s = Conn::legacy(&url, Some(KEY_SEED)).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (status, stream) = s.get_stream(tx).await;
    assert_eq!(status, 200, "GET stream");
    assert_eq!(
        set(s.list().await),
        with(&[SUM]),
        "initial set = `initial` patterns"
    );

    // Allowed but not visible: an isError result naming tool_expand_tools and the tool.
    let r = s.call(ECHO, json!({"message": "too early"})).await;
    let result = r.result();
    // The not-selected message must tell the model what to call.
    assert_tool_error(result, "tool_expand_tools");
    assert_tool_error(result, ECHO);
    // Hidden: the unknown-tool error.
    let hidden = s.call(ENV, json!({})).await;
    let unknown = s.call(NOWHERE, json!({})).await;
    assert_eq!(
        normalized(hidden.rpc_error(), ENV),
        normalized(unknown.rpc_error(), NOWHERE)
    );

    while rx.try_recv().is_ok() {}
    let r = s.expand(&[ECHO, SUM, "unknown_tool"]).await;
    let sc = r.structured();
    assert_eq!(strings(&sc["expanded_tools"]), vec![ECHO], "{sc:#}");
    assert_eq!(strings(&sc["already_selected_tools"]), vec![SUM], "{sc:#}");
    assert_eq!(
        strings(&sc["invalid_tools"]),
        vec!["unknown_tool"],
        "{sc:#}"
    );
    assert_eq!(sc["success"], true, "{sc:#}");
    assert_eq!(
        strings(&sc["available_expandable_tools"]),
        vec![IMAGE],
        "{sc:#}"
    );
    let defs = sc["definitions"].as_array().expect("definitions");
    assert_eq!(defs.len(), 1, "{sc:#}");
    assert_eq!(defs[0]["name"], ECHO, "{sc:#}");
    assert!(defs[0]["inputSchema"].is_object(), "{sc:#}");

    assert!(
        wait_list_changed(&mut rx, Duration::from_secs(20)).await,
        "no notifications/tools/list_changed after the expansion"
    );
    let defs_after = s.list_defs().await;
    assert_eq!(
        set(names_of(&json!(defs_after.clone()))),
        with(&[SUM, ECHO])
    );
    let listed_echo = defs_after.iter().find(|d| d["name"] == ECHO).unwrap();
    assert_eq!(&defs[0], listed_echo, "definitions[0] vs the listed echo");
    let r = s.call(ECHO, json!({"message": "now"})).await;
    assert_eq!(first_text(r.result()), "Echo: now", "{r:#?}");

    // Expanding again: already selected, nothing new, no notification.
    let r = s.expand(&[ECHO]).await;
    let sc = r.structured();
    assert_eq!(
        strings(&sc["expanded_tools"]),
        Vec::<String>::new(),
        "{sc:#}"
    );
    assert_eq!(strings(&sc["already_selected_tools"]), vec![ECHO], "{sc:#}");
    assert_eq!(sc["definitions"], json!([]), "{sc:#}");
    // In a session, tool_invoke of a selectable tool says what to do, like tools/call.
    let r = s.invoke(IMAGE, json!({})).await;
    assert_tool_error(r.result(), "tool_expand_tools");
    stream.abort();

    // A second session of the same tenant does not see the first one's expansion.
    let s2 = Conn::legacy(&url, Some(KEY_SEED)).await;
    assert_eq!(
        set(s2.list().await),
        with(&[SUM]),
        "expansions are per session"
    );

    // --- 2026-07-28, sessionless ---
    let m = Conn::modern(&url, Some(KEY_SEED));
    assert_eq!(set(m.list().await), with(&[SUM]), "{MODERN}: initial set");
    let r = m.expand(&[ECHO, SUM, "unknown_tool"]).await;
    let sc = r.structured();
    assert_eq!(strings(&sc["expanded_tools"]), vec![ECHO], "{sc:#}");
    assert_eq!(strings(&sc["already_selected_tools"]), vec![SUM], "{sc:#}");
    assert_eq!(
        strings(&sc["invalid_tools"]),
        vec!["unknown_tool"],
        "{sc:#}"
    );
    assert_eq!(names_of(&sc["definitions"]), vec![ECHO], "{sc:#}");
    assert_eq!(
        r.frames
            .iter()
            .filter(|f| f["method"] == "notifications/tools/list_changed")
            .count(),
        0,
        "sessionless expansion announces nothing: {:#?}",
        r.frames
    );
    // Nothing stored: the list is still the initial set.
    assert_eq!(
        set(m.list().await),
        with(&[SUM]),
        "{MODERN}: expansion stored something"
    );
    // Any allowed tool by exact name, directly or through tool_invoke.
    let r = m.call(ECHO, json!({"message": "direct"})).await;
    assert_eq!(first_text(r.result()), "Echo: direct", "{r:#?}");
    let r = m.call(IMAGE, json!({})).await;
    assert_ne!(r.result()["isError"], true, "{r:#?}");
    let r = m.invoke(IMAGE, json!({})).await;
    assert_ne!(r.result()["isError"], true, "{r:#?}");
    assert!(
        r.result()["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "image")),
        "tool_invoke get-tiny-image: {r:#?}"
    );
    let r = m.invoke(SUM, json!({"a": 19, "b": 23})).await;
    assert!(first_text(r.result()).contains("42"), "{r:#?}");
    let hidden = m.call(ENV, json!({})).await;
    let unknown = m.call(NOWHERE, json!({})).await;
    assert_eq!(
        normalized(hidden.rpc_error(), ENV),
        normalized(unknown.rpc_error(), NOWHERE)
    );
    gw.assert_alive();
}

// ---------------------------------------------------------------------------------
// 3. A real client: PyPI `mcp` 2.3.0.
// ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_expands_in_both_modes() {
    let deps = require!(NodeDeps::find());
    let py = require!(python());
    let _serial = toolgate_e2e::heavy_lock().await;
    let mut gw = start_gateway(&deps, json!({})).await;
    let url = gw.mcp_url();

    for mode in ["legacy", "auto"] {
        let out = tokio::task::spawn_blocking({
            let (py, url) = (py.clone(), url.clone());
            move || {
                run_python(
                    &py,
                    "tenant_expand.py",
                    &[&url, KEY_SEED, mode, ECHO],
                    Duration::from_secs(120),
                )
            }
        })
        .await
        .unwrap();
        let before = set(strings(&out["tools_before"]));
        assert_eq!(
            before,
            set(PROTOCOL_TOOLS.iter().copied().chain([SUM])),
            "{mode}: {out:#}"
        );
        let expand = &out["expand"];
        assert_eq!(expand["is_error"], false, "{mode}: {out:#}");
        assert_eq!(
            expand["structured"]["expanded_tools"],
            json!([ECHO]),
            "{mode}: {out:#}"
        );
        assert_eq!(
            names_of(&expand["structured"]["definitions"]),
            vec![ECHO],
            "{mode}: {out:#}"
        );
        assert_eq!(out["call"]["is_error"], false, "{mode}: {out:#}");
        assert_eq!(
            out["call"]["text"],
            json!(["Echo: hello after expand"]),
            "{mode}: {out:#}"
        );
        match mode {
            "legacy" => {
                assert!(
                    ["2025-06-18", "2025-11-25"]
                        .contains(&out["protocol_version"].as_str().unwrap_or("")),
                    "{out:#}"
                );
                // Before the expansion: a tool result with isError (not an exception)
                // that tells the model what to call.
                let early = &out["early_call"];
                assert_eq!(early["raised"], false, "legacy: {out:#}");
                assert_eq!(early["is_error"], true, "legacy: not yet selected: {out:#}");
                assert!(
                    early["text"][0]
                        .as_str()
                        .is_some_and(|t| t.contains("tool_expand_tools") && t.contains(ECHO)),
                    "legacy: {out:#}"
                );
                assert_eq!(
                    out["list_changed"], true,
                    "legacy: no tools/list_changed on the message handler: {out:#}"
                );
                let after = set(strings(&out["tools_after"]));
                assert_eq!(
                    after,
                    set(PROTOCOL_TOOLS.iter().copied().chain([SUM, ECHO])),
                    "legacy: {out:#}"
                );
            }
            _ => {
                assert_eq!(out["protocol_version"], MODERN, "auto: {out:#}");
                // Sessionless: nothing stored, the list stays the initial set.
                assert_eq!(set(strings(&out["tools_after"])), before, "auto: {out:#}");
            }
        }
    }
    gw.assert_alive();
}

// ---------------------------------------------------------------------------------
// 4. Sessions and limits.
// ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire_and_initial_set_rules_and_anonymous_tenant() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let catalog = full_catalog(&deps);
    assert!(catalog.len() > 3);
    let mut gw = Gateway::start(json!({
        "startup_timeout": "60s",
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("tenants-ttl"))},
        "sessions": {"idle_ttl": "1s", "initial_max_tools": 3},
        "anonymous_tenant": "pub",
        "tenants": {
            "pub": {"allow": [ECHO, SUM]},
            "big": {"api_keys": [hash_key(KEY_A)], "allow": ["everything__*"]},
            "picked": {"api_keys": [hash_key(KEY_B)], "allow": ["everything__*"], "initial": [SUM]}
        }
    }))
    .await;
    let url = gw.mcp_url();
    let protocol = set(PROTOCOL_TOOLS);
    let with = |names: &[&str]| -> BTreeSet<String> {
        protocol
            .iter()
            .cloned()
            .chain(names.iter().map(|s| s.to_string()))
            .collect()
    };

    // Initial set: `initial` patterns; else everything when ≤ initial_max_tools; else none.
    for (label, key, want) in [
        ("pub (2 ≤ 3 tools)", None, with(&[ECHO, SUM])),
        ("big (> 3 tools)", Some(KEY_A), with(&[])),
        ("picked (initial)", Some(KEY_B), with(&[SUM])),
    ] {
        assert_eq!(
            set(Conn::modern(&url, key).list().await),
            want,
            "{MODERN} {label}"
        );
        assert_eq!(
            set(Conn::legacy(&url, key).await.list().await),
            want,
            "{LEGACY} {label}"
        );
    }

    // Anonymous: credential-less requests get pub's set; pub's limits hold.
    let anon = Conn::modern(&url, None);
    let r = anon.call(ECHO, json!({"message": "anon"})).await;
    assert_eq!(first_text(r.result()), "Echo: anon", "{r:#?}");
    let hidden = anon.call(IMAGE, json!({})).await;
    let unknown = anon.call(NOWHERE, json!({})).await;
    assert_eq!(
        normalized(hidden.rpc_error(), IMAGE),
        normalized(unknown.rpc_error(), NOWHERE)
    );
    // A wrong key is not anonymous: still 401.
    let r = Conn::modern(&url, Some(KEY_WRONG))
        .rpc("tools/list", json!({}))
        .await;
    assert_eq!(r.status, 401, "wrong key with an anonymous tenant: {r:#?}");
    assert!(r.header("www-authenticate").is_some(), "{r:#?}");

    // Idle expiry: big expands echo; kept while used, gone after 2 s of idleness.
    let s = Conn::legacy(&url, Some(KEY_A)).await;
    assert_eq!(set(s.list().await), with(&[]));
    let r = s.expand(&[ECHO, SUM]).await;
    assert_eq!(strings(&r.structured()["expanded_tools"]), vec![ECHO, SUM]);
    assert_eq!(set(s.list().await), with(&[ECHO, SUM]));
    // Used every 300 ms for 2.4 s: never idle for 1 s, so kept.
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            set(s.list().await),
            with(&[ECHO, SUM]),
            "expansion lost while in use"
        );
    }
    // Idle past the TTL: the session is gone (404, as the MCP spec's session expiry),
    // and a new session starts from the initial set again.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let r = s.rpc("tools/list", json!({})).await;
    assert_eq!(r.status, 404, "an idled-out session must be gone: {r:#?}");
    let s = Conn::legacy(&url, Some(KEY_A)).await;
    assert_eq!(
        set(s.list().await),
        with(&[]),
        "a new session starts afresh"
    );
    let r = s.call(ECHO, json!({"message": "x"})).await;
    assert_eq!(
        r.result()["isError"],
        true,
        "echo must need expansion again: {r:#?}"
    );
    let r = s.expand(&[ECHO]).await;
    assert_eq!(strings(&r.structured()["expanded_tools"]), vec![ECHO]);
    assert_eq!(set(s.list().await), with(&[ECHO]));
    gw.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_overlapping_expansions_give_the_union() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let catalog = full_catalog(&deps);
    let mut gw = start_gateway(&deps, json!({})).await;
    let url = gw.mcp_url();

    let pool: Vec<String> = catalog.iter().take(10).cloned().collect();
    assert_eq!(pool.len(), 10, "{catalog:?}");
    let s = Conn::legacy(&url, Some(KEY_C)).await;
    assert_eq!(
        set(s.list().await),
        set(PROTOCOL_TOOLS),
        "tenant c starts with none"
    );

    // 20 calls, each with 2 names: pair i is (i, i+1) and (i, i+3) mod 10, so every
    // name is asked for 4 times, by different calls.
    let pairs: Vec<(String, String)> = (0..20)
        .map(|i| {
            let j = i % 10;
            let k = if i < 10 { (j + 1) % 10 } else { (j + 3) % 10 };
            (pool[j].clone(), pool[k].clone())
        })
        .collect();
    let calls = pairs.iter().map(|(x, y)| {
        let s = s.clone();
        let (x, y) = (x.clone(), y.clone());
        tokio::spawn(async move { s.expand(&[&x, &y]).await })
    });
    let replies = futures::future::join_all(calls).await;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (r, (x, y)) in replies.into_iter().zip(&pairs) {
        let r = r.expect("expand task");
        let sc = r.structured();
        let expanded = strings(&sc["expanded_tools"]);
        let already = strings(&sc["already_selected_tools"]);
        assert_eq!(
            set(expanded.iter().chain(&already)),
            set([x, y]),
            "each name is either newly expanded or already selected: {sc:#}"
        );
        assert!(strings(&sc["invalid_tools"]).is_empty(), "{sc:#}");
        for n in expanded {
            *counts.entry(n).or_default() += 1;
        }
    }
    for n in &pool {
        assert_eq!(
            counts.get(n).copied().unwrap_or(0),
            1,
            "{n} must appear in exactly one expanded_tools: {counts:?}"
        );
    }
    let want: BTreeSet<String> = set(PROTOCOL_TOOLS).union(&set(&pool)).cloned().collect();
    assert_eq!(set(s.list().await), want, "final tools/list is the union");
    gw.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn front_door_401_and_429() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let mut gw = start_gateway(&deps, json!({})).await;
    let url = gw.mcp_url();

    // 401 without credentials, with a wrong key and with another scheme; both eras.
    for (label, key) in [("no credentials", None), ("wrong key", Some(KEY_WRONG))] {
        let legacy = Conn::bare(&url, key, LEGACY)
            .rpc(
                "initialize",
                json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}),
            )
            .await;
        let modern = Conn::modern(&url, key).rpc("tools/list", json!({})).await;
        for (era, r) in [(LEGACY, &legacy), (MODERN, &modern)] {
            assert_eq!(r.status, 401, "{label} {era}: {r:#?}");
            let wa = r.header("www-authenticate").unwrap_or_default();
            assert!(
                wa.starts_with("Bearer"),
                "{label} {era}: WWW-Authenticate {wa:?}"
            );
            assert!(
                r.rpc_error()["message"].is_string(),
                "{label} {era}: {r:#?}"
            );
            assert!(
                !r.body.contains("everything__"),
                "{label} {era}: 401 body names tools: {}",
                r.body
            );
        }
    }
    let r = http()
        .post(&url)
        .header("Authorization", format!("Basic {KEY_A}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "Basic scheme");
    assert!(r.headers().contains_key("www-authenticate"));
    let r = http()
        .get(&url)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "GET without credentials");
    assert!(r.headers().contains_key("www-authenticate"));

    // 429 over the tenant's rate limit (1/s, burst 3): the 4th quick request.
    let limited = Conn::modern(&url, Some(KEY_LIMITED));
    let started = Instant::now();
    let mut statuses = Vec::new();
    let mut last = None;
    for _ in 0..4 {
        let r = limited.rpc("tools/list", json!({})).await;
        statuses.push(r.status);
        last = Some(r);
    }
    let quick = started.elapsed();
    assert!(
        quick < Duration::from_millis(900),
        "4 requests took {quick:?}: not quick enough to test the burst"
    );
    assert_eq!(
        statuses,
        vec![200, 200, 200, 429],
        "statuses over a burst of 3"
    );
    let r = last.unwrap();
    let retry: u64 = r
        .header("retry-after")
        .unwrap_or_else(|| panic!("429 without Retry-After: {r:#?}"))
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    assert_eq!(r.rpc_error()["data"]["code"], "rate_limited", "{r:#?}");
    // Other tenants are not limited by it.
    let other = Conn::modern(&url, Some(KEY_B));
    for _ in 0..5 {
        assert_eq!(other.rpc("tools/list", json!({})).await.status, 200);
    }
    // After Retry-After, the tenant is admitted again.
    tokio::time::sleep(Duration::from_secs(retry) + Duration::from_millis(100)).await;
    let r = limited.rpc("tools/list", json!({})).await;
    assert_eq!(r.status, 200, "after Retry-After: {r:#?}");
    gw.assert_alive();
}

// ---------------------------------------------------------------------------------
// 5. A session belongs to the tenant that opened it.
// ---------------------------------------------------------------------------------

/// `b` using `a`'s session must be refused: an error, never a's tools.
fn assert_refused(r: &RpcExchangeWithHeaders, what: &str, a_only: &[String]) {
    let refused = r.status >= 400
        || r.response
            .as_ref()
            .is_some_and(|m| m.get("error").is_some());
    assert!(
        refused,
        "{what}: another tenant's request on the session was accepted: {r:#?}"
    );
    for n in a_only {
        assert!(
            !r.body.contains(n.as_str()),
            "{what}: the answer names {n}: {}",
            r.body
        );
    }
}

async fn session_of_a(url: &str, touch_first: bool) -> (McpSession, Vec<String>) {
    let a = Conn::legacy(url, Some(KEY_A)).await;
    let mut a_only = Vec::new();
    if touch_first {
        let listed = a.list().await;
        assert!(listed.contains(&IMAGE.to_string()), "{listed:?}");
        a_only = listed
            .into_iter()
            .filter(|n| !PROTOCOL_TOOLS.contains(&n.as_str()) && n != ECHO && n != SUM)
            .collect();
    } else {
        a_only.push(IMAGE.to_string());
    }
    (a, a_only)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cannot_be_used_by_another_tenant() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let mut gw = start_gateway(&deps, json!({})).await;
    let url = gw.mcp_url();

    // a has used its session: b's list, call and expansion on it are refused.
    let (a, a_only) = session_of_a(&url, true).await;
    let b_on_a = a.with_key(Some(KEY_B));
    assert_refused(
        &b_on_a.rpc("tools/list", json!({})).await,
        "b tools/list on a used session",
        &a_only,
    );
    assert_refused(
        &b_on_a.call(ECHO, json!({"message": "hi"})).await,
        "b tools/call on a's session",
        &a_only,
    );
    assert_refused(
        &b_on_a.expand(&[ECHO]).await,
        "b tool_expand_tools on a's session",
        &a_only,
    );
    // a is unaffected.
    assert!(a.list().await.contains(&IMAGE.to_string()));

    // Straight after initialize (a has sent nothing else yet): b's first request on
    // the session must be refused too, and must not take the session over.
    let (a, a_only) = session_of_a(&url, false).await;
    let b_on_a = a.with_key(Some(KEY_B));
    let r = b_on_a.rpc("tools/list", json!({})).await;
    let a_after = a.rpc("tools/list", json!({})).await;
    let a_kept = a_after
        .response
        .as_ref()
        .is_some_and(|m| m.get("result").is_some());
    let b_refused = r.status >= 400
        || r.response
            .as_ref()
            .is_some_and(|m| m.get("error").is_some());
    assert!(
        b_refused && a_kept,
        "b's tools/list right after a's initialize: refused={b_refused} (HTTP {}, b saw {:?}); \
         a's own tools/list afterwards works={a_kept} (HTTP {}, {})",
        r.status,
        r.response
            .as_ref()
            .map(|m| m.get("result").map(|res| names_of(&res["tools"]))),
        a_after.status,
        a_after
            .response
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default()
    );
    assert_refused(&r, "b tools/list right after a's initialize", &a_only);
    gw.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_stream_and_delete_refuse_another_tenant() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let mut gw = start_gateway(&deps, json!({})).await;
    let url = gw.mcp_url();

    let (a, _) = session_of_a(&url, true).await;
    let b_on_a = a.with_key(Some(KEY_B));
    // b must not subscribe to a's standalone stream (a's notifications).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (get_status, task) = b_on_a.get_stream(tx).await;
    let b_got_a_notification = get_status == 200 && {
        // What would b see there? A call of a's without a progressToken: its progress
        // travels as log frames on the session's standalone stream.
        let r = a
            .call(
                "everything__trigger-long-running-operation",
                json!({"duration": 1, "steps": 2}),
            )
            .await;
        assert_ne!(r.result()["isError"], true, "{r:#?}");
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        for _ in 0..100 {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, rx.recv()).await {
                Ok(Some(m)) => got.push(m),
                _ => break,
            }
        }
        eprintln!("b's GET stream on a's session received: {got:#?}");
        !got.is_empty()
    };
    task.abort();
    // b must not end a's session.
    let del = b_on_a.delete().await.expect("DELETE /mcp");
    let a_after = a.rpc("tools/list", json!({})).await;
    let a_kept = a_after
        .response
        .as_ref()
        .is_some_and(|m| m.get("result").is_some());
    assert!(
        get_status >= 400 && del >= 400 && a_kept,
        "b on a's session: GET stream HTTP {get_status} (received a's frames: \
         {b_got_a_notification}); DELETE HTTP {del}; a's session still works afterwards: \
         {a_kept} (HTTP {}, {})",
        a_after.status,
        a_after
            .response
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or(a_after.body.clone())
    );
    gw.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_not_handed_to_another_tenant() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    let mut gw = Gateway::start(json!({
        "startup_timeout": "60s",
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("tenants-idle-owner"))},
        "sessions": {"idle_ttl": "1s"},
        "tenants": {
            "a": {"api_keys": [hash_key(KEY_A)], "allow": ["everything__*"], "deny": [ENV]},
            "b": {"api_keys": [hash_key(KEY_B)], "allow": [ECHO, SUM]}
        }
    }))
    .await;
    let url = gw.mcp_url();
    let (a, a_only) = session_of_a(&url, true).await;
    let b_on_a = a.with_key(Some(KEY_B));
    // While a's session is fresh, b is refused (see the test above).
    assert_refused(
        &b_on_a.rpc("tools/list", json!({})).await,
        "b on a's fresh session",
        &a_only,
    );
    // After the idle TTL the session is gone for everyone: b cannot claim it, and a
    // gets the same 404 and initializes a new session.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let r = b_on_a.rpc("tools/list", json!({})).await;
    assert_eq!(r.status, 404, "b on a's idled-out session: {r:#?}");
    assert!(
        r.response.as_ref().and_then(|m| m.get("result")).is_none(),
        "b must see no tools on a's session: {r:#?}"
    );
    let a_after = a.rpc("tools/list", json!({})).await;
    assert_eq!(a_after.status, 404, "a's idled-out session: {a_after:#?}");
    // b's attempt did not re-create the session under b: a new session of a works
    // and b still cannot use a's old id.
    let (a2, _) = session_of_a(&url, false).await;
    assert!(!a2.list().await.is_empty());
    let r = b_on_a.rpc("tools/list", json!({})).await;
    assert_eq!(r.status, 404, "the old id stays dead for b: {r:#?}");
    gw.assert_alive();
}
