//! File parts of `multipart/form-data` bodies. A file argument is base64 text, or an
//! object naming the file too: `{data | data_base64, filename, content_type}` (`data`
//! is the content as text, `data_base64` as base64). APIs check a part's filename
//! extension and Content-Type (audio transcription, avatar upload), so neither is
//! left to chance: the Content-Type is the argument's, else the spec's declared one,
//! else one guessed from the filename or the content's first bytes; the filename is the
//! argument's, else the property's name with the extension of that type.

use base64::Engine;
use serde_json::{Value, json};

use super::model::PropEncoding;

/// Whether a property schema describes file content.
pub(super) fn is_file(schema: Option<&Value>) -> bool {
    schema.is_some_and(|s| {
        s.get("contentEncoding").and_then(Value::as_str) == Some("base64")
            || s.get("format").and_then(Value::as_str) == Some("binary")
    })
}

/// The input schema of a file argument: the plain form (base64 text) or the object form.
pub(super) fn arg_schema(file: &Value, declared: Option<&str>) -> Value {
    let mut plain = file.clone();
    let what = match plain.as_object_mut().and_then(|m| m.remove("description")) {
        Some(Value::String(d)) if !d.trim().is_empty() => format!("{} ", d.trim()),
        _ => String::new(),
    };
    let types = declared
        .map(|d| format!(" (the API expects {d})"))
        .unwrap_or_default();
    json!({
        "description": format!(
            "{what}A file{types}: base64 text, or an object with the content (data as \
             text, or data_base64) and optionally its filename and content_type"),
        "anyOf": [
            plain,
            {"type": "object", "properties": {
                "data": {"type": "string", "description": "The content as text"},
                "data_base64": {"type": "string", "contentEncoding": "base64",
                                "description": "The content, base64-encoded"},
                "filename": {"type": "string", "description": "The file's name, with its extension"},
                "content_type": {"type": "string", "description": "The file's media type"}},
             "oneOf": [{"required": ["data"]}, {"required": ["data_base64"]}],
             "additionalProperties": false}
        ]
    })
}

/// A multipart property's argument schema: file content (or a list of files) also
/// takes the object form with a filename and content type.
pub(super) fn prop_schema(schema: Value, encoding: Option<&PropEncoding>) -> Value {
    let ct = encoding.and_then(|e| e.content_type.as_deref());
    if is_file(Some(&schema)) {
        return arg_schema(&schema, declared(ct, Some(&schema)));
    }
    match schema.get("items") {
        Some(items) if is_file(Some(items)) => {
            let items = arg_schema(items, declared(ct, Some(items)));
            let mut schema = schema;
            schema["items"] = items;
            schema
        }
        _ => schema,
    }
}

/// The content type the spec declares for a file part: its encoding object's, else
/// the schema's `contentMediaType` (3.1).
pub(super) fn declared<'a>(
    encoding: Option<&'a str>,
    schema: Option<&'a Value>,
) -> Option<&'a str> {
    encoding.or_else(|| schema?.get("contentMediaType")?.as_str())
}

/// A file part, ready to frame.
#[derive(Debug, PartialEq)]
pub(super) struct FilePart {
    pub data: Vec<u8>,
    pub filename: String,
    pub content_type: String,
}

fn base64(k: &str, text: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("'{k}' is not valid base64: {e}"))
}

/// Reads the file argument `x` of property `k`; `declared` is the spec's content type
/// for the part (the encoding object's, or the schema's `contentMediaType`).
pub(super) fn read(k: &str, x: &Value, declared: Option<&str>) -> Result<FilePart, String> {
    let field = |f: &str| x.get(f).and_then(Value::as_str);
    let (data, filename, content_type) = match x {
        Value::String(text) => (base64(k, text)?, None, None),
        Value::Object(_) => {
            let data = match (field("data"), field("data_base64")) {
                (Some(text), None) => text.as_bytes().to_vec(),
                (None, Some(b)) => base64(k, b)?,
                _ => return Err(format!("'{k}' needs one of data or data_base64")),
            };
            (data, field("filename"), field("content_type"))
        }
        _ => return Err(format!("'{k}' must be base64 text or a file object")),
    };
    let content_type = content_type
        .map(str::to_owned)
        .or_else(|| concrete(declared, filename, &data))
        .or_else(|| filename.and_then(|f| mime_guess::from_path(f).first_raw().map(str::to_owned)))
        .or_else(|| sniff(&data).map(str::to_owned))
        .unwrap_or_else(|| "application/octet-stream".into());
    let filename = match filename {
        Some(f) => f.to_owned(),
        None => match extension(&content_type) {
            Some(ext) => format!("{k}.{ext}"),
            None => k.to_owned(),
        },
    };
    Ok(FilePart {
        data,
        filename,
        content_type,
    })
}

/// A concrete type out of a declared list (`image/png, image/jpeg`, `image/*`): the
/// one the filename or content shows when listed, else the first without a wildcard.
fn concrete(declared: Option<&str>, filename: Option<&str>, data: &[u8]) -> Option<String> {
    let listed: Vec<&str> = declared?
        .split(',')
        .map(|t| t.split(';').next().unwrap_or("").trim())
        .filter(|t| !t.is_empty() && !t.contains('*'))
        .collect();
    let shown = filename
        .and_then(|f| mime_guess::from_path(f).first_raw())
        .or_else(|| sniff(data));
    shown
        .and_then(|s| listed.iter().find(|t| t.eq_ignore_ascii_case(s)))
        .or(listed.first())
        .map(|t| (*t).to_owned())
}

/// The usual extension of a media type (a table of common ones first: the MIME
/// database lists extensions alphabetically, `audio/mpeg` first as `.m2a`). `None`
/// for opaque bytes, which have none worth adding.
fn extension(content_type: &str) -> Option<&'static str> {
    const COMMON: [(&str, &str); 36] = [
        ("audio/mpeg", "mp3"),
        ("audio/mp3", "mp3"),
        ("audio/wav", "wav"),
        ("audio/wave", "wav"),
        ("audio/x-wav", "wav"),
        ("audio/webm", "webm"),
        ("audio/ogg", "ogg"),
        ("audio/flac", "flac"),
        ("audio/x-flac", "flac"),
        ("audio/mp4", "m4a"),
        ("audio/m4a", "m4a"),
        ("audio/x-m4a", "m4a"),
        ("image/png", "png"),
        ("image/jpeg", "jpg"),
        ("image/jpg", "jpg"),
        ("image/gif", "gif"),
        ("image/webp", "webp"),
        ("image/svg+xml", "svg"),
        ("image/bmp", "bmp"),
        ("image/tiff", "tiff"),
        ("video/mp4", "mp4"),
        ("video/webm", "webm"),
        ("video/quicktime", "mov"),
        ("video/mpeg", "mpeg"),
        ("application/pdf", "pdf"),
        ("application/zip", "zip"),
        ("application/gzip", "gz"),
        ("application/json", "json"),
        ("application/jsonl", "jsonl"),
        ("application/xml", "xml"),
        ("text/xml", "xml"),
        ("text/plain", "txt"),
        ("text/csv", "csv"),
        ("text/html", "html"),
        ("text/markdown", "md"),
        ("application/x-yaml", "yaml"),
    ];
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence == "application/octet-stream" {
        return None;
    }
    COMMON
        .iter()
        .find(|(t, _)| *t == essence)
        .map(|(_, e)| *e)
        .or_else(|| mime_guess::get_mime_extensions_str(&essence).and_then(|e| e.first().copied()))
}

/// The type shown by a file's first bytes, for the common formats.
fn sniff(data: &[u8]) -> Option<&'static str> {
    let at = |i: usize, sig: &[u8]| data.get(i..i + sig.len()) == Some(sig);
    Some(if at(0, b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if at(0, b"\xff\xd8\xff") {
        "image/jpeg"
    } else if at(0, b"GIF8") {
        "image/gif"
    } else if at(0, b"%PDF-") {
        "application/pdf"
    } else if at(0, b"RIFF") && at(8, b"WAVE") {
        "audio/wav"
    } else if at(0, b"RIFF") && at(8, b"WEBP") {
        "image/webp"
    } else if at(0, b"ID3") || (data.len() > 1 && data[0] == 0xff && data[1] & 0xe0 == 0xe0) {
        "audio/mpeg"
    } else if at(0, b"OggS") {
        "audio/ogg"
    } else if at(0, b"fLaC") {
        "audio/flac"
    } else if at(4, b"ftyp") {
        "video/mp4"
    } else if at(0, b"PK\x03\x04") {
        "application/zip"
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_types_from_what_is_known() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        // declared type: its extension
        let p = read("file", &json!(b64(b"abc")), Some("audio/mpeg")).unwrap();
        assert_eq!(
            (p.filename.as_str(), p.content_type.as_str()),
            ("file.mp3", "audio/mpeg")
        );
        // the argument's name and type win
        let p = read(
            "file",
            &json!({"data": "a,b", "filename": "t.csv", "content_type": "text/csv"}),
            Some("image/png"),
        )
        .unwrap();
        assert_eq!(
            p,
            FilePart {
                data: b"a,b".to_vec(),
                filename: "t.csv".into(),
                content_type: "text/csv".into()
            }
        );
        // a list or wildcard: the filename's type when listed, else the content's
        let p = read(
            "f",
            &json!({"data_base64": b64(b"x"), "filename": "a.jpg"}),
            Some("image/png, image/jpeg"),
        )
        .unwrap();
        assert_eq!(p.content_type, "image/jpeg");
        let p = read(
            "avatar",
            &json!(b64(b"\x89PNG\r\n\x1a\nrest")),
            Some("image/*"),
        )
        .unwrap();
        assert_eq!(
            (p.filename.as_str(), p.content_type.as_str()),
            ("avatar.png", "image/png")
        );
        // nothing known: opaque bytes under the property's name
        let p = read("blob", &json!(b64(b"\x00\x01")), None).unwrap();
        assert_eq!(
            (p.filename.as_str(), p.content_type.as_str()),
            ("blob", "application/octet-stream")
        );
        assert!(read("f", &json!({"filename": "x"}), None).is_err());
        assert!(read("f", &json!("not base64!"), None).is_err());
    }
}
