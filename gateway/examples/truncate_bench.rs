//! Measures the token budget module.
//!
//! `cargo run --release -p toolgate --example truncate_bench` times `truncate_result`
//! on large results (1 MB JSON to 12,000 tokens, …), median of several runs.
//! `-- --compare` also compares the two tokenizer crates (bpe-openai, tiktoken-rs) on
//! real payloads: time per count, tokens per second, and whether the counts agree.
//!
//! Payloads come from the shared specs (`TOOLGATE_SHARED`, default `../shared` next to
//! the workspace) when present, and from fixed-seed generators otherwise.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use toolgate::truncate::{Budget, Encoding, count, truncate_result};

const RUNS: usize = 7;

fn shared_dir() -> PathBuf {
    match std::env::var_os("TOOLGATE_SHARED") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    }
}

/// A small fixed-seed PRNG (xorshift64*), so every run sees the same data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn uuid(&mut self) -> String {
        let a = self.next();
        let b = self.next();
        format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }
}

fn slice(s: &str, n: usize) -> String {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

fn prose(n: usize) -> String {
    let words = [
        "the",
        "gateway",
        "serves",
        "tools",
        "to",
        "agents",
        "and",
        "every",
        "result",
        "must",
        "fit",
        "a",
        "budget",
        "counted",
        "with",
        "real",
        "tokenizer",
        "because",
        "models",
        "read",
        "tokens",
        "not",
        "characters",
        "; ",
        "which",
        "is",
        "why",
        "we",
        "measure",
        "carefully,",
        "then",
        "decide.",
    ];
    let mut rng = Rng(7);
    let mut out = String::new();
    let mut sentence = 0;
    while out.len() < n {
        let w = words[(rng.next() % words.len() as u64) as usize];
        out.push_str(w);
        sentence += 1;
        if sentence % 14 == 0 {
            out.push_str(".\n");
        } else {
            out.push(' ');
        }
    }
    slice(&out, n)
}

fn base64_blob(n: usize) -> String {
    let mut rng = Rng(11);
    let bytes: Vec<u8> = (0..n * 3 / 4).map(|_| rng.next() as u8).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn uuids(n: usize) -> String {
    let mut rng = Rng(13);
    let mut out = String::new();
    while out.len() < n {
        out.push_str(&format!("id={} parent={}\n", rng.uuid(), rng.uuid()));
    }
    slice(&out, n)
}

/// A 1 MB list response: an array of records.
pub fn json_records(n: usize) -> String {
    let mut rng = Rng(17);
    let mut items = Vec::new();
    let mut size = 0;
    let mut i = 0;
    while size < n {
        let item = json!({
            "id": rng.uuid(),
            "number": i,
            "name": format!("record-{i}"),
            "state": if rng.next().is_multiple_of(3) { "closed" } else { "open" },
            "score": (rng.next() % 10_000) as f64 / 100.0,
            "labels": ["bug", "p2", format!("team-{}", rng.next() % 9)],
            "body": prose(120 + (rng.next() % 200) as usize),
        });
        size += serde_json::to_string(&item).unwrap().len() + 1;
        items.push(item);
        i += 1;
    }
    serde_json::to_string(&Value::Array(items)).unwrap()
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
