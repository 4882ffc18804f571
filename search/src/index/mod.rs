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
        let mut builder = Builder::default();
        index.offsets.push(0);
        for tool in corpus.documents() {
            builder.add_tool(&mut index, tool);
        }
        let Builder {
            terms,
            acronyms,
            flat,
            ..
        } = builder;
        index.acronyms = acronyms.finish(|term| index.terms.contains_key(term));
        index.file_by_length(terms.text_of);
        index.lay_out_postings(flat);
        index
    }

    /// Files the terms of plain lowercase ASCII letters (`text_of`: each term's text
    /// by id) by their length, where a typo's candidates are looked for.
    fn file_by_length(&mut self, text_of: Vec<Box<str>>) {
        for (id, term) in text_of.into_iter().enumerate() {
            if term.bytes().all(|b| b.is_ascii_lowercase()) {
                if term.len() >= self.by_length.len() {
                    self.by_length.resize(term.len() + 1, Vec::new());
                }
                self.by_length[term.len()].push((term, id as u32));
            }
        }
    }

    /// Lays out the (term, posting) pairs of `flat`, in document order, term by term:
    /// `offsets[t + 1]` holds the count of term t's postings until it becomes where
    /// they end.
    fn lay_out_postings(&mut self, flat: Vec<(u32, Posting)>) {
        for t in 1..self.offsets.len() {
            self.offsets[t] += self.offsets[t - 1];
        }
        let mut next: Vec<u32> = self.offsets[..self.offsets.len() - 1].to_vec();
        self.postings = vec![
            Posting {
                doc: 0,
                tf: [0; FIELDS]
            };
            flat.len()
        ];
        for (term, posting) in flat {
            let slot = &mut next[term as usize];
            self.postings[*slot as usize] = posting;
            *slot += 1;
        }
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

/// What indexing the tools one after another carries from one tool to the next: the
/// term counts, buffers reused for each tool, and what the whole index gathers.
#[derive(Default)]
struct Builder {
    terms: TermCounts,
    /// The current tool's description, cleaned.
    cleaned: String,
    /// (term, posting) in document order; `offsets[t + 1]` counts term t's postings
    /// until they are laid out term by term.
    flat: Vec<(u32, Posting)>,
    acronyms: acronyms::Builder,
    /// Each upstream's number, in the order they were first seen.
    servers: FastMap<String, u32>,
}

impl Builder {
    /// Indexes one more tool: its fields' words, the abbreviations it defines or uses,
    /// its postings and its document.
    fn add_tool<D: Document + ?Sized>(&mut self, index: &mut SearchIndex, tool: &D) {
        let doc_id = index.docs.len() as u32;
        let terms = &mut self.terms;
        terms.len = [0; FIELDS];
        clean_text(document::description(tool), &mut self.cleaned);
        let cleaned = &self.cleaned;
        let summary = first_sentence(cleaned);

        terms.add(index, NAME, strip_hash_suffix(tool.original()), false);
        terms.add(index, UPSTREAM, tool.upstream(), false);
        let title = document::title(tool);
        let headline = title.unwrap_or(summary);
        terms.add(index, HEADLINE, headline, false);
        terms.add(index, DESCRIPTION, cleaned, false);
        // Names written in mixed case (`GitLab`, `MongoDB`) are also words whole:
        // that is how a query or a server's name spells them in lowercase.
        terms.add(index, HEADLINE, headline, true);
        terms.add(index, DESCRIPTION, cleaned, true);
        if let Some(props) = document::parameters(tool) {
            for (key, schema) in props {
                terms.add(index, PARAMS, key, false);
                if let Some(text) = schema.get("description").and_then(Value::as_str) {
                    let text = cap_bytes(text, MAX_DESCRIPTION_BYTES);
                    self.acronyms.defined_in(text, doc_id);
                    terms.add(index, PARAM_TEXT, text, false);
                }
            }
        }

        // Abbreviations: those the description defines (`instant messaging (IM)`),
        // and those the tool's text uses for words its name spells out in full
        // (`create_merge_request` described as "Create an MR").
        self.acronyms.defined_in(cleaned, doc_id);
        self.acronyms
            .spelled_in_name(doc_id, &terms.name_seq, &terms.text_of, |abbreviation| {
                index.terms.get(abbreviation).is_some_and(|&t| {
                    let tf = terms.tf_of[t as usize];
                    tf[HEADLINE] > 0 || tf[DESCRIPTION] > 0
                })
            });
        terms.name_seq.clear();

        let name_terms = terms.post(doc_id, &mut self.flat, &mut index.offsets);

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
            len: terms.len,
            name_terms,
            server: {
                let next = self.servers.len() as u32;
                *self
                    .servers
                    .entry(tool.upstream().to_owned())
                    .or_insert(next)
            },
        });
    }
}

/// The current tool's term counts, and the words seen so far as terms.
#[derive(Default)]
struct TermCounts {
    /// The current tool's term frequencies, indexed by term.
    tf_of: Vec<[u16; FIELDS]>,
    /// The terms the current tool has (a nonzero `tf_of` entry).
    touched: Vec<u32>,
    /// The current tool's words per field.
    len: [u32; FIELDS],
    /// The current tool's name as term ids in order.
    name_seq: Vec<u32>,
    /// Each raw word seen with its term, if it makes one.
    seen: FastMap<Box<str>, Option<u32>>,
    /// Each term's text by id.
    text_of: Vec<Box<str>>,
    /// Buffer for a word being normalised.
    word: String,
}

impl TermCounts {
    /// Counts the words of `text` in `field` of the current tool (`whole`: words
    /// written in mixed case, taken whole), interning the new ones in `index`.
    fn add(&mut self, index: &mut SearchIndex, field: usize, text: &str, whole: bool) {
        let split: Splitter = if whole { mixed_case_words } else { split_words };
        split(text, &mut |raw| {
            // Words repeat across a catalog: normalise and intern each once.
            let id = match self.seen.get(raw) {
                Some(&id) => id,
                None => {
                    let id = normalize(raw, &mut self.word).map(|t| index.intern(t));
                    if id.is_some_and(|id| id as usize == self.text_of.len()) {
                        self.text_of.push(self.word.as_str().into());
                    }
                    self.seen.insert(raw.into(), id);
                    id
                }
            };
            if let Some(id) = id {
                if id as usize >= self.tf_of.len() {
                    self.tf_of.resize(id as usize + 1, [0; FIELDS]);
                }
                let tf = &mut self.tf_of[id as usize];
                if *tf == [0; FIELDS] {
                    self.touched.push(id);
                }
                tf[field] = tf[field].saturating_add(1);
                self.len[field] += 1;
                if field == NAME {
                    self.name_seq.push(id);
                }
            }
        });
    }

    /// Turns the current tool's counts into its postings (appended to `flat`, each
    /// counted in `offsets`), clearing them for the next tool; the terms of its name.
    fn post(&mut self, doc: u32, flat: &mut Vec<(u32, Posting)>, offsets: &mut [u32]) -> Vec<u32> {
        let mut name_terms = Vec::new();
        for &term in &self.touched {
            let tf = std::mem::take(&mut self.tf_of[term as usize]);
            if tf[NAME] > 0 {
                name_terms.push(term);
            }
            flat.push((term, Posting { doc, tf }));
            offsets[term as usize + 1] += 1;
        }
        self.touched.clear();
        name_terms
    }
}
