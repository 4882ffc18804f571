//! The plain-HTTP surface: `GET /v1/tools` in each format and `POST /v1/tools/{name}/call`,
//! under the same tenants and policy as `/mcp`.

use serde_json::{Value, json};
use toolgate_e2e::{
    Gateway, NodeDeps, everything_stdio_upstream, example_succeeded, hash_key, heavy_lock, http,
    require, rest_get as get, rest_post as post, run_shell_example, unique_marker, workspace_root,
};

const KEY: &str = "rest-tenant-key-0123456789";
/// Another tenant's key (sessions of one tenant are not found by another).
const OTHER_KEY: &str = "rest-other-tenant-key-0123456789";

/// `DELETE path` with bearer `key`: the status.
async fn delete(gateway: &Gateway, path: &str, key: &str) -> u16 {
    http()
        .delete(gateway.url(path))
        .bearer_auth(key)
        .timeout(std::time::Duration::from_secs(60))
        .send()
        .await
        .expect("DELETE")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_lists_in_every_format_and_calls_under_the_policy() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("rest"))},
        "tenants": {"t": {
            "api_keys": [hash_key(KEY)],
            "allow": ["everything__echo", "everything__get-sum", "everything__get-env"],
            "deny": ["everything__get-env"]
        }}
    }))
    .await;

    let (status, body) = get(&gateway, "/v1/tools?format=openai", None).await;
    assert_eq!(status, 401, "{body}");

    let expected = ["everything__echo", "everything__get-sum"];
    for (format, name_of) in [
        ("openai", "/function/name"),
        ("responses", "/name"),
        ("anthropic", "/name"),
        ("gemini", "/name"),
        ("mcp", "/name"),
    ] {
        let (status, body) = get(&gateway, &format!("/v1/tools?format={format}"), Some(KEY)).await;
        assert_eq!(status, 200, "{format}: {body}");
        let names: Vec<&str> = body["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t.pointer(name_of).and_then(Value::as_str))
            .filter(|n| !toolgate_e2e::is_protocol_tool(n))
            .collect();
        assert_eq!(names, expected, "{format}: {body}");
        assert_eq!(body["skipped"], json!([]), "{format}: {body}");
    }
    let (_, strict) = get(&gateway, "/v1/tools?format=openai&strict=true", Some(KEY)).await;
    let sum = strict["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["function"]["name"] == "everything__get-sum")
        .expect("get-sum")
        .clone();
    assert_eq!(sum["function"]["strict"], true, "{sum}");
    assert_eq!(
        sum["function"]["parameters"]["additionalProperties"], false,
        "{sum}"
    );
    let (status, body) = get(&gateway, "/v1/tools?format=nope", Some(KEY)).await;
    assert_eq!(status, 400, "{body}");

    let (status, body) = post(
        &gateway,
        "/v1/tools/everything__get-sum/call",
        Some(KEY),
        json!({"arguments": {"a": 2, "b": 3}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["is_error"], false, "{body}");
    assert_eq!(
        body["content"][0]["text"], "The sum of 2 and 3 is 5.",
        "{body}"
    );
    assert_eq!(body["usage"]["truncated"], false, "{body}");

    // A denied tool and a missing one get the same answer.
    let (denied_status, denied) = post(
        &gateway,
        "/v1/tools/everything__get-env/call",
        Some(KEY),
        json!({}),
    )
    .await;
    let (missing_status, missing) = post(
        &gateway,
        "/v1/tools/everything__nothing/call",
        Some(KEY),
        json!({}),
    )
    .await;
    assert_eq!((denied_status, missing_status), (404, 404));
    assert_eq!(denied["error"]["code"], missing["error"]["code"]);
    assert_eq!(
        denied["error"]["message"]
            .as_str()
            .unwrap()
            .replace("everything__get-env", "X"),
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .replace("everything__nothing", "X")
    );
    gateway.assert_alive();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_sessions_expand_within_the_allowed_set() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": everything_stdio_upstream(&deps, &unique_marker("rest-sessions"))},
        "tenants": {"t": {
            "api_keys": [hash_key(KEY)],
            "allow": ["everything__echo", "everything__get-sum", "everything__get-tiny-image"],
            "initial": ["everything__get-sum"]
        }, "o": {"api_keys": [hash_key(OTHER_KEY)], "allow": ["everything__*"]}}
    }))
    .await;
    let names = |tools: &Value| -> Vec<String> {
        tools
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| !toolgate_e2e::is_protocol_tool(n))
            .map(str::to_owned)
            .collect()
    };

    let (status, created) = post(&gateway, "/v1/sessions", Some(KEY), json!({})).await;
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    assert!(id.len() >= 22, "128-bit ids: {id}");
    assert_eq!(names(&created["tools"]), ["everything__get-sum"]);

    // Not selected yet in this session: the call says what to do.
    let (status, body) = post(
        &gateway,
        "/v1/tools/everything__echo/call",
        Some(KEY),
        json!({"arguments": {"message": "hi"}, "session": id}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "not_selected", "{body}");

    let (status, expanded) = post(
        &gateway,
        &format!("/v1/sessions/{id}/tools/expand"),
        Some(KEY),
        json!({"tool_names": ["everything__echo", "everything__get-sum", "unknown_tool"]}),
    )
    .await;
    assert_eq!(status, 200, "{expanded}");
    assert_eq!(expanded["success"], true);
    assert_eq!(expanded["expanded_tools"], json!(["everything__echo"]));
    assert_eq!(
        expanded["already_selected_tools"],
        json!(["everything__get-sum"])
    );
    assert_eq!(expanded["invalid_tools"], json!(["unknown_tool"]));
    assert_eq!(
        expanded["available_expandable_tools"],
        json!(["everything__get-tiny-image"])
    );

    let (status, listed) = get(&gateway, &format!("/v1/sessions/{id}/tools"), Some(KEY)).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(
        names(&listed["tools"]),
        ["everything__echo", "everything__get-sum"]
    );
    let (status, body) = post(
        &gateway,
        "/v1/tools/everything__echo/call",
        Some(KEY),
        json!({"arguments": {"message": "hi"}, "session": id}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"][0]["text"], "Echo: hi", "{body}");

    let (status, _) = get(&gateway, "/v1/sessions/not-a-session/tools", Some(KEY)).await;
    assert_eq!(status, 404);

    // Ending it: only its own tenant can, and then it is gone on every route.
    let session = format!("/v1/sessions/{id}");
    assert_eq!(delete(&gateway, &session, OTHER_KEY).await, 404);
    let (status, _) = get(&gateway, &format!("{session}/tools"), Some(KEY)).await;
    assert_eq!(status, 200, "another tenant's DELETE left it alone");
    assert_eq!(delete(&gateway, &session, KEY).await, 204);
    let (status, body) = get(&gateway, &format!("{session}/tools"), Some(KEY)).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = post(
        &gateway,
        "/v1/tools/everything__echo/call",
        Some(KEY),
        json!({"arguments": {"message": "hi"}, "session": id}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(delete(&gateway, &session, KEY).await, 404);
    gateway.assert_alive();
}

/// The "Function-calling clients" example of docs/endpoints.md, run as written (only
/// the gateway's URL differs) against server-everything: the tools as strict OpenAI
/// functions, then a `tool_calls` batch answered with the tool message it shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_function_calling_example_runs_as_written() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let page = std::fs::read_to_string(workspace_root().join("docs/endpoints.md"))
        .expect("docs/endpoints.md");
    let section = &page[page
        .find("## Function-calling clients (plain HTTP)")
        .expect("the section")..];
    let start = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let example = &section[start..start + section[start..].find("```").expect("its end")];
    let mut gateway = Gateway::start(json!({"upstreams": {"everything":
        everything_stdio_upstream(&deps, &unique_marker("rest-docs-example"))}}))
    .await;
    let script = example.replace("http://127.0.0.1:8080", &gateway.base);
    assert_ne!(script, example, "the example names http://127.0.0.1:8080");
    let output = run_shell_example(&script).await;
    let (stdout, _) = example_succeeded(&output);
    let mut answers = serde_json::Deserializer::from_str(&stdout).into_iter::<Value>();
    let tools = answers.next().expect("the tools").expect("JSON");
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {tools}"))
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"everything__echo"), "{names:?}");
    let answer = answers.next().expect("the batch's answer").expect("JSON");
    assert_eq!(
        answer["messages"],
        json!([{"role": "tool", "tool_call_id": "call_1", "content": "Echo: hi"}]),
        "{answer}"
    );
    gateway.assert_alive();
}
