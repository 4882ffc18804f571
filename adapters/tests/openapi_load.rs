//! Loading and converting: multi-file specs with relative `$ref`s, remote `$ref`s only
//! when allowed, Swagger 2.0 rewritten to 3.x, 3.0 and 3.1 schema idioms side by side,
//! YAML integers beyond 64 bits, filters with reasons, names shortened and
//! de-duplicated deterministically, and the config's JSON Schema.

#[path = "openapi_common/mod.rs"]
mod common;

use serde_json::{Value, json};
use toolgate_adapters::Upstream;
use toolgate_adapters::openapi::{FilterSet, Filters, OpenApiConfig, OpenApiUpstream};

fn write(name: &str, text: &str) -> String {
    let path = std::env::temp_dir().join(format!("toolgate-load-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn tool(up: &OpenApiUpstream, name: &str) -> serde_json::Map<String, Value> {
    up.tools()
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
        .raw
        .as_ref()
        .clone()
}

#[tokio::test]
async fn multi_file_specs_resolve_relative_refs() {
    let (up, report) = OpenApiUpstream::load(
        "multi",
        OpenApiConfig::from_path(common::data("multi/root.yaml")),
    )
    .await
    .unwrap();
    assert_eq!(report.imported, 2);
    let list = tool(&up, "listPets");
    assert_eq!(
        list["inputSchema"]["properties"]["limit"],
        json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 20, "description": "Page size."})
    );
    assert_eq!(list["outputSchema"]["type"], "object");
    let create = tool(&up, "createPet");
    let props = &create["inputSchema"]["properties"];
    assert_eq!(
        props["tag"]["type"],
        json!(["string", "null"]),
        "3.0 nullable -> type array"
    );
    // NewPet -> Owner -> NewPet is a cycle: cut and marked, not expanded forever
    let cut = &props["owner"]["properties"]["pets"]["items"];
    assert!(
        cut["$comment"].as_str().unwrap().contains("recursive"),
        "{cut}"
    );
    assert_eq!(create["inputSchema"]["required"], json!(["name"]));
}

#[tokio::test]
async fn remote_refs_are_refused_unless_allowed() {
    let spec = json!({"openapi": "3.0.0", "paths": {"/a": {"get": {"operationId": "a",
        "parameters": [{"$ref": "https://example.invalid/params.json#/p"}], "responses": {}}}}});
    let e = OpenApiUpstream::load(
        "r",
        OpenApiConfig::from_path(write("remote.json", &spec.to_string())),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("allow_remote_refs"), "{e}");
}

#[tokio::test]
async fn swagger_2_is_rewritten_to_3() {
    let Some(dir) = common::specs_dir() else {
        return;
    };
    let (up, report) = OpenApiUpstream::load(
        "v2",
        OpenApiConfig::from_path(
            dir.join("oai-v2.0-petstore-expanded.json")
                .to_string_lossy(),
        ),
    )
    .await
    .unwrap();
    assert_eq!(report.spec_version, "2.0");
    // the `body` parameter became a request body whose properties are arguments
    let add = tool(&up, "addPet");
    assert_eq!(add["inputSchema"]["required"], json!(["name"]));
    assert!(add["inputSchema"]["properties"]["tag"].is_object());
    // collectionFormat csv -> form, explode false; arrays stay arrays
    let find = tool(&up, "findPets");
    assert_eq!(find["inputSchema"]["properties"]["tags"]["type"], "array");
    assert_eq!(find["annotations"]["readOnlyHint"], true);
    let del = tool(&up, "deletePet");
    assert_eq!(del["annotations"]["destructiveHint"], true);
    assert_eq!(del["annotations"]["idempotentHint"], true);

    // no operationIds at all: method + path
    let (up, _) = OpenApiUpstream::load(
        "uber",
        OpenApiConfig::from_path(dir.join("oai-v2.0-uber.yaml").to_string_lossy()),
    )
    .await
    .unwrap();
    let names: Vec<String> = up.tools().iter().map(|t| t.name.clone()).collect();
    assert_eq!(
        names,
        [
            "get_products",
            "get_estimates_price",
            "get_estimates_time",
            "get_me",
            "get_history"
        ]
    );
}

#[tokio::test]
async fn swagger_2_form_data_and_files_become_multipart() {
    let spec = r#"
swagger: "2.0"
info: {title: t, version: "1"}
host: api.example.com
basePath: /v2
schemes: [https]
paths:
  /pets/{id}/photo:
    post:
      operationId: uploadPhoto
      consumes: [multipart/form-data]
      parameters:
        - {name: id, in: path, required: true, type: integer}
        - {name: caption, in: formData, type: string}
        - {name: file, in: formData, type: file, required: true}
        - {name: ids, in: query, type: array, items: {type: integer}, collectionFormat: pipes}
      responses:
        200: {description: ok, schema: {type: object, properties: {url: {type: string}}}}
securityDefinitions:
  basic: {type: basic}
  key: {type: apiKey, in: header, name: X-Key}
"#;
    let (up, report) =
        OpenApiUpstream::load("v2", OpenApiConfig::from_path(write("v2.yaml", spec)))
            .await
            .unwrap();
    assert_eq!(report.spec_version, "2.0");
    let t = tool(&up, "uploadPhoto");
    let props = &t["inputSchema"]["properties"];
    // base64 text, or an object naming the file too
    assert_eq!(
        props["file"]["anyOf"][0],
        json!({"type": "string", "format": "binary", "contentEncoding": "base64"})
    );
    assert_eq!(
        props["file"]["anyOf"][1]["properties"]["filename"]["type"],
        "string"
    );
    assert_eq!(t["inputSchema"]["required"], json!(["id", "file"]));
    assert_eq!(
        t["outputSchema"]["properties"]["url"]["type"],
        json!(["string", "null"])
    );
}

#[tokio::test]
async fn openapi_31_and_30_idioms_and_huge_yaml_integers() {
    let spec = r##"
openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /things:
    post:
      operationId: makeThing
      requestBody:
        required: true
        content:
          application/json:
            schema:
              $ref: "#/$defs/Thing"
      responses: {}
$defs:
  Thing:
    type: object
    properties:
      kind: {const: widget}
      size: {type: [integer, "null"], maximum: 340282366920938463463374607431768211456}
      old: {type: number, minimum: 0, exclusiveMinimum: true}
      id: {type: string, readOnly: true}
    required: [kind, id]
"##;
    let (up, _) = OpenApiUpstream::load("v31", OpenApiConfig::from_path(write("v31.yaml", spec)))
        .await
        .unwrap();
    let t = tool(&up, "makeThing");
    let props = &t["inputSchema"]["properties"];
    assert_eq!(props["kind"], json!({"const": "widget"}));
    assert_eq!(props["size"]["type"], json!(["integer", "null"]));
    assert!(props["size"]["maximum"].as_f64().unwrap() > 3.4e38);
    assert_eq!(
        props["old"],
        json!({"type": "number", "exclusiveMinimum": 0})
    );
    assert!(
        props.get("id").is_none(),
        "readOnly properties are not arguments"
    );
    assert_eq!(t["inputSchema"]["required"], json!(["kind"]));
    jsonschema::meta::validate(&t["inputSchema"]).unwrap();
}

fn many_ops() -> String {
    json!({"openapi": "3.0.0", "paths": {
        "/admin/users": {"get": {"operationId": "admin/list-users", "tags": ["admin"], "responses": {}},
                          "delete": {"operationId": "admin/purge", "tags": ["admin"], "responses": {}}},
        "/pets": {"get": {"operationId": "pets/list", "tags": ["pets"], "responses": {}},
                  "post": {"operationId": "pets/create", "tags": ["pets"], "responses": {}}},
        "/pets/{id}": {"get": {"operationId": "pets/list", "responses": {}}},
        "/x": {"get": {"operationId": format!("very-{}-long", "long".repeat(20)), "responses": {}}}
    }})
    .to_string()
}

#[tokio::test]
async fn filters_report_every_skipped_operation() {
    let mut config = OpenApiConfig::from_path(write("filters.json", &many_ops()));
    config.filters = Filters {
        include: FilterSet {
            methods: vec!["get".into(), "DELETE".into()],
            ..Default::default()
        },
        exclude: FilterSet {
            tags: vec!["admin".into()],
            path_prefixes: vec!["/x".into()],
            operation_ids: vec!["*purge".into()],
            ..Default::default()
        },
    };
    let (up, report) = OpenApiUpstream::load("f", config).await.unwrap();
    let names: Vec<String> = up.tools().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let reasons: Vec<(String, String)> = report
        .skipped
        .iter()
        .map(|s| (s.operation.clone(), s.reason.clone()))
        .collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(reasons.contains(&(
        "pets/create".into(),
        "not matched by filters.include.methods".into()
    )));
    assert!(reasons.contains(&(
        "admin/list-users".into(),
        "excluded by filters.exclude.tags ('admin')".into()
    )));
    assert!(
        reasons
            .iter()
            .any(|(o, r)| o == "admin/purge" && r.contains("exclude"))
    );
    assert!(
        reasons
            .iter()
            .any(|(o, r)| o.starts_with("very-") && r.contains("path_prefixes"))
    );
}

#[tokio::test]
async fn names_are_deterministic_shortened_and_unique() {
    let text = many_ops();
    let (a, report) = OpenApiUpstream::load(
        "a-rather-long-upstream-name",
        OpenApiConfig::from_path(write("n1.json", &text)),
    )
    .await
    .unwrap();
    // the same paths in another order give the same names
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let paths = v["paths"].as_object().unwrap().clone();
    let mut reversed = serde_json::Map::new();
    for (k, x) in paths.into_iter().rev() {
        reversed.insert(k, x);
    }
    v["paths"] = Value::Object(reversed);
    let (b, _) = OpenApiUpstream::load(
        "a-rather-long-upstream-name",
        OpenApiConfig::from_path(write("n2.json", &v.to_string())),
    )
    .await
    .unwrap();
    let mut na: Vec<String> = a.tools().iter().map(|t| t.name.clone()).collect();
    let mut nb: Vec<String> = b.tools().iter().map(|t| t.name.clone()).collect();
    na.sort();
    nb.sort();
    assert_eq!(na, nb);
    let budget = 64 - "a-rather-long-upstream-name__".len();
    assert_eq!(report.name_budget, budget);
    assert!(na.iter().all(|n| n.len() <= budget), "{na:?}");
    assert!(na.contains(&"pets_list".to_string()), "{na:?}");
    assert_eq!(
        na.iter().filter(|n| n.starts_with("pets_list")).count(),
        2,
        "{na:?}"
    );
    assert_eq!(report.shortened.len(), 1, "{:?}", report.shortened);
}

#[test]
fn config_has_a_json_schema() {
    let schema = schemars::schema_for!(OpenApiConfig);
    let v = serde_json::to_value(&schema).unwrap();
    assert!(v["properties"]["spec_url"].is_object());
    assert!(v["properties"]["auth"].is_object());
    assert_eq!(v["additionalProperties"], false);
    let yaml = r#"
spec_url: https://api.example.com/openapi.json
timeout: 10s
auth:
  oauth: {type: oauth2_client_credentials, client_id: a, client_secret: b, scopes: [x]}
  key: {type: api_key, value: k}
filters: {include: {tags: [pets]}}
health: {path: /healthz}
"#;
    let c: OpenApiConfig = serde_norway::from_str(yaml).unwrap();
    assert_eq!(c.timeout, std::time::Duration::from_secs(10));
    let bad = "spec_path: x\nauth:\n  key: {type: api_key, value: k, extra: 1}\n";
    assert!(serde_norway::from_str::<OpenApiConfig>(bad).is_err());
    assert!(
        !format!("{c:?}").contains("\"b\""),
        "secrets are not shown by Debug"
    );
}

#[tokio::test]
async fn remote_refs_are_followed_when_allowed_and_never_into_local_files() {
    let root = json!({"openapi": "3.0.0", "servers": [{"url": "/api"}], "paths": {"/a": {"get": {
        "operationId": "a", "parameters": [{"$ref": "parts/params.json#/p"}], "responses": {}}}}});
    let params =
        json!({"p": {"name": "q", "in": "query", "schema": {"$ref": "../schemas.json#/Q"}}});
    let schemas = json!({"Q": {"type": "string", "enum": ["x", "y"]}});
    let sneaky = json!({"openapi": "3.0.0", "paths": {"/a": {"get": {"operationId": "a",
        "parameters": [{"$ref": "file:///etc/passwd#/p"}], "responses": {}}}}});
    let app = axum::Router::new()
        .route(
            "/specs/root.json",
            axum::routing::get(move || async move { axum::Json(root) }),
        )
        .route(
            "/specs/parts/params.json",
            axum::routing::get(move || async move { axum::Json(params) }),
        )
        .route(
            "/specs/schemas.json",
            axum::routing::get(move || async move { axum::Json(schemas) }),
        )
        .route(
            "/specs/sneaky.json",
            axum::routing::get(move || async move { axum::Json(sneaky) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut config = OpenApiConfig::from_url(format!("http://127.0.0.1:{port}/specs/root.json"));
    config.allow_private_networks = true;
    let e = OpenApiUpstream::load("r", config.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("allow_remote_refs"), "{e}");
    config.allow_remote_refs = true;
    let (up, _) = OpenApiUpstream::load("r", config).await.unwrap();
    assert_eq!(
        tool(&up, "a")["inputSchema"]["properties"]["q"],
        json!({"type": "string", "enum": ["x", "y"]})
    );

    let mut config = OpenApiConfig::from_url(format!("http://127.0.0.1:{port}/specs/sneaky.json"));
    config.allow_private_networks = true;
    config.allow_remote_refs = true;
    let e = OpenApiUpstream::load("r", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("may not reference local files"), "{e}");
}
