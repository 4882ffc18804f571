//! The search evaluation set (`bench/search-eval/`): the tool lists captured from real
//! MCP server packages (`servers/<slug>.json`) and the queries written against them
//! (`queries.jsonl`). Loading never panics: a malformed file is an error naming it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use toolgate_adapters::ToolDef;

/// Where the set lives: beside this crate's manifest, so every working directory works.
pub(crate) fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("search-eval")
}

/// One captured server: its slug (the upstream name in the catalog) and its tools.
pub(crate) struct Server {
    pub slug: String,
    pub tools: Vec<ToolDef>,
}

/// One query and the catalog names of the tools that would fulfil it.
pub(crate) struct Query {
    pub query: String,
    pub expected: Vec<String>,
    pub kind: String,
}

/// Every `servers/*.json`, sorted by slug (a stable catalog order, so stable ranks).
pub(crate) fn servers(dir: &Path) -> Result<Vec<Server>> {
    let servers_dir = dir.join("servers");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&servers_dir)
        .with_context(|| format!("reading {}", servers_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::with_capacity(files.len());
    for path in files {
        let Some(slug) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        let doc: Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let Some(list) = doc.get("tools").and_then(Value::as_array) else {
            bail!("{}: no \"tools\" array", path.display());
        };
        let mut tools = Vec::with_capacity(list.len());
        for tool in list {
            // The definition as the server listed it is what the catalog holds.
            let def = tool
                .as_object()
                .cloned()
                .and_then(ToolDef::from_raw)
                .with_context(|| format!("{}: a tool without a name", path.display()))?;
            tools.push(def);
        }
        out.push(Server { slug, tools });
    }
    Ok(out)
}

/// `queries.jsonl`: one JSON object a line, blank lines ignored.
pub(crate) fn queries(dir: &Path) -> Result<Vec<Query>> {
    let path = dir.join("queries.jsonl");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", path.display(), n + 1);
        let v: Value = serde_json::from_str(line).with_context(at)?;
        let query = v.get("query").and_then(Value::as_str).with_context(at)?;
        let kind = v.get("kind").and_then(Value::as_str).with_context(at)?;
        let expected: Vec<String> = v
            .get("expected")
            .and_then(Value::as_array)
            .with_context(at)?
            .iter()
            .filter_map(|e| e.as_str().map(str::to_owned))
            .collect();
        if expected.is_empty() {
            bail!("{}: no expected tool", at());
        }
        out.push(Query {
            query: query.to_owned(),
            expected,
            kind: kind.to_owned(),
        });
    }
    Ok(out)
}

/// The expected names that no captured server lists (as `<slug>__<tool name>`), with
/// the query that names them: empty when the set is consistent.
pub(crate) fn unknown_expected(servers: &[Server], queries: &[Query]) -> Vec<(String, String)> {
    let known: std::collections::HashSet<String> = servers
        .iter()
        .flat_map(|s| s.tools.iter().map(|t| format!("{}__{}", s.slug, t.name)))
        .collect();
    queries
        .iter()
        .flat_map(|q| {
            q.expected
                .iter()
                .filter(|e| !known.contains(e.as_str()))
                .map(|e| (q.query.clone(), e.clone()))
        })
        .collect()
}
