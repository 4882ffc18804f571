//! Token budgets for tool results.
//!
//! Every tool result, on every surface, passes through [`truncate_result`] before it
//! reaches a client: the text it carries must fit [`Budget::max_tokens`], counted with
//! the real BPE tokenizer of the model family ([`Encoding`], o200k_base by default).
//!
//! # Tokenizer: `bpe-openai` (not `tiktoken-rs`)
//!
//! Both crates build offline and give the same counts on every payload measured;
//! `bpe-openai` is faster on every payload and, above all, has no bad worst case
//! (tiktoken's byte-pair merge is quadratic in the length of one pre-token, which is
//! what base64 and long runs without spaces are), and it offers an early-exit count
//! (`count_till_limit`), which makes the common "is this result under budget?" question
//! cost O(budget) instead of O(result). The price is binary size (~33 MB of
//! vocabularies, per the field notes), which a gateway can afford. The comparison, and
//! what each part of a cut costs, are in `bench/README.md` ("Token counting and
//! truncation").
//!
//! # Cost
//!
//! Under budget: one early-exit pass. Over budget: one full count of each oversized
//! part (for `original_tokens` and the marker; it goes on from where the early-exit
//! pass stopped) plus work bounded by the budget (JSON is parsed once, then pruned and
//! re-counted against the budget a few times; plain text is tokenized only around the
//! head and tail cuts).
//!
//! Counting skips most of the tokenizer's work on repetitive text (see `memo`): the
//! text is cut at places where a pre-tokenizer piece always ends, and the count of each
//! short stretch between them (`","name`, ` the`) and of each short piece is
//! remembered, so the regex pre-tokenizer and BPE run once per distinct stretch; memos
//! that do not pay (base64, hashes) are bypassed. Texts over 512 KB are also counted on
//! both cores.
//!
//! # What is counted
//!
//! The tokens of a result are the tokens of everything the model receives as text:
//! `text` blocks, the `text` of embedded `resource` blocks and `structuredContent` (as
//! compact JSON), each counted on its own and summed ([`count`] of each).
//! `structuredContent` is also bounded in bytes ([`Budget::structured_max_bytes`]),
//! images, audio and embedded blobs in bytes ([`Budget::binary_max_bytes`], decoded
//! size). Everything else passes through.
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
//!     first items and their element type (the note, `/items: kept 20 of 4812 items`,
//!     goes to `_meta["toolgate/jsonCuts"]` and one text block appended after the
//!     content, within the budget), objects keep
//!     their keys (small values whole, large ones shrunk) with a `"_truncated"` key when
//!     keys had to go, long strings are cut with an `… [N chars truncated]` note, nesting
//!     deeper than [`MAX_JSON_DEPTH`] is replaced by a note.
//!   * Any other text keeps its head and its tail (half the share each), cut on token
//!     boundaries and snapped back to line breaks where one is near, joined by exactly
//!     one marker line `[… N tokens truncated …]`.
//!   * Every shrunk part is counted again; the whole result, markers included, ends
//!     within budget.
//! * `structuredContent` shares the budget with the texts and must fit
//!   `structured_max_bytes`; over either it is shortened (see `structured`) so it
//!   still validates against the tool's `outputSchema`, the cuts listed in
//!   `_meta["toolgate/structuredCuts"]`. When no valid shortening fits,
//!   [`Truncated::unfit`] says why (the gateway answers an error result); a tool
//!   without an `outputSchema` loses it instead (flagged in `_meta`).
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

mod json;
mod memo;
mod structured;
mod text;

use memo::{PieceCounter, Progress};
use text::{fallback_marker, shrink_text_noted};

/// The smallest budget honoured; smaller ones are raised to it.
pub const MIN_TOKENS: usize = 64;
/// JSON nested deeper than this (inside a result being shrunk) is replaced by a note.
pub const MAX_JSON_DEPTH: usize = 48;

/// The BPE vocabulary tokens are counted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
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
    /// Set when the result cannot be made to fit and still match the tool's
    /// `outputSchema` (why not): the caller answers an error result instead, since a
    /// client would reject this one.
    pub unfit: Option<String>,
}

/// Counts the tokens of `text`. Counts of repeated short pieces are remembered (see
/// [`memo`]) and a large text is counted in parallel chunks (see
/// [`chunks_at_piece_boundaries`]); the sum is the same as counting it whole.
pub fn count(text: &str, encoding: Encoding) -> usize {
    let wanted = text.len() / PARALLEL_CHUNK_BYTES;
    if wanted < 2 {
        // Every result is counted: keep the common, small case free of the CPU query
        // (which reads cgroup files on Linux).
        return count_memo(text, encoding);
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunks = chunks_at_piece_boundaries(text, threads.min(wanted));
    let Some((first, rest)) = chunks.split_first().filter(|(_, rest)| !rest.is_empty()) else {
        return count_memo(text, encoding);
    };
    std::thread::scope(|scope| {
        let others: Vec<_> = rest
            .iter()
            .map(|chunk| (chunk, scope.spawn(move || count_memo(chunk, encoding))))
            .collect();
        let mut total = count_memo(first, encoding);
        for (chunk, other) in others {
            // A tokenizer thread that panicked: count its chunk here instead.
            total += other.join().unwrap_or_else(|_| count_memo(chunk, encoding));
        }
        total
    })
}

/// Counts `text` on this thread with a memo of piece counts.
fn count_memo(text: &str, encoding: Encoding) -> usize {
    PieceCounter::new(encoding).count(text)
}

/// Counts the tokens of `text` in one piece on this thread (the reference [`count`]
/// must agree with).
pub fn count_whole(text: &str, encoding: Encoding) -> usize {
    encoding.tokenizer().count(text)
}

/// Below this many bytes per chunk, one thread counts faster than several.
const PARALLEL_CHUNK_BYTES: usize = 256 * 1024;

/// Splits `text` into about `parts` chunks whose token counts add up to the whole's.
///
/// BPE merges never cross the pre-tokenizer's pieces, so counts add up across a cut at
/// a piece boundary. Both o200k_base's and cl100k_base's pre-tokenizers always end a
/// piece between an ASCII letter or digit and a following `"`, `,`, `:` or `}`: letter
/// and digit runs end at the first other character (contractions start with `'`), and
/// a punctuation run (` ?[^\s\p{L}\p{N}]+`) starts with its punctuation. Cuts are made
/// only there (JSON is full of them); a text without one stays whole.
fn chunks_at_piece_boundaries(text: &str, parts: usize) -> Vec<&str> {
    if parts < 2 {
        return vec![text];
    }
    let bytes = text.as_bytes();
    let mut chunks = Vec::with_capacity(parts);
    let mut start = 0;
    for part in 1..parts {
        let target = (bytes.len() * part / parts).max(start + 1);
        let cut = (target..bytes.len().saturating_sub(1)).find(|&i| {
            bytes[i].is_ascii_alphanumeric() && matches!(bytes[i + 1], b'"' | b',' | b':' | b'}')
        });
        let Some(cut) = cut.map(|i| i + 1) else { break };
        chunks.push(&text[start..cut]);
        start = cut;
    }
    chunks.push(&text[start..]);
    chunks
}

/// Counts the tokens of `text` if there are at most `limit`; `None` (found out after
/// tokenizing about `limit` tokens, not the whole text) otherwise.
pub fn count_till_limit(text: &str, encoding: Encoding, limit: usize) -> Option<usize> {
    PieceCounter::new(encoding).count_till_limit(text, limit, &mut Progress::default())
}

/// The tokens of `texts` together, when they fit `limit`; counting stops as soon as
/// they do not. Each text's count so far is kept in its `progress` (for the exact
/// counts that follow a miss).
fn count_texts_till_limit<'t>(
    texts: impl Iterator<Item = &'t str>,
    encoding: Encoding,
    limit: usize,
    progress: &mut [Progress],
) -> Option<usize> {
    let mut seen = 0usize;
    for (text, progress) in texts.zip(progress) {
        seen += PieceCounter::new(encoding).count_till_limit(text, limit - seen, progress)?;
    }
    Some(seen)
}

/// The tokens of a result made only of text blocks (`texts`), when they fit the
/// budget: such a result passes on untouched (no byte limit applies to text).
/// `None` when it must be cut ([`truncate_result_for`] on its parsed form).
pub fn plain_tokens(texts: &[std::borrow::Cow<'_, str>], budget: &Budget) -> Option<usize> {
    let mut progress = vec![Progress::default(); texts.len()];
    count_texts_till_limit(
        texts.iter().map(|text| &**text),
        budget.encoding,
        budget.max_tokens.max(MIN_TOKENS),
        &mut progress,
    )
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
    /// `structuredContent` as compact JSON (what the model receives of it).
    structured: Option<String>,
}

fn survey(raw: &JsonObject, budget: &Budget) -> Survey {
    let mut texts = Vec::new();
    let mut oversized = Vec::new();
    if let Some(Value::Array(content)) = raw.get("content") {
        for (i, block) in content.iter().enumerate() {
            let Some(obj) = block.as_object() else {
                continue;
            };
            let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "text" if obj.get("text").is_some_and(Value::is_string) => {
                    texts.push(TextAt::Block(i));
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
    let structured = raw
        .get("structuredContent")
        .and_then(|v| serde_json::to_string(v).ok());
    Survey {
        texts,
        oversized,
        structured,
    }
}

fn mime_of(obj: &Map<String, Value>) -> String {
    obj.get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("application/octet-stream")
        .to_owned()
}

// ---------------------------------------------------------------------------------
// The entry point.

/// Fits a raw `CallToolResult` into `budget` (see the module docs for the rules), for
/// a tool without an `outputSchema`.
pub fn truncate_result(raw: JsonObject, budget: &Budget) -> Truncated {
    truncate_result_for(raw, budget, None)
}

/// [`truncate_result`] for a tool whose `outputSchema` is `output_schema`: a shrunk
/// `structuredContent` still matches it (or [`Truncated::unfit`] says why it cannot).
pub fn truncate_result_for(
    raw: JsonObject,
    budget: &Budget,
    output_schema: Option<&Value>,
) -> Truncated {
    let enc = budget.encoding;
    let max_tokens = budget.max_tokens.max(MIN_TOKENS);
    let survey = survey(&raw, budget);
    let structured_over_bytes = survey
        .structured
        .as_ref()
        .is_some_and(|s| s.len() > budget.structured_max_bytes);

    // Cheap check first: early-exit counts against what is left of the budget. How far
    // each count got is kept: the exact counts below go on from there.
    let mut checked = vec![Progress::default(); survey.texts.len()];
    if !structured_over_bytes
        && let Some(seen) = fits_as_is(&raw, &survey, enc, max_tokens, &mut checked)
    {
        return Truncated {
            raw,
            original_tokens: seen,
            result_tokens: seen,
            truncated: false,
            unfit: None,
        };
    }

    let mut raw = raw;
    let mut dropped: Vec<Value> = Vec::new();
    let structured_tokens = survey.structured.as_deref().map(|s| count(s, enc));

    // Exact counts of every text part (needed for the totals and the markers).
    let totals: Vec<usize> = {
        let content = content_slice(&raw);
        survey
            .texts
            .iter()
            .zip(&checked)
            .map(|(&at, &progress)| count_rest(text_at(content, at).unwrap_or(""), enc, progress))
            .collect()
    };
    let original_tokens: usize = totals.iter().sum::<usize>() + structured_tokens.unwrap_or(0);

    // Oversized binaries become notices (which count against the budget).
    let notice_tokens = replace_oversized(
        &mut raw,
        &survey.oversized,
        budget,
        max_tokens,
        &mut dropped,
    );

    // Texts and structuredContent share what is left.
    // Room for the block that says what was cut from JSON arrays (see below).
    let note_reserve = note_reserve(&raw, &survey, max_tokens);
    let available = max_tokens.saturating_sub(notice_tokens + note_reserve);
    let mut parts = totals.clone();
    parts.extend(structured_tokens);
    let mut shares = water_fill(&parts, available);
    let structured_share = structured_tokens.and_then(|_| shares.pop());
    let mut unfit = None;
    let mut structured_cut = false;
    if let (Some(share), Some(tokens), Some(text)) =
        (structured_share, structured_tokens, &survey.structured)
        && (tokens > share || structured_over_bytes)
    {
        match shrink_structured(
            &mut raw,
            share,
            output_schema,
            budget,
            text.len(),
            &mut dropped,
        ) {
            Ok(cut) => structured_cut = cut,
            Err(reason) => unfit = Some(reason),
        }
    }
    let (cut_any, json_cuts) =
        shrink_texts(&mut raw, &survey.texts, &totals, &shares, note_reserve, enc);
    let note_tokens = match content_slice(&raw).last() {
        Some(block) if !json_cuts.is_empty() => block
            .get("text")
            .and_then(Value::as_str)
            .filter(|t| t.starts_with(JSON_NOTE_PREFIX))
            .map_or(0, |t| count(t, enc)),
        _ => 0,
    };

    let result_tokens = result_tokens(&raw, &survey, enc) + note_tokens;
    let truncated = cut_any || structured_cut || !dropped.is_empty();
    let counts = (original_tokens, result_tokens, truncated);
    write_meta(&mut raw, counts, dropped, &json_cuts);
    Truncated {
        raw,
        original_tokens,
        result_tokens,
        truncated,
        unfit,
    }
}

/// The tokens kept for the note that says what was cut from JSON arrays: some when a
/// text part looks like JSON, none otherwise.
fn note_reserve(raw: &JsonObject, survey: &Survey, max_tokens: usize) -> usize {
    let content = content_slice(raw);
    let json_like = survey
        .texts
        .iter()
        .any(|&at| text_at(content, at).is_some_and(|t| t.trim_start().starts_with(['[', '{'])));
    if json_like {
        JSON_NOTE_TOKENS.min(max_tokens / 4)
    } else {
        0
    }
}

/// The result's `_meta` says what the budget did: the counts (`original`, `result`,
/// `truncated`), what was dropped and which JSON arrays were cut.
fn write_meta(
    raw: &mut JsonObject,
    (original_tokens, result_tokens, truncated): (usize, usize, bool),
    dropped: Vec<Value>,
    json_cuts: &[String],
) {
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
        if !json_cuts.is_empty() {
            meta.insert(
                "toolgate/jsonCuts".into(),
                json_cuts.iter().map(|n| Value::String(n.clone())).collect(),
            );
        }
    }
}

/// The tokens of `raw` when it fits in `max_tokens` as it is (no oversized binary, its
/// texts and structured part under the limit), counted only as far as the limit;
/// `checked` keeps how far each text was counted, for the exact counts after it.
fn fits_as_is(
    raw: &JsonObject,
    survey: &Survey,
    enc: Encoding,
    max_tokens: usize,
    checked: &mut [Progress],
) -> Option<usize> {
    if !survey.oversized.is_empty() {
        return None;
    }
    let content = content_slice(raw);
    let texts = survey
        .texts
        .iter()
        .map(|&at| text_at(content, at).unwrap_or(""));
    let seen = count_texts_till_limit(texts, enc, max_tokens, checked)?;
    match &survey.structured {
        Some(structured) => Some(seen + count_till_limit(structured, enc, max_tokens - seen)?),
        None => Some(seen),
    }
}

/// Shortens each text part of `raw` over its share (`totals[i]` tokens against
/// `shares[i]`); shortened JSON arrays keep their element type, their "kept N of M"
/// notes going into one text block of their own (within `note_reserve` tokens).
/// Answers whether anything was cut, and those notes.
fn shrink_texts(
    raw: &mut JsonObject,
    texts: &[TextAt],
    totals: &[usize],
    shares: &[usize],
    note_reserve: usize,
    enc: Encoding,
) -> (bool, Vec<String>) {
    let mut cut_any = false;
    let mut json_cuts: Vec<String> = Vec::new();
    if let Some(Value::Array(content)) = raw.get_mut("content") {
        for ((&at, &total), &share) in texts.iter().zip(totals).zip(shares) {
            if total <= share {
                continue;
            }
            let Some(slot) = text_at_mut(content, at) else {
                continue;
            };
            let Value::String(text) = slot else { continue };
            let original = std::mem::take(text);
            let (shrunk, notes) = catch_unwind(AssertUnwindSafe(|| {
                shrink_text_noted(&original, total, share, enc)
            }))
            .unwrap_or_else(|_| (fallback_marker(total, share, enc), Vec::new()));
            *text = shrunk;
            json_cuts.extend(notes);
            cut_any = true;
        }
        // Shortened JSON arrays keep their element type: the "kept N of M" notes go
        // in a text block of their own (and `_meta`), not into the arrays.
        let note = json_cut_note(&json_cuts, note_reserve, enc);
        if !note.is_empty() {
            content.push(serde_json::json!({"type": "text", "text": note}));
        }
    }
    (cut_any, json_cuts)
}

/// Shrinks `raw`'s `structuredContent` to `share` tokens, still matching
/// `output_schema`: `Ok(true)` when shrunk (the cuts in `_meta`), `Ok(false)` when it
/// had to go (no schema asks for it; noted in `dropped`), `Err` with the reason when a
/// schema asks for it and it cannot be shrunk to fit. `bytes` is its size as sent.
fn shrink_structured(
    raw: &mut JsonObject,
    share: usize,
    output_schema: Option<&Value>,
    budget: &Budget,
    bytes: usize,
    dropped: &mut Vec<Value>,
) -> Result<bool, String> {
    let value = raw.get("structuredContent").cloned().unwrap_or_default();
    let shrunk = catch_unwind(AssertUnwindSafe(|| {
        structured::shrink(
            &value,
            output_schema,
            budget.structured_max_bytes,
            share,
            budget.encoding,
        )
    }))
    .unwrap_or_else(|_| Err("shortening it failed".to_owned()));
    match shrunk {
        Ok(shrunk) => {
            raw.insert("structuredContent".into(), shrunk.value);
            if let Value::Object(meta) = raw
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()))
            {
                meta.insert("toolgate/structuredCuts".into(), Value::Array(shrunk.cuts));
            }
            Ok(true)
        }
        Err(reason) if output_schema.is_some() => Err(reason),
        Err(reason) => {
            // No schema asks for it: the part that cannot fit goes, flagged.
            raw.remove("structuredContent");
            dropped.push(serde_json::json!({
                "what": "structuredContent",
                "bytes": bytes,
                "limit": budget.structured_max_bytes,
                "reason": reason,
            }));
            Ok(false)
        }
    }
}

/// Replaces each oversized binary block of `raw` by a text notice (one short notice
/// each, or none, when many would eat the budget), noting each in `dropped`. Answers
/// the notices' tokens, which count against the budget.
fn replace_oversized(
    raw: &mut JsonObject,
    oversized: &[Oversized],
    budget: &Budget,
    max_tokens: usize,
    dropped: &mut Vec<Value>,
) -> usize {
    let enc = budget.encoding;
    let mut notice_tokens = 0usize;
    let mut notices: Vec<(usize, String)> = Vec::new();
    for o in oversized {
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
    notice_tokens
}

/// The tokens of a fitted result: its text parts, the notices that replaced binaries,
/// and its `structuredContent` (the JSON-cut note is counted by the caller).
fn result_tokens(raw: &JsonObject, survey: &Survey, enc: Encoding) -> usize {
    let texts: usize = {
        let content = content_slice(raw);
        survey
            .texts
            .iter()
            .map(|&at| count(text_at(content, at).unwrap_or(""), enc))
            .sum::<usize>()
            + if survey.oversized.is_empty() {
                0
            } else {
                // notices are text blocks too
                content_slice(raw)
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| survey.oversized.iter().any(|o| o.index == *i))
                    .map(|(_, b)| count(b.get("text").and_then(Value::as_str).unwrap_or(""), enc))
                    .sum::<usize>()
            }
    };

    texts
        + raw
            .get("structuredContent")
            .and_then(|v| serde_json::to_string(v).ok())
            .map_or(0, |s| count(&s, enc))
}

/// Tokens set aside for the note on shortened JSON arrays.
const JSON_NOTE_TOKENS: usize = 48;
const JSON_NOTE_PREFIX: &str = "[toolgate: JSON shortened";

/// The text block naming what was cut from JSON arrays, within `limit` tokens (as many
/// notes as fit; all of them are in `_meta`).
fn json_cut_note(notes: &[String], limit: usize, enc: Encoding) -> String {
    if notes.is_empty() {
        return String::new();
    }
    for shown in (1..=notes.len()).rev() {
        let more = if shown < notes.len() {
            format!("; {} more in _meta toolgate/jsonCuts", notes.len() - shown)
        } else {
            String::new()
        };
        let text = format!("{JSON_NOTE_PREFIX}: {}{more}]", notes[..shown].join("; "));
        if count_till_limit(&text, enc, limit).is_some() {
            return text;
        }
    }
    let short = format!("{JSON_NOTE_PREFIX}, see _meta toolgate/jsonCuts]");
    if count_till_limit(&short, enc, limit).is_some() {
        short
    } else {
        String::new()
    }
}

/// Tokens of `text`, of which `progress` has counted the start already (it ends on a
/// piece boundary, so the rest counted on its own adds up to the whole).
fn count_rest(text: &str, enc: Encoding, progress: Progress) -> usize {
    match text.get(progress.bytes..) {
        Some(rest) => progress.tokens + count(rest, enc),
        // Not an offset into this text: count it all.
        None => count(text, enc),
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

#[cfg(test)]
mod tests;
