//! Everything an MCP server offers besides tools, from every upstream, through one
//! policy: a real client (PyPI `mcp` 2.3, legacy sessions and 2026-07-28) against
//! two namespaced server-everything mounts (stdio `everything`, streamable HTTP
//! `ev_http`) lists and gets prompts, lists and reads resources and templates, reads
//! back the `resource_link`s a tool returned, completes prompt and template
//! arguments, answers the upstreams' sampling and elicitation requests from its
//! callbacks (on a session's stream, or through 2026-07-28's input-required round
//! trip), and (sessions) subscribes to a resource and receives its update.
//!
//! The tenant matrix runs the same probes as two tenants that may each use one
//! upstream: nothing of the other upstream is listed, and every request about it is
//! answered exactly like one about an upstream that does not exist.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::{
    Everything, Gateway, NodeDeps, everything_stdio_upstream, hash_key, python, require,
    run_python, unique_marker,
};

const MODES: [&str; 2] = ["legacy", "auto"];
const STATIC: &str = "demo://resource/static/document/architecture.md";
const TEMPLATE: &str = "demo://resource/dynamic/text/{resourceId}";
const PROBES: [&str; 10] = [
    "sampling",
    "elicitation",
    "roots",
    "get_simple",
    "get_resource_prompt",
    "read_static",
    "read_dynamic",
    "links",
    "complete_prompt",
    "complete_template",
];

fn uri(prefix: &str, original: &str) -> String {
    format!("toolgate://{prefix}/{original}")
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn run(url: &str, key: &str, mode: &str, prefixes: &str) -> Value {
    let py = python().expect("python with the test dependencies");
    let (url, key, mode, prefixes) = (
        url.to_owned(),
        key.to_owned(),
        mode.to_owned(),
        prefixes.to_owned(),
    );
    tokio::task::spawn_blocking(move || {
        run_python(
            &py,
            "server_features.py",
            &[&url, &key, &mode, &prefixes],
            Duration::from_secs(170),
        )
    })
    .await
    .unwrap()
}

async fn start(deps: &NodeDeps, tenants: Value) -> (Gateway, Everything) {
    let http = Everything::start(deps, "streamableHttp").await;
    let gateway = Gateway::start(json!({
        "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
        "call_timeout": "60s",
        "tenants": tenants,
        "upstreams": {
            "everything": everything_stdio_upstream(deps, &unique_marker("features")),
            "ev_http": {"streamable_http": {"url": http.url}}
        }
    }))
    .await;
    (gateway, http)
}

/// Everything a caller allowed `prefix`'s upstream can do with it.
fn assert_usable(out: &Value, prefix: &str, what: &str) {
    let prompts = strings(&out["prompts"]);
    for prompt in ["simple-prompt", "completable-prompt", "resource-prompt"] {
        let want = format!("{prefix}__{prompt}");
        assert!(prompts.contains(&want), "{what}: {want} not in {prompts:?}");
    }
    let resources = strings(&out["resources"]);
    assert!(
        resources.contains(&uri(prefix, STATIC)),
        "{what}: {} not in {resources:?}",
        uri(prefix, STATIC)
    );
    let templates = strings(&out["templates"]);
    assert!(
        templates.contains(&uri(prefix, TEMPLATE)),
        "{what}: {} not in {templates:?}",
        uri(prefix, TEMPLATE)
    );
    let probes = &out["probes"][prefix];
    for probe in PROBES {
        assert_eq!(
            probes[probe]["ok"], true,
            "{what}: {prefix} {probe}: {probes}"
        );
    }
    assert!(
        strings(&probes["get_simple"]["text"])
            .iter()
            .any(|t| !t.is_empty()),
        "{what}: simple prompt text: {probes}"
    );
    let embedded = strings(&probes["get_resource_prompt"]["embedded"]);
    assert_eq!(
        embedded,
        [uri(prefix, "demo://resource/dynamic/text/3")],
        "{what}: the prompt's embedded resource is in the client's form"
    );
    assert_eq!(
        strings(&probes["read_static"]["uris"]),
        [uri(prefix, STATIC)],
        "{what}: read answers with the URI that was asked for"
    );
    assert!(
        strings(&probes["read_dynamic"]["text"])
            .iter()
            .any(|t| t.contains("Resource 2")),
        "{what}: template expansion read: {probes}"
    );
    let links = strings(&probes["links"]["links"]);
    assert!(
        !links.is_empty() && links.iter().all(|l| l.starts_with(&uri(prefix, ""))),
        "{what}: resource_link URIs in the client's form: {links:?}"
    );
    assert_eq!(
        probes["links"]["read_back"]["uris"][0], links[0],
        "{what}: a link a tool returned reads back through the gateway"
    );
    assert!(
        strings(&probes["complete_prompt"]["values"]).contains(&"Engineering".to_owned()),
        "{what}: prompt argument completion: {probes}"
    );
    // The upstream's sampling and elicitation requests reached this client's
    // callbacks (a session's stream, or 2026-07-28's input-required round trip) and
    // their answers reached the upstream.
    let sampled = strings(&probes["sampling"]["text"]).join("\n");
    assert!(
        sampled.contains("sampled reply to [") && sampled.contains(&format!("sample for {prefix}")),
        "{what}: sampling: {sampled}"
    );
    let elicited = strings(&probes["elicitation"]["text"]).join("\n");
    assert!(
        elicited.contains("Ada from the test"),
        "{what}: elicitation: {elicited}"
    );
}

/// Every request about `hidden` failed exactly as the same request about `absent`
/// (an upstream that does not exist), names aside.
fn assert_indistinguishable(out: &Value, hidden: &str, absent: &str, what: &str) -> usize {
    let mut cases = 0;
    for listed in ["prompts", "resources", "templates"] {
        let leaked: Vec<String> = strings(&out[listed])
            .into_iter()
            .filter(|n| n.starts_with(&format!("{hidden}__")) || n.starts_with(&uri(hidden, "")))
            .collect();
        assert!(leaked.is_empty(), "{what}: {listed} lists {leaked:?}");
        cases += 1;
    }
    for probe in PROBES {
        let seen = &out["probes"][hidden][probe];
        let reference = &out["probes"][absent][probe];
        assert_eq!(
            seen["ok"], false,
            "{what}: {hidden} {probe} answered: {seen}"
        );
        assert_eq!(
            reference["ok"], false,
            "{what}: {absent} {probe}: {reference}"
        );
        assert_eq!(
            seen["code"], reference["code"],
            "{what}: {probe}: error codes differ: {seen} vs {reference}"
        );
        assert_eq!(
            seen["error"]
                .as_str()
                .unwrap_or_default()
                .replace(hidden, absent),
            reference["error"].as_str().unwrap_or_default(),
            "{what}: {probe}: the answer tells a hidden upstream from a missing one"
        );
        cases += 1;
    }
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_client_reaches_prompts_resources_and_completion_of_every_upstream() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    require!(python());
    let (mut gateway, _http) = start(&deps, json!({})).await;
    let url = gateway.mcp_url();
    for mode in MODES {
        let out = run(&url, "-", mode, "everything,ev_http").await;
        for prefix in ["everything", "ev_http"] {
            assert_usable(&out, prefix, &format!("{mode} {prefix}"));
        }
        if mode == "legacy" {
            let subscriptions = &out["subscriptions"];
            assert_eq!(subscriptions["subscribe"]["ok"], true, "{subscriptions}");
            assert_eq!(
                subscriptions["updated"],
                uri("everything", STATIC),
                "the update names the subscribed resource in the client's form: {subscriptions}"
            );
            assert_eq!(subscriptions["unsubscribe"]["ok"], true, "{subscriptions}");
        } else {
            assert_eq!(
                out["protocol_version"], "2026-07-28",
                "auto mode picks the newest version"
            );
        }
    }
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_see_and_reach_only_their_own_prompts_and_resources() {
    let deps = require!(NodeDeps::find());
    let _serial = toolgate_e2e::heavy_lock().await;
    require!(python());
    const KEY_A: &str = "features-tenant-a-key";
    const KEY_B: &str = "features-tenant-b-key";
    let (mut gateway, _http) = start(
        &deps,
        json!({
            // A tool of `ev_http` is allowed, but not the upstream as a whole. The stdio
            // upstream has one tenant: its requests, which name no call on the wire,
            // may go to the call in flight.
            "a": {"api_keys": [hash_key(KEY_A)], "allow": ["everything__*", "ev_http__echo"]},
            "b": {"api_keys": [hash_key(KEY_B)], "allow": ["ev_http__*"]}
        }),
    )
    .await;
    let url = gateway.mcp_url();
    let mut cases = 0;
    for (key, own, other) in [
        (KEY_A, "everything", "ev_http"),
        (KEY_B, "ev_http", "everything"),
    ] {
        for mode in MODES {
            let what = format!("tenant of {own}, {mode}");
            let out = run(&url, key, mode, &format!("{own},{other},nosuch")).await;
            assert_usable(&out, own, &what);
            cases += assert_indistinguishable(&out, other, "nosuch", &what);
        }
    }
    println!("tenant matrix: {cases} cases tried, 0 leaks");
    gateway.assert_alive();
}
