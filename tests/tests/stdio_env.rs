//! stdio upstreams start with a minimal environment: the gateway's own secrets (admin
//! token, JWT secret, Redis URL, other upstreams' tokens) never reach a child unless
//! its config names them. server-everything's `get-env` tool prints what it got.

use serde_json::{Value, json};
use toolgate_e2e::{Gateway, NodeDeps, rest_post};

/// Variables the gateway process holds; the values are unique so a hit is certain.
const SECRETS: &[(&str, &str)] = &[
    ("TOOLGATE_ADMIN_TOKEN", "admin-canary-91c4e7"),
    ("SECRET_CANARY", "secret-canary-5b2d08"),
    ("REDIS_URL", "redis://:redis-canary-3f9a61@127.0.0.1:1"),
    ("NAMED_TOKEN", "named-canary-c0ffee"),
];

/// The environment the upstream's process saw, from its `get-env` tool.
async fn env_of(gateway: &Gateway, upstream: &str) -> serde_json::Map<String, Value> {
    let (status, body) = rest_post(
        gateway,
        &format!("/v1/tools/{upstream}__get-env/call"),
        None,
        json!({"arguments": {}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let text = body["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {body}"));
    match serde_json::from_str(text) {
        Ok(Value::Object(env)) => env,
        other => panic!("get-env printed no object: {other:?}"),
    }
}

fn stdio(deps: &NodeDeps, extra: Value) -> Value {
    let mut stdio = json!({
        "command": deps.node(),
        "args": [deps.everything_entry(), "stdio"],
    });
    if let (Some(stdio), Value::Object(extra)) = (stdio.as_object_mut(), extra) {
        stdio.extend(extra);
    }
    json!({ "stdio": stdio })
}

#[tokio::test]
async fn stdio_children_get_a_minimal_environment_unless_configured() {
    let Some(deps) = NodeDeps::find() else { return };
    let _heavy = toolgate_e2e::heavy_lock().await;
    let mut env: Vec<(&str, &str)> = SECRETS.to_vec();
    env.push(("LC_TIME", "C"));
    let gateway = Gateway::start_with_env(
        json!({
            "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
            "upstreams": {
                "plain": stdio(&deps, json!({})),
                "named": stdio(&deps, json!({
                    "inherit_env": ["NAMED_TOKEN"],
                    "env": {"SET_HERE": "set-canary-1"}
                })),
                "everything": stdio(&deps, json!({"inherit_env": "all"})),
            }
        }),
        &env,
    )
    .await;

    // Default: the baseline only — PATH (node found its way), HOME, locale — and not
    // one of the gateway's secrets.
    let plain = env_of(&gateway, "plain").await;
    for (name, value) in SECRETS {
        assert!(!plain.contains_key(*name), "{name} leaked: {plain:?}");
        assert!(
            !plain.values().any(|v| v.as_str() == Some(*value)),
            "{name}'s value leaked"
        );
    }
    assert!(plain.contains_key("PATH"), "{plain:?}");
    assert_eq!(plain.get("LC_TIME"), Some(&json!("C")), "{plain:?}");
    if std::env::var_os("HOME").is_some() {
        assert!(plain.contains_key("HOME"), "{plain:?}");
    }
    assert!(
        !plain
            .keys()
            .any(|k| k.starts_with("TOOLGATE_") || k == "RUST_LOG"),
        "{plain:?}"
    );

    // Named: the listed variable and `env`, nothing else of the gateway's.
    let named = env_of(&gateway, "named").await;
    assert_eq!(
        named.get("NAMED_TOKEN"),
        Some(&json!("named-canary-c0ffee"))
    );
    assert_eq!(named.get("SET_HERE"), Some(&json!("set-canary-1")));
    for name in ["TOOLGATE_ADMIN_TOKEN", "SECRET_CANARY", "REDIS_URL"] {
        assert!(!named.contains_key(name), "{name} leaked: {named:?}");
    }

    // `inherit_env: all`: the whole environment, as before.
    let everything = env_of(&gateway, "everything").await;
    for (name, value) in SECRETS {
        assert_eq!(everything.get(*name), Some(&json!(value)), "{name}");
    }
}

/// `per_tenant` on a stdio server: each tenant's token reaches a process of that
/// tenant's own, in the variable `token_env` names — never another tenant's process,
/// never the gateway's environment; a tenant without a token is asked for one, and no
/// process is started for it.
#[tokio::test]
async fn each_tenant_gets_a_stdio_process_with_its_own_token() {
    const ACME: &str = "tg-stdio-acme-0123456789abcdef";
    const GLOBEX: &str = "tg-stdio-globex-0123456789abcdef";
    const BARE: &str = "tg-stdio-bare-0123456789abcdef";
    const ACME_TOKEN: &str = "acme-stdio-token-7d1e";
    const GLOBEX_TOKEN: &str = "globex-stdio-token-42b9";
    let Some(deps) = NodeDeps::find() else { return };
    let _heavy = toolgate_e2e::heavy_lock().await;
    let bearer = |token: &str| json!({"gh": {"pat": {"type": "bearer", "token": token}}});
    let gateway = Gateway::start(json!({
        "upstreams": {
            "gh": {
                "stdio": {
                    "command": deps.node(),
                    "args": [deps.everything_entry(), "stdio"],
                    "env": {"SHARED_SETTING": "same-for-all"},
                    "token_env": "GH_TOKEN",
                },
                "credentials": "per_tenant",
            }
        },
        "tenants": {
            "acme": {"api_keys": [toolgate_e2e::hash_key(ACME)], "upstream_credentials": bearer(ACME_TOKEN)},
            "globex": {"api_keys": [toolgate_e2e::hash_key(GLOBEX)], "upstream_credentials": bearer(GLOBEX_TOKEN)},
            "bare": {"api_keys": [toolgate_e2e::hash_key(BARE)]},
        }
    }))
    .await;
    let env_as = |key: &'static str| {
        let gateway = &gateway;
        async move {
            rest_post(
                gateway,
                "/v1/tools/gh__get-env/call",
                Some(key),
                json!({"arguments": {}}),
            )
            .await
        }
    };
    // Interleaved: each answer comes from the caller's own process.
    for _ in 0..5 {
        for (key, own, other) in [
            (ACME, ACME_TOKEN, GLOBEX_TOKEN),
            (GLOBEX, GLOBEX_TOKEN, ACME_TOKEN),
        ] {
            let (status, body) = env_as(key).await;
            assert_eq!(status, 200, "{body}");
            let text = body["content"][0]["text"].as_str().unwrap_or_default();
            let env: serde_json::Map<String, Value> =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(env.get("GH_TOKEN"), Some(&json!(own)), "{env:?}");
            assert_eq!(env.get("SHARED_SETTING"), Some(&json!("same-for-all")));
            assert!(!text.contains(other), "another tenant's token: {text}");
        }
    }
    let (status, body) = env_as(BARE).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_required", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("tenants.bare.upstream_credentials.gh"),
        "{message}"
    );
    assert!(
        !message.contains(ACME_TOKEN) && !message.contains(GLOBEX_TOKEN),
        "{message}"
    );
    // The tokens are the tenants' own: not in what the gateway shows of the upstream.
    let (_, upstreams) = toolgate_e2e::rest_get(&gateway, "/v1/upstreams", Some(ACME)).await;
    let shown = upstreams.to_string();
    assert!(
        !shown.contains(ACME_TOKEN) && !shown.contains(GLOBEX_TOKEN),
        "{shown}"
    );
}
