//! One-line human summaries of a call, so a client can show what is happening without
//! knowing each tool's input shape: `getPet (petId=42)` when it starts,
//! `GET /pets/42 → 200 (1.2 KB)` or `echo → ok (1 text block, 23 B)` when it ends.

use serde_json::Value;
use toolgate_adapters::{JsonObject, ToolError};

/// Longest summary, in characters; longer ones end with `…`.
const MAX_CHARS: usize = 160;
/// Longest argument value shown, in characters.
const MAX_VALUE_CHARS: usize = 40;

/// `tool (a=1, b="x", c=[3 items])`: the tool and its top-level arguments, scalars
/// shown (cut), objects and arrays only counted.
pub fn start(tool: &str, arguments: &JsonObject) -> String {
    if arguments.is_empty() {
        return cap(tool.to_owned());
    }
    let shown: Vec<String> = arguments
        .iter()
        .map(|(key, value)| format!("{key}={}", short_value(value)))
        .collect();
    cap(format!("{tool} ({})", shown.join(", ")))
}

/// The end of a call that returned a result (possibly `isError`).
pub fn complete(tool: &str, raw: &JsonObject) -> String {
    let meta = raw.get("_meta").and_then(Value::as_object);
    let truncated = meta
        .and_then(|m| m.get("toolgate/truncated"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let tokens = meta
        .and_then(|m| m.get("toolgate/resultTokens"))
        .and_then(Value::as_u64);
    let cut_note = match (truncated, tokens) {
        (true, Some(tokens)) => format!(", truncated to {tokens} tokens"),
        (true, None) => ", truncated".to_owned(),
        _ => String::new(),
    };
    if let Some(http) = meta.and_then(|m| m.get("toolgate/http")) {
        let field = |key: &str| http.get(key).and_then(Value::as_str).unwrap_or("?");
        let status = http.get("status").and_then(Value::as_u64).unwrap_or(0);
        let bytes = http.get("bytes").and_then(Value::as_u64).unwrap_or(0);
        return cap(format!(
            "{} {} → {status} ({}){cut_note}",
            field("method"),
            field("path"),
            size(bytes)
        ));
    }
    let blocks = content_blocks(raw);
    let is_error = raw.get("isError").and_then(Value::as_bool).unwrap_or(false);
    if is_error {
        let first_text = blocks
            .iter()
            .find_map(|b| b.get("text").and_then(Value::as_str))
            .unwrap_or("no message");
        return cap(format!("{tool} → error: {}", one_line(first_text)));
    }
    let bytes: usize = blocks.iter().map(block_bytes).sum();
    cap(format!(
        "{tool} → ok ({}, {}){cut_note}",
        describe_blocks(blocks),
        size(bytes as u64)
    ))
}

/// The content blocks of an MCP call result (none when it has no `content` array).
pub fn content_blocks(raw: &JsonObject) -> &[Value] {
    raw.get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The end of a call the gateway could not complete.
pub fn failed(tool: &str, error: &ToolError) -> String {
    cap(format!(
        "{tool} → {}: {}",
        error.code(),
        one_line(&error.to_string())
    ))
}

/// `1 text block`, `2 text blocks, 1 image`, `no content`.
fn describe_blocks(blocks: &[Value]) -> String {
    if blocks.is_empty() {
        return "no content".to_owned();
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for block in blocks {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("block");
        match counts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((kind, 1)),
        }
    }
    counts
        .iter()
        .map(|(kind, n)| match (*kind, *n) {
            ("text", 1) => "1 text block".to_owned(),
            ("text", n) => format!("{n} text blocks"),
            (kind, 1) => format!("1 {kind}"),
            (kind, n) => format!("{n} {kind}s"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn block_bytes(block: &Value) -> usize {
    ["text", "data", "blob"]
        .iter()
        .filter_map(|key| block.get(*key).and_then(Value::as_str))
        .map(str::len)
        .sum::<usize>()
        + block.get("resource").map(block_bytes).unwrap_or_default()
}

/// `512 B`, `1.2 KB`, `3.4 MB` (powers of 1024, one decimal).
pub fn size(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KB {
        format!("{bytes} B")
    } else if b < KB * KB {
        format!("{:.1} KB", b / KB)
    } else {
        format!("{:.1} MB", b / (KB * KB))
    }
}

fn short_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{}\"", cut(&one_line(s), MAX_VALUE_CHARS)),
        Value::Array(items) => format!("[{} items]", items.len()),
        Value::Object(fields) => format!("{{{} fields}}", fields.len()),
        other => cut(&other.to_string(), MAX_VALUE_CHARS),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` in at most `max` characters, the last of a cut one an ellipsis.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

fn cap(text: String) -> String {
    cut(&text, MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn start_shows_scalars_and_counts_containers() {
        let args =
            object(json!({"petId": 42, "name": "Rex\nthe dog", "tags": [1, 2], "owner": {"a": 1}}));
        assert_eq!(
            start("pets__getPet", &args),
            "pets__getPet (petId=42, name=\"Rex the dog\", tags=[2 items], owner={1 fields})"
        );
        assert_eq!(start("t", &JsonObject::new()), "t");
        let long = object(json!({"q": "x".repeat(500)}));
        let summary = start("t", &long);
        assert!(summary.chars().count() <= MAX_CHARS, "{summary}");
        assert!(summary.contains('…'));
    }

    #[test]
    fn complete_prefers_the_http_exchange() {
        let raw = object(json!({
            "content": [{"type": "text", "text": "{}"}],
            "_meta": {"toolgate/http": {"method": "GET", "path": "/pets/42", "status": 200, "bytes": 1229}}
        }));
        assert_eq!(
            complete("pets__getPet", &raw),
            "GET /pets/42 → 200 (1.2 KB)"
        );
    }

    #[test]
    fn complete_describes_content_errors_and_truncation() {
        let raw = object(
            json!({"content": [{"type": "text", "text": "hello"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}),
        );
        assert_eq!(complete("t", &raw), "t → ok (1 text block, 1 image, 9 B)");
        let raw = object(
            json!({"content": [{"type": "text", "text": "boom\nat line 3"}], "isError": true}),
        );
        assert_eq!(complete("t", &raw), "t → error: boom at line 3");
        let raw = object(json!({
            "content": [{"type": "text", "text": "x"}],
            "_meta": {"toolgate/truncated": true, "toolgate/resultTokens": 12000}
        }));
        assert_eq!(
            complete("t", &raw),
            "t → ok (1 text block, 1 B), truncated to 12000 tokens"
        );
        assert_eq!(
            complete("t", &JsonObject::new()),
            "t → ok (no content, 0 B)"
        );
    }

    #[test]
    fn failures_name_the_error_kind() {
        let summary = failed("t", &ToolError::InvalidArgs("`a` is required".into()));
        assert!(summary.starts_with("t → invalid_args: "), "{summary}");
    }

    #[test]
    fn sizes() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KB");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MB");
    }
}
