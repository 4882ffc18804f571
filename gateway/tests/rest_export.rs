//! Every tool of the shared OpenAPI corpus, served by a running gateway through
//! `GET /v1/tools?format=…[&strict=true]`, checked against each format's rules with the
//! same rule-based validator as `export_formats.rs` (written from the consumers' rules,
//! not from the converter). This covers what the endpoint adds on top of the export
//! module: the catalog's namespaced names, the protocol tools, and nothing skipped but
//! the refusals `export_formats.rs` allows.
//!
//! The corpus lives in `$TOOLGATE_SHARED/specs` (default `../shared/specs` beside the
//! workspace root); without it the test prints a notice and passes, except under
//! `CI=true`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate::app::App;
use toolgate::config::Config;
use toolgate::credentials::Authenticator;
use toolgate::export::{Format, export_name};
use toolgate::gateway::Gateway;
use toolgate_adapters::JsonObject;

#[path = "export_formats/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "export_formats/rules.rs"]
#[allow(dead_code)]
mod rules;

use harness::{VARIANTS, check, label};

/// Starts the gateway in this process on 127.0.0.1 with one OpenAPI upstream per spec.
async fn serve(specs: &[PathBuf]) -> (Arc<Gateway>, String, CancellationToken) {
    let upstreams: serde_json::Map<String, Value> = specs
        .iter()
        .map(|path| {
            let name = harness::upstream_name(path);
            (name, json!({"openapi": {"spec_path": path}}))
        })
        .collect();
    let data_dir =
        std::env::temp_dir().join(format!("toolgate-rest-export-{}", std::process::id()));
    let config: Config = serde_json::from_value(json!({
        "data_dir": data_dir,
        "startup_timeout": "60s",
        // Every tool in the caller's list (open mode bounds the first list otherwise).
        "sessions": {"initial_max_tokens": 1_000_000_000},
        "upstreams": upstreams,
    }))
    .expect("a valid config");
    let started = App::start(config).await.expect("the gateway starts");
    let gateway = started.gateway.clone();
    let pending = gateway.wait_for_upstreams(Duration::from_secs(120)).await;
    assert!(pending.is_empty(), "upstreams not imported: {pending:?}");
    gateway.rebuild_catalog();
    let authenticator = Authenticator::new(Vec::new(), None)
        .await
        .expect("an empty authenticator");
    let stop = CancellationToken::new();
    let app = toolgate::serve::router(started, authenticator, stop.child_token());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let address = listener.local_addr().expect("local address");
    let server_stop = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(server_stop.cancelled_owned())
            .await;
    });
    (gateway, format!("http://{address}"), stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_tool_served_by_get_v1_tools_keeps_each_formats_rules() {
    let Some(files) = harness::corpus_specs() else {
        return;
    };
    let (gateway, base, stop) = serve(&files).await;
    let catalog = gateway.catalog();
    assert!(
        catalog.len() > 1000,
        "only {} tools in the catalog",
        catalog.len()
    );
    let mut definitions: HashMap<String, JsonObject> = catalog
        .entries()
        .iter()
        .map(|entry| (entry.name.clone(), entry.definition()))
        .collect();
    for definition in toolgate::catalog::protocol_tools::definitions() {
        let name = definition["name"].as_str().unwrap_or_default().to_owned();
        definitions.insert(name, definition);
    }
    // Gemini renames names it cannot take; a client calls back with the new name.
    let gemini_names: HashMap<String, String> = definitions
        .keys()
        .filter_map(|name| {
            export_name(name, Format::Gemini)
                .ok()
                .map(|exported| (exported, name.clone()))
        })
        .collect();

    let client = reqwest::Client::new();
    let mut violations = Vec::new();
    for (format, strict) in VARIANTS {
        let url = format!("{base}/v1/tools?format={format}&strict={strict}");
        let response = tokio::time::timeout(Duration::from_secs(60), client.get(&url).send())
            .await
            .expect("the list answers within 60 s")
            .expect("the list request succeeds");
        assert_eq!(response.status(), 200, "{url}");
        let body: Value = response.json().await.expect("a JSON body");
        assert_eq!(body["format"], format.as_str());
        let skipped = body["skipped"].as_array().expect("a skipped list");
        // Only what export_formats.rs allows: in strict and Gemini exports, a value
        // only a JSON string could carry where an alternative also takes any string
        // (GitHub's deployment `payload`), listed with its reason.
        let json_string_refusal = |s: &Value| {
            let reason = s["reason"].as_str().unwrap_or_default();
            (strict || format == Format::Gemini)
                && reason.contains("cannot describe")
                && (reason.contains("free-form") || reason.contains("recursive"))
        };
        assert!(
            skipped.len() <= 3 && skipped.iter().all(json_string_refusal),
            "{}: skipped {skipped:?}",
            label(format, strict)
        );
        let tools = body["tools"].as_array().expect("a tools list");
        assert_eq!(
            tools.len() + skipped.len(),
            definitions.len(),
            "{}: every tool is served or skipped with its reason",
            label(format, strict)
        );
        let mut seen = std::collections::HashSet::new();
        for tool in tools {
            let served_name = match format {
                Format::OpenAi => tool["function"]["name"].as_str(),
                _ => tool["name"].as_str(),
            }
            .unwrap_or_default();
            let name = match format {
                Format::Gemini => gemini_names.get(served_name).map(String::as_str),
                _ => Some(served_name),
            };
            let Some(definition) = name.and_then(|n| definitions.get(n)) else {
                violations.push(format!(
                    "{}: unknown tool {served_name}",
                    label(format, strict)
                ));
                continue;
            };
            assert!(
                seen.insert(served_name.to_owned()),
                "{served_name} served twice"
            );
            for problem in check(definition, format, strict, tool).into_iter().take(3) {
                violations.push(format!(
                    "{served_name} [{}]: {problem}",
                    label(format, strict)
                ));
            }
        }
        println!(
            "{:<18} {} tools served and checked",
            label(format, strict),
            tools.len()
        );
    }
    stop.cancel();
    gateway.shutdown().await;
    for violation in violations.iter().take(40) {
        println!("VIOLATION {violation}");
    }
    assert!(
        violations.is_empty(),
        "{} rule violations",
        violations.len()
    );
}
