//! The Helm chart in `helm/toolgate`, checked offline with Helm's own engine
//! (`tests/python/check_chart.py`, PyPI `helm-python-sdk`: Helm v4's Go SDK, no helm
//! binary, no cluster): lint, render for the default values and
//! `examples/multi-replica.yaml`, every manifest validated against the Kubernetes API
//! schemas in strict mode (PyPI `kubernetes-validate`), the chart's promises asserted
//! (restricted security context, probes, config checksum, PDB and HPA rules, preStop
//! drain, no bundled Redis) and typo'd values refused by `values.schema.json`.

use std::time::Duration;

use toolgate_e2e::{python, require, run_python};

#[test]
fn helm_chart_renders_validates_and_keeps_its_promises() {
    let py = require!(python());
    // Panics with the script's output when any check fails.
    let summary = run_python(&py, "check_chart.py", &[], Duration::from_secs(120));
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
        "multi-replica with a managed Redis CA",
    ] {
        assert!(cases.contains(&want), "case {want} missing from {cases:?}");
    }
    let multi = summary["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["case"] == "examples/multi-replica.yaml")
        .unwrap();
    for kind in [
        "Deployment",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "Ingress",
        "ServiceMonitor",
    ] {
        assert!(
            multi["kinds"].as_array().unwrap().iter().any(|k| k == kind),
            "the multi-replica example renders no {kind}: {multi}"
        );
    }
    assert!(
        summary["manifests_validated"].as_u64().unwrap_or(0) >= 10,
        "too few manifests validated: {summary}"
    );
    assert!(
        summary["rejected"]
            .as_array()
            .is_some_and(|r| r.iter().any(|c| c == "top-level typo replicaCont")),
        "a typo'd values key was not refused: {summary}"
    );
}

/// The chart's `config` is checked against the gateway's own config schema: the
/// `$defs` of `values.schema.json` are `toolgate config-schema` (its root as
/// `ToolgateConfig`). After a config change, regenerate them with
/// `TOOLGATE_WRITE_CHART_SCHEMA=1 cargo test -p toolgate-e2e --test helm_chart`.
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
         regenerate them with TOOLGATE_WRITE_CHART_SCHEMA=1 cargo test -p toolgate-e2e \
         --test helm_chart"
    );
}
