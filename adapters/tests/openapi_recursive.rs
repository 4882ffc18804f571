//! Every tool of a 3.1 spec whose schemas recurse through JSON Schema's dynamic
//! references (2019-09 `$recursiveRef`/`$recursiveAnchor`, 2020-12
//! `$dynamicRef`/`$dynamicAnchor`) is callable: its input schema is self-contained,
//! valid against the meta-schema and compiles for the gateway's validator (`jsonschema`);
//! nested arguments validate and reach a recording API on 127.0.0.1 as sent.
//! Spec: `tests/data/recursive-refs-api.yaml`.

#[path = "openapi_common/mod.rs"]
mod common;

use std::time::Duration;

use axum::response::IntoResponse;
use serde_json::{Value, json};
use toolgate_adapters::openapi::{ImportReport, OpenApiConfig, OpenApiUpstream};
use toolgate_adapters::{CallContext, Upstream};
use toolgate_test_support::{MockApi, Recorded};

const SPEC: &str = "recursive-refs-api.yaml";

async fn load(port: u16) -> (OpenApiUpstream, ImportReport) {
    let text = std::fs::read_to_string(common::data(SPEC)).unwrap();
    let path = std::env::temp_dir().join(format!("toolgate-{}-{port}-{SPEC}", std::process::id()));
    std::fs::write(&path, text.replace("PORT", &port.to_string())).unwrap();
    let mut config = OpenApiConfig::from_path(path.to_string_lossy().into_owned());
    config.allow_private_networks = true;
    let loaded = OpenApiUpstream::load("rec", config).await.unwrap();
    let _ = std::fs::remove_file(&path);
    loaded
}

fn input_schema(up: &OpenApiUpstream, tool: &str) -> Value {
    let t = up.tools().iter().find(|t| t.name == tool).cloned();
    t.unwrap_or_else(|| panic!("no tool {tool}")).raw["inputSchema"].clone()
}

fn violations(up: &OpenApiUpstream, tool: &str, args: &Value) -> Vec<String> {
    let schema = input_schema(up, tool);
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("{tool}: schema does not compile: {e}\n{schema:#}"));
    validator
        .iter_errors(args)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Validates `args` as the gateway does, calls the tool, returns the request received.
async fn send(api: &MockApi, up: &OpenApiUpstream, tool: &str, args: Value) -> Recorded {
    let errors = violations(up, tool, &args);
    assert!(
        errors.is_empty(),
        "{tool} refused {args}: {errors:?}\n{:#}",
        input_schema(up, tool)
    );
    let before = api.count();
    let out = up
        .call(
            tool,
            args.as_object().unwrap().clone(),
            CallContext::new(Duration::from_secs(10), "test"),
        )
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e:?}"));
    assert!(!out.is_error(), "{tool}: {:?}", out.object());
    api.one_since(before)
}

#[track_caller]
fn assert_refused(up: &OpenApiUpstream, tool: &str, args: Value) {
    assert!(
        !violations(up, tool, &args).is_empty(),
        "{tool} accepted {args}\n{:#}",
        input_schema(up, tool)
    );
}

fn body(seen: &Recorded) -> Value {
    serde_json::from_slice(&seen.body).unwrap_or_else(|e| panic!("{e}: {seen:#?}"))
}

/// Whether `keyword` occurs as a member name anywhere in `v`.
fn mentions(v: &Value, keyword: &str) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, x)| k == keyword || mentions(x, keyword)),
        Value::Array(a) => a.iter().any(|x| mentions(x, keyword)),
        _ => false,
    }
}

#[tokio::test]
async fn recursive_and_dynamic_refs_are_resolved_and_every_tool_is_callable() {
    let api = MockApi::start(|_seen: Recorded| async {
        ([("content-type", "application/json")], r#"{"ok":true}"#).into_response()
    })
    .await;
    let (up, report) = load(api.port).await;
    assert_eq!(report.spec_version, "3.1");
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.imported, 5);
    for t in up.tools().iter() {
        let schema = &t.raw["inputSchema"];
        for keyword in [
            "$ref",
            "$recursiveRef",
            "$recursiveAnchor",
            "$dynamicRef",
            "$dynamicAnchor",
        ] {
            assert!(
                !mentions(schema, keyword),
                "{}: {keyword} left\n{schema:#}",
                t.name
            );
        }
        if let Err(e) = jsonschema::meta::validate(schema) {
            panic!("{}: not valid JSON Schema: {e}\n{schema:#}", t.name);
        }
    }
    // the recursion is cut one level down, and the import report says where
    let repaired: Vec<(&str, &str)> = report
        .repaired
        .iter()
        .map(|r| (r.operation.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(
        repaired,
        [
            (
                "createTree",
                "recursive $recursiveRef '#' cut after one level: deeper levels accept any Tree"
            ),
            (
                "createLabelledTree",
                "recursive $recursiveRef '#' cut after one level: deeper levels accept any LabelledTree"
            ),
            (
                "createNode",
                "recursive $dynamicRef '#node' cut after one level: deeper levels accept any node"
            ),
            (
                "replaceNode",
                "recursive $dynamicRef '#node' cut after one level: deeper levels accept any node"
            ),
            (
                "replaceNode",
                "$dynamicRef '#nowhere' resolves to no schema: any value accepted there"
            ),
        ]
    );

    // 2019-09 tree: `$recursiveRef: "#"` is the Tree, not the tool input
    let tree = json!({"value": 1, "children": [
        {"value": 2, "children": [{"value": 3, "children": []}]},
        {"value": 4}
    ]});
    let seen = send(&api, &up, "createTree", tree.clone()).await;
    seen.expect_query("POST", "/api/trees", None);
    assert_eq!(body(&seen), tree);
    assert_refused(&up, "createTree", json!({"value": "one"}));
    assert_refused(&up, "createTree", json!({"children": [{"value": 2}]}));
    assert_refused(
        &up,
        "createTree",
        json!({"value": 1, "children": {"value": 2}}),
    );

    // the outermost `$recursiveAnchor` in scope wins: children are labelled trees
    let labelled = json!({"value": 1, "label": "root", "children": [
        {"value": 2, "label": "leaf", "children": [{"value": 3, "label": "deep"}]}
    ]});
    let seen = send(&api, &up, "createLabelledTree", labelled.clone()).await;
    seen.expect_query("POST", "/api/labelled-trees", None);
    assert_eq!(body(&seen), labelled);
    assert_refused(&up, "createLabelledTree", json!({"value": 1}));

    // 2020-12 tree through its own `$dynamicAnchor`
    let node = json!({"name": "a", "children": [
        {"name": "b", "children": [{"name": "c", "children": [{"name": "d"}]}]}
    ]});
    let seen = send(&api, &up, "createNode", node.clone()).await;
    seen.expect_query("POST", "/api/nodes", None);
    assert_eq!(body(&seen), node);
    assert_refused(&up, "createNode", json!({"children": []}));

    // 2020-12 generic list: the outermost schema's `$dynamicAnchor` picks the items
    let list = json!({"items": [1, 2.5, -3]});
    let seen = send(&api, &up, "createNumberList", list.clone()).await;
    seen.expect_query("POST", "/api/number-lists", None);
    assert_eq!(body(&seen), list);
    assert_refused(&up, "createNumberList", json!({"items": ["one"]}));

    // a recursive query parameter (JSON-encoded) and an unresolvable anchor in the body
    let filter = json!({"name": "x", "children": [{"name": "y", "children": [{"name": "z"}]}]});
    let seen = send(
        &api,
        &up,
        "replaceNode",
        json!({"id": "n1", "filter": filter, "note": "n", "extra": {"any": [1, {"deep": true}]}}),
    )
    .await;
    let query = url::form_urlencoded::parse(seen.query.as_deref().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "filter")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("no filter: {seen:#?}"));
    assert_eq!(serde_json::from_str::<Value>(&query).unwrap(), filter);
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("PUT", "/api/nodes/n1")
    );
    assert_eq!(
        body(&seen),
        json!({"note": "n", "extra": {"any": [1, {"deep": true}]}})
    );
    assert_refused(
        &up,
        "replaceNode",
        json!({"id": "n1", "filter": {"children": []}}),
    );
}
