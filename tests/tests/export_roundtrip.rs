//! A function-calling client that follows an export end to end: a tool with a
//! free-form `metadata` map, exported with `strict=true` (and for Gemini), shows the
//! map as a JSON-string argument; called back through `/v1/tool_calls`,
//! `/v1/tools/{name}/call` and `tool_invoke` with that string, the API behind the
//! OpenAPI upstream receives the decoded object.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use serde_json::{Value, json};
use toolgate_e2e::{Gateway, TempDir, rest_get, rest_post};

/// An API taking a record with a free-form string map, served by axum in the test.
const RECORD_SPEC: &str = r#"{
  "openapi": "3.0.3",
  "info": {"title": "records", "version": "1"},
  "paths": {"/records": {"post": {
    "operationId": "createRecord",
    "requestBody": {"required": true, "content": {"application/json": {"schema": {
      "type": "object",
      "properties": {
        "name": {"type": "string"},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"},
          "description": "Labels to attach"}
      },
      "required": ["name"]
    }}}},
    "responses": {"200": {"description": "the record", "content": {"application/json": {"schema": {"type": "object"}}}}}
  }}}
}"#;

type Bodies = Arc<Mutex<Vec<Value>>>;

async fn create(
    State(bodies): State<Bodies>,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    bodies.lock().unwrap().push(body.clone());
    axum::Json(json!({"id": 1, "saved": body}))
}

/// The schema node named `property` in `schema` (a property of the root, or of its
/// `body` argument when the adapter nests the request body).
fn property<'a>(schema: &'a Value, property: &str) -> &'a Value {
    let props = &schema["properties"];
    if props.get(property).is_some() {
        return &props[property];
    }
    let body = &props["body"];
    let body = body.get("anyOf").map_or(body, |b| &b[0]);
    &body["properties"][property]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_form_map_exported_as_a_json_string_reaches_the_api_as_an_object() {
    let bodies: Bodies = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let api = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/records", axum::routing::post(create))
        .with_state(bodies.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let dir = TempDir::new("export-roundtrip");
    let spec = dir.path().join("records.json");
    std::fs::write(&spec, RECORD_SPEC).expect("write the spec");
    let mut gateway = Gateway::start(json!({
        "upstreams": {"crm": {"openapi": {
            "spec_path": spec, "base_url": api, "allow_private_networks": true
        }}}
    }))
    .await;

    // The strict export: `metadata` is a string that says it carries JSON; nothing is
    // skipped, and tool_invoke's `arguments` is such a string too.
    let (status, list) = rest_get(&gateway, "/v1/tools?format=openai&strict=true", None).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["skipped"], json!([]), "{list}");
    let tools = list["tools"].as_array().expect("tools");
    let tool = tools
        .iter()
        .find(|t| t["function"]["name"] == "crm__createRecord")
        .expect("the record tool in strict form");
    let metadata = property(&tool["function"]["parameters"], "metadata");
    assert!(
        metadata["type"].to_string().contains("string"),
        "{metadata}"
    );
    let text = metadata["description"].as_str().unwrap_or_default();
    assert!(
        text.contains("JSON object (as a string)") && text.contains("decoded"),
        "{text}"
    );
    let invoke = tools
        .iter()
        .find(|t| t["function"]["name"] == "tool_invoke")
        .expect("tool_invoke in strict form");
    let arguments = &invoke["function"]["parameters"]["properties"]["arguments"];
    assert!(
        arguments["type"].to_string().contains("string"),
        "{arguments}"
    );

    // Gemini: the same string form.
    let (status, gemini) = rest_get(&gateway, "/v1/tools?format=gemini", None).await;
    assert_eq!(status, 200);
    assert_eq!(gemini["skipped"], json!([]), "{gemini}");
    let tool = gemini["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "crm__createRecord")
        .expect("the record tool in Gemini form");
    assert_eq!(property(&tool["parameters"], "metadata")["type"], "string");

    // The strict-mode model's call, as the export asks: metadata as a JSON string
    // (and `null`s for what it leaves out).
    let body_nested = tool["parameters"]["properties"].get("body").is_some();
    let call_arguments = |name: &str, meta: &str| {
        let inner = json!({"name": name, "metadata": meta});
        if body_nested {
            json!({"body": inner})
        } else {
            inner
        }
    };
    let sent = call_arguments("alpha", r#"{"team": "core", "tier": "gold"}"#);
    let (status, body) = rest_post(
        &gateway,
        "/v1/tool_calls",
        None,
        json!([{"id": "c1", "type": "function", "function": {
            "name": "crm__createRecord", "arguments": sent.to_string()
        }}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let content = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(!content.contains("invalid"), "{content}");
    assert_eq!(
        bodies.lock().unwrap().last().cloned(),
        Some(json!({"name": "alpha", "metadata": {"team": "core", "tier": "gold"}})),
        "the API received the decoded map"
    );

    // The same through /v1/tools/{name}/call and through tool_invoke, whose own
    // `arguments` is a JSON string in the strict export.
    let sent = call_arguments("beta", r#"{"k": "v"}"#);
    let (status, body) = rest_post(
        &gateway,
        "/v1/tools/crm__createRecord/call",
        None,
        json!({"arguments": sent}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["is_error"], false, "{body}");
    assert_eq!(
        bodies.lock().unwrap().last().cloned(),
        Some(json!({"name": "beta", "metadata": {"k": "v"}}))
    );
    let inner = call_arguments("gamma", r#"{"via": "invoke"}"#);
    let invoke_arguments = json!({"name": "crm__createRecord", "arguments": inner.to_string()});
    let (status, body) = rest_post(
        &gateway,
        "/v1/tool_calls",
        None,
        json!([{"id": "c2", "type": "function", "function": {
            "name": "tool_invoke", "arguments": invoke_arguments.to_string()
        }}]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        bodies.lock().unwrap().last().cloned(),
        Some(json!({"name": "gamma", "metadata": {"via": "invoke"}})),
        "{body}"
    );

    // A string that is not a JSON object is not guessed at: validation names it.
    let before = bodies.lock().unwrap().len();
    let sent = call_arguments("delta", "team=core");
    let (status, body) = rest_post(
        &gateway,
        "/v1/tools/crm__createRecord/call",
        None,
        json!({"arguments": sent}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_args", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("/metadata"),
        "{body}"
    );
    assert_eq!(
        bodies.lock().unwrap().len(),
        before,
        "nothing reached the API"
    );
    gateway.assert_alive();
}
