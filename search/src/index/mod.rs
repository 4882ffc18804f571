//! The index: every tool of a snapshot as a multi-field document, its words as
//! postings (how it is searched is in `query.rs`).

use std::sync::Arc;

use serde_json::Value;

use crate::document::{self, Corpus, Document};
use crate::embed::Embedder;
use crate::hash::FastMap;
use crate::text::{
    MAX_DESCRIPTION_BYTES, Splitter, cap_bytes, cap_chars, clean_text, first_sentence,
    mixed_case_words, normalize, split_words, strip_hash_suffix,
};
use crate::{MAX_HIT_DESCRIPTION, acronyms, fuse};

mod query;
#[cfg(test)]
mod tests;

const FIELDS: usize = 6;
const NAME: usize = 0;
const UPSTREAM: usize = 1;
const HEADLINE: usize = 2;
const DESCRIPTION: usize = 3;
const PARAMS: usize = 4;
const PARAM_TEXT: usize = 5;

struct Doc {
    name: String,
    name_lower: String,
    original_lower: String,
    upstream: String,
    description: String,
    len: [u32; FIELDS],
    /// Distinct terms of the tool part of the name.
    name_terms: Vec<u32>,
    /// The upstream's number among the index's upstreams (for the server signal).
    server: u32,
}

#[derive(Clone, Copy)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
}

/// An immutable search index over one catalog snapshot.
#[derive(Default)]
pub struct SearchIndex {
    docs: Vec<Doc>,
    terms: FastMap<Box<str>, u32>,
    /// Every term's postings, in document order, one slice per term:
    /// `postings[offsets[t]..offsets[t + 1]]`.
    postings: Vec<Posting>,
    offsets: Vec<u32>,
    /// Abbreviations the catalog itself defines or uses, with the phrases they stand
    /// for (see `acronyms.rs`).
    acronyms: acronyms::Acronyms,
    /// The terms of plain lowercase ASCII letters, by length in bytes: where a typo's
    /// candidates are looked for.
    by_length: Vec<Vec<(Box<str>, u32)>>,
    /// Each tool's sentence vector, once the embedding model (when one is configured)
    /// has read the whole catalog; until then searches match words alone.
    vectors: std::sync::OnceLock<fuse::Vectors>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("tools", &self.docs.len())
            .field("terms", &self.terms.len())
            .finish()
    }
}

impl SearchIndex {
    /// Indexes every tool of `corpus`.
    pub fn build<C: Corpus + ?Sized>(corpus: &C) -> SearchIndex {
        let mut index = SearchIndex::default();
        // Per-document term frequencies, indexed by term, and the terms touched.
        let mut tf_of: Vec<[u16; FIELDS]> = Vec::new();
        let mut touched: Vec<u32> = Vec::new();
        let mut cleaned = String::new();
        let mut word = String::new();
        let mut seen: FastMap<Box<str>, Option<u32>> = FastMap::default();
        // (term, posting) in document order; `offsets[t + 1]` counts term t's postings
        // until they are laid out term by term below.
        let mut flat: Vec<(u32, Posting)> = Vec::new();
        // Each term's text by id, and the current tool's name as term ids in order.
        let mut text_of: Vec<Box<str>> = Vec::new();
        let mut name_seq: Vec<u32> = Vec::new();
        let mut acronyms = acronyms::Builder::default();
        let mut servers: FastMap<String, u32> = FastMap::default();
        index.offsets.push(0);
        for tool in corpus.documents() {
            let doc_id = index.docs.len() as u32;
            let mut len = [0u32; FIELDS];
            clean_text(document::description(tool), &mut cleaned);
            let summary = first_sentence(&cleaned);

            let mut add = |index: &mut SearchIndex, field: usize, text: &str, whole: bool| {
                let split: Splitter = if whole { mixed_case_words } else { split_words };
                split(text, &mut |raw| {
                    // Words repeat across a catalog: normalise and intern each once.
                    let id = match seen.get(raw) {
                        Some(&id) => id,
                        None => {
                            let id = normalize(raw, &mut word).map(|t| index.intern(t));
                            if id.is_some_and(|id| id as usize == text_of.len()) {
                                text_of.push(word.as_str().into());
                            }
                            seen.insert(raw.into(), id);
                            id
                        }
                    };
                    if let Some(id) = id {
                        if id as usize >= tf_of.len() {
                            tf_of.resize(id as usize + 1, [0; FIELDS]);
                        }
                        let tf = &mut tf_of[id as usize];
                        if *tf == [0; FIELDS] {
                            touched.push(id);
                        }
                        tf[field] = tf[field].saturating_add(1);
                        len[field] += 1;
                        if field == NAME {
                            name_seq.push(id);
                        }
                    }
                });
            };
            add(&mut index, NAME, strip_hash_suffix(tool.original()), false);
            add(&mut index, UPSTREAM, tool.upstream(), false);
            let title = document::title(tool);
            let headline = title.unwrap_or(summary);
            add(&mut index, HEADLINE, headline, false);
            add(&mut index, DESCRIPTION, &cleaned, false);
            // Names written in mixed case (`GitLab`, `MongoDB`) are also words whole:
            // that is how a query or a server's name spells them in lowercase.
            add(&mut index, HEADLINE, headline, true);
            add(&mut index, DESCRIPTION, &cleaned, true);
            if let Some(props) = document::parameters(tool) {
                for (key, schema) in props {
                    add(&mut index, PARAMS, key, false);
                    if let Some(text) = schema.get("description").and_then(Value::as_str) {
                        let text = cap_bytes(text, MAX_DESCRIPTION_BYTES);
                        acronyms.defined_in(text, doc_id);
                        add(&mut index, PARAM_TEXT, text, false);
                    }
                }
            }

            // Abbreviations: those the description defines (`instant messaging (IM)`),
            // and those the tool's text uses for words its name spells out in full
            // (`create_merge_request` described as "Create an MR").
            acronyms.defined_in(&cleaned, doc_id);
            acronyms.spelled_in_name(doc_id, &name_seq, &text_of, |abbreviation| {
                index.terms.get(abbreviation).is_some_and(|&t| {
                    let tf = tf_of[t as usize];
                    tf[HEADLINE] > 0 || tf[DESCRIPTION] > 0
                })
            });
            name_seq.clear();

            let mut name_terms = Vec::new();
            for &term in &touched {
                let tf = std::mem::take(&mut tf_of[term as usize]);
                if tf[NAME] > 0 {
                    name_terms.push(term);
                }
                flat.push((term, Posting { doc: doc_id, tf }));
                index.offsets[term as usize + 1] += 1;
            }
            touched.clear();

            index.docs.push(Doc {
                name: tool.name().to_owned(),
                name_lower: tool.name().to_lowercase(),
                original_lower: tool.original().to_lowercase(),
                upstream: tool.upstream().to_owned(),
                description: cap_chars(
                    if summary.is_empty() {
                        title.unwrap_or("")
                    } else {
                        summary
                    },
                    MAX_HIT_DESCRIPTION,
                ),
                len,
                name_terms,
                server: {
                    let next = servers.len() as u32;
                    *servers.entry(tool.upstream().to_owned()).or_insert(next)
                },
            });
        }
        index.acronyms = acronyms.finish(|term| index.terms.contains_key(term));
        for (id, term) in text_of.into_iter().enumerate() {
            if term.bytes().all(|b| b.is_ascii_lowercase()) {
                if term.len() >= index.by_length.len() {
                    index.by_length.resize(term.len() + 1, Vec::new());
                }
                index.by_length[term.len()].push((term, id as u32));
            }
        }
        for t in 1..index.offsets.len() {
            index.offsets[t] += index.offsets[t - 1];
        }
        let mut next: Vec<u32> = index.offsets[..index.offsets.len() - 1].to_vec();
        index.postings = vec![
            Posting {
                doc: 0,
                tf: [0; FIELDS]
            };
            flat.len()
        ];
        for (term, posting) in flat {
            let slot = &mut next[term as usize];
            index.postings[*slot as usize] = posting;
            *slot += 1;
        }
        index
    }

    /// Embeds every tool now, on this thread (the bench and tests; the gateway embeds
    /// in the background through [`SearchCache`](crate::SearchCache)). `corpus` must
    /// be the one the index was built from.
    pub fn embed_with<C: Corpus + ?Sized>(&self, corpus: &C, embedder: &Arc<Embedder>) {
        let rows: Vec<Vec<f32>> = fuse::embedding_texts(corpus)
            .map(|t| embedder.embed(&t))
            .collect();
        self.set_vectors(embedder.clone(), &rows);
    }

    /// Whether searches use the embedding model.
    pub fn has_vectors(&self) -> bool {
        self.vectors.get().is_some()
    }

    pub(crate) fn set_vectors<V: AsRef<[f32]>>(&self, embedder: Arc<Embedder>, rows: &[V]) {
        let dims = embedder.dimensions();
        if rows.len() != self.docs.len() || rows.iter().any(|r| r.as_ref().len() != dims) {
            return;
        }
        let data = rows
            .iter()
            .flat_map(|r| r.as_ref().iter().copied())
            .collect();
        let _ = self.vectors.set(fuse::Vectors {
            embedder,
            dims,
            data,
        });
    }

    fn postings(&self, term: u32) -> &[Posting] {
        let t = term as usize;
        &self.postings[self.offsets[t] as usize..self.offsets[t + 1] as usize]
    }

    /// Number of tools indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    fn intern(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.terms.get(term) {
            return id;
        }
        let id = self.terms.len() as u32;
        self.terms.insert(term.into(), id);
        self.offsets.push(0);
        id
    }
}
