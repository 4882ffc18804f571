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

use super::{FastMap, is_stopword, normalize};

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

type Phrase = Box<[Box<str>]>;
/// A phrase an abbreviation may stand for, and the evidence for it so far.
type Candidate = (Vec<Box<str>>, u32);

#[derive(Default)]
pub(super) struct Acronyms {
    /// Abbreviation (lowercase) -> phrases (stemmed terms), best attested first.
    map: FastMap<Box<str>, Vec<Phrase>>,
}

impl Acronyms {
    pub(super) fn expansions(&self, word: &str) -> &[Phrase] {
        self.map.get(word).map(Vec::as_slice).unwrap_or(&[])
    }
}

#[derive(Default)]
pub(super) struct Builder {
    /// Abbreviation -> phrases and how well each is attested.
    candidates: FastMap<Box<str>, Vec<Candidate>>,
}

impl Builder {
    fn record(&mut self, abbreviation: &str, phrase: Vec<Box<str>>, evidence: u32) {
        if phrase.len() < 2 {
            return;
        }
        let list = self.candidates.entry(abbreviation.into()).or_default();
        if let Some((_, count)) = list.iter_mut().find(|(p, _)| *p == phrase) {
            *count += evidence;
        } else if list.len() < MAX_CANDIDATES {
            list.push((phrase, evidence));
        }
    }

    /// Learns the abbreviations `text` defines in parentheses after their words.
    pub(super) fn defined_in(&mut self, text: &str) {
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
                self.record(&abbreviation, phrase, DEFINED);
            }
        }
    }

    /// Learns the initials of two or three consecutive words of a tool's name when
    /// `used(initials)` says the tool's own text uses them.
    pub(super) fn spelled_in_name(
        &mut self,
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
                    self.record(&initials.clone(), phrase, 1);
                }
            }
        }
    }

    /// The learnt abbreviations whose phrases the index holds (`known`).
    pub(super) fn finish(self, known: impl Fn(&str) -> bool) -> Acronyms {
        let mut map = FastMap::default();
        for (abbreviation, mut phrases) in self.candidates {
            phrases.retain(|(p, evidence)| {
                *evidence >= MIN_EVIDENCE
                    && p.iter().all(|t| known(t))
                    && !p.contains(&abbreviation)
            });
            phrases.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            phrases.truncate(MAX_PHRASES);
            if !phrases.is_empty() {
                let kept = phrases.into_iter().map(|(p, _)| p.into()).collect();
                map.insert(abbreviation, kept);
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
