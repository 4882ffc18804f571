//! Token budgets for tool results.
//!
//! Every tool result, on every surface, passes through [`truncate_result`] before it
//! reaches a client: the text it carries must fit [`Budget::max_tokens`], counted with
//! the real BPE tokenizer of the model family ([`Encoding`], o200k_base by default).
//!
//! # Tokenizer: `bpe-openai` (not `tiktoken-rs`)
//!
//! Both crates build offline here (crates.io only; the vocabularies ship inside the
//! crates) and give the **same counts** on every payload measured. Measured with
//! `cargo run --release -p toolgate --example truncate_bench -- --compare` on this
//! 2-core machine (o200k_base, median of 5 runs, ms):
//!
//! | payload                           | bytes     | tokens  | bpe-openai | tiktoken-rs |
//! |-----------------------------------|-----------|---------|------------|-------------|
//! | BENCH_TABLE                                                                         |
//!
//! `bpe-openai` is faster on every payload and, above all, has no bad worst case
//! (tiktoken's byte-pair merge is quadratic in the length of one pre-token, which is
//! what base64 and long runs without spaces are), and it offers an early-exit count
//! (`count_till_limit`), which makes the common "is this result under budget?" question
//! cost O(budget) instead of O(result). The price is binary size (~33 MB of
//! vocabularies, per the field notes), which a gateway can afford.
//!
//! # What is counted
//!
//! The tokens of a result are the tokens of its text-bearing content: `text` blocks and
//! the `text` of embedded `resource` blocks, each counted on its own and summed
//! ([`count`] of each). `structuredContent` is bounded in bytes
//! ([`Budget::structured_max_bytes`]), images, audio and embedded blobs in bytes
//! ([`Budget::binary_max_bytes`], decoded size). Everything else passes through.
//!
//! # Rules
//!
//! * Under budget (and nothing over a byte limit): the result is returned untouched, the
//!   very same object. The check counts with early exit, so a large result over budget
//!   is not tokenized past the budget to find that out.
//! * Over budget: the budget is shared across text parts by *water-filling*: parts
//!   smaller than an equal share stay whole, the remaining budget is split equally
//!   among the larger ones, which are shrunk to their share.
//!   * A part that parses as a JSON object or array stays valid JSON: arrays keep their
//!     first items followed by a note element (`"… kept 20 of 4812 items"`), objects keep
//!     their keys (small values whole, large ones shrunk) with a `"_truncated"` key when
//!     keys had to go, long strings are cut with an `… [N chars truncated]` note, nesting
//!     deeper than [`MAX_JSON_DEPTH`] is replaced by a note.
//!   * Any other text keeps its head and its tail (half the share each), cut on token
//!     boundaries and snapped back to line breaks where one is near, joined by exactly
//!     one marker line `[… N tokens truncated …]`.
//!   * Every shrunk part is counted again; the whole result, markers included, ends
//!     within budget.
//! * `structuredContent` is never cut: kept whole when its JSON is at most
//!   `structured_max_bytes`, otherwise removed (and flagged in `_meta`).
//! * Image/audio blocks (and embedded `blob` resources) whose decoded size exceeds
//!   `binary_max_bytes` are replaced by a text block naming what was dropped.
//! * A changed result gets `_meta` keys `toolgate/originalTokens`,
//!   `toolgate/resultTokens`, `toolgate/truncated` and `toolgate/dropped` (what was
//!   removed); it stays a valid `CallToolResult`.
//! * Budgets below [`MIN_TOKENS`] are treated as [`MIN_TOKENS`] (a marker must fit).
//! * Nothing here panics on any input: recursion is bounded, cuts land on char
//!   boundaries, and each shrink runs behind a panic guard that falls back to a marker.

use std::panic::{AssertUnwindSafe, catch_unwind};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use toolgate_adapters::JsonObject;

/// The smallest budget honoured; smaller ones are raised to it.
pub const MIN_TOKENS: usize = 64;
/// JSON nested deeper than this (inside a result being shrunk) is replaced by a note.
pub const MAX_JSON_DEPTH: usize = 48;

/// The BPE vocabulary tokens are counted with.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// GPT-4o and later (default).
    #[default]
    O200kBase,
    /// GPT-4 / GPT-3.5.
    Cl100kBase,
}

impl Encoding {
    fn tokenizer(self) -> &'static bpe_openai::Tokenizer {
        match self {
            Encoding::O200kBase => bpe_openai::o200k_base(),
            Encoding::Cl100kBase => bpe_openai::cl100k_base(),
        }
    }
}

/// How much of a result may reach the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Budget {
    /// Tokens of text content (default 12,000).
    pub max_tokens: usize,
    /// Vocabulary to count with (default o200k_base).
    pub encoding: Encoding,
    /// `structuredContent` larger than this (serialized JSON bytes) is removed
    /// (default 256 KiB).
    pub structured_max_bytes: usize,
    /// Images, audio and embedded blobs larger than this (decoded bytes) are replaced
    /// by a notice (default 1 MiB).
    pub binary_max_bytes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_tokens: 12_000,
            encoding: Encoding::O200kBase,
            structured_max_bytes: 256 * 1024,
            binary_max_bytes: 1024 * 1024,
        }
    }
}

/// A result after [`truncate_result`].
#[derive(Debug, Clone, PartialEq)]
pub struct Truncated {
    /// The result to send (the input itself when nothing had to change).
    pub raw: JsonObject,
    /// Tokens of the text content as the upstream sent it.
    pub original_tokens: usize,
    /// Tokens of the text content as sent on (equal to the sum of [`count`] over the
    /// text parts of `raw`).
    pub result_tokens: usize,
    /// Whether anything was cut, removed or replaced.
    pub truncated: bool,
}

/// Counts the tokens of `text`.
pub fn count(text: &str, encoding: Encoding) -> usize {
    encoding.tokenizer().count(text)
}

/// Counts the tokens of `text` if there are at most `limit`; `None` (found out after
/// tokenizing about `limit` tokens, not the whole text) otherwise.
pub fn count_till_limit(text: &str, encoding: Encoding, limit: usize) -> Option<usize> {
    let tok = encoding.tokenizer();
    let mut used = 0usize;
    for piece in tok.split(text) {
        used += tok.bpe.count_till_limit(piece.as_bytes(), limit - used)?;
    }
    Some(used)
}

// ---------------------------------------------------------------------------------
// Looking at a result without changing it.

/// Where a text part lives in `content`.
#[derive(Debug, Clone, Copy)]
enum TextAt {
    /// `content[i].text`
    Block(usize),
    /// `content[i].resource.text`
    Resource(usize),
}

fn text_at(content: &[Value], at: TextAt) -> Option<&str> {
    match at {
        TextAt::Block(i) => content.get(i)?.get("text")?.as_str(),
        TextAt::Resource(i) => content.get(i)?.get("resource")?.get("text")?.as_str(),
    }
}

fn text_at_mut(content: &mut [Value], at: TextAt) -> Option<&mut Value> {
    match at {
        TextAt::Block(i) => content.get_mut(i)?.get_mut("text"),
        TextAt::Resource(i) => content.get_mut(i)?.get_mut("resource")?.get_mut("text"),
    }
}

/// A binary payload over the limit.
#[derive(Debug, Clone)]
struct Oversized {
    index: usize,
    kind: String,
    mime: String,
    bytes: usize,
}

fn base64_decoded_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() / 4 * 3 + (trimmed.len() % 4).saturating_sub(1)
}

struct Survey {
    texts: Vec<TextAt>,
    oversized: Vec<Oversized>,
    structured_bytes: Option<usize>,
}

fn survey(raw: &JsonObject, budget: &Budget) -> Survey {
    let mut texts = Vec::new();
    let mut oversized = Vec::new();
    if let Some(Value::Array(content)) = raw.get("content") {
        for (i, block) in content.iter().enumerate() {
            let Some(obj) = block.as_object() else { continue };
            let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "text" => {
                    if obj.get("text").is_some_and(Value::is_string) {
                        texts.push(TextAt::Block(i));
                    }
                }
                "image" | "audio" => {
                    if let Some(data) = obj.get("data").and_then(Value::as_str) {
                        let bytes = base64_decoded_len(data);
                        if bytes > budget.binary_max_bytes {
                            oversized.push(Oversized {
                                index: i,
                                kind: kind.to_owned(),
                                mime: mime_of(obj),
                                bytes,
                            });
                        }
                    }
                }
                "resource" => {
                    let Some(res) = obj.get("resource").and_then(Value::as_object) else {
                        continue;
                    };
                    if res.get("text").is_some_and(Value::is_string) {
                        texts.push(TextAt::Resource(i));
                    }
                    if let Some(blob) = res.get("blob").and_then(Value::as_str) {
                        let bytes = base64_decoded_len(blob);
                        if bytes > budget.binary_max_bytes {
                            oversized.push(Oversized {
                                index: i,
                                kind: "resource".to_owned(),
                                mime: mime_of(res),
                                bytes,
                            });
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let structured_bytes = raw
        .get("structuredContent")
        .and_then(|v| json_len_over(v, budget.structured_max_bytes));
    Survey {
        texts,
        oversized,
        structured_bytes,
    }
}

fn mime_of(obj: &Map<String, Value>) -> String {
    obj.get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("application/octet-stream")
        .to_owned()
}

/// Serialized length of `v` when it exceeds `limit` (stops writing shortly after).
fn json_len_over(v: &Value, limit: usize) -> Option<usize> {
    struct Counter {
        n: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter { n: 0 };
    let _ = serde_json::to_writer(&mut c, v);
    (c.n > limit).then_some(c.n)
}

// ---------------------------------------------------------------------------------
// The entry point.

/// Fits a raw `CallToolResult` into `budget` (see the module docs for the rules).
pub fn truncate_result(raw: JsonObject, budget: &Budget) -> Truncated {
    let enc = budget.encoding;
    let max_tokens = budget.max_tokens.max(MIN_TOKENS);
    let survey = survey(&raw, budget);

    // Cheap check first: early-exit counts against what is left of the budget.
    let mut under = survey.oversized.is_empty() && survey.structured_bytes.is_none();
    let mut seen = 0usize;
    if under {
        let content = content_slice(&raw);
        for &at in &survey.texts {
            let text = text_at(content, at).unwrap_or("");
            match count_till_limit(text, enc, max_tokens - seen) {
                Some(n) => seen += n,
                None => {
                    under = false;
                    break;
                }
            }
        }
    }
    if under {
        return Truncated {
            raw,
            original_tokens: seen,
            result_tokens: seen,
            truncated: false,
        };
    }

    let mut raw = raw;
    let mut dropped: Vec<Value> = Vec::new();

    // structuredContent: whole or gone.
    if let Some(bytes) = survey.structured_bytes {
        raw.remove("structuredContent");
        dropped.push(serde_json::json!({
            "what": "structuredContent",
            "bytes": bytes,
            "limit": budget.structured_max_bytes,
        }));
    }

    // Exact counts of every text part (needed for the totals and the markers).
    let totals: Vec<usize> = {
        let content = content_slice(&raw);
        survey
            .texts
            .iter()
            .map(|&at| count(text_at(content, at).unwrap_or(""), enc))
            .collect()
    };
    let original_tokens: usize = totals.iter().sum();

    // Oversized binaries become notices (which count against the budget).
    let mut notice_tokens = 0usize;
    let mut notices: Vec<(usize, String)> = Vec::new();
    for o in &survey.oversized {
        let text = format!(
            "[toolgate: {} content dropped: {}, {} bytes, over the {} byte limit]",
            o.kind, o.mime, o.bytes, budget.binary_max_bytes
        );
        notice_tokens += count(&text, enc);
        dropped.push(serde_json::json!({
            "what": o.kind,
            "index": o.index,
            "mimeType": o.mime,
            "bytes": o.bytes,
            "limit": budget.binary_max_bytes,
        }));
        notices.push((o.index, text));
    }
    if notice_tokens > max_tokens / 4 && notices.len() > 1 {
        // Many drops: one short notice per block would eat the budget.
        let short = "[toolgate: binary content dropped, see _meta]".to_owned();
        let each = count(&short, enc);
        notice_tokens = each * notices.len();
        if notice_tokens > max_tokens / 4 {
            notice_tokens = 0;
            for n in &mut notices {
                n.1 = String::new();
            }
        } else {
            for n in &mut notices {
                n.1 = short.clone();
            }
        }
    }
    if let Some(Value::Array(content)) = raw.get_mut("content") {
        for (index, text) in notices {
            if let Some(slot) = content.get_mut(index) {
                *slot = serde_json::json!({ "type": "text", "text": text });
            }
        }
    }

    // Texts share what is left.
    let available = max_tokens.saturating_sub(notice_tokens);
    let shares = water_fill(&totals, available);
    let mut cut_any = false;
    if let Some(Value::Array(content)) = raw.get_mut("content") {
        for ((&at, &total), &share) in survey.texts.iter().zip(&totals).zip(&shares) {
            if total <= share {
                continue;
            }
            let Some(slot) = text_at_mut(content, at) else { continue };
            let Value::String(text) = slot else { continue };
            let original = std::mem::take(text);
            let shrunk = catch_unwind(AssertUnwindSafe(|| shrink_text(&original, total, share, enc)))
                .unwrap_or_else(|_| fallback_marker(total, share, enc));
            *text = shrunk;
            cut_any = true;
        }
    }

    let result_tokens: usize = {
        let content = content_slice(&raw);
        survey
            .texts
            .iter()
            .map(|&at| count(text_at(content, at).unwrap_or(""), enc))
            .sum::<usize>()
            + if survey.oversized.is_empty() {
                0
            } else {
                // notices are text blocks too
                content_slice(&raw)
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| survey.oversized.iter().any(|o| o.index == *i))
                    .map(|(_, b)| count(b.get("text").and_then(Value::as_str).unwrap_or(""), enc))
                    .sum::<usize>()
            }
    };

    let truncated = cut_any || !dropped.is_empty();
    let meta = raw
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        meta.insert("toolgate/originalTokens".into(), original_tokens.into());
        meta.insert("toolgate/resultTokens".into(), result_tokens.into());
        meta.insert("toolgate/truncated".into(), truncated.into());
        if !dropped.is_empty() {
            meta.insert("toolgate/dropped".into(), Value::Array(dropped));
        }
    }
    Truncated {
        raw,
        original_tokens,
        result_tokens,
        truncated,
    }
}

fn content_slice(raw: &JsonObject) -> &[Value] {
    match raw.get("content") {
        Some(Value::Array(a)) => a,
        _ => &[],
    }
}

/// Shares `available` among parts of sizes `totals`: parts under an equal share keep
/// their size, the rest split what remains equally.
fn water_fill(totals: &[usize], available: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..totals.len()).collect();
    order.sort_by_key(|&i| totals[i]);
    let mut shares = vec![0; totals.len()];
    let mut left = available;
    let mut remaining = totals.len();
    for i in order {
        let fair = left / remaining.max(1);
        let share = totals[i].min(fair);
        shares[i] = share;
        left -= share;
        remaining -= 1;
    }
    shares
}

// ---------------------------------------------------------------------------------
// Shrinking one text part.

fn marker(removed: usize) -> String {
    format!("[… {removed} tokens truncated …]")
}

fn fallback_marker(total: usize, share: usize, enc: Encoding) -> String {
    let m = marker(total);
    if count(&m, enc) <= share {
        m
    } else {
        String::new()
    }
}

/// Shrinks `text` (of `total` tokens) to at most `share` tokens.
fn shrink_text(text: &str, total: usize, share: usize, enc: Encoding) -> String {
    let trimmed = text.trim_start();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && let Ok(value) = serde_json::from_str::<Value>(text)
        && (value.is_object() || value.is_array())
        && let Some(out) = shrink_json(&value, text, total, share, enc)
    {
        return out;
    }
    shrink_plain(text, total, share, enc)
}

/// Head and tail joined by one marker line; verified to fit.
fn shrink_plain(text: &str, total: usize, share: usize, enc: Encoding) -> String {
    let marker_cost = count(&marker(total), enc) + 2;
    let mut avail = share.saturating_sub(marker_cost);
    for _ in 0..8 {
        let head_target = avail / 2;
        let tail_target = avail - head_target;
        let head_end = head_cut(text, head_target, enc);
        let tail_start = tail_cut(text, tail_target, head_end, enc);
        let head = &text[..head_end];
        let tail = &text[tail_start..];
        let kept = count(head, enc) + count(tail, enc);
        let mut out = String::with_capacity(head.len() + tail.len() + 48);
        out.push_str(head);
        if !head.is_empty() && !head.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&marker(total.saturating_sub(kept)));
        out.push('\n');
        out.push_str(tail);
        if let Some(n) = count_till_limit(&out, enc, share) {
            let _ = n;
            return out;
        }
        // Joining changed the tokenization a little: ask for less.
        avail = avail * 9 / 10;
        if avail == 0 {
            break;
        }
    }
    fallback_marker(total, share, enc)
}

/// How far back from a token cut we look for a line break to snap to.
fn snap_window(len: usize) -> usize {
    (len / 4).min(2000)
}

fn floor_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Byte offset after the first `target` tokens of `text` (on a token boundary, snapped
/// back to a line break when one is near).
fn head_cut(text: &str, target: usize, enc: Encoding) -> usize {
    if target == 0 {
        return 0;
    }
    let tok = enc.tokenizer();
    let mut used = 0usize;
    let mut end = 0usize;
    let base = text.as_ptr() as usize;
    for piece in tok.split(text) {
        let start = piece.as_ptr() as usize - base;
        let left = target - used;
        // Long pieces (a line of base64, a run of one letter) are bounded before BPE.
        let probe = &piece[..floor_char(piece, left.saturating_mul(16).max(64))];
        match tok.bpe.count_till_limit(probe.as_bytes(), left) {
            Some(n) if probe.len() == piece.len() => {
                used += n;
                end = start + piece.len();
            }
            _ => {
                let tokens = tok.bpe.encode_via_backtracking(probe.as_bytes());
                let k = left.min(tokens.len());
                let bytes: usize = tokens[..k].iter().map(|&t| tok.bpe.token_len(t)).sum();
                end = start + floor_char(piece, bytes);
                break;
            }
        }
        if used >= target {
            break;
        }
    }
    let window = snap_window(end);
    if let Some(nl) = text[..end].rfind('\n')
        && end - (nl + 1) <= window
        && nl + 1 > 0
    {
        return nl + 1;
    }
    end
}

/// Byte offset where the last `target` tokens of `text` start (never before
/// `not_before`; snapped forward to just after a line break when one is near).
fn tail_cut(text: &str, target: usize, not_before: usize, enc: Encoding) -> usize {
    if target == 0 {
        return text.len();
    }
    let tok = enc.tokenizer();
    let mut guess = target.saturating_mul(6).max(256);
    for _ in 0..40 {
        let start = ceil_char(text, text.len().saturating_sub(guess)).max(not_before);
        let window = &text[start..];
        let pieces: Vec<(usize, usize)> = {
            let base = window.as_ptr() as usize;
            tok.split(window)
                .map(|p| (p.as_ptr() as usize - base, tok.bpe.count(p.as_bytes())))
                .collect()
        };
        let sum: usize = pieces.iter().map(|p| p.1).sum();
        if sum < target && start > not_before && guess < text.len() {
            guess = guess.saturating_mul(2);
            continue;
        }
        // Drop pieces from the front until the rest fits.
        let mut rest = sum;
        let mut cut = window.len();
        for (idx, &(off, n)) in pieces.iter().enumerate() {
            if rest <= target {
                cut = off;
                break;
            }
            if rest - n < target {
                // Cut inside this piece: keep its last (target - (rest - n)) tokens.
                let end = pieces.get(idx + 1).map_or(window.len(), |p| p.0);
                let piece = &window[off..end];
                let keep = target - (rest - n);
                let tokens = tok.bpe.encode_via_backtracking(piece.as_bytes());
                let k = keep.min(tokens.len());
                let bytes: usize = tokens[tokens.len() - k..]
                    .iter()
                    .map(|&t| tok.bpe.token_len(t))
                    .sum();
                cut = off + ceil_char(piece, piece.len() - bytes.min(piece.len()));
                break;
            }
            rest -= n;
        }
        let abs = start + cut;
        let snap = snap_window(text.len() - abs);
        if let Some(nl) = text[abs..].find('\n')
            && nl < snap
        {
            return abs + nl + 1;
        }
        return abs;
    }
    text.len()
}

// ---------------------------------------------------------------------------------
// JSON.

/// Shrinks a JSON text to `share` tokens, staying valid JSON; `None` when no pruning
/// fits (the caller falls back to head and tail).
fn shrink_json(value: &Value, text: &str, total: usize, share: usize, enc: Encoding) -> Option<String> {
    let pretty = text.trim().contains('\n');
    let bytes_per_token = (text.len() as f64 / total.max(1) as f64).clamp(1.0, 16.0);
    let mut bytes = (share as f64 * bytes_per_token * 0.9) as usize;
    let mut best: Option<String> = None;
    for _ in 0..8 {
        let mut p = Pruner { cut: false };
        let mut pruned = p.prune(value, bytes, 0);
        if p.cut {
            mark_root(&mut pruned, total);
        }
        let out = if pretty {
            serde_json::to_string_pretty(&pruned)
        } else {
            serde_json::to_string(&pruned)
        }
        .ok()?;
        match count_till_limit(&out, enc, share) {
            Some(n) => {
                let good = n * 10 >= share * 8;
                best = Some(out);
                if good {
                    break;
                }
                // Well under: try a bit more.
                bytes = (bytes as f64 * (share as f64 / n.max(1) as f64) * 0.95) as usize;
            }
            None => {
                if best.is_some() {
                    break;
                }
                let n = count(&out, enc).max(1);
                bytes = (bytes as f64 * (share as f64 / n as f64) * 0.9) as usize;
            }
        }
        if bytes < 2 {
            break;
        }
    }
    best.or_else(|| {
        let minimal = if value.is_array() {
            serde_json::json!([format!("… {total} tokens truncated")])
        } else {
            serde_json::json!({ "_truncated": format!("… {total} tokens truncated") })
        };
        let out = serde_json::to_string(&minimal).ok()?;
        count_till_limit(&out, enc, share).map(|_| out)
    })
}

/// Makes sure a cut shows at the root (a note element or a `_truncated` key).
fn mark_root(v: &mut Value, total: usize) {
    match v {
        Value::Object(m) => {
            if !m.contains_key("_truncated") {
                m.insert(
                    "_truncated".into(),
                    Value::String(format!("shortened from {total} tokens")),
                );
            }
        }
        Value::Array(a) => {
            let noted = a
                .last()
                .and_then(Value::as_str)
                .is_some_and(|s| s.starts_with("… kept "));
            if !noted {
                a.push(Value::String(format!("… shortened from {total} tokens")));
            }
        }
        _ => {}
    }
}

/// Compact serialized size of `v`, stopping once it passes `cap` (returns > cap then).
fn size_capped(v: &Value, cap: usize, depth: usize) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => s.len() + 2 + s.bytes().filter(|b| *b == b'"' || *b == b'\\' || *b < 0x20).count(),
        Value::Array(a) => {
            if depth > MAX_JSON_DEPTH {
                return 64;
            }
            let mut n = 2;
            for item in a {
                n += size_capped(item, cap.saturating_sub(n), depth + 1) + 1;
                if n > cap {
                    return n;
                }
            }
            n
        }
        Value::Object(m) => {
            if depth > MAX_JSON_DEPTH {
                return 64;
            }
            let mut n = 2;
            for (k, item) in m {
                n += k.len() + 4 + size_capped(item, cap.saturating_sub(n), depth + 1);
                if n > cap {
                    return n;
                }
            }
            n
        }
    }
}

struct Pruner {
    cut: bool,
}

/// Bytes reserved for a note (`"… kept 20 of 4812 items"`, `"_truncated": …`).
const NOTE: usize = 48;
/// The smallest share worth giving a large object member when shrinking.
const MIN_MEMBER: usize = 256;

impl Pruner {
    /// A copy of `v` whose compact serialization is about `budget` bytes at most.
    fn prune(&mut self, v: &Value, budget: usize, depth: usize) -> Value {
        match v {
            Value::String(s) => {
                let size = s.len() + 2;
                if size <= budget {
                    return v.clone();
                }
                self.cut = true;
                let keep = floor_char(s, budget.saturating_sub(NOTE));
                let dropped = s[keep..].chars().count();
                Value::String(format!("{}… [{} chars truncated]", &s[..keep], dropped))
            }
            Value::Array(a) => {
                if depth >= MAX_JSON_DEPTH {
                    self.cut = true;
                    return Value::String("… nested too deep".into());
                }
                let mut out = Vec::new();
                let mut used = 2usize;
                let room = budget.saturating_sub(NOTE);
                for item in a {
                    if used + 2 > room {
                        break;
                    }
                    let left = room - used;
                    let size = size_capped(item, left, depth + 1);
                    let item = if size <= left {
                        item.clone()
                    } else if left < 16 || !out.is_empty() && left < 64 {
                        break;
                    } else {
                        self.prune(item, left, depth + 1)
                    };
                    let s = size_capped(&item, usize::MAX, depth + 1);
                    if used + s + 1 > room && !out.is_empty() {
                        break;
                    }
                    used += s + 1;
                    out.push(item);
                }
                if out.len() < a.len() {
                    self.cut = true;
                    out.push(Value::String(format!(
                        "… kept {} of {} items",
                        out.len(),
                        a.len()
                    )));
                }
                Value::Array(out)
            }
            Value::Object(m) => {
                if depth >= MAX_JSON_DEPTH {
                    self.cut = true;
                    return Value::String("… nested too deep".into());
                }
                let room = budget.saturating_sub(NOTE);
                // Water-fill by size: small members stay whole.
                let sizes: Vec<usize> = m
                    .iter()
                    .map(|(k, v)| k.len() + 4 + size_capped(v, room, depth + 1))
                    .collect();
                let mut shares = water_fill(&sizes, room.saturating_sub(2));
                // Many large members and little room: rather than shaving each to
                // nothing, the first ones (in key order) keep a useful share each.
                let large: Vec<usize> = (0..sizes.len()).filter(|&i| sizes[i] > shares[i]).collect();
                if let Some(&first) = large.first()
                    && shares[first] < MIN_MEMBER
                {
                    let pool: usize = large.iter().map(|&i| shares[i]).sum();
                    let k = (pool / MIN_MEMBER).max(1);
                    for (n, &i) in large.iter().enumerate() {
                        shares[i] = if n < k { pool / k } else { 0 };
                    }
                }
                let mut out = Map::new();
                let mut kept = 0usize;
                for ((k, item), (&size, &share)) in m.iter().zip(sizes.iter().zip(&shares)) {
                    if size <= share {
                        out.insert(k.clone(), item.clone());
                        kept += 1;
                        continue;
                    }
                    let inner = share.saturating_sub(k.len() + 4);
                    if inner < 24 {
                        self.cut = true;
                        continue;
                    }
                    out.insert(k.clone(), self.prune(item, inner, depth + 1));
                    kept += 1;
                }
                if kept < m.len() {
                    self.cut = true;
                    out.insert(
                        "_truncated".into(),
                        Value::String(format!("kept {} of {} keys", kept, m.len())),
                    );
                }
                Value::Object(out)
            }
            _ => v.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(count_till_limit("hello world", Encoding::O200kBase, 1), None);
        assert_eq!(count_till_limit("hello world", Encoding::O200kBase, 2), Some(2));
    }

    #[test]
    fn encoding_serde_is_snake_case() {
        assert_eq!(serde_json::to_string(&Encoding::O200kBase).unwrap(), "\"o200k_base\"");
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
            let t = truncate_result(obj(v.clone()), &Budget { max_tokens: 1, ..Budget::default() });
            assert!(!t.truncated, "{v}");
        }
    }

    #[test]
    fn plain_text_gets_head_tail_and_marker() {
        let text: String = (0..5000).map(|i| format!("line {i} of the log\n")).collect();
        let raw = obj(json!({"content": [{"type": "text", "text": text}]}));
        let budget = Budget { max_tokens: 500, ..Budget::default() };
        let t = truncate_result(raw, &budget);
        assert!(t.truncated);
        let out = t.raw["content"][0]["text"].as_str().unwrap();
        assert!(count(out, Encoding::O200kBase) <= 500);
        assert_eq!(out.matches(" tokens truncated …]").count(), 1);
        assert!(out.starts_with("line 0 of the log\n"));
        assert!(out.ends_with("line 4999 of the log\n"));
        assert_eq!(t.raw["_meta"]["toolgate/resultTokens"], json!(t.result_tokens));
    }

    #[test]
    fn deep_json_is_bounded() {
        let mut s = String::new();
        for _ in 0..50 {
            s.push_str("{\"a\":[");
        }
        s.push_str(&"x".repeat(100_000).replace('x', "\"xx\","));
        s.push_str("1");
        for _ in 0..50 {
            s.push_str("]}");
        }
        let raw = obj(json!({"content": [{"type": "text", "text": s}]}));
        let t = truncate_result(raw, &Budget { max_tokens: 300, ..Budget::default() });
        let out = t.raw["content"][0]["text"].as_str().unwrap();
        assert!(count(out, Encoding::O200kBase) <= 300);
        assert!(serde_json::from_str::<Value>(out).is_ok());
    }
}
