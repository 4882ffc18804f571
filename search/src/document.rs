//! What the index reads of a tool, and of the snapshot of tools it indexes.
//!
//! A tool is its names and its MCP definition, read field by field: of the
//! definition the index reads `description`, `title` (else `annotations.title`) and
//! `inputSchema.properties` (each parameter's name and `description`), nothing else.
//! A field of another type than expected counts as absent.

use serde_json::Value;

/// One tool as search reads it.
pub trait Document {
    /// The name callers use for it (`<upstream>__<tool>`): what a [`Hit`](crate::Hit)
    /// returns and what the policy predicate of
    /// [`SearchIndex::search`](crate::SearchIndex::search) is asked about.
    fn name(&self) -> &str;
    /// The upstream that serves it.
    fn upstream(&self) -> &str;
    /// The upstream's own name for it (indexed as the tool's name).
    fn original(&self) -> &str;
    /// A top-level field of its whole definition (not of an abbreviated listing).
    fn field(&self, key: &str) -> Option<&Value>;
}

/// A snapshot of tools an index is built from, in a stable order (an index and the
/// vectors embedded for it are matched by position).
pub trait Corpus {
    /// The tools' type.
    type Document: Document;
    /// Every tool, in the snapshot's order.
    fn documents(&self) -> impl Iterator<Item = &Self::Document>;
}

/// A tool's whole description (not an abbreviated listing's), as search reads it.
pub(crate) fn description<D: Document + ?Sized>(doc: &D) -> &str {
    doc.field("description")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A tool's title: `title`, else `annotations.title`.
pub(crate) fn title<D: Document + ?Sized>(doc: &D) -> Option<&str> {
    doc.field("title").and_then(Value::as_str).or_else(|| {
        doc.field("annotations")
            .and_then(|a| a.get("title"))
            .and_then(Value::as_str)
    })
}

/// A tool's parameters: its `inputSchema.properties`, each a name and its schema.
pub(crate) fn parameters<D: Document + ?Sized>(doc: &D) -> Option<&serde_json::Map<String, Value>> {
    doc.field("inputSchema")
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
}
