//! Text as the index reads it: descriptions cleaned of markup, cut into words,
//! lowercased, stripped of stopwords and stemmed; the same for queries.

use crate::tables::STOPWORDS;

/// Description text beyond this many bytes is not indexed.
pub(crate) const MAX_DESCRIPTION_BYTES: usize = 16 * 1024;
/// Longest token kept, in bytes (longer ones are cut).
pub(crate) const MAX_TOKEN_BYTES: usize = 48;

/// `name` without a trailing `_` + 8 hex digits (with at least one digit) that a
/// shortening added.
pub(crate) fn strip_hash_suffix(name: &str) -> &str {
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

/// Cleans description text for indexing and display: HTML tags dropped, a few
/// entities decoded, Markdown link targets and bare URLs dropped.
pub(crate) fn clean_text(text: &str, out: &mut String) {
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
pub(crate) fn first_sentence(text: &str) -> &str {
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
pub(crate) fn cap_chars(text: &str, max: usize) -> String {
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

/// Lowercased, not a stopword, not a lone letter; then stemmed.
pub(crate) fn normalize<'a>(raw: &str, word: &'a mut String) -> Option<&'a str> {
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
pub(crate) fn is_cjk(c: char) -> bool {
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
pub(crate) fn split_words(text: &str, emit: &mut dyn FnMut(&str)) {
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
pub(crate) type Splitter = fn(&str, &mut dyn FnMut(&str));

/// The maximal runs of ASCII letters and digits in `text`, as byte ranges.
pub(crate) fn ascii_runs(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
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
pub(crate) fn mixed_case_words(text: &str, emit: &mut dyn FnMut(&str)) {
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

/// Whether `word` (lowercase, not stemmed) is one of `data/stopwords.txt`.
pub(crate) fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

fn has_vowel(s: &str) -> bool {
    s.bytes().any(|b| b"aeiouy".contains(&b))
}

/// A few deterministic suffix rules, applied to ASCII words only: plurals (`ies` -> `y`,
/// `sses`/`xes`/`ches`/`shes` -> drop `es`, `s` -> drop), then `ing`/`ed` (when a vowel
/// stays), then a final `e`, then a doubled final consonant (`stopp` -> `stop`).
pub(crate) fn stem(word: &mut String) {
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

/// `word` lowercased and stemmed, as the index stores it.
pub(crate) fn stemmed(word: &str) -> String {
    let mut w = word.to_lowercase();
    stem(&mut w);
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_HIT_DESCRIPTION;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = String::new();
        tokenize(text, &mut buf, &mut |t| out.push(t.to_owned()));
        out
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
}
