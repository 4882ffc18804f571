//! Measures the token budget module.
//!
//! `cargo run --release -p toolgate --example truncate_bench` times `truncate_result`
//! on large results (1 MB JSON to 12,000 tokens, …), median of several runs.
//! `-- --compare` also compares the two tokenizer crates (bpe-openai, tiktoken-rs) on
//! real payloads: time per count, tokens per second, and whether the counts agree.
//!
//! Payloads come from the shared specs (`TOOLGATE_SHARED`, default `../shared` next to
//! the workspace) when present, and from the shared fixed-seed generator
//! (`toolgate_test_support::text`) otherwise.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::truncate::{Budget, Encoding, count, truncate_result};
use toolgate_test_support::text;

const RUNS: usize = 7;

fn shared_dir() -> PathBuf {
    match std::env::var_os("TOOLGATE_SHARED") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    }
}

fn slice(s: &str, n: usize) -> String {
    text::slice(s, n).to_owned()
}

fn prose(n: usize) -> String {
    text::prose(text::WORDS, n, 7)
}

fn base64_blob(n: usize) -> String {
    text::base64_of(n * 3 / 4, 11)
}

fn uuids(n: usize) -> String {
    text::uuid_lines(n, 13)
}

/// A 1 MB list response: an array of records (the payload of the bench's truncation
/// rows).
pub fn json_records(n: usize) -> String {
    text::json_records(n, text::WORDS, 17)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<F: FnMut() -> usize>(mut f: F) -> (Duration, usize) {
    let mut out = 0;
    let times = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            out = std::hint::black_box(f());
            t.elapsed()
        })
        .collect();
    (median(times), out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn payloads() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let dir = shared_dir().join("specs");
    match std::fs::read_to_string(dir.join("github-api.github.com.json")) {
        Ok(s) => {
            out.push(("github spec JSON, 45 KB".into(), slice(&s, 45 * 1024)));
            out.push(("github spec JSON, 1 MB".into(), slice(&s, 1024 * 1024)));
        }
        Err(_) => eprintln!("notice: {} not found, spec payloads skipped", dir.display()),
    }
    if let Ok(s) = std::fs::read_to_string(dir.join("stripe-spec3.yaml")) {
        out.push(("stripe spec YAML, 1 MB".into(), slice(&s, 1024 * 1024)));
    }
    out.push((
        "records JSON (generated), 1 MB".into(),
        json_records(1024 * 1024),
    ));
    out.push(("prose, 200 KB".into(), prose(200 * 1024)));
    out.push(("base64, 1 MB (one line)".into(), base64_blob(1024 * 1024)));
    out.push(("UUID lines, 200 KB".into(), uuids(200 * 1024)));
    out.push(("one letter repeated, 20 KB".into(), "a".repeat(20 * 1024)));
    out
}

fn compare() {
    let tk = tiktoken_rs::o200k_base_singleton();
    let _ = count("warm up", Encoding::O200kBase);
    println!(
        "| payload | bytes | tokens | bpe-openai ms | tiktoken-rs ms | bpe Mtok/s | tiktoken Mtok/s | same |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, text) in payloads() {
        let (a, na) = time(|| count(&text, Encoding::O200kBase));
        let (b, nb) = time(|| tk.encode_ordinary(&text).len());
        println!(
            "| {name} | {} | {na} | {:.2} | {:.2} | {:.1} | {:.1} | {} |",
            text.len(),
            ms(a),
            ms(b),
            na as f64 / a.as_secs_f64() / 1e6,
            nb as f64 / b.as_secs_f64() / 1e6,
            if na == nb {
                "yes".to_owned()
            } else {
                format!("no ({nb})")
            }
        );
    }
    let tk = tiktoken_rs::cl100k_base_singleton();
    let mut same = true;
    for (_, text) in payloads() {
        same &= count(&text, Encoding::Cl100kBase) == tk.encode_ordinary(&text).len();
    }
    println!("cl100k_base counts equal on all payloads: {same}");
}

fn result_with(text: String) -> serde_json::Map<String, Value> {
    json!({"content": [{"type": "text", "text": text}]})
        .as_object()
        .unwrap()
        .clone()
}

fn main() {
    let _ = count("warm up", Encoding::O200kBase);
    if std::env::args().any(|a| a == "--compare") {
        compare();
        println!();
    }
    let budget = Budget::default();
    let mut cases: Vec<(String, String)> = vec![
        ("1 MB JSON records".into(), json_records(1024 * 1024)),
        ("200 KB prose".into(), prose(200 * 1024)),
        (
            "500 KB single line (base64)".into(),
            base64_blob(500 * 1024),
        ),
        ("small (under budget)".into(), prose(4 * 1024)),
    ];
    if let Ok(s) = std::fs::read_to_string(shared_dir().join("specs/discord-openapi.json")) {
        cases.insert(1, ("1.2 MB JSON object (discord spec)".into(), s));
    }
    println!(
        "truncate_result to {} tokens ({:?}), median of {RUNS} runs:",
        budget.max_tokens, budget.encoding
    );
    for (name, text) in cases {
        let raw = result_with(text);
        let len = serde_json::to_string(&raw).unwrap().len();
        let mut last = None;
        let times: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let input = raw.clone();
                let t = Instant::now();
                let out = truncate_result(input, &budget);
                let d = t.elapsed();
                last = Some(out);
                d
            })
            .collect();
        let out = last.unwrap();
        println!(
            "  {name:<36} {len:>8} bytes: {:>7.2} ms  ({} -> {} tokens)",
            ms(median(times)),
            out.original_tokens,
            out.result_tokens
        );
    }
}
