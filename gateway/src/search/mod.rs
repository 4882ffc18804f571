//! Tool search: the engine behind the `tool_search` protocol tool.
//!
//! Models choose badly among hundreds of tools, so instead of listing every definition
//! an agent can ask `tool_search {query, limit?}` for the few tools that fit its task
//! and then load only those. This module ranks the catalog for such a query.
//!
//! # Index
//!
//! [`SearchIndex::build`] takes a [`Catalog`] snapshot (it is rebuilt by the first
//! search after the catalog changes, off the runtime's thread: tens of milliseconds
//! for a thousand tools) and turns every entry into a small multi-field document:
//!
//! | field        | from                                             | weight |
//! |--------------|--------------------------------------------------|--------|
//! | name         | the upstream's tool name (`original`)            | 3.0    |
//! | upstream     | the `<upstream>__` prefix                        | 0.5    |
//! | headline     | `title`, else the description's first sentence   | 2.0    |
//! | description  | the whole description                            | 1.0    |
//! | parameters   | top-level `inputSchema.properties` names         | 0.5    |
//! | param text   | those parameters' descriptions                   | 0.3    |
//!
//! A hash suffix the catalog or adapter added to shorten a long name (`_` and 8 hex
//! digits) is not indexed.
//!
//! Text is cleaned of HTML tags, entities and Markdown link targets, then cut into
//! tokens on every non-alphanumeric character and at camelCase, acronym and
//! letter/digit boundaries (`repos/get-content` -> `repos get content`,
//! `PostPaymentIntentsIntentConfirm` -> `post payment intents intent confirm`),
//! lowercased, stripped of a small stopword list, and stemmed by a few deterministic
//! suffix rules (plural `s`/`es`/`ies`, `ed`, `ing`, final `e`, doubled consonants), so
//! `creates`, `created`, `creating` and `create` meet. A word of a description written
//! in mixed case (`GitLab`, `MongoDB`) is also indexed whole, and a query reads such a
//! word (or one with digits, `k8s`) whole when the index or the synonym table knows
//! it: `GitLab` in a query is the server, not git and a lab.
//!
//! # Ranking
//!
//! BM25F: per term, field frequencies are length-normalised per field, weighted and
//! summed, then saturated once (`k1 = 1.2`) and multiplied by the term's IDF. Each
//! query word also brings its alternatives (`synonyms.rs`): related verbs and nouns
//! (list/get/fetch, image/picture/photo) at a reduced weight, abbreviations (repo, k8s,
//! ppt, wiki; `pr` stands for the phrase "pull request") at full weight, and the same
//! word in another language from a small glossary (`天气` <-> weather, `wetter` ->
//! weather), so a query in English finds a tool described in Chinese and the other way
//! round. Abbreviations the catalog itself defines or uses (`acronyms.rs`) count too.
//! A query word scores the best of its alternatives, never their sum; the other words
//! of a phrase it stands for count as query words of their own.
//!
//! The BM25F score is then multiplied by `1 + 0.75 × coverage`, where coverage is the
//! share of the tool's own name words that the query (or a synonym) accounts for: a
//! focused name (`pulls_list` for "list open pull requests") beats a longer one that
//! merely contains the same words (`repos_list-pull-requests-associated-with-commit`).
//! Then the server signal: a tool of a server the query names (`... in notion`) that
//! matches another query word too doubles its score, and every matching tool gains
//! 0.4 of its server's best score (less in servers of more than 30 tools), so the
//! siblings of a strong match rise together (a task step often needs several tools of
//! one server).
//! A query that spells a tool's exact name (or the upstream's name for it) puts that
//! tool first. Ties are broken by name, so results are deterministic.
//!
//! With `search.embedding_model`, a sentence encoder's cosine is added to that score
//! (`fuse.rs`; the model itself in `embed/`), so a step that shares no word with its
//! tool still finds it; the catalog is embedded on a background thread.
//!
//! Recall (`tests/search_recall.rs`) and build and query times are in
//! `bench/README.md` ("Search").
//!
//! # Policy
//!
//! [`SearchIndex::search`] takes the caller's policy as a predicate. Statistics (IDF,
//! average field lengths, document count) are computed over the allowed tools only,
//! so a tool outside the caller's set neither appears in nor influences the results.

use serde_json::Value;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::catalog::Catalog;

mod acronyms;
pub mod embed;
mod fuse;
mod synonyms;

#[cfg(test)]
use synonyms::stemmed;
use synonyms::synonyms;

/// Most results one search returns.
pub const MAX_LIMIT: usize = 50;
/// Results returned when the caller does not say.
pub const DEFAULT_LIMIT: usize = 10;
/// Longest [`Hit::description`], in characters.
pub const MAX_HIT_DESCRIPTION: usize = 160;
/// Query text beyond this many bytes is ignored.
const MAX_QUERY_BYTES: usize = 2048;
/// Distinct query words beyond this many are ignored.
const MAX_QUERY_WORDS: usize = 32;
/// Description text beyond this many bytes is not indexed.
const MAX_DESCRIPTION_BYTES: usize = 16 * 1024;
/// Longest token kept, in bytes (longer ones are cut).
const MAX_TOKEN_BYTES: usize = 48;
/// A word the index has never seen stands for at most this many near terms (typos).
const MAX_NEAR_TERMS: usize = 3;
/// What a near term weighs against the word itself (a guess at what was meant).
const TYPO_WEIGHT: f64 = 0.7;

const K1: f64 = 1.2;
const FIELDS: usize = 6;
const NAME: usize = 0;
const UPSTREAM: usize = 1;
const HEADLINE: usize = 2;
const DESCRIPTION: usize = 3;
const PARAMS: usize = 4;
const PARAM_TEXT: usize = 5;
/// Per-field weight.
const WEIGHT: [f64; FIELDS] = [3.0, 0.5, 2.0, 1.0, 0.5, PARAM_TEXT_WEIGHT];
/// Per-field length normalisation (BM25 `b`).
const B: [f64; FIELDS] = [0.5, 0.0, 0.5, 0.75, 0.5, 0.75];
const PARAM_TEXT_WEIGHT: f64 = 0.3;
/// How much a tool whose name the query fully explains gains over one whose name
/// shares nothing with it (see [`SearchIndex::search`]).
const NAME_COVERAGE_BOOST: f64 = 0.75;
/// Weight of the phrase a catalog abbreviation stands for (learnt, so less certain
/// than the built-in table).
const ACRONYM_WEIGHT: f64 = 0.7;
/// How much the tools of a server the query names gain (`... in notion`).
const SERVER_NAMED_BOOST: f64 = 1.0;
/// The share of its server's best score every matching tool gains.
const SIBLING_SHARE: f64 = 0.4;
/// Servers up to this many tools pass on [`SIBLING_SHARE`] whole; larger ones less.
const SIBLING_SERVER_SIZE: f64 = 30.0;
/// Added to the score of a tool whose exact name the query spells.
const EXACT_NAME_BONUS: f64 = 1000.0;

/// The caller's view of the catalog: which tools count, how many, and their average
/// field lengths.
struct Stats<'a> {
    mask: &'a [bool],
    n: usize,
    avg: [f64; FIELDS],
}

/// One search result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    /// The catalog name (what the caller uses to call or describe the tool).
    pub name: String,
    /// The first sentence of the description, plain text, at most
    /// [`MAX_HIT_DESCRIPTION`] characters.
    pub description: String,
    /// The upstream that serves the tool.
    pub upstream: String,
    /// Relevance; only comparable within one result list.
    pub score: f32,
}

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

/// The index of the newest catalog snapshot searched, built on the first search of
/// each snapshot (catalogs change rarely, searches often).
///
/// With an embedding model ([`SearchCache::with_embedder`]), a new index is searched
/// by words at once while a background thread embeds the catalog's tools; the
/// vectors join the index when all are done. Vectors of tools whose text did not
/// change are reused from the previous snapshot, so a reload that adds one upstream
/// embeds only its tools.
#[derive(Default)]
pub struct SearchCache {
    newest: std::sync::Mutex<Option<(std::sync::Arc<Catalog>, std::sync::Arc<SearchIndex>)>>,
    embedder: Option<std::sync::Arc<embed::Embedder>>,
    /// The vectors of the last snapshot embedded, by text: what the next one reuses.
    memo: std::sync::Arc<std::sync::Mutex<HashMap<String, std::sync::Arc<[f32]>>>>,
}

impl SearchCache {
    /// The index of `catalog`, built now unless it is the one cached.
    pub fn index_for(&self, catalog: &std::sync::Arc<Catalog>) -> std::sync::Arc<SearchIndex> {
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        match newest.as_ref() {
            Some((source, index)) if std::sync::Arc::ptr_eq(source, catalog) => index.clone(),
            _ => {
                let index = std::sync::Arc::new(SearchIndex::build(catalog));
                *newest = Some((catalog.clone(), index.clone()));
                if let Some(embedder) = &self.embedder {
                    embed_in_background(
                        catalog.clone(),
                        &index,
                        embedder.clone(),
                        self.memo.clone(),
                    );
                }
                index
            }
        }
    }

    /// Whether `catalog`'s index is built: a search of another catalog builds it
    /// first (tens of milliseconds for a thousand tools).
    pub fn has_index_for(&self, catalog: &std::sync::Arc<Catalog>) -> bool {
        let newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        newest
            .as_ref()
            .is_some_and(|(source, _)| std::sync::Arc::ptr_eq(source, catalog))
    }

    /// Whether searches run an embedding model (a query then costs milliseconds).
    pub fn embeds(&self) -> bool {
        self.embedder.is_some()
    }

    /// A cache whose indexes fuse `embedder`'s similarity in (none: words only).
    pub fn with_embedder(embedder: Option<std::sync::Arc<embed::Embedder>>) -> SearchCache {
        SearchCache {
            embedder,
            ..SearchCache::default()
        }
    }

    /// With an embedding model, builds `catalog`'s index now, so that its tools are
    /// embedded before the first search asks; without one, nothing (the index is
    /// built by the first search, as it costs nothing to wait).
    pub fn warm(&self, catalog: &std::sync::Arc<Catalog>) {
        if self.embedder.is_some() {
            self.index_for(catalog);
        }
    }
}

/// Embeds `catalog` on a thread of its own (a model costs milliseconds per tool, far
/// too long for the async runtime or the first search) and hands the vectors to
/// `index` when all are done. Gives up as soon as the index is no longer in use (a
/// newer snapshot replaced it).
fn embed_in_background(
    catalog: std::sync::Arc<Catalog>,
    index: &std::sync::Arc<SearchIndex>,
    embedder: std::sync::Arc<embed::Embedder>,
    memo: std::sync::Arc<std::sync::Mutex<HashMap<String, std::sync::Arc<[f32]>>>>,
) {
    let index = std::sync::Arc::downgrade(index);
    let spawned = std::thread::Builder::new()
        .name("search-embed".to_owned())
        .spawn(move || {
            let started = std::time::Instant::now();
            let known = |text: &str| {
                let memo = memo.lock().unwrap_or_else(|e| e.into_inner());
                memo.get(text).cloned()
            };
            let mut kept: HashMap<String, std::sync::Arc<[f32]>> = HashMap::new();
            let mut rows = Vec::with_capacity(catalog.len());
            let mut embedded = 0usize;
            for text in embedding_texts(&catalog) {
                if index.strong_count() == 0 {
                    // A newer snapshot replaced this one: leave what was done for it.
                    memo.lock().unwrap_or_else(|e| e.into_inner()).extend(kept);
                    return;
                }
                let vector = match kept.get(&text).cloned().or_else(|| known(&text)) {
                    Some(v) => v,
                    None => {
                        embedded += 1;
                        std::sync::Arc::from(embedder.embed(&text))
                    }
                };
                rows.push(vector.clone());
                kept.insert(text, vector);
            }
            *memo.lock().unwrap_or_else(|e| e.into_inner()) = kept;
            if let Some(index) = index.upgrade() {
                index.set_vectors(embedder, &rows);
                tracing::info!(
                    tools = rows.len(),
                    embedded,
                    ms = started.elapsed().as_millis() as u64,
                    "tool_search: catalog embedded"
                );
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "tool_search: could not start the embedding thread; searching by words");
    }
}

/// A tool's whole description (not an abbreviated listing's), as search reads it.
fn full_description(entry: &crate::catalog::Entry) -> &str {
    entry
        .full("description")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// What the embedding model reads of each catalog entry, in index order.
fn embedding_texts(catalog: &Catalog) -> impl Iterator<Item = String> + '_ {
    let mut cleaned = String::new();
    catalog.entries().iter().map(move |entry| {
        clean_text(full_description(entry), &mut cleaned);
        fuse::embedding_text(&entry.original, &cleaned)
    })
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
    /// Indexes every entry of `catalog`.
    pub fn build(catalog: &Catalog) -> SearchIndex {
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
        for entry in catalog.entries() {
            let doc_id = index.docs.len() as u32;
            let mut len = [0u32; FIELDS];
            let def: &crate::catalog::Entry = entry;
            clean_text(full_description(def), &mut cleaned);
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
            add(&mut index, NAME, strip_hash_suffix(&entry.original), false);
            add(&mut index, UPSTREAM, &entry.upstream, false);
            let title = def.full("title").and_then(Value::as_str).or_else(|| {
                def.full("annotations")
                    .and_then(|a| a.get("title"))
                    .and_then(Value::as_str)
            });
            let headline = title.unwrap_or(summary);
            add(&mut index, HEADLINE, headline, false);
            add(&mut index, DESCRIPTION, &cleaned, false);
            // Names written in mixed case (`GitLab`, `MongoDB`) are also words whole:
            // that is how a query or a server's name spells them in lowercase.
            add(&mut index, HEADLINE, headline, true);
            add(&mut index, DESCRIPTION, &cleaned, true);
            if let Some(props) = def
                .full("inputSchema")
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
            {
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
                name: entry.name.clone(),
                name_lower: entry.name.to_lowercase(),
                original_lower: entry.original.to_lowercase(),
                upstream: entry.upstream.clone(),
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
                    *servers.entry(entry.upstream.clone()).or_insert(next)
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
    /// in the background through [`SearchCache`]). `catalog` must be the one the index
    /// was built from.
    pub fn embed_with(&self, catalog: &Catalog, embedder: &std::sync::Arc<embed::Embedder>) {
        let rows: Vec<Vec<f32>> = embedding_texts(catalog)
            .map(|t| embedder.embed(&t))
            .collect();
        self.set_vectors(embedder.clone(), &rows);
    }

    /// Whether searches use the embedding model.
    pub fn has_vectors(&self) -> bool {
        self.vectors.get().is_some()
    }

    fn set_vectors<V: AsRef<[f32]>>(&self, embedder: std::sync::Arc<embed::Embedder>, rows: &[V]) {
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

    /// Ranks the tools for which `allowed(name)` is true against `query`, best first,
    /// at most `limit` (capped at [`MAX_LIMIT`]) of them. Tools with no word in common
    /// with the query are not returned, unless the embedding model (once it has read
    /// the catalog) finds them among the nearest in meaning. `allowed` is called at most once per tool.
    pub fn search(&self, query: &str, limit: usize, allowed: impl Fn(&str) -> bool) -> Vec<Hit> {
        let limit = limit.min(MAX_LIMIT);
        if limit == 0 || self.docs.is_empty() {
            return Vec::new();
        }
        let query = cap_bytes(query, MAX_QUERY_BYTES);
        // The caller's view of the catalog: only allowed tools count, for statistics
        // as well as results.
        let mask: Vec<bool> = self.docs.iter().map(|d| allowed(&d.name)).collect();
        let n = mask.iter().filter(|&&a| a).count();
        if n == 0 {
            return Vec::new();
        }
        let groups = self.query_groups(query, &mask);
        let exact = exact_name(query);
        // Meaning needs words too: a query of spaces and signs finds nothing either way.
        let vectors = self
            .vectors
            .get()
            .filter(|_| query.chars().any(char::is_alphanumeric));
        if groups.is_empty() && exact.is_none() && vectors.is_none() {
            return Vec::new();
        }

        let mut avg = [0f64; FIELDS];
        for (doc, _) in self.docs.iter().zip(&mask).filter(|(_, a)| **a) {
            for (sum, len) in avg.iter_mut().zip(doc.len) {
                *sum += len as f64;
            }
        }
        for a in &mut avg {
            *a = (*a / n as f64).max(1.0);
        }

        let mut scores = vec![0f64; self.docs.len()];
        // Per tool: the weight of the query word that names its upstream, if any.
        let mut server_named = vec![0f64; self.docs.len()];
        // Per tool: how many query words it matches.
        let mut matched = vec![0u8; self.docs.len()];
        let stats = Stats {
            mask: &mask,
            n,
            avg,
        };
        self.accumulate(
            &groups,
            &stats,
            &mut scores,
            &mut server_named,
            &mut matched,
        );
        // Name coverage: how much of the tool's own name the query accounts for. A
        // focused name (`pulls_list` for "list pull requests") beats a longer one that
        // merely contains the same words (`list-pull-requests-associated-with-commit`).
        let mut query_terms: Vec<(u32, f64)> = groups.iter().flatten().copied().collect();
        query_terms.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
        query_terms.dedup_by_key(|t| t.0);
        for (i, score) in scores.iter_mut().enumerate() {
            let terms = &self.docs[i].name_terms;
            if *score > 0.0 && !terms.is_empty() {
                let matched: f64 = terms
                    .iter()
                    .filter_map(|t| {
                        query_terms
                            .binary_search_by_key(t, |q| q.0)
                            .ok()
                            .map(|k| query_terms[k].1)
                    })
                    .sum();
                *score *= 1.0 + NAME_COVERAGE_BOOST * matched / terms.len() as f64;
            }
        }
        self.server_signal(&mut scores, &server_named, &matched, &mask);
        if let Some(exact) = &exact {
            for (i, doc) in self.docs.iter().enumerate() {
                if mask[i] && (doc.name_lower == *exact || doc.original_lower == *exact) {
                    scores[i] += EXACT_NAME_BONUS;
                }
            }
        }
        if let Some(vectors) = vectors {
            fuse::fuse(&mut scores, &mask, vectors, query, EXACT_NAME_BONUS);
        }

        let mut ranked: Vec<(f64, usize)> = scores
            .iter()
            .enumerate()
            .filter(|&(i, &s)| s > 0.0 && mask[i])
            .map(|(i, &s)| (s, i))
            .collect();
        let by_rank = |a: &(f64, usize), b: &(f64, usize)| {
            b.0.total_cmp(&a.0)
                .then_with(|| self.docs[a.1].name.cmp(&self.docs[b.1].name))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, by_rank);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(by_rank);
        ranked
            .into_iter()
            .map(|(score, i)| {
                let doc = &self.docs[i];
                Hit {
                    name: doc.name.clone(),
                    description: doc.description.clone(),
                    upstream: doc.upstream.clone(),
                    score: score as f32,
                }
            })
            .collect()
    }

    /// Adds each group's BM25F score to `scores`; notes per tool the weight of the
    /// word naming its upstream (`named`) and how many groups it matched.
    fn accumulate(
        &self,
        groups: &[Vec<(u32, f64)>],
        stats: &Stats<'_>,
        scores: &mut [f64],
        server_named: &mut [f64],
        matched: &mut [u8],
    ) {
        let Stats { mask, n, avg } = *stats;
        let mut best = vec![0f64; self.docs.len()];
        let mut touched: Vec<u32> = Vec::new();
        for group in groups {
            for &(term, weight) in group {
                let postings = self.postings(term);
                let df = postings.iter().filter(|p| mask[p.doc as usize]).count();
                if df == 0 {
                    continue;
                }
                let idf = (1.0 + (n as f64 - df as f64 + 0.5) / (df as f64 + 0.5)).ln();
                for p in postings.iter().filter(|p| mask[p.doc as usize]) {
                    let doc = &self.docs[p.doc as usize];
                    let mut tf = 0.0;
                    for f in 0..FIELDS {
                        if p.tf[f] > 0 {
                            let norm = 1.0 - B[f] + B[f] * doc.len[f] as f64 / avg[f];
                            tf += WEIGHT[f] * p.tf[f] as f64 / norm;
                        }
                    }
                    let s = weight * idf * tf / (K1 + tf);
                    if p.tf[UPSTREAM] > 0 {
                        let named = &mut server_named[p.doc as usize];
                        *named = named.max(weight);
                    }
                    let slot = &mut best[p.doc as usize];
                    if *slot == 0.0 {
                        touched.push(p.doc);
                    }
                    if s > *slot {
                        *slot = s;
                    }
                }
            }
            for &d in &touched {
                matched[d as usize] = matched[d as usize].saturating_add(1);
                scores[d as usize] += best[d as usize];
                best[d as usize] = 0.0;
            }
            touched.clear();
        }
    }

    /// A task often needs a server rather than a tool: the query names the server
    /// (`... in notion`), or several of the server's tools match it. Tools of a named
    /// server gain [`SERVER_NAMED_BOOST`]; every matching tool gains a share of its
    /// server's best score, so the siblings of a strong match rise together.
    fn server_signal(&self, scores: &mut [f64], named: &[f64], matched: &[u8], mask: &[bool]) {
        let servers = self
            .docs
            .iter()
            .map(|d| d.server as usize + 1)
            .max()
            .unwrap_or(0);
        // Per server: its best score and how many of its tools the caller may use.
        let mut top = vec![0f64; servers];
        let mut size = vec![0u32; servers];
        for (i, score) in scores.iter_mut().enumerate() {
            let server = self.docs[i].server as usize;
            size[server] += u32::from(mask[i]);
            if *score > 0.0 {
                // A server's name may be a plain word too ("line", "time"): a tool
                // gains only if it matches something besides its server's name.
                if matched[i] > 1 {
                    *score *= 1.0 + SERVER_NAMED_BOOST * named[i];
                }
                top[server] = top[server].max(*score);
            }
        }
        for (i, score) in scores.iter_mut().enumerate() {
            if *score > 0.0 {
                let server = self.docs[i].server as usize;
                // Siblings say less in a large server (a whole REST API) than in a
                // small one built around a few related tasks.
                let focus = (SIBLING_SERVER_SIZE / size[server].max(1) as f64).min(1.0);
                *score += SIBLING_SHARE * focus * top[server];
            }
        }
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

    /// The index's terms within a typo of `word` (a Latin-letter word the index has
    /// never seen): one edit (insert, delete, replace, swap two neighbours) for 4 to 7
    /// letters, two from 8. Shorter words and other scripts get none (too many near
    /// misses). At most [`MAX_NEAR_TERMS`] of those in the caller's tools: closest
    /// first, then the most common (the likelier meant), then by term.
    fn near_terms(&self, word: &str, mask: &[bool]) -> Vec<u32> {
        let len = word.len();
        if len < 4 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
            return Vec::new();
        }
        let max = if len >= 8 { 2 } else { 1 };
        let lengths = len.saturating_sub(max)..=len + max;
        let mut near: Vec<(usize, std::cmp::Reverse<usize>, &str, u32)> = lengths
            .filter_map(|l| self.by_length.get(l))
            .flatten()
            .filter_map(|(term, id)| {
                let id = *id;
                let d = edit_distance(word.as_bytes(), term.as_bytes(), max)?;
                let df = self
                    .postings(id)
                    .iter()
                    .filter(|p| mask[p.doc as usize])
                    .count();
                (df > 0).then_some((d, std::cmp::Reverse(df), &**term, id))
            })
            .collect();
        near.sort_unstable();
        near.truncate(MAX_NEAR_TERMS);
        near.into_iter().map(|(_, _, _, id)| id).collect()
    }

    /// The query as groups of (term, weight): one group per distinct query word (and
    /// per word it implies), holding the word itself and its alternatives that occur
    /// in the index.
    fn query_groups(&self, query: &str, mask: &[bool]) -> Vec<Vec<(u32, f64)>> {
        let synonyms = synonyms();
        let mut words: Vec<String> = Vec::new();
        // A word the tokenizer would cut apart (`GitLab`, `k8s`) is read whole when
        // the index or the synonym table knows it whole: `GitLab` is not git + lab.
        let mut rest = String::with_capacity(query.len());
        let mut buf = String::new();
        let mut from = 0;
        for (start, end) in ascii_runs(query) {
            let run = &query[start..end];
            let cut = run.bytes().any(|b| b.is_ascii_digit())
                && run.bytes().any(|b| b.is_ascii_alphabetic())
                || run.bytes().any(|b| b.is_ascii_lowercase())
                    && run.bytes().skip(1).any(|b| b.is_ascii_uppercase());
            if !cut || words.len() >= MAX_QUERY_WORDS {
                continue;
            }
            let lower = run.to_ascii_lowercase();
            let whole = match normalize(&lower, &mut buf) {
                Some(term) if self.visible(term, mask) => Some(term.to_owned()),
                _ if !synonyms.of(&lower).is_empty() => Some(lower),
                _ => None,
            };
            if let Some(whole) = whole {
                if !words.contains(&whole) {
                    words.push(whole);
                }
                rest.push_str(&query[from..start]);
                rest.push(' ');
                from = end;
            }
        }
        rest.push_str(&query[from..]);
        tokenize_query(&rest, &mut buf, &mut |t| {
            if words.len() < MAX_QUERY_WORDS && !words.iter().any(|w| w == t) {
                words.push(t.to_owned());
            }
        });
        let mut groups = Vec::new();
        // Words the query stands for without writing them: the rest of a phrase an
        // abbreviation expands to (`mr` -> merge request), and the English of the CJK
        // words it contains. Each is read as a query word of its own, at its weight.
        let mut implied: Vec<(&str, f64)> = Vec::new();
        for word in &words {
            let mut group = self.word_group(word, 1.0, mask, &mut implied);
            for phrase in self.acronyms.expansions(word, |doc| mask[doc as usize]) {
                if let Some((first, rest)) = phrase.split_first() {
                    self.push_term(&mut group, first, ACRONYM_WEIGHT, mask);
                    implied.extend(rest.iter().map(|t| (&**t, ACRONYM_WEIGHT)));
                }
            }
            // A word the index has never seen, nor any of its synonyms: most often a
            // typo ("caculate"), read as the index's words a slip away from it.
            if group.is_empty() {
                group.extend(
                    self.near_terms(word, mask)
                        .into_iter()
                        .map(|id| (id, TYPO_WEIGHT)),
                );
            }
            // A word with no near one either matches nothing.
            if !group.is_empty() {
                groups.push(group);
            }
        }
        for (english, weight) in synonyms.translations_in(query) {
            implied.extend(english.iter().map(|t| (t.as_str(), weight)));
        }
        implied.sort_by(|a, b| a.0.cmp(b.0).then(b.1.total_cmp(&a.1)));
        implied.dedup_by_key(|t| t.0);
        let mut ignored = Vec::new();
        for (word, weight) in implied {
            if groups.len() >= 2 * MAX_QUERY_WORDS {
                break;
            }
            if words.iter().any(|w| w == word) {
                continue;
            }
            let group = self.word_group(word, weight, mask, &mut ignored);
            if !group.is_empty() {
                groups.push(group);
            }
        }
        groups
    }

    /// `word` and its synonyms that occur in the index, as (term, weight) scaled by
    /// `scale`; the further words of phrases it stands for go to `implied`.
    fn word_group<'s>(
        &self,
        word: &str,
        scale: f64,
        mask: &[bool],
        implied: &mut Vec<(&'s str, f64)>,
    ) -> Vec<(u32, f64)> {
        let synonyms: &'s synonyms::Synonyms = synonyms();
        let mut group: Vec<(u32, f64)> = Vec::new();
        if !synonyms.drop_literal(word) {
            self.push_term(&mut group, word, scale, mask);
        }
        for alt in synonyms.of(word) {
            let weight = alt.weight * scale;
            if let Some((first, rest)) = alt.terms.split_first() {
                self.push_term(&mut group, first, weight, mask);
                implied.extend(rest.iter().map(|t| (t.as_str(), weight)));
            }
        }
        group
    }

    /// Whether one of the caller's tools (`mask`) uses `term`.
    fn visible(&self, term: &str, mask: &[bool]) -> bool {
        self.terms
            .get(term)
            .is_some_and(|&id| self.postings(id).iter().any(|p| mask[p.doc as usize]))
    }

    /// Adds `term` to `group` if one of the caller's tools uses it (a word only hidden
    /// tools use is one the caller's index has never seen), keeping the higher weight. A CJK
    /// word of more than two characters is indexed as its two-character pieces: any
    /// of them stands for it.
    fn push_term(&self, group: &mut Vec<(u32, f64)>, term: &str, weight: f64, mask: &[bool]) {
        let mut add = |term: &str| {
            if let Some(&id) = self.terms.get(term)
                && self.postings(id).iter().any(|p| mask[p.doc as usize])
            {
                match group.iter_mut().find(|(t, _)| *t == id) {
                    Some(slot) => slot.1 = slot.1.max(weight),
                    None => group.push((id, weight)),
                }
            }
        };
        if term.starts_with(is_cjk) && term.chars().nth(2).is_some() {
            split_words(term, &mut add);
        } else {
            add(term);
        }
    }
}

/// The optimal-string-alignment distance between `a` and `b` (insertions, deletions,
/// substitutions, and swaps of two neighbours count one each) when it is at most `max`.
fn edit_distance(a: &[u8], b: &[u8], max: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    // Three rows of the classic table: two back (for swaps), previous, current.
    let width = b.len() + 1;
    let mut two_back = vec![0usize; width];
    let mut previous: Vec<usize> = (0..width).collect();
    let mut current = vec![0usize; width];
    for i in 1..=a.len() {
        current[0] = i;
        let mut row_min = current[0];
        for j in 1..width {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(two_back[j - 2] + 1);
            }
            current[j] = d;
            row_min = row_min.min(d);
        }
        // Every later row is at least this row's minimum.
        if row_min > max {
            return None;
        }
        std::mem::swap(&mut two_back, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    let d = previous[b.len()];
    (d <= max).then_some(d)
}

/// `name` without a trailing `_` + 8 hex digits (with at least one digit) that a
/// shortening added.
fn strip_hash_suffix(name: &str) -> &str {
    let b = name.as_bytes();
    if b.len() > 9 && b[b.len() - 9] == b'_' {
        let tail = &b[b.len() - 8..];
        if tail
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            && tail.iter().any(u8::is_ascii_digit)
        {
            return &name[..name.len() - 9];
        }
    }
    name
}

/// The query as a possible exact tool name: trimmed, lowercased, one word.
fn exact_name(query: &str) -> Option<String> {
    let q = query.trim();
    if q.is_empty() || q.len() > 200 || q.chars().any(char::is_whitespace) {
        return None;
    }
    Some(q.to_lowercase())
}

// ---------------------------------------------------------------------------------
// Text

/// Cleans description text for indexing and display: HTML tags dropped, a few
/// entities decoded, Markdown link targets and bare URLs dropped.
fn clean_text(text: &str, out: &mut String) {
    out.clear();
    let text = cap_bytes(text, MAX_DESCRIPTION_BYTES);
    let bytes = text.as_bytes();
    // Plain runs are copied whole; only the ASCII bytes that may start markup are
    // looked at (never inside a multi-byte character, as UTF-8 continuation bytes are
    // all >= 0x80).
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !matches!(bytes[i], b'<' | b'&' | b']' | b'h') {
            i += 1;
            continue;
        }
        let rest = &text[i..];
        let replaced: Option<(char, usize)> = match bytes[i] {
            // A tag: `<p>`, `</code>`, `<a href="...">`, `<!-- -->`.
            b'<' => {
                let next = bytes.get(i + 1).copied().unwrap_or(b' ');
                if next.is_ascii_alphabetic() || next == b'/' || next == b'!' {
                    find_within(rest, b'>', 400).map(|end| (' ', end + 1))
                } else {
                    None
                }
            }
            b'&' => find_within(rest, b';', 9).and_then(|end| {
                let decoded = match &rest[..=end] {
                    "&amp;" => '&',
                    "&lt;" => '<',
                    "&gt;" => '>',
                    "&quot;" => '"',
                    "&#39;" | "&apos;" => '\'',
                    "&nbsp;" => ' ',
                    _ => return None,
                };
                Some((decoded, end + 1))
            }),
            // A Markdown link target: `[text](url)` keeps `[text`.
            b']' if rest.starts_with("](") => {
                find_within(rest, b')', 2048).map(|end| (' ', end + 1))
            }
            // A bare URL starting a word.
            b'h' if (rest.starts_with("http://") || rest.starts_with("https://"))
                && !text[..i].ends_with(|c: char| c.is_alphanumeric()) =>
            {
                let end = rest
                    .find(|c: char| c.is_whitespace() || matches!(c, ')' | '<' | '>' | '"'))
                    .unwrap_or(rest.len());
                Some((' ', end))
            }
            _ => None,
        };
        match replaced {
            Some((c, skip)) => {
                out.push_str(&text[run..i]);
                out.push(c);
                i += skip;
                run = i;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[run..]);
}

/// Position of `byte` (ASCII) within the first `within` bytes of `text`; bounded so
/// that markup without its closing character costs linear time, not quadratic.
fn find_within(text: &str, byte: u8, within: usize) -> Option<usize> {
    text.as_bytes().iter().take(within).position(|&b| b == byte)
}

/// The first line's first sentence, whitespace collapsed.
fn first_sentence(text: &str) -> &str {
    let text = text.trim_start();
    let line_end = text.find('\n').unwrap_or(text.len());
    let line = &text[..line_end];
    let mut end = line.len();
    for (i, _) in line.match_indices(". ") {
        // Not after an abbreviation such as "e.g." or "i.e.".
        let before = &line[..i];
        let word = before.rsplit(char::is_whitespace).next().unwrap_or("");
        if !word.contains('.') && word.len() > 1 {
            end = i + 1;
            break;
        }
    }
    line[..end].trim()
}

/// Whitespace collapsed (and none before closing punctuation, where a dropped tag
/// left some), then cut to `max` characters with an ellipsis.
fn cap_chars(text: &str, max: usize) -> String {
    let mut collapsed = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_whitespace() {
            if !collapsed.is_empty() && !collapsed.ends_with(' ') {
                collapsed.push(' ');
            }
            continue;
        }
        if matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | ')') && collapsed.ends_with(' ') {
            collapsed.pop();
        }
        collapsed.push(c);
    }
    let collapsed = collapsed.trim_end();
    if collapsed.chars().count() <= max {
        return collapsed.to_owned();
    }
    let cut: String = collapsed.chars().take(max - 1).collect();
    format!("{}…", cut.trim_end())
}

pub(crate) fn cap_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Splits `text` into index terms (lowercased, stopwords dropped, stemmed) and hands
/// each to `emit`. `word` is scratch space. (The index does the same through a cache.)
#[cfg(test)]
fn tokenize(text: &str, word: &mut String, emit: &mut dyn FnMut(&str)) {
    split_words(text, &mut |raw| {
        if let Some(term) = normalize(raw, word) {
            emit(term);
        }
    });
}

/// Like [`tokenize`], for queries: words the synonym table knows are kept even when
/// they are stopwords (`my` -> the authenticated user).
fn tokenize_query(text: &str, word: &mut String, emit: &mut dyn FnMut(&str)) {
    split_words(text, &mut |raw| {
        word.clear();
        word.push_str(raw);
        if synonyms().drop_literal(word) {
            emit(word);
        } else if let Some(term) = normalize(raw, word) {
            emit(term);
        }
    });
}

/// Lowercased, not a stopword, not a lone letter; then stemmed.
fn normalize<'a>(raw: &str, word: &'a mut String) -> Option<&'a str> {
    if raw.chars().count() < 2 && !raw.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if is_stopword(raw) {
        return None;
    }
    word.clear();
    word.push_str(raw);
    stem(word);
    Some(word)
}

/// Whether `c` is written without spaces between words: Han ideographs, kana, Hangul.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF        // hiragana, katakana
        | 0x3400..=0x4DBF      // CJK extension A
        | 0x4E00..=0x9FFF      // CJK unified ideographs
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0xF900..=0xFAFF      // CJK compatibility ideographs
        | 0xFF66..=0xFF9F      // half-width katakana
        | 0x20000..=0x2FA1F) // CJK extensions B and later
}

/// Cuts text into lowercase words: on every non-alphanumeric character, before an
/// uppercase letter that follows a lowercase letter or digit, before the last capital
/// of an acronym followed by lowercase (`HTTPServer` -> `http`, `server`), between
/// letters and digits, and around runs of CJK characters. A CJK run has no spaces
/// between its words, so it is emitted as its overlapping two-character pieces
/// (`打开网页` -> `打开`, `开网`, `网页`): a query and a description share those
/// pieces whenever they share a word, whatever the segmentation.
fn split_words(text: &str, emit: &mut dyn FnMut(&str)) {
    #[derive(Clone, Copy, PartialEq)]
    enum Class {
        Other,
        Lower,
        Upper,
        Digit,
        Cjk,
    }
    let bytes = text.as_bytes();
    // The class and width of the character at byte `i` (ASCII without decoding).
    let class_at = |i: usize| -> (Class, usize) {
        match bytes.get(i) {
            None => (Class::Other, 0),
            Some(&b) if b < 0x80 => {
                let class = match b {
                    b'a'..=b'z' => Class::Lower,
                    b'A'..=b'Z' => Class::Upper,
                    b'0'..=b'9' => Class::Digit,
                    _ => Class::Other,
                };
                (class, 1)
            }
            Some(_) => {
                let c = text[i..].chars().next().unwrap_or(' ');
                let class = if is_cjk(c) {
                    Class::Cjk
                } else if c.is_numeric() {
                    Class::Digit
                } else if c.is_uppercase() {
                    Class::Upper
                } else if c.is_alphanumeric() {
                    Class::Lower
                } else {
                    Class::Other
                };
                (class, c.len_utf8())
            }
        }
    };
    let mut lowered = String::new();
    // Emits text[start..end], lowercased when it needs to be, cut to MAX_TOKEN_BYTES.
    let mut flush = |start: usize, end: usize, plain: bool| {
        if start >= end {
            return;
        }
        let token = &text[start..end];
        if token.starts_with(is_cjk) {
            let chars: Vec<(usize, char)> = token.char_indices().collect();
            if chars.len() < 2 {
                return emit(token);
            }
            for pair in chars.windows(2) {
                let end = pair[1].0 + pair[1].1.len_utf8();
                emit(&token[pair[0].0..end]);
            }
            return;
        }
        let token = if plain {
            token
        } else {
            lowered.clear();
            for c in token.chars() {
                lowered.extend(c.to_lowercase());
            }
            &lowered
        };
        let mut cut = token.len().min(MAX_TOKEN_BYTES);
        while !token.is_char_boundary(cut) {
            cut -= 1;
        }
        emit(&token[..cut]);
    };
    let mut start = 0;
    // The token so far is ASCII lowercase and digits: emitted as a slice of `text`.
    let mut plain = true;
    let mut prev = Class::Other;
    let mut i = 0;
    while i < bytes.len() {
        let (class, width) = class_at(i);
        if class == Class::Other {
            flush(start, i, plain);
            i += width;
            start = i;
            plain = true;
            prev = Class::Other;
            continue;
        }
        let boundary = match (prev, class) {
            (Class::Other, _) => false,
            (p, c) if (p == Class::Cjk) != (c == Class::Cjk) => true,
            (Class::Lower | Class::Digit, Class::Upper) => true,
            (Class::Upper, Class::Upper) => class_at(i + width).0 == Class::Lower,
            (p, c) => (p == Class::Digit) != (c == Class::Digit),
        };
        if boundary {
            flush(start, i, plain);
            start = i;
            plain = true;
        }
        if width > 1 || class == Class::Upper {
            plain = false;
        }
        prev = class;
        i += width;
    }
    flush(start, bytes.len(), plain);
}

/// A way of cutting text into raw words, each handed to the callback.
type Splitter = fn(&str, &mut dyn FnMut(&str));

/// The maximal runs of ASCII letters and digits in `text`, as byte ranges.
fn ascii_runs(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() && !bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        if i >= bytes.len() {
            return None;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        Some((start, i))
    })
}

/// The words of `text` written in mixed case (`GitLab`, `MongoDB`, `OneDrive`: letters
/// only, a capital after a small letter), whole and lowercased; [`split_words`] cuts
/// them into their parts.
fn mixed_case_words(text: &str, emit: &mut dyn FnMut(&str)) {
    let mut lowered = String::new();
    for (start, end) in ascii_runs(text) {
        let run = &text.as_bytes()[start..end];
        // Only a run that is a word of its own, not a piece of a longer non-ASCII word.
        let alone = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric())
            && text[end..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric());
        if alone
            && run.len() <= MAX_TOKEN_BYTES
            && run.iter().all(u8::is_ascii_alphabetic)
            && run
                .windows(2)
                .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        {
            lowered.clear();
            lowered.push_str(&text[start..end]);
            lowered.make_ascii_lowercase();
            emit(&lowered);
        }
    }
}

fn is_stopword(word: &str) -> bool {
    const STOPWORDS: &[&str] = &[
        "a", "about", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been",
        "being", "but", "by", "can", "could", "did", "do", "does", "each", "eg", "else", "etc",
        "every", "for", "from", "had", "has", "have", "he", "her", "here", "his", "how", "ie",
        "if", "in", "into", "is", "it", "its", "just", "let", "may", "might", "must", "of", "on",
        "onto", "or", "our", "please", "she", "should", "so", "some", "such", "than", "that",
        "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "us",
        "using", "via", "was", "we", "were", "what", "when", "where", "which", "while", "who",
        "whom", "whose", "why", "will", "with", "would", "you", "your", "yours",
    ];
    STOPWORDS.binary_search(&word).is_ok()
}

fn has_vowel(s: &str) -> bool {
    s.bytes().any(|b| b"aeiouy".contains(&b))
}

/// A few deterministic suffix rules, applied to ASCII words only: plurals (`ies` -> `y`,
/// `sses`/`xes`/`ches`/`shes` -> drop `es`, `s` -> drop), then `ing`/`ed` (when a vowel
/// stays), then a final `e`, then a doubled final consonant (`stopp` -> `stop`).
fn stem(word: &mut String) {
    if !word.is_ascii() || word.len() < 4 {
        return;
    }
    // Plurals.
    if word.ends_with("ies") && word.len() > 4 {
        word.truncate(word.len() - 3);
        word.push('y');
    } else if word.ends_with("sses")
        || word.ends_with("xes")
        || word.ends_with("ches")
        || word.ends_with("shes")
        || word.ends_with("zes")
    {
        word.truncate(word.len() - 2);
    } else if word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is")
    {
        word.pop();
    }
    // Verb endings.
    let mut stripped = false;
    for suffix in ["ing", "ed"] {
        if word.ends_with(suffix) {
            let stem = &word[..word.len() - suffix.len()];
            if stem.len() >= 3 && has_vowel(stem) {
                word.truncate(stem.len());
                stripped = true;
            }
            break;
        }
    }
    // Final e (create / created / creating all become `creat`).
    if word.len() >= 4 && word.ends_with('e') && !word.ends_with("ee") {
        word.pop();
    }
    // Doubled consonant left by a verb ending (stopped -> stopp -> stop).
    if stripped {
        let b = word.as_bytes();
        let n = b.len();
        if n >= 4 && b[n - 1] == b[n - 2] && b"bgmnprt".contains(&b[n - 1]) {
            word.pop();
        }
    }
}

// ---------------------------------------------------------------------------------
// A small, fast, deterministic hasher for the term dictionary (keys are short strings
// we produce ourselves, so flooding resistance is not needed).

#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let v = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            h = (h.rotate_left(5) ^ v).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ b as u64).wrapping_mul(K);
        }
        self.0 = h;
    }

    fn write_u8(&mut self, i: u8) {
        self.write(&[i]);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Source;
    use crate::config::Namespace;
    use serde_json::json;
    use toolgate_adapters::ToolDef;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = String::new();
        tokenize(text, &mut buf, &mut |t| out.push(t.to_owned()));
        out
    }

    fn tool(name: &str, description: &str, params: &[&str]) -> ToolDef {
        let props: serde_json::Map<String, Value> = params
            .iter()
            .map(|p| (p.to_string(), json!({"type": "string"})))
            .collect();
        let raw = json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": props},
        });
        ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap()
    }

    /// Three Stripe operations, descriptions in HTML as the spec has them.
    fn stripe_tools() -> Vec<ToolDef> {
        vec![
            tool(
                "PostRefunds",
                "<p>When you create a new refund, you must specify a Charge or a PaymentIntent object on which to create it.</p>",
                &["charge", "amount"],
            ),
            tool(
                "PostCustomers",
                "<p>Creates a new customer object.</p>",
                &["email", "name"],
            ),
            tool(
                "GetCustomers",
                "<p>Returns a list of your customers.</p>",
                &["email", "limit"],
            ),
        ]
    }

    fn catalog(upstreams: &[(&str, Vec<ToolDef>)]) -> Catalog {
        let sources: Vec<Source<'_>> = upstreams
            .iter()
            .map(|(u, tools)| Source {
                upstream: u,
                namespace: Namespace::Prefix,
                tools,
                shaping: None,
            })
            .collect();
        Catalog::build(&sources).0
    }

    /// The cache says which snapshot's index it holds: the one a search built, not a
    /// newer snapshot (whose first search builds it, off the runtime's thread).
    #[test]
    fn the_cache_knows_which_catalog_it_has_indexed() {
        let cache = SearchCache::default();
        let first = std::sync::Arc::new(sample());
        assert!(!cache.has_index_for(&first));
        let hits = cache.index_for(&first).search("pull", 10, |_| true);
        assert!(!hits.is_empty());
        assert!(cache.has_index_for(&first));
        let newer = std::sync::Arc::new(sample());
        assert!(
            !cache.has_index_for(&newer),
            "a new snapshot has no index yet"
        );
        cache.index_for(&newer);
        assert!(cache.has_index_for(&newer) && !cache.has_index_for(&first));
    }

    fn sample() -> Catalog {
        catalog(&[
            (
                "gh",
                vec![
                    tool(
                        "pulls/list",
                        "List pull requests.\n\nLists pull requests in a repository.",
                        &["owner", "repo", "state"],
                    ),
                    tool(
                        "pulls/create",
                        "Create a pull request.",
                        &["owner", "repo", "title", "head", "base"],
                    ),
                    tool(
                        "issues/add-labels",
                        "Add labels to an issue.",
                        &["owner", "repo", "issue_number", "labels"],
                    ),
                    tool(
                        "issues/create",
                        "Create an issue.",
                        &["owner", "repo", "title", "body"],
                    ),
                    tool(
                        "repos/get-content",
                        "Get repository content.\n\nGets the contents of a file or directory.",
                        &["owner", "repo", "path"],
                    ),
                ],
            ),
            ("stripe", stripe_tools()),
        ])
    }

    fn names(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.name.as_str()).collect()
    }

    /// A misspelt word the index has never seen reads as the index's words a slip
    /// away from it; a known word is taken as written.
    #[test]
    fn typos_find_the_word_meant() {
        let catalog = catalog(&[(
            "calc",
            vec![
                tool("sum", "Calculate the sum of two numbers", &["a", "b"]),
                tool("schedule", "Schedule a meeting in the calendar", &["when"]),
            ],
        )]);
        let index = SearchIndex::build(&catalog);
        let hits = index.search("caculate a total", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"calc__sum"), "{hits:?}");
        let hits = index.search("shedule a call with the team", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"calc__schedule"), "{hits:?}");
        // Too short to guess, or nothing near: nothing.
        assert!(index.search("qzx", 10, |_| true).is_empty());
        assert!(index.search("xylophone", 10, |_| true).is_empty());
        assert_eq!(edit_distance(b"cacul", b"calcul", 1), Some(1));
        assert_eq!(edit_distance(b"caculat", b"calcul", 2), None, "three edits");
        assert_eq!(
            edit_distance(b"form", b"from", 1),
            Some(1),
            "a swap is one edit"
        );
        assert_eq!(edit_distance(b"abc", b"xyz", 2), None);
        assert_eq!(edit_distance(b"", b"ab", 2), Some(2));
    }

    /// A query in Chinese finds a tool described in Chinese though neither is spaced
    /// into words: they share two-character pieces.
    #[test]
    fn finds_cjk_descriptions_by_cjk_queries() {
        let catalog = catalog(&[(
            "maps",
            vec![
                tool(
                    "geo",
                    "地理编码：将详细的结构化地址转换为经纬度坐标",
                    &["address"],
                ),
                tool(
                    "weather",
                    "根据城市名称或者标准adcode查询指定城市的天气",
                    &["city"],
                ),
            ],
        )]);
        let index = SearchIndex::build(&catalog);
        let hits = index.search("查询北京明天的天气", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"maps__weather"), "{hits:?}");
        let hits = index.search("把这个地址转成坐标", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"maps__geo"), "{hits:?}");
    }

    /// A small glossary carries common tool vocabulary across languages: English finds
    /// a tool described in Chinese, Chinese and German find one described in English.
    #[test]
    fn finds_tools_across_languages() {
        let catalog = catalog(&[
            (
                "hot",
                vec![
                    tool("realtime", "获取微博热搜榜", &[]),
                    tool("daily", "获取知乎热榜", &[]),
                ],
            ),
            (
                "life",
                vec![
                    tool("oil", "获取今日各省油价", &[]),
                    tool("parcel", "查询快递物流信息", &["number"]),
                ],
            ),
            (
                "wx",
                vec![
                    tool("forecast", "Get the weather forecast for a city", &["city"]),
                    tool(
                        "alerts",
                        "Get active weather alerts for a state",
                        &["state"],
                    ),
                ],
            ),
            (
                "fs",
                vec![
                    tool("write_file", "Write text to a file on disk", &["path"]),
                    tool(
                        "list_directory",
                        "List the entries of a directory",
                        &["path"],
                    ),
                ],
            ),
        ]);
        let index = SearchIndex::build(&catalog);
        let hits = index.search("trending topics on weibo", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"hot__realtime"), "{hits:?}");
        let hits = index.search("today's fuel prices", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"life__oil"), "{hits:?}");
        let hits = index.search("track my parcel", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"life__parcel"), "{hits:?}");
        let hits = index.search("明天北京天气预报", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"wx__forecast"), "{hits:?}");
        let hits = index.search("Datei speichern", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"fs__write_file"), "{hits:?}");
    }

    /// Abbreviations: from the built-in table (`k8s`, spelled with digits; `mr`, a
    /// phrase), and those the catalog defines itself.
    #[test]
    fn abbreviations_stand_for_their_words() {
        let catalog = catalog(&[
            (
                "kube",
                vec![
                    tool("delete_resource", "Delete a Kubernetes resource", &["name"]),
                    tool("delete_file", "Delete a file", &["path"]),
                ],
            ),
            (
                "forge",
                vec![
                    tool(
                        "create_merge_request",
                        "Open a new merge request",
                        &["title"],
                    ),
                    tool("create_branch", "Create a branch", &["name"]),
                    tool(
                        "send_notice",
                        "Send a notice to a group over instant messaging",
                        &["group"],
                    ),
                    tool(
                        "chat_policy",
                        "The rules of instant messaging (IM) in the workspace",
                        &[],
                    ),
                ],
            ),
        ]);
        let index = SearchIndex::build(&catalog);
        let hits = index.search("k8s: delete the stuck job", 10, |_| true);
        assert_eq!(
            names(&hits).first(),
            Some(&"kube__delete_resource"),
            "{hits:?}"
        );
        let hits = index.search("create an MR", 10, |_| true);
        assert_eq!(
            names(&hits).first(),
            Some(&"forge__create_merge_request"),
            "{hits:?}"
        );
        let hits = index.search("send an IM", 10, |_| true);
        assert_eq!(
            names(&hits).first(),
            Some(&"forge__send_notice"),
            "{hits:?}"
        );
    }

    /// A query naming a server ranks that server's matching tools first, but a server
    /// named by a plain word does not win on that word alone.
    #[test]
    fn a_named_server_comes_first() {
        let catalog = catalog(&[
            (
                "notion",
                vec![
                    tool("create_page", "Create a page", &["title"]),
                    tool("search", "Search pages and databases", &["query"]),
                ],
            ),
            (
                "wiki",
                vec![tool("create_page", "Create a page in the wiki", &["title"])],
            ),
            (
                "line",
                vec![tool("broadcast", "Broadcast a message to followers", &[])],
            ),
            (
                "git",
                vec![
                    tool(
                        "blame",
                        "Show who last changed each line of a file",
                        &["path"],
                    ),
                    tool("create_branch", "Create a local branch", &["name"]),
                ],
            ),
            (
                "gitlab",
                vec![tool(
                    "create_branch",
                    "Create a branch in a project",
                    &["name"],
                )],
            ),
        ]);
        let index = SearchIndex::build(&catalog);
        let hits = index.search("create a page in notion", 10, |_| true);
        assert_eq!(
            names(&hits).first(),
            Some(&"notion__create_page"),
            "{hits:?}"
        );
        let hits = index.search("who changed this line of the file", 10, |_| true);
        assert_eq!(names(&hits).first(), Some(&"git__blame"), "{hits:?}");
        // A name written in mixed case is one word, not its parts (`GitLab`, not git).
        let hits = index.search("create a branch in GitLab", 10, |_| true);
        assert_eq!(
            names(&hits).first(),
            Some(&"gitlab__create_branch"),
            "{hits:?}"
        );
    }

    #[test]
    fn splits_identifiers() {
        assert_eq!(words("repos/get-content"), ["repo", "get", "content"]);
        assert_eq!(
            words("PostPaymentIntentsIntentConfirm"),
            ["post", "payment", "intent", "intent", "confirm"]
        );
        assert_eq!(
            words("HTTPServer_v2.listAll"),
            ["http", "server", "2", "list"]
        );
        assert_eq!(words("github__pulls_list"), ["github", "pull", "list"]);
        assert_eq!(words("oauth2Token"), ["oauth", "2", "token"]);
        assert_eq!(
            words("ÉtéCafé naïve_ÜBERGröße"),
            ["été", "café", "naïve", "über", "größe"]
        );
        // CJK runs: their overlapping two-character pieces, split from Latin words.
        assert_eq!(words("列出 拉取请求"), ["列出", "拉取", "取请", "请求"]);
        assert_eq!(
            words("在github上创建仓库"),
            ["github", "上创", "创建", "建仓", "仓库"]
        );
        assert_eq!(
            words("ページを開く"),
            ["ペー", "ージ", "ジを", "を開", "開く"]
        );
        assert_eq!(words("x".repeat(100).as_str())[0].len(), MAX_TOKEN_BYTES);
    }

    #[test]
    fn hash_suffixes_are_not_indexed() {
        assert_eq!(
            strip_hash_suffix("users_set-primary_a2594c75"),
            "users_set-primary"
        );
        assert_eq!(strip_hash_suffix("list_deadbeef"), "list_deadbeef");
        assert_eq!(strip_hash_suffix("_a2594c75"), "_a2594c75");
        assert_eq!(strip_hash_suffix("ü_a2594c75"), "ü");
    }

    #[test]
    fn stems_consistently() {
        for group in [
            &["create", "creates", "created", "creating"][..],
            &["list", "lists", "listed", "listing"],
            &["update", "updates", "updated", "updating"],
            &["repository", "repositories"],
            &["branch", "branches"],
            &["stop", "stopped", "stopping"],
            &["merge", "merged", "merging"],
        ] {
            let stems: Vec<String> = group.iter().map(|w| stemmed(w)).collect();
            assert!(
                stems.iter().all(|s| *s == stems[0]),
                "{group:?} -> {stems:?}"
            );
        }
        // Short or vowel-less stems are left alone.
        assert_eq!(stemmed("string"), "string");
        assert_eq!(stemmed("need"), "need");
        assert_eq!(stemmed("status"), "status");
        assert_eq!(stemmed("access"), "access");
        assert_eq!(stemmed("add"), "add");
        assert_eq!(stemmed("added"), "add");
    }

    #[test]
    fn drops_stopwords_html_and_links() {
        assert_eq!(words("Add a label to the issue"), ["add", "label", "issu"]);
        let mut out = String::new();
        clean_text(
            "<p>Returns a <code>Customer</code> &amp; more. See [docs](https://x.io/a) or https://y.io/b.</p>",
            &mut out,
        );
        let cleaned = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(cleaned, "Returns a Customer & more. See [docs or");
        // Unbalanced markup never panics and keeps the text.
        clean_text("a < b & c <p unterminated ](x", &mut out);
        assert!(out.contains("a < b & c"));
    }

    #[test]
    fn first_sentence_of_first_line() {
        assert_eq!(
            first_sentence("List pull requests.\n\nMore."),
            "List pull requests."
        );
        assert_eq!(
            first_sentence("Creates a refund, e.g. for a charge. Then more."),
            "Creates a refund, e.g. for a charge."
        );
        assert_eq!(first_sentence(""), "");
        assert_eq!(
            cap_chars(" Use  <b>the</b> Search Query Language . Then ", 160),
            "Use <b>the</b> Search Query Language. Then"
        );
        let long = "word ".repeat(100);
        assert_eq!(
            cap_chars(&long, MAX_HIT_DESCRIPTION).chars().count(),
            MAX_HIT_DESCRIPTION
        );
    }

    #[test]
    fn name_matches_rank_first() {
        let index = SearchIndex::build(&sample());
        let hits = index.search("list open pull requests in a repository", 10, |_| true);
        assert_eq!(hits[0].name, "gh__pulls_list", "{hits:?}");
        let hits = index.search("add a label to an issue", 10, |_| true);
        assert_eq!(hits[0].name, "gh__issues_add-labels", "{hits:?}");
        let hits = index.search("refund a charge", 10, |_| true);
        assert_eq!(hits[0].name, "stripe__PostRefunds", "{hits:?}");
        assert_eq!(hits[0].upstream, "stripe");
        assert!(
            hits[0]
                .description
                .starts_with("When you create a new refund")
        );
        let hits = index.search("read a file from a repo", 10, |_| true);
        assert_eq!(hits[0].name, "gh__repos_get-content", "{hits:?}");
        // Synonyms: "new" finds create, "fetch" finds get/list.
        let hits = index.search("new customer", 10, |_| true);
        assert_eq!(hits[0].name, "stripe__PostCustomers", "{hits:?}");
        // Scores descend.
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    }

    #[test]
    fn exact_name_comes_first() {
        let index = SearchIndex::build(&sample());
        let hits = index.search("gh__issues_create", 5, |_| true);
        assert_eq!(hits[0].name, "gh__issues_create");
        let hits = index.search("GetCustomers", 5, |_| true);
        assert_eq!(hits[0].name, "stripe__GetCustomers");
    }

    #[test]
    fn policy_filters_before_the_limit_and_does_not_influence_scores() {
        let index = SearchIndex::build(&sample());
        let only_stripe = |n: &str| n.starts_with("stripe__");
        let hits = index.search("create", 2, only_stripe);
        assert_eq!(hits.len(), 2, "{hits:?}");
        assert!(hits.iter().all(|h| h.upstream == "stripe"));

        // The same allowed tools score the same whatever else the catalog holds.
        let small = catalog(&[("stripe", stripe_tools())]);
        let alone = SearchIndex::build(&small).search("create a customer", 10, |_| true);
        let filtered = index.search("create a customer", 10, only_stripe);
        assert_eq!(alone, filtered);
        assert!(index.search("create", 10, |_| false).is_empty());
    }

    /// Words only hidden tools use teach the caller's search nothing: no abbreviation
    /// learnt from them, no whole word read because of them, no typo taken for one.
    #[test]
    fn hidden_tools_teach_no_words() {
        let visible = || {
            vec![
                tool(
                    "send_notice",
                    "Send a notice over instant messaging",
                    &["group"],
                ),
                tool("list_groups", "List the groups of the forge", &[]),
                tool("list_rules", "List the rules of a group", &["group"]),
            ]
        };
        let hidden = vec![
            tool("im_rules", "The rules of instant messaging (IM)", &[]),
            tool("im_policy", "The policy for instant messaging (IM)", &[]),
            tool("sync", "Sync the groups with GitLab", &[]),
            tool("grupos", "Grupos de la forja", &[]),
        ];
        let full = SearchIndex::build(&catalog(&[("pub", visible()), ("secret", hidden)]));
        let alone = SearchIndex::build(&catalog(&[("pub", visible())]));
        for query in [
            "send an IM",
            "GitLab groups",
            "list grupos",
            "list the rulse",
        ] {
            let expected = alone.search(query, 10, |_| true);
            let filtered = full.search(query, 10, |n| n.starts_with("pub__"));
            assert_eq!(expected, filtered, "{query}");
        }
    }

    #[test]
    fn ties_break_by_name_and_limit_is_capped() {
        let tools: Vec<ToolDef> = (0..80)
            .rev()
            .map(|i| tool(&format!("tool{i:02}"), "Does the same thing.", &[]))
            .collect();
        let index = SearchIndex::build(&catalog(&[("u", tools)]));
        let hits = index.search("same thing", 1000, |_| true);
        assert_eq!(hits.len(), MAX_LIMIT);
        let mut sorted = names(&hits);
        sorted.sort();
        assert_eq!(names(&hits), sorted);
        assert_eq!(hits[0].name, "u__tool00");
        assert!(index.search("same", 0, |_| true).is_empty());
    }

    #[test]
    fn odd_queries_do_not_panic() {
        let index = SearchIndex::build(&sample());
        assert!(index.search("", 10, |_| true).is_empty());
        assert!(index.search("   ", 10, |_| true).is_empty());
        assert!(index.search("the of a", 10, |_| true).is_empty());
        let _ = index.search("列出 pull requests ü ÉTÉ 🎉 İstanbul", 10, |_| true);
        let _ = index.search(&"é".repeat(100_000), 10, |_| true);
        let _ = index.search(&"pull ".repeat(100_000), 10, |_| true);
        let _ = index.search("<p>&amp;](", 10, |_| true);
        // Query expansion on odd input: abbreviations, mixed case, digits, glossary
        // words inside long unspaced runs.
        let _ = index.search("K8s GitLab MR PR i18n a11y x1Y2 (IM) aB", 10, |_| true);
        let _ = index.search(&"天气预报搜索".repeat(400), 10, |_| true);
        let _ = index.search(&"GitLabMongoDB ".repeat(400), 10, |_| true);
        // Unclosed markup in a huge description stays linear.
        let mut out = String::new();
        clean_text(&"<a".repeat(200_000), &mut out);
        clean_text(&"](x".repeat(200_000), &mut out);
        let empty = SearchIndex::build(&Catalog::default());
        assert!(empty.search("pull", 10, |_| true).is_empty());
        // Odd definitions index without panicking.
        // Parenthesised abbreviations of every odd shape index without panicking.
        let shapes = tool(
            "shapes",
            "( (A) (AB (ABCDEFG) é (ÉT) x (XY) Über Ärger (ÜÄ) points of interest (POIs) ()",
            &["p"],
        );
        let index = SearchIndex::build(&catalog(&[("u", vec![shapes])]));
        let _ = index.search("poi xy", 10, |_| true);
        let raw = json!({"name": "ÄÖÜ", "description": 42, "inputSchema": "nope", "title": ["x"]});
        let odd = ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap();
        let index = SearchIndex::build(&catalog(&[("ü", vec![odd])]));
        assert_eq!(index.len(), 1);
        let _ = index.search("äöü", 10, |_| true);
    }

    #[test]
    fn my_means_the_authenticated_user() {
        let index = SearchIndex::build(&catalog(&[(
            "gh",
            vec![
                tool(
                    "activity/list-notifications-for-authenticated-user",
                    "List notifications for the authenticated user.",
                    &[],
                ),
                tool(
                    "activity/list-repo-notifications-for-authenticated-user",
                    "List repository notifications for the authenticated user.",
                    &["owner", "repo"],
                ),
                tool("users/get-by-username", "Get a user.", &["username"]),
            ],
        )]));
        let hits = index.search("list my notifications", 5, |_| true);
        assert_eq!(
            hits[0].name, "gh__activity_list-notifications-for-authenticated-user",
            "{hits:?}"
        );
    }
}
