//! Definitions a model can afford: a tool definition over `catalog.definition_max_tokens`
//! is listed abbreviated on every surface, `tool_schema` (MCP) and
//! `GET /v1/tools/{name}/schema` (REST) give back every part it leaves out, calls are
//! still checked against the whole schema, and the first `tools/list` costs at most
//! `sessions.initial_max_tokens` in open mode and with tenants, in every protocol
//! version. Token counts are checked with the tokenizer itself, not the gateway's word.

use std::collections::BTreeSet;

use axum::response::IntoResponse;
use serde_json::{Map, Value, json};
use toolgate_e2e::{
    Gateway, McpSession, MockApi, TempDir, hash_key, http, python, require, run_python,
};

const BUDGET: usize = 400;
const KEY: &str = "budget-tenant-key-0123456789";

fn tokens(text: &str) -> usize {
    bpe_openai::o200k_base().count(text)
}

/// A record schema nested `levels` deep, `width` typed properties per level.
fn nested(levels: usize, width: usize) -> Value {
    if levels == 0 {
        return json!({"type": "integer", "description": "a counter deep inside the record"});
    }
    let properties: Map<String, Value> = (0..width)
        .map(|i| (format!("part_{i}"), nested(levels - 1, width)))
        .collect();
    json!({"type": "object", "description": format!("part of the record, level {levels}"),
        "properties": properties})
}

/// An API with one operation whose body is deep (over budget) and many small ones.
fn spec() -> Value {
    let mut paths = Map::new();
    paths.insert(
        "/records".into(),
        json!({"post": {
            "operationId": "storeRecord",
            "summary": "Store a record",
            "requestBody": {"required": true, "content": {"application/json": {"schema": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "record": nested(4, 4)},
                "required": ["title", "record"]
            }}}},
            "responses": {"200": {"description": "stored"}}
        }}),
    );
    for i in 0..30 {
        paths.insert(
            format!("/items/{i}"),
            json!({"get": {
                "operationId": format!("getItem{i}"),
                "summary": format!("Read item number {i} of the inventory with all its details"),
                "parameters": [{"name": "verbose", "in": "query", "schema": {"type": "boolean"},
                    "description": "Return every field of the item, not only the main ones"}],
                "responses": {"200": {"description": "the item"}}
            }}),
        );
    }
    json!({"openapi": "3.0.3", "info": {"title": "records", "version": "1"},
        "paths": paths})
}

struct Setup {
    gw: Gateway,
    api: MockApi,
    _dir: TempDir,
}

async fn start(extra: Value) -> Setup {
    let api = MockApi::start(|_| async { axum::Json(json!({"ok": true})).into_response() }).await;
    let dir = TempDir::new("budgets");
    let spec_path = dir.path().join("records.json");
    std::fs::write(&spec_path, spec().to_string()).expect("write the spec");
    let mut config = json!({
        "catalog": {"definition_max_tokens": BUDGET},
        "upstreams": {"rec": {"openapi": {
            "spec_path": spec_path, "base_url": api.url(""), "allow_private_networks": true
        }}}
    });
    if let (Value::Object(config), Value::Object(extra)) = (&mut config, extra) {
        config.extend(extra);
    }
    let gw = Gateway::start(config).await;
    Setup { gw, api, _dir: dir }
}

/// Every `tool_schema` path a listed definition names.
fn stub_paths(definition: &Value) -> BTreeSet<String> {
    let text = definition.to_string();
    text.split("path \\\"")
        .skip(1)
        .filter_map(|piece| piece.find("\\\"").map(|end| piece[..end].to_owned()))
        .collect()
}

async fn rest_get(gw: &Gateway, path: &str, key: Option<&str>) -> (u16, Value) {
    let mut request = http().get(gw.url(path));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("GET");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn find<'a>(tools: &'a Value, name: &str) -> &'a Value {
    tools
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {tools}"))
}

/// A JSON pointer for a query string.
fn encoded(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn an_abbreviated_definition_gives_back_every_part_and_calls_check_the_whole() {
    let setup = start(json!({})).await;
    let gw = &setup.gw;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");
    let list = session.list_tools().await.expect("tools/list");
    let tools = &list["tools"];
    let store = find(tools, "rec__storeRecord");
    let text = store.to_string();
    // Within budget, counted exactly, and the whole cost said.
    assert!(tokens(&text) <= BUDGET, "{} tokens: {text}", tokens(&text));
    assert_eq!(store["_meta"]["toolgate/definitionTokens"], tokens(&text));
    let full_tokens = store["_meta"]["toolgate/fullDefinitionTokens"]
        .as_u64()
        .expect("the whole definition's cost");
    assert!(full_tokens as usize > BUDGET, "{full_tokens}");
    // The top-level parameters stay, with `required`.
    let properties = store["inputSchema"]["properties"]
        .as_object()
        .expect("properties");
    assert!(properties.contains_key("title") && properties.contains_key("record"));
    assert_eq!(store["inputSchema"]["required"], json!(["title", "record"]));
    // A small tool is listed whole: no stub, its cost marked.
    let small = find(tools, "rec__getItem0");
    assert!(stub_paths(small).is_empty());
    assert_eq!(
        small["_meta"]["toolgate/definitionTokens"],
        tokens(&small.to_string())
    );

    // Every part named comes back whole, the same over REST and MCP.
    let (status, whole) = rest_get(gw, "/v1/tools/rec__storeRecord/schema", None).await;
    assert_eq!(status, 200, "{whole}");
    let whole = whole["schema"].clone();
    assert!(tokens(&whole.to_string()) > BUDGET);
    let paths = stub_paths(store);
    assert!(!paths.is_empty(), "{paths:?}");
    for path in &paths {
        let (status, rest) = rest_get(
            gw,
            &format!("/v1/tools/rec__storeRecord/schema?path={}", encoded(path)),
            None,
        )
        .await;
        assert_eq!(status, 200, "{path}: {rest}");
        assert_eq!(Some(&rest["schema"]), whole.pointer(path), "{path}");
        let ex = session
            .call_tool(
                "tool_schema",
                json!({"name": "rec__storeRecord", "path": path}),
            )
            .await
            .expect("tool_schema");
        let answer = &ex.result()["structuredContent"];
        assert_eq!(answer["schema"], rest["schema"], "{path}");
    }
    // A path that is not there, and a pointer that is not one: said so.
    for path in ["/inputSchema/properties/nothing", "inputSchema"] {
        let ex = session
            .call_tool(
                "tool_schema",
                json!({"name": "rec__storeRecord", "path": path}),
            )
            .await
            .expect("tool_schema");
        assert_eq!(ex.result()["isError"], true, "{path}: {:?}", ex.result());
    }

    // Calls are checked against the whole schema: a string deep inside, where the
    // listing shows an open stub, is refused before the API sees anything...
    let deep = json!({"part_0": {"part_1": {"part_2": {"part_3": "not a number"}}}});
    let ex = session
        .call_tool("rec__storeRecord", json!({"title": "t", "record": deep}))
        .await
        .expect("tools/call");
    assert_eq!(ex.result()["isError"], true, "{:?}", ex.result());
    assert!(setup.api.requests().is_empty());
    // ... and a good one goes through with its body exact.
    let good = json!({"part_0": {"part_1": {"part_2": {"part_3": 7}}}});
    let ex = session
        .call_tool("rec__storeRecord", json!({"title": "t", "record": good}))
        .await
        .expect("tools/call");
    assert_ne!(ex.result()["isError"], true, "{:?}", ex.result());
    let seen = setup.api.requests();
    assert_eq!(seen.len(), 1);
    let body: Value = serde_json::from_slice(&seen[0].body).expect("a JSON body");
    assert_eq!(body, json!({"title": "t", "record": good}));

    // Every export format keeps every tool within budget, and says what was cut.
    for query in [
        "format=openai",
        "format=openai&strict=true",
        "format=responses",
        "format=anthropic",
        "format=gemini",
        "format=mcp",
    ] {
        let (status, list) = rest_get(gw, &format!("/v1/tools?{query}"), None).await;
        assert_eq!(status, 200, "{query}: {list}");
        let exported = list["tools"].as_array().expect("tools");
        assert!(exported.len() >= 31, "{query}: {}", exported.len());
        for tool in exported {
            let text = tool.to_string();
            assert!(
                tokens(&text) <= BUDGET,
                "{query}: {} tokens: {text}",
                tokens(&text)
            );
        }
        let costs = &list["definition_costs"];
        assert_eq!(
            costs["abbreviated"][0]["name"], "rec__storeRecord",
            "{costs}"
        );
        assert_eq!(
            costs["abbreviated"][0]["full_definition_tokens"],
            full_tokens
        );
        assert!(costs["full_tokens"].as_u64() > costs["listed_tokens"].as_u64());
    }
    // The upstream's totals.
    let upstream = gw.upstream("rec").await;
    let cost = &upstream["definition_tokens"];
    assert_eq!(cost["abbreviated"], 1, "{upstream}");
    assert!(
        cost["full"].as_u64() > cost["listed"].as_u64(),
        "{upstream}"
    );
}

/// A tenant may read the schema of what it may use only; anything else is answered as a
/// tool that does not exist, on both surfaces.
#[tokio::test]
async fn tool_schema_answers_a_hidden_tool_as_a_missing_one() {
    let setup = start(json!({
        "tenants": {"narrow": {"api_keys": [hash_key(KEY)], "allow": ["rec__getItem*"]}}
    }))
    .await;
    let gw = &setup.gw;
    let hidden = rest_get(gw, "/v1/tools/rec__storeRecord/schema", Some(KEY)).await;
    let missing = rest_get(gw, "/v1/tools/rec__noSuchTool/schema", Some(KEY)).await;
    assert_eq!(hidden.0, 404, "{}", hidden.1);
    assert_eq!(
        hidden.1.to_string().replace("rec__storeRecord", "X"),
        missing.1.to_string().replace("rec__noSuchTool", "X")
    );
    let (status, _) = rest_get(gw, "/v1/tools/rec__getItem1/schema", Some(KEY)).await;
    assert_eq!(status, 200);
    let session = McpSession::bare(&gw.mcp_url())
        .with_bearer(KEY)
        .initialize()
        .await
        .expect("initialize");
    let answer = |name: &'static str| {
        let session = &session;
        async move {
            let ex = session
                .call_tool("tool_schema", json!({"name": name}))
                .await
                .expect("tool_schema");
            let mut result = ex.result().clone();
            // Each answer has its own correlation id; nothing else may differ.
            result["_meta"]["toolgate/correlationId"] = Value::Null;
            result.to_string().replace(name, "X")
        }
    };
    assert_eq!(
        answer("rec__storeRecord").await,
        answer("rec__noSuchTool").await
    );
}

/// The first `tools/list` costs at most `sessions.initial_max_tokens` (protocol tools
/// included), in open mode and for a tenant, in every protocol version; the rest is
/// found with `tool_search` and added with `tool_expand_tools`.
#[tokio::test]
async fn the_first_tools_list_is_bounded_in_every_mode_and_version() {
    const FIRST: usize = 1_500;
    for tenants in [false, true] {
        let mut extra = json!({"sessions": {"initial_max_tokens": FIRST}});
        if tenants {
            extra["tenants"] = json!({"all": {"api_keys": [hash_key(KEY)], "initial": ["*"]}});
        }
        let setup = start(extra).await;
        let gw = &setup.gw;
        let key = tenants.then_some(KEY);
        let mut lists = Vec::new();
        for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
            let session = session_at(&gw.mcp_url(), version, key).await;
            lists.push((
                version,
                session.list_tools().await.expect("tools/list"),
                session,
            ));
        }
        let mut modern = McpSession::modern(&gw.mcp_url());
        if let Some(key) = key {
            modern = modern.with_bearer(key);
        }
        lists.push((
            "2026-07-28",
            modern.list_tools().await.expect("tools/list"),
            modern,
        ));
        for (version, list, session) in &lists {
            let tools = list["tools"].as_array().expect("tools");
            let cost: usize = tools.iter().map(|t| tokens(&t.to_string())).sum();
            assert!(cost <= FIRST, "{version} tenants={tenants}: {cost} tokens");
            assert_eq!(list["_meta"]["toolgate/listedTokens"], cost, "{version}");
            let unlisted = list["_meta"]["toolgate/unlistedTools"]
                .as_u64()
                .unwrap_or(0);
            assert!(unlisted > 0, "{version}: {list}");
            let names: BTreeSet<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
            for protocol in [
                "tool_search",
                "tool_expand_tools",
                "tool_schema",
                "tool_invoke",
            ] {
                assert!(names.contains(protocol), "{version}: {names:?}");
            }
            // Not listed, and found: by search, then added (sessions) or called by name.
            assert!(!names.contains("rec__getItem29"), "{version}: {names:?}");
            let ex = session
                .call_tool(
                    "tool_search",
                    json!({"query": "read item number 29 of the inventory"}),
                )
                .await
                .expect("tool_search");
            assert!(
                ex.result().to_string().contains("rec__getItem29"),
                "{version}: {:?}",
                ex.result()
            );
            if *version != "2026-07-28" {
                let ex = session
                    .call_tool(
                        "tool_expand_tools",
                        json!({"tool_names": ["rec__getItem29"]}),
                    )
                    .await
                    .expect("expand");
                assert_eq!(ex.result()["structuredContent"]["success"], true);
                let after = session.list_tools().await.expect("tools/list");
                assert!(
                    after.to_string().contains("\"rec__getItem29\""),
                    "{version}"
                );
            }
        }
    }
}

/// The Python SDK (`mcp` 2.3, both protocol modes) takes an abbreviated listing and its
/// cost marks, reads the left-out part with `tool_schema`, and its calls are checked
/// against the whole schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_takes_abbreviated_definitions_and_their_parts() {
    let py = require!(python());
    let setup = start(json!({})).await;
    let url = setup.gw.mcp_url();
    for mode in ["legacy", "auto"] {
        let out = tokio::task::spawn_blocking({
            let (py, url) = (py.clone(), url.clone());
            move || {
                run_python(
                    &py,
                    "budgeted_catalog.py",
                    &[&url, mode, "rec__storeRecord"],
                    std::time::Duration::from_secs(150),
                )
            }
        })
        .await
        .expect("the client ran");
        let definition = &out["definition"];
        assert!(
            tokens(&definition.to_string()) <= BUDGET + 20,
            "{mode}: {definition}"
        );
        assert!(
            definition["_meta"]["toolgate/fullDefinitionTokens"].as_u64() > Some(BUDGET as u64),
            "{mode}: {definition}"
        );
        assert!(
            out["tools"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("tool_schema"))),
            "{mode}: {out}"
        );
        let part = &out["schema"];
        assert_eq!(part["is_error"], false, "{mode}: {part}");
        assert_eq!(
            part["structured"]["schema"]["properties"]["part_0"]["properties"]["part_1"]["type"],
            "object",
            "{mode}: the whole sub-schema: {part}"
        );
        assert_eq!(out["good"]["is_error"], false, "{mode}: {out}");
        assert_eq!(out["bad"]["is_error"], true, "{mode}: {out}");
    }
    // Only the good calls reached the API.
    assert_eq!(setup.api.requests().len(), 2);
}

/// A session initialized with protocol `version` (optionally as a tenant).
async fn session_at(url: &str, version: &str, key: Option<&str>) -> McpSession {
    let mut session = McpSession::bare(url);
    if let Some(key) = key {
        session = session.with_bearer(key);
    }
    let ex = session
        .request(
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "budget-test", "version": "1"}}),
        )
        .await
        .expect("initialize");
    let result = ex.response.as_ref().expect("an answer")["result"].clone();
    assert_eq!(result["protocolVersion"], version, "{result}");
    session.protocol = version.to_owned();
    session.session_id = ex.session_id_header.clone();
    session
        .notify("notifications/initialized", None)
        .await
        .expect("initialized");
    session
}
