//! The search evaluation set stays consistent and its bench part runs: every expected
//! tool in `search-eval/queries.jsonl` is listed by a captured server, and
//! `toolgate-bench search --smoke` (three servers, their queries) prints every metric
//! within [0, 1]. No score is asserted: the figures belong in bench/README.md.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

mod common;

const KINDS: &[&str] = &[
    "step",
    "paraphrase",
    "typo",
    "abbrev",
    "multilingual",
    "vague",
    "multi",
];

fn set_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("search-eval")
}

/// `<slug>__<tool name>` for every tool of every captured server.
fn captured_names() -> (usize, HashSet<String>) {
    let dir = set_dir().join("servers");
    let mut servers = 0;
    let mut names = HashSet::new();
    for entry in std::fs::read_dir(&dir).expect("servers dir") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let slug = path.file_stem().and_then(|s| s.to_str()).expect("a slug");
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("readable"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for field in ["package", "version", "license"] {
            assert!(doc[field].is_string(), "{}: no {field}", path.display());
        }
        let tools = doc["tools"].as_array().expect("a tools array");
        assert!(!tools.is_empty(), "{}: no tools", path.display());
        for tool in tools {
            let name = tool["name"].as_str().expect("a tool name");
            names.insert(format!("{slug}__{name}"));
        }
        servers += 1;
    }
    (servers, names)
}

#[test]
fn every_expected_tool_is_captured() {
    let (servers, names) = captured_names();
    assert!(servers >= 25, "{servers} servers");
    let text = std::fs::read_to_string(set_dir().join("queries.jsonl")).expect("queries");
    let mut count = 0;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        let query = q["query"].as_str().expect("a query string");
        assert!(!query.trim().is_empty(), "line {}: empty query", n + 1);
        let kind = q["kind"].as_str().expect("a kind");
        assert!(KINDS.contains(&kind), "line {}: kind {kind:?}", n + 1);
        let expected = q["expected"].as_array().expect("an expected array");
        assert!(!expected.is_empty(), "line {}: nothing expected", n + 1);
        for e in expected {
            let e = e.as_str().expect("a tool name");
            assert!(
                names.contains(e),
                "line {}: {e} is not a captured tool ({query:?})",
                n + 1
            );
        }
        count += 1;
    }
    assert!(count >= 250, "{count} queries");
}

/// The four figures of a metric row: `recall@1 x · recall@5 x · recall@10 x · MRR x`.
fn metrics(line: &str) -> Vec<f64> {
    ["recall@1 ", "recall@5 ", "recall@10 ", "MRR "]
        .iter()
        .map(|label| {
            let at = line
                .find(label)
                .unwrap_or_else(|| panic!("{label} in {line}"));
            let rest = &line[at + label.len()..];
            let number: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            number
                .parse()
                .unwrap_or_else(|e| panic!("{label}: {e} in {line}"))
        })
        .collect()
}

#[test]
fn smoke_slice_reports_metrics_in_range() {
    let (status, stdout, stderr) =
        common::run_bench(&["search", "--smoke"], Duration::from_secs(300));
    assert!(
        status.success(),
        "search --smoke failed ({status}):\n{stdout}\n{stderr}"
    );

    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("| search eval set | 3 servers, ")),
        "set row missing:\n{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("| search eval latency | ")),
        "latency row missing:\n{stdout}"
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("| search eval, ") && l.contains("recall@1 "))
        .collect();
    assert!(
        rows.iter().any(|l| l.starts_with("| search eval, all ")),
        "overall row missing:\n{stdout}"
    );
    for row in rows {
        for value in metrics(row) {
            assert!((0.0..=1.0).contains(&value), "{value} out of [0, 1]: {row}");
        }
    }
}
