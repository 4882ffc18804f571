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

/// Text made of fragments the pre-tokenizers treat specially: letters in both cases,
/// accents and combining marks, CJK, emoji, contractions and lone quotes, digit runs,
/// every kind of whitespace run, JSON punctuation.
fn awkward_text(fragments: usize, seed: u64) -> String {
    let parts = [
        "a", "Z", "word", "Word", "WORD", "é", "e\u{301}", "日本", "🎉", "'s", "'LL", "'", "\n",
        "\r\n", " ", "  ", "\t", " \n ", "1", "123456", "\"", ",", ":", "}", "{", "[", "]", "-",
        "/", "x1", "_", "\\n", "  \"", "?!", ".\n",
    ];
    let mut seed = seed;
    let mut out = String::new();
    for _ in 0..fragments {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        out.push_str(parts[(seed >> 33) as usize % parts.len()]);
    }
    out
}

/// Letters, digits, `+` and `/` in random order: short unique segments and pieces,
/// enough of them that the memos give up (see `MEMO_TRIAL`).
fn base64_like(len: usize) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut seed = 11u64;
    (0..len)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(alphabet[(seed >> 33) as usize % alphabet.len()])
        })
        .collect()
}

fn counting_samples() -> Vec<String> {
    let mut texts: Vec<String> = (0..40).map(|seed| awkward_text(400, seed)).collect();
    texts.push(awkward_json(300));
    texts.push(awkward_json(301));
    texts.push(base64_like(30_000));
    texts.push("a".repeat(5_000));
    texts.push(" ".repeat(300) + "x");
    texts.push(String::new());
    texts
}

#[test]
fn memo_counts_equal_whole_counts() {
    for text in counting_samples() {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let whole = count_whole(&text, encoding);
            assert_eq!(count_memo(&text, encoding), whole, "{encoding:?} {text:?}");
            assert_eq!(count(&text, encoding), whole, "{encoding:?} {text:?}");
        }
    }
}

#[test]
fn segments_hold_the_same_pieces_as_the_whole_text() {
    for text in counting_samples() {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let tok = encoding.tokenizer();
            let whole: Vec<&str> = tok.split(&text).collect();
            let mut pieces = Vec::new();
            let mut start = 0;
            while start < text.len() {
                let end = memo::segment_end(text.as_bytes(), start);
                assert!(end > start, "segments make progress");
                pieces.extend(tok.split(&text[start..end]));
                start = end;
            }
            assert_eq!(pieces, whole, "{encoding:?} {text:?}");
        }
    }
}

#[test]
fn early_exit_counts_resume_to_the_whole_count() {
    for text in counting_samples() {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let whole = count_whole(&text, encoding);
            for limit in [0, 1, 2, 7, 50, 333, whole.saturating_sub(1), whole] {
                let mut progress = Progress::default();
                let got = PieceCounter::new(encoding).count_till_limit(&text, limit, &mut progress);
                assert_eq!(got, (whole <= limit).then_some(whole), "{limit} {text:?}");
                assert!(progress.tokens <= limit);
                assert_eq!(
                    count_rest(&text, encoding, progress),
                    whole,
                    "{limit} {text:?}"
                );
                assert_eq!(
                    count_till_limit(&text, encoding, limit),
                    got,
                    "{limit} {text:?}"
                );
            }
        }
    }
}

/// The result of `truncate_result` on one large text part is the reference path's:
/// the part shrunk to the whole budget from its count in one piece.
#[test]
fn truncation_matches_the_reference_path() {
    let texts = [
        awkward_json(3_000),
        awkward_json(3_001),
        awkward_text(40_000, 3),
        awkward_text(200_000, 4),
    ];
    for text in texts {
        for (max_tokens, encoding) in [
            (700, Encoding::O200kBase),
            (12_000, Encoding::O200kBase),
            (4_000, Encoding::Cl100kBase),
        ] {
            let total = count_whole(&text, encoding);
            assert!(total > max_tokens, "the sample is over budget");
            let raw = obj(json!({"content": [{"type": "text", "text": text}]}));
            let budget = Budget {
                max_tokens,
                encoding,
                ..Budget::default()
            };
            let t = truncate_result(raw, &budget);
            // JSON-looking text leaves room for the note on shortened arrays.
            let reserve = if text.trim_start().starts_with(['[', '{']) {
                JSON_NOTE_TOKENS.min(max_tokens / 4)
            } else {
                0
            };
            let expected = text::shrink_text(&text, total, max_tokens - reserve, encoding);
            let out = t.raw["content"][0]["text"].as_str().unwrap();
            assert_eq!(out, expected, "{max_tokens} {encoding:?}");
            assert_eq!(t.original_tokens, total);
            assert_eq!(t.raw["_meta"]["toolgate/originalTokens"], json!(total));
            let note = t.raw["content"][1]["text"].as_str().unwrap_or("");
            assert_eq!(
                t.result_tokens,
                count_whole(out, encoding) + count_whole(note, encoding)
            );
        }
    }
}
