//! A skill's files as resources: their URIs (`skill://<skill>/<relative path>`), MIME
//! types guessed from the extension, and reading one without ever leaving the skill's
//! directory, nor waiting on anything but a regular file (bounded in size and time).

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

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

/// The longest one skill file's read may take: a file on a stalled network or FUSE
/// mount fails its read instead of holding its caller.
pub(super) const READ_TIME: Duration = Duration::from_secs(5);

/// Bytes read at a time (the read's deadline is checked between them).
const CHUNK: usize = 64 * 1024;

/// Reads the file at `path` (from [`resolve`]) when it is a regular file of at most
/// `max` bytes, read within [`READ_TIME`], and the file actually opened is inside
/// `root`: a directory on the way swapped for a link between [`resolve`] and the open
/// cannot lead the read elsewhere, and a file swapped for a FIFO or a device cannot
/// block it. `Err` says why not.
pub(super) fn read_inside(root: &Path, path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let file = open_regular(path)?;
    if !opened_inside(&file, root, path) {
        tracing::warn!(path = %path.display(), "a skill file changed into a link leading out of its skill while being opened; not read");
        return Err("it changed into a link leading out of its skill while being opened".into());
    }
    read_bounded(file, max, READ_TIME)
}

/// Opens `path` for reading without ever waiting on it, and only when the file opened
/// is a regular file. `O_NONBLOCK`: opening a FIFO would otherwise wait for a writer
/// (for good), and a device could wait on its hardware; it changes nothing for a
/// regular file. `O_NOFOLLOW`: `path` is canonical (from [`resolve`]), so a last
/// component that is a link now was swapped in since — links inside a skill are
/// served, but through their resolved path. The type is read from the opened
/// descriptor (`fstat`), so nothing can be swapped in between the check and the read.
fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY);
    }
    let file = options.open(path).map_err(|error| {
        #[cfg(unix)]
        if error.raw_os_error() == Some(libc::ELOOP) {
            return "it changed into a link since the skill was scanned".to_owned();
        }
        error.to_string()
    })?;
    let kind = file.metadata().map_err(|e| e.to_string())?.file_type();
    if !kind.is_file() {
        return Err(format!("it is {}, not a regular file", kind_name(kind)));
    }
    Ok(file)
}

/// What a file that is not a regular one is, in words.
fn kind_name(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a link"
    } else {
        "a special file"
    }
}

/// Reads `file` to its end when that is at most `max` bytes and takes at most
/// `within` (checked between chunks: bounded by the size and the deadline).
fn read_bounded(mut file: impl Read, max: u64, within: Duration) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + within;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        if Instant::now() > deadline {
            return Err(format!("reading it took longer than {within:?}"));
        }
        match file.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => {
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() as u64 > max {
                    return Err(format!("it is larger than {max} bytes"));
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error.to_string()),
        }
    }
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
    let bytes = read_inside(root, path, max)?;
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
        assert_eq!(read_inside(&root, &inside, 10).as_deref(), Ok(&b"in"[..]));
        assert!(read_inside(&root, &inside, 1).is_err(), "over the cap");
        // A path that is not under the root (as if a directory on the way had been
        // swapped for a link after resolving) is never read.
        let outside = std::fs::canonicalize(base.join("out.txt")).unwrap();
        assert!(read_inside(&root, &outside, 10).is_err());
        assert_eq!(resolve(&root, &["..".into(), "out.txt".into()]), None);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// `read_inside` on `path` on a thread of its own: its answer, or a failure when
    /// it does not answer within 5 s (it blocked).
    fn read_promptly(root: &Path, path: &Path) -> Result<Vec<u8>, String> {
        let (root, path) = (root.to_path_buf(), path.to_path_buf());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_inside(&root, &path, 1024));
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the read answered within 5 s instead of blocking")
    }

    /// A skill file swapped for a FIFO after it was resolved (no writer will ever
    /// come): the read is refused at once, saying what the file is; so is a device,
    /// and a last component swapped for a link.
    #[cfg(unix)]
    #[test]
    fn fifos_devices_and_swapped_links_are_refused_at_once() {
        let base = std::env::temp_dir().join(format!("toolgate-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let root = std::fs::canonicalize(&base).unwrap();
        let fifo = root.join("notes.md");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
        let refused = read_promptly(&root, &fifo).unwrap_err();
        assert!(refused.contains("FIFO"), "{refused}");
        let uri = "skill://s/notes.md";
        let content = read_content(&root, &fifo, uri, 1024).unwrap_err();
        assert!(content.contains("not a regular file"), "{content}");

        let refused = read_promptly(Path::new("/dev"), Path::new("/dev/zero")).unwrap_err();
        assert!(refused.contains("device"), "{refused}");

        std::fs::write(root.join("real.md"), "real").unwrap();
        std::os::unix::fs::symlink(root.join("real.md"), root.join("swapped.md")).unwrap();
        let refused = read_promptly(&root, &root.join("swapped.md")).unwrap_err();
        assert!(refused.contains("link"), "{refused}");
        assert_eq!(
            read_promptly(&root, &root.join("real.md")).unwrap(),
            b"real"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn reads_are_bounded_in_size_and_time() {
        assert_eq!(read_bounded(&b"abc"[..], 3, READ_TIME).unwrap(), b"abc");
        let over = read_bounded(&b"abcd"[..], 3, READ_TIME).unwrap_err();
        assert!(over.contains("larger than 3 bytes"), "{over}");
        // An endless source (like a device that never ends) stops at the size bound.
        let endless = read_bounded(std::io::repeat(b'x'), 100_000, READ_TIME).unwrap_err();
        assert!(endless.contains("larger than"), "{endless}");
        // A slow source stops at the deadline.
        struct Slow;
        impl Read for Slow {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                std::thread::sleep(Duration::from_millis(30));
                buf[0] = b'x';
                Ok(1)
            }
        }
        let started = Instant::now();
        let slow = read_bounded(Slow, 1_000_000, Duration::from_millis(200)).unwrap_err();
        assert!(slow.contains("took longer"), "{slow}");
        assert!(started.elapsed() < Duration::from_secs(2));
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
