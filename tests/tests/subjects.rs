//! Who is calling within a tenant: a personal API key (`{hash, subject}`) and a JWT's
//! `sub` name a subject, and a session is its subject's own. Another person of the
//! same tenant, the tenant's shared key, or a token of the same person in another
//! tenant presenting the session's id is answered as for a session that does not
//! exist — on `/mcp` and on the REST sessions alike. A background task is its
//! subject's too, and the audit line of a call names the subject.

use std::time::Duration;

use axum::response::IntoResponse;
use serde_json::{Value, json};
use toolgate_e2e::{Gateway, McpSession, MockApi, TempDir, hash_key, rest_get, rest_post};

const ALICE: &str = "tg-subject-alice-0123456789abcdef";
const BOB: &str = "tg-subject-bob-0123456789abcdef";
const SHARED: &str = "tg-subject-shared-0123456789abcdef";
const SECRET: &str = "subjects-jwt-secret-0123456789abcdef";

fn jwt(claims: Value) -> String {
    let mut claims = claims;
    claims["exp"] = json!(4_102_444_800u64); // 2100-01-01
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("sign")
}

async fn gateway() -> Gateway {
    gateway_with(json!({})).await
}

async fn gateway_with(upstreams: Value) -> Gateway {
    Gateway::start(json!({
        "upstreams": upstreams,
        "jwt": {"hs256_secret": SECRET},
        "tenants": {
            "team": {
                "api_keys": [
                    {"hash": hash_key(ALICE), "subject": "alice"},
                    {"hash": hash_key(BOB), "subject": "bob"},
                    hash_key(SHARED),
                ],
                "allow": ["*"],
            },
            "other": {"allow": ["*"]},
        }
    }))
    .await
}

/// A 2025-11-25 session made with `token`.
async fn initialize(gateway: &Gateway, token: &str) -> McpSession {
    McpSession::connect_as(&gateway.mcp_url(), token, json!({}))
        .await
        .expect("initialize")
}

/// `tools/list` on `session`'s id presented with `token`: the status and the answer.
async fn list_on(session: &McpSession, token: &str) -> (u16, Value) {
    let exchange = session
        .with_key(Some(token))
        .rpc("tools/list", json!({}))
        .await;
    let answer = exchange.response.clone().unwrap_or(Value::Null);
    (exchange.status, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_its_subjects_own() {
    let gateway = gateway().await;
    let alice_jwt = jwt(json!({"tenant": "team", "sub": "alice"}));
    let carol_jwt = jwt(json!({"tenant": "team", "sub": "carol"}));
    let alice_elsewhere = jwt(json!({"tenant": "other", "sub": "alice"}));
    let team_jwt = jwt(json!({"tenant": "team"}));

    // A personal key's session: its own key and a JWT naming the same subject of the
    // same tenant reach it; nobody else does.
    let session = initialize(&gateway, ALICE).await;
    for token in [ALICE, alice_jwt.as_str()] {
        let (status, body) = list_on(&session, token).await;
        assert_eq!(status, 200, "{body}");
        assert!(body["result"]["tools"].is_array(), "{body}");
    }
    let mut unknown = session.clone();
    unknown.session_id = Some("no-such-session".into());
    let (_, missing) = list_on(&unknown, ALICE).await;
    for token in [
        BOB,
        SHARED,
        carol_jwt.as_str(),
        team_jwt.as_str(),
        alice_elsewhere.as_str(),
    ] {
        let (status, body) = list_on(&session, token).await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(
            body["error"], missing["error"],
            "another caller is told what a missing session is told"
        );
    }

    // The tenant's shared key makes a session of the tenant as a whole: no person's
    // credential reaches it.
    let shared = initialize(&gateway, SHARED).await;
    assert_eq!(list_on(&shared, SHARED).await.0, 200);
    assert_eq!(list_on(&shared, team_jwt.as_str()).await.0, 200);
    for token in [ALICE, BOB] {
        assert_eq!(list_on(&shared, token).await.0, 404);
    }

    // The REST sessions follow the same rule.
    let (status, created) = rest_post(&gateway, "/v1/sessions", Some(BOB), json!({})).await;
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"].as_str().expect("a session id");
    let path = format!("/v1/sessions/{id}/tools");
    assert_eq!(rest_get(&gateway, &path, Some(BOB)).await.0, 200);
    for token in [ALICE, SHARED] {
        let (status, body) = rest_get(&gateway, &path, Some(token)).await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["error"]["code"], "session_not_found", "{body}");
    }
}

/// A subject that is not a bounded, printable string is refused at the door with
/// the claim named (never the token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_subject_claim_is_refused() {
    let gateway = gateway().await;
    for sub in [json!(""), json!(42), json!("x".repeat(300))] {
        let token = jwt(json!({"tenant": "team", "sub": sub}));
        let (status, body) = rest_get(&gateway, "/v1/tools", Some(&token)).await;
        assert_eq!(status, 401, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains("`sub`"), "{body}");
    }
}

/// An HTTP API of one operation (`api__echo`), described by a spec on disk.
async fn echo_api() -> (MockApi, TempDir, Value) {
    let api =
        MockApi::start(
            |_request| async move { axum::Json(json!({"echoed": true})).into_response() },
        )
        .await;
    let dir = TempDir::new("subjects-spec");
    let spec = dir.path().join("echo.json");
    let document = json!({
        "openapi": "3.0.3",
        "info": {"title": "echo", "version": "1"},
        "paths": {"/echo": {"get": {
            "operationId": "echo",
            "responses": {"200": {"description": "ok", "content": {"application/json": {
                "schema": {"type": "object"}}}}}
        }}}
    });
    std::fs::write(&spec, document.to_string()).expect("write the spec");
    let upstream = json!({"api": {"openapi": {
        "spec_path": spec,
        "base_url": api.url(""),
        "allow_private_networks": true
    }}});
    (api, dir, upstream)
}

/// A background call is its subject's task: another person of the same tenant, or
/// the tenant's shared key, is told it does not exist. The call's audit line names
/// the subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_its_subjects_own_and_the_audit_line_names_it() {
    let (_api, _dir, upstreams) = echo_api().await;
    let gateway = gateway_with(upstreams).await;
    let (status, started) = rest_post(
        &gateway,
        "/v1/tools/api__echo/call",
        Some(ALICE),
        json!({"arguments": {}, "background": true}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let task = started["task_id"].as_str().expect("a task id").to_owned();
    let path = format!("/v1/tasks/{task}");
    let (status, own) = rest_get(&gateway, &path, Some(ALICE)).await;
    assert_eq!(status, 200, "{own}");
    let (_, missing) = rest_get(&gateway, "/v1/tasks/AAAAAAAAAAAAAAAAAAAAAA", Some(BOB)).await;
    for token in [BOB, SHARED] {
        let (status, body) = rest_get(&gateway, &path, Some(token)).await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["error"]["code"], missing["error"]["code"], "{body}");
    }

    // The plain call's audit line carries the subject (and never the key).
    let (status, called) = rest_post(
        &gateway,
        "/v1/tools/api__echo/call",
        Some(BOB),
        json!({"arguments": {}}),
    )
    .await;
    assert_eq!(status, 200, "{called}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let audit = loop {
        let logs = gateway.proc.logs();
        let line = logs
            .lines()
            .find(|l| l.contains("tool call") && l.contains("subject=\"bob\""))
            .map(str::to_owned);
        if let Some(line) = line {
            break line;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no audit line naming bob:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(audit.contains("tenant=team"), "{audit}");
    assert!(
        !gateway.proc.logs().contains(BOB),
        "a key never reaches the log"
    );
}
