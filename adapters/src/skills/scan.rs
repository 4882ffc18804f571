//! Finding skills on disk: which directories are skills, their descriptions and their
//! files. Blocking file I/O: run it off the runtime (`spawn_blocking`).
//!
//! Everything is bounded ([`Limits`]): a huge or hostile tree costs at most the caps,
//! and what was left out is reported in [`Scan::problems`] (logged by the caller).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::files::{is_hidden, mime_type, read_inside};

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Optional metadata next to it.
pub const METADATA_FILE: &str = "skill.yaml";

/// Caps on what one upstream serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_skills: usize,
    pub max_files_per_skill: usize,
    pub max_total_files: usize,
    pub max_file_bytes: u64,
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_skills: 256,
            max_files_per_skill: 256,
            max_total_files: 4096,
            max_file_bytes: 4 * 1024 * 1024,
            max_depth: 8,
        }
    }
}

/// Longest description kept (they are listed to every client).
const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Largest `skill.yaml` parsed.
const MAX_METADATA_BYTES: u64 = 64 * 1024;

/// One file of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileEntry {
    /// The path inside the skill directory, `/`-separated.
    pub rel: String,
    pub size: u64,
    pub mime: &'static str,
}

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Skill {
    /// The directory's name.
    pub name: String,
    /// The skill directory, canonical (symlinks resolved): reads never leave it.
    pub dir: PathBuf,
    pub description: String,
    /// `skill.yaml`'s `name`, when it has one (shown as the title).
    pub title: Option<String>,
    /// Sorted by `rel`.
    pub files: Vec<FileEntry>,
}

/// The result of one scan of every configured path.
#[derive(Debug, Clone, Default)]
pub(super) struct Scan {
    pub skills: BTreeMap<String, Skill>,
    /// Paths that could not be read (the upstream's `last_error`).
    pub errors: Vec<String>,
    /// What was skipped or capped, and why.
    pub problems: Vec<String>,
    /// Every directory the scan looked into (the configured paths, the skills and
    /// their subdirectories within the caps): what is worth watching, and no more.
    pub dirs: Vec<PathBuf>,
}

/// Two scans serve the same when their skills, errors and problems are the same (the
/// directories looked into only matter to the watching).
impl PartialEq for Scan {
    fn eq(&self, other: &Self) -> bool {
        self.skills == other.skills
            && self.errors == other.errors
            && self.problems == other.problems
    }
}

/// Scans every path. Never fails: unreadable paths land in [`Scan::errors`].
pub(super) fn scan(paths: &[PathBuf], limits: &Limits) -> Scan {
    let mut out = Scan::default();
    let mut total_files = 0usize;
    for path in paths {
        out.dirs.push(path.clone());
        let candidates = match skill_dirs(path) {
            Ok(candidates) => candidates,
            Err(error) => {
                out.errors.push(format!(
                    "cannot read skills path {}: {error}",
                    path.display()
                ));
                continue;
            }
        };
        for dir in candidates {
            if out.skills.len() >= limits.max_skills {
                // Later paths are still read, so an unreadable one is still reported.
                out.problems.push(format!(
                    "more than {} skills: {} and later ones are not served",
                    limits.max_skills,
                    dir.display()
                ));
                break;
            }
            let mut acc = Acc {
                files: Vec::new(),
                total_files: &mut total_files,
                problems: &mut out.problems,
                dirs: &mut out.dirs,
            };
            match load_skill(&dir, limits, &mut acc) {
                Some(skill) if out.skills.contains_key(&skill.name) => out.problems.push(format!(
                    "skill '{}' at {} has the name of an earlier one; skipped",
                    skill.name,
                    dir.display()
                )),
                Some(skill) => {
                    out.skills.insert(skill.name.clone(), skill);
                }
                None => {}
            }
        }
    }
    out
}

/// The skill directories of one configured path: the path itself when it holds a
/// `SKILL.md`, otherwise its immediate subdirectories that do (sorted by name, so the
/// result does not depend on the directory's order).
fn skill_dirs(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.join(SKILL_FILE).is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(path)?
        .flatten()
        .filter(|entry| !is_hidden(&entry.file_name().to_string_lossy()))
        .map(|entry| entry.path())
        .filter(|dir| dir.join(SKILL_FILE).is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// A skill name: what the URI, the prompt and the tool are named by.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// What walking one skill collects.
struct Acc<'a> {
    files: Vec<FileEntry>,
    /// Files of every skill so far (for [`Limits::max_total_files`]).
    total_files: &'a mut usize,
    problems: &'a mut Vec<String>,
    dirs: &'a mut Vec<PathBuf>,
}

fn load_skill(dir: &Path, limits: &Limits, acc: &mut Acc<'_>) -> Option<Skill> {
    let problems = &mut *acc.problems;
    // The canonical directory is the root reads are checked against.
    let dir = match std::fs::canonicalize(dir) {
        Ok(dir) => dir,
        Err(error) => {
            problems.push(format!("cannot read skill {}: {error}", dir.display()));
            return None;
        }
    };
    let name = dir.file_name()?.to_string_lossy().into_owned();
    if !valid_name(&name) {
        problems.push(format!(
            "skill directory {} skipped: a skill's name may hold only letters, digits, '_', \
             '-' and '.' (at most 64, not starting with '.')",
            dir.display()
        ));
        return None;
    }
    // SKILL.md is served as the prompt: a link leading out of the skill would serve
    // whatever it points at.
    let Some(skill_md_path) = inside(&dir, SKILL_FILE) else {
        problems.push(format!(
            "skill {}: {SKILL_FILE} is a link leading out of the skill; skipped",
            dir.display()
        ));
        return None;
    };
    let skill_md = match read_inside(&dir, &skill_md_path, limits.max_file_bytes) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(reason) => {
            problems.push(format!(
                "skill {}: {SKILL_FILE} not read ({reason}); skipped",
                dir.display()
            ));
            return None;
        }
    };
    let metadata = read_metadata(&dir, problems);
    let description = metadata
        .description
        .or_else(|| frontmatter_description(&skill_md))
        .or_else(|| first_heading(&skill_md))
        .unwrap_or_else(|| format!("The skill {name}"));
    walk(&dir, &dir, 0, limits, acc, &name);
    let mut files = std::mem::take(&mut acc.files);
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Some(Skill {
        name,
        dir,
        description: clip(description.trim()),
        title: metadata.name,
        files,
    })
}

#[derive(Default)]
struct Metadata {
    description: Option<String>,
    name: Option<String>,
}

fn read_metadata(dir: &Path, problems: &mut Vec<String>) -> Metadata {
    let Some(path) = inside(dir, METADATA_FILE) else {
        return Metadata::default();
    };
    let bytes = match read_inside(dir, &path, MAX_METADATA_BYTES) {
        Ok(bytes) => bytes,
        Err(reason) => {
            problems.push(format!("{} not read ({reason}); ignored", path.display()));
            return Metadata::default();
        }
    };
    match serde_norway::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(map)) => {
            let text = |key: &str| {
                map.get(key)
                    .and_then(serde_json::Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            };
            Metadata {
                description: text("description"),
                name: text("name"),
            }
        }
        Ok(_) => Metadata::default(),
        Err(error) => {
            problems.push(format!(
                "{} is not valid YAML ({error}); ignored",
                path.display()
            ));
            Metadata::default()
        }
    }
}

/// The file `name` directly in the skill directory `dir` (canonical), when it is a
/// regular file that stays inside it once links are resolved.
pub(super) fn inside(dir: &Path, name: &str) -> Option<PathBuf> {
    super::files::resolve(dir, &[name.to_owned()])
}

/// `description:` of a YAML front matter block (`---` … `---`), the Agent Skills
/// convention, when SKILL.md starts with one.
fn frontmatter_description(markdown: &str) -> Option<String> {
    let rest = markdown.strip_prefix("---")?;
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    let end = rest
        .lines()
        .position(|line| line.trim_end() == "---")
        .map(|n| rest.lines().take(n).collect::<Vec<_>>().join("\n"))?;
    let value: serde_json::Value = serde_norway::from_str(&end).ok()?;
    value
        .get("description")?
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The text of the first Markdown ATX heading (`# Title`).
pub(super) fn first_heading(markdown: &str) -> Option<String> {
    markdown.lines().find_map(|line| {
        let line = line.trim_start();
        let text = line.trim_start_matches('#');
        let level = line.len() - text.len();
        ((1..=6).contains(&level) && text.starts_with([' ', '\t']))
            .then(|| text.trim().trim_end_matches('#').trim().to_owned())
            .filter(|t| !t.is_empty())
    })
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Collects the files under `dir` (depth-first, sorted per directory). Hidden entries
/// (`.git`, editors' swap files) are skipped; symlinked directories are not followed
/// (no cycles), symlinked files only when they stay inside the skill.
fn walk(root: &Path, dir: &Path, depth: usize, limits: &Limits, acc: &mut Acc<'_>, skill: &str) {
    if depth > limits.max_depth {
        acc.problems.push(format!(
            "skill '{skill}': {} is nested deeper than {} levels; not served",
            dir.display(),
            limits.max_depth
        ));
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        acc.problems
            .push(format!("skill '{skill}': cannot read {}", dir.display()));
        return;
    };
    acc.dirs.push(dir.to_path_buf());
    let mut entries: Vec<_> = entries
        .flatten()
        .filter(|e| !is_hidden(&e.file_name().to_string_lossy()))
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(root, &path, depth + 1, limits, acc, skill);
            continue;
        }
        let target = if kind.is_symlink() {
            match std::fs::canonicalize(&path) {
                Ok(target) if target.starts_with(root) && target.is_file() => target,
                _ => {
                    acc.problems.push(format!(
                        "skill '{skill}': {} is a link leading out of the skill (or to a \
                         directory); not served",
                        path.display()
                    ));
                    continue;
                }
            }
        } else if kind.is_file() {
            path.clone()
        } else {
            // A FIFO, socket or device is never served: reading one could wait for good.
            acc.problems.push(format!(
                "skill '{skill}': {} is not a regular file (a FIFO, socket or device); \
                 not served",
                path.display()
            ));
            continue;
        };
        let Ok(size) = std::fs::metadata(&target).map(|m| m.len()) else {
            continue;
        };
        if size > limits.max_file_bytes {
            acc.problems.push(format!(
                "skill '{skill}': {} is larger than {} bytes; not served",
                path.display(),
                limits.max_file_bytes
            ));
            continue;
        }
        if acc.files.len() >= limits.max_files_per_skill
            || *acc.total_files >= limits.max_total_files
        {
            acc.problems.push(format!(
                "skill '{skill}': more than {} files in the skill (or {} in all); {} and \
                 later files are not served",
                limits.max_files_per_skill,
                limits.max_total_files,
                path.display()
            ));
            return;
        }
        let Some(rel) = relative(root, &path) else {
            continue;
        };
        *acc.total_files += 1;
        acc.files.push(FileEntry {
            mime: mime_type(&rel),
            rel,
            size,
        });
    }
}

/// `path` relative to `root`, `/`-separated; `None` for a name that is not UTF-8
/// (it could not be written in a URI and read back as the same file).
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_and_front_matter() {
        assert_eq!(
            first_heading("intro\n## Make PDFs ##\n# later").as_deref(),
            Some("Make PDFs")
        );
        assert_eq!(first_heading("#hashtag\n####### seven"), None);
        assert_eq!(
            frontmatter_description("---\nname: x\ndescription: Fills forms\n---\n# T").as_deref(),
            Some("Fills forms")
        );
        assert_eq!(frontmatter_description("# no front matter"), None);
        assert_eq!(frontmatter_description("---\nunclosed: [\n"), None);
    }

    #[test]
    fn names_and_clipping() {
        assert!(valid_name("pdf-tools_2.0"));
        for bad in ["", ".hidden", "a b", "a/b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
        let long = "é".repeat(MAX_DESCRIPTION_CHARS + 5);
        assert_eq!(clip(&long).chars().count(), MAX_DESCRIPTION_CHARS + 1);
    }
}
