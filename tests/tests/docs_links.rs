//! The documentation's links resolve: every relative link in `README.md`, the pages of
//! `docs/` (and below) and `bench/*.md` points to a file or directory that exists and,
//! where it carries a `#anchor` into a markdown file, to a heading of that file (as
//! GitHub names its anchors). Links inside code blocks and code spans are not links.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use toolgate_e2e::workspace_root;

/// The markdown files checked, relative to the workspace root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    // Bounded walk: the docs tree is a few directories deep.
    for _ in 0..1000 {
        let Some(dir) = dirs.pop() else { break };
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                files.push(path);
            }
        }
    }
    assert!(dirs.is_empty(), "docs/ is deeper than the walk's bound");
    for name in ["README.md", "HISTORY.md"] {
        let path = root.join("bench").join(name);
        if path.is_file() {
            files.push(path);
        }
    }
    files
}

/// The text of `line` with its code spans blanked out (a link inside one is code).
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if in_code {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The lines of `text` that are not inside a fenced code block, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(*m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => lines.push((number + 1, line)),
            _ => {}
        }
    }
    lines
}

/// Every link target on `line`: inline links and images `[text](target "title")`, and
/// reference definitions `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let trimmed = line.trim_start();
    if let Some(label) = trimmed.strip_prefix('[')
        && let Some((_, after)) = label.split_once(']')
        && let Some(definition) = after.strip_prefix(':')
        && let Some(target) = definition.split_whitespace().next()
    {
        targets.push(target.to_owned());
    }
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        // The target runs to the `)` that closes the link (parentheses may nest).
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let inner = after[..end].trim();
        let target = if let Some(angled) = inner.strip_prefix('<') {
            angled.split('>').next().unwrap_or_default()
        } else {
            inner.split_whitespace().next().unwrap_or_default()
        };
        if !target.is_empty() {
            targets.push(target.to_owned());
        }
        rest = &after[end.min(after.len())..];
    }
    targets
}

/// GitHub's anchor for a heading's text: lower case, everything but letters, digits,
/// spaces, `-` and `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's ATX headings, repeats numbered as GitHub does
/// (`x`, `x-1`, `x-2`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let heading = line[hashes..].trim().trim_end_matches('#').trim_end();
        let base = slug(heading);
        let count = seen.entry(base.clone()).or_insert(0);
        let anchor = if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        };
        *count += 1;
        anchors.insert(anchor);
    }
    anchors
}

/// `%20` and the like decoded (link targets are URLs).
fn percent_decoded(target: &str) -> String {
    let bytes = target.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(byte) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).expect("a UTF-8 link target")
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

#[test]
fn relative_links_in_the_docs_point_to_files_and_headings_that_exist() {
    let root = workspace_root();
    let mut checked = 0usize;
    let mut broken = Vec::new();
    for file in documents(&root) {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (number, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if is_external(&target) {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((path, anchor)) => (path, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let resolved = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent()
                        .expect("a file's directory")
                        .join(percent_decoded(path))
                };
                if !resolved.exists() {
                    broken.push(format!("{shown}:{number}: {target}: no such file"));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if resolved.extension().is_none_or(|ext| ext != "md") {
                    broken.push(format!(
                        "{shown}:{number}: {target}: an anchor into a file that is not markdown"
                    ));
                    continue;
                }
                let headings = anchors(&std::fs::read_to_string(&resolved).expect("readable"));
                if !headings.contains(&percent_decoded(anchor)) {
                    broken.push(format!(
                        "{shown}:{number}: {target}: no heading with that anchor (it has: {})",
                        headings.into_iter().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    // The README alone links every page of docs/: a parser that found nothing would
    // pass the check above without checking anything.
    assert!(checked >= 20, "only {checked} relative links found");
}

#[test]
fn anchors_are_named_as_github_names_them() {
    assert_eq!(slug("Background calls (REST)"), "background-calls-rest");
    assert_eq!(
        slug("Several replicas: shared state in Redis"),
        "several-replicas-shared-state-in-redis"
    );
    assert_eq!(
        slug("Search (`gateway/src/search/`)"),
        "search-gatewaysrcsearch"
    );
    assert_eq!(
        slug("Call overhead against the bare proxy (2026-11-27)"),
        "call-overhead-against-the-bare-proxy-2026-11-27"
    );
    let text = "# A\n## A\n```\n# not a heading\n```\n### A\n";
    assert_eq!(
        anchors(text),
        ["a", "a-1", "a-2"].map(str::to_owned).into_iter().collect()
    );
    assert_eq!(
        link_targets("see [x](docs/a.md#b), `[not](a link)` and ![i](img.png \"t\")"),
        ["docs/a.md#b", "img.png"]
    );
    assert_eq!(link_targets("[ref]: docs/c.md \"t\""), ["docs/c.md"]);
}
