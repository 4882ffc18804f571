//! Each user reaches an OAuth-protected MCP upstream as themselves (`credentials:
//! oauth`): users of two tenants connect their own accounts through the gateway's
//! connect links (a browser signed in at the upstream's authorization server as that
//! user), and every call reaches the upstream with the caller's own token — over
//! 1,000 interleaved calls, never another's. A user who has not connected is answered
//! `authorization_required` with a link of their own; a used link is dead; a
//! disconnect revokes the token; a token about to expire is refreshed; tokens kept in
//! Redis serve every replica and outlive a restarted one.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::oauth_upstream::{OAuthUpstream, assert_each_calls_as_itself, connect_as};
use toolgate_e2e::{
    Gateway, McpSession, hash_key, python, require, rest_get, rest_post, run_python,
};

const ALICE: &str = "tg-oauth-alice-0123456789abcdef";
const BOB: &str = "tg-oauth-bob-0123456789abcdef";
const CAROL: &str = "tg-oauth-carol-0123456789abcdef";
const OUTSIDER: &str = "tg-oauth-outsider-0123456789abcdef";
const TOOL: &str = "gh__whoami";

fn config(upstream: &OAuthUpstream) -> Value {
    let key = |key: &str, subject: &str| json!({"hash": hash_key(key), "subject": subject});
    json!({
        "public_url": "@GATEWAY_BASE@",
        "upstreams": {"gh": {
            "streamable_http": {"url": upstream.mcp_url()},
            "credentials": "oauth",
            "oauth": {"allow_private_networks": true},
        }},
        "tenants": {
            "acme": {"api_keys": [key(ALICE, "alice"), key(BOB, "bob")]},
            "globex": {"api_keys": [key(CAROL, "carol")]},
            "outsiders": {"api_keys": [key(OUTSIDER, "olga")], "allow": ["other__*"]},
        }
    })
}

/// A connect link for the caller, from `POST /v1/connections/gh`.
async fn link(gateway: &Gateway, key: &str) -> String {
    let (status, body) = rest_post(gateway, "/v1/connections/gh", Some(key), json!({})).await;
    assert_eq!(status, 200, "{body}");
    body["connect_url"]
        .as_str()
        .expect("connect_url")
        .to_owned()
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

fn text(body: &Value) -> String {
    body["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The connect link of an `authorization_required` answer: its `connect_url`, which
/// the message (what a model reads) names too.
fn link_in(body: &Value) -> String {
    let link = body["error"]["connect_url"]
        .as_str()
        .unwrap_or_else(|| panic!("no connect_url in {body}"));
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(link), "the message names the link: {body}");
    link.to_owned()
}

/// Waits until the catalog lists the upstream's tool (the connection opened on
/// connecting lists it).
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

#[tokio::test]
async fn every_call_reaches_the_upstream_with_the_callers_own_token() {
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let gateway = Gateway::start(config(&upstream)).await;

    // Alice connects her account; the upstream's tool joins the catalog.
    connect_as(&link(&gateway, ALICE).await, "alice")
        .await
        .expect("alice connects");
    wait_listed(&gateway, ALICE).await;
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");

    // Bob (same tenant) has not connected: his own link, never Alice's token.
    let (status, body) = whoami(&gateway, BOB, "bob").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_required", "{body}");
    let bobs = link_in(&body);
    // Another site cannot submit his link from his browser (it would connect his
    // account to whoever holds the link); the link stays usable.
    for (name, value) in [
        ("origin", "https://elsewhere.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let response = toolgate_e2e::http()
            .post(&bobs)
            .header(name, value)
            .timeout(Duration::from_secs(15))
            .send()
            .await
            .expect("POST the connect link");
        assert_eq!(response.status().as_u16(), 403, "{name}: {value}");
        let page = response.text().await.unwrap_or_default();
        assert!(page.contains("another site"), "{page}");
    }
    assert_eq!(upstream.authorizations(), 1, "only Alice's so far");
    connect_as(&bobs, "bob").await.expect("bob connects");
    // A link works once.
    assert!(
        connect_as(&bobs, "bob").await.is_err(),
        "a used link is dead"
    );
    // Carol, of another tenant, calls over MCP first: a tool error carrying her link
    // (in `_meta` and in the text a model reads); she connects through it.
    let mcp = McpSession::connect_as(&gateway.mcp_url(), CAROL, json!({}))
        .await
        .expect("a session");
    let exchange = tokio::time::timeout(
        Duration::from_secs(30),
        mcp.call_tool(TOOL, json!({"expect": "carol"})),
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
    let carols = result["_meta"]["toolgate/connectUrl"]
        .as_str()
        .expect("toolgate/connectUrl")
        .to_owned();
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains(&carols)
    );
    assert_ne!(carols, bobs);
    connect_as(&carols, "carol").await.expect("carol connects");
    let exchange = mcp
        .call_tool(TOOL, json!({"expect": "carol"}))
        .await
        .expect("tools/call");
    let result = &exchange.response.as_ref().expect("an answer")["result"];
    assert_eq!(result["content"][0]["text"], "carol", "{result}");

    // 1,000 interleaved calls of the three, 16 at a time: each reaches the upstream
    // as its caller.
    let callers = [(ALICE, "alice"), (BOB, "bob"), (CAROL, "carol")];
    let before = upstream.calls().len();
    assert_each_calls_as_itself(1000, &callers, |key, user| {
        let gateway = &gateway;
        async move {
            let (status, body) = whoami(gateway, key, user).await;
            (status, text(&body))
        }
    })
    .await;
    let calls = upstream.calls();
    let reached = &calls[before..];
    assert_eq!(reached.len(), 1000);
    let mismatched = reached
        .iter()
        .filter(|(user, expected)| user != expected)
        .count();
    println!(
        "1000 interleaved calls of 3 users in 2 tenants: {mismatched} reached the upstream as another user"
    );
    assert_eq!(mismatched, 0);

    // Each sees their own connection.
    let (_, mine) = rest_get(&gateway, "/v1/connections", Some(BOB)).await;
    assert_eq!(mine["connections"][0]["upstream"], "gh", "{mine}");
    assert_eq!(mine["connections"][0]["connected"], true, "{mine}");

    // Bob disconnects: his token is revoked at the upstream, his next call needs him
    // to connect again, and the others are untouched.
    let revoked = upstream.revoked();
    let response = toolgate_e2e::http()
        .delete(gateway.url("/v1/connections/gh"))
        .bearer_auth(BOB)
        .send()
        .await
        .expect("disconnect");
    assert_eq!(response.status(), 204);
    assert!(
        upstream.revoked() > revoked,
        "the token was revoked at the upstream"
    );
    let (status, body) = whoami(&gateway, BOB, "bob").await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (403, json!("authorization_required"))
    );
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()));
    let (_, mine) = rest_get(&gateway, "/v1/connections", Some(BOB)).await;
    assert_eq!(mine["connections"][0]["connected"], false, "{mine}");

    // A tenant that may not use the upstream is answered as if it did not exist.
    let (status, hidden) =
        rest_post(&gateway, "/v1/connections/gh", Some(OUTSIDER), json!({})).await;
    let (status_none, none) = rest_post(
        &gateway,
        "/v1/connections/nothing",
        Some(OUTSIDER),
        json!({}),
    )
    .await;
    assert_eq!((status, status_none), (404, 404));
    assert_eq!(
        hidden["error"]["message"]
            .as_str()
            .map(|m| m.replace("'gh'", "'X'")),
        none["error"]["message"]
            .as_str()
            .map(|m| m.replace("'nothing'", "'X'")),
    );
    let (_, listed) = rest_get(&gateway, "/v1/connections", Some(OUTSIDER)).await;
    assert_eq!(listed["connections"], json!([]));
}

/// The upstream's tools in the caller's `GET /v1/tools?format=mcp`, by name, with
/// their `_meta`.
async fn listed_as(gateway: &Gateway, key: &str) -> std::collections::BTreeMap<String, Value> {
    let (status, body) = rest_get(gateway, "/v1/tools?format=mcp", Some(key)).await;
    assert_eq!(status, 200, "{body}");
    body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {body}"))
        .iter()
        .filter_map(|t| Some((t["name"].as_str()?.to_owned(), t["_meta"].clone())))
        .filter(|(name, _)| name.starts_with("gh__"))
        .collect()
}

/// Waits (bounded) until the caller lists exactly `names` of the upstream.
async fn wait_for_list(gateway: &Gateway, key: &str, names: &[&str]) {
    let mut seen = Default::default();
    for _ in 0..100 {
        seen = listed_as(gateway, key).await;
        if seen.keys().map(String::as_str).eq(names.iter().copied()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "expected {names:?}, listed {:?}",
        seen.keys().collect::<Vec<_>>()
    );
}

/// An upstream that lists each user a tool of their own: each connected user's
/// catalog is listed from their own connection (marked connected), a user who has not
/// connected sees only what every user's list has (marked as needing the user's own
/// authorization), and another user's own tool is, to everyone else, a tool that does
/// not exist — in the list, in `tool_search` and when called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_lists_the_tools_their_own_token_opens() {
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let gateway = Gateway::start(config(&upstream)).await;
    connect_as(&link(&gateway, ALICE).await, "alice")
        .await
        .expect("alice connects");
    wait_for_list(&gateway, ALICE, &["gh__alice_notes", "gh__whoami"]).await;
    connect_as(&link(&gateway, BOB).await, "bob")
        .await
        .expect("bob connects");
    wait_for_list(&gateway, BOB, &["gh__bob_notes", "gh__whoami"]).await;
    // Carol (another tenant) has not connected: only what both lists have.
    wait_for_list(&gateway, CAROL, &["gh__whoami"]).await;
    let carols = listed_as(&gateway, CAROL).await;
    assert_eq!(carols["gh__whoami"]["toolgate/authorization"], "user");
    assert_eq!(carols["gh__whoami"]["toolgate/connected"], Value::Null);
    for (key, own) in [(ALICE, "gh__alice_notes"), (BOB, "gh__bob_notes")] {
        let listed = listed_as(&gateway, key).await;
        for meta in listed.values() {
            assert_eq!(meta["toolgate/authorization"], "user", "{listed:?}");
            assert_eq!(meta["toolgate/connected"], true, "{listed:?}");
        }
        assert!(listed.contains_key(own));
    }

    // Alice calls her own tool; Bob calling it is answered as for a tool that does
    // not exist.
    let call = |key: &'static str, tool: &'static str| {
        let gateway = &gateway;
        async move {
            rest_post(
                gateway,
                &format!("/v1/tools/{tool}/call"),
                Some(key),
                json!({"arguments": {"expect": "x"}}),
            )
            .await
        }
    };
    let (status, body) = call(ALICE, "gh__alice_notes").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    let (status, foreign) = call(BOB, "gh__alice_notes").await;
    let (status_none, none) = call(BOB, "gh__nobodys_notes").await;
    assert_eq!((status, status_none), (404, 404), "{foreign} {none}");
    assert_eq!(
        foreign["error"]["message"]
            .as_str()
            .map(|m| m.replace("gh__alice_notes", "X")),
        none["error"]["message"]
            .as_str()
            .map(|m| m.replace("gh__nobodys_notes", "X")),
    );
    assert!(
        upstream.calls().iter().all(|(user, _)| user == "alice"),
        "only Alice's call reached the upstream"
    );

    // tool_search finds a user's own tool for that user only.
    let search = |key: &'static str| {
        let gateway = &gateway;
        async move {
            let (status, body) = rest_post(
                gateway,
                "/v1/tools/tool_search/call",
                Some(key),
                json!({"arguments": {"query": "private notes"}}),
            )
            .await;
            assert_eq!(status, 200, "{body}");
            body.to_string()
        }
    };
    let (alices, bobs) = (search(ALICE).await, search(BOB).await);
    assert!(
        alices.contains("gh__alice_notes") && !alices.contains("gh__bob_notes"),
        "{alices}"
    );
    assert!(
        bobs.contains("gh__bob_notes") && !bobs.contains("gh__alice_notes"),
        "{bobs}"
    );

    // A user who has not connected, calling a tool of the upstream their catalog
    // does not show, is asked to connect; a tenant that may not use the upstream is
    // answered as for any tool that does not exist.
    let (status, body) = call(CAROL, "gh__carol_notes").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_required", "{body}");
    assert!(link_in(&body).contains("/oauth/connect/"));
    let (status, hidden) = call(OUTSIDER, "gh__carol_notes").await;
    let (status_none, none) = call(OUTSIDER, "zz__carol_notes").await;
    assert_eq!((status, status_none), (404, 404), "{hidden} {none}");
    assert_eq!(
        hidden["error"]["message"]
            .as_str()
            .map(|m| m.replace("gh__", "zz__")),
        none["error"]["message"].as_str().map(str::to_owned),
    );

    // Bob disconnects: his own tool is gone for him, and Alice's list alone does not
    // make hers shared.
    let response = toolgate_e2e::http()
        .delete(gateway.url("/v1/connections/gh"))
        .bearer_auth(BOB)
        .send()
        .await
        .expect("disconnect");
    assert_eq!(response.status(), 204);
    wait_for_list(&gateway, BOB, &["gh__whoami"]).await;
    wait_for_list(&gateway, CAROL, &["gh__whoami"]).await;
    wait_for_list(&gateway, ALICE, &["gh__alice_notes", "gh__whoami"]).await;
}

/// What a real client (PyPI `mcp` 2.3, a session and 2026-07-28) makes of both
/// answers: a connected user's call goes through as that user; an unconnected one's
/// is a tool error the SDK does not raise on, carrying the user's own connect link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_client_takes_both_answers_in_both_modes() {
    let py = require!(python());
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let gateway = Gateway::start(config(&upstream)).await;
    connect_as(&link(&gateway, ALICE).await, "alice")
        .await
        .expect("alice connects");
    wait_listed(&gateway, ALICE).await;
    let url = gateway.mcp_url();
    for mode in ["legacy", "auto"] {
        let run = |key: &'static str| {
            let (py, url) = (py.clone(), url.clone());
            tokio::task::spawn_blocking(move || {
                run_python(
                    &py,
                    "call_as.py",
                    &[&url, key, mode, TOOL],
                    Duration::from_secs(120),
                )
            })
        };
        let own = run(ALICE).await.expect("the client ran");
        assert_eq!(own["raised"], false, "{mode}: {own:#}");
        assert_eq!(own["is_error"], false, "{mode}: {own:#}");
        assert_eq!(own["text"][0], "alice", "{mode}: {own:#}");
        if mode == "auto" {
            assert_eq!(own["protocol_version"], "2026-07-28", "{own:#}");
        }
        let refused = run(BOB).await.expect("the client ran");
        assert_eq!(refused["raised"], false, "{mode}: {refused:#}");
        assert_eq!(refused["is_error"], true, "{mode}: {refused:#}");
        assert_eq!(
            refused["meta"]["toolgate/error"], "authorization_required",
            "{mode}: {refused:#}"
        );
        let link = refused["meta"]["toolgate/connectUrl"]
            .as_str()
            .unwrap_or_default();
        assert!(link.contains("/oauth/connect/"), "{mode}: {refused:#}");
    }
    assert!(
        upstream.calls().iter().all(|(user, _)| user == "alice"),
        "only Alice reached it"
    );
}

#[tokio::test]
async fn a_token_about_to_expire_is_refreshed() {
    let upstream = OAuthUpstream::start(Duration::from_secs(2)).await;
    let gateway = Gateway::start(config(&upstream)).await;
    connect_as(&link(&gateway, ALICE).await, "alice")
        .await
        .expect("alice connects");
    wait_listed(&gateway, ALICE).await;
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    // (A token of 2 s is refreshed within a second of being issued: on a loaded
    // machine that may already have happened; only what follows is asserted.)
    let before = upstream.refreshes();
    // Past its lifetime: the next call refreshes first, and goes through.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    assert!(upstream.refreshes() > before, "the token was refreshed");
    assert_eq!(upstream.authorizations(), 1, "no second consent was needed");
}

#[tokio::test]
async fn tokens_in_redis_serve_every_replica_and_outlive_one() {
    let Some(url) = toolgate_e2e::redis::shared_redis().await else {
        return;
    };
    let prefix = toolgate_e2e::redis::unique_prefix("oauth");
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let mut shared = config(&upstream);
    shared["state"] = json!({"backend": "redis", "url": url, "key_prefix": prefix});
    shared["oauth"] = json!({"token_keys": ["MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="]});
    let first = Gateway::start(shared.clone()).await;
    connect_as(&link(&first, ALICE).await, "alice")
        .await
        .expect("alice connects through the first replica");
    wait_listed(&first, ALICE).await;
    // The second replica starts from the tool list the first kept, and calls with
    // the token the first stored.
    let second = Gateway::start(shared.clone()).await;
    wait_listed(&second, ALICE).await;
    let (status, body) = whoami(&second, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    // Bob has connected nowhere: no replica serves him with Alice's token.
    let (status, _) = whoami(&second, BOB, "bob").await;
    assert_eq!(status, 403);
    // He connects through the second: the list kept for everyone is now what both
    // users' lists have alike.
    connect_as(&link(&second, BOB).await, "bob")
        .await
        .expect("bob connects through the second replica");
    wait_for_list(&second, CAROL, &["gh__whoami"]).await;
    drop(first);
    // A replica started after the first stopped keeps serving Alice as herself, starts
    // from the list kept (no one's own tool in it), and a call of Alice's own tool
    // opens her connection there and goes through.
    let third = Gateway::start(shared).await;
    let (_, mine) = rest_get(&third, "/v1/connections", Some(ALICE)).await;
    assert_eq!(mine["connections"][0]["connected"], true, "{mine}");
    wait_for_list(&third, CAROL, &["gh__whoami"]).await;
    let (status, body) = rest_post(
        &third,
        "/v1/tools/gh__alice_notes/call",
        Some(ALICE),
        json!({"arguments": {"expect": "alice"}}),
    )
    .await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    wait_listed(&third, ALICE).await;
    let (status, body) = whoami(&third, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    assert!(
        upstream
            .calls()
            .iter()
            .all(|(user, expected)| user == expected)
    );
    toolgate_e2e::redis::delete_prefix(&url, &prefix).await;
}

/// An OAuth upstream a reload adds is served as one configured from the start: users
/// connect and call it, and its tool list is kept for the replicas that start later.
#[tokio::test]
async fn an_upstream_added_by_a_reload_keeps_its_list_for_every_replica() {
    let Some(url) = toolgate_e2e::redis::shared_redis().await else {
        return;
    };
    let prefix = toolgate_e2e::redis::unique_prefix("oauth-reload");
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let mut full = config(&upstream);
    full["state"] = json!({"backend": "redis", "url": url, "key_prefix": prefix});
    full["oauth"] = json!({"token_keys": ["MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="]});
    let mut without = full.clone();
    without["upstreams"] = json!({});
    let gateway = Gateway::start(without).await;
    let edited = full.to_string().replace("@GATEWAY_BASE@", &gateway.base);
    let mut reloaded = serde_json::from_str::<Value>(&edited).expect("config");
    reloaded["listen"] = json!(format!("127.0.0.1:{}", gateway.port));
    std::fs::write(&gateway.config_path, reloaded.to_string()).expect("rewrite the config");
    let mut listed = false;
    for _ in 0..100 {
        let (_, mine) = rest_get(&gateway, "/v1/connections", Some(ALICE)).await;
        if mine["connections"][0]["upstream"] == "gh" {
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed, "the reload never added the upstream");
    connect_as(&link(&gateway, ALICE).await, "alice")
        .await
        .expect("alice connects");
    wait_listed(&gateway, ALICE).await;
    let (status, body) = whoami(&gateway, ALICE, "alice").await;
    assert_eq!((status, text(&body)), (200, "alice".to_owned()), "{body}");
    // A replica started now lists the upstream's tools before anyone calls there.
    let second = Gateway::start(full).await;
    wait_listed(&second, CAROL).await;
    toolgate_e2e::redis::delete_prefix(&url, &prefix).await;
}

/// A client that takes URL-mode elicitations (PyPI `mcp` 2.3 with an elicitation
/// callback) is asked, mid-call, to send its user to the connect link; the user
/// connects (as in a browser), and the very same call goes on as that user — over a
/// 2025-11-25 session (`elicitation/create`) and over 2026-07-28 (the request inside
/// an input-required result).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_takes_url_elicitations_connects_its_user_mid_call() {
    let py = require!(python());
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let gateway = Gateway::start(config(&upstream)).await;
    // Someone has connected before: the upstream's shared tool is listed.
    connect_as(&link(&gateway, ALICE).await, "alice")
        .await
        .expect("alice connects");
    wait_listed(&gateway, ALICE).await;
    let url = gateway.mcp_url();
    for (mode, key, user) in [("legacy", BOB, "bob"), ("auto", CAROL, "carol")] {
        let (py, url) = (py.clone(), url.clone());
        let out = tokio::task::spawn_blocking(move || {
            run_python(
                &py,
                "elicit_connect.py",
                &[&url, key, mode, TOOL, user],
                Duration::from_secs(120),
            )
        })
        .await
        .expect("the client ran");
        assert_eq!(out["raised"], false, "{mode}: {out:#}");
        let elicited = &out["elicited"][0];
        assert_eq!(elicited["mode"], "url", "{mode}: {out:#}");
        assert!(
            elicited["url"]
                .as_str()
                .unwrap_or_default()
                .contains("/oauth/connect/"),
            "{mode}: {out:#}"
        );
        assert_eq!(out["connected"], "connected", "{mode}: {out:#}");
        assert_eq!(out["is_error"], false, "{mode}: {out:#}");
        assert_eq!(out["text"][0], user, "{mode}: {out:#}");
    }
    assert!(
        upstream
            .calls()
            .iter()
            .all(|(user, expected)| user == expected),
        "every call reached the upstream as its caller"
    );
}
