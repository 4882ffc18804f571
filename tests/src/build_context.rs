//! What `docker build .` sends: the files of a directory minus what its
//! `.dockerignore` excludes, with Docker's semantics (moby's `patternmatcher`), which
//! differ from `.gitignore`'s:
//!
//! - every pattern is relative to the context's root (`*.md` matches `README.md`, not
//!   `docs/x.md`; a leading `/` means the same as none);
//! - `*` and `?` stay within one path element, `**` spans any number of them;
//! - a pattern matching a directory excludes everything below it (`bench/` and
//!   `bench` both exclude `bench/src/main.rs`);
//! - `!pattern` is an exception that puts matching paths back, and the last pattern
//!   that matches a path decides.
//!
//! No crate implements these rules; globset (already in the tree for the gateway's
//! patterns) matches each pattern with `*` kept inside one element.

use std::path::Path;

use globset::{Glob, GlobBuilder, GlobMatcher};

/// One line of a `.dockerignore`.
struct Rule {
    /// The cleaned pattern, for the walk's pruning.
    pattern: String,
    matcher: GlobMatcher,
    /// `!pattern`: puts matching paths back into the context.
    exception: bool,
}

/// A parsed `.dockerignore`.
pub struct DockerIgnore {
    rules: Vec<Rule>,
}

impl DockerIgnore {
    /// Parses the file's text; an invalid pattern is an error naming its line (Docker
    /// refuses to build with one too).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (exception, pattern) = match line.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, line),
            };
            let pattern = clean(pattern);
            if pattern.is_empty() {
                continue;
            }
            let matcher = GlobBuilder::new(&pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map(|glob: Glob| glob.compile_matcher())
                .map_err(|e| format!(".dockerignore line {}: {e}", index + 1))?;
            rules.push(Rule {
                pattern,
                matcher,
                exception,
            });
        }
        Ok(Self { rules })
    }

    /// Reads `<root>/.dockerignore` (none: nothing is excluded).
    pub fn load(root: &Path) -> Result<Self, String> {
        match std::fs::read_to_string(root.join(".dockerignore")) {
            Ok(text) => Self::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::parse(""),
            Err(e) => Err(format!(".dockerignore: {e}")),
        }
    }

    /// Whether `path` (relative to the root, `/`-separated) is left out of the
    /// context: the last rule matching it or one of its parent directories decides.
    pub fn excludes(&self, path: &str) -> bool {
        let path = clean(path);
        let mut excluded = false;
        for rule in &self.rules {
            if self_or_parents(&path).any(|p| rule.matcher.is_match(p)) {
                excluded = !rule.exception;
            }
        }
        excluded
    }

    /// Whether an exception could put back something below the excluded directory
    /// `dir`: then the walk must go in (as Docker's does).
    fn may_reinclude_below(&self, dir: &str) -> bool {
        self.rules.iter().filter(|r| r.exception).any(|rule| {
            // The pattern's literal start, up to its first wildcard.
            let literal: String = rule
                .pattern
                .chars()
                .take_while(|c| !matches!(c, '*' | '?' | '[' | '\\'))
                .collect();
            let below = format!("{dir}/");
            literal.starts_with(&below) || below.starts_with(&literal)
        })
    }

    /// Every file in the context of `root`, relative and `/`-separated, sorted. The
    /// walk skips excluded directories no exception reaches into, and is bounded.
    pub fn context_files(&self, root: &Path) -> Result<Vec<String>, String> {
        const MAX_ENTRIES: usize = 500_000;
        let mut files = Vec::new();
        let mut pending = vec![String::new()];
        let mut seen = 0usize;
        while let Some(dir) = pending.pop() {
            let entries = std::fs::read_dir(root.join(&dir))
                .map_err(|e| format!("{}: {e}", root.join(&dir).display()))?;
            for entry in entries {
                seen += 1;
                if seen > MAX_ENTRIES {
                    return Err(format!("more than {MAX_ENTRIES} entries under {dir:?}"));
                }
                let entry = entry.map_err(|e| e.to_string())?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                };
                let kind = entry.file_type().map_err(|e| e.to_string())?;
                let excluded = self.excludes(&path);
                if kind.is_dir() {
                    if !excluded || self.may_reinclude_below(&path) {
                        pending.push(path);
                    }
                } else if !excluded {
                    files.push(path);
                }
            }
        }
        files.sort();
        Ok(files)
    }
}

/// Docker's cleaning of a pattern or path: no leading `/`, no trailing `/`, no `.`
/// elements, `..` applied.
fn clean(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// `a/b/c`, `a/b`, `a`.
fn self_or_parents(path: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(path), |p| p.rsplit_once('/').map(|(parent, _)| parent))
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ignore(text: &str) -> DockerIgnore {
        DockerIgnore::parse(text).unwrap()
    }

    #[test]
    fn patterns_are_relative_to_the_root() {
        let rules = ignore("*.md\n/target\n");
        assert!(rules.excludes("README.md"));
        assert!(
            !rules.excludes("docs/config.md"),
            "`*` stays in one element"
        );
        assert!(rules.excludes("target/release/toolgate"));
        assert!(!rules.excludes("gateway/target/x"), "not implicitly `**/`");
    }

    #[test]
    fn a_directory_pattern_excludes_what_is_below_it() {
        let rules = ignore("bench/\n");
        assert!(rules.excludes("bench"));
        assert!(rules.excludes("bench/src/main.rs"));
        assert!(!rules.excludes("benchmarks/x"));
    }

    #[test]
    fn double_star_spans_directories() {
        let rules = ignore("**/__pycache__/\n");
        assert!(rules.excludes("__pycache__/x.pyc"));
        assert!(rules.excludes("tests/py/__pycache__/x.pyc"));
        assert!(!rules.excludes("tests/py/x.py"));
    }

    #[test]
    fn the_last_matching_pattern_decides() {
        let rules = ignore("bench/\n!bench/Cargo.toml\n# a comment\n\n");
        assert!(!rules.excludes("bench/Cargo.toml"));
        assert!(rules.excludes("bench/src/main.rs"));
        assert!(rules.may_reinclude_below("bench"));
        assert!(!rules.may_reinclude_below("target"));
        let again = ignore("!bench/Cargo.toml\nbench/\n");
        assert!(again.excludes("bench/Cargo.toml"));
    }
}
