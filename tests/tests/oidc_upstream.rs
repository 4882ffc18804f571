//! Each user's own account upstream (`credentials: oauth`), with real parts only: a
//! certified OpenID provider (npm `oidc-provider`, `tests/node/oidc_provider.mjs`) as
//! the authorization server, an MCP server that takes only the provider's JWT access
//! tokens for itself (`toolgate_e2e::oidc_resource`), and a real browser (Debian's
//! chromium via npm `playwright-core`, `tests/node/oidc_connect_browser.mjs`) in
//! which each user goes through the gateway's connect page and the provider's own
//! sign-in and consent pages.
//!
//! 1. Alice (tenant acme) asks for a connect link (before anyone connected the
//!    gateway knows none of the upstream's tools); Bob (tenant globex) calls the
//!    upstream's tool and is answered `authorization_required` with a link of his
//!    own. Each connects in the browser (the gateway registered itself at the
//!    provider by RFC 7591, once), and from then on calls as themselves: the upstream
//!    sees each call with that caller's own token, never the other's. Past the access tokens' short lifetime a call refreshes at
//!    the provider and goes on as the same user, without another consent. A
//!    disconnect revokes the refresh token at the provider (which then refuses it).
//!    The provider's RFC 8693 token-exchange grant turns a user's token into one for
//!    another audience, same subject.
//! 2. With Redis: a replica started afresh on the same Redis and token keys calls as
//!    Alice with the token she connected through another one.
//! 3. `credentials: token_exchange` against the same provider: callers who signed in
//!    to the gateway with the provider's JWTs reach the upstream as themselves, with
//!    tokens the gateway exchanged for theirs — no browser, no connecting.
//!
//! Without chromium, `playwright-core`, `oidc-provider` or Redis the test concerned
//! prints a notice and skips; under `CI=true` that is a failure. Screenshots of every
//! page go to `<target dir>/oidc-screenshots/`.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use toolgate_e2e::browser::{chromium, has_playwright, run_script, screenshot_dir};
use toolgate_e2e::oidc_provider::OidcProvider;
use toolgate_e2e::oidc_resource::OidcResource;
use toolgate_e2e::{
    Gateway, NodeDeps, TempDir, hash_key, heavy_lock, require, rest_get, rest_post,
};

const ALICE: &str = "tg-oidc-alice-0123456789abcdef";
const BOB: &str = "tg-oidc-bob-0123456789abcdef";
const UPSTREAM: &str = "workspace";
const TOOL: &str = "workspace__whoami";
/// 32 bytes, base64: seals the users' tokens in the gateway's store.
const TOKEN_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Who calls: API key, tenant, subject.
const USERS: [(&str, &str, &str); 2] = [(ALICE, "acme", "alice"), (BOB, "globex", "bob")];

fn config(resource: &OidcResource) -> Value {
    let tenant = |key: &str, subject: &str| json!({"api_keys": [{"hash": hash_key(key), "subject": subject}]});
    json!({
        "public_url": "@GATEWAY_BASE@",
        "oauth": {"client_name": "toolgate e2e", "token_keys": [TOKEN_KEY]},
        "upstreams": {UPSTREAM: {
            "streamable_http": {"url": resource.mcp_url()},
            "credentials": "oauth",
            "oauth": {"allow_private_networks": true},
        }},
        "tenants": {"acme": tenant(ALICE, "alice"), "globex": tenant(BOB, "bob")},
    })
}

/// Everything the browser tests need, or `None` after the notices (skip).
struct Parts {
    deps: NodeDeps,
    chromium: std::path::PathBuf,
}

fn parts() -> Option<Parts> {
    let deps = OidcProvider::deps()?;
    let chromium = chromium()?;
    has_playwright(&deps).then_some(Parts { deps, chromium })
}

/// One REST call of the tool as `key`, saying it is `subject`: status and body.
async fn whoami(gateway: &Gateway, key: &str, subject: &str) -> (u16, Value) {
    rest_post(
        gateway,
        &format!("/v1/tools/{TOOL}/call"),
        Some(key),
        json!({"arguments": {"expect": subject}}),
    )
    .await
}

fn text(body: &Value) -> String {
    body["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The connect link of an `authorization_required` answer.
fn connect_url(status: u16, body: &Value) -> String {
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_required", "{body}");
    body["error"]["connect_url"]
        .as_str()
        .unwrap_or_else(|| panic!("no connect_url in {body}"))
        .to_owned()
}

/// Goes through `link` in the browser as `subject` of `tenant`: the summary of
/// `oidc_connect_browser.mjs` (it failed the test otherwise).
async fn connect_in_browser(
    parts: &Parts,
    gateway: &Gateway,
    provider: &OidcProvider,
    link: &str,
    tenant: &str,
    subject: &str,
) -> Value {
    let shots = screenshot_dir("oidc-screenshots");
    let log = shots.join(format!("{subject}.log"));
    let env = [
        ("CONNECT_URL", link.to_owned()),
        ("LOGIN", subject.to_owned()),
        ("TENANT", tenant.to_owned()),
        ("UPSTREAM", UPSTREAM.to_owned()),
        ("GATEWAY_URL", gateway.base.clone()),
        ("ISSUER", provider.issuer.clone()),
        ("SCREENSHOT_DIR", shots.display().to_string()),
    ];
    let (deps, chromium) = (parts.deps.clone(), parts.chromium.clone());
    let outcome = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        run_script(
            &deps,
            &chromium,
            "oidc_connect_browser.mjs",
            &env,
            &log,
            Duration::from_secs(120),
        )
    })
    .await
    .expect("the browser run");
    match outcome {
        Ok(summary) => summary,
        Err(output) => panic!(
            "{subject} could not connect in the browser:\n{output}\n{}\n{}",
            gateway.proc.logs(),
            provider.proc.logs()
        ),
    }
}

/// Waits until the gateway lists the tool to `key` (a connection lists it).
async fn wait_listed(gateway: &Gateway, key: &str) {
    for _ in 0..100 {
        let (_, tools) = rest_get(gateway, "/v1/tools", Some(key)).await;
        if tools.to_string().contains(TOOL) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{TOOL} never listed");
}

/// The claims of a JWT, read without checking it (the upstream checks).
fn claims(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

/// An RFC 8693 exchange at the provider, as its token-exchange client.
async fn exchange(provider: &OidcProvider, subject_token: &str, resource: &str) -> (u16, Value) {
    let (id, secret) = &provider.exchange_client;
    let response = toolgate_e2e::http()
        .post(format!("{}/token", provider.issuer))
        .basic_auth(id, Some(secret))
        .form(&[
            ("grant_type", TOKEN_EXCHANGE),
            ("subject_token", subject_token),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("resource", resource),
        ])
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .expect("POST /token");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Every call the upstream saw came with its caller's own token: the token's subject
/// is the caller, and no token served two callers.
fn assert_own_tokens(resource: &OidcResource) -> usize {
    let calls = resource.calls();
    let wrong: Vec<_> = calls.iter().filter(|c| c.sub != c.caller).collect();
    assert!(wrong.is_empty(), "calls with another's token: {wrong:?}");
    for call in &calls {
        assert!(
            calls
                .iter()
                .all(|other| other.token != call.token || other.caller == call.caller),
            "one token served two callers"
        );
    }
    calls.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_connect_at_a_real_provider_in_a_real_browser() {
    let parts = require!(parts());
    let _serial = heavy_lock().await;
    let started = std::time::Instant::now();
    const TTL: Duration = Duration::from_secs(10);
    let provider = OidcProvider::start(&parts.deps, TTL).await;
    let resource = OidcResource::start(&provider.issuer).await;
    let data = TempDir::new("oidc-data");
    let mut settings = config(&resource);
    settings["data_dir"] = json!(data.path());
    let gateway = Gateway::start(settings).await;

    // Before anyone connected the gateway knows none of the upstream's tools (it
    // lists them from a user's connection), so Alice asks for her link; Bob, later,
    // calls the tool and is answered with a link of his own.
    let (status, body) = rest_post(
        &gateway,
        &format!("/v1/connections/{UPSTREAM}"),
        Some(ALICE),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let alices = body["connect_url"]
        .as_str()
        .expect("connect_url")
        .to_owned();
    let summary = connect_in_browser(&parts, &gateway, &provider, &alices, "acme", "alice").await;
    assert!(
        summary["text"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("Your account at {UPSTREAM} is connected")),
        "{summary}"
    );
    assert_eq!(
        summary["offline_access_asked"], true,
        "the gateway asks for a refresh token: {summary}"
    );
    wait_listed(&gateway, ALICE).await;
    let events = provider.events().await;
    assert_eq!(
        events["registrations"], 1,
        "the gateway registered itself once: {events}"
    );

    let (status, body) = whoami(&gateway, BOB, "bob").await;
    let bobs = connect_url(status, &body);
    assert_ne!(bobs, alices);
    connect_in_browser(&parts, &gateway, &provider, &bobs, "globex", "bob").await;
    assert_eq!(
        provider.events().await["registrations"],
        1,
        "one registration serves every user"
    );

    // Each calls as themselves, interleaved.
    for round in 0..10 {
        for (key, _, subject) in USERS {
            let (status, body) = whoami(&gateway, key, subject).await;
            assert_eq!(
                (status, text(&body)),
                (200, subject.to_owned()),
                "round {round}: {body}"
            );
        }
    }
    let calls = assert_own_tokens(&resource);
    assert_eq!(calls, 20);
    for (_, _, subject) in USERS {
        assert_eq!(
            provider.granted("authorization_code", subject).await,
            1,
            "{subject} consented once"
        );
    }

    // Past the access tokens' lifetime: the next call refreshes at the provider and
    // goes through as the same user, with a new token and no new consent.
    let refreshed_before = provider.granted("refresh_token", "alice").await;
    let last_token = resource.calls().last().expect("a call").token.clone();
    tokio::time::sleep(TTL + Duration::from_secs(1)).await;
    assert!(
        resource.verify(&last_token).is_err(),
        "the old token expired at the upstream"
    );
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    let refreshes = provider.granted("refresh_token", "alice").await - refreshed_before;
    assert!(
        refreshes >= 1,
        "alice's token was refreshed at the provider"
    );
    let fresh = resource.calls().last().expect("a call").clone();
    assert_eq!(fresh.sub, "alice");
    assert_eq!(provider.granted("authorization_code", "alice").await, 1);
    let (status, body) = whoami(&gateway, BOB, "bob").await;
    assert_eq!((status, text(&body)), (200, "bob".to_owned()), "{body}");
    assert_own_tokens(&resource);
    assert!(
        resource.refused().iter().all(|why| why == "no token"),
        "the gateway never sent an expired or foreign token: {:?}",
        resource.refused()
    );

    // RFC 8693 at the provider: Alice's token for the upstream becomes one for
    // another audience, still hers; and one for the upstream the upstream takes.
    let other = format!("{}/elsewhere", resource.base);
    let (status, answer) = exchange(&provider, &fresh.token, &other).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["issued_token_type"], ACCESS_TOKEN_TYPE, "{answer}");
    let exchanged = answer["access_token"].as_str().expect("access_token");
    let seen = claims(exchanged);
    assert_eq!(
        (seen["sub"].as_str(), seen["aud"].as_str()),
        (Some("alice"), Some(other.as_str()))
    );
    assert!(
        resource.verify(exchanged).is_err(),
        "another audience's token"
    );
    let (status, answer) = exchange(&provider, &fresh.token, &resource.mcp_url()).await;
    assert_eq!(status, 200, "{answer}");
    let exchanged = answer["access_token"].as_str().expect("access_token");
    assert_eq!(resource.verify(exchanged), Ok("alice".to_owned()));
    let (status, answer) = exchange(&provider, "not-a-token", &resource.mcp_url()).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("invalid_grant")),
        "{answer}"
    );

    // Alice disconnects: her refresh token is revoked at the provider (with its
    // grant), her next call needs a new connection; Bob is untouched.
    let before = provider.events().await;
    let response = toolgate_e2e::http()
        .delete(gateway.url(&format!("/v1/connections/{UPSTREAM}")))
        .bearer_auth(ALICE)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("disconnect");
    assert_eq!(response.status(), 204);
    let after = provider.events().await;
    let revoked: Vec<&Value> = after["revocations"]
        .as_array()
        .expect("revocations")
        .iter()
        .skip(before["revocations"].as_array().map_or(0, Vec::len))
        .collect();
    assert!(
        revoked
            .iter()
            .any(|r| r["hint"] == "refresh_token" && r["status"] == 200),
        "the refresh token was revoked: {revoked:?}"
    );
    assert!(after["grantsRevoked"].as_u64() > before["grantsRevoked"].as_u64());
    let check = provider.refresh_check("alice").await;
    assert_eq!(
        (check["tried"].as_bool(), check["error"].as_str()),
        (Some(true), Some("invalid_grant")),
        "the provider refuses alice's refresh token now: {check}"
    );
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    connect_url(status, &body);
    let (status, body) = whoami(&gateway, BOB, "bob").await;
    assert_eq!((status, text(&body)), (200, "bob".to_owned()), "{body}");
    let calls = assert_own_tokens(&resource);
    println!(
        "oidc-provider + chromium: 2 users connected, {calls} calls each with its caller's own \
         token, {refreshes} refresh after a {TTL:?} token expired, {} revocation requests on \
         disconnect, in {:?}",
        revoked.len(),
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_afresh_calls_with_the_token_kept_in_redis() {
    let parts = require!(parts());
    let Some(url) = toolgate_e2e::redis::shared_redis().await else {
        return;
    };
    let _serial = heavy_lock().await;
    let prefix = toolgate_e2e::redis::unique_prefix("oidc");
    let provider = OidcProvider::start(&parts.deps, Duration::from_secs(3600)).await;
    let resource = OidcResource::start(&provider.issuer).await;
    let mut shared = config(&resource);
    shared["state"] = json!({"backend": "redis", "url": url, "key_prefix": prefix});

    let first = Gateway::start(shared.clone()).await;
    let (status, body) = rest_post(
        &first,
        &format!("/v1/connections/{UPSTREAM}"),
        Some(ALICE),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let link = body["connect_url"]
        .as_str()
        .expect("connect_url")
        .to_owned();
    connect_in_browser(&parts, &first, &provider, &link, "acme", "alice").await;
    wait_listed(&first, ALICE).await;
    let (status, body) = whoami(&first, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    drop(first);

    // A replica started afresh on the same Redis and keys: Alice calls as herself
    // with the token she connected through the first one; nobody signs in again.
    let second = Gateway::start(shared).await;
    wait_listed(&second, ALICE).await;
    let (status, body) = whoami(&second, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    let calls = resource.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].token, calls[1].token, "the token kept in Redis");
    assert_eq!(provider.granted("authorization_code", "alice").await, 1);
    // Bob has connected nowhere: never served with Alice's token.
    let (status, body) = whoami(&second, BOB, "bob").await;
    connect_url(status, &body);
    assert_own_tokens(&resource);
    toolgate_e2e::redis::delete_prefix(&url, &prefix).await;
}

/// `credentials: token_exchange`, against the same provider: each caller signs in to
/// the gateway with a JWT the provider made for the gateway, and the gateway exchanges
/// it there (RFC 8693) for a token of the upstream — no one connects anything. Each
/// call reaches the upstream as its caller with a token made for the upstream (never
/// the caller's own, never another's); a caller's exchanged token serves their next
/// calls; a caller with an API key (nothing to exchange) is told so. A stdio server
/// gets each user's exchanged token in its `token_env`, in a process of that user's
/// own.
#[tokio::test]
async fn callers_tokens_are_exchanged_for_the_upstreams_own() {
    const KEYED: &str = "tg-oidc-keyed-0123456789abcdef";
    /// The stdio server's name at the provider (it takes 127.0.0.1 URLs only).
    const STDIO_AUDIENCE: &str = "http://127.0.0.1:9/stdio-tickets";
    let deps = require!(OidcProvider::deps());
    let node = require!(NodeDeps::find());
    let provider = OidcProvider::start(&deps, Duration::from_secs(3600)).await;
    let resource = OidcResource::start(&provider.issuer).await;
    let (client_id, client_secret) = &provider.exchange_client;
    let issuer = provider.issuer.clone();
    let gateway = Gateway::start(json!({
        "jwt": {
            "jwks_url": format!("{issuer}/jwks"),
            "issuer": issuer,
            "audience": "@GATEWAY_BASE@",
            "tenant_claim": "tenant",
        },
        "upstreams": {"ex": {
            "streamable_http": {"url": resource.mcp_url()},
            "credentials": "token_exchange",
            "oauth": {
                "issuer": issuer,
                "client_id": client_id,
                "client_secret": client_secret,
                "allow_private_networks": true,
            },
        },
        "sx": {
            "stdio": {
                "command": node.node(),
                "args": [node.everything_entry(), "stdio"],
                "token_env": "TICKETS_TOKEN",
            },
            "credentials": "token_exchange",
            "oauth": {
                "issuer": issuer,
                "audience": STDIO_AUDIENCE,
                "client_id": client_id,
                "client_secret": client_secret,
                "allow_private_networks": true,
            },
        }},
        "tenants": {
            "acme": {},
            "globex": {},
            "keyed": {"api_keys": [{"hash": hash_key(KEYED), "subject": "kim"}]},
        },
    }))
    .await;
    let alice = provider.mint("alice", &gateway.base, "acme").await;
    let bob = provider.mint("bob", &gateway.base, "globex").await;
    let call = |key: String, expect: &'static str| {
        let gateway = &gateway;
        async move {
            rest_post(
                gateway,
                "/v1/tools/ex__whoami/call",
                Some(&key),
                json!({"arguments": {"expect": expect}}),
            )
            .await
        }
    };

    // The first call of each opens their connection (nothing was listed before).
    for (token, user) in [(&alice, "alice"), (&bob, "bob")] {
        let (status, body) = call(token.clone(), user).await;
        assert_eq!((status, text(&body)), (200, user.to_owned()), "{body}");
    }
    // Interleaved, each as themselves.
    let answers = futures::future::join_all((0..40).map(|i| {
        let (token, user) = if i % 2 == 0 {
            (&alice, "alice")
        } else {
            (&bob, "bob")
        };
        let call = &call;
        async move { (user, call(token.clone(), user).await) }
    }))
    .await;
    for (user, (status, body)) in &answers {
        assert_eq!((*status, text(body)), (200, user.to_string()), "{body}");
    }
    let calls = resource.calls();
    assert_eq!(calls.len(), 42);
    for seen in &calls {
        assert_eq!(
            seen.sub, seen.caller,
            "a call reached the upstream as another user"
        );
        assert!(
            seen.token != alice && seen.token != bob,
            "a caller's own token reached the upstream"
        );
        assert_eq!(resource.verify(&seen.token), Ok(seen.sub.clone()));
    }
    // One exchange per caller: the exchanged token serves the calls after.
    for user in ["alice", "bob"] {
        assert_eq!(provider.granted(TOKEN_EXCHANGE, user).await, 1, "{user}");
    }

    // The stdio server: each user's process holds a token the provider made for it,
    // for that user (never the caller's own), the same on the next call.
    let stdio_token = |token: String| {
        let gateway = &gateway;
        async move {
            let (status, body) = rest_post(
                gateway,
                "/v1/tools/sx__get-env/call",
                Some(&token),
                json!({"arguments": {}}),
            )
            .await;
            assert_eq!(status, 200, "{body}");
            let env: Value = serde_json::from_str(&text(&body)).expect("get-env prints JSON");
            env["TICKETS_TOKEN"].as_str().expect("the token").to_owned()
        }
    };
    for _ in 0..2 {
        for (token, user) in [(&alice, "alice"), (&bob, "bob")] {
            let given = stdio_token(token.clone()).await;
            assert_ne!(&given, token, "the caller's own token reached the process");
            let claims = claims(&given);
            assert_eq!(claims["sub"], user, "{claims}");
            assert_eq!(claims["aud"], STDIO_AUDIENCE, "{claims}");
        }
    }
    for user in ["alice", "bob"] {
        assert_eq!(provider.granted(TOKEN_EXCHANGE, user).await, 2, "{user}");
    }

    // An API key carries nothing to exchange: said so, with no link to follow.
    let (status, body) = call(KEYED.to_owned(), "kim").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_required", "{body}");
    assert!(body["error"]["connect_url"].is_null(), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("JWT"),
        "{body}"
    );
}
