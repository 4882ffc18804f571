//! Each tenant reaches an upstream as itself: an OpenAPI upstream configured
//! `credentials: per_tenant` is called with the calling tenant's own credentials
//! (`tenants.<name>.upstream_credentials`), never with the upstream's shared ones nor
//! another tenant's — over 1,000 interleaved calls of two tenants — and a tenant
//! without credentials is answered `authorization_required` (REST 403; MCP a tool
//! error naming the setting), with nothing sent to the API. The caller's own token
//! to the gateway never reaches the API.

use std::time::Duration;

use axum::response::IntoResponse;
use futures::StreamExt;
use serde_json::{Value, json};
use toolgate_e2e::{
    Gateway, McpSession, MockApi, TempDir, hash_key, python, require, rest_post, run_python,
};

const ACME: &str = "tg-credentials-acme-0123456789abcdef";
const GLOBEX: &str = "tg-credentials-globex-0123456789abcdef";
const NOKEY: &str = "tg-credentials-nokey-0123456789abcdef";
const SHARED_API_KEY: &str = "shared-api-key-never-sent";
const ACME_API_KEY: &str = "acme-own-api-key";
const GLOBEX_API_KEY: &str = "globex-own-api-key";

/// An API that answers with the key it was called with.
async fn whoami_api() -> (MockApi, TempDir, std::path::PathBuf) {
    let api = MockApi::start(|request| async move {
        let key = request.header("x-api-key").unwrap_or("").to_owned();
        axum::Json(json!({"key": key})).into_response()
    })
    .await;
    let dir = TempDir::new("upstream-credentials-spec");
    let spec = dir.path().join("whoami.json");
    let document = json!({
        "openapi": "3.0.3",
        "info": {"title": "whoami", "version": "1"},
        "components": {"securitySchemes": {
            "key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
        }},
        "security": [{"key": []}],
        "paths": {"/whoami": {"get": {
            "operationId": "whoami",
            "responses": {"200": {"description": "ok", "content": {"application/json": {
                "schema": {"type": "object", "properties": {"key": {"type": "string"}}}}}}}
        }}}
    });
    std::fs::write(&spec, document.to_string()).expect("write the spec");
    (api, dir, spec)
}

async fn gateway(api: &MockApi, spec: &std::path::Path) -> Gateway {
    let own = |key: &str| json!({"api": {"key": {"type": "api_key", "value": key}}});
    Gateway::start(json!({
        "upstreams": {"api": {
            "openapi": {
                "spec_path": spec,
                "base_url": api.url(""),
                "allow_private_networks": true,
                "auth": {"key": {"type": "api_key", "value": SHARED_API_KEY}}
            },
            "credentials": "per_tenant"
        }},
        "tenants": {
            "acme": {"api_keys": [hash_key(ACME)], "upstream_credentials": own(ACME_API_KEY)},
            "globex": {"api_keys": [hash_key(GLOBEX)], "upstream_credentials": own(GLOBEX_API_KEY)},
            "nokey": {"api_keys": [hash_key(NOKEY)]},
        }
    }))
    .await
}

/// The key the API saw on one REST call of `caller`.
async fn key_seen(gateway: &Gateway, caller: &str) -> String {
    let (status, body) = rest_post(
        gateway,
        "/v1/tools/api__whoami/call",
        Some(caller),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let text = body["content"][0]["text"].as_str().expect("a text result");
    let seen: Value = serde_json::from_str(text).expect("the API's JSON");
    seen["key"].as_str().unwrap_or("").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenant_reaches_the_api_with_its_own_credentials() {
    let (api, _dir, spec) = whoami_api().await;
    let gateway = gateway(&api, &spec).await;
    assert_eq!(key_seen(&gateway, ACME).await, ACME_API_KEY);
    assert_eq!(key_seen(&gateway, GLOBEX).await, GLOBEX_API_KEY);

    // 1,000 calls of the two tenants interleaved, 16 at a time: every answer is its
    // own tenant's key.
    let callers = (0..1_000).map(|i| if i % 2 == 0 { ACME } else { GLOBEX });
    let mismatches = futures::stream::iter(callers)
        .map(|caller| {
            let gateway = &gateway;
            async move {
                let expected = if caller == ACME {
                    ACME_API_KEY
                } else {
                    GLOBEX_API_KEY
                };
                (key_seen(gateway, caller).await != expected) as usize
            }
        })
        .buffer_unordered(16)
        .fold(0, |sum, wrong| async move { sum + wrong })
        .await;
    assert_eq!(
        mismatches, 0,
        "a call reached the API with another tenant's key"
    );

    let sent = api.requests();
    assert_eq!(sent.len(), 1_002);
    for request in &sent {
        let key = request.header("x-api-key").unwrap_or("");
        assert!(key == ACME_API_KEY || key == GLOBEX_API_KEY, "{key}");
        assert!(
            request.header("authorization").is_none(),
            "the caller's token to the gateway reached the API"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_without_credentials_is_told_how_to_get_them() {
    let (api, _dir, spec) = whoami_api().await;
    let gateway = gateway(&api, &spec).await;
    let (status, body) = rest_post(
        &gateway,
        "/v1/tools/api__whoami/call",
        Some(NOKEY),
        json!({}),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_required", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("tenants.nokey.upstream_credentials.api"),
        "{body}"
    );

    let mcp = McpSession::connect_as(&gateway.mcp_url(), NOKEY, json!({}))
        .await
        .expect("a session");
    let exchange = tokio::time::timeout(
        Duration::from_secs(30),
        mcp.call_tool("api__whoami", json!({})),
    )
    .await
    .expect("an answer in time")
    .expect("tools/call");
    let result = &exchange.response.as_ref().expect("an answer")["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["_meta"]["toolgate/error"], "authorization_required",
        "{result}"
    );
    assert!(api.requests().is_empty(), "nothing reached the API");
}

/// What a real client (PyPI `mcp` 2.3, a session and 2026-07-28) makes of both answers:
/// a tenant's own call succeeds with its own key; a tenant without credentials gets a
/// tool error it can show (the SDK does not raise), saying `authorization_required`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_client_takes_both_answers_in_both_modes() {
    let py = require!(python());
    let (api, _dir, spec) = whoami_api().await;
    let gateway = gateway(&api, &spec).await;
    let url = gateway.mcp_url();
    for mode in ["legacy", "auto"] {
        let run = |key: &'static str| {
            let (py, url) = (py.clone(), url.clone());
            tokio::task::spawn_blocking(move || {
                run_python(
                    &py,
                    "call_as.py",
                    &[&url, key, mode, "api__whoami"],
                    Duration::from_secs(120),
                )
            })
        };
        let own = run(ACME).await.expect("the client ran");
        assert_eq!(own["raised"], false, "{mode}: {own:#}");
        assert_eq!(own["is_error"], false, "{mode}: {own:#}");
        let text = own["text"][0].as_str().unwrap_or("");
        assert!(text.contains(ACME_API_KEY), "{mode}: {own:#}");
        if mode == "auto" {
            assert_eq!(own["protocol_version"], "2026-07-28", "{own:#}");
        }

        let refused = run(NOKEY).await.expect("the client ran");
        assert_eq!(refused["raised"], false, "{mode}: {refused:#}");
        assert_eq!(refused["is_error"], true, "{mode}: {refused:#}");
        assert_eq!(
            refused["meta"]["toolgate/error"], "authorization_required",
            "{mode}: {refused:#}"
        );
    }
    let sent = api.requests();
    assert_eq!(
        sent.len(),
        2,
        "only the tenant with credentials reached the API"
    );
    assert!(
        sent.iter()
            .all(|r| r.header("x-api-key") == Some(ACME_API_KEY))
    );
}

/// `per_tenant` on an HTTP MCP upstream: each tenant reaches it with its own bearer
/// token, on connections of its own, opened at startup, so that each tenant lists the
/// tools its own token opens before any call. A tenant without a token is asked for
/// one (no one else's is used); another tenant's own tool is, to it, a tool that does
/// not exist.
#[tokio::test]
async fn each_tenant_reaches_an_mcp_upstream_with_its_own_token() {
    use toolgate_e2e::oauth_upstream::OAuthUpstream;
    const BARE: &str = "tg-pt-bare-0123456789abcdef";
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let bearer =
        |user: &str| json!({"pat": {"type": "bearer", "token": upstream.issue_token(user)}});
    let gateway = Gateway::start(json!({
        "upstreams": {"gh": {
            "streamable_http": {"url": upstream.mcp_url()},
            "credentials": "per_tenant",
        }},
        "tenants": {
            "acme": {"api_keys": [hash_key(ACME)], "upstream_credentials": {"gh": bearer("acme-bot")}},
            "globex": {"api_keys": [hash_key(GLOBEX)], "upstream_credentials": {"gh": bearer("globex-bot")}},
            "bare": {"api_keys": [hash_key(BARE)]},
        }
    }))
    .await;
    let listed = |key: &'static str| {
        let gateway = &gateway;
        async move {
            let (_, body) =
                toolgate_e2e::rest_get(gateway, "/v1/tools?format=mcp", Some(key)).await;
            let mut names: Vec<String> = body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .filter(|n| n.starts_with("gh__"))
                .collect();
            names.sort();
            names
        }
    };
    for (key, own) in [
        (ACME, "gh__acme-bot_notes"),
        (GLOBEX, "gh__globex-bot_notes"),
    ] {
        let mut seen = Vec::new();
        for _ in 0..100 {
            seen = listed(key).await;
            if seen == [own, "gh__whoami"] {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(seen, [own, "gh__whoami"], "{key}");
    }
    let call = |key: &'static str, tool: &'static str, expect: &'static str| {
        let gateway = &gateway;
        async move {
            rest_post(
                gateway,
                &format!("/v1/tools/{tool}/call"),
                Some(key),
                json!({"arguments": {"expect": expect}}),
            )
            .await
        }
    };
    for _ in 0..10 {
        for (key, bot) in [(ACME, "acme-bot"), (GLOBEX, "globex-bot")] {
            let (status, body) = call(key, "gh__whoami", bot).await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["content"][0]["text"], bot, "{body}");
        }
    }
    let (status, body) = call(BARE, "gh__whoami", "bare").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_required", "{body}");
    let (status, foreign) = call(ACME, "gh__globex-bot_notes", "acme-bot").await;
    let (status_none, none) = call(ACME, "gh__nobodys_notes", "acme-bot").await;
    assert_eq!((status, status_none), (404, 404), "{foreign} {none}");
    assert_eq!(
        foreign["error"]["message"]
            .as_str()
            .map(|m| m.replace("gh__globex-bot_notes", "X")),
        none["error"]["message"]
            .as_str()
            .map(|m| m.replace("gh__nobodys_notes", "X")),
    );
    let calls = upstream.calls();
    assert_eq!(calls.len(), 20);
    assert!(
        calls.iter().all(|(user, expected)| user == expected),
        "{calls:?}"
    );
}
