//! Bad specs fail with a clear error naming what is wrong and where, and never panic or
//! overflow the stack: truncated documents, wrong types, `$ref`s to nowhere, reference
//! cycles, a 50 MB body from a URL (size cap), a private address (SSRF guard).

#[path = "openapi_common/mod.rs"]
mod common;

use std::time::Duration;

use axum::body::Body;
use serde_json::{Value, json};
use toolgate_adapters::Upstream;
use toolgate_adapters::openapi::{LoadError, OpenApiConfig, OpenApiUpstream};

fn write(name: &str, text: &str) -> String {
    let path = std::env::temp_dir().join(format!("toolgate-bad-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

async fn load_text(name: &str, text: &str) -> Result<OpenApiUpstream, LoadError> {
    OpenApiUpstream::load("bad", OpenApiConfig::from_path(write(name, text)))
        .await
        .map(|(u, _)| u)
}

async fn load_err(name: &str, text: &str) -> String {
    match load_text(name, text).await {
        Ok(_) => panic!("{name} should not load"),
        Err(e) => e.to_string(),
    }
}

fn pets(schema: Value) -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/pets": {"post": {
            "operationId": "addPet",
            "requestBody": {"content": {"application/json": {"schema": schema}}},
            "responses": {"200": {"description": "ok",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}}
        }}},
        "components": {"schemas": {
            "Node": {"type": "object", "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                "other": {"$ref": "#/components/schemas/Other"}}},
            "Other": {"type": "object", "properties": {"back": {"$ref": "#/components/schemas/Node"}}},
            "LoopA": {"$ref": "#/components/schemas/LoopB"},
            "LoopB": {"$ref": "#/components/schemas/LoopA"}
        }}
    })
}

#[tokio::test]
async fn truncated_documents() {
    let full = pets(json!({"type": "object"})).to_string();
    let e = load_err("trunc.json", &full[..full.len() / 2]).await;
    assert!(e.contains("invalid JSON") && e.contains("line 1"), "{e}");
    let e = load_err(
        "trunc.yaml",
        "openapi: 3.0.0\ninfo:\n  title: [unclosed\npaths: {}\n",
    )
    .await;
    assert!(e.contains("invalid YAML") && e.contains("line"), "{e}");
    let e = load_err("empty.yaml", "").await;
    assert!(
        e.contains("not a JSON/YAML object") || e.contains("YAML"),
        "{e}"
    );
    let e = load_err("scalar.yaml", "just a string").await;
    assert!(e.contains("not a JSON/YAML object"), "{e}");
}

#[tokio::test]
async fn wrong_types_are_named_with_their_pointer() {
    let e = load_err("noversion.json", r#"{"info": {}, "paths": {}}"#).await;
    assert!(e.contains("not an OpenAPI document"), "{e}");
    let e = load_err("numversion.json", r#"{"openapi": 3, "paths": {}}"#).await;
    assert!(e.contains("#/openapi"), "{e}");
    let e = load_err("v4.json", r#"{"openapi": "4.0.0", "paths": {}}"#).await;
    assert!(e.contains("unsupported OpenAPI version"), "{e}");
    let e = load_err("paths.json", r#"{"openapi": "3.0.0", "paths": []}"#).await;
    assert!(
        e.contains("#/paths") && e.contains("must be an object"),
        "{e}"
    );
    let e = load_err(
        "op.json",
        r#"{"openapi": "3.0.0", "paths": {"/a": {"get": 5}}}"#,
    )
    .await;
    assert!(e.contains("#/paths/~1a/get"), "{e}");
    let e = load_err(
        "servers.json",
        r#"{"openapi": "3.0.0", "servers": {"url": "x"}, "paths": {}}"#,
    )
    .await;
    assert!(e.contains("#/servers"), "{e}");
    // a problem confined to one operation skips it, with the reason in the report
    let spec = json!({"openapi": "3.0.0", "paths": {
        "/a": {"get": {"operationId": "broken", "parameters": {"name": "x"}, "responses": {}}},
        "/b": {"get": {"operationId": "fine", "responses": {}}}}});
    let (up, report) = OpenApiUpstream::load(
        "bad",
        OpenApiConfig::from_path(write("skip.json", &spec.to_string())),
    )
    .await
    .unwrap();
    assert_eq!(up.tools().len(), 1);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].operation, "broken");
    assert!(
        report.skipped[0]
            .reason
            .contains("/paths/~1a/get/parameters must be an array"),
        "{:?}",
        report.skipped
    );
}

#[tokio::test]
async fn refs_to_nowhere_name_the_reference_and_its_place() {
    let mut spec = pets(json!({"$ref": "#/components/schemas/Nope"}));
    let e = load_err("noref.json", &spec.to_string()).await;
    assert!(
        e.contains("'#/components/schemas/Nope' points to nothing"),
        "{e}"
    );
    assert!(
        e.contains("#/paths/~1pets/post/requestBody/content/application~1json/schema/$ref"),
        "{e}"
    );
    spec["paths"]["/pets"]["post"]["requestBody"] = json!({"$ref": "other-file.yaml#/Body"});
    let e = load_err("nofile.json", &spec.to_string()).await;
    assert!(e.contains("other-file.yaml"), "{e}");
}

#[tokio::test]
async fn reference_cycles_are_cut_not_followed_forever() {
    let spec = pets(json!({"allOf": [{"$ref": "#/components/schemas/Node"},
                                     {"properties": {"loop": {"$ref": "#/components/schemas/LoopA"}}}]}));
    let (up, report) = OpenApiUpstream::load(
        "bad",
        OpenApiConfig::from_path(write("cycle.json", &spec.to_string())),
    )
    .await
    .unwrap();
    assert!(report.cut_references > 0);
    let tool = &up.tools()[0];
    let text = tool.raw.get("inputSchema").unwrap().to_string();
    assert!(text.contains("recursive"), "{text}");
    jsonschema::meta::validate(&tool.raw["inputSchema"]).unwrap();

    // nesting far deeper than any parser recursion limit: an error, not a crash
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let e = load_err(
        "deep.json",
        &format!(r#"{{"openapi": "3.0.0", "x": {deep}}}"#),
    )
    .await;
    assert!(
        e.contains("recursion limit") || e.contains("invalid JSON"),
        "{e}"
    );
    let e = load_err("deep.yaml", &format!("openapi: 3.0.0\nx: {deep}\n")).await;
    assert!(e.contains("invalid YAML"), "{e}");
}

async fn serve(app: axum::Router) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

#[tokio::test]
async fn url_loading_refuses_huge_bodies_private_addresses_and_slow_servers() {
    let big = || {
        let chunk = bytes::Bytes::from(vec![b' '; 1024 * 1024]);
        let chunks = (0..50).map(move |_| Ok::<_, std::io::Error>(chunk.clone()));
        Body::from_stream(futures::stream::iter(chunks))
    };
    let app = axum::Router::new()
        .route(
            "/big-streamed.json",
            axum::routing::get(move || async move { big() }),
        )
        .route(
            "/big-sized.json",
            axum::routing::get(|| async { vec![b' '; 50 * 1024 * 1024] }),
        )
        .route(
            "/slow.json",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "{}"
            }),
        )
        .route(
            "/redirect",
            axum::routing::get(|| async { axum::response::Redirect::temporary("/redirect") }),
        );
    let port = serve(app).await;
    let url = |p: &str| format!("http://127.0.0.1:{port}{p}");

    for path in ["/big-streamed.json", "/big-sized.json"] {
        let mut config = OpenApiConfig::from_url(url(path));
        config.allow_private_networks = true;
        let e = OpenApiUpstream::load("bad", config)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_spec_bytes"), "{path}: {e}");
    }

    // the SSRF guard: private, loopback and link-local addresses are refused by default
    for target in [
        url("/spec.json"),
        format!("http://localhost:{port}/spec.json"),
        "http://169.254.169.254/latest/meta-data".into(),
        "http://[::1]/x".into(),
    ] {
        let e = OpenApiUpstream::load("bad", OpenApiConfig::from_url(&target))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("allow_private_networks"), "{target}: {e}");
    }
    let e = OpenApiUpstream::load("bad", OpenApiConfig::from_url("file:///etc/passwd"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("not allowed"), "{e}");

    let mut config = OpenApiConfig::from_url(url("/slow.json"));
    config.allow_private_networks = true;
    config.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let e = OpenApiUpstream::load("bad", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(started.elapsed() < Duration::from_secs(3), "{e}");

    let mut config = OpenApiConfig::from_url(url("/redirect"));
    config.allow_private_networks = true;
    let e = OpenApiUpstream::load("bad", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("redirect"), "{e}");
}

#[tokio::test]
async fn api_calls_to_private_addresses_are_refused() {
    let spec = json!({"openapi": "3.0.0", "servers": [{"url": "http://127.0.0.1:9/api"}],
        "paths": {"/x": {"get": {"operationId": "x", "responses": {}}}}});
    let (up, _) = OpenApiUpstream::load(
        "bad",
        OpenApiConfig::from_path(write("ssrf-call.json", &spec.to_string())),
    )
    .await
    .unwrap();
    let err = up
        .call(
            "x",
            Default::default(),
            toolgate_adapters::CallContext::new(Duration::from_secs(5), "t"),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("allow_private_networks"), "{err}");
}

#[tokio::test]
async fn config_errors_are_clear() {
    let mut config = OpenApiConfig::from_path(common::data("calls-api.yaml"));
    config.spec_url = Some("http://example.com/x.json".into());
    let e = OpenApiUpstream::load("bad", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("exactly one of spec_url and spec_path"), "{e}");
    let mut config = OpenApiConfig::from_path(common::data("calls-api.yaml"));
    config.auth.insert(
        "nope".into(),
        toolgate_adapters::openapi::Credential::Bearer { token: "t".into() },
    );
    let e = OpenApiUpstream::load("bad", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("auth.nope") && !e.contains("\"t\""), "{e}");
    let e = OpenApiUpstream::load("bad", OpenApiConfig::from_path("/no/such/file.yaml"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("/no/such/file.yaml"), "{e}");
    let mut config = OpenApiConfig::from_path(common::data("calls-api.yaml"));
    config.base_url = Some("http://10.0.0.1/api".into());
    let e = OpenApiUpstream::load("bad", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("base_url") && e.contains("allow_private_networks"),
        "{e}"
    );
    let mut config = OpenApiConfig::from_path(common::data("calls-api.yaml"));
    config.forward_headers = vec!["bad header".into()];
    let e = OpenApiUpstream::load("bad", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("forward_headers"), "{e}");
    // unknown fields in the config file are rejected
    let r: Result<OpenApiConfig, _> =
        serde_json::from_value(json!({"spec_path": "x", "spec_urll": "y"}));
    assert!(r.unwrap_err().to_string().contains("spec_urll"));
}
