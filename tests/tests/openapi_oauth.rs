//! Each user reaches an OpenAPI upstream as themselves (`credentials: oauth`): the
//! gateway follows the spec's `authorizationCode` flow as each user's OAuth client.
//! The API (served in the test, with its own authorization server) records which
//! user's token each call carried: users of two tenants connect through their own
//! links and every call reaches the API with the caller's own token (next to the
//! application's own key, which stays the upstream's), over interleaved calls; a user
//! who has not connected is answered `authorization_required` with a link; a token
//! past its lifetime is refreshed, and so is one the API refuses (401), without a
//! second consent. A spec the users could not connect through fails its import,
//! saying why.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::oauth_upstream::{OAuthUpstream, assert_each_calls_as_itself, connect_as};
use toolgate_e2e::{Gateway, hash_key, rest_post};

const ALICE: &str = "tg-oaapi-alice-0123456789abcdef";
const BOB: &str = "tg-oaapi-bob-0123456789abcdef";
const CAROL: &str = "tg-oaapi-carol-0123456789abcdef";
const TOOL: &str = "api__whoami";

/// The gateway's config for `upstream`'s API, with `oauth` as the upstream's OAuth
/// client settings.
fn config(upstream: &OAuthUpstream, oauth: Value) -> Value {
    let key = |key: &str, subject: &str| json!({"hash": hash_key(key), "subject": subject});
    json!({
        "public_url": "@GATEWAY_BASE@",
        "upstreams": {"api": {
            "openapi": {
                "spec_url": upstream.spec_url(),
                "allow_private_networks": true,
                "auth": {"app": {"type": "api_key", "value": "app-key"}},
            },
            "credentials": "oauth",
            "oauth": oauth,
        }},
        "tenants": {
            "acme": {"api_keys": [key(ALICE, "alice"), key(BOB, "bob")]},
            "globex": {"api_keys": [key(CAROL, "carol")]},
        }
    })
}

/// One REST call of `whoami` as `key`: the status and the body.
async fn whoami(gateway: &Gateway, key: &str, expect: &str) -> (u16, Value) {
    rest_post(
        gateway,
        &format!("/v1/tools/{TOOL}/call"),
        Some(key),
        json!({"arguments": {"expect": expect}}),
    )
    .await
}

/// The user the API answered with.
fn user(body: &Value) -> String {
    let text = body["content"][0]["text"].as_str().unwrap_or_default();
    serde_json::from_str::<Value>(text).unwrap_or_default()["user"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The connect link of an `authorization_required` answer.
fn link_in(status: u16, body: &Value) -> String {
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_required", "{body}");
    let link = body["error"]["connect_url"]
        .as_str()
        .unwrap_or_else(|| panic!("no connect_url in {body}"));
    assert!(link.contains("/oauth/connect/"), "{body}");
    link.to_owned()
}

/// Waits until the gateway lists the API's tool (its spec is imported).
async fn wait_imported(gateway: &Gateway) {
    for _ in 0..100 {
        let (_, tools) = toolgate_e2e::rest_get(gateway, "/v1/tools", Some(ALICE)).await;
        if tools.to_string().contains(TOOL) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{TOOL} never listed");
}

#[tokio::test]
async fn every_call_reaches_the_api_with_the_callers_own_token() {
    let api = OAuthUpstream::start_api(Duration::from_secs(3600)).await;
    // A client registered beforehand: the spec names no registration endpoint.
    api.add_client("toolgate-app", "toolgate-secret");
    let oauth = json!({
        "client_id": "toolgate-app",
        "client_secret": "toolgate-secret",
        "allow_private_networks": true,
    });
    let gateway = Gateway::start(config(&api, oauth)).await;
    wait_imported(&gateway).await;

    // Nobody has connected: each is sent to connect, and nothing reaches the API.
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    let alices = link_in(status, &body);
    let (status, body) = whoami(&gateway, BOB, "bob").await;
    let bobs = link_in(status, &body);
    assert_ne!(alices, bobs);
    assert!(api.calls().is_empty());

    connect_as(&alices, "alice").await.expect("alice connects");
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, user(&body)), (200, "alice".to_owned()), "{body}");
    // The scope asked for is the one the spec's operations require of the scheme.
    assert_eq!(api.scopes_asked(), [Some("whoami".to_owned())]);
    // Bob (same tenant) is still not connected: never served with Alice's token.
    let (status, body) = whoami(&gateway, BOB, "bob").await;
    let bobs = link_in(status, &body);
    connect_as(&bobs, "bob").await.expect("bob connects");
    assert!(
        connect_as(&bobs, "bob").await.is_err(),
        "a used link is dead"
    );
    let (status, body) = whoami(&gateway, CAROL, "carol").await;
    connect_as(&link_in(status, &body), "carol")
        .await
        .expect("carol connects");

    // Interleaved calls of the three, 16 at a time: each reaches the API as its
    // caller.
    let callers = [(ALICE, "alice"), (BOB, "bob"), (CAROL, "carol")];
    let before = api.calls().len();
    assert_each_calls_as_itself(300, &callers, |key, name| {
        let gateway = &gateway;
        async move {
            let (status, body) = whoami(gateway, key, name).await;
            (status, user(&body))
        }
    })
    .await;
    let calls = api.calls();
    let reached = &calls[before..];
    assert_eq!(reached.len(), 300);
    assert!(
        reached.iter().all(|(user, expected)| user == expected),
        "a call reached the API with another user's token"
    );
    assert_eq!(api.authorizations(), 3);

    // Bob disconnects: his next call needs him to connect again; Alice is untouched.
    let response = toolgate_e2e::http()
        .delete(gateway.url("/v1/connections/api"))
        .bearer_auth(BOB)
        .send()
        .await
        .expect("disconnect");
    assert_eq!(response.status(), 204);
    let (status, body) = whoami(&gateway, BOB, "bob").await;
    link_in(status, &body);
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, user(&body)), (200, "alice".to_owned()), "{body}");
}

#[tokio::test]
async fn a_token_is_refreshed_when_it_expires_and_when_the_api_refuses_it() {
    // Tokens live 8 s: refreshed once under 4 s are left (whole seconds), so a loaded
    // machine's slow step does not refresh where the test expects none.
    let api = OAuthUpstream::start_api(Duration::from_secs(8)).await;
    // No client configured: the gateway registers itself at the registration
    // endpoint the authorization server's metadata names.
    let gateway = Gateway::start(config(&api, json!({"allow_private_networks": true}))).await;
    wait_imported(&gateway).await;
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    connect_as(&link_in(status, &body), "alice")
        .await
        .expect("alice connects");
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, user(&body)), (200, "alice".to_owned()), "{body}");
    let before = api.refreshes();

    // Past its lifetime: refreshed before the call, which goes through.
    tokio::time::sleep(Duration::from_millis(8500)).await;
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, user(&body)), (200, "alice".to_owned()), "{body}");
    assert!(api.refreshes() > before, "the token was refreshed");

    // The API refuses a token the gateway holds as good (401): refreshed, and the
    // call tried once more with the new one.
    api.invalidate_access_tokens();
    let (refused, refreshed) = (api.refused(), api.refreshes());
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, user(&body)), (200, "alice".to_owned()), "{body}");
    assert_eq!(api.refused(), refused + 1, "the stale token was sent once");
    assert_eq!(api.refreshes(), refreshed + 1, "and replaced");
    assert_eq!(api.authorizations(), 1, "no second consent was needed");
    assert!(api.calls().iter().all(|(user, expected)| user == expected));
}

#[tokio::test]
async fn an_api_users_could_not_connect_to_fails_its_import_saying_why() {
    let api = OAuthUpstream::start_api(Duration::from_secs(3600)).await;
    // A spec whose only oauth2 scheme lacks an authorizationCode flow.
    let dir = toolgate_e2e::TempDir::new("openapi-oauth");
    let machine = dir.path().join("machine.json");
    std::fs::write(
        &machine,
        json!({
            "openapi": "3.0.3", "info": {"title": "m", "version": "1"},
            "servers": [{"url": format!("{}/api", api.base)}],
            "components": {"securitySchemes": {"m": {"type": "oauth2", "flows": {
                "clientCredentials": {"tokenUrl": "/token", "scopes": {}}}}}},
            "paths": {"/whoami": {"get": {"operationId": "whoami", "security": [{"m": []}],
                "responses": {"200": {"description": "ok"}}}}}
        })
        .to_string(),
    )
    .expect("spec written");
    // A flow whose authorization server publishes no metadata, and no client.
    let unregistered = dir.path().join("unregistered.json");
    std::fs::write(
        &unregistered,
        json!({
            "openapi": "3.0.3", "info": {"title": "u", "version": "1"},
            "servers": [{"url": format!("{}/api", api.base)}],
            "components": {"securitySchemes": {"u": {"type": "oauth2", "flows": {
                "authorizationCode": {"authorizationUrl": "http://127.0.0.1:9/authorize",
                    "tokenUrl": "http://127.0.0.1:9/token", "scopes": {}}}}}},
            "paths": {"/whoami": {"get": {"operationId": "whoami", "security": [{"u": []}],
                "responses": {"200": {"description": "ok"}}}}}
        })
        .to_string(),
    )
    .expect("spec written");
    let upstream = |path: &std::path::Path| {
        json!({
            "openapi": {"spec_path": path, "allow_private_networks": true},
            "credentials": "oauth",
            "oauth": {"allow_private_networks": true},
        })
    };
    let gateway = Gateway::start(json!({
        "public_url": "@GATEWAY_BASE@",
        "upstreams": {"machine": upstream(&machine), "unregistered": upstream(&unregistered)},
    }))
    .await;
    let mut errors = (String::new(), String::new());
    for _ in 0..100 {
        let ups = gateway.upstreams().await;
        let error = |name: &str| {
            ups.as_array()
                .and_then(|a| a.iter().find(|u| u["name"] == name))
                .and_then(|u| u["last_error"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        errors = (error("machine"), error("unregistered"));
        if !errors.0.is_empty() && !errors.1.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        errors
            .0
            .contains("no OAuth 2.0 security scheme with an authorizationCode flow"),
        "{errors:?}"
    );
    assert!(
        errors.1.contains("oauth.client_id") && errors.1.contains("registration endpoint"),
        "{errors:?}"
    );
}
