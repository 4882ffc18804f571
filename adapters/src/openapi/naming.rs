//! Tool names: operationIds sanitized to `[A-Za-z0-9_-]`, `method_path` when there is
//! none, shortened with a hash suffix when over the length budget, and duplicates told
//! apart by what differs between them (`createClusterRole_rbac_v1alpha1`), by a hash
//! only when no readable form fits; deterministic (the same spec gives the same names,
//! whatever the order of its paths). Also argument names, which some consumers
//! restrict the same way.

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

/// Why an operation's tool is not named after its operationId alone.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Renamed {
    /// How many operations share the operationId (or `method_path`).
    pub shared_by: usize,
    pub reason: String,
}

/// What [`assign`] gives: names for the operations (same order), the names cut to the
/// budget as `(full, used)`, and per operation why it was renamed, if it was.
pub(super) struct Names {
    pub names: Vec<String>,
    pub shortened: Vec<(String, String)>,
    pub renamed: Vec<Option<Renamed>>,
}

/// Whether a path segment names an API version: `v1`, `v1alpha1`, `v2beta3`, `v1.2`,
/// `2.0`.
fn is_version(seg: &str) -> bool {
    let b = seg.as_bytes();
    let v_form = b.len() >= 2
        && (b[0] == b'v' || b[0] == b'V')
        && b[1].is_ascii_digit()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'.');
    let dotted = b.first().is_some_and(u8::is_ascii_digit)
        && seg.contains('.')
        && b.iter().all(|c| c.is_ascii_digit() || *c == b'.');
    v_form || dotted
}

fn is_param(seg: &str) -> bool {
    seg.starts_with('{') && seg.ends_with('}')
}

/// `group_version` of a path shaped `…/<group>/<version>/…` (Kubernetes' `/apis/
/// rbac.authorization.k8s.io/v1alpha1/…`, a plain `/v2/…`): the group's first DNS
/// label (`full_group`: all of it), or the version alone after `api`/`apis`/nothing.
fn api_label(path: &str, full_group: bool) -> Option<String> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let at = segs.iter().position(|s| !is_param(s) && is_version(s))?;
    let version = sanitize(segs[at]);
    let group = at
        .checked_sub(1)
        .map(|i| segs[i])
        .filter(|g| {
            !is_param(g) && !g.eq_ignore_ascii_case("api") && !g.eq_ignore_ascii_case("apis")
        })
        .map(|g| match full_group {
            true => sanitize(g),
            false => sanitize(g.split('.').next().unwrap_or(g)),
        })
        .filter(|g| !g.is_empty());
    Some(match group {
        Some(g) => format!("{g}_{version}"),
        None => version,
    })
}

/// A path's segments as name words: `{id}` -> `by_id`, others sanitized.
fn path_words(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| match is_param(s) {
            true => format!("by_{}", sanitize(&s[1..s.len() - 1])),
            false => sanitize(s),
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// The words of each path that not every path of the group has, in path order.
fn differing_words(group: &[&Operation]) -> Vec<String> {
    let words: Vec<Vec<String>> = group.iter().map(|op| path_words(&op.path)).collect();
    words
        .iter()
        .map(|ws| {
            ws.iter()
                .filter(|w| !words.iter().all(|other| other.contains(w)))
                .cloned()
                .collect::<Vec<_>>()
                .join("_")
        })
        .collect()
}

fn join_label(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("_")
}

/// Readable label sets telling the operations of `group` (sharing one name) apart,
/// each with what it is made from, in order of preference: API group and version from
/// the path, the same with the whole group, the path segments that differ, those with
/// the method, those with the first tag. Only sets unique within the group are given;
/// at most one label of a set is empty (that operation keeps the plain name).
fn label_sets(group: &[&Operation]) -> Vec<(Vec<String>, &'static str)> {
    let unique = |ls: &[String]| {
        let mut seen = std::collections::HashSet::new();
        ls.iter().all(|l| seen.insert(l.as_str()))
    };
    let mut sets = Vec::new();
    for full in [false, true] {
        let ls: Option<Vec<String>> = group.iter().map(|op| api_label(&op.path, full)).collect();
        if let Some(ls) = ls {
            sets.push((ls, "the API group and version in its path"));
        }
    }
    let words = differing_words(group);
    let with_method: Vec<String> = group
        .iter()
        .zip(&words)
        .map(|(op, w)| join_label(&[&op.method.to_ascii_lowercase(), w]))
        .collect();
    let with_tag: Vec<String> = group
        .iter()
        .zip(&with_method)
        .map(|(op, w)| {
            let tag = op.tags.first().map(|t| sanitize(t)).unwrap_or_default();
            join_label(&[&tag, w])
        })
        .collect();
    sets.push((words, "what differs in its path"));
    sets.push((with_method, "its method and what differs in its path"));
    sets.push((with_tag, "its tag, method and what differs in its path"));
    sets.retain(|(ls, _)| unique(ls));
    sets
}

/// `name_label` within `max`: whole when it fits, else the name cut (keeping at least
/// half the budget) before the label; `None` when even that does not fit.
fn with_label(name: &str, label: &str, max: usize) -> Option<String> {
    let full = format!("{name}_{label}");
    if full.len() <= max {
        return Some(full);
    }
    let keep = max.checked_sub(label.len() + 1)?;
    if keep < max / 2 {
        return None;
    }
    let head = name[..keep.min(name.len())].trim_end_matches(['_', '-']);
    Some(format!("{head}_{label}"))
}

/// The hash-suffixed name of a duplicate no readable form fits: a hash of its own
/// method and path, so adding or moving operations elsewhere never renames it.
fn hashed(name: &str, op: &Operation, max: usize) -> String {
    let suffix = hex(&format!("{} {}", op.method, op.path), 6);
    let head = &name[..name.len().min(max.saturating_sub(7))];
    format!("{}_{suffix}", head.trim_end_matches(['_', '-']))
}

/// Names for `ops` of at most `max` characters. A name shared by several operations
/// (duplicate operationIds: one per API version in some specs) is told apart by what
/// differs between them, readably where that fits (see [`labels`]), else by a hash;
/// every such rename is reported. Deterministic: the same spec gives the same names,
/// whatever the order of its paths.
pub(super) fn assign(ops: &[Operation], max: usize) -> Names {
    let candidates: Vec<String> = ops.iter().map(candidate).collect();
    let mut shortened = Vec::new();
    let mut renamed: Vec<Option<Renamed>> = vec![None; ops.len()];
    let mut names: Vec<String> = candidates
        .iter()
        .map(|c| {
            let s = shorten(c, max);
            if &s != c {
                shortened.push((c.clone(), s.clone()));
            }
            s
        })
        .collect();
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        groups.entry(c.as_str()).or_default().push(i);
    }
    for (name, mut idx) in groups {
        if idx.len() < 2 {
            continue;
        }
        idx.sort_by(|a, b| (&ops[*a].path, &ops[*a].method).cmp(&(&ops[*b].path, &ops[*b].method)));
        let group: Vec<&Operation> = idx.iter().map(|&i| &ops[i]).collect();
        // The first readable set whose names all fit the budget.
        let readable = label_sets(&group).into_iter().find_map(|(ls, from)| {
            let named: Option<Vec<String>> = ls
                .iter()
                .map(|l| match l.is_empty() {
                    true => Some(shorten(name, max)),
                    false => with_label(name, l, max),
                })
                .collect();
            named.map(|n| (n, ls, from))
        });
        let shared_by = idx.len();
        match readable {
            Some((named, ls, from)) => {
                for ((&i, n), l) in idx.iter().zip(named).zip(ls) {
                    if l.is_empty() {
                        continue;
                    }
                    renamed[i] = Some(Renamed {
                        shared_by,
                        reason: format!(
                            "'{name}' names {shared_by} operations: this one ({} {}) is \
                             told apart by {from} ('{l}')",
                            ops[i].method, ops[i].path
                        ),
                    });
                    names[i] = n;
                }
            }
            None => {
                // The first in (path, method) order keeps the name.
                for &i in &idx[1..] {
                    names[i] = hashed(name, &ops[i], max);
                    renamed[i] = Some(Renamed {
                        shared_by,
                        reason: format!(
                            "'{name}' names {shared_by} operations and no readable name \
                             tells this one ({} {}) apart within {max} characters: a hash \
                             of its method and path is added",
                            ops[i].method, ops[i].path
                        ),
                    });
                }
            }
        }
    }
    // Last resort for collisions the new names created with other names: counters.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, n) in names.iter_mut().enumerate() {
        let count = seen.entry(n.clone()).or_insert(0);
        *count += 1;
        if *count > 1 {
            let suffix = format!("_{count}");
            let head = &n[..n.len().min(max - suffix.len())];
            let new = format!("{head}{suffix}");
            renamed[i] = Some(Renamed {
                shared_by: *count,
                reason: format!(
                    "'{n}' was already taken by another operation: this one ({} {}) is \
                     '{new}'",
                    ops[i].method, ops[i].path
                ),
            });
            *n = new;
        }
    }
    Names {
        names,
        shortened,
        renamed,
    }
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

    #[test]
    fn labels_from_paths() {
        for v in ["v1", "v1alpha1", "v2beta3", "V2", "v1.2", "2.0"] {
            assert!(is_version(v), "{v}");
        }
        for v in ["v", "vendors", "2", "{v1}", "version"] {
            assert!(!is_version(v), "{v}");
        }
        let path = "/apis/rbac.authorization.k8s.io/v1alpha1/clusterroles/{name}";
        assert_eq!(api_label(path, false).unwrap(), "rbac_v1alpha1");
        assert_eq!(
            api_label(path, true).unwrap(),
            "rbac_authorization_k8s_io_v1alpha1"
        );
        assert_eq!(api_label("/api/v1/pods", false).unwrap(), "v1");
        assert_eq!(api_label("/v2/pets", false).unwrap(), "v2");
        assert_eq!(api_label("/pets/{id}", false), None);
        assert_eq!(
            path_words("/owners/{owner}/pets"),
            ["owners", "by_owner", "pets"]
        );
        assert_eq!(
            with_label("createThing", "apps_v1", 64).unwrap(),
            "createThing_apps_v1"
        );
        assert_eq!(
            with_label(&"a".repeat(30), "v1", 20).unwrap(),
            format!("{}_v1", "a".repeat(17))
        );
        assert_eq!(with_label("abc", &"x".repeat(15), 16), None);
    }
}
