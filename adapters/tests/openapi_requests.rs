//! The exact request an API accepts, for the cases specs make easy to get wrong, and
//! validation no stricter than the API where a spec is evidently wrong. Each call's
//! arguments first pass the tool's advertised input schema through the validator the
//! gateway uses (`jsonschema`), then go through `OpenApiUpstream::call` to a recording
//! API on 127.0.0.1; method, path, query, headers and body bytes are asserted.
//! Specs: `tests/data/requests-api.yaml` (OpenAPI 3.0) and `requests-swagger.yaml`
//! (Swagger 2.0, Kubernetes-style PATCH).

#[path = "openapi_common/mod.rs"]
mod common;

use std::time::Duration;

use axum::response::IntoResponse;
use base64::Engine;
use serde_json::{Value, json};
use toolgate_adapters::openapi::{ImportReport, OpenApiConfig, OpenApiUpstream};
use toolgate_adapters::{CallContext, ToolError, Upstream};
use toolgate_test_support::{MockApi, Recorded};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\nfake-png-bytes";
const MP3: &[u8] = b"ID3\x04\x00fake-mp3-frames";
const PDF: &[u8] = b"%PDF-1.7 fake";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn serve() -> MockApi {
    MockApi::start(|_seen: Recorded| async {
        ([("content-type", "application/json")], r#"{"ok":true}"#).into_response()
    })
    .await
}

/// Loads `spec` (a file of tests/data, its `PORT` filled in) as upstream `req`.
async fn load(spec: &str, port: u16) -> (OpenApiUpstream, ImportReport) {
    let text = std::fs::read_to_string(common::data(spec)).unwrap();
    let path = std::env::temp_dir().join(format!("toolgate-{}-{port}-{spec}", std::process::id()));
    std::fs::write(&path, text.replace("PORT", &port.to_string())).unwrap();
    let mut config = OpenApiConfig::from_path(path.to_string_lossy().into_owned());
    config.allow_private_networks = true;
    let (up, report) = OpenApiUpstream::load("req", config).await.unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    (up, report)
}

fn input_schema(up: &OpenApiUpstream, tool: &str) -> Value {
    let t = up.tools().iter().find(|t| t.name == tool).cloned();
    t.unwrap_or_else(|| panic!("no tool {tool}")).raw["inputSchema"].clone()
}

/// The gateway's check of `args` against the tool's input schema: the errors, if any.
fn violations(up: &OpenApiUpstream, tool: &str, args: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(&input_schema(up, tool)).expect("schema compiles");
    validator
        .iter_errors(args)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[track_caller]
fn assert_refused(up: &OpenApiUpstream, tool: &str, args: Value) {
    assert!(
        !violations(up, tool, &args).is_empty(),
        "{tool} accepted {args}"
    );
}

/// Validates, calls and returns the one request the API received.
async fn send(api: &MockApi, up: &OpenApiUpstream, tool: &str, args: Value) -> Recorded {
    let errors = violations(up, tool, &args);
    assert!(errors.is_empty(), "{tool} refused {args}: {errors:?}");
    let before = api.count();
    let out = up
        .call(tool, args.as_object().unwrap().clone(), ctx())
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e:?}"));
    assert!(!out.is_error(), "{tool}: {:?}", out.object());
    api.one_since(before)
}

fn ctx() -> CallContext {
    CallContext::new(Duration::from_secs(10), "test")
}

#[track_caller]
fn assert_json_body(seen: &Recorded, content_type: &str, body: &str) {
    assert_eq!(
        (
            seen.header("content-type"),
            String::from_utf8_lossy(&seen.body).as_ref()
        ),
        (Some(content_type), body),
        "{seen:#?}"
    );
}

#[tokio::test]
async fn path_keys_with_a_fragment_or_query_openapi3() {
    let api = serve().await;
    let (up, _) = load("requests-api.yaml", api.port).await;

    let seen = send(&api, &up, "refreshToken", json!({"refresh_token": "r 1"})).await;
    seen.expect_query("POST", "/api/oauth2/token", None);
    assert_eq!(seen.body, b"refresh_token=r+1");
    let seen = send(&api, &up, "revokeToken", json!({"token": "t1"})).await;
    seen.expect_query("POST", "/api/oauth2/token", Some("token=t1"));

    let seen = send(
        &api,
        &up,
        "getResponseBeta",
        json!({"id": "resp_1", "include": "x y"}),
    )
    .await;
    seen.expect_query(
        "GET",
        "/api/responses/resp_1",
        Some("beta=true&mode=a%20b&include=x%20y"),
    );
    // a parameter of the constant's name replaces it
    let seen = send(&api, &up, "overrideBeta", json!({"id": "r2"})).await;
    seen.expect_query("POST", "/api/responses/r2", Some("beta=true"));
    let seen = send(
        &api,
        &up,
        "overrideBeta",
        json!({"id": "r2", "beta": "false"}),
    )
    .await;
    seen.expect_query("POST", "/api/responses/r2", Some("beta=false"));
    // a bare key goes without `=`
    let seen = send(&api, &up, "startUpload", json!({"bucket": "b1"})).await;
    seen.expect_query("POST", "/api/buckets/b1", Some("uploads"));
    // a templated query value is an argument, sent under the key's name: declared as
    // a path parameter, or not declared at all
    let seen = send(&api, &up, "searchCode", json!({"q": "fn main"})).await;
    seen.expect_query("GET", "/api/search", Some("kind=code&q=fn%20main"));
    let schema = input_schema(&up, "searchCode");
    assert_eq!(schema["required"], json!(["q"]), "{schema:#}");
    let seen = send(
        &api,
        &up,
        "getItemVersioned",
        json!({"id": "i1", "api-version": "2024-01-01"}),
    )
    .await;
    seen.expect_query("GET", "/api/items/i1", Some("api-version=2024-01-01"));
    let schema = input_schema(&up, "getItemVersioned");
    assert_eq!(
        schema["properties"]["api-version"]["type"],
        json!("string"),
        "{schema:#}"
    );
}

#[tokio::test]
async fn path_keys_with_a_fragment_or_query_swagger2() {
    let api = serve().await;
    let (up, _) = load("requests-swagger.yaml", api.port).await;
    let seen = send(&api, &up, "refreshToken", json!({"refresh_token": "r1"})).await;
    seen.expect_query("POST", "/v2/oauth2/token", None);
    assert_eq!(
        seen.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(seen.body, b"refresh_token=r1");
    let seen = send(
        &api,
        &up,
        "getResponseBeta",
        json!({"id": "resp_1", "include": "x"}),
    )
    .await;
    seen.expect_query("GET", "/v2/responses/resp_1", Some("beta=true&include=x"));
}

/// The Kubernetes shape: one opaque object schema under each patch media type.
async fn assert_patch_follows_the_body(
    api: &MockApi,
    up: &OpenApiUpstream,
    tool: &str,
    args: Value,
    path: &str,
) {
    let schema = input_schema(up, tool);
    assert_eq!(
        schema["properties"]["content_type"]["enum"],
        json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json"
        ]),
        "{schema:#}"
    );
    let with = |extra: Value| {
        let mut a = args.clone();
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        a
    };
    let ops = json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]);
    let seen = send(api, up, tool, with(json!({"body": ops}))).await;
    seen.expect("PATCH", path);
    assert_json_body(
        &seen,
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#,
    );
    let seen = send(
        api,
        up,
        tool,
        with(json!({"body": {"spec": {"replicas": 3}}})),
    )
    .await;
    assert_json_body(
        &seen,
        "application/merge-patch+json",
        r#"{"spec":{"replicas":3}}"#,
    );
    let seen = send(
        api,
        up,
        tool,
        with(json!({"body": {"spec": {"replicas": 3}},
                    "content_type": "application/strategic-merge-patch+json"})),
    )
    .await;
    assert_json_body(
        &seen,
        "application/strategic-merge-patch+json",
        r#"{"spec":{"replicas":3}}"#,
    );
    // a JSON Patch named for an object: refused before anything is sent
    let before = api.count();
    let err = up
        .call(
            tool,
            with(json!({"body": {"a": 1}, "content_type": "application/json-patch+json"}))
                .as_object()
                .unwrap()
                .clone(),
            ctx(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArgs(m) if m.contains("takes an array")),
        "{err:?}"
    );
    assert_eq!(api.count(), before);
    assert_refused(
        up,
        tool,
        with(json!({"body": {}, "content_type": "application/json"})),
    );
}

#[tokio::test]
async fn bodies_in_several_media_types_follow_the_arguments_shape() {
    let api = serve().await;
    let (up, report) = load("requests-api.yaml", api.port).await;
    assert_patch_follows_the_body(
        &api,
        &up,
        "patchThing",
        json!({"name": "t1"}),
        "/api/things/t1",
    )
    .await;
    assert!(
        report.repaired.iter().any(|r| r.operation == "patchThing"
            && r.reason
                .contains("application/json-patch+json is declared without an array schema")),
        "{:?}",
        report.repaired
    );

    // the spec's own array schema for JSON Patch, its object schema for merge patch
    let seen = send(
        &api,
        &up,
        "patchWidget",
        json!({"id": "w1", "body": [{"op": "remove", "path": "/size"}]}),
    )
    .await;
    seen.expect("PATCH", "/api/widgets/w1");
    assert_json_body(
        &seen,
        "application/json-patch+json",
        r#"[{"op":"remove","path":"/size"}]"#,
    );
    let seen = send(
        &api,
        &up,
        "patchWidget",
        json!({"id": "w1", "body": {"name": "w"}}),
    )
    .await;
    assert_json_body(&seen, "application/merge-patch+json", r#"{"name":"w"}"#);
    assert_refused(
        &up,
        "patchWidget",
        json!({"id": "w1", "body": [{"op": "remove"}]}),
    );

    // ASP.NET's aliases of plain JSON: no choice to make, flat arguments, application/json
    let schema = input_schema(&up, "aspCreate");
    assert!(
        schema["properties"].get("content_type").is_none(),
        "{schema:#}"
    );
    assert_eq!(schema["required"], json!(["title"]));
    let seen = send(&api, &up, "aspCreate", json!({"title": "t"})).await;
    assert_json_body(&seen, "application/json", r#"{"title":"t"}"#);
}

#[tokio::test]
async fn kubernetes_patch_from_swagger2() {
    let api = serve().await;
    let (up, report) = load("requests-swagger.yaml", api.port).await;
    assert_patch_follows_the_body(
        &api,
        &up,
        "patchNamespacedThing",
        json!({"namespace": "default", "name": "web"}),
        "/v2/namespaces/default/things/web",
    )
    .await;
    assert_eq!(report.repaired.len(), 1, "{:?}", report.repaired);
}

/// One expected part: name, filename and content type (for a file), content.
type Part<'a> = (&'a str, Option<(&'a str, &'a str)>, &'a [u8]);

/// The multipart body the API must receive.
fn multipart(seen: &Recorded, parts: &[Part]) -> Vec<u8> {
    let ct = seen.header("content-type").unwrap();
    let boundary = ct
        .strip_prefix("multipart/form-data; boundary=")
        .expect("multipart content type");
    let mut body = Vec::new();
    for (name, file, data) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match file {
            Some((filename, ct)) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {ct}\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

#[tokio::test]
async fn multipart_files_carry_a_filename_and_content_type() {
    let api = serve().await;
    let (up, _) = load("requests-api.yaml", api.port).await;
    let schema = input_schema(&up, "transcribe");
    assert_eq!(schema["required"], json!(["file", "model"]));
    assert_eq!(schema["properties"]["file"]["anyOf"][1]["type"], "object");

    // the plain form: named after the declared type
    let seen = send(
        &api,
        &up,
        "transcribe",
        json!({"file": b64(MP3), "model": "w-1"}),
    )
    .await;
    seen.expect("POST", "/api/audio/transcriptions");
    assert_eq!(
        seen.body,
        multipart(
            &seen,
            &[
                ("file", Some(("file.mp3", "audio/mpeg")), MP3),
                ("model", None, b"w-1")
            ]
        )
    );
    // the object form: the caller's name and type
    let seen = send(
        &api,
        &up,
        "transcribe",
        json!({"file": {"data_base64": b64(MP3), "filename": "talk.m4a", "content_type": "audio/mp4"},
               "model": "w-1"}),
    )
    .await;
    assert_eq!(
        seen.body,
        multipart(
            &seen,
            &[
                ("file", Some(("talk.m4a", "audio/mp4")), MP3),
                ("model", None, b"w-1")
            ]
        )
    );
    assert_refused(
        &up,
        "transcribe",
        json!({"file": {"filename": "x.mp3"}, "model": "w-1"}),
    );

    // a declared list: the type the content shows; arrays of files, text content
    let seen = send(
        &api,
        &up,
        "uploadAvatar",
        json!({"avatar": b64(PNG),
               "attachments": [{"data": "hello", "filename": "a.txt"}, b64(PDF)]}),
    )
    .await;
    assert_eq!(
        seen.body,
        multipart(
            &seen,
            &[
                ("avatar", Some(("avatar.png", "image/png")), PNG),
                ("attachments", Some(("a.txt", "text/plain")), b"hello"),
                (
                    "attachments",
                    Some(("attachments.pdf", "application/pdf")),
                    PDF
                ),
            ]
        )
    );

    // Swagger 2.0 `type: file`
    let (up2, _) = load("requests-swagger.yaml", api.port).await;
    let seen = send(
        &api,
        &up2,
        "uploadFile",
        json!({"upload": {"data": "a,b\n1,2", "filename": "d.csv"}, "note": "n"}),
    )
    .await;
    seen.expect("POST", "/v2/files");
    assert_eq!(
        seen.body,
        multipart(
            &seen,
            &[
                ("upload", Some(("d.csv", "text/csv")), b"a,b\n1,2"),
                ("note", None, b"n")
            ]
        )
    );
}

#[tokio::test]
async fn required_fields_of_an_optional_body_and_empty_bodies() {
    let api = serve().await;
    let (up, _) = load("requests-api.yaml", api.port).await;
    // the body is optional: nothing required outright, but all of it once any is sent
    let schema = input_schema(&up, "createFolder");
    assert!(schema.get("required").is_none(), "{schema:#}");
    assert_refused(&up, "createFolder", json!({"name": "n"}));
    assert_refused(&up, "createFolder", json!({"color": "red"}));
    assert_refused(&up, "createFolder", json!({"name": "n", "parent": {}}));
    let seen = send(&api, &up, "createFolder", json!({})).await;
    seen.expect("POST", "/api/folders");
    assert!(seen.body.is_empty());
    assert_eq!(seen.header("content-type"), None);
    let seen = send(
        &api,
        &up,
        "createFolder",
        json!({"name": "n", "parent": {"id": "p1"}, "color": "red"}),
    )
    .await;
    assert_json_body(
        &seen,
        "application/json",
        r#"{"name":"n","parent":{"id":"p1"},"color":"red"}"#,
    );

    // a required body with nothing in it goes as `{}`; an optional one stays out
    let seen = send(&api, &up, "createNote", json!({})).await;
    assert_json_body(&seen, "application/json", "{}");
    let seen = send(&api, &up, "ping", json!({"verbose": true})).await;
    seen.expect_query("POST", "/api/pings", Some("verbose=true"));
    assert!(seen.body.is_empty());
    assert_eq!(seen.header("content-type"), None);
}

#[tokio::test]
async fn validation_is_lenient_where_the_spec_is_wrong() {
    let api = serve().await;
    let (up, report) = load("requests-api.yaml", api.port).await;
    // 3 is an integer and a number; "ab" a nullable string and a short one
    let seen = send(&api, &up, "addMeasure", json!({"value": 3, "label": "ab"})).await;
    seen.expect("POST", "/api/measures");
    assert_json_body(&seen, "application/json", r#"{"value":3,"label":"ab"}"#);
    let seen = send(
        &api,
        &up,
        "addMeasure",
        json!({"value": 2.5, "label": null, "meta": {"source": "s"}}),
    )
    .await;
    assert_json_body(
        &seen,
        "application/json",
        r#"{"value":2.5,"label":null,"meta":{"source":"s"}}"#,
    );
    // what the spec does tell apart is still checked
    assert_refused(&up, "addMeasure", json!({"value": 1, "kind": true}));
    assert_refused(&up, "addMeasure", json!({"value": 1, "meta": {}}));
    assert_refused(&up, "addMeasure", json!({"label": "x"}));
    let schema = input_schema(&up, "addMeasure");
    assert_eq!(
        schema["properties"]["kind"]["oneOf"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    let mut repairs: Vec<&str> = report
        .repaired
        .iter()
        .filter(|r| r.operation == "addMeasure")
        .map(|r| r.reason.as_str())
        .collect();
    repairs.sort();
    assert_eq!(
        repairs,
        [
            "request body at '/properties/label': oneOf branches 0 and 1 overlap (they accept the same values); read as anyOf",
            "request body at '/properties/meta': 'required' names 'sensor_ref', which is no property; dropped",
            "request body at '/properties/value': oneOf branches 0 and 1 overlap (they accept the same values); read as anyOf",
            "request body: 'required' names 'ghost', which is no property; dropped",
        ]
    );
    // the report as the admin API serializes it
    let json = serde_json::to_value(&report).unwrap();
    assert!(
        json["repaired"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["operation"] == "addMeasure")
    );
}

/// OpenAPI 3.2: the QUERY method (a read whose question is its body) and
/// `additionalOperations` (any other method by name) are tools, a `querystring`
/// parameter is the whole query; a name that is not an HTTP method, and `CONNECT`, are
/// skipped with the reason, never sent.
#[tokio::test]
async fn openapi_32_query_and_additional_operations() {
    let api = serve().await;
    let (up, _) = load("requests-v32.yaml", api.port).await;
    let find = up.tools().iter().find(|t| t.name == "findOrders").cloned();
    let find = find.expect("the QUERY operation is a tool");
    assert_eq!(find.raw["annotations"]["readOnlyHint"], json!(true));
    let seen = send(&api, &up, "findOrders", json!({"status": "open"})).await;
    seen.expect_query("QUERY", "/api/orders", None);
    assert_json_body(&seen, "application/json", r#"{"status":"open"}"#);
    let seen = send(
        &api,
        &up,
        "copyFile",
        json!({"name": "a.txt", "Destination": "/files/b.txt"}),
    )
    .await;
    seen.expect_query("COPY", "/api/files/a.txt", None);
    assert_eq!(seen.header("destination"), Some("/files/b.txt"));
    // `in: querystring`: the object's members are the query's pairs
    let seen = send(
        &api,
        &up,
        "listReports",
        json!({"filter": {"status": "open now", "limit": 5}}),
    )
    .await;
    seen.expect_query("GET", "/api/reports", Some("status=open%20now&limit=5"));

    for (method, reason) in [
        ("\"NOT A METHOD\"", "not an HTTP method name"),
        ("CONNECT", "opens a tunnel"),
        ("connect", "opens a tunnel"),
    ] {
        let text = std::fs::read_to_string(common::data("requests-v32.yaml"))
            .unwrap()
            .replace("PORT", &api.port.to_string())
            .replace("      COPY:", &format!("      {method}:"));
        let path =
            std::env::temp_dir().join(format!("toolgate-{}-bad-method.yaml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let mut config = OpenApiConfig::from_path(path.to_string_lossy().into_owned());
        config.allow_private_networks = true;
        let (up, report) = OpenApiUpstream::load("req", config).await.unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(up.tools().iter().all(|t| t.name != "copyFile"), "{method}");
        assert!(
            report.skipped.iter().any(|s| s.reason.contains(reason)),
            "{method}: {:?}",
            report.skipped
        );
    }
}

/// Templates that span segments — RFC 6570's `{+name}`, Google's `{name=pattern}` —
/// take the declared parameter by its plain name and send its slashes as they are;
/// a value that would climb out is still refused.
#[tokio::test]
async fn multi_segment_path_templates() {
    let api = serve().await;
    let (up, _) = load("requests-api.yaml", api.port).await;
    for tool in ["cancelOperation", "listInstances"] {
        let schema = input_schema(&up, tool);
        let properties: Vec<&String> = schema["properties"]
            .as_object()
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        assert!(
            properties == ["name"] || properties == ["parent"],
            "{tool}: {schema:#}"
        );
    }
    let seen = send(
        &api,
        &up,
        "cancelOperation",
        json!({"name": "operations/op-1"}),
    )
    .await;
    seen.expect_query("POST", "/api/v1/operations/op-1:cancel", None);
    let seen = send(
        &api,
        &up,
        "listInstances",
        json!({"parent": "projects/p1/locations/eu west"}),
    )
    .await;
    seen.expect_query(
        "GET",
        "/api/v1/projects/p1/locations/eu%20west/instances",
        None,
    );
    let refused = up
        .call(
            "listInstances",
            json!({"parent": "projects/../../admin"})
                .as_object()
                .unwrap()
                .clone(),
            ctx(),
        )
        .await;
    assert!(
        matches!(refused, Err(ToolError::InvalidArgs(_))),
        "{refused:?}"
    );
}

/// Header parameters that would route or frame the request (`Host`, the length and
/// transfer headers, hop-by-hop ones) are the gateway's: not arguments, never sent
/// from one. Other header parameters are.
#[tokio::test]
async fn routing_and_framing_headers_are_not_arguments() {
    let api = serve().await;
    let (up, _) = load("requests-api.yaml", api.port).await;
    let schema = input_schema(&up, "routedHeaders");
    let properties: Vec<&String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    assert_eq!(properties, ["X-Request-Tag"], "{schema:#}");
    let steering = json!({"X-Request-Tag": "t1", "Host": "internal.example"});
    assert!(
        !violations(&up, "routedHeaders", &steering).is_empty(),
        "Host was accepted as an argument"
    );
    let seen = send(&api, &up, "routedHeaders", json!({"X-Request-Tag": "t1"})).await;
    assert_eq!(seen.header("x-request-tag"), Some("t1"));
    assert_eq!(
        seen.header("host"),
        Some(format!("127.0.0.1:{}", api.port).as_str())
    );
    assert_eq!(seen.header("transfer-encoding"), None);
}

/// A path argument of `.` or `..` would make a dot segment, which the URL resolves
/// (`/api/responses/..` is `/api/`): another endpoint of the same API, reached with
/// the gateway's credentials by a caller allowed only this tool. Refused before any
/// request; dots inside a segment, or percent-encoded, are ordinary text.
#[tokio::test]
async fn path_arguments_cannot_climb_out_of_their_segment() {
    let api = serve().await;
    let (up, _) = load("requests-api.yaml", api.port).await;
    for id in ["..", ".", "a/../..", "../x", "x/.", "..\\x"] {
        let before = api.count();
        let refused = up
            .call(
                "getResponseBeta",
                json!({"id": id}).as_object().unwrap().clone(),
                ctx(),
            )
            .await;
        assert!(
            matches!(refused, Err(ToolError::InvalidArgs(ref m)) if m.contains("'id'") && m.contains("segment")),
            "{id:?}: {refused:?}"
        );
        assert_eq!(api.count(), before, "{id:?} reached the API");
    }
    for (id, path) in [
        ("...", "/api/responses/..."),
        ("%2e%2e", "/api/responses/%252e%252e"),
        ("a..b/c", "/api/responses/a..b%2Fc"),
        ("v1.2", "/api/responses/v1.2"),
    ] {
        let seen = send(&api, &up, "getResponseBeta", json!({"id": id})).await;
        assert_eq!(seen.path, path, "{id:?}");
    }
}
