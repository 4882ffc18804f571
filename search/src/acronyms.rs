//! Abbreviations a catalog teaches, learnt while indexing it.
//!
//! Two kinds of evidence, both from the catalog's own text:
//!
//! * a description that defines one: `instant messaging (IM)`, `points of interest
//!   (POIs)`: the words before the parenthesis whose initials spell it;
//! * a tool whose text uses the initials of words its name spells out in full
//!   (`create_merge_request` described as "Creates an MR").
//!
//! A query word that is such an abbreviation also stands for its phrase, so "im" finds
//! `..._message_create` described in full words, and "mr" finds `merge_request`.

use crate::hash::FastMap;
use crate::text::{is_stopword, normalize};

/// Longest abbreviation learnt, in letters.
const MAX_LETTERS: usize = 5;
/// Phrases kept per abbreviation (the best attested).
const MAX_PHRASES: usize = 2;
/// What a definition in parentheses counts for, against one tool that merely uses
/// the initials of its name's words.
const DEFINED: u32 = 2;
/// Evidence a phrase needs to be kept: a definition, or two tools using the initials
/// (one may be a coincidence: `ls` in a tool named `list_sessions`).
const MIN_EVIDENCE: u32 = 2;
/// Candidate phrases tracked per abbreviation while indexing (bounds memory).
const MAX_CANDIDATES: usize = 16;

/// Most tools whose evidence is kept per phrase.
const MAX_WITNESSES: usize = 16;

/// A phrase an abbreviation stands for (stemmed terms), and the tools that attest it
/// with how much evidence each.
struct Learnt {
    phrase: Vec<Box<str>>,
    witnesses: Vec<(u32, u32)>,
}

impl Learnt {
    fn evidence(&self, allowed: impl Fn(u32) -> bool) -> u32 {
        self.witnesses
            .iter()
            .filter(|(doc, _)| allowed(*doc))
            .map(|(_, evidence)| evidence)
            .sum()
    }
}

#[derive(Default)]
pub(crate) struct Acronyms {
    /// Abbreviation (lowercase) -> phrases, best attested first.
    map: FastMap<Box<str>, Vec<Learnt>>,
}

impl Acronyms {
    /// The phrases `word` stands for that the caller's own tools (`allowed`, by
    /// document number) attest: a hidden tool teaches nothing.
    pub(crate) fn expansions(
        &self,
        word: &str,
        allowed: impl Fn(u32) -> bool + Copy,
    ) -> Vec<&[Box<str>]> {
        let mut found: Vec<(u32, &[Box<str>])> = self
            .map
            .get(word)
            .into_iter()
            .flatten()
            .map(|l| (l.evidence(allowed), l.phrase.as_slice()))
            .filter(|(evidence, _)| *evidence >= MIN_EVIDENCE)
            .collect();
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        found
            .into_iter()
            .take(MAX_PHRASES)
            .map(|(_, p)| p)
            .collect()
    }
}

#[derive(Default)]
pub(crate) struct Builder {
    /// Abbreviation -> phrases and the tools attesting each.
    candidates: FastMap<Box<str>, Vec<Learnt>>,
}

impl Builder {
    fn record(&mut self, abbreviation: &str, phrase: Vec<Box<str>>, doc: u32, evidence: u32) {
        if phrase.len() < 2 {
            return;
        }
        let list = self.candidates.entry(abbreviation.into()).or_default();
        let learnt = match list.iter().position(|l| l.phrase == phrase) {
            Some(i) => &mut list[i],
            None if list.len() < MAX_CANDIDATES => {
                list.push(Learnt {
                    phrase,
                    witnesses: Vec::new(),
                });
                let last = list.len() - 1;
                &mut list[last]
            }
            None => return,
        };
        if let Some((_, e)) = learnt.witnesses.iter_mut().find(|(d, _)| *d == doc) {
            *e = (*e).max(evidence);
        } else if learnt.witnesses.len() < MAX_WITNESSES {
            learnt.witnesses.push((doc, evidence));
        }
    }

    /// Learns the abbreviations `text` (of tool `doc`) defines in parentheses after
    /// their words.
    pub(crate) fn defined_in(&mut self, text: &str, doc: u32) {
        let bytes = text.as_bytes();
        let mut from = 0;
        while let Some(open) = text[from..].find('(').map(|i| from + i) {
            from = open + 1;
            let Some(close) = bytes[open + 1..]
                .iter()
                .take(MAX_LETTERS + 2)
                .position(|&b| b == b')')
                .map(|i| open + 1 + i)
            else {
                continue;
            };
            let inner = &text[open + 1..close];
            // `POIs`: a plural of the abbreviation.
            let letters = match inner.strip_suffix('s') {
                Some(stem) if stem.len() >= 2 && stem.bytes().all(|b| b.is_ascii_uppercase()) => {
                    stem
                }
                _ => inner,
            };
            if !(2..=MAX_LETTERS).contains(&letters.len())
                || !letters.bytes().all(|b| b.is_ascii_alphabetic())
                || !letters.bytes().any(|b| b.is_ascii_uppercase())
            {
                continue;
            }
            let abbreviation = letters.to_ascii_lowercase();
            if let Some(phrase) = spelled_before(&text[..open], abbreviation.as_bytes()) {
                self.record(&abbreviation, phrase, doc, DEFINED);
            }
        }
    }

    /// Learns the initials of two or three consecutive words of tool `doc`'s name
    /// when `used(initials)` says the tool's own text uses them.
    pub(crate) fn spelled_in_name(
        &mut self,
        doc: u32,
        name: &[u32],
        text_of: &[Box<str>],
        used: impl Fn(&str) -> bool,
    ) {
        let mut initials = String::new();
        for n in 2..=3 {
            for window in name.windows(n) {
                let words: Vec<&str> = window.iter().map(|&t| &*text_of[t as usize]).collect();
                initials.clear();
                initials.extend(words.iter().filter_map(|w| w.chars().next()));
                if initials.len() == n
                    && initials.bytes().all(|b| b.is_ascii_lowercase())
                    && used(&initials)
                {
                    let phrase = words.iter().map(|&w| w.into()).collect();
                    self.record(&initials, phrase, doc, 1);
                }
            }
        }
    }

    /// The learnt abbreviations whose phrases the index holds (`known`).
    pub(crate) fn finish(self, known: impl Fn(&str) -> bool) -> Acronyms {
        let mut map = FastMap::default();
        for (abbreviation, mut phrases) in self.candidates {
            phrases.retain(|l| {
                l.evidence(|_| true) >= MIN_EVIDENCE
                    && l.phrase.iter().all(|t| known(t))
                    && !l.phrase.contains(&abbreviation)
            });
            if !phrases.is_empty() {
                map.insert(abbreviation, phrases);
            }
        }
        Acronyms { map }
    }
}

/// The words at the end of `before` whose initials spell `letters` (stopwords inside
/// may be skipped: "points of interest" spells POI, and so does "point interest"), as
/// index terms.
fn spelled_before(before: &str, letters: &[u8]) -> Option<Vec<Box<str>>> {
    let words: Vec<&str> = before
        .rsplit(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(2 * letters.len())
        .collect();
    // `words` runs backwards from the parenthesis.
    let mut matched: Vec<&str> = Vec::new();
    let mut next = letters.len();
    for word in words {
        if next == 0 {
            break;
        }
        let lower = word.to_ascii_lowercase();
        if lower.as_bytes()[0] == letters[next - 1] {
            matched.push(word);
            next -= 1;
        } else if is_stopword(&lower) && !matched.is_empty() {
            continue;
        } else {
            return None;
        }
    }
    if next > 0 {
        return None;
    }
    let mut scratch = String::new();
    let phrase: Vec<Box<str>> = matched
        .iter()
        .rev()
        .filter_map(|w| normalize(&w.to_ascii_lowercase(), &mut scratch).map(Into::into))
        .collect();
    Some(phrase)
}
