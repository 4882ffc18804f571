//! OpenAPI upstreams through the real `toolgate` binary.
//!
//! A small Petstore API (axum, 127.0.0.1, in this test) implements a few operations of
//! the shared corpus's `swagger-petstore3-openapi.yaml` and records every request it
//! receives, so the tests can assert exactly what reached the API:
//!
//! 1. config-mounted upstream: `tools/list` shape, calls with exact method, path, query,
//!    headers and body bytes, JSON answers as `structuredContent`, 404 as `isError`,
//!    invalid arguments refused before any request;
//! 2. runtime registration through the admin API: 201 report, `list_changed` on an open
//!    session, persistence across restarts, deletion, bearer-token checks;
//! 3. bad specs (truncated, dangling `$ref`, private `spec_url`, 50 MB spec) are 422s
//!    that leave the catalog byte-identical;
//! 4. every spec of the shared corpus imports through the gateway with the expected
//!    tool count and valid, unique names.
//!
//! The corpus is read from `$TOOLGATE_SHARED/specs` (default `../shared/specs` relative
//! to the workspace root); when it is missing the tests skip with a notice, except
//! under `CI=true`, where that is a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolgate_e2e::{
    Gateway, McpSession, MockApi, Recorded, START_TIMEOUT, TempDir, assert_tool_error, first_text,
    heavy_lock, http, tool_names, toolgate_bin, wait_for, workspace_root,
};

const PETSTORE: &str = "swagger-petstore3-openapi.yaml";
/// Operations in the Petstore spec (its row in the corpus README).
const PETSTORE_OPERATIONS: usize = 19;
/// The Petstore operations that are HTTP GETs: exactly these are read-only tools.
const PETSTORE_GETS: &[&str] = &[
    "findPetsByStatus",
    "findPetsByTags",
    "getPetById",
    "getInventory",
    "getOrderById",
    "loginUser",
    "logoutUser",
    "getUserByName",
];
/// The credential configured for the spec's `api_key` security scheme.
const API_KEY: &str = "pets-secret-key-0123";
const ADMIN_TOKEN: &str = "admin-token-for-e2e-tests-0123456789";

// ---------------------------------------------------------------------------------
// The shared corpus

/// `$TOOLGATE_SHARED/specs` (default `<workspace>/../shared/specs`) when it holds the
/// Petstore spec; `None` after a notice when missing, a panic under `CI=true`.
fn specs_dir() -> Option<PathBuf> {
    toolgate_e2e::specs_dir(&[PETSTORE])
}

fn fixture(name: &str) -> String {
    workspace_root()
        .join("tests/fixtures/openapi")
        .join(name)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------
// The Petstore API

/// The Petstore API on 127.0.0.1:<free port>, recording every request.
struct PetApi(MockApi);

impl std::ops::Deref for PetApi {
    type Target = MockApi;
    fn deref(&self) -> &MockApi {
        &self.0
    }
}

/// The pet the API knows (id 1).
fn pet_one() -> Value {
    json!({"id": 1, "name": "doggie", "photoUrls": ["https://img.example/doggie.png"],
           "tags": [{"id": 3, "name": "good"}], "status": "available"})
}

/// Size of the oversized spec served at `/big-spec.json`.
const BIG_SPEC_BYTES: usize = 50 * 1024 * 1024;

impl PetApi {
    async fn start() -> PetApi {
        PetApi(MockApi::start(answer).await)
    }

    /// What a gateway config uses as `base_url`.
    fn base_url(&self) -> String {
        self.url("/api/v3")
    }
}

fn json_response(status: StatusCode, v: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

async fn answer(seen: Recorded) -> Response {
    let segments: Vec<&str> = seen.path.trim_start_matches('/').split('/').collect();
    match (seen.method.as_str(), segments.as_slice()) {
        ("GET", ["big-spec.json"]) => big_spec(),
        ("GET", ["api", "v3", "pet", "findByStatus"]) => {
            let status = seen
                .query
                .as_deref()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("status=")))
                .unwrap_or("available")
                .to_string();
            let pets: Vec<Value> = [pet_one()]
                .into_iter()
                .filter(|p| p["status"] == status.as_str())
                .collect();
            json_response(StatusCode::OK, Value::Array(pets))
        }
        ("GET", ["api", "v3", "pet", id]) => {
            if *id == "1" {
                json_response(StatusCode::OK, pet_one())
            } else {
                json_response(
                    StatusCode::NOT_FOUND,
                    json!({"code": 404, "message": format!("Pet {id} not found")}),
                )
            }
        }
        ("POST", ["api", "v3", "pet"]) => match serde_json::from_slice::<Value>(&seen.body) {
            Ok(pet) => json_response(StatusCode::OK, pet),
            Err(e) => json_response(
                StatusCode::BAD_REQUEST,
                json!({"code": 400, "message": e.to_string()}),
            ),
        },
        ("DELETE", ["api", "v3", "pet", _]) => StatusCode::OK.into_response(),
        _ => (StatusCode::NOT_FOUND, "no such route").into_response(),
    }
}

/// A valid spec padded to 50 MB, streamed in 1 MiB chunks without a Content-Length
/// (so only counting the bytes as they arrive can stop it).
fn big_spec() -> Response {
    let head =
        br#"{"openapi":"3.0.3","info":{"title":"big","version":"1"},"paths":{},"x-padding":""#;
    let tail = br#""}"#;
    let chunk = 1024 * 1024;
    let pad_chunks = (BIG_SPEC_BYTES - head.len() - tail.len()) / chunk;
    let parts = std::iter::once(Bytes::from_static(head))
        .chain((0..pad_chunks).map(move |_| Bytes::from(vec![b' '; chunk])))
        .chain(std::iter::once(Bytes::from_static(tail)))
        .map(Ok::<_, std::convert::Infallible>);
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(futures::stream::iter(parts)))
        .unwrap()
}

// ---------------------------------------------------------------------------------
// Gateway helpers

/// The `openapi:` upstream config for the Petstore API.
fn petstore_openapi(specs: &Path, api: &PetApi) -> Value {
    json!({
        "spec_path": specs.join(PETSTORE),
        "base_url": api.base_url(),
        "allow_private_networks": true,
        "auth": {"api_key": {"type": "api_key", "value": API_KEY}},
        "timeout": "20s"
    })
}

/// Sends an admin request; returns the status and the JSON body (`Null` when empty).
async fn admin(
    gw: &Gateway,
    method: reqwest::Method,
    path: &str,
    authorization: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = http()
        .request(method.clone(), gw.url(path))
        .timeout(Duration::from_secs(120));
    if let Some(a) = authorization {
        rb = rb.header("Authorization", a);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let v = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: {status} body is not JSON ({e}): {text}"))
    };
    (status, v)
}

fn bearer() -> String {
    format!("Bearer {ADMIN_TOKEN}")
}

/// [`admin`] with the admin token.
async fn as_admin(
    gw: &Gateway,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    admin(gw, method, path, Some(&bearer()), body).await
}

/// `tools/call` of `tool`: the call's result (a panic when the answer has none).
async fn call(session: &McpSession, tool: &str, arguments: Value) -> Value {
    let ex = session
        .call_tool(tool, arguments)
        .await
        .unwrap_or_else(|e| panic!("tools/call {tool}: {e:#}"));
    ex.result().clone()
}

/// [`call`] of a tool that must succeed (`isError` is not true).
async fn call_ok(session: &McpSession, tool: &str, arguments: Value) -> Value {
    let result = call(session, tool, arguments).await;
    assert_ne!(result["isError"], true, "{tool} failed: {result:#}");
    result
}

/// The tool definitions named `<upstream>__*`, by name.
fn tools_of(list: &Value, upstream: &str) -> BTreeMap<String, Value> {
    let prefix = format!("{upstream}__");
    list["tools"]
        .as_array()
        .expect("tools/list result has a tools array")
        .iter()
        .filter_map(|t| {
            let name = t["name"].as_str()?;
            name.starts_with(&prefix)
                .then(|| (name.to_string(), t.clone()))
        })
        .collect()
}

fn expected_pet_tools() -> BTreeSet<String> {
    [
        "updatePet",
        "addPet",
        "findPetsByStatus",
        "findPetsByTags",
        "getPetById",
        "updatePetWithForm",
        "deletePet",
        "uploadFile",
        "getInventory",
        "placeOrder",
        "getOrderById",
        "deleteOrder",
        "createUser",
        "createUsersWithListInput",
        "loginUser",
        "logoutUser",
        "getUserByName",
        "updateUser",
        "deleteUser",
    ]
    .iter()
    .map(|op| format!("pets__{op}"))
    .collect()
}

/// The session's `pets__*` tool names (sorted).
async fn pet_tool_names(session: &McpSession) -> BTreeSet<String> {
    let list = session.list_tools().await.expect("tools/list");
    tools_of(&list, "pets").into_keys().collect()
}

/// `pets__getPetById {petId: 1}` answers the pet, and the API saw exactly that call.
async fn assert_get_pet_works(session: &McpSession, api: &PetApi) {
    let before = api.count();
    let result = call_ok(session, "pets__getPetById", json!({"petId": 1})).await;
    assert_eq!(result["structuredContent"], pet_one(), "{result:#}");
    let seen = api.one_since(before);
    seen.expect("GET", "/api/v3/pet/1");
    assert_eq!(seen.single_header("api_key").as_deref(), Some(API_KEY));
}

/// Sends SIGTERM to the gateway and waits (bounded) for it to exit.
async fn stop(mut gw: Gateway) {
    // A child we spawned and still own.
    let _ = toolgate_e2e::sys::signal(gw.proc.pid(), libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if gw.proc.exited().is_some() {
            break;
        }
        if Instant::now() >= deadline {
            panic!(
                "toolgate did not exit within 30 s of SIGTERM:\n{}",
                gw.proc.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The bytes of a `tools/list` response as the gateway sent them (the JSON text of the
/// response message, always requested with the same id), for byte-for-byte comparison.
async fn raw_tools_list(session: &McpSession) -> Vec<u8> {
    use futures::StreamExt;
    let id = "raw-tools-list";
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}});
    let mut rb = http()
        .post(&session.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", &session.protocol)
        .timeout(Duration::from_secs(60))
        .body(body.to_string());
    if let Some(sid) = &session.session_id {
        rb = rb.header("Mcp-Session-Id", sid);
    }
    let resp = rb.send().await.expect("POST tools/list");
    assert_eq!(resp.status(), 200, "tools/list status");
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if !sse {
        return resp.bytes().await.expect("tools/list body").to_vec();
    }
    // SSE: the data of the event answering `id` (the stream may stay open after it)
    let mut stream = resp.bytes_stream();
    let mut buf = String::new();
    for _ in 0..100_000 {
        let Some(chunk) = stream.next().await else {
            break;
        };
        buf.push_str(&String::from_utf8_lossy(&chunk.expect("tools/list stream")));
        let normalized = buf.replace("\r\n", "\n");
        for event in normalized.split("\n\n") {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            let data = data.join("\n");
            let answers = serde_json::from_str::<Value>(&data)
                .is_ok_and(|m| m["id"] == id && m.get("result").is_some());
            if answers {
                return data.into_bytes();
            }
        }
    }
    panic!("no tools/list response in the stream: {buf}");
}

/// Waits up to `timeout` for a `notifications/tools/list_changed` frame on `rx`.
async fn wait_list_changed(rx: &mut mpsc::UnboundedReceiver<Value>, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    for _ in 0..1000 {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
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
// 1. End to end through the gateway

#[tokio::test]
async fn petstore_calls_reach_the_api_exactly() {
    let Some(specs) = specs_dir() else { return };
    let _heavy = heavy_lock().await;
    let api = PetApi::start().await;
    let mut gw = Gateway::start(json!({
        "call_timeout": "30s",
        // Every tool in the session's list (bounded in tokens otherwise).
        "sessions": {"initial_max_tokens": 1_000_000_000},
        "upstreams": {"pets": {"openapi": petstore_openapi(&specs, &api)}}
    }))
    .await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");

    // tools/list: all 19 operations, object input schemas, readOnlyHint on GETs
    let list = session.list_tools().await.expect("tools/list");
    let tools = tools_of(&list, "pets");
    assert_eq!(
        tools.keys().cloned().collect::<BTreeSet<_>>(),
        expected_pet_tools(),
        "pets__* tools"
    );
    assert_eq!(tools.len(), PETSTORE_OPERATIONS);
    assert_eq!(
        tool_names(&list).len(),
        PETSTORE_OPERATIONS,
        "only pets tools"
    );
    for (name, tool) in &tools {
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{name}: input schema {schema:#}");
        assert!(
            schema["properties"].is_object(),
            "{name}: input schema has properties: {schema:#}"
        );
        let op = name.trim_start_matches("pets__");
        let read_only = tool["annotations"]["readOnlyHint"] == true;
        assert_eq!(
            read_only,
            PETSTORE_GETS.contains(&op),
            "{name}: readOnlyHint {}",
            tool["annotations"]
        );
    }
    let get_pet = &tools["pets__getPetById"]["inputSchema"];
    assert_eq!(
        get_pet["properties"]["petId"]["type"], "integer",
        "{get_pet:#}"
    );
    assert!(
        get_pet["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("petId"))),
        "petId is required: {get_pet:#}"
    );
    let delete_pet = &tools["pets__deletePet"];
    assert!(
        delete_pet["inputSchema"]["properties"]["api_key"].is_object(),
        "deletePet takes its api_key header as an argument: {delete_pet:#}"
    );
    assert_eq!(delete_pet["annotations"]["destructiveHint"], true);
    assert!(api.requests().is_empty(), "listing tools calls nothing");

    // GET with a path parameter and the api_key credential; JSON object answer
    let result = call_ok(&session, "pets__getPetById", json!({"petId": 1})).await;
    assert_eq!(result["structuredContent"], pet_one(), "{result:#}");
    let text: Value = serde_json::from_str(&first_text(&result))
        .unwrap_or_else(|e| panic!("text is the JSON answer ({e}): {result:#}"));
    assert_eq!(text, pet_one());
    let seen = api.requests();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    let r = &seen[0];
    assert_eq!(r.method, "GET");
    assert_eq!(r.path, "/api/v3/pet/1");
    assert_eq!(r.query, None);
    assert_eq!(r.single_header("api_key").as_deref(), Some(API_KEY));
    assert_eq!(r.single_header("authorization"), None);
    assert_eq!(r.single_header("cookie"), None);
    assert_eq!(r.single_header("content-type"), None);
    assert!(r.body.is_empty(), "GET without a body");

    // GET with a query parameter; the operation's security (OAuth2) has no credential
    // here, so the api key is not sent
    let before = api.count();
    let result = call_ok(
        &session,
        "pets__findPetsByStatus",
        json!({"status": "available"}),
    )
    .await;
    let text: Value = serde_json::from_str(&first_text(&result)).expect("JSON text");
    assert_eq!(text, json!([pet_one()]));
    let r = api.one_since(before);
    r.expect_query("GET", "/api/v3/pet/findByStatus", Some("status=available"));
    assert_eq!(
        r.single_header("api_key"),
        None,
        "no credential for petstore_auth"
    );
    assert!(r.body.is_empty());

    // POST with a JSON body built from the flattened arguments
    let before = api.count();
    let new_pet = json!({"id": 7, "name": "Rex", "photoUrls": ["https://img.example/rex.png"],
                         "status": "pending"});
    let result = call_ok(&session, "pets__addPet", new_pet.clone()).await;
    assert_eq!(result["structuredContent"], new_pet, "{result:#}");
    let r = api.one_since(before);
    r.expect_query("POST", "/api/v3/pet", None);
    assert_eq!(
        r.single_header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        r#"{"id":7,"name":"Rex","photoUrls":["https://img.example/rex.png"],"status":"pending"}"#,
        "exact body bytes"
    );
    assert_eq!(r.single_header("api_key"), None);

    // DELETE with the api_key header parameter given by the caller; empty 200 answer
    let before = api.count();
    let result = call_ok(
        &session,
        "pets__deletePet",
        json!({"petId": 7, "api_key": "caller-key-7"}),
    )
    .await;
    assert!(
        first_text(&result).contains("200"),
        "empty 2xx answer is described: {result:#}"
    );
    let r = api.one_since(before);
    r.expect_query("DELETE", "/api/v3/pet/7", None);
    assert_eq!(r.single_header("api_key").as_deref(), Some("caller-key-7"));
    assert!(r.body.is_empty());
    assert_eq!(r.single_header("content-type"), None);

    // a 404 answer is a tool error naming the status (and quoting the body)
    let before = api.count();
    let result = call(&session, "pets__getPetById", json!({"petId": 404})).await;
    // the status in the text
    let text = assert_tool_error(&result, "404");
    assert!(
        text.contains("Pet 404 not found"),
        "body in the text: {text}"
    );
    assert!(result.get("structuredContent").is_none(), "{result:#}");
    let seen = api.since(before);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/api/v3/pet/404");

    // invalid arguments: a tool error listing each violation; the API sees nothing
    let before = api.count();
    let result = call(&session, "pets__getPetById", json!({"petId": "one"})).await;
    // names the argument and the expected type
    let text = assert_tool_error(&result, "/petId");
    assert_eq!(
        result["_meta"]["toolgate/error"], "invalid_args",
        "{result:#}"
    );
    assert!(
        text.contains("integer"),
        "names the argument and the expected type: {text}"
    );
    let result = call(
        &session,
        "pets__addPet",
        json!({"name": 5, "photoUrls": "not-a-list", "status": "lost"}),
    )
    .await;
    assert_eq!(
        result["_meta"]["toolgate/error"], "invalid_args",
        "{result:#}"
    );
    for at in ["/name", "/photoUrls", "/status"] {
        // lists the violation at each place
        assert_tool_error(&result, at);
    }
    let result = call(&session, "pets__getPetById", json!({})).await;
    assert_tool_error(&result, "petId");
    // a short grace period: a request sent anyway would arrive by now
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        api.since(before).len(),
        0,
        "invalid arguments must not reach the API: {:#?}",
        api.since(before)
    );

    gw.assert_alive();
}

// ---------------------------------------------------------------------------------
// 2. Runtime registration survives a restart

#[tokio::test]
async fn runtime_registration_survives_restarts() {
    let Some(specs) = specs_dir() else { return };
    let _heavy = heavy_lock().await;
    let api = PetApi::start().await;
    let data = TempDir::new("oa-data");
    let config = json!({
        "admin": {"token": ADMIN_TOKEN, "spec_dir": specs},
        "data_dir": data.path(),
        "call_timeout": "30s",
        "upstreams": {}
    });
    let registration = json!({"name": "pets", "openapi": petstore_openapi(&specs, &api)});

    let gw = Gateway::start(config.clone()).await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");
    assert_eq!(session.protocol, "2025-11-25");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (status, stream) = session.open_get_stream(tx).await.expect("GET stream");
    assert_eq!(status, 200, "standalone GET stream");
    assert!(pet_tool_names(&session).await.is_empty());

    // wrong or missing token: 401, nothing registered
    for auth in [
        None,
        Some("Bearer wrong-token-wrong-token-0000".to_string()),
        Some(format!("Bearer {ADMIN_TOKEN}x")),
        Some(ADMIN_TOKEN.to_string()),
        Some(format!("Basic {ADMIN_TOKEN}")),
    ] {
        let a = auth.as_deref();
        let (st, body) = admin(
            &gw,
            reqwest::Method::POST,
            "/admin/upstreams",
            a,
            Some(registration.clone()),
        )
        .await;
        assert_eq!(st, 401, "POST with authorization {a:?}: {body}");
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
        let (st, _) = admin(&gw, reqwest::Method::GET, "/admin/upstreams", a, None).await;
        assert_eq!(st, 401, "GET with authorization {a:?}");
        let (st, _) = admin(
            &gw,
            reqwest::Method::DELETE,
            "/admin/upstreams/pets",
            a,
            None,
        )
        .await;
        assert_eq!(st, 401, "DELETE with authorization {a:?}");
    }
    assert!(pet_tool_names(&session).await.is_empty());
    assert!(api.requests().is_empty());

    // register: 201 with the import report
    while rx.try_recv().is_ok() {}
    let (st, body) = as_admin(
        &gw,
        reqwest::Method::POST,
        "/admin/upstreams",
        Some(registration.clone()),
    )
    .await;
    assert_eq!(st, 201, "{body:#}");
    assert_eq!(body["name"], "pets", "{body:#}");
    assert_eq!(body["report"]["imported"], PETSTORE_OPERATIONS, "{body:#}");
    assert_eq!(
        body["report"]["operations"], PETSTORE_OPERATIONS,
        "{body:#}"
    );
    assert_eq!(body["report"]["skipped"], json!([]), "{body:#}");
    // The tool list's cost in tokens, counted with a real tokenizer: 19 tools with
    // descriptions and schemas are thousands of tokens, not a handful.
    let catalog_tokens = body["catalog_tokens"].as_u64().expect("catalog_tokens");
    assert!(
        (1_000..100_000).contains(&catalog_tokens),
        "catalog_tokens {catalog_tokens}: {body:#}"
    );
    let reported: BTreeSet<String> = body["tools"]
        .as_array()
        .expect("tools in the report")
        .iter()
        .map(|t| t.as_str().expect("tool name").to_string())
        .collect();
    assert_eq!(reported, expected_pet_tools(), "{body:#}");
    assert!(
        wait_list_changed(&mut rx, Duration::from_secs(15)).await,
        "no notifications/tools/list_changed on the open GET stream after registering"
    );
    assert_eq!(pet_tool_names(&session).await, expected_pet_tools());
    assert_get_pet_works(&session, &api).await;

    // registering the same name again is a conflict
    let (st, body) = as_admin(
        &gw,
        reqwest::Method::POST,
        "/admin/upstreams",
        Some(registration.clone()),
    )
    .await;
    assert_eq!(st, 409, "{body}");
    let (st, body) = as_admin(&gw, reqwest::Method::GET, "/admin/upstreams", None).await;
    assert_eq!(st, 200);
    let pets = body["upstreams"]
        .as_array()
        .and_then(|a| a.iter().find(|u| u["name"] == "pets"))
        .unwrap_or_else(|| panic!("pets in GET /admin/upstreams: {body:#}"));
    assert_eq!(pets["origin"], "admin", "{pets:#}");

    // restart: the registration is still there and callable
    stream.abort();
    drop(session);
    stop(gw).await;
    let gw = Gateway::start(config.clone()).await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize after restart");
    let names = wait_for("pets tools after restart", START_TIMEOUT, || {
        let session = session.clone();
        async move {
            let names = pet_tool_names(&session).await;
            (!names.is_empty()).then_some(names)
        }
    })
    .await;
    assert_eq!(names, expected_pet_tools(), "after restart");
    assert_get_pet_works(&session, &api).await;

    // delete: 204, tools gone, list_changed sent (and a second delete is a 404)
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (status, stream) = session.open_get_stream(tx).await.expect("GET stream");
    assert_eq!(status, 200, "standalone GET stream after restart");
    tokio::time::sleep(Duration::from_millis(200)).await;
    while rx.try_recv().is_ok() {}
    let (st, body) = as_admin(&gw, reqwest::Method::DELETE, "/admin/upstreams/pets", None).await;
    assert_eq!(st, 204, "{body}");
    assert!(
        wait_list_changed(&mut rx, Duration::from_secs(15)).await,
        "no notifications/tools/list_changed on the open GET stream after deleting"
    );
    stream.abort();
    assert!(pet_tool_names(&session).await.is_empty(), "tools gone");
    let (st, body) = as_admin(&gw, reqwest::Method::DELETE, "/admin/upstreams/pets", None).await;
    assert_eq!(st, 404, "{body}");
    let ex = session
        .call_tool("pets__getPetById", json!({"petId": 1}))
        .await
        .expect("call after delete");
    assert!(
        ex.error().is_some() || ex.result()["isError"] == true,
        "a deleted tool cannot be called: {ex:#?}"
    );

    // restart again: still gone
    drop(session);
    stop(gw).await;
    let gw = Gateway::start(config).await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize after second restart");
    // give a (wrongly) persisted import the time to finish before looking
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(pet_tool_names(&session).await.is_empty(), "still gone");
    let (st, body) = as_admin(&gw, reqwest::Method::GET, "/admin/upstreams", None).await;
    assert_eq!(st, 200);
    assert_eq!(body["upstreams"], json!([]), "{body:#}");
}

// ---------------------------------------------------------------------------------
// 3. Bad specs leave the catalog as it was

#[tokio::test]
async fn bad_specs_leave_the_catalog_untouched() {
    let Some(specs) = specs_dir() else { return };
    let _heavy = heavy_lock().await;
    let api = PetApi::start().await;
    let data = TempDir::new("oa-bad-data");
    // Runtime registrations read files from admin.spec_dir only: the specs used here.
    let spec_dir = TempDir::new("oa-bad-specs");
    for (from, name) in [
        (specs.join(PETSTORE), PETSTORE),
        (fixture("truncated.json").into(), "truncated.json"),
        (fixture("dangling-ref.json").into(), "dangling-ref.json"),
    ] {
        std::fs::copy(&from, spec_dir.path().join(name))
            .unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
    let fixture = |name: &str| spec_dir.path().join(name).display().to_string();
    let specs = spec_dir.path().to_path_buf();
    let mut gw = Gateway::start(json!({
        "admin": {"token": ADMIN_TOKEN, "spec_dir": spec_dir.path()},
        "data_dir": data.path(),
        "call_timeout": "30s",
        // Every tool in the session's list (bounded in tokens otherwise).
        "sessions": {"initial_max_tokens": 1_000_000_000},
        "upstreams": {"pets": {"openapi": petstore_openapi(&specs, &api)}}
    }))
    .await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");
    // one more, registered at run time
    let (st, body) = as_admin(
        &gw,
        reqwest::Method::POST,
        "/admin/upstreams",
        Some(json!({"name": "pets2", "openapi": petstore_openapi(&specs, &api)})),
    )
    .await;
    assert_eq!(st, 201, "{body:#}");

    let before = raw_tools_list(&session).await;
    assert_eq!(
        tool_names(&serde_json::from_slice::<Value>(&before).unwrap()["result"]).len(),
        2 * PETSTORE_OPERATIONS
    );
    let (_, admin_before) = as_admin(&gw, reqwest::Method::GET, "/admin/upstreams", None).await;
    let names_of = |v: &Value| -> Vec<String> {
        v["upstreams"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u["name"].as_str().map(String::from))
            .collect()
    };
    let registrations = data.path().join("registrations.json");
    let stored_before = std::fs::read(&registrations).expect("registrations.json");

    let ten = "http://10.0.0.1/spec.json";
    let loopback = api.url("/api/v3/openapi.json");
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        (
            "truncated",
            json!({"spec_path": fixture("truncated.json"), "base_url": "https://x.invalid"}),
            vec!["truncated.json".into(), "invalid JSON".into()],
        ),
        (
            "dangling-ref",
            json!({"spec_path": fixture("dangling-ref.json")}),
            vec![
                "'#/components/schemas/Nope' points to nothing".into(),
                "#/paths/~1pets/post/requestBody/content/application~1json/schema/$ref".into(),
            ],
        ),
        (
            "private-url",
            json!({"spec_url": ten, "timeout": "60s"}),
            vec!["10.0.0.1".into(), "allow_private_networks".into()],
        ),
        (
            "loopback-url",
            json!({"spec_url": loopback, "timeout": "60s"}),
            vec!["127.0.0.1".into(), "allow_private_networks".into()],
        ),
        (
            "too-big",
            json!({"spec_url": api.url("/big-spec.json"), "allow_private_networks": true,
                   "timeout": "120s"}),
            vec!["max_spec_bytes".into(), "big-spec.json".into()],
        ),
    ];
    for (case, openapi, must_contain) in cases {
        let name = format!("bad-{case}");
        let requests_before = api.count();
        let started = Instant::now();
        let (st, body) = as_admin(
            &gw,
            reqwest::Method::POST,
            "/admin/upstreams",
            Some(json!({"name": name, "openapi": openapi})),
        )
        .await;
        let took = started.elapsed();
        assert_eq!(st, 422, "{case}: {body:#}");
        assert_eq!(body["error"]["code"], "invalid_spec", "{case}: {body:#}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        for needle in &must_contain {
            assert!(
                message.contains(needle.as_str()),
                "{case}: the message should contain {needle:?}: {message}"
            );
        }
        match case {
            // refused before connecting: at once, and our loopback API saw nothing
            "private-url" | "loopback-url" => {
                assert!(
                    took < Duration::from_secs(10),
                    "{case}: refusal took {took:?} (a connection attempt?)"
                );
                assert_eq!(
                    api.since(requests_before).len(),
                    0,
                    "{case}: the guarded URL was contacted"
                );
            }
            "too-big" => {
                let seen = api.since(requests_before);
                assert_eq!(seen.len(), 1, "{case}: one fetch: {seen:#?}");
                assert_eq!(seen[0].path, "/big-spec.json");
            }
            _ => {}
        }
        let after = raw_tools_list(&session).await;
        assert!(
            after == before,
            "{case}: tools/list changed:\nbefore {}\nafter  {}",
            String::from_utf8_lossy(&before)
                .chars()
                .take(300)
                .collect::<String>(),
            String::from_utf8_lossy(&after)
                .chars()
                .take(300)
                .collect::<String>()
        );
        let (_, admin_after) = as_admin(&gw, reqwest::Method::GET, "/admin/upstreams", None).await;
        assert_eq!(names_of(&admin_after), names_of(&admin_before), "{case}");
        assert_eq!(
            std::fs::read(&registrations).expect("registrations.json"),
            stored_before,
            "{case}: stored registrations changed"
        );
        gw.assert_alive();
    }

    // still serving: both upstreams answer
    assert_get_pet_works(&session, &api).await;
    let result = call(&session, "pets2__getPetById", json!({"petId": 1})).await;
    assert_eq!(result["structuredContent"], pet_one());
    let r = http().get(gw.url("/readyz")).send().await.expect("readyz");
    assert_eq!(r.status(), 200);
    gw.assert_alive();
}

// ---------------------------------------------------------------------------------
// 4. Every spec in the shared corpus imports through the gateway

/// Operation counts per file, from the corpus README's table.
fn readme_counts(specs: &Path) -> BTreeMap<String, usize> {
    let readme = std::fs::read_to_string(specs.join("README.md")).expect("specs/README.md");
    let mut counts = BTreeMap::new();
    let mut operations_column = None;
    for line in readme.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() < 4 {
            continue;
        }
        if cells[0] == "file" {
            operations_column = cells.iter().position(|c| *c == "operations");
            continue;
        }
        let Some(col) = operations_column else {
            continue;
        };
        if cells[0].ends_with(".json") || cells[0].ends_with(".yaml") {
            let n = cells[col]
                .replace(',', "")
                .parse()
                .unwrap_or_else(|e| panic!("README row {line}: operations ({e})"));
            counts.insert(cells[0].to_string(), n);
        }
    }
    counts
}

/// A valid upstream name for a spec file: its stem with `.` as `_`, no `__`.
fn upstream_name(file: &str) -> String {
    let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
    let mut name = String::new();
    for c in stem.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && name.ends_with('_')) {
            name.push(c);
        }
    }
    name.chars().take(24).collect()
}

fn name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[tokio::test]
async fn every_corpus_spec_imports_through_the_gateway() {
    let Some(specs) = specs_dir() else { return };
    let _heavy = heavy_lock().await;
    let expected = readme_counts(&specs);
    let mut files: Vec<String> = std::fs::read_dir(&specs)
        .expect("read specs dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".json") || f.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "corpus files: {files:?}");
    let mut upstreams = serde_json::Map::new();
    let mut want: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for file in &files {
        let count = *expected
            .get(file)
            .unwrap_or_else(|| panic!("{file} has no row in specs/README.md"));
        let name = upstream_name(file);
        assert!(
            want.insert(name.clone(), (file.clone(), count)).is_none(),
            "two files map to upstream {name}"
        );
        upstreams.insert(
            name,
            json!({"openapi": {
                "spec_path": specs.join(file),
                "base_url": "https://corpus.invalid/base"
            }}),
        );
    }
    let total: usize = want.values().map(|(_, n)| n).sum();
    let dir = TempDir::new("oa-corpus");
    let config_path = dir.path().join("toolgate.yaml");
    let config = json!({
        "startup_timeout": "600s",
        "data_dir": dir.path().join("data"),
        "health": {"interval": "1h"},
        // The whole catalog in one session's list (the first list is bounded otherwise).
        "sessions": {"initial_max_tokens": 1_000_000_000},
        "upstreams": upstreams
    });
    std::fs::write(&config_path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();

    // `toolgate tools --format json`
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(toolgate_bin());
    cmd.arg("tools")
        .arg("--config")
        .arg(&config_path)
        .arg("--format")
        .arg("json")
        .env("TOOLGATE_LOG", "warn")
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(900), cmd.output())
        .await
        .expect("toolgate tools finished within 900 s")
        .expect("run toolgate tools");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "toolgate tools failed ({}):\n{stderr}",
        out.status
    );
    eprintln!(
        "toolgate tools: {} bytes of JSON in {:?}",
        out.stdout.len(),
        started.elapsed()
    );
    let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("toolgate tools --format json is not a JSON array ({e}); stderr:\n{stderr}")
    });
    check_corpus_catalog("toolgate tools", &tools, &want, total);

    // and the same catalog served at /mcp
    let gw = Gateway::spawn(config);
    gw.wait_ready(Duration::from_secs(900)).await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");
    let list = session.list_tools().await.expect("tools/list");
    let served: Vec<Value> = list["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !toolgate_e2e::is_protocol_tool(t["name"].as_str().unwrap_or_default()))
        .collect();
    check_corpus_catalog("/mcp tools/list", &served, &want, total);
    let names = |v: &[Value]| -> Vec<String> {
        let mut n: Vec<String> = v
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_default().to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&served), names(&tools), "/mcp and `tools` agree");
    check_definition_budgets(&gw, &session, &served).await;
}

/// Every corpus definition is listed within the default definition budget on every
/// surface and in every export format (counted with the tokenizer itself), its cost
/// marked exactly; every part an abbreviated one names comes back whole over REST and
/// through `tool_schema`.
async fn check_definition_budgets(gw: &Gateway, session: &McpSession, served: &[Value]) {
    const BUDGET: usize = 2_000;
    const RESULT_BUDGET: usize = 12_000;
    let tokens = |value: &Value| bpe_openai::o200k_base().count(&value.to_string());
    let mut abbreviated = Vec::new();
    for tool in served {
        let cost = tokens(tool);
        let name = tool["name"].as_str().unwrap_or_default();
        assert!(cost <= BUDGET, "{name}: {cost} tokens listed");
        assert_eq!(tool["_meta"]["toolgate/definitionTokens"], cost, "{name}");
        if tool["_meta"].get("toolgate/fullDefinitionTokens").is_some() {
            abbreviated.push(tool);
        }
    }
    assert!(
        abbreviated.len() >= 20,
        "abbreviated: {}",
        abbreviated.len()
    );
    for query in [
        "format=openai",
        "format=openai&strict=true",
        "format=responses",
        "format=anthropic",
        "format=gemini",
        "format=mcp",
    ] {
        let response = http()
            .get(gw.url(&format!("/v1/tools?{query}")))
            .send()
            .await
            .expect("GET /v1/tools");
        assert_eq!(response.status(), 200, "{query}");
        let list: Value = response.json().await.expect("JSON");
        let exported = list["tools"].as_array().expect("tools");
        assert!(exported.len() > 1_000, "{query}: {}", exported.len());
        for tool in exported {
            assert!(
                tokens(tool) <= BUDGET,
                "{query}: {} tokens: {tool}",
                tokens(tool)
            );
        }
    }
    let rest_schema = |name: &str, path: &str| {
        let url = gw.url(&format!("/v1/tools/{name}/schema"));
        let path = path.to_owned();
        async move {
            let response = http()
                .get(url)
                .query(&[("path", &path)])
                .send()
                .await
                .expect("GET schema");
            assert_eq!(response.status(), 200, "{path}");
            response.json::<Value>().await.expect("JSON")["schema"].clone()
        }
    };
    let mut parts = 0;
    for tool in abbreviated {
        let name = tool["name"].as_str().unwrap_or_default();
        let whole = rest_schema(name, "").await;
        let text = tool.to_string();
        let paths: BTreeSet<&str> = text
            .split("path \\\"")
            .skip(1)
            .filter_map(|piece| piece.find("\\\"").map(|end| &piece[..end]))
            .collect();
        assert!(!paths.is_empty(), "{name}: no path named");
        for path in paths {
            parts += 1;
            let part = rest_schema(name, path).await;
            assert_eq!(Some(&part), whole.pointer(path), "{name} {path}");
            let ex = session
                .call_tool("tool_schema", json!({"name": name, "path": path}))
                .await
                .expect("tool_schema");
            let answer = &ex.result()["structuredContent"];
            if answer["abbreviated"] == true {
                assert!(tokens(&answer["schema"]) <= RESULT_BUDGET, "{name} {path}");
            } else {
                assert_eq!(answer["schema"], part, "{name} {path}");
            }
        }
    }
    eprintln!(
        "definition budgets: every tool within {BUDGET}; {parts} abbreviated parts retrieved"
    );
}

/// Asserts the total, per-upstream counts, and unique valid names of a corpus catalog.
fn check_corpus_catalog(
    what: &str,
    tools: &[Value],
    want: &BTreeMap<String, (String, usize)>,
    total: usize,
) {
    let mut names = BTreeSet::new();
    let mut per_upstream: BTreeMap<String, usize> = BTreeMap::new();
    for t in tools {
        let name = t["name"].as_str().unwrap_or_default();
        assert!(
            name_ok(name),
            "{what}: name {name:?} does not match ^[A-Za-z0-9_-]{{1,64}}$"
        );
        assert!(
            names.insert(name.to_string()),
            "{what}: duplicate name {name}"
        );
        assert_eq!(
            t["inputSchema"]["type"], "object",
            "{what}: {name}: input schema root"
        );
        let upstream = t["_meta"]["toolgate/upstream"]
            .as_str()
            .map(String::from)
            .or_else(|| name.split_once("__").map(|(u, _)| u.to_string()))
            .unwrap_or_default();
        assert!(
            name.starts_with(&format!("{upstream}__")),
            "{what}: {name} is not prefixed with its upstream {upstream}"
        );
        *per_upstream.entry(upstream).or_default() += 1;
    }
    let mut wrong = Vec::new();
    for (upstream, (file, n)) in want {
        let got = per_upstream.get(upstream).copied().unwrap_or(0);
        if got != *n {
            wrong.push(format!("{file} ({upstream}): {got} tools, README says {n}"));
        }
    }
    let unknown: Vec<&String> = per_upstream
        .keys()
        .filter(|u| !want.contains_key(*u))
        .collect();
    assert!(
        wrong.is_empty() && unknown.is_empty(),
        "{what}: per-spec counts differ:\n{}\nunknown upstreams: {unknown:?}",
        wrong.join("\n")
    );
    assert_eq!(tools.len(), total, "{what}: total tools");
}

// ---------------------------------------------------------------------------------
// Memory: a large spec whose definitions are shared deeply

/// A `kB` field of a process's `/proc/<pid>/status` (`VmHWM`, `RssFile`), Linux only.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.split(':').next() == Some(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// How long a debug build may take to be ready on the large spec beside other tests.
const LARGE_IMPORT_READY: Duration = Duration::from_secs(240);

/// A 4 MB Swagger 2.0 spec shaped like a cluster API (generated: hundreds of
/// operations reaching one six-level definition tree, each tool's flattened schema up
/// to ~190 KB) is imported, listed and called within 150 MB of peak resident memory:
/// the inlined schemas are held once, shared by the upstream and the catalog, and an
/// operation keeps only what sending a request needs (before: ~560 MB).
///
/// What is bounded is the memory the gateway allocates for it, imported and listed:
/// its peak RSS less the pages of its mapped binary and libraries, which a debug
/// build (what tests run) has three times a release build's. The bench's `serve
/// generated cluster API` row measures the same of the release binary.
#[tokio::test]
async fn a_large_swagger_spec_with_shared_definitions_is_served_within_150_mb() {
    const PEAK_MB: u64 = 150;
    let _heavy = heavy_lock().await;
    let api = MockApi::start(|seen: Recorded| async move {
        let name = seen.path.rsplit('/').next().unwrap_or("").to_owned();
        json_response(
            StatusCode::OK,
            json!({"kind": "Deployment", "metadata": {"name": name}}),
        )
    })
    .await;
    let dir = TempDir::new("cluster-spec");
    let spec = toolgate_test_support::cluster_spec::cluster_api_swagger();
    let operations: usize = spec["paths"]
        .as_object()
        .expect("paths")
        .values()
        .map(|item| {
            ["get", "put", "post", "delete", "patch"]
                .iter()
                .filter(|m| item.get(**m).is_some())
                .count()
        })
        .sum();
    let path = dir.path().join("cluster-api.json");
    let text = serde_json::to_string_pretty(&spec).expect("spec text");
    assert!(text.len() > 3_500_000, "{} bytes", text.len());
    std::fs::write(&path, text).expect("write the spec");
    drop(spec);

    let gw = Gateway::spawn(json!({
        "call_timeout": "30s",
        // The whole catalog listed with whole definitions (what the memory bound is
        // about: the schemas themselves, held once).
        "sessions": {"initial_max_tokens": 1_000_000_000},
        "catalog": {"definition_max_tokens": 1_000_000_000},
        "upstreams": {"cluster": {"openapi": {
            "spec_path": path, "base_url": api.url("/"), "allow_private_networks": true
        }}}
    }));
    // Counting and fitting 816 definitions of up to 190 KB in every export format
    // takes this debug build ~15 s alone on two cores, and several times that beside
    // the other tests: readiness gets a bound of its own.
    gw.wait_ready(LARGE_IMPORT_READY).await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");
    let list = session.list_tools().await.expect("tools/list");
    let tools = tools_of(&list, "cluster");
    assert_eq!(tools.len(), operations, "one tool per operation");
    // The deepest tool keeps its whole (budget-bounded) schema.
    let create = &tools["cluster__createAppsV1NamespacedDeployment"];
    let size = create.to_string().len();
    assert!(
        size > 100_000,
        "createAppsV1NamespacedDeployment: {size} bytes"
    );
    let template = &create["inputSchema"]["properties"]["spec"]["properties"]["template"];
    assert!(
        template["properties"]["spec"].is_object(),
        "the pod template is inlined: {template:#}"
    );

    // Imported and listed: the memory this spec costs. (The first call below loads
    // the token counter's tables, a fixed cost whatever the catalog.)
    let pid = gw.proc.pid();
    let peak = status_kb(pid, "VmHWM").expect("VmHWM of the gateway");
    let mapped = status_kb(pid, "RssFile").expect("RssFile of the gateway");
    let allocated = peak.saturating_sub(mapped);
    eprintln!(
        "gateway peak RSS with the cluster API imported and listed: {} MB ({} MB of it its \
         mapped binary)",
        peak / 1024,
        mapped / 1024
    );
    assert!(
        allocated <= PEAK_MB * 1024,
        "peak RSS {} MB less {} MB of mapped files: {} MB, over {PEAK_MB} MB",
        peak / 1024,
        mapped / 1024,
        allocated / 1024
    );

    // Calls still build the exact request from what the operations kept.
    let before = api.count();
    let result = call_ok(
        &session,
        "cluster__readAppsV1NamespacedDeployment",
        json!({"namespace": "prod", "name": "web", "pretty": "true"}),
    )
    .await;
    assert_eq!(result["structuredContent"]["metadata"]["name"], "web");
    api.one_since(before).expect_query(
        "GET",
        "/apis/apps/v1/namespaces/prod/deployments/web",
        Some("pretty=true"),
    );
    let before = api.count();
    call_ok(
        &session,
        "cluster__createAppsV1NamespacedDeployment",
        json!({"namespace": "prod", "apiVersion": "apps/v1", "kind": "Deployment", "dryRun": "All"}),
    )
    .await;
    let seen = api.one_since(before);
    seen.expect_query(
        "POST",
        "/apis/apps/v1/namespaces/prod/deployments",
        Some("dryRun=All"),
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&seen.body).expect("a JSON body"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment"})
    );
}

/// A run-time import of a large spec builds its catalog entries (every definition
/// counted and fitted in every export format: ≈ 20 s of a 24 s import in this debug
/// build) without holding the runtime's thread: a gateway with one worker thread (a
/// pod limited to one CPU) keeps answering `/healthz` meanwhile. Before, `/healthz`
/// went unanswered for the whole build (19.7 s of that import). The first
/// `tool_search` after it builds the search index of the 816 tools, also off the
/// runtime's thread (before: a `/healthz` sent meanwhile waited 212 ms of a 244 ms
/// search). What is compared is two durations of the same run — the slowest
/// `/healthz` against the work it ran beside — so a slow machine moves both.
#[tokio::test]
async fn a_large_run_time_import_leaves_a_one_thread_gateway_answering() {
    let _heavy = heavy_lock().await;
    let specs = TempDir::new("one-thread-specs");
    let data = TempDir::new("one-thread-data");
    std::fs::write(
        specs.path().join("cluster.json"),
        toolgate_test_support::cluster_spec::cluster_api_swagger_text(),
    )
    .expect("write the spec");
    let gw = Gateway::start_with_env(
        json!({
            "admin": {"token": ADMIN_TOKEN, "spec_dir": specs.path()},
            "data_dir": data.path(),
            // Whole definitions counted and fitted: the long build this is about.
            "catalog": {"definition_max_tokens": 1_000_000_000},
            "sessions": {"initial_max_tokens": 1_000_000_000},
            "upstreams": {}
        }),
        &[("TOKIO_WORKER_THREADS", "1")],
    )
    .await;

    let registration = as_admin(
        &gw,
        reqwest::Method::POST,
        "/admin/upstreams",
        Some(json!({"name": "cluster", "openapi": {
            "spec_path": "cluster.json",
            "base_url": "http://127.0.0.1:9/",
            "allow_private_networks": true
        }})),
    );
    // Bounded by the registration's own timeout (`admin`'s 120 s) and by count.
    let ((status, body), import, slowest, probes) =
        probing_health(&gw, Duration::from_millis(100), registration).await;
    assert_eq!(status, 201, "{body}");
    eprintln!(
        "run-time import of the cluster API with one worker thread: {import:?}; slowest of \
         {probes} /healthz meanwhile: {slowest:?}"
    );
    assert!(
        slowest * 4 < import,
        "/healthz took {slowest:?} to answer during an import of {import:?}: the catalog \
         build held the only runtime thread"
    );
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");
    let list = session.list_tools().await.expect("tools/list");
    assert_eq!(tools_of(&list, "cluster").len(), 816, "the imported tools");

    // Bounded by the session's request timeout and by count.
    let search = session.call_tool(
        "tool_search",
        json!({"query": "list the pods of a namespace"}),
    );
    let (found, searched, slowest, probes) =
        probing_health(&gw, Duration::from_millis(10), search).await;
    let found = found.expect("tool_search");
    assert!(
        found.result().to_string().contains("cluster__"),
        "{:?}",
        found.result()
    );
    eprintln!(
        "first tool_search over the cluster API with one worker thread: {searched:?}; \
         slowest of {probes} /healthz meanwhile: {slowest:?}"
    );
    // Half, not a quarter as above: the build is a few hundred milliseconds, and a
    // probe it held waits for nearly all of it (212 ms of 244 ms with it on the
    // runtime's thread).
    assert!(
        slowest * 2 < searched,
        "/healthz took {slowest:?} to answer during a first search of {searched:?}: the \
         search index build held the only runtime thread"
    );
}

/// Runs `work` while asking `gw`'s `/healthz` every `every` (each answer must be 200),
/// and gives `work`'s answer, how long it took, and the slowest `/healthz` answer
/// with their count. A probe in flight when `work` ends is waited for: the one a
/// stalled runtime held would answer at about the same time.
async fn probing_health<T>(
    gw: &Gateway,
    every: Duration,
    work: impl std::future::Future<Output = T>,
) -> (T, Duration, Duration, u32) {
    let started = Instant::now();
    let client = http();
    let done = std::cell::Cell::new(false);
    let probing = async {
        let (mut slowest, mut probes) = (Duration::ZERO, 0);
        // Bounded by `work`'s own timeout and by count.
        while !done.get() && probes < 6_000 {
            let sent = Instant::now();
            let answer = client
                .get(gw.url("/healthz"))
                .send()
                .await
                .expect("GET /healthz");
            assert_eq!(answer.status(), 200, "/healthz");
            slowest = slowest.max(sent.elapsed());
            probes += 1;
            tokio::time::sleep(every).await;
        }
        (slowest, probes)
    };
    let working = async {
        let answer = work.await;
        done.set(true);
        (answer, started.elapsed())
    };
    let ((answer, took), (slowest, probes)) = tokio::join!(working, probing);
    (answer, took, slowest, probes)
}
