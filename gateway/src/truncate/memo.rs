//! Counting with memos.
//!
//! The pre-tokenizer cuts a text into pieces and BPE counts each piece on its own, so a
//! piece's count depends on its bytes alone. Large tool results repeat the same short
//! stretches over and over (`","name`, `":"`, ` the`), and both the pre-tokenizer (a
//! regex search per piece) and BPE (two allocations and a backtracking search per piece)
//! cost far more per byte than a hash lookup.
//!
//! [`PieceCounter::count`] therefore cuts the text itself into *segments* at places
//! where the pre-tokenizer always ends a piece (see [`segment_end`]), remembers the count
//! of every short segment it has met in the text, and runs the pre-tokenizer only on
//! segments it has not seen yet; BPE counts of short pieces are remembered the same way.
//! The sum is the tokenizer's own count: segments hold whole pieces, and the pieces of
//! a segment split alone are the pieces it holds within the text.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::Encoding;

/// Pieces and segments longer than this are counted every time: they seldom repeat,
/// and hashing them would cost more than it saves.
const MAX_MEMO_LEN: usize = 32;
/// A memo stops growing here (memory stays bounded on texts of unique pieces; what is
/// not in it is simply counted).
const MAX_MEMO_ENTRIES: usize = 1 << 12;
/// A memo is judged after this many look-ups …
const MEMO_TRIAL: usize = 1024;
/// … and bypassed from then on if fewer than one in this many found their key (a text
/// of unique pieces, such as base64 or hashes, would only pay for hashing).
const MEMO_MIN_HIT_RATIO: usize = 4;

/// Counts of short byte strings met in one text, of one [`Kind`] and encoding; a miss
/// looks in the counts this thread kept from earlier texts ([`known`]).
struct Memo<'t> {
    kind: Kind,
    encoding: Encoding,
    map: HashMap<&'t [u8], usize, BuildHasherDefault<PieceHasher>>,
    lookups: usize,
    hits: usize,
}

impl<'t> Memo<'t> {
    fn new(kind: Kind, encoding: Encoding) -> Self {
        Memo {
            kind,
            encoding,
            map: HashMap::default(),
            lookups: 0,
            hits: 0,
        }
    }

    /// The count of `key`: remembered, or computed by `count` (and remembered). A text
    /// whose keys do not repeat (bypassed) does not look across texts either.
    fn get_or(&mut self, key: &'t [u8], count: impl FnOnce() -> usize) -> usize {
        if key.len() > MAX_MEMO_LEN || !self.worth_it() {
            return count();
        }
        self.lookups += 1;
        if let Some(&n) = self.map.get(key) {
            self.hits += 1;
            return n;
        }
        let n = known(self.kind, self.encoding, key, count);
        if self.map.len() < MAX_MEMO_ENTRIES {
            self.map.insert(key, n);
        }
        n
    }

    /// Whether look-ups still pay: during the trial, or when enough of them hit. Once
    /// bypassed a memo stays so (no more look-ups are made).
    fn worth_it(&self) -> bool {
        self.lookups < MEMO_TRIAL || self.hits * MEMO_MIN_HIT_RATIO >= self.lookups
    }
}

/// Counts one text, remembering the counts of its short segments and pieces.
pub(super) struct PieceCounter<'t> {
    tok: &'static bpe_openai::Tokenizer,
    /// BPE counts of pieces.
    pieces: Memo<'t>,
    /// Token counts of segments (see [`segment_end`]).
    segments: Memo<'t>,
}

impl<'t> PieceCounter<'t> {
    pub(super) fn new(encoding: Encoding) -> Self {
        Self {
            tok: encoding.tokenizer(),
            pieces: Memo::new(Kind::Piece, encoding),
            segments: Memo::new(Kind::Segment, encoding),
        }
    }

    /// Tokens of `text`, segment by segment (the same sum as the tokenizer's `count`).
    pub(super) fn count(&mut self, text: &'t str) -> usize {
        let mut total = 0;
        let mut start = 0;
        while start < text.len() {
            if !self.segments.worth_it() {
                // Segments do not repeat here: split the rest in one go (`start` is a
                // piece boundary), sparing a search for the end of every segment.
                return total + text.get(start..).map_or(0, |rest| self.split_count(rest));
            }
            let end = segment_end(text.as_bytes(), start);
            // Segments end between two ASCII bytes: always a char boundary.
            total += text.get(start..end).map_or(0, |s| self.segment(s));
            start = end;
        }
        total
    }

    /// Tokens of one segment, remembered when it is short.
    fn segment(&mut self, segment: &'t str) -> usize {
        let Self {
            tok,
            pieces,
            segments,
        } = self;
        segments.get_or(segment.as_bytes(), || split_count(tok, pieces, segment))
    }

    /// Tokens of `text`, split by the pre-tokenizer.
    fn split_count(&mut self, text: &'t str) -> usize {
        split_count(self.tok, &mut self.pieces, text)
    }

    /// Tokens of `text` if there are at most `limit`; `None` otherwise, found out after
    /// about `limit` tokens. `progress` (counted from where it stands) ends on the last
    /// segment or piece counted in full: counting the rest of the text from there adds
    /// up to the count of the whole.
    pub(super) fn count_till_limit(
        &mut self,
        text: &'t str,
        limit: usize,
        progress: &mut Progress,
    ) -> Option<usize> {
        while progress.bytes < text.len() {
            let start = progress.bytes;
            let end = segment_end(text.as_bytes(), start);
            let segment = text.get(start..end)?;
            if segment.len() > MAX_MEMO_LEN {
                // A long segment (a line of base64) is tokenized only about `limit` far.
                self.pieces_till_limit(segment, start, limit, progress)?;
            } else {
                let n = self.segment(segment);
                if progress.tokens + n > limit {
                    return None;
                }
                progress.tokens += n;
            }
            progress.bytes = end;
        }
        Some(progress.tokens)
    }

    /// Counts the pieces of `segment` (at byte `offset` of its text) into `progress`
    /// while they stay within `limit`.
    fn pieces_till_limit(
        &mut self,
        segment: &'t str,
        offset: usize,
        limit: usize,
        progress: &mut Progress,
    ) -> Option<()> {
        let tok = self.tok;
        let base = segment.as_ptr() as usize;
        for piece in tok.split(segment) {
            let left = limit.checked_sub(progress.tokens)?;
            progress.tokens += self.piece_till_limit(piece, left)?;
            progress.bytes = offset + piece.as_ptr() as usize - base + piece.len();
        }
        Some(())
    }

    /// Tokens of one piece if at most `limit`. A long piece (a line of base64) is
    /// tokenized only about `limit` tokens far.
    fn piece_till_limit(&mut self, piece: &'t str, limit: usize) -> Option<usize> {
        if piece.len() > MAX_MEMO_LEN {
            return self.tok.bpe.count_till_limit(piece.as_bytes(), limit);
        }
        let tok = self.tok;
        let n = self
            .pieces
            .get_or(piece.as_bytes(), || tok.bpe.count(piece.as_bytes()));
        (n <= limit).then_some(n)
    }
}

/// Tokens of `text`, split by the pre-tokenizer, BPE counts of pieces remembered.
fn split_count<'t>(
    tok: &'static bpe_openai::Tokenizer,
    pieces: &mut Memo<'t>,
    text: &'t str,
) -> usize {
    tok.split(text)
        .map(|piece| pieces.get_or(piece.as_bytes(), || tok.bpe.count(piece.as_bytes())))
        .sum()
}

/// Short pieces and segments whose counts a worker thread keeps across texts (per
/// encoding): one API's results repeat the same keys and words call after call, and
/// the pre-tokenizer's regex search and BPE's allocations cost most of a small
/// result's count (bench/HISTORY.md, "Call overhead against the bare proxy", item 5).
/// Emptied when full: bounded memory, and nothing to evict.
const KNOWN_ENTRIES: usize = 1 << 12;

/// What a kept count is the count of.
#[derive(Clone, Copy)]
enum Kind {
    /// A piece's BPE count.
    Piece = 0,
    /// A segment's count (pre-tokenized, then BPE).
    Segment = 1,
}

/// Kept counts of one kind and encoding.
type KnownCounts = HashMap<Box<[u8]>, u32>;

thread_local! {
    /// By encoding, then [`Kind`]. Keyed with std's random hasher, not
    /// [`PieceHasher`]: the keys are untrusted text that outlives the call which
    /// brought it.
    static KNOWN: std::cell::RefCell<[[KnownCounts; 2]; 2]> = Default::default();
}

/// The count of `key` (at most [`MAX_MEMO_LEN`] bytes), kept on this thread, or
/// `count` (then kept).
fn known(kind: Kind, encoding: Encoding, key: &[u8], count: impl FnOnce() -> usize) -> usize {
    let by_encoding = match encoding {
        Encoding::O200kBase => 0,
        Encoding::Cl100kBase => 1,
    };
    // Looked up, then counted with the map released (counting a segment counts its
    // pieces, which look here too), then kept.
    let kept = KNOWN.try_with(|known| {
        let known = known.try_borrow().ok()?;
        known[by_encoding][kind as usize].get(key).copied()
    });
    if let Ok(Some(n)) = kept {
        return n as usize;
    }
    let n = count();
    let _ = KNOWN.try_with(|known| {
        if let Ok(mut known) = known.try_borrow_mut() {
            let map = &mut known[by_encoding][kind as usize];
            if map.len() >= KNOWN_ENTRIES {
                map.clear();
            }
            map.insert(key.into(), u32::try_from(n).unwrap_or(u32::MAX));
        }
    });
    n
}

/// Where the segment starting at `start` ends: after the first ASCII letter or digit
/// (at or after `start`) that is followed by an ASCII byte other than a letter, a digit
/// or `'`; at the end of the text when there is none.
///
/// The pre-tokenizers of o200k_base and cl100k_base always end a piece there: letter
/// pieces continue only with letters, marks (not ASCII) or a contraction (`'s`, `'ll`,
/// …), digit pieces only with digits, and no other piece holds a letter or a digit. So
/// no piece crosses the cut, and since the pre-tokenizer has no look-behind and the
/// cut follows a letter or digit (no `\s+$` or look-ahead match can end there), the
/// pieces of the segment split on its own are the same as within the whole text.
pub(super) fn segment_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while i + 1 < bytes.len() {
        let next = bytes[i + 1];
        if bytes[i].is_ascii_alphanumeric()
            && next.is_ascii()
            && !next.is_ascii_alphanumeric()
            && next != b'\''
        {
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

/// How far a [`PieceCounter::count_till_limit`] got: the tokens of `text[..bytes]`,
/// which ends on a piece boundary (so counting can resume there with the same pieces).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Progress {
    pub(super) bytes: usize,
    pub(super) tokens: usize,
}

/// A fast, non-cryptographic hash for short byte strings (the FxHash mixing step, a
/// word at a time). The memo holds only pieces of the text being counted, so there is
/// no untrusted key choice to defend against beyond a slower count.
#[derive(Default)]
pub(super) struct PieceHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl PieceHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for PieceHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}
