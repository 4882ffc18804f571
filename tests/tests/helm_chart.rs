//! The Helm chart in `helm/toolgate`, checked offline with Helm's own engine
//! (`tests/python/check_chart.py`, PyPI `helm-python-sdk`: Helm v4's Go SDK, no helm
//! binary, no cluster): lint, render for the default values, every file in `examples/`
//! and variants, every manifest validated against the Kubernetes API schemas in strict
//! mode (PyPI `kubernetes-validate`; custom resources against their CRD's shape), the
//! chart's promises asserted (restricted security context, probes, config checksum,
//! PDB and HPA rules, preStop drain, data_dir on a claim for one pod, the in-chart
//! Redis, NetworkPolicy ports and peers, alerts on metrics the gateway exports, pods
//! rolled by referenced Secrets — rendered against a fake API server for `lookup`) and
//! typo'd values refused by `values.schema.json`.

use std::time::Duration;

use serde_json::json;
use toolgate_e2e::{
    Gateway, START_TIMEOUT, TempDir, free_port, python, require, rest_post, run_python,
    scrape_metrics, wait_for,
};

/// A running gateway's `/metrics`, with a sample in each family the chart's alerts
/// read, so their labels are known too: an upstream that is down
/// (`toolgate_upstream_health`) and a refused call (`toolgate_tool_calls_total`).
async fn exported_metrics() -> String {
    let closed = free_port();
    let gateway = Gateway::spawn(json!({"upstreams": {"down": {
        "streamable_http": {"url": format!("http://127.0.0.1:{closed}/mcp")}
    }}}));
    gateway.wait_ok(&["/healthz"], START_TIMEOUT).await;
    rest_post(
        &gateway,
        "/v1/tools/down__anything/call",
        None,
        json!({"arguments": {}}),
    )
    .await;
    wait_for("samples of the alerts' metrics", START_TIMEOUT, || async {
        let text = scrape_metrics(&gateway, None).await;
        (text.contains("toolgate_upstream_health{") && text.contains("toolgate_tool_calls_total{"))
            .then_some(text)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_chart_renders_validates_and_keeps_its_promises() {
    let py = require!(python());
    let dir = TempDir::new("chart-metrics");
    let metrics = dir.path().join("metrics.txt");
    std::fs::write(&metrics, exported_metrics().await).expect("write the metrics");
    let metrics = metrics.to_str().expect("a UTF-8 path").to_owned();
    // Panics with the script's output when any check fails.
    let summary = tokio::task::spawn_blocking(move || {
        run_python(
            &py,
            "check_chart.py",
            &["--metrics", &metrics],
            Duration::from_secs(300),
        )
    })
    .await
    .expect("check_chart.py");
    println!("check_chart.py: {summary:#}");
    assert_eq!(summary["ok"], true, "{summary}");

    let cases: Vec<&str> = summary["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter_map(|c| c["case"].as_str())
        .collect();
    for want in [
        "default values",
        "examples/multi-replica.yaml",
        "examples/single-replica.yaml",
        "examples/evaluation-redis.yaml",
        "multi-replica with a managed Redis CA",
        "in-chart Redis, 3 replicas",
        "NetworkPolicy with an external Redis and metrics",
    ] {
        assert!(cases.contains(&want), "case {want} missing from {cases:?}");
    }
    // What each example exists to show is in its rendering.
    for (case, kinds) in [
        (
            "default values",
            &["Deployment", "PersistentVolumeClaim"][..],
        ),
        (
            "examples/multi-replica.yaml",
            &[
                "Deployment",
                "HorizontalPodAutoscaler",
                "PodDisruptionBudget",
                "Ingress",
                "ServiceMonitor",
            ],
        ),
        (
            "examples/single-replica.yaml",
            &[
                "PersistentVolumeClaim",
                "NetworkPolicy",
                "PrometheusRule",
                "ServiceMonitor",
            ],
        ),
        (
            "examples/evaluation-redis.yaml",
            &["NetworkPolicy", "PrometheusRule", "PodDisruptionBudget"],
        ),
    ] {
        let rendered = summary["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["case"] == case)
            .unwrap();
        for kind in kinds {
            assert!(
                rendered["kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k == kind),
                "{case} renders no {kind}: {rendered}"
            );
        }
    }
    assert!(
        summary["crd_shape_checked"].as_array().is_some_and(|c| c
            .iter()
            .any(|c| c.as_str().is_some_and(|c| c.contains("PrometheusRule")))),
        "no PrometheusRule was checked: {summary}"
    );
    assert!(
        summary["secret_rollout_checked"]
            .as_array()
            .is_some_and(|names| names.len() >= 2),
        "the Secret checksum was not checked against changed Secrets: {summary}"
    );
    assert!(
        summary["manifests_validated"].as_u64().unwrap_or(0) >= 10,
        "too few manifests validated: {summary}"
    );
    for guard in [
        "top-level typo replicaCont",
        "3 replicas without Redis",
        "an existing claim for state in Redis",
        "restricted egress without the external Redis' address",
    ] {
        assert!(
            summary["rejected"]
                .as_array()
                .is_some_and(|r| r.iter().any(|c| c == guard)),
            "not refused: {guard}: {summary}"
        );
    }
}

/// The chart's `config` is checked against the gateway's own config schema: the
/// `$defs` of `values.schema.json` are `toolgate config-schema` (its root as
/// `ToolgateConfig`). After a config change, regenerate them with
/// `TOOLGATE_WRITE_CHART_SCHEMA=1 cargo test --workspace --test helm_chart` (it
/// rewrites only `$defs`: the chart's own values are described by hand above them).
#[test]
fn the_charts_config_schema_is_the_gateways_own() {
    let output = std::process::Command::new(toolgate_e2e::toolgate_bin())
        .arg("config-schema")
        .output()
        .expect("run toolgate config-schema");
    assert!(output.status.success(), "toolgate config-schema failed");
    let mut gateway: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the config schema is JSON");
    let root = gateway.as_object_mut().expect("an object schema");
    let mut defs = root.remove("$defs").expect("the config schema has $defs");
    root.remove("$schema");
    defs["ToolgateConfig"] = gateway;

    let path = toolgate_e2e::workspace_root().join("helm/toolgate/values.schema.json");
    let text = std::fs::read_to_string(&path).expect("values.schema.json");
    let mut chart: serde_json::Value = serde_json::from_str(&text).expect("values.schema.json");
    assert_eq!(
        chart["properties"]["config"]["allOf"][0]["$ref"], "#/$defs/ToolgateConfig",
        "the chart's config refers to the gateway's schema"
    );
    if chart["$defs"] == defs {
        return;
    }
    if std::env::var_os("TOOLGATE_WRITE_CHART_SCHEMA").is_some() {
        chart["$defs"] = defs;
        let written = serde_json::to_string_pretty(&chart).expect("json") + "\n";
        std::fs::write(&path, written).expect("write values.schema.json");
        return;
    }
    panic!(
        "helm/toolgate/values.schema.json's $defs differ from `toolgate config-schema`: \
         regenerate them with TOOLGATE_WRITE_CHART_SCHEMA=1 cargo test --workspace \
         --test helm_chart"
    );
}
