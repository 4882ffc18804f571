//! Assertions on MCP tool results (`{"content": [...], "isError": ...}`), whether a
//! test holds them as a JSON value (from the wire) or as a JSON object (from an
//! upstream in process).

use serde_json::{Map, Value};

/// A tool result, as a value or an object.
pub trait ToolResult {
    /// The result as a JSON value.
    fn as_value(&self) -> Value;
}

impl ToolResult for Value {
    fn as_value(&self) -> Value {
        self.clone()
    }
}

impl ToolResult for Map<String, Value> {
    fn as_value(&self) -> Value {
        Value::Object(self.clone())
    }
}

/// The text of a tools/call result's first text content block (empty when none).
pub fn first_text(call_result: &Value) -> String {
    call_result["content"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == "text"))
        .and_then(|c| c["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Asserts `result` is a tool error (`isError: true`) whose first text block mentions
/// `needle`; on failure prints the whole result. Returns that text.
#[track_caller]
pub fn assert_tool_error<R: ToolResult + ?Sized>(result: &R, needle: &str) -> String {
    let result = result.as_value();
    assert_eq!(
        result["isError"], true,
        "expected a tool error mentioning {needle:?}, got: {result:#}"
    );
    let text = first_text(&result);
    assert!(
        text.contains(needle),
        "the tool error does not mention {needle:?}: {result:#}"
    );
    text
}
