//! Properties of the token budget (`toolgate::truncate`) on real and generated results.
//!
//! Real payloads are slices of the shared specs, found through `TOOLGATE_SHARED`
//! (default `../shared` next to the workspace root); when they are missing the tests
//! that need them print a notice and pass, except under `CI=true`, where that fails.
//! Generated payloads come from the shared generator (`toolgate_test_support::text`)
//! with fixed seeds.

use std::path::PathBuf;

use serde_json::{Map, Value, json};
use toolgate::truncate::{
    Budget, Encoding, MIN_TOKENS, Truncated, count, count_whole, truncate_result,
};
use toolgate_test_support::text::{self, Rng, base64_of, slice};

type JsonObject = Map<String, Value>;

const MARKER_END: &str = " tokens truncated …]";

// ----------------------------------------------------------------------------------
// Data.

fn shared_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("TOOLGATE_SHARED") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    };
    if dir.join("specs").is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "shared specs not found at {} (set TOOLGATE_SHARED)",
            dir.display()
        );
    }
    eprintln!(
        "notice: shared specs not found at {}; real-payload test skipped",
        dir.display()
    );
    None
}

fn spec(dir: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(dir.join("specs").join(name))
        .unwrap_or_else(|e| panic!("reading {name}: {e}"))
}

/// Prose with multi-byte words, `n` bytes at most.
fn prose(n: usize, seed: u64) -> String {
    text::prose(text::MIXED_WORDS, n, seed)
}

/// A JSON array of records with multi-byte prose, about `n` bytes.
fn json_records(n: usize, seed: u64) -> String {
    text::json_records(n, text::MIXED_WORDS, seed)
}

fn text_result(texts: &[&str]) -> JsonObject {
    let content: Vec<Value> = texts
        .iter()
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    obj(json!({ "content": content }))
}

fn obj(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

// ----------------------------------------------------------------------------------
// The properties.

fn text_parts(raw: &JsonObject) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::Array(content)) = raw.get("content") {
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(t) = block.get("text").and_then(Value::as_str) {
                        out.push(t.to_owned());
                    }
                }
                Some("resource") => {
                    if let Some(t) = block
                        .get("resource")
                        .and_then(|r| r.get("text"))
                        .and_then(Value::as_str)
                    {
                        out.push(t.to_owned());
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn is_json_container(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v.is_object() || v.is_array())
}

/// Runs `truncate_result` and checks every rule; returns the outcome.
fn check(raw: JsonObject, budget: &Budget) -> Truncated {
    let enc = budget.encoding;
    let limit = budget.max_tokens.max(MIN_TOKENS);
    let before = serde_json::to_string(&raw).unwrap();
    let original_texts = text_parts(&raw);
    // What the model receives: text parts and structuredContent (as compact JSON).
    let structured_tokens = |raw: &JsonObject| {
        raw.get("structuredContent")
            .map_or(0, |s| count(&serde_json::to_string(s).unwrap(), enc))
    };
    let original_tokens: usize =
        original_texts.iter().map(|t| count(t, enc)).sum::<usize>() + structured_tokens(&raw);
    let original_blocks: Vec<Value> = match raw.get("content") {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    let structured = raw.get("structuredContent").cloned();

    let t = truncate_result(raw, budget);
    let after_texts = text_parts(&t.raw);
    let result_tokens: usize =
        after_texts.iter().map(|t| count(t, enc)).sum::<usize>() + structured_tokens(&t.raw);

    // Never over budget; counts are the real counts.
    assert!(
        result_tokens <= limit,
        "{result_tokens} tokens over {limit}"
    );
    assert_eq!(t.result_tokens, result_tokens);
    assert_eq!(t.original_tokens, original_tokens);

    if !t.truncated {
        // Under budget: byte-identical, no meta added.
        assert_eq!(serde_json::to_string(&t.raw).unwrap(), before);
        assert!(original_tokens <= limit);
        return t;
    }

    let meta = t.raw["_meta"].as_object().expect("_meta object");
    assert_eq!(meta["toolgate/originalTokens"], json!(original_tokens));
    assert_eq!(meta["toolgate/resultTokens"], json!(result_tokens));
    assert_eq!(meta["toolgate/truncated"], json!(true));

    // Still a CallToolResult: same number of blocks, each typed.
    let blocks = t.raw["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    // What was cut from JSON arrays may come as one more text block at the end.
    let noted = blocks.len() == original_blocks.len() + 1;
    if noted {
        let note = blocks[blocks.len() - 1]["text"].as_str().unwrap_or("");
        assert!(note.starts_with("[toolgate: JSON shortened"), "{note}");
        assert!(meta["toolgate/jsonCuts"].is_array(), "{meta:?}");
    } else {
        assert_eq!(blocks.len(), original_blocks.len());
    }
    for b in blocks {
        assert!(
            b.get("type").and_then(Value::as_str).is_some(),
            "untyped block {b}"
        );
    }

    // structuredContent: whole, shortened (arrays keep their element type; the cuts
    // listed in `_meta`), or absent and flagged.
    match (&structured, t.raw.get("structuredContent")) {
        (Some(s), Some(kept)) if s != kept => {
            let cuts = meta["toolgate/structuredCuts"]
                .as_array()
                .expect("cuts listed");
            assert!(!cuts.is_empty());
            assert!(
                serde_json::to_string(kept).unwrap().len() <= budget.structured_max_bytes,
                "within structured_max_bytes"
            );
        }
        (Some(s), Some(kept)) => assert_eq!(s, kept),
        (Some(_), None) => {
            let dropped = meta["toolgate/dropped"].as_array().expect("dropped list");
            assert!(dropped.iter().any(|d| d["what"] == "structuredContent"));
        }
        (None, kept) => assert!(kept.is_none()),
    }

    // Per text part: JSON stays JSON; plain text carries one marker exactly when cut.
    let mut i = 0;
    for (orig, block) in original_blocks.iter().zip(blocks) {
        let was_text = orig.get("type") == Some(&json!("text"));
        let still_text = block.get("type") == Some(&json!("text"));
        if !was_text {
            if still_text {
                // A dropped binary: the notice says what went.
                let note = block["text"].as_str().unwrap_or("");
                assert!(note.is_empty() || note.contains("dropped"), "{note}");
            }
            if orig.get("type") == Some(&json!("resource"))
                && orig["resource"].get("text").is_some()
            {
                i += 1;
            }
            continue;
        }
        let (Some(a), Some(b)) = (orig["text"].as_str(), block["text"].as_str()) else {
            continue;
        };
        let _ = &original_texts[i];
        i += 1;
        if is_json_container(a) {
            assert!(
                is_json_container(b) || b.is_empty(),
                "JSON became invalid: {}",
                slice(b, 300)
            );
            if a != b {
                assert!(
                    b.contains("truncated")
                        || meta.contains_key("toolgate/jsonCuts")
                        || b.is_empty()
                );
            }
        } else {
            let markers = b
                .lines()
                .filter(|l| l.starts_with("[… ") && l.ends_with(MARKER_END))
                .count();
            if a == b {
                assert_eq!(b.matches(MARKER_END).count(), a.matches(MARKER_END).count());
            } else {
                assert!(markers == 1 || b.is_empty(), "{markers} markers");
            }
        }
    }
    t
}

fn budgets() -> Vec<Budget> {
    [64usize, 700, 4_000, 12_000]
        .into_iter()
        .map(|max_tokens| Budget {
            max_tokens,
            ..Budget::default()
        })
        .collect()
}

// ----------------------------------------------------------------------------------
// Real payloads.

#[test]
fn spec_slices_as_text() {
    let Some(dir) = shared_dir() else { return };
    for name in [
        "github-api.github.com.json",
        "stripe-spec3.yaml",
        "twilio_api_v2010.json",
        "oai-v3.0-uspto.yaml",
    ] {
        let s = spec(&dir, name);
        for size in [2_000, 45 * 1024, 1024 * 1024] {
            let text = slice(&s, size);
            for budget in budgets() {
                let t = check(text_result(&[text]), &budget);
                if t.truncated {
                    let out = &text_parts(&t.raw)[0];
                    // Head and tail are from the original.
                    let marker_at = out.find("[… ").unwrap();
                    // (one line break is added before the marker when the head does not
                    // end with one)
                    let head = &out[..marker_at];
                    assert!(
                        text.starts_with(head)
                            || text.starts_with(head.strip_suffix('\n').unwrap_or(head))
                    );
                    let tail_at = out[marker_at..].find('\n').unwrap() + marker_at + 1;
                    assert!(text.ends_with(&out[tail_at..]));
                }
            }
        }
    }
}

#[test]
fn spec_json_stays_json() {
    let Some(dir) = shared_dir() else { return };
    let discord = spec(&dir, "discord-openapi.json");
    let github: Value = serde_json::from_str(&spec(&dir, "github-api.github.com.json")).unwrap();
    let pretty_paths = serde_json::to_string_pretty(&github["paths"]).unwrap();
    let compact_schemas = github["components"]["schemas"].to_string();
    let list: Vec<&Value> = github["paths"]
        .as_object()
        .unwrap()
        .values()
        .take(400)
        .collect();
    let array = serde_json::to_string(&list).unwrap();
    for text in [&discord, &pretty_paths, &compact_schemas, &array] {
        for budget in budgets() {
            let t = check(text_result(&[text]), &budget);
            assert!(t.truncated);
        }
    }
    // Under budget: a small real document passes untouched.
    let petstore = spec(&dir, "oai-v2.0-petstore-expanded.json");
    let t = check(text_result(&[&petstore]), &Budget::default());
    assert!(!t.truncated);
}

#[test]
fn spec_slices_share_the_budget() {
    let Some(dir) = shared_dir() else { return };
    let s = spec(&dir, "twilio_api_v2010.json");
    let a = slice(&s, 300 * 1024);
    let b = slice(&s[1000..], 2_000);
    let c = "short note";
    let budget = Budget {
        max_tokens: 3_000,
        ..Budget::default()
    };
    let t = check(text_result(&[a, b, c, a]), &budget);
    let parts = text_parts(&t.raw);
    // The small parts stay whole; the big ones share the rest.
    assert_eq!(parts[1], b);
    assert_eq!(parts[2], c);
    for budget in budgets() {
        check(
            text_result(&[a, b, c]),
            &Budget {
                encoding: Encoding::Cl100kBase,
                ..budget
            },
        );
    }
}

// ----------------------------------------------------------------------------------
// Generated payloads.

#[test]
fn large_json_array_of_objects() {
    let text = json_records(1024 * 1024, 42);
    for budget in budgets() {
        let t = check(text_result(&[&text]), &budget);
        let out: Value = serde_json::from_str(&text_parts(&t.raw)[0]).unwrap();
        let items = out.as_array().unwrap();
        // The array keeps its element type; the note is in _meta and a block of its own.
        assert!(
            items.iter().all(Value::is_object),
            "no note element in the array"
        );
        let cuts = t.raw["_meta"]["toolgate/jsonCuts"]
            .as_array()
            .expect("jsonCuts");
        assert!(
            cuts.iter()
                .any(|c| c.as_str().is_some_and(|c| c.starts_with("/: kept "))),
            "{cuts:?}"
        );
        assert!(items.len() >= 2 || budget.max_tokens < 200);
        if budget.max_tokens == 12_000 {
            // The budget is used, not wasted.
            assert!(t.result_tokens > 12_000 * 7 / 10, "{}", t.result_tokens);
        }
    }
    let t = check(
        text_result(&[&text]),
        &Budget {
            encoding: Encoding::Cl100kBase,
            ..Budget::default()
        },
    );
    assert!(t.truncated);
}

#[test]
fn prose_and_long_lines() {
    let text = prose(200 * 1024, 1);
    let line = base64_of(375 * 1024, 2); // one 500 KB line of base64
    let letters = "x".repeat(500 * 1024); // one 500 KB pre-token
    let emoji = "🚀é日".repeat(60_000); // multi-byte, no breaks
    for budget in budgets() {
        for t in [&text, &line, &letters, &emoji] {
            check(text_result(&[t]), &budget);
        }
    }
    // Head/tail snap to line breaks when they are near.
    let t = check(
        text_result(&[&text]),
        &Budget {
            max_tokens: 2_000,
            ..Budget::default()
        },
    );
    let out = &text_parts(&t.raw)[0];
    let marker_line = out.lines().find(|l| l.ends_with(MARKER_END)).unwrap();
    assert!(out.contains(&format!("\n{marker_line}\n")));
}

#[test]
fn binaries_over_the_limit_are_replaced() {
    let small = base64_of(10_000, 3);
    let big = base64_of(1_200_000, 4);
    let raw = obj(json!({
        "content": [
            {"type": "text", "text": "a picture"},
            {"type": "image", "data": small, "mimeType": "image/png"},
            {"type": "image", "data": big, "mimeType": "image/jpeg"},
            {"type": "audio", "data": big, "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///x.bin", "blob": big, "mimeType": "application/zip"}},
            {"type": "resource_link", "uri": "file:///y", "name": "y"},
        ],
        "isError": false,
    }));
    let t = check(raw, &Budget::default());
    assert!(t.truncated);
    let c = t.raw["content"].as_array().unwrap();
    assert_eq!(c[1]["data"], json!(small));
    for i in [2, 3, 4] {
        assert_eq!(c[i]["type"], "text");
    }
    assert!(c[2]["text"].as_str().unwrap().contains("image/jpeg"));
    assert!(c[3]["text"].as_str().unwrap().contains("audio/wav"));
    assert_eq!(
        t.raw["_meta"]["toolgate/dropped"].as_array().unwrap().len(),
        3
    );
    assert_eq!(c[5]["type"], "resource_link");
    assert_eq!(t.raw["isError"], json!(false));
}

#[test]
fn structured_content_whole_or_flagged() {
    let big: Vec<Value> = (0..20_000)
        .map(|i| json!({"i": i, "name": format!("n{i}")}))
        .collect();
    let small = json!({"answer": 42});
    let long = prose(100 * 1024, 5);
    for (structured, text) in [
        (json!({ "items": big }), "ok"),
        (small.clone(), "ok"),
        (small.clone(), long.as_str()),
        (json!({ "items": big }), long.as_str()),
    ] {
        let raw = obj(json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "_meta": {"upstream/key": "kept"},
        }));
        let t = check(raw, &Budget::default());
        if t.truncated {
            assert_eq!(t.raw["_meta"]["upstream/key"], "kept");
        }
    }
}

#[test]
fn under_budget_is_byte_identical() {
    let mut rng = Rng(99);
    for round in 0..50 {
        let n = 1 + rng.below(4) as usize;
        let texts: Vec<String> = (0..n)
            .map(|i| prose(rng.below(3_000) as usize, round * 10 + i as u64))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut raw = text_result(&refs);
        raw.insert(
            "structuredContent".into(),
            json!({"z": 1, "a": [1, 2, {"b": null}]}),
        );
        raw.insert("_meta".into(), json!({"x": "y"}));
        raw.insert("isError".into(), json!(round % 2 == 0));
        let t = check(raw, &Budget::default());
        assert!(!t.truncated);
    }
}

#[test]
fn random_mixes_never_exceed_the_budget() {
    let mut rng = Rng(2026);
    let pool: Vec<String> = vec![
        prose(30_000, 8),
        json_records(60_000, 9),
        base64_of(20_000, 10),
        (0..2_000)
            .map(|i| format!("{i:08}-{}\n", Rng(i).uuid()))
            .collect(),
        "[1, 2, ".repeat(5_000), // looks like JSON, is not
        "{\"deep\":".repeat(200) + &"}".repeat(200),
        String::new(),
    ];
    for _ in 0..60 {
        let n = 1 + rng.below(5) as usize;
        let mut content = Vec::new();
        for _ in 0..n {
            let p = &pool[rng.below(pool.len() as u64) as usize];
            let part = slice(p, rng.below(p.len() as u64 + 1) as usize);
            if rng.below(4) == 0 {
                content.push(
                    json!({"type": "resource", "resource": {"uri": "mem://x", "text": part}}),
                );
            } else {
                content.push(json!({"type": "text", "text": part}));
            }
        }
        let budget = Budget {
            max_tokens: 1 + rng.below(6_000) as usize,
            encoding: if rng.below(2) == 0 {
                Encoding::O200kBase
            } else {
                Encoding::Cl100kBase
            },
            ..Budget::default()
        };
        check(obj(json!({ "content": content })), &budget);
    }
}

#[test]
fn deeply_nested_json_is_bounded() {
    // Deeper than serde_json parses (handled as text) and just under it.
    for depth in [40usize, 100, 127, 5_000] {
        let text = "[".repeat(depth) + &"\"word \",".repeat(30_000) + "1" + &"]".repeat(depth);
        let t = check(
            text_result(&[&text]),
            &Budget {
                max_tokens: 500,
                ..Budget::default()
            },
        );
        assert!(t.truncated);
    }
}

/// Large texts are counted in parallel chunks; on every corpus spec (megabytes of JSON
/// and YAML) the sum equals the count of the whole text in one piece.
#[test]
fn parallel_counts_equal_whole_counts_on_the_corpus() {
    let Some(dir) = shared_dir() else { return };
    let mut files: Vec<_> = std::fs::read_dir(dir.join("specs"))
        .expect("read specs")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut checked = 0;
    for path in files.iter().take(100) {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if text.len() < 600 * 1024 {
            continue; // small texts are counted whole anyway
        }
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let whole = count_whole(&text, encoding);
            assert_eq!(
                count(&text, encoding),
                whole,
                "{} {encoding:?}",
                path.display()
            );
        }
        checked += 1;
    }
    println!("{checked} large specs counted both ways");
    assert!(checked > 0, "the corpus has specs over 600 KB");
}
