//! Shrinking plain text: head and tail joined by one marker line.

use super::json::shrink_json;
use super::*;

pub(super) fn marker(removed: usize) -> String {
    format!("[… {removed} tokens truncated …]")
}

pub(super) fn fallback_marker(total: usize, share: usize, enc: Encoding) -> String {
    let m = marker(total);
    if count(&m, enc) <= share {
        m
    } else {
        String::new()
    }
}

/// Shrinks `text` (of `total` tokens) to at most `share` tokens.
#[cfg(test)]
pub(super) fn shrink_text(text: &str, total: usize, share: usize, enc: Encoding) -> String {
    shrink_text_noted(text, total, share, enc).0
}

/// [`shrink_text`], also answering what was cut from JSON arrays (see
/// [`shrink_json`]); plain text carries its marker inline and has no notes.
pub(super) fn shrink_text_noted(
    text: &str,
    total: usize,
    share: usize,
    enc: Encoding,
) -> (String, Vec<String>) {
    let trimmed = text.trim_start();
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && let Ok(value) = serde_json::from_str::<Value>(text)
        && (value.is_object() || value.is_array())
    {
        if let Some(out) = shrink_json(&value, text, total, share, enc) {
            return out;
        }
        // Not even a note fits: the smallest JSON that still says so, or nothing.
        let (tiny, notes) = match &value {
            Value::Array(items) => ("[]", vec![format!("/: kept 0 of {} items", items.len())]),
            _ => ("{\"_truncated\":true}", Vec::new()),
        };
        return if count(tiny, enc) <= share {
            (tiny.to_owned(), notes)
        } else {
            (String::new(), notes)
        };
    }
    (shrink_plain(text, total, share, enc), Vec::new())
}

/// Head and tail joined by one marker line; verified to fit.
pub(super) fn shrink_plain(text: &str, total: usize, share: usize, enc: Encoding) -> String {
    let marker_cost = count(&marker(total), enc) + 2;
    let mut avail = share.saturating_sub(marker_cost);
    for _ in 0..8 {
        let head_target = avail / 2;
        let tail_target = avail - head_target;
        let head_end = head_cut(text, head_target, enc);
        let tail_start = tail_cut(text, tail_target, head_end, enc);
        let head = &text[..head_end];
        let tail = &text[tail_start..];
        let kept = count(head, enc) + count(tail, enc);
        let mut out = String::with_capacity(head.len() + tail.len() + 48);
        out.push_str(head);
        if !head.is_empty() && !head.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&marker(total.saturating_sub(kept)));
        out.push('\n');
        out.push_str(tail);
        if let Some(n) = count_till_limit(&out, enc, share) {
            let _ = n;
            return out;
        }
        // Joining changed the tokenization a little: ask for less.
        avail = avail * 9 / 10;
        if avail == 0 {
            break;
        }
    }
    fallback_marker(total, share, enc)
}

/// How far back from a token cut we look for a line break to snap to.
pub(super) fn snap_window(len: usize) -> usize {
    (len / 4).min(2000)
}

pub(super) fn floor_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

pub(super) fn ceil_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Byte offset after the first `target` tokens of `text` (on a token boundary, snapped
/// back to a line break when one is near).
pub(super) fn head_cut(text: &str, target: usize, enc: Encoding) -> usize {
    if target == 0 {
        return 0;
    }
    let tok = enc.tokenizer();
    let mut used = 0usize;
    let mut end = 0usize;
    let base = text.as_ptr() as usize;
    for piece in tok.split(text) {
        let start = piece.as_ptr() as usize - base;
        let left = target - used;
        // Long pieces (a line of base64, a run of one letter) are bounded before BPE.
        let probe = &piece[..floor_char(piece, left.saturating_mul(16).max(64))];
        match tok.bpe.count_till_limit(probe.as_bytes(), left) {
            Some(n) if probe.len() == piece.len() => {
                used += n;
                end = start + piece.len();
            }
            _ => {
                let tokens = tok.bpe.encode_via_backtracking(probe.as_bytes());
                let k = left.min(tokens.len());
                let bytes: usize = tokens[..k].iter().map(|&t| tok.bpe.token_len(t)).sum();
                end = start + floor_char(piece, bytes);
                break;
            }
        }
        if used >= target {
            break;
        }
    }
    let window = snap_window(end);
    if let Some(nl) = text[..end].rfind('\n')
        && end - (nl + 1) <= window
        && nl + 1 > 0
    {
        return nl + 1;
    }
    end
}

/// Byte offset where the last `target` tokens of `text` start (never before
/// `not_before`; snapped forward to just after a line break when one is near).
pub(super) fn tail_cut(text: &str, target: usize, not_before: usize, enc: Encoding) -> usize {
    if target == 0 {
        return text.len();
    }
    let tok = enc.tokenizer();
    let mut guess = target.saturating_mul(6).max(256);
    for _ in 0..40 {
        let start = ceil_char(text, text.len().saturating_sub(guess)).max(not_before);
        let window = &text[start..];
        let pieces: Vec<(usize, usize)> = {
            let base = window.as_ptr() as usize;
            tok.split(window)
                .map(|p| (p.as_ptr() as usize - base, tok.bpe.count(p.as_bytes())))
                .collect()
        };
        let sum: usize = pieces.iter().map(|p| p.1).sum();
        if sum < target && start > not_before && guess < text.len() {
            guess = guess.saturating_mul(2);
            continue;
        }
        // Drop pieces from the front until the rest fits.
        let mut rest = sum;
        let mut cut = window.len();
        for (idx, &(off, n)) in pieces.iter().enumerate() {
            if rest <= target {
                cut = off;
                break;
            }
            if rest - n < target {
                // Cut inside this piece: keep its last (target - (rest - n)) tokens.
                let end = pieces.get(idx + 1).map_or(window.len(), |p| p.0);
                let piece = &window[off..end];
                let keep = target - (rest - n);
                let tokens = tok.bpe.encode_via_backtracking(piece.as_bytes());
                let k = keep.min(tokens.len());
                let bytes: usize = tokens[tokens.len() - k..]
                    .iter()
                    .map(|&t| tok.bpe.token_len(t))
                    .sum();
                cut = off + ceil_char(piece, piece.len() - bytes.min(piece.len()));
                break;
            }
            rest -= n;
        }
        let abs = start + cut;
        let snap = snap_window(text.len() - abs);
        if let Some(nl) = text[abs..].find('\n')
            && nl < snap
        {
            return abs + nl + 1;
        }
        return abs;
    }
    text.len()
}
