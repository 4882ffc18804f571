//! A skill's files as resources: their URIs (`skill://<skill>/<relative path>`), MIME
//! types guessed from the extension, and reading one without ever leaving the skill's
//! directory.

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
pub fn is_hidden(name: &str) -> bool {
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
pub fn resolve(root: &Path, parts: &[String]) -> Option<PathBuf> {
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

/// A `resources/read` content entry for the file at `path`: `text` when it is UTF-8,
/// base64 `blob` otherwise. `Err` when it cannot be read or is larger than `max`.
pub fn read_content(path: &Path, uri: &str, max: u64) -> Result<Value, String> {
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if size > max {
        return Err(format!("the file is larger than {max} bytes"));
    }
    let bytes = super::scan::read_bounded(path, max)
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
    fn mime_types_by_extension() {
        assert_eq!(mime_type("SKILL.md"), "text/markdown");
        assert_eq!(mime_type("scripts/run.PY"), "text/x-python");
        assert_eq!(mime_type("assets/logo.png"), "image/png");
        assert_eq!(mime_type("assets/blob"), "application/octet-stream");
        assert_eq!(mime_type("a.dir/blob"), "application/octet-stream");
    }
}
