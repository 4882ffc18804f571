//! Tool names: operationIds sanitized to `[A-Za-z0-9_-]`, `method_path` when there is
//! none, shortened with a hash suffix when over the length budget, and duplicates
//! resolved deterministically (the same spec gives the same names, whatever the order
//! of its paths). Also argument names, which some consumers restrict the same way.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use super::model::Operation;

fn hex(input: &str, len: usize) -> String {
    let digest = Sha256::digest(input.as_bytes());
    digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..len]
        .to_owned()
}

/// Maps every character outside `[A-Za-z0-9_-]` to `_`, collapses runs of `_` (so a
/// name never contains the gateway's `__` separator) and trims `_`/`-` at both ends.
pub(super) fn sanitize(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    out.trim_matches(|c| c == '_' || c == '-').to_owned()
}

/// `name` cut to `max` characters with an 8-hex hash of the whole name at the end.
pub(super) fn shorten(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let keep = max.saturating_sub(9);
    let head = name[..keep].trim_end_matches(['_', '-']);
    format!("{head}_{}", hex(name, 8))
}

fn candidate(op: &Operation) -> String {
    let from_id = op.operation_id.as_deref().map(sanitize).unwrap_or_default();
    if !from_id.is_empty() {
        return from_id;
    }
    let s = sanitize(&format!("{}_{}", op.method.to_ascii_lowercase(), op.path));
    if s.is_empty() {
        op.method.to_ascii_lowercase()
    } else {
        s
    }
}

/// Names for `ops` (same order) of at most `max` characters, and the list of
/// `(original, shortened)` pairs for names that had to be cut.
pub(super) fn assign(ops: &[Operation], max: usize) -> (Vec<String>, Vec<(String, String)>) {
    let mut shortened = Vec::new();
    let mut names: Vec<String> = ops
        .iter()
        .map(|op| {
            let c = candidate(op);
            let s = shorten(&c, max);
            if s != c {
                shortened.push((c, s.clone()));
            }
            s
        })
        .collect();
    // Duplicates: the one first in (path, method) order keeps the name, the others get
    // a hash of their own method and path, so adding or moving operations elsewhere in
    // the spec never renames them.
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        groups.entry(n.clone()).or_default().push(i);
    }
    for (name, mut idx) in groups {
        if idx.len() < 2 {
            continue;
        }
        idx.sort_by(|a, b| (&ops[*a].path, &ops[*a].method).cmp(&(&ops[*b].path, &ops[*b].method)));
        for &i in &idx[1..] {
            let suffix = hex(&format!("{} {}", ops[i].method, ops[i].path), 6);
            let head = &name[..name.len().min(max.saturating_sub(7))];
            names[i] = format!("{}_{suffix}", head.trim_end_matches(['_', '-']));
        }
    }
    // Last resort for collisions the suffixes created (astronomically rare): counters.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for n in names.iter_mut() {
        let count = seen.entry(n.clone()).or_insert(0);
        *count += 1;
        if *count > 1 {
            let suffix = format!("_{count}");
            let head = &n[..n.len().min(max - suffix.len())];
            *n = format!("{head}{suffix}");
        }
    }
    (names, shortened)
}

/// An argument (property) name acceptable to every consumer: `[A-Za-z0-9_.-]{1,64}`.
/// `<` and `>` (Twilio's `StartTime<`) become `_lt` and `_gt` to stay readable.
pub(super) fn arg_name(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '.' | '-' => out.push(c),
            '<' => out.push_str("_lt"),
            '>' => out.push_str("_gt"),
            _ => out.push('_'),
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    shorten(&out, 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizing_and_shortening() {
        assert_eq!(sanitize("repos/get-content"), "repos_get-content");
        assert_eq!(sanitize("get_files_id#thumbnail"), "get_files_id_thumbnail");
        assert_eq!(sanitize("get /pets/{id}"), "get_pets_id");
        let long = "a".repeat(80);
        let s = shorten(&long, 64);
        assert_eq!(s.len(), 64);
        assert_eq!(s, shorten(&long, 64));
        assert_eq!(arg_name("StartTime<"), "StartTime_lt");
        assert_eq!(arg_name("a[b]"), "a_b_");
    }
}
