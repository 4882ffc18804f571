//! Searching the index: a query read as groups of terms, scored by BM25F with the
//! name-coverage and server signals, fused with the embedding model's cosine when
//! the index has vectors.

use super::{FIELDS, SearchIndex, UPSTREAM};
use crate::synonyms::{self, synonyms};
use crate::text::{ascii_runs, cap_bytes, is_cjk, normalize, split_words};
use crate::{Hit, MAX_LIMIT, fuse};

/// Query text beyond this many bytes is ignored.
const MAX_QUERY_BYTES: usize = 2048;
/// Distinct query words beyond this many are ignored.
const MAX_QUERY_WORDS: usize = 32;
/// A word the index has never seen stands for at most this many near terms (typos).
const MAX_NEAR_TERMS: usize = 3;
/// What a near term weighs against the word itself (a guess at what was meant).
const TYPO_WEIGHT: f64 = 0.7;

const K1: f64 = 1.2;
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

impl SearchIndex {
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
pub(super) fn edit_distance(a: &[u8], b: &[u8], max: usize) -> Option<usize> {
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

/// The query as a possible exact tool name: trimmed, lowercased, one word.
fn exact_name(query: &str) -> Option<String> {
    let q = query.trim();
    if q.is_empty() || q.len() > 200 || q.chars().any(char::is_whitespace) {
        return None;
    }
    Some(q.to_lowercase())
}

/// A query's terms, cut and normalised as the index's text is, except that words the
/// synonym table knows are kept even when they are stopwords (`my` -> the
/// authenticated user).
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
