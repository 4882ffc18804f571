//! A skill's files as resources: their URIs (`skill://<skill>/<relative path>`), MIME
//! types guessed from the extension, and reading one without ever leaving the skill's
//! directory.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use base64::Engine;
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use serde_json::{Value, json};

/// The scheme of skill resources (upstream-local; the gateway prefixes it).
pub const SCHEME: &str = "skill://";

/// Characters escaped in a URI's path segment (RFC 3986 `pchar` keeps the rest).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Dot-files and dot-directories (`.git`, editors' swap files) are neither listed nor
/// read: they are tooling, not part of the skill, and change constantly.
pub(super) fn is_hidden(name: &str) -> bool {
    name.starts_with('.')
}

/// The URI of `rel` (a `/`-separated path inside the skill) in skill `skill`.
pub fn uri(skill: &str, rel: &str) -> String {
    let path: Vec<String> = rel
        .split('/')
        .map(|segment| utf8_percent_encode(segment, SEGMENT).to_string())
        .collect();
    format!("{SCHEME}{skill}/{}", path.join("/"))
}

/// Splits a skill URI into the skill's name and the relative path's components,
/// decoded. `None` for anything that is not a plain path inside one skill: another
/// scheme, a query or fragment, an empty, `.` or `..` segment, a backslash or NUL, a
/// segment that decodes to something holding `/`.
pub fn parse_uri(uri: &str) -> Option<(String, Vec<String>)> {
    let rest = uri.strip_prefix(SCHEME)?;
    if rest.contains(['?', '#']) {
        return None;
    }
    let (skill, path) = rest.split_once('/')?;
    if !super::scan::valid_name(skill) {
        return None;
    }
    let mut parts = Vec::new();
    for raw in path.split('/') {
        let segment = percent_decode_str(raw).decode_utf8().ok()?;
        if segment.is_empty()
            || segment == "."
            || segment == ".."
            || segment.contains(['/', '\\', '\0'])
            || is_hidden(&segment)
        {
            return None;
        }
        parts.push(segment.into_owned());
    }
    Some((skill.to_owned(), parts))
}

/// The file at `parts` inside `root` (a canonical directory), when it is a regular
/// file that stays inside `root` once every symlink is resolved.
pub(super) fn resolve(root: &Path, parts: &[String]) -> Option<PathBuf> {
    let mut path = root.to_path_buf();
    for part in parts {
        // Each part is one plain name: no root, prefix or parent component can slip in.
        let mut components = Path::new(part).components();
        match (components.next(), components.next()) {
            (Some(Component::Normal(_)), None) => path.push(part),
            _ => return None,
        }
    }
    let target = std::fs::canonicalize(&path).ok()?;
    (target.starts_with(root) && target.is_file()).then_some(target)
}

/// Reads the file at `path` (from [`resolve`]) when it is at most `max` bytes and the
/// file actually opened is inside `root`: a directory on the way swapped for a link
/// between [`resolve`] and the open cannot lead the read elsewhere.
pub(super) fn read_inside(root: &Path, path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    if !opened_inside(&file, root, path) {
        tracing::warn!(path = %path.display(), "a skill file changed into a link leading out of its skill while being opened; not read");
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

/// Whether the open `file` is inside `root`. Linux names an open file's real path
/// (`/proc/self/fd`); elsewhere on Unix the file at `path`, resolved again, must be
/// inside `root` and be the very file opened (device and inode).
fn opened_inside(file: &std::fs::File, root: &Path, path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let Ok(real) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            return real.starts_with(root);
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let again = std::fs::canonicalize(path);
        let (Ok(opened), Ok(again)) = (file.metadata(), again) else {
            return false;
        };
        let Ok(now) = std::fs::metadata(&again) else {
            return false;
        };
        again.starts_with(root) && (opened.dev(), opened.ino()) == (now.dev(), now.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = (file, root, path);
        true
    }
}

/// A `resources/read` content entry for the file at `path` inside `root`: `text` when
/// it is UTF-8, base64 `blob` otherwise. `Err` when it cannot be read or is larger
/// than `max`.
pub(super) fn read_content(root: &Path, path: &Path, uri: &str, max: u64) -> Result<Value, String> {
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if size > max {
        return Err(format!("the file is larger than {max} bytes"));
    }
    let bytes = read_inside(root, path, max)
        .ok_or_else(|| format!("the file could not be read, or grew past {max} bytes"))?;
    // The type of the name the client asked for (a link's target may be named
    // otherwise), as the listing gave it.
    let mime = mime_type(uri);
    Ok(match String::from_utf8(bytes) {
        Ok(text) => json!({"uri": uri, "mimeType": mime, "text": text}),
        Err(not_text) => json!({
            "uri": uri,
            "mimeType": mime,
            "blob": base64::engine::general_purpose::STANDARD.encode(not_text.as_bytes()),
        }),
    })
}

/// A MIME type from the file name's extension (`application/octet-stream` when
/// unknown).
pub fn mime_type(name: &str) -> &'static str {
    let file = name.rsplit('/').next().unwrap_or(name);
    let Some((_, ext)) = file.rsplit_once('.') else {
        return if file == "Makefile" || file == "Dockerfile" {
            "text/plain"
        } else {
            "application/octet-stream"
        };
    };
    match ext.to_ascii_lowercase().as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "text" | "log" | "ini" | "cfg" | "conf" => "text/plain",
        "yaml" | "yml" => "application/yaml",
        "json" => "application/json",
        "toml" => "application/toml",
        "xml" => "application/xml",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" | "cjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "py" => "text/x-python",
        "sh" | "bash" => "text/x-shellscript",
        "rb" => "text/x-ruby",
        "rs" => "text/x-rust",
        "go" => "text/x-go",
        "java" => "text/x-java",
        "c" | "h" => "text/x-c",
        "sql" => "application/sql",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/vnd.microsoft.icon",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "wasm" => "application/wasm",
        "ttf" => "font/ttf",
        "woff2" => "font/woff2",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_refuse_escapes() {
        let made = uri("pdf", "scripts/fill form.py");
        assert_eq!(made, "skill://pdf/scripts/fill%20form.py");
        assert_eq!(
            parse_uri(&made),
            Some(("pdf".into(), vec!["scripts".into(), "fill form.py".into()]))
        );
        for bad in [
            "skill://pdf/../other/SKILL.md",
            "skill://pdf/%2e%2e/x",
            "skill://pdf/a%2Fb",
            "skill://pdf//etc/passwd",
            "skill://pdf/a/./b",
            "skill://pdf/a%5Cb",
            "skill://pdf/x%00",
            "skill://pdf/.git/config",
            "skill://../x",
            "skill://pdf",
            "skill://pdf/",
            "skill://pdf/x?y",
            "file:///etc/passwd",
            "skill://pdf/%ff",
        ] {
            assert_eq!(parse_uri(bad), None, "{bad}");
        }
    }

    #[test]
    fn reads_stay_inside_the_root() {
        let base = std::env::temp_dir().join(format!("toolgate-files-{}", std::process::id()));
        let root = base.join("skill");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("in.txt"), "in").unwrap();
        std::fs::write(base.join("out.txt"), "out").unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let inside = resolve(&root, &["in.txt".into()]).unwrap();
        assert_eq!(read_inside(&root, &inside, 10).as_deref(), Some(&b"in"[..]));
        assert_eq!(read_inside(&root, &inside, 1), None, "over the cap");
        // A path that is not under the root (as if a directory on the way had been
        // swapped for a link after resolving) is never read.
        let outside = std::fs::canonicalize(base.join("out.txt")).unwrap();
        assert_eq!(read_inside(&root, &outside, 10), None);
        assert_eq!(resolve(&root, &["..".into(), "out.txt".into()]), None);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn mime_types_by_extension() {
        assert_eq!(mime_type("SKILL.md"), "text/markdown");
        assert_eq!(mime_type("scripts/run.PY"), "text/x-python");
        assert_eq!(mime_type("assets/logo.png"), "image/png");
        assert_eq!(mime_type("assets/blob"), "application/octet-stream");
        assert_eq!(mime_type("a.dir/blob"), "application/octet-stream");
    }
}
