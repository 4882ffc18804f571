//! Shrinking JSON text so that it stays valid JSON.

use super::text::floor_char;
use super::*;

/// Shrinks a JSON text to `share` tokens, staying valid JSON; `None` when no pruning
/// fits (the caller falls back to head and tail). Arrays keep their element type: what
/// was cut from them is said in the notes returned (`/items: kept 20 of 4812 items`),
/// for the result's `_meta` and a text block of their own, never inside the array.
pub(super) fn shrink_json(
    value: &Value,
    text: &str,
    total: usize,
    share: usize,
    enc: Encoding,
) -> Option<(String, Vec<String>)> {
    let pretty = text.trim().contains('\n');
    let bytes_per_token = (text.len() as f64 / total.max(1) as f64).clamp(1.0, 16.0);
    let mut bytes = (share as f64 * bytes_per_token * 0.9) as usize;
    let mut best: Option<(String, Vec<String>)> = None;
    for _ in 0..8 {
        let mut p = Pruner {
            cut: false,
            notes: Vec::new(),
        };
        let mut pruned = p.prune(value, bytes, 0, "");
        if p.cut {
            mark_root(&mut pruned, total, &mut p.notes);
        }
        let out = if pretty {
            serde_json::to_string_pretty(&pruned)
        } else {
            serde_json::to_string(&pruned)
        }
        .ok()?;
        match count_till_limit(&out, enc, share) {
            Some(n) => {
                let good = n * 10 >= share * 8;
                best = Some((out, p.notes));
                if good {
                    break;
                }
                // Well under: try a bit more.
                bytes = (bytes as f64 * (share as f64 / n.max(1) as f64) * 0.95) as usize;
            }
            None => {
                if best.is_some() {
                    break;
                }
                let n = count(&out, enc).max(1);
                bytes = (bytes as f64 * (share as f64 / n as f64) * 0.9) as usize;
            }
        }
        if bytes < 2 {
            break;
        }
    }
    best.or_else(|| {
        let (minimal, notes) = match value {
            Value::Array(items) => (
                serde_json::json!([]),
                vec![format!(
                    "/: kept 0 of {} items ({total} tokens)",
                    items.len()
                )],
            ),
            _ => (
                serde_json::json!({ "_truncated": format!("… {total} tokens truncated") }),
                Vec::new(),
            ),
        };
        let out = serde_json::to_string(&minimal).ok()?;
        count_till_limit(&out, enc, share).map(|_| (out, notes))
    })
}

/// Makes sure a cut shows at the root (a note, or a `_truncated` key in an object).
pub(super) fn mark_root(v: &mut Value, total: usize, notes: &mut Vec<String>) {
    match v {
        Value::Object(m) if !m.contains_key("_truncated") => {
            m.insert(
                "_truncated".into(),
                Value::String(format!("shortened from {total} tokens")),
            );
        }
        Value::Array(_) if !notes.iter().any(|n| n.starts_with("/:")) => {
            notes.push(format!("/: shortened from {total} tokens"));
        }
        _ => {}
    }
}

/// Compact serialized size of `v`, stopping once it passes `cap` (returns > cap then).
pub(super) fn size_capped(v: &Value, cap: usize, depth: usize) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => {
            s.len()
                + 2
                + s.bytes()
                    .filter(|b| *b == b'"' || *b == b'\\' || *b < 0x20)
                    .count()
        }
        Value::Array(a) => {
            if depth > MAX_JSON_DEPTH {
                return 64;
            }
            let mut n = 2;
            for item in a {
                n += size_capped(item, cap.saturating_sub(n), depth + 1) + 1;
                if n > cap {
                    return n;
                }
            }
            n
        }
        Value::Object(m) => {
            if depth > MAX_JSON_DEPTH {
                return 64;
            }
            let mut n = 2;
            for (k, item) in m {
                n += k.len() + 4 + size_capped(item, cap.saturating_sub(n), depth + 1);
                if n > cap {
                    return n;
                }
            }
            n
        }
    }
}

pub(super) struct Pruner {
    cut: bool,
    /// What was cut from arrays, by JSON pointer.
    notes: Vec<String>,
}

/// The most array notes kept from one text (the rest are counted in the last one).
const MAX_NOTES: usize = 50;

fn pointer_or_root(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

/// Bytes reserved for a note (`"… kept 20 of 4812 items"`, `"_truncated": …`).
pub(super) const NOTE: usize = 48;
/// The smallest share worth giving a large object member when shrinking.
pub(super) const MIN_MEMBER: usize = 256;

impl Pruner {
    /// A copy of `v` whose compact serialization is about `budget` bytes at most.
    fn prune(&mut self, v: &Value, budget: usize, depth: usize, path: &str) -> Value {
        match v {
            Value::String(s) => {
                let size = s.len() + 2;
                if size <= budget {
                    return v.clone();
                }
                self.cut = true;
                let keep = floor_char(s, budget.saturating_sub(NOTE));
                let dropped = s[keep..].chars().count();
                Value::String(format!("{}… [{} chars truncated]", &s[..keep], dropped))
            }
            Value::Array(a) => {
                if depth >= MAX_JSON_DEPTH {
                    self.cut = true;
                    return Value::String("… nested too deep".into());
                }
                let mut out = Vec::new();
                let mut used = 2usize;
                let room = budget.saturating_sub(NOTE);
                for item in a {
                    if used + 2 > room {
                        break;
                    }
                    let left = room - used;
                    let size = size_capped(item, left, depth + 1);
                    let item = if size <= left {
                        item.clone()
                    } else if left < 16 || !out.is_empty() && left < 64 {
                        break;
                    } else {
                        let at = format!("{path}/{}", out.len());
                        self.prune(item, left, depth + 1, &at)
                    };
                    let s = size_capped(&item, usize::MAX, depth + 1);
                    if used + s + 1 > room && !out.is_empty() {
                        break;
                    }
                    used += s + 1;
                    out.push(item);
                }
                if out.len() < a.len() {
                    self.cut = true;
                    if self.notes.len() < MAX_NOTES {
                        self.notes.push(format!(
                            "{}: kept {} of {} items",
                            pointer_or_root(path),
                            out.len(),
                            a.len()
                        ));
                    }
                }
                Value::Array(out)
            }
            Value::Object(m) => {
                if depth >= MAX_JSON_DEPTH {
                    self.cut = true;
                    return Value::String("… nested too deep".into());
                }
                let room = budget.saturating_sub(NOTE);
                // Water-fill by size: small members stay whole.
                let sizes: Vec<usize> = m
                    .iter()
                    .map(|(k, v)| k.len() + 4 + size_capped(v, room, depth + 1))
                    .collect();
                let mut shares = water_fill(&sizes, room.saturating_sub(2));
                // Many large members and little room: rather than shaving each to
                // nothing, the first ones (in key order) keep a useful share each.
                let large: Vec<usize> =
                    (0..sizes.len()).filter(|&i| sizes[i] > shares[i]).collect();
                if let Some(&first) = large.first()
                    && shares[first] < MIN_MEMBER
                {
                    let pool: usize = large.iter().map(|&i| shares[i]).sum();
                    let k = (pool / MIN_MEMBER).max(1);
                    for (n, &i) in large.iter().enumerate() {
                        shares[i] = if n < k { pool / k } else { 0 };
                    }
                }
                let mut out = Map::new();
                let mut kept = 0usize;
                for ((k, item), (&size, &share)) in m.iter().zip(sizes.iter().zip(&shares)) {
                    if size <= share {
                        out.insert(k.clone(), item.clone());
                        kept += 1;
                        continue;
                    }
                    let inner = share.saturating_sub(k.len() + 4);
                    if inner < 24 {
                        self.cut = true;
                        continue;
                    }
                    let at = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                    out.insert(k.clone(), self.prune(item, inner, depth + 1, &at));
                    kept += 1;
                }
                if kept < m.len() {
                    self.cut = true;
                    out.insert(
                        "_truncated".into(),
                        Value::String(format!("kept {} of {} keys", kept, m.len())),
                    );
                }
                Value::Object(out)
            }
            _ => v.clone(),
        }
    }
}
