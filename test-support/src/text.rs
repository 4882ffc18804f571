//! Deterministic payloads for the token budget's tests and benchmarks: prose, JSON
//! records, UUID lines and base64, all from one fixed-seed generator, so every run
//! (and every machine) sees the same bytes.

use base64::Engine;
use serde_json::{Value, json};

/// A small fixed-seed PRNG (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A UUID-shaped string (`8-4-4-4-12` hex digits, version 4).
    pub fn uuid(&mut self) -> String {
        let a = self.next();
        let b = self.next();
        format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }
}

/// The words of generated prose: what tool results say, in English.
pub const WORDS: &[&str] = &[
    "the",
    "gateway",
    "serves",
    "tools",
    "to",
    "agents",
    "and",
    "every",
    "result",
    "must",
    "fit",
    "a",
    "budget",
    "counted",
    "with",
    "real",
    "tokenizer",
    "because",
    "models",
    "read",
    "tokens",
    "not",
    "characters",
    "which",
    "is",
    "why",
    "we",
    "measure",
    "carefully,",
    "then",
];

/// Words with multi-byte characters (umlauts, accents, Japanese, an emoji) among
/// English ones: prose that exercises character and token boundaries.
pub const MIXED_WORDS: &[&str] = &[
    "the",
    "gateway",
    "serves",
    "tools",
    "to",
    "agents",
    "and",
    "every",
    "result",
    "must",
    "fit",
    "a",
    "budget",
    "counted",
    "with",
    "a",
    "real",
    "tokenizer,",
    "Überprüfung",
    "données",
    "日本語の文章",
    "emoji 🚀",
    "because",
    "models",
    "read",
    "tokens.",
];

/// The first `n` bytes of `s`, cut back to a character boundary.
pub fn slice(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// About `n` bytes (at most `n`) of words drawn from `words`, a line break every 13
/// words.
pub fn prose(words: &[&str], n: usize, seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut out = String::with_capacity(n + 32);
    let mut w = 0;
    while out.len() < n && !words.is_empty() {
        out.push_str(words[rng.below(words.len() as u64) as usize]);
        w += 1;
        out.push(if w % 13 == 0 { '\n' } else { ' ' });
    }
    slice(&out, n).to_owned()
}

/// A JSON array of list-API records (ids, numbers, labels, prose from `words`), about
/// `bytes` long.
pub fn json_records(bytes: usize, words: &[&str], seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut items = Vec::new();
    let mut size = 2;
    let mut i = 0u64;
    while size < bytes {
        let count = 20 + (rng.next() % 30) as usize;
        let body: Vec<&str> = (0..count)
            .map(|_| {
                let i = (rng.next() % (words.len() as u64).max(1)) as usize;
                words.get(i).copied().unwrap_or_default()
            })
            .collect();
        let item = json!({
            "id": format!("{:016x}-{:08x}", rng.next(), rng.next() as u32),
            "number": i,
            "name": format!("record-{i}"),
            "state": if rng.next().is_multiple_of(3) { "closed" } else { "open" },
            "score": (rng.next() % 10_000) as f64 / 100.0,
            "labels": ["bug", "p2", format!("team-{}", rng.next() % 9)],
            "body": body.join(" "),
        });
        size += item.to_string().len() + 1;
        items.push(item);
        i += 1;
    }
    Value::Array(items).to_string()
}

/// `bytes` random bytes, base64-encoded (one line, no breaks).
pub fn base64_of(bytes: usize, seed: u64) -> String {
    let mut rng = Rng(seed);
    let raw: Vec<u8> = (0..bytes).map(|_| rng.next() as u8).collect();
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// About `n` bytes (at most `n`) of `id=<uuid> parent=<uuid>` lines.
pub fn uuid_lines(n: usize, seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut out = String::new();
    while out.len() < n {
        out.push_str(&format!("id={} parent={}\n", rng.uuid(), rng.uuid()));
    }
    slice(&out, n).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_deterministic_and_sized() {
        assert_eq!(
            json_records(10_000, WORDS, 17),
            json_records(10_000, WORDS, 17)
        );
        assert_ne!(
            json_records(10_000, WORDS, 17),
            json_records(10_000, WORDS, 18)
        );
        let p = prose(MIXED_WORDS, 5_000, 1);
        assert!(p.len() <= 5_000 && p.len() > 4_900, "{}", p.len());
        assert_eq!(prose(WORDS, 0, 1), "");
        assert!(uuid_lines(1_000, 13).len() <= 1_000);
        assert_eq!(base64_of(3, 2).len(), 4);
    }

    #[test]
    fn the_benchmark_payload_stays_the_same() {
        // The bench's truncation rows are compared across runs: its payload
        // (`json_records(_, WORDS, 17)`) must not drift when this module changes.
        let text = json_records(65_536, WORDS, 17);
        assert_eq!(text.len(), 65_755);
        assert!(text.starts_with(r#"[{"id":""#), "{}", &text[..40]);
    }

    #[test]
    fn slice_stops_at_a_character_boundary() {
        assert_eq!(slice("日本", 4), "日");
        assert_eq!(slice("abc", 10), "abc");
    }
}
