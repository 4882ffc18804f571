//! Query expansion: the other words a tool's text may use for what the caller wrote.
//!
//! Three built-in tables, all general vocabulary of agent tasks (never tuned to one
//! catalog), kept as data files in `data/` and read at build time (`tables.rs`):
//!
//! * related verbs and nouns (`list`/`get`/`fetch`, `image`/`picture`/`photo`), which
//!   count at a reduced weight (`related.tsv`);
//! * abbreviations and spellings of one thing (`repo`/`repository`, `k8s`/`kubernetes`,
//!   `pr` -> `pull request`), which count fully, and may stand for a phrase
//!   (`same.tsv`; one way only: `implies.tsv`; the caller: `self.tsv`);
//! * a small glossary of the same vocabulary in Chinese, Japanese, German, Spanish and
//!   French, so a query in one language finds a tool described in another (`天气` ->
//!   `weather`, `weather` -> `天气`, `wetter` -> `weather`; `glossary.tsv`).
//!
//! Every word is stemmed the way the index stems, so table entries meet indexed terms.
//! The lookup is built from the tables once, on the first search.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::tables::{GLOSSARY, IMPLIES, RELATED, SAME, SELF};
use crate::text::{is_cjk, stemmed};

/// Weight of a related word relative to the word the caller wrote.
const RELATED_WEIGHT: f64 = 0.5;
/// Weight of a translation: the meaning is the same, the wording is a guess.
const TRANSLATION_WEIGHT: f64 = 0.8;

/// One thing a query word may stand for: a term, or a phrase of terms (all stemmed).
pub(crate) struct Alternative {
    pub terms: Vec<String>,
    pub weight: f64,
}

pub(crate) struct Synonyms {
    /// Stemmed word -> what else it may be written as.
    map: HashMap<String, Vec<Alternative>>,
    /// Words that only stand for their alternatives (`my` -> `authenticated`).
    replace: Vec<String>,
    /// CJK glossary words (found inside a query's unspaced runs), longest first, with
    /// the stemmed English they stand for.
    cjk: Vec<(&'static str, Vec<String>)>,
}

impl Synonyms {
    pub(crate) fn of(&self, word: &str) -> &[Alternative] {
        self.map.get(word).map(Vec::as_slice).unwrap_or(&[])
    }

    pub(crate) fn drop_literal(&self, word: &str) -> bool {
        self.replace.iter().any(|w| w == word)
    }

    /// The glossary's English for the CJK words `text` contains, as (phrase, weight).
    /// A word inside a longer glossary word already found is not read again
    /// (`拉取请求` is a pull request, not also a bare request).
    pub(crate) fn translations_in(&self, text: &str) -> Vec<(&[String], f64)> {
        if !text.chars().any(is_cjk) {
            return Vec::new();
        }
        let mut found: Vec<(&[String], f64)> = Vec::new();
        let mut covered: Vec<&str> = Vec::new();
        for (word, english) in &self.cjk {
            if text.contains(word) && !covered.iter().any(|c| c.contains(word)) {
                covered.push(word);
                found.push((english.as_slice(), TRANSLATION_WEIGHT));
            }
        }
        found
    }
}

/// Stemmed terms of a phrase (`pull request` -> `pull`, `request`).
fn phrase(text: &str) -> Vec<String> {
    text.split_whitespace().map(stemmed).collect()
}

pub(crate) fn synonyms() -> &'static Synonyms {
    static SYNONYMS: OnceLock<Synonyms> = OnceLock::new();
    SYNONYMS.get_or_init(build)
}

fn build() -> Synonyms {
    let mut map: HashMap<String, Vec<Alternative>> = HashMap::new();
    let mut link = |word: &str, terms: Vec<String>, weight: f64| {
        if terms.is_empty() || terms.len() == 1 && terms[0] == word {
            return;
        }
        let alts = map.entry(word.to_owned()).or_default();
        match alts.iter_mut().find(|a| a.terms == terms) {
            Some(slot) => slot.weight = slot.weight.max(weight),
            None => alts.push(Alternative { terms, weight }),
        }
    };
    for group in RELATED {
        for a in *group {
            for b in *group {
                link(&stemmed(a), vec![stemmed(b)], RELATED_WEIGHT);
            }
        }
    }
    for row in SAME {
        let full = phrase(row[0]);
        for short in &row[1..] {
            let short = stemmed(short);
            // The abbreviation stands for the whole phrase.
            link(&short, full.clone(), 1.0);
            // A lone word brings its abbreviations back; a phrase's first word alone
            // would be too loose a cue.
            if full.len() == 1 {
                link(&full[0], vec![short.clone()], 1.0);
            }
            for other in &row[1..] {
                link(&short, vec![stemmed(other)], 1.0);
            }
        }
    }
    for (word, implied) in IMPLIES {
        link(&stemmed(word), vec![stemmed(implied)], 1.0);
    }
    for (word, means) in SELF {
        for b in *means {
            link(word, vec![stemmed(b)], 1.0);
        }
    }
    let mut cjk: Vec<(&'static str, Vec<String>)> = Vec::new();
    for (english, foreign) in GLOSSARY {
        let english_terms = phrase(english);
        for word in *foreign {
            if word.starts_with(is_cjk) {
                cjk.push((word, english_terms.clone()));
                // An English word finds a tool described in the other script (a
                // phrase's words are too loose on their own to stand for it).
                if english_terms.len() == 1 {
                    link(
                        &english_terms[0],
                        vec![word.to_lowercase()],
                        TRANSLATION_WEIGHT,
                    );
                }
            } else if !word.contains(' ') {
                link(&stemmed(word), english_terms.clone(), TRANSLATION_WEIGHT);
            }
        }
    }
    // Longest first, so a compound is read before the words inside it.
    cjk.sort_by(|a, b| {
        b.0.chars()
            .count()
            .cmp(&a.0.chars().count())
            .then(a.0.cmp(b.0))
    });
    Synonyms {
        map,
        replace: SELF.iter().map(|(w, _)| w.to_string()).collect(),
        cjk,
    }
}
