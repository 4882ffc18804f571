//! Fusing the embedding model's similarity with the word-matching score.
//!
//! When `search.embedding_model` is set, every catalog entry's name and description
//! are embedded once per catalog snapshot, in the background ([`SearchCache`]
//! (crate::SearchCache) starts it; until it is done the search is word matching
//! alone), and each query is embedded when it is searched. A tool's final score is
//!
//! ```text
//! min(words / best_words, 1) + EMBED_WEIGHT × latin × cosine
//! ```
//!
//! where `words` is the word-matching score (BM25F with its boosts), `best_words` the
//! best among the caller's tools (ignoring the exact-name bonus, which still puts a
//! spelt-out name first), and `latin` the share of the query's letters that are
//! ASCII: the measured model (all-MiniLM-L6-v2) knows English, and its vectors of a
//! Chinese query are noise, so such a query keeps the word matching (and its
//! glossary) alone. Candidates are the tools that match a word plus the
//! [`EMBED_CANDIDATES`] nearest by cosine; only the caller's tools are ever compared,
//! so a hidden tool neither appears nor moves anything.

use std::sync::Arc;

use crate::document::{self, Corpus, Document};
use crate::embed::Embedder;
use crate::text::{cap_bytes, clean_text, strip_hash_suffix};

/// What the cosine weighs against the best word-matching score (which counts 1).
pub(crate) const EMBED_WEIGHT: f64 = 1.0;
/// Tools sharing no word with the query that may still rise by meaning alone.
const EMBED_CANDIDATES: usize = 50;

/// The unit vectors of one catalog snapshot, one per index entry, and the model that
/// made them (queries must be embedded by the same).
pub(crate) struct Vectors {
    pub(crate) embedder: Arc<Embedder>,
    pub(crate) dims: usize,
    pub(crate) data: Vec<f32>,
}

impl Vectors {
    fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dims..(i + 1) * self.dims]
    }
}

/// What the model reads of a tool: its name as words, then its description.
pub(crate) fn embedding_text(original: &str, description: &str) -> String {
    let mut text = String::with_capacity(original.len() + 2 + description.len().min(1024));
    let mut prev: Option<char> = None;
    for c in strip_hash_suffix(original).chars() {
        if c == '_' || c == '-' || c == '/' || c == '.' {
            text.push(' ');
        } else {
            // camelCase: `getUser` reads `get User`.
            if c.is_uppercase() && prev.is_some_and(char::is_lowercase) {
                text.push(' ');
            }
            text.push(c);
        }
        prev = Some(c);
    }
    text.push_str(": ");
    text.push_str(cap_bytes(description, 1024));
    text
}

/// What the embedding model reads of each tool of `corpus`, in index order.
pub(crate) fn embedding_texts<C: Corpus + ?Sized>(corpus: &C) -> impl Iterator<Item = String> + '_ {
    let mut cleaned = String::new();
    corpus.documents().map(move |tool| {
        clean_text(document::description(tool), &mut cleaned);
        embedding_text(tool.original(), &cleaned)
    })
}

/// The share of `query`'s letters that are ASCII (1 for a query without letters).
fn latin_share(query: &str) -> f64 {
    let (mut letters, mut ascii) = (0usize, 0usize);
    for c in query.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        ascii += usize::from(c.is_ascii());
    }
    if letters == 0 {
        1.0
    } else {
        ascii as f64 / letters as f64
    }
}

/// Rewrites `scores` (word-matching scores, exact-name bonus included) into fused
/// scores for the tools in `mask`; the others are left at zero or as they were
/// (the caller ranks only tools in `mask`).
pub(crate) fn fuse(scores: &mut [f64], mask: &[bool], vectors: &Vectors, query: &str, bonus: f64) {
    let latin = latin_share(query);
    if latin == 0.0 || vectors.data.len() != scores.len() * vectors.dims {
        return;
    }
    let q = vectors.embedder.embed(query);
    if q.len() != vectors.dims {
        return;
    }
    let best = scores
        .iter()
        .zip(mask)
        .filter(|&(&s, &m)| m && s > 0.0)
        .map(|(&s, _)| if s >= bonus { s - bonus } else { s })
        .fold(0.0f64, f64::max);
    let mut cosines: Vec<(f64, usize)> = Vec::new();
    for (i, _) in mask.iter().enumerate().filter(|(_, m)| **m) {
        let cos: f32 = q.iter().zip(vectors.row(i)).map(|(a, b)| a * b).sum();
        cosines.push((f64::from(cos), i));
    }
    // The nearest by meaning join the tools that matched a word.
    let k = EMBED_CANDIDATES.min(cosines.len());
    if k > 0 && k < cosines.len() {
        cosines.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    }
    let mut candidate = vec![false; scores.len()];
    for &(_, i) in &cosines[..k] {
        candidate[i] = true;
    }
    for (cos, i) in cosines {
        let s = scores[i];
        if s <= 0.0 && !candidate[i] {
            continue;
        }
        let exact = if s >= bonus { bonus } else { 0.0 };
        let words = if best > 0.0 {
            ((s - exact) / best).min(1.0)
        } else {
            0.0
        };
        let fused = words + EMBED_WEIGHT * latin * cos + exact;
        // A tool that matched no word and points away from the query is no result.
        scores[i] = if s <= 0.0 {
            fused.max(0.0)
        } else {
            fused.max(f64::MIN_POSITIVE)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_words() {
        assert_eq!(
            embedding_text("repos_get-content", "Gets a file."),
            "repos get content: Gets a file."
        );
        assert_eq!(embedding_text("getUserById", ""), "get User By Id: ");
    }

    #[test]
    fn latin_share_of_letters() {
        assert_eq!(latin_share("weather in Paris"), 1.0);
        assert_eq!(latin_share("天气"), 0.0);
        assert_eq!(latin_share("123 ?"), 1.0);
        assert!((latin_share("ab天气") - 0.5).abs() < 1e-9);
    }
}
