//! The catalog as tool search reads it: an entry is a [`Document`] (its names and
//! its whole definition, not an abbreviated listing), a snapshot is a [`Corpus`].
//! The gateway's `SearchCache<Catalog>` keys its index by the snapshot's `Arc`.

use serde_json::Value;
use toolgate_search::{Corpus, Document};

use super::{Catalog, Entry};

impl Document for Entry {
    fn name(&self) -> &str {
        &self.name
    }

    fn upstream(&self) -> &str {
        &self.upstream
    }

    fn original(&self) -> &str {
        &self.original
    }

    fn field(&self, key: &str) -> Option<&Value> {
        self.full(key)
    }
}

impl Corpus for Catalog {
    type Document = Entry;

    fn documents(&self) -> impl Iterator<Item = &Entry> {
        self.entries().iter().map(|entry| &**entry)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_adapters::ToolDef;
    use toolgate_search::SearchIndex;

    use super::super::{Catalog, DefinitionBudgets, Shaping, Source};
    use crate::config::Namespace;

    /// Search reads an entry whole: a definition listed abbreviated (over its token
    /// budget) is found by the words only its whole description and parameters hold;
    /// a title may come from the annotations; hits name the catalog name and upstream.
    #[test]
    fn search_reads_an_entry_whole() {
        let long = format!(
            "Render the quarterly ledger. {}The zebrafish appendix last.",
            "Words that only fill the budget. ".repeat(200)
        );
        let tools: Vec<ToolDef> = [
            json!({
                "name": "ledger/render",
                "description": long,
                "inputSchema": {"type": "object", "properties": {
                    "ledger_id": {"type": "string", "description": "The ledger's kumquat code"},
                }},
            }),
            json!({
                "name": "report",
                "annotations": {"title": "Tangerine report"},
                "inputSchema": {"type": "object"},
            }),
        ]
        .into_iter()
        .map(|raw| ToolDef::from_raw(raw.as_object().cloned().unwrap()).unwrap())
        .collect();
        let shaping = Shaping {
            definitions: DefinitionBudgets::uniform(60),
            ..Shaping::default()
        };
        let sources = [Source {
            upstream: "books",
            namespace: Namespace::Prefix,
            tools: &tools,
            shaping: Some(&shaping),
        }];
        let catalog = Catalog::build(&sources).0;
        assert!(catalog.get("books__ledger_render").unwrap().abbreviated());
        let index = SearchIndex::build(&catalog);
        for (query, expected) in [
            ("zebrafish appendix", "books__ledger_render"),
            ("kumquat code", "books__ledger_render"),
            ("tangerine", "books__report"),
            ("ledger/render", "books__ledger_render"),
        ] {
            let hits = index.search(query, 5, |_| true);
            assert_eq!(
                hits.first().map(|h| h.name.as_str()),
                Some(expected),
                "{query}: {hits:?}"
            );
            assert_eq!(hits[0].upstream, "books");
        }
        let hits = index.search("tangerine", 5, |_| true);
        assert_eq!(hits[0].description, "Tangerine report");
    }
}
