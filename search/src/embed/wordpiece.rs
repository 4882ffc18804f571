//! The BERT uncased tokenizer: text to WordPiece ids, as the model was trained on.
//!
//! Cleaning (control characters dropped, any whitespace a space), every CJK ideograph
//! a word of its own, lowercase with accents stripped (NFD, combining marks dropped),
//! words split at punctuation, then each word cut greedily into the longest pieces the
//! vocabulary holds (`##` marks a piece that continues a word). A word that cannot be
//! cut, or longer than [`MAX_WORD_CHARS`], is `[UNK]`.
//!
//! Punctuation is ASCII punctuation plus any other character that is neither a letter,
//! a digit, a mark nor whitespace: close to the Unicode "P" categories BERT uses, with
//! the symbols (`©`, `°`) split off too, where BERT would keep them inside a word that
//! then reads `[UNK]` — rare in tool text, and neither form carries meaning.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// A word longer than this (in characters) is `[UNK]`, as in BERT.
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary and its special tokens.
pub(super) struct WordPiece {
    ids: HashMap<Box<str>, u32>,
    pub(super) cls: u32,
    pub(super) sep: u32,
    unk: u32,
}

impl WordPiece {
    /// From `vocab.txt`: one token a line, its id the line number.
    pub(super) fn from_vocab(text: &str) -> Result<WordPiece, String> {
        let mut ids = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let token = line.trim_end_matches('\r');
            if token.is_empty() {
                continue;
            }
            let id = u32::try_from(n).map_err(|_| "vocabulary too large".to_owned())?;
            ids.entry(token.into()).or_insert(id);
        }
        let special = |name: &str| {
            ids.get(name)
                .copied()
                .ok_or_else(|| format!("the vocabulary has no {name} token"))
        };
        Ok(WordPiece {
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
            unk: special("[UNK]")?,
            ids,
        })
    }

    /// Number of ids the vocabulary spans (the largest id plus one).
    pub(super) fn len(&self) -> usize {
        self.ids.values().max().map_or(0, |&m| m as usize + 1)
    }

    /// `[CLS]`, the text's pieces, `[SEP]`: at most `max` ids in all (the text is cut).
    pub(super) fn encode(&self, text: &str, max: usize) -> Vec<u32> {
        let mut out = vec![self.cls];
        let room = max.saturating_sub(2);
        let mut word = String::new();
        let mut piece = String::new();
        let mut flush = |word: &mut String, out: &mut Vec<u32>| {
            if !word.is_empty() && out.len() <= room {
                self.pieces(word, &mut piece, out);
            }
            word.clear();
        };
        for c in text.nfd() {
            if out.len() > room {
                break;
            }
            if c == '\0' || c == '\u{fffd}' || is_combining_mark(c) {
                continue;
            }
            if c.is_whitespace() {
                flush(&mut word, &mut out);
            } else if c.is_control() {
                continue;
            } else if is_cjk(c) || is_punctuation(c) {
                flush(&mut word, &mut out);
                word.push(c);
                flush(&mut word, &mut out);
            } else {
                word.extend(c.to_lowercase());
            }
        }
        flush(&mut word, &mut out);
        out.truncate(room + 1);
        out.push(self.sep);
        out
    }

    /// Greedy longest-match-first pieces of one word, or `[UNK]`.
    fn pieces(&self, word: &str, piece: &mut String, out: &mut Vec<u32>) {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        if chars.len() > MAX_WORD_CHARS {
            out.push(self.unk);
            return;
        }
        let mark = out.len();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while end > start {
                let from = chars[start].0;
                let to = chars.get(end).map_or(word.len(), |c| c.0);
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.push_str(&word[from..to]);
                if let Some(&id) = self.ids.get(piece.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => out.push(id),
                None => {
                    out.truncate(mark);
                    out.push(self.unk);
                    return;
                }
            }
            start = end;
        }
    }
}

/// CJK ideographs (the blocks BERT treats as words of their own).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || !(c.is_alphanumeric() || c.is_whitespace() || c.is_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> WordPiece {
        let tokens = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "list", "open", "pull", "request", "##s", "git",
            "##hub", "cafe", ",", "天", "气", "un", "##want", "##ed",
        ];
        WordPiece::from_vocab(&tokens.join("\n")).unwrap()
    }

    #[test]
    fn splits_into_the_longest_pieces_lowercase() {
        let v = vocab();
        // `-` is not in this vocabulary: [UNK].
        assert_eq!(
            v.encode("List open Pull-Requests GitHub", 64),
            vec![2, 4, 5, 6, 1, 7, 8, 9, 10, 3]
        );
    }

    #[test]
    fn accents_cjk_and_unknown_words() {
        let v = vocab();
        assert_eq!(v.encode("Café, 天气", 64), vec![2, 11, 12, 13, 14, 3]);
        assert_eq!(v.encode("unwanted xyz", 64), vec![2, 15, 16, 17, 1, 3]);
        assert_eq!(v.encode("", 64), vec![2, 3]);
    }

    #[test]
    fn cut_at_the_limit() {
        let v = vocab();
        let ids = v.encode(&"list ".repeat(1000), 8);
        assert_eq!(ids.len(), 8);
        assert_eq!((ids[0], ids[7]), (2, 3));
        // A huge word costs one [UNK], never a slow scan.
        assert_eq!(v.encode(&"a".repeat(10_000), 8), vec![2, 1, 3]);
    }

    #[test]
    fn a_vocabulary_without_special_tokens_is_an_error() {
        assert!(WordPiece::from_vocab("a\nb").is_err());
    }
}
