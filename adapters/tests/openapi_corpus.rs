//! Every real spec of the shared corpus imports: exact tool counts, valid unique names,
//! input schemas that are valid JSON Schema with an object root.

#[path = "openapi_common/mod.rs"]
mod common;

use std::collections::HashSet;

use toolgate_adapters::Upstream;
use toolgate_adapters::openapi::{OpenApiConfig, OpenApiUpstream, SkippedOperation};

/// (file, operations per the corpus README, operations skipped). Nothing is skipped:
/// every operation of every spec becomes a tool.
const EXPECTED: &[(&str, usize, usize)] = &[
    ("oai-v2.0-petstore-expanded.json", 4, 0),
    ("oai-v2.0-uber.yaml", 5, 0),
    ("oai-v3.0-api-with-examples.yaml", 2, 0),
    ("oai-v3.0-callback-example.yaml", 1, 0),
    ("oai-v3.0-link-example.yaml", 6, 0),
    ("oai-v3.0-petstore-expanded.yaml", 4, 0),
    ("oai-v3.0-petstore.yaml", 3, 0),
    ("oai-v3.0-uspto.yaml", 3, 0),
    ("oai-v3.1-non-oauth-scopes.yaml", 1, 0),
    ("oai-v3.1-webhook-example.yaml", 0, 0),
    ("swagger-petstore3-openapi.yaml", 19, 0),
    ("twilio_api_v2010.json", 197, 0),
    ("stripe-spec3.yaml", 468, 0),
    ("github-api.github.com.json", 874, 0),
    ("discord-openapi.json", 242, 0),
];

fn name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Every tool of one spec: a valid, unique name within the prefixed budget, a
/// description, and input/output schemas that are valid JSON Schema (the meta-schema)
/// with an object root, the input one compiling for the call-time validator as it is.
fn check_tools(file: &str, upstream_name: &str, tools: &[toolgate_adapters::ToolDef]) {
    let mut names = HashSet::new();
    for t in tools.iter() {
        assert!(name_ok(&t.name), "{file}: bad name {}", t.name);
        assert!(
            name_ok(&format!("{upstream_name}__{}", t.name)),
            "{file}: prefixed name too long: {}",
            t.name
        );
        assert!(
            names.insert(t.name.clone()),
            "{file}: duplicate name {}",
            t.name
        );
        assert_eq!(t.raw["name"], t.name.as_str());
        let desc = t.raw["description"].as_str().unwrap_or("");
        assert!(
            !desc.trim().is_empty() && desc.chars().count() <= 1024,
            "{file}: {}: description",
            t.name
        );
        let schema = &t.raw["inputSchema"];
        assert_eq!(schema["type"], "object", "{file}: {}: input root", t.name);
        if let Err(e) = jsonschema::meta::validate(schema) {
            panic!(
                "{file}: {}: input schema is not valid JSON Schema: {e}",
                t.name
            );
        }
        jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{file}: {}: {e}", t.name));
        for (k, _) in schema["properties"].as_object().unwrap() {
            assert!(
                k.len() <= 64
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)),
                "{file}: {}: argument name {k}",
                t.name
            );
        }
        if let Some(out) = t.raw.get("outputSchema") {
            assert_eq!(out["type"], "object", "{file}: {}: output root", t.name);
            if let Err(e) = jsonschema::meta::validate(out) {
                panic!(
                    "{file}: {}: output schema is not valid JSON Schema: {e}",
                    t.name
                );
            }
        }
    }
}

#[tokio::test]
async fn every_corpus_spec_imports_completely() {
    let Some(dir) = common::specs_dir() else {
        return;
    };
    let mut seen = HashSet::new();
    for (file, ops, skipped) in EXPECTED {
        let path = dir.join(file);
        let upstream_name = "corpus";
        let (up, report) = OpenApiUpstream::load(
            upstream_name,
            OpenApiConfig::from_path(path.to_string_lossy()),
        )
        .await
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        seen.insert(file.to_string());
        assert_eq!(report.operations, *ops, "{file}: operations found");
        assert_eq!(
            report.skipped.len(),
            *skipped,
            "{file}: skipped {:?}",
            report.skipped
        );
        assert_eq!(report.imported, ops - skipped, "{file}: imported");
        // every input schema compiles for the call-time validator as it is
        let dropped: Vec<_> = report
            .repaired
            .iter()
            .filter(|r| r.reason.starts_with("input schema keyword"))
            .collect();
        assert_eq!(
            dropped,
            Vec::<&SkippedOperation>::new(),
            "{file}: keywords dropped"
        );
        if *file == "github-api.github.com.json" {
            // `{}` is valid under two object branches of set-labels' oneOf; check runs
            // tell theirs apart by `status` (a parent property names the required one)
            let repaired = |op: &str| report.repaired.iter().any(|r| r.operation == op);
            assert!(repaired("issues/set-labels"), "{:?}", report.repaired);
            assert!(!repaired("checks/create"), "{:?}", report.repaired);
        }
        let tools = up.tools();
        assert_eq!(tools.len(), ops - skipped, "{file}: tools");
        check_tools(file, upstream_name, &tools);
        // Names that are not the operationId alone (operationIds shared by several
        // operations), for review when the naming rules change.
        for r in &report.renamed {
            eprintln!("{file}: renamed {} ({}) -> {}", r.operation, r.call, r.name);
        }
        eprintln!(
            "{file}: {} tools, {} shortened, {} renamed, ~{} tokens, {} refs cut",
            tools.len(),
            report.shortened.len(),
            report.renamed.len(),
            report.approx_tokens,
            report.cut_references
        );
    }
    // any spec added to the corpus later must import into tools that pass the same checks
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let is_spec = file.ends_with(".json") || file.ends_with(".yaml") || file.ends_with(".yml");
        if is_spec && !seen.contains(&file) {
            let (up, _) =
                OpenApiUpstream::load("corpus", OpenApiConfig::from_path(path.to_string_lossy()))
                    .await
                    .unwrap_or_else(|e| panic!("{file}: {e}"));
            check_tools(&file, "corpus", &up.tools());
        }
    }
}

#[tokio::test]
async fn github_names_are_sanitized_and_shortened_deterministically() {
    let Some(dir) = common::specs_dir() else {
        return;
    };
    let path = dir.join("github-api.github.com.json");
    let load = || OpenApiUpstream::load("github", OpenApiConfig::from_path(path.to_string_lossy()));
    let (a, report) = load().await.unwrap();
    let (b, _) = load().await.unwrap();
    let names_a: Vec<String> = a.tools().iter().map(|t| t.name.clone()).collect();
    let names_b: Vec<String> = b.tools().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names_a, names_b);
    assert!(names_a.contains(&"repos_get-content".to_string()));
    // `github__` leaves 56 characters; the 30 ids over 64 and more get a hash suffix
    assert_eq!(report.name_budget, 56);
    assert!(report.shortened.len() >= 30, "{}", report.shortened.len());
    for (full, short) in &report.shortened {
        assert!(full.len() > 56 && short.len() <= 56, "{full} -> {short}");
    }
}

#[tokio::test]
async fn stripe_form_bodies_become_full_tools() {
    let Some(dir) = common::specs_dir() else {
        return;
    };
    let path = dir.join("stripe-spec3.yaml");
    let (up, _) = OpenApiUpstream::load("stripe", OpenApiConfig::from_path(path.to_string_lossy()))
        .await
        .unwrap();
    let tools = up.tools();
    let posts = tools.iter().filter(|t| {
        t.raw["annotations"]["readOnlyHint"] == false
            && t.raw["annotations"]["destructiveHint"] == false
    });
    let mut empty = 0;
    let mut total = 0;
    for t in posts {
        total += 1;
        if t.raw["inputSchema"]["properties"]
            .as_object()
            .unwrap()
            .is_empty()
        {
            empty += 1;
        }
    }
    // a handful of Stripe POSTs genuinely take no arguments; most take many
    assert!(total > 200, "{total}");
    assert!(
        empty * 10 < total,
        "{empty} of {total} write tools have no arguments"
    );
    let pi = tools
        .iter()
        .find(|t| t.name == "PostPaymentIntents")
        .unwrap();
    let props = pi.raw["inputSchema"]["properties"].as_object().unwrap();
    assert!(
        props.contains_key("amount") && props.contains_key("metadata"),
        "{props:?}"
    );
    assert!(
        pi.raw["inputSchema"]["required"]
            .as_array()
            .unwrap()
            .contains(&"amount".into())
    );
}
