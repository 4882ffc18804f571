//! Specs as large APIs publish them: split over thousands of files (nested directories,
//! relative `$ref`s across them, YAML and JSON mixed) and bounded by what they cost
//! (bytes, nodes, time) rather than by a count of files; each document read once; and
//! hundreds of operations sharing an operationId (one per API version) named apart
//! readably and stably, every rename in the report.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_adapters::Upstream;
use toolgate_adapters::openapi::{ImportReport, OpenApiConfig, OpenApiUpstream};

/// A directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("toolgate-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn path(&self, rel: &str) -> String {
        self.0.join(rel).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn yaml(v: &Value) -> String {
    serde_norway::to_string(v).unwrap()
}

/// Operations in the generated multi-file spec; three files each, plus the root and
/// one shared document: 3,002 files.
const OPERATIONS: usize = 1000;

/// Writes the multi-file spec under `dir`: the root (`openapi.yaml`) refers to a path
/// item per operation (`paths/g<k>/item<i>.yaml`, YAML), whose body is a JSON schema two
/// directories away (`schemas/g<k>/item<i>.json`), whose `details` is YAML one level
/// further down (`schemas/g<k>/nested/out<i>.yaml`), which refers back up to the
/// shared error document (`common/error.json`) and to its sibling JSON by another
/// spelling (`../item<i>.json`).
fn generate(dir: &Scratch) -> usize {
    let mut paths = serde_json::Map::new();
    for i in 0..OPERATIONS {
        let g = i % 20;
        paths.insert(
            format!("/g{g}/items{i}/{{id}}"),
            json!({"$ref": format!("paths/g{g}/item{i}.yaml")}),
        );
        dir.write(
            &format!("paths/g{g}/item{i}.yaml"),
            &yaml(&json!({
                "put": {
                    "operationId": format!("putItem{i}"),
                    "summary": format!("Replace item {i}"),
                    "parameters": [{"name": "id", "in": "path", "required": true,
                                    "schema": {"type": "string"}}],
                    "requestBody": {"required": true, "content": {"application/json": {
                        "schema": {"$ref": format!("../../schemas/g{g}/item{i}.json")}}}},
                    "responses": {
                        "200": {"description": "ok", "content": {"application/json": {
                            "schema": {"$ref": format!("../../schemas/g{g}/nested/out{i}.yaml#/Out")}}}},
                        "default": {"description": "error", "content": {"application/json": {
                            "schema": {"$ref": "../../common/error.json#/Error"}}}}
                    }
                }
            })),
        );
        dir.write(
            &format!("schemas/g{g}/item{i}.json"),
            &json!({
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "maxLength": 64},
                    "rank": {"type": "integer", "minimum": i},
                    "details": {"$ref": format!("nested/out{i}.yaml#/Details")}
                }
            })
            .to_string(),
        );
        dir.write(
            &format!("schemas/g{g}/nested/out{i}.yaml"),
            &yaml(&json!({
                "Details": {"type": "object", "properties": {
                    "note": {"type": "string"},
                    "last_error": {"$ref": "../../../common/error.json#/Error"}}},
                "Out": {"type": "object", "properties": {
                    "name": {"$ref": format!("../item{i}.json#/properties/name")},
                    "ok": {"type": "boolean"}}}
            })),
        );
    }
    dir.write(
        "common/error.json",
        &json!({"Error": {"type": "object", "properties": {
            "code": {"type": "integer"}, "message": {"type": "string"}}}})
        .to_string(),
    );
    dir.write(
        "openapi.yaml",
        &yaml(&json!({
            "openapi": "3.0.3",
            "info": {"title": "split", "version": "1"},
            "servers": [{"url": "https://api.example.com"}],
            "paths": paths
        })),
    );
    1 + 3 * OPERATIONS + 1
}

/// Files under `dir`, recursively.
fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                n += 1;
            }
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_split_over_3000_files_imports() {
    let dir = Scratch::new("split-spec");
    let files = generate(&dir);
    assert_eq!(count_files(&dir.0), files);
    assert!(files >= 3000, "{files} files");
    let started = Instant::now();
    let (up, report) =
        OpenApiUpstream::load("split", OpenApiConfig::from_path(dir.path("openapi.yaml")))
            .await
            .unwrap_or_else(|e| panic!("the {files}-file spec does not import: {e}"));
    let took = started.elapsed();
    println!(
        "multi-file spec: {files} files, {} operations imported in {took:?}",
        report.imported
    );
    assert_eq!(report.imported, OPERATIONS, "{:?}", report.skipped);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    // Every reference resolved, across directories, formats and spellings.
    let tool = up
        .tools()
        .iter()
        .find(|t| t.name == "putItem742")
        .expect("putItem742")
        .raw
        .clone();
    let props = &tool["inputSchema"]["properties"];
    assert_eq!(props["name"], json!({"type": "string", "maxLength": 64}));
    assert_eq!(props["rank"]["minimum"], 742);
    assert_eq!(
        props["details"]["properties"]["last_error"]["properties"]["code"]["type"], "integer",
        "{props}"
    );
    // (output schemas admit null where a value is declared: APIs send it)
    let out = &tool["outputSchema"]["properties"]["name"];
    assert_eq!(out["type"][0], "string", "{out}");
    assert!(
        took < Duration::from_secs(120),
        "a {files}-file import took {took:?}"
    );
}

#[tokio::test]
async fn an_import_is_bounded_by_bytes_nodes_and_time_each_named() {
    let dir = Scratch::new("bounded-spec");
    generate_small(&dir, 40);
    let root = dir.path("openapi.yaml");
    let fine = OpenApiUpstream::load("b", OpenApiConfig::from_path(&root)).await;
    assert_eq!(fine.unwrap().1.imported, 40);

    let mut config = OpenApiConfig::from_path(&root);
    config.max_total_bytes = 4096;
    let e = OpenApiUpstream::load("b", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("max_total_bytes (4096)") && e.contains("raise max_total_bytes"),
        "{e}"
    );

    let mut config = OpenApiConfig::from_path(&root);
    config.max_schema_nodes = 300;
    let e = OpenApiUpstream::load("b", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_schema_nodes"), "{e}");

    let mut config = OpenApiConfig::from_path(&root);
    config.import_timeout = Duration::from_micros(1);
    let e = OpenApiUpstream::load("b", config)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("import_timeout"), "{e}");
}

/// A root and `n` path items in `p/<i>/item.yaml`, each referring to the shared
/// `shared/s.json`.
fn generate_small(dir: &Scratch, n: usize) {
    let mut paths = serde_json::Map::new();
    for i in 0..n {
        paths.insert(
            format!("/items{i}"),
            json!({"$ref": format!("p/{i}/item.yaml")}),
        );
        dir.write(
            &format!("p/{i}/item.yaml"),
            &yaml(
                &json!({"get": {"operationId": format!("get{i}"), "parameters": [
                {"name": "q", "in": "query", "schema": {"$ref": "../../shared/s.json#/Q"}}],
                "responses": {"200": {"description": "ok"}}}}),
            ),
        );
    }
    dir.write(
        "shared/s.json",
        &json!({"Q": {"type": "string", "enum": ["a", "b"]}}).to_string(),
    );
    dir.write(
        "openapi.yaml",
        &yaml(
            &json!({"openapi": "3.0.3", "info": {"title": "s", "version": "1"},
            "servers": [{"url": "https://api.example.com"}], "paths": paths}),
        ),
    );
}

#[tokio::test]
async fn each_document_is_fetched_once_however_it_is_spelled() {
    // Many documents refer to one shared document, each by another spelling
    // (`../shared/s.json`, `./../shared/s.json`, `/specs/shared/s.json`, with and
    // without fragments), and to each other.
    let mut files: BTreeMap<String, Value> = BTreeMap::new();
    let mut paths = serde_json::Map::new();
    let spellings = [
        "../shared/s.json#/Q",
        "./../shared/s.json#/Q",
        "/specs/shared/s.json#/Q",
        "../shared/./s.json#/Q",
        "../parts/../shared/s.json#/Q",
    ];
    for i in 0..10 {
        paths.insert(
            format!("/items{i}"),
            json!({"$ref": format!("parts/item{i}.json")}),
        );
        files.insert(
            format!("parts/item{i}.json"),
            json!({"get": {"operationId": format!("get{i}"), "parameters": [
                {"name": "q", "in": "query", "schema": {"$ref": spellings[i % spellings.len()]}},
                {"name": "r", "in": "query", "schema": {"$ref": format!("item{}.json#/x-r", (i + 1) % 10)}}],
                "responses": {"200": {"description": "ok"}}},
                "x-r": {"type": "integer"}}),
        );
    }
    files.insert(
        "shared/s.json".into(),
        json!({"Q": {"type": "string", "enum": ["a", "b"]}}),
    );
    files.insert(
        "root.json".into(),
        json!({"openapi": "3.0.3", "info": {"title": "s", "version": "1"},
            "servers": [{"url": "https://api.example.com"}], "paths": paths}),
    );
    let files = Arc::new(files);
    let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let app = {
        let (files, hits) = (files.clone(), hits.clone());
        axum::Router::new().route(
            "/specs/{*rest}",
            axum::routing::get(
                move |axum::extract::Path(rest): axum::extract::Path<String>| {
                    let (files, hits) = (files.clone(), hits.clone());
                    async move {
                        *hits.lock().unwrap().entry(rest.clone()).or_default() += 1;
                        match files.get(&rest) {
                            Some(v) => Ok(axum::Json(v.clone())),
                            None => Err(axum::http::StatusCode::NOT_FOUND),
                        }
                    }
                },
            ),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut config = OpenApiConfig::from_url(format!("http://127.0.0.1:{port}/specs/root.json"));
    config.allow_private_networks = true;
    config.allow_remote_refs = true;
    let (up, report) = OpenApiUpstream::load("once", config).await.unwrap();
    assert_eq!(report.imported, 10, "{:?}", report.skipped);
    assert_eq!(up.tools().len(), 10);
    let hits = hits.lock().unwrap().clone();
    assert_eq!(hits.len(), files.len(), "{hits:?}");
    for (doc, n) in &hits {
        assert_eq!(*n, 1, "{doc} fetched {n} times: {hits:?}");
    }
}

// ---------------------------------------------------------------------------------
// duplicate operationIds
// ---------------------------------------------------------------------------------

/// Kubernetes-like groups and versions: every kind is served under each version of
/// its group, with the same operationIds (as older Swagger 2.0 exports have them).
const GROUPS: [(&str, &[&str]); 6] = [
    ("rbac.authorization.k8s.io", &["v1", "v1beta1", "v1alpha1"]),
    ("apps", &["v1", "v1beta1", "v1beta2"]),
    ("batch", &["v1", "v1beta1", "v2alpha1"]),
    ("networking.k8s.io", &["v1", "v1beta1"]),
    ("autoscaling", &["v1", "v2", "v2beta1", "v2beta2"]),
    ("storage.k8s.io", &["v1", "v1beta1", "v1alpha1"]),
];
const KINDS: [&str; 4] = ["Widget", "Gadget", "ClusterRole", "Binding"];

fn k8s_like() -> Value {
    let mut paths = serde_json::Map::new();
    for (group, versions) in GROUPS {
        for version in versions {
            for kind in KINDS {
                let plural = format!("{}s", kind.to_ascii_lowercase());
                let op = |verb: &str| {
                    json!({"operationId": format!("{verb}{kind}"), "tags": [group],
                        "description": format!("{verb} a {kind}"),
                        "responses": {"200": {"description": "ok"}}})
                };
                paths.insert(
                    format!("/apis/{group}/{version}/{plural}"),
                    json!({"get": op("list"), "post": op("create")}),
                );
                paths.insert(
                    format!("/apis/{group}/{version}/{plural}/{{name}}"),
                    json!({"get": op("read"), "delete": op("delete"),
                        "parameters": [{"name": "name", "in": "path", "required": true, "type": "string"}]}),
                );
            }
        }
    }
    // The core group, as Kubernetes serves it.
    paths.insert(
        "/api/v1/widgets".into(),
        json!({"get": {"operationId": "listWidget", "responses": {"200": {"description": "ok"}}}}),
    );
    json!({"swagger": "2.0", "info": {"title": "k8s-like", "version": "1"},
        "host": "api.example.com", "schemes": ["https"], "paths": paths})
}

fn names_of(up: &OpenApiUpstream) -> Vec<String> {
    let mut n: Vec<String> = up.tools().iter().map(|t| t.name.clone()).collect();
    n.sort();
    n
}

/// An 8-hex (or 6-hex) hash suffix.
fn has_hash_suffix(name: &str) -> bool {
    name.rsplit_once('_').is_some_and(|(_, s)| {
        (s.len() == 6 || s.len() == 8) && s.chars().all(|c| c.is_ascii_hexdigit())
    })
}

async fn import_k8s(dir: &Scratch, file: &str, spec: &Value) -> (OpenApiUpstream, ImportReport) {
    dir.write(file, &spec.to_string());
    OpenApiUpstream::load("k8s", OpenApiConfig::from_path(dir.path(file)))
        .await
        .unwrap()
}

#[tokio::test]
async fn duplicate_operation_ids_get_readable_stable_names() {
    let dir = Scratch::new("dup-ids");
    let spec = k8s_like();
    let (a, report) = import_k8s(&dir, "a.json", &spec).await;
    let per_op = GROUPS.iter().map(|(_, v)| v.len()).sum::<usize>() * KINDS.len() * 4 + 1;
    assert_eq!(report.imported, per_op, "{:?}", report.skipped);
    assert!(
        report.renamed.len() >= 100,
        "{} renames",
        report.renamed.len()
    );
    let names = names_of(&a);
    let unique: HashSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "names are not unique");
    let budget = report.name_budget;
    for n in &names {
        assert!(n.len() <= budget && n.len() <= 64, "{n} is too long");
        assert!(
            !has_hash_suffix(n),
            "{n}: a hash where a readable name fits"
        );
    }
    // What differs is the API group and version.
    for expected in [
        "createClusterRole_rbac_v1alpha1",
        "createClusterRole_rbac_v1",
        "listWidget_apps_v1beta2",
        "deleteBinding_autoscaling_v2beta2",
        "readGadget_storage_v1alpha1",
        // the core group: the version alone
        "listWidget_v1",
    ] {
        assert!(
            names.contains(&expected.to_string()),
            "no {expected}: {names:?}"
        );
    }
    // Every rename reported, with what it calls and why; the description says it too.
    let renamed: HashMap<&str, _> = report
        .renamed
        .iter()
        .map(|r| (r.name.as_str(), r))
        .collect();
    assert_eq!(renamed.len(), names.len(), "every tool here shares its id");
    let r = renamed["createClusterRole_rbac_v1alpha1"];
    assert_eq!(r.operation, "createClusterRole");
    assert_eq!(
        r.call,
        "POST /apis/rbac.authorization.k8s.io/v1alpha1/clusterroles"
    );
    assert!(r.reason.contains("group and version"), "{}", r.reason);
    let tool = a
        .tools()
        .iter()
        .find(|t| t.name == "createClusterRole_rbac_v1alpha1")
        .unwrap()
        .raw
        .clone();
    let description = tool["description"].as_str().unwrap();
    assert!(
        description.starts_with("(POST /apis/rbac.authorization.k8s.io/v1alpha1/clusterroles;"),
        "{description}"
    );

    // Stable: the same spec again, and with its paths in the reverse order.
    let (b, again) = import_k8s(&dir, "b.json", &spec).await;
    assert_eq!(names_of(&b), names);
    assert_eq!(again.renamed.len(), report.renamed.len());
    let mut reversed = spec.clone();
    let paths = reversed["paths"].as_object().unwrap().clone();
    reversed["paths"] = Value::Object(paths.into_iter().rev().collect());
    let (c, _) = import_k8s(&dir, "c.json", &reversed).await;
    assert_eq!(names_of(&c), names);
}

#[tokio::test]
async fn duplicates_fall_back_to_what_differs_and_to_a_hash_only_when_nothing_fits() {
    let dir = Scratch::new("dup-fallback");
    let spec = json!({"openapi": "3.0.3", "info": {"title": "d", "version": "1"},
        "servers": [{"url": "https://api.example.com"}], "paths": {
        // the same group prefix: the version tells them apart
        "/apis/storage.k8s.io/v1/things": {"get": {"operationId": "listThing", "responses": {}}},
        "/apis/storage.example.com/v1/things": {"get": {"operationId": "listThing", "responses": {}}},
        // no version: the path segments that differ
        "/pets": {"get": {"operationId": "pets/list", "responses": {}}},
        "/pets/{id}": {"get": {"operationId": "pets/list", "responses": {}}},
        "/owners/{owner}/pets": {"get": {"operationId": "pets/list", "responses": {}}},
        // one path, two methods
        "/same": {"get": {"operationId": "same", "responses": {}},
                  "put": {"operationId": "same", "responses": {}}}
    }});
    let (up, report) = import_k8s(&dir, "d.json", &spec).await;
    let names = names_of(&up);
    for expected in [
        "listThing_storage_k8s_io_v1",
        "listThing_storage_example_com_v1",
        "pets_list",
        "pets_list_by_id",
        "pets_list_owners_by_owner",
        "same_get",
        "same_put",
    ] {
        assert!(
            names.contains(&expected.to_string()),
            "no {expected}: {names:?}"
        );
    }
    assert_eq!(report.renamed.len(), 6, "{:?}", report.renamed);
    let long = "x".repeat(40);

    // A version that fits is used even where the group does not.
    let spec = json!({"openapi": "3.0.3", "info": {"title": "d", "version": "1"},
        "servers": [{"url": "https://api.example.com"}], "paths": {
        "/apis/averyveryverylonggroupname.example.com/v1alpha1/a": {"get": {"operationId": long, "responses": {}}},
        "/apis/averyveryverylonggroupname.example.com/v1alpha2/a": {"get": {"operationId": long, "responses": {}}}
    }});
    let (up, _) = import_k8s(&dir, "v.json", &spec).await;
    let names = names_of(&up);
    assert_eq!(
        names,
        [format!("{long}_v1alpha1"), format!("{long}_v1alpha2")]
    );

    // A budget too small for any readable form: a hash, still reported.
    let spec = json!({"openapi": "3.0.3", "info": {"title": "d", "version": "1"},
        "servers": [{"url": "https://api.example.com"}], "paths": {
        "/segment-number-one-of-a-long-path-1/a": {"get": {"operationId": long, "responses": {}}},
        "/segment-number-two-of-a-long-path-2/a": {"get": {"operationId": long, "responses": {}}}
    }});
    let (up, report) = import_k8s(&dir, "e.json", &spec).await;
    let names = names_of(&up);
    assert_eq!(names.len(), 2);
    assert!(
        names.iter().all(|n| n.len() <= report.name_budget),
        "{names:?}"
    );
    assert!(names.iter().any(|n| has_hash_suffix(n)), "{names:?}");
    assert_eq!(report.renamed.len(), 1, "{:?}", report.renamed);
    assert!(
        report.renamed[0].reason.contains("hash"),
        "{:?}",
        report.renamed
    );
}
