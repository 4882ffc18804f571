//! The result of a call, and the form it travels in.
//!
//! Most results a gateway passes on are a few text blocks: `{"content":[{"type":
//! "text","text":"…"}],"isError":false}`. Parsing such an answer into a
//! `serde_json::Value` tree and serializing it again for the caller costs a tenth of
//! a whole call's instructions (bench/HISTORY.md, "Plain results passed through",
//! item 7). So an upstream's answer that is exactly that shape — a `content` list of
//! plain text blocks, an optional boolean `isError`, nothing else, on one line — is
//! kept as the upstream's own JSON text ([`CallOutput::plain`]) and written to the
//! caller as it came; everything the gateway must look into or change (structured
//! content, binaries, resources, `_meta`, annotations) is parsed as before. Both forms hold the same result:
//! [`CallOutput::object`] and [`CallOutput::into_object`] give the parsed form of
//! either.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::JsonObject;

/// The result of a call: an MCP `CallToolResult` object (`content`,
/// `structuredContent`, `isError`, `_meta`, …), passed through as the upstream sent it.
/// A tool that ran and reported failure is a successful call with `isError: true`.
#[derive(Debug, Clone)]
pub struct CallOutput {
    form: Form,
}

#[derive(Debug, Clone)]
enum Form {
    Object(JsonObject),
    /// The upstream's JSON text of a plain result (see the module docs), with where
    /// its texts are (read once, when the result arrived).
    Plain {
        json: Box<RawValue>,
        is_error: bool,
        texts: Vec<Text>,
    },
}

/// One text block's text in a plain result.
#[derive(Debug, Clone)]
enum Text {
    /// As it stands in the JSON text (it has no escapes), by byte range.
    At(std::ops::Range<usize>),
    /// Unescaped (it had escapes).
    Unescaped(String),
}

/// A plain result, read from its JSON text without copying what needs no unescaping.
#[derive(Debug)]
pub struct Plain<'a> {
    /// The result's JSON text: one line, an object starting with `{`.
    pub json: &'a str,
    /// The text of each content block, in order.
    pub texts: Vec<Cow<'a, str>>,
}

/// What a plain result may hold; anything else makes it a parsed one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainView<'a> {
    #[serde(borrow)]
    content: Vec<PlainText<'a>>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainText<'a> {
    #[serde(rename = "type")]
    _kind: TextKind,
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[derive(Deserialize)]
enum TextKind {
    #[serde(rename = "text")]
    Text,
}

fn view(json: &str) -> Option<PlainView<'_>> {
    // On one line (a message on an SSE stream must be), an object.
    if !json.starts_with('{') || json.bytes().any(|b| b == b'\n' || b == b'\r') {
        return None;
    }
    serde_json::from_str(json).ok()
}

impl CallOutput {
    pub fn new(raw: JsonObject) -> CallOutput {
        CallOutput {
            form: Form::Object(raw),
        }
    }

    /// A result from its JSON text: kept as text when it is plain (see the module
    /// docs), parsed otherwise. An error (what the text is instead, "an array") when
    /// it is not a JSON object.
    pub fn from_json(json: Box<RawValue>) -> Result<CallOutput, &'static str> {
        if let Some(plain) = view(json.get()) {
            let start = json.get().as_ptr() as usize;
            let texts = plain
                .content
                .into_iter()
                .map(|block| match block.text {
                    Cow::Borrowed(text) => {
                        // A borrowed text is a slice of `json`.
                        let at = text.as_ptr() as usize - start;
                        Text::At(at..at + text.len())
                    }
                    Cow::Owned(text) => Text::Unescaped(text),
                })
                .collect();
            let is_error = plain.is_error;
            return Ok(CallOutput {
                form: Form::Plain {
                    json,
                    is_error,
                    texts,
                },
            });
        }
        match serde_json::from_str::<Value>(json.get()) {
            Ok(Value::Object(raw)) => Ok(CallOutput::new(raw)),
            Ok(other) => Err(crate::error::json_kind(&other)),
            Err(_) => Err("text that is not valid JSON"),
        }
    }

    pub fn is_error(&self) -> bool {
        match &self.form {
            Form::Object(raw) => raw.get("isError").and_then(Value::as_bool).unwrap_or(false),
            Form::Plain { is_error, .. } => *is_error,
        }
    }

    /// The result as the upstream's JSON text with its text blocks, when it is plain.
    pub fn plain(&self) -> Option<Plain<'_>> {
        let Form::Plain { json, texts, .. } = &self.form else {
            return None;
        };
        let json = json.get();
        Some(Plain {
            json,
            texts: texts
                .iter()
                .map(|text| match text {
                    Text::At(at) => Cow::Borrowed(&json[at.clone()]),
                    Text::Unescaped(text) => Cow::Borrowed(text.as_str()),
                })
                .collect(),
        })
    }

    /// The JSON text of a plain result, as the upstream wrote it (one line, an object
    /// of text blocks and `isError` only).
    pub fn plain_json(&self) -> Option<&str> {
        match &self.form {
            Form::Plain { json, .. } => Some(json.get()),
            Form::Object(_) => None,
        }
    }

    /// The result as an object (parsed from its text when it is plain).
    pub fn object(&self) -> Cow<'_, JsonObject> {
        match &self.form {
            Form::Object(raw) => Cow::Borrowed(raw),
            Form::Plain { json, .. } => Cow::Owned(parse_plain(json)),
        }
    }

    /// The result as an object to change (parsed from its text first when it is plain).
    pub fn object_mut(&mut self) -> &mut JsonObject {
        if let Form::Plain { json, .. } = &self.form {
            self.form = Form::Object(parse_plain(json));
        }
        match &mut self.form {
            Form::Object(raw) => raw,
            Form::Plain { .. } => unreachable!("a plain result was just parsed"),
        }
    }

    pub fn into_object(self) -> JsonObject {
        match self.form {
            Form::Object(raw) => raw,
            Form::Plain { json, .. } => parse_plain(&json),
        }
    }
}

/// A plain result's object. Its text was read as an object when it was kept, so this
/// cannot fail; an empty object would stand in if it did.
fn parse_plain(json: &RawValue) -> JsonObject {
    serde_json::from_str(json.get()).unwrap_or_default()
}

impl PartialEq for CallOutput {
    fn eq(&self, other: &CallOutput) -> bool {
        self.object() == other.object()
    }
}

impl From<JsonObject> for CallOutput {
    fn from(raw: JsonObject) -> CallOutput {
        CallOutput::new(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from_text(text: &str) -> CallOutput {
        CallOutput::from_json(RawValue::from_string(text.to_owned()).unwrap()).unwrap()
    }

    #[test]
    fn text_only_results_stay_text_and_read_the_same_as_parsed() {
        let text = r#"{"content":[{"type":"text","text":"a\"b\u00e9"},{"type":"text","text":"x"}],"isError":true}"#;
        let out = from_text(text);
        let plain = out.plain().expect("plain");
        assert_eq!(plain.json, text);
        assert_eq!(out.plain_json(), Some(text));
        assert_eq!(plain.texts, ["a\"bé", "x"]);
        assert!(out.is_error());
        let parsed: JsonObject = serde_json::from_str(text).unwrap();
        assert_eq!(*out.object(), parsed);
        assert_eq!(out.clone().into_object(), parsed);
        assert_eq!(out, CallOutput::new(parsed));
    }

    #[test]
    fn anything_beyond_plain_text_is_parsed() {
        for text in [
            r#"{"content":[{"type":"text","text":"a"}],"_meta":{"k":1}}"#,
            r#"{"content":[{"type":"text","text":"a"}],"structuredContent":{"a":1}}"#,
            r#"{"content":[{"type":"text","text":"a","annotations":{"priority":1}}]}"#,
            r#"{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}"#,
            r#"{"content":[{"type":"resource_link","uri":"x://a","name":"a"}]}"#,
            r#"{"content":[{"type":"text","text":"a"}],"isError":null}"#,
            r#"{"content":[{"type":"text","text":"a"}],"content":[]}"#,
            "{\"content\":[{\"type\":\"text\",\n\"text\":\"a\"}]}",
            r#"{"content":[{"type":"text","text":"a"}],"x-extra":1}"#,
        ] {
            let out = from_text(text);
            assert!(out.plain().is_none(), "{text}");
            let parsed: JsonObject = serde_json::from_str(text).unwrap();
            assert_eq!(out.into_object(), parsed, "{text}");
        }
    }

    #[test]
    fn text_that_no_parser_accepts_is_refused_not_passed_on() {
        // A lone surrogate passes a raw scan but is no text.
        let raw = RawValue::from_string(r#"{"content":[{"type":"text","text":"\ud800"}]}"#.into())
            .unwrap();
        assert!(CallOutput::from_json(raw).is_err());
    }

    #[test]
    fn a_result_that_is_no_object_is_refused_with_its_kind() {
        let raw = RawValue::from_string("[1]".into()).unwrap();
        assert_eq!(CallOutput::from_json(raw).unwrap_err(), "an array");
        let mut out = from_text(r#"{"content":[{"type":"text","text":"a"}]}"#);
        out.object_mut().insert("_meta".into(), json!({"k": 1}));
        assert!(out.plain().is_none());
        assert_eq!(out.object()["_meta"], json!({"k": 1}));
    }
}
