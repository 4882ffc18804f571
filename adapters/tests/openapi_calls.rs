//! Calls through `OpenApiUpstream::call` against a real HTTP API (axum, in the test, on
//! 127.0.0.1) that records every request: the exact method, path, query string,
//! headers, cookies and body bytes are asserted. Specs: the swagger petstore v3 from
//! the shared corpus, and `tests/data/calls-api.yaml` (each parameter location and
//! style, each body type, each auth scheme including OAuth2 client credentials against
//! a token endpoint served by the same app).

#[path = "openapi_common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use toolgate_adapters::openapi::{Credential, OpenApiConfig, OpenApiUpstream};
use toolgate_adapters::{CallContext, CallOutput, JsonObject, ToolError, Upstream};
use toolgate_test_support::{MockApi, Recorded, assert_tool_error};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\nfake-png-bytes";

/// The OAuth2 token endpoint's state.
#[derive(Default)]
struct Tokens {
    issued: AtomicUsize,
    reject_first: AtomicBool,
}

/// The recording API and its token endpoint's state.
struct Api {
    mock: MockApi,
    tokens: Arc<Tokens>,
}

impl std::ops::Deref for Api {
    type Target = MockApi;
    fn deref(&self) -> &MockApi {
        &self.mock
    }
}

async fn handle(tokens: Arc<Tokens>, seen: Recorded) -> Response {
    let json_ok =
        |v: Value| ([("content-type", "application/json")], v.to_string()).into_response();
    match seen.path.as_str() {
        "/oauth/token" => {
            let n = tokens.issued.fetch_add(1, Ordering::SeqCst) + 1;
            json_ok(
                json!({"access_token": format!("tok-oauth-{n}"), "token_type": "Bearer", "expires_in": 3600}),
            )
        }
        "/v1/blobs" => {
            let auth = seen.header("authorization").unwrap_or("");
            if auth == "Bearer tok-oauth-1" && tokens.reject_first.load(Ordering::SeqCst) {
                return (StatusCode::UNAUTHORIZED, "token revoked").into_response();
            }
            json_ok(json!({"stored": seen.body.len()}))
        }
        p if p.starts_with("/v1/items/") && seen.method == "DELETE" => {
            StatusCode::NO_CONTENT.into_response()
        }
        "/v1/items/a%20b%2Fc" => json_ok(json!({"id": "a b/c"})),
        "/v1/notes" => ([("content-type", "text/plain; charset=utf-8")], "noted").into_response(),
        "/v1/image" => ([("content-type", "image/png")], PNG).into_response(),
        "/v1/fail" => (
            StatusCode::NOT_FOUND,
            [("content-type", "application/json")],
            r#"{"message":"no such thing"}"#,
        )
            .into_response(),
        "/v1/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json_ok(json!({}))
        }
        "/api/v3/pet/7" if seen.method == "GET" => {
            json_ok(json!({"id": 7, "name": "doggie", "status": "available"}))
        }
        _ => json_ok(json!({"ok": true})),
    }
}

/// The API with `routes` of its own besides the recorded ones.
async fn serve_with(routes: axum::Router) -> Api {
    let tokens = Arc::new(Tokens::default());
    let state = tokens.clone();
    let mock = MockApi::start_with_routes(routes, move |seen| handle(state.clone(), seen)).await;
    Api { mock, tokens }
}

async fn serve() -> (Api, u16) {
    let api = serve_with(axum::Router::new()).await;
    let port = api.port;
    (api, port)
}

fn args(v: Value) -> JsonObject {
    v.as_object().unwrap().clone()
}

fn ctx() -> CallContext {
    CallContext::new(Duration::from_secs(10), "test")
}

/// The calls-api spec with the server's port filled in, written to a temp file.
fn calls_spec(port: u16) -> String {
    let text = std::fs::read_to_string(common::data("calls-api.yaml")).unwrap();
    let path = std::env::temp_dir().join(format!(
        "toolgate-calls-api-{}-{port}.yaml",
        std::process::id()
    ));
    std::fs::write(&path, text.replace("PORT", &port.to_string())).unwrap();
    path.to_string_lossy().into_owned()
}

async fn calls_upstream(port: u16) -> OpenApiUpstream {
    let mut config = OpenApiConfig::from_path(calls_spec(port));
    config.allow_private_networks = true;
    config.forward_headers = vec!["X-Request-Id".into()];
    config.auth = BTreeMap::from([
        (
            "bearer_auth".into(),
            Credential::Bearer {
                token: "tok-bearer".into(),
            },
        ),
        (
            "basic_auth".into(),
            Credential::Basic {
                username: "user".into(),
                password: "p@ss".into(),
            },
        ),
        (
            "api_key_header".into(),
            Credential::ApiKey {
                value: "key-h".into(),
            },
        ),
        (
            "api_key_query".into(),
            Credential::ApiKey {
                value: "key q".into(),
            },
        ),
        (
            "api_key_cookie".into(),
            Credential::ApiKey {
                value: "key-c".into(),
            },
        ),
        (
            "oauth_cc".into(),
            Credential::Oauth2ClientCredentials {
                client_id: "cid".into(),
                client_secret: "csecret".into(),
                scopes: vec!["blobs:write".into()],
                token_url: None,
            },
        ),
    ]);
    let (up, report) = OpenApiUpstream::load("calls", config).await.unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    up
}

/// Calls `tool` with `arguments` (an object); panics when the call fails.
async fn call(up: &OpenApiUpstream, tool: &str, arguments: Value) -> CallOutput {
    up.call(tool, args(arguments), ctx())
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e:?}"))
}

fn text_of(out: &CallOutput) -> String {
    out.object()["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test]
async fn parameters_in_every_location_and_style() {
    let (api, port) = serve().await;
    let up = calls_upstream(port).await;
    let out = call(
        &up,
        "getItem",
        json!({
            "id": "a b/c",
            "tags": ["a", "b c"],
            "ids": [1, 2],
            "words": ["x", "y"],
            "pipes": ["p", "q"],
            "filter": {"color": "red", "size": 2},
            "point": {"x": 1, "y": 2},
            "q": "hello world&more",
            "X-Trace-Id": "t-1",
            "session": "s1",
            "limit": 10
        }),
    )
    .await;
    let seen = api.last();
    seen.expect("GET", "/v1/items/a%20b%2Fc");
    assert_eq!(
        seen.query.as_deref(),
        Some(
            "tags=a&tags=b%20c&ids=1,2&words=x%20y&pipes=p|q&filter[color]=red&filter[size]=2&x=1&y=2&q=hello%20world%26more&limit=10"
        )
    );
    assert_eq!(seen.header("x-trace-id"), Some("t-1"));
    assert_eq!(seen.header("cookie"), Some("session=s1"));
    assert_eq!(seen.header("authorization"), Some("Bearer tok-bearer"));
    assert!(seen.body.is_empty());
    assert!(!out.is_error());
    assert_eq!(out.object()["structuredContent"], json!({"id": "a b/c"}));
    assert_eq!(text_of(&out), r#"{"id":"a b/c"}"#);

    call(
        &up,
        "styledPath",
        json!({"coords": [1, 2], "parts": ["a", "b"]}),
    )
    .await;
    let seen = api.last();
    assert_eq!(seen.path, "/v1/matrix/;coords=1;coords=2/label/.a,b");
    assert_eq!(seen.query, None);
}

#[tokio::test]
async fn json_bodies_and_name_collisions() {
    let (api, port) = serve().await;
    let up = calls_upstream(port).await;
    let tool = up
        .tools()
        .iter()
        .find(|t| t.name == "replaceItem")
        .cloned()
        .unwrap();
    let props = tool.raw["inputSchema"]["properties"].as_object().unwrap();
    let names: Vec<&String> = props.keys().collect();
    assert_eq!(names, ["id__path", "id__query", "id", "name", "count"]);
    assert_eq!(
        tool.raw["inputSchema"]["required"],
        json!(["id__path", "name"])
    );
    assert_eq!(tool.raw["annotations"]["idempotentHint"], true);

    call(
        &up,
        "replaceItem",
        json!({"id": "b1", "id__query": "q1", "name": "n", "count": null, "id__path": "i1"}),
    )
    .await;
    let seen = api.last();
    seen.expect("PUT", "/v1/items/i1");
    assert_eq!(seen.query.as_deref(), Some("id=q1"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.body, br#"{"id":"b1","name":"n","count":null}"#);

    // configured headers of the incoming request are forwarded, others are not
    let mut incoming = axum::http::HeaderMap::new();
    incoming.insert("x-request-id", "req-42".parse().unwrap());
    incoming.insert("x-other", "nope".parse().unwrap());
    up.call_with_headers(
        "replaceItem",
        args(json!({"id__path": "i2", "name": "m"})),
        ctx(),
        &incoming,
    )
    .await
    .unwrap();
    let seen = api.last();
    assert_eq!(seen.header("x-request-id"), Some("req-42"));
    assert_eq!(seen.header("x-other"), None);
    assert_eq!(seen.body, br#"{"name":"m"}"#);

    // a non-object body travels under `body`
    call(&up, "batch", json!({"body": [1, 2, 3]})).await;
    let seen = api.last();
    seen.expect("POST", "/v1/batch");
    assert_eq!(seen.body, b"[1,2,3]");
}

#[tokio::test]
async fn form_multipart_text_and_binary_bodies_with_auth() {
    let (api, port) = serve().await;
    let up = calls_upstream(port).await;

    call(
        &up,
        "createCharge",
        json!({
            "amount": 2000,
            "currency": "usd",
            "metadata": {"order_id": "6735"},
            "expand": ["customer", "balance_transaction"],
            "shipping": {"name": "Jo Ann", "address": {"city": "Zürich"}}
        }),
    )
    .await;
    let seen = api.last();
    seen.expect("POST", "/v1/charges");
    assert_eq!(
        seen.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let basic = base64::engine::general_purpose::STANDARD.encode("user:p@ss");
    assert_eq!(
        seen.header("authorization"),
        Some(format!("Basic {basic}").as_str())
    );
    assert_eq!(
        String::from_utf8(seen.body.clone()).unwrap(),
        "amount=2000&currency=usd&metadata%5Border_id%5D=6735&expand%5B0%5D=customer&expand%5B1%5D=balance_transaction&shipping%5Bname%5D=Jo+Ann&shipping%5Baddress%5D%5Bcity%5D=Z%C3%BCrich"
    );

    let file_b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    call(
        &up,
        "uploadDocument",
        json!({"title": "T", "file": file_b64, "meta": {"a": 1}}),
    )
    .await;
    let seen = api.last();
    assert_eq!(seen.path, "/v1/upload");
    assert_eq!(seen.query.as_deref(), Some("api_key=key%20q"));
    assert_eq!(seen.header("authorization"), None);
    let ct = seen.header("content-type").unwrap().to_owned();
    let boundary = ct
        .strip_prefix("multipart/form-data; boundary=")
        .expect("multipart content type");
    let mut expected = Vec::new();
    expected.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nT\r\n")
            .as_bytes(),
    );
    expected.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file.png\"\r\nContent-Type: image/png\r\n\r\n"
        )
        .as_bytes(),
    );
    expected.extend_from_slice(PNG);
    expected.extend_from_slice(
        format!(
            "\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n{{\"a\":1}}\r\n--{boundary}--\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(seen.body, expected);

    let out = call(&up, "addNote", json!({"body": "hello note"})).await;
    let seen = api.last();
    seen.expect("POST", "/v1/notes");
    assert_eq!(seen.header("content-type"), Some("text/plain"));
    assert_eq!(seen.header("cookie"), Some("auth_token=key-c"));
    assert_eq!(seen.body, b"hello note");
    assert_eq!(text_of(&out), "noted");
    assert!(out.object().get("structuredContent").is_none());

    let out = call(&up, "deleteItem", json!({"id": "i9"})).await;
    let seen = api.last();
    seen.expect("DELETE", "/v1/items/i9");
    assert_eq!(seen.header("x-api-key"), Some("key-h"));
    assert_eq!(seen.header("authorization"), None);
    assert!(!out.is_error());
    assert!(text_of(&out).contains("204"));
}

#[tokio::test]
async fn oauth2_client_credentials_token_is_fetched_cached_and_refreshed() {
    let (api, port) = serve().await;
    let up = calls_upstream(port).await;
    let blob = base64::engine::general_purpose::STANDARD.encode([0u8, 1, 2, 255]);
    call(&up, "putBlob", json!({"body": blob})).await;
    {
        let seen = api.requests();
        assert_eq!(seen.len(), 2, "token request, then the call");
        let token = &seen[0];
        token.expect("POST", "/oauth/token");
        let basic = base64::engine::general_purpose::STANDARD.encode("cid:csecret");
        assert_eq!(
            token.header("authorization"),
            Some(format!("Basic {basic}").as_str())
        );
        assert_eq!(
            token.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(
            token.body,
            b"grant_type=client_credentials&scope=blobs%3Awrite"
        );
        let call = &seen[1];
        call.expect("PUT", "/v1/blobs");
        assert_eq!(call.header("authorization"), Some("Bearer tok-oauth-1"));
        assert_eq!(
            call.header("content-type"),
            Some("application/octet-stream")
        );
        assert_eq!(call.body, [0u8, 1, 2, 255]);
    }
    // cached: no second token request
    call(&up, "putBlob", json!({"body": blob})).await;
    assert_eq!(api.tokens.issued.load(Ordering::SeqCst), 1);
    // a 401 drops the token; the call is retried once with a fresh one
    api.tokens.reject_first.store(true, Ordering::SeqCst);
    let out = call(&up, "putBlob", json!({"body": blob})).await;
    assert!(!out.is_error(), "{:?}", out.object());
    assert_eq!(api.tokens.issued.load(Ordering::SeqCst), 2);
    assert_eq!(
        api.last().header("authorization"),
        Some("Bearer tok-oauth-2")
    );
}

#[tokio::test]
async fn responses_errors_timeouts_and_validation() {
    let (api, port) = serve().await;
    let up = calls_upstream(port).await;

    let out = call(&up, "getImage", json!({})).await;
    assert_eq!(
        api.last().header("authorization"),
        None,
        "security: [] means no auth"
    );
    assert_eq!(out.object()["content"][0]["type"], "image");
    assert_eq!(out.object()["content"][0]["mimeType"], "image/png");
    assert_eq!(
        out.object()["content"][0]["data"],
        base64::engine::general_purpose::STANDARD
            .encode(PNG)
            .as_str()
    );

    let out = call(&up, "alwaysFails", json!({})).await;
    let text = assert_tool_error(&*out.object(), "HTTP 404");
    assert!(text.contains("no such thing"), "{text}");

    let started = std::time::Instant::now();
    let err = up
        .call(
            "slow",
            args(json!({})),
            CallContext::new(Duration::from_millis(300), "t"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(2));

    // Arguments are checked against the input schema by the gateway, for every kind of
    // tool, before the call reaches an adapter (see toolgate's `validate`).

    let err = up
        .call("noSuchTool", args(json!({})), ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::NotFound(_)));

    up.shutdown().await;
    up.shutdown().await;
    assert_eq!(up.connection(), toolgate_adapters::Connection::Closed);
    let err = up
        .call("getImage", args(json!({})), ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Unavailable(_)), "{err:?}");

    let up = calls_upstream(port).await;
    let cancelled = ctx();
    cancelled.cancel.cancel();
    let err = up
        .call("slow", args(json!({})), cancelled)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Cancelled(_)), "{err:?}");
}

#[tokio::test]
async fn swagger_petstore_v3_calls() {
    let Some(dir) = common::specs_dir() else {
        return;
    };
    let (api, port) = serve().await;
    let mut config =
        OpenApiConfig::from_path(dir.join("swagger-petstore3-openapi.yaml").to_string_lossy());
    config.base_url = Some(format!("http://127.0.0.1:{port}/api/v3"));
    config.allow_private_networks = true;
    config.auth = BTreeMap::from([("api_key".into(), Credential::ApiKey { value: "pk".into() })]);
    let (up, _) = OpenApiUpstream::load("petstore", config).await.unwrap();

    let out = call(&up, "getPetById", json!({"petId": 7})).await;
    let seen = api.last();
    seen.expect("GET", "/api/v3/pet/7");
    assert_eq!(seen.header("api_key"), Some("pk"));
    assert_eq!(out.object()["structuredContent"]["name"], "doggie");
    // clients validate structured results against the output schema: the lenient
    // schema accepts this answer although it lacks the spec's required `photoUrls`
    let tool = up
        .tools()
        .iter()
        .find(|t| t.name == "getPetById")
        .cloned()
        .unwrap();
    let output_schema = &tool.raw["outputSchema"];
    assert!(output_schema["properties"]["photoUrls"].is_object());
    assert!(jsonschema::is_valid(
        output_schema,
        &out.object()["structuredContent"]
    ));

    call(&up, "findPetsByTags", json!({"tags": ["x", "y"]})).await;
    let seen = api.last();
    assert_eq!(seen.path, "/api/v3/pet/findByTags");
    assert_eq!(seen.query.as_deref(), Some("tags=x&tags=y"));

    call(
        &up,
        "updatePetWithForm",
        json!({"petId": 7, "name": "Rex", "status": "sold"}),
    )
    .await;
    let seen = api.last();
    seen.expect("POST", "/api/v3/pet/7");
    assert_eq!(seen.query.as_deref(), Some("name=Rex&status=sold"));
    assert!(seen.body.is_empty());

    let b64 = base64::engine::general_purpose::STANDARD.encode("abc");
    call(
        &up,
        "uploadFile",
        json!({"petId": 7, "additionalMetadata": "m", "body": b64}),
    )
    .await;
    let seen = api.last();
    assert_eq!(seen.path, "/api/v3/pet/7/uploadImage");
    assert_eq!(seen.query.as_deref(), Some("additionalMetadata=m"));
    assert_eq!(
        seen.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(seen.body, b"abc");

    call(&up, "addPet", json!({"name": "doggie", "photoUrls": ["u"]})).await;
    let seen = api.last();
    seen.expect("POST", "/api/v3/pet");
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.body, br#"{"name":"doggie","photoUrls":["u"]}"#);

    // the spec's parameter/body collision: path `username` vs body `username`
    call(
        &up,
        "updateUser",
        json!({"username__path": "bob", "username": "bobby", "email": "b@x"}),
    )
    .await;
    let seen = api.last();
    seen.expect("PUT", "/api/v3/user/bob");
    assert_eq!(seen.body, br#"{"username":"bobby","email":"b@x"}"#);

    call(
        &up,
        "deletePet",
        json!({"petId": 7, "api_key": "header-param"}),
    )
    .await;
    let seen = api.last();
    seen.expect("DELETE", "/api/v3/pet/7");
    assert_eq!(seen.header("api_key"), Some("header-param"));
}

#[tokio::test]
async fn spec_from_url_with_relative_server_and_health() {
    // The API answers every other path with `{"ok": true}`: a tiny spec would not parse
    // from that, so the spec is a route of its own.
    let spec = json!({
        "openapi": "3.0.3",
        "info": {"title": "rel", "version": "1"},
        "servers": [{"url": "/rel-api?tenant=7"}],
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}},
        // schemes defined, but no `security` anywhere: configured credentials are sent anyway
        "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}}}
    });
    let routes = axum::Router::new().route(
        "/specs/rel.json",
        axum::routing::get(move || async move { axum::Json(spec) }),
    );
    let api = serve_with(routes).await;
    let port2 = api.port;

    let mut config = OpenApiConfig::from_url(format!("http://127.0.0.1:{port2}/specs/rel.json"));
    config.allow_private_networks = true;
    config.health = Some(toolgate_adapters::openapi::HealthConfig {
        path: "/healthz".into(),
    });
    config.auth = BTreeMap::from([("key".into(), Credential::ApiKey { value: "k1".into() })]);
    let (up, _) = OpenApiUpstream::load("rel", config.clone()).await.unwrap();
    call(&up, "ping", json!({})).await;
    let seen = api.last();
    assert_eq!(seen.path, "/rel-api/ping");
    assert_eq!(seen.query.as_deref(), Some("tenant=7"));
    assert_eq!(seen.header("x-key"), Some("k1"));

    up.check(Duration::from_secs(2)).await.unwrap();
    assert_eq!(api.last().path, "/rel-api/healthz");

    // without a health path: a TCP connect to the API's host
    config.health = None;
    let (up, _) = OpenApiUpstream::load("rel", config).await.unwrap();
    up.check(Duration::from_secs(2)).await.unwrap();
}
