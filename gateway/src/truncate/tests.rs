//! Unit tests of the budget module.

use super::*;
use serde_json::json;

fn obj(v: Value) -> JsonObject {
    v.as_object().unwrap().clone()
}

#[test]
fn counts_known_strings() {
    assert_eq!(count("", Encoding::O200kBase), 0);
    assert_eq!(count("hello world", Encoding::O200kBase), 2);
    assert_eq!(count("hello world", Encoding::Cl100kBase), 2);
    assert_eq!(
        count_till_limit("hello world", Encoding::O200kBase, 1),
        None
    );
    assert_eq!(
        count_till_limit("hello world", Encoding::O200kBase, 2),
        Some(2)
    );
}

#[test]
fn encoding_serde_is_snake_case() {
    assert_eq!(
        serde_json::to_string(&Encoding::O200kBase).unwrap(),
        "\"o200k_base\""
    );
    let e: Encoding = serde_json::from_str("\"cl100k_base\"").unwrap();
    assert_eq!(e, Encoding::Cl100kBase);
}

#[test]
fn water_fill_keeps_small_parts() {
    assert_eq!(water_fill(&[10, 1000, 1000], 310), vec![10, 150, 150]);
    assert_eq!(water_fill(&[], 10), Vec::<usize>::new());
    assert_eq!(water_fill(&[5, 5], 100), vec![5, 5]);
}

#[test]
fn base64_length() {
    assert_eq!(base64_decoded_len("aGVsbG8="), 5);
    assert_eq!(base64_decoded_len("aGVsbG8h"), 6);
    assert_eq!(base64_decoded_len(""), 0);
}

#[test]
fn under_budget_is_untouched() {
    let raw = obj(json!({"content": [{"type": "text", "text": "hi"}], "isError": false}));
    let t = truncate_result(raw.clone(), &Budget::default());
    assert!(!t.truncated);
    assert_eq!(t.raw, raw);
    assert_eq!(t.original_tokens, 1);
}

#[test]
fn empty_and_odd_results_do_not_panic() {
    for v in [
        json!({}),
        json!({"content": []}),
        json!({"content": "nope"}),
        json!({"content": [1, null, {"type": "text"}, {"type": "image"}]}),
        json!({"content": [{"type": "text", "text": ""}], "_meta": 3}),
    ] {
        let t = truncate_result(
            obj(v.clone()),
            &Budget {
                max_tokens: 1,
                ..Budget::default()
            },
        );
        assert!(!t.truncated, "{v}");
    }
}

#[test]
fn plain_text_gets_head_tail_and_marker() {
    let text: String = (0..5000)
        .map(|i| format!("line {i} of the log\n"))
        .collect();
    let raw = obj(json!({"content": [{"type": "text", "text": text}]}));
    let budget = Budget {
        max_tokens: 500,
        ..Budget::default()
    };
    let t = truncate_result(raw, &budget);
    assert!(t.truncated);
    let out = t.raw["content"][0]["text"].as_str().unwrap();
    assert!(count(out, Encoding::O200kBase) <= 500);
    assert_eq!(out.matches(" tokens truncated …]").count(), 1);
    assert!(out.starts_with("line 0 of the log\n"));
    assert!(out.ends_with("line 4999 of the log\n"));
    assert_eq!(
        t.raw["_meta"]["toolgate/resultTokens"],
        json!(t.result_tokens)
    );
}

#[test]
fn deep_json_is_bounded() {
    let mut s = String::new();
    for _ in 0..50 {
        s.push_str("{\"a\":[");
    }
    s.push_str(&"x".repeat(100_000).replace('x', "\"xx\","));
    s.push('1');
    for _ in 0..50 {
        s.push_str("]}");
    }
    let raw = obj(json!({"content": [{"type": "text", "text": s}]}));
    let t = truncate_result(
        raw,
        &Budget {
            max_tokens: 300,
            ..Budget::default()
        },
    );
    let out = t.raw["content"][0]["text"].as_str().unwrap();
    assert!(count(out, Encoding::O200kBase) <= 300);
    assert!(serde_json::from_str::<Value>(out).is_ok());
}

#[test]
fn tiny_shares_keep_json_valid() {
    let json_text = serde_json::to_string(&(0..2000).collect::<Vec<_>>()).unwrap();
    let obj_text = serde_json::to_string(&json!({"a": "x".repeat(5000)})).unwrap();
    for share in 0..40 {
        for t in [&json_text, &obj_text] {
            let total = count(t, Encoding::O200kBase);
            let out = text::shrink_text(t, total, share, Encoding::O200kBase);
            assert!(count(&out, Encoding::O200kBase) <= share, "{share}: {out}");
            assert!(
                out.is_empty() || serde_json::from_str::<Value>(&out).is_ok(),
                "{out}"
            );
        }
    }
}

#[test]
fn budget_defaults_and_config_shape() {
    let b = Budget::default();
    assert_eq!(b.max_tokens, 12_000);
    assert_eq!(b.encoding, Encoding::O200kBase);
    assert_eq!(b.structured_max_bytes, 256 * 1024);
    assert_eq!(b.binary_max_bytes, 1024 * 1024);
    let parsed: Budget =
        serde_json::from_value(json!({"max_tokens": 500, "encoding": "cl100k_base"})).unwrap();
    assert_eq!(parsed.max_tokens, 500);
    assert_eq!(parsed.encoding, Encoding::Cl100kBase);
    assert_eq!(parsed.binary_max_bytes, b.binary_max_bytes);
    let schema = serde_json::to_value(schemars::schema_for!(Budget)).unwrap();
    assert!(schema.to_string().contains("o200k_base"));
}

/// JSON with the awkward parts: unicode, contractions, numbers, spaces, newlines.
fn awkward_json(items: usize) -> String {
    let words = [
        "don't",
        "Straße",
        "naïve",
        "日本語",
        "emoji 🎉",
        "it's",
        "x1y2",
        "ABCdef",
        "a\"b",
        " lead",
        "trail ",
        "mi\nxed",
        "tab\there",
        "/path/to",
        "1234567",
    ];
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let values: Vec<Value> = (0..items)
        .map(|i| {
            let text: Vec<&str> = (0..(next() % 12))
                .map(|_| words[next() % words.len()])
                .collect();
            json!({"id": i, "name": text.join(" "), "score": (next() % 100_000) as f64 / 7.0,
                   "tags": [words[next() % words.len()], next() % 1000], "ok": next() % 2 == 0})
        })
        .collect();
    if items.is_multiple_of(2) {
        serde_json::to_string(&values).unwrap()
    } else {
        serde_json::to_string_pretty(&values).unwrap()
    }
}

#[test]
fn chunked_counts_add_up_to_the_whole() {
    for items in [200, 201, 3_000, 3_001] {
        let text = awkward_json(items);
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let whole = encoding.tokenizer().count(&text);
            for parts in 2..=7 {
                let chunks = chunks_at_piece_boundaries(&text, parts);
                assert_eq!(chunks.concat(), text, "chunks cover the text");
                let sum: usize = chunks.iter().map(|c| encoding.tokenizer().count(c)).sum();
                assert_eq!(sum, whole, "{items} items, {parts} parts, {encoding:?}");
            }
            assert_eq!(count(&text, encoding), whole);
        }
    }
}

#[test]
fn text_without_a_safe_cut_stays_whole() {
    let text = "word ".repeat(100_000);
    assert_eq!(chunks_at_piece_boundaries(&text, 4), vec![text.as_str()]);
}
