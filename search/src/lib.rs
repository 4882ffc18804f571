//! Tool search: the engine behind the gateway's `tool_search` protocol tool.
//!
//! Models choose badly among hundreds of tools, so instead of listing every definition
//! an agent can ask `tool_search {query, limit?}` for the few tools that fit its task
//! and then load only those. This crate ranks a catalog's tools for such a query.
//!
//! It is a crate of its own, not a module of the gateway, because it needs nothing of
//! the gateway: no upstream, session or config, only each tool's names and definition
//! ([`Document`]) and the caller's policy as a predicate. Kept apart, the ranking,
//! its vocabulary tables (`data/`) and the optional embedding model ([`embed`], with
//! the weights and linear algebra crates it alone uses) are read, tested and measured
//! on their own, and a change to them rebuilds this crate rather than the whole
//! gateway. The gateway adapts its catalog to [`Corpus`] in one place.
//!
//! Modules, one line each:
//! - `acronyms`: abbreviations learnt from the catalog's own text.
//! - `cache`: [`SearchCache`], the newest snapshot's index, embedded in the background.
//! - `document`: [`Document`] and [`Corpus`], what the index reads of a tool and a snapshot.
//! - [`embed`]: the optional sentence-embedding model (a BERT encoder read from safetensors).
//! - `fuse`: the model's cosine fused with the word-matching score.
//! - `hash`: the term dictionary's hasher.
//! - `index`: [`SearchIndex`] built from a corpus; `index/query.rs` ranks a query.
//! - `synonyms`: related words, abbreviations and translations of a query word.
//! - `tables`: the vocabulary files of `data/`, turned into constants by `build.rs`.
//! - `text`: text cleaned of markup, cut into words, stopwords dropped, stemmed.
//!
//! # Index
//!
//! [`SearchIndex::build`] takes a [`Corpus`] (the gateway's catalog snapshot; it is
//! rebuilt by the first search after the catalog changes, off the runtime's thread:
//! tens of milliseconds for a thousand tools) and turns every tool into a small
//! multi-field document:
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
//! lowercased, stripped of a small stopword list (`data/stopwords.txt`), and stemmed
//! by a few deterministic suffix rules (plural `s`/`es`/`ies`, `ed`, `ing`, final `e`,
//! doubled consonants), so `creates`, `created`, `creating` and `create` meet
//! (`text.rs`). A word of a description written in mixed case (`GitLab`, `MongoDB`) is
//! also indexed whole, and a query reads such a word (or one with digits, `k8s`) whole
//! when the index or the synonym table knows it: `GitLab` in a query is the server,
//! not git and a lab.
//!
//! # Ranking
//!
//! BM25F (`index/query.rs`): per term, field frequencies are length-normalised per
//! field, weighted and summed, then saturated once (`k1 = 1.2`) and multiplied by the
//! term's IDF. Each query word also brings its alternatives (`synonyms.rs`, from the
//! tables in `data/`): related verbs and nouns (list/get/fetch, image/picture/photo) at
//! a reduced weight, abbreviations (repo, k8s, ppt, wiki; `pr` stands for the phrase
//! "pull request") at full weight, and the same word in another language from a small
//! glossary (`天气` <-> weather, `wetter` -> weather), so a query in English finds a
//! tool described in Chinese and the other way round. Abbreviations the catalog itself
//! defines or uses (`acronyms.rs`) count too. A query word scores the best of its
//! alternatives, never their sum; the other words of a phrase it stands for count as
//! query words of their own.
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
//! tool still finds it; the catalog is embedded on a background thread
//! ([`SearchCache`]).
//!
//! Recall (`gateway/tests/search_recall.rs`) and build and query times are in
//! `bench/README.md` ("Search").
//!
//! # Policy
//!
//! [`SearchIndex::search`] takes the caller's policy as a predicate. Statistics (IDF,
//! average field lengths, document count) are computed over the allowed tools only,
//! so a tool outside the caller's set neither appears in nor influences the results.

mod acronyms;
mod cache;
mod document;
pub mod embed;
mod fuse;
mod hash;
mod index;
mod synonyms;
mod tables;
#[cfg(test)]
mod testing;
mod text;

pub use cache::SearchCache;
pub use document::{Corpus, Document};
pub use index::SearchIndex;

/// Most results one search returns.
pub const MAX_LIMIT: usize = 50;
/// Results returned when the caller does not say.
pub const DEFAULT_LIMIT: usize = 10;
/// Longest [`Hit::description`], in characters.
pub const MAX_HIT_DESCRIPTION: usize = 160;

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
