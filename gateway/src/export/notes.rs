//! Keywords a consumer does not accept, kept as short notes in the description.

use serde_json::{Map, Value};

/// Longest rendering of one keyword's value in a note.
const MAX_NOTE_VALUE: usize = 160;
/// Longest description of a schema node after notes were added.
pub(super) const MAX_NODE_DESCRIPTION: usize = 1024;

/// Keywords worth telling the model about when they have to go, with their label.
const USEFUL: &[(&str, &str)] = &[
    ("format", "format"),
    ("pattern", "pattern"),
    ("minLength", "min length"),
    ("maxLength", "max length"),
    ("minimum", "minimum"),
    ("maximum", "maximum"),
    ("exclusiveMinimum", "exclusive minimum"),
    ("exclusiveMaximum", "exclusive maximum"),
    ("multipleOf", "multiple of"),
    ("minItems", "min items"),
    ("maxItems", "max items"),
    ("uniqueItems", "unique items"),
    ("minProperties", "min properties"),
    ("maxProperties", "max properties"),
    ("default", "default"),
    ("examples", "examples"),
    ("example", "example"),
    ("const", "value"),
    ("contentEncoding", "encoding"),
    ("contentMediaType", "media type"),
    ("deprecated", "deprecated"),
    ("readOnly", "read-only"),
    ("writeOnly", "write-only"),
];

/// Collects notes for the keywords of `schema` that are not in `kept`, then renders
/// them into a description.
#[derive(Default)]
pub(super) struct Notes(Vec<String>);

impl Notes {
    pub(super) fn new() -> Self {
        Self::default()
    }

    pub(super) fn push(&mut self, note: impl Into<String>) {
        let n = note.into();
        if !n.is_empty() && !self.0.contains(&n) {
            self.0.push(n);
        }
    }

    /// Adds a note for each useful keyword of `schema` for which `dropped` says yes.
    pub(super) fn dropped_keywords(
        &mut self,
        schema: &Map<String, Value>,
        dropped: impl Fn(&str) -> bool,
    ) {
        for (key, label) in USEFUL {
            if let Some(v) = schema.get(*key)
                && dropped(key)
            {
                self.push(format!("{label}: {}", render(v)));
            }
        }
    }

    /// `description` with the notes appended, `None` when both are empty.
    pub(super) fn describe(&self, description: Option<&str>) -> Option<String> {
        let base = description.map(str::trim).filter(|d| !d.is_empty());
        let text = match (base, self.0.is_empty()) {
            (None, true) => return None,
            (Some(d), true) => d.to_owned(),
            (None, false) => format!("({})", self.0.join("; ")),
            (Some(d), false) => format!("{d} ({})", self.0.join("; ")),
        };
        Some(super::cap_to(&text, MAX_NODE_DESCRIPTION))
    }
}

/// A value as a short note: strings bare, the rest as compact JSON, both capped.
pub(super) fn render(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    super::cap_to(&s, MAX_NOTE_VALUE)
}
