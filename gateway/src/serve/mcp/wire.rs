//! The streamable HTTP transport's wire: reading one JSON-RPC message without building
//! a tree, the header checks every POST passes, and the answers (JSON-RPC results and
//! errors, `202 Accepted`, SSE frames).

use std::borrow::Cow;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::SUPPORTED_VERSIONS;
use super::error::McpError;

pub(crate) const JSON: &str = "application/json";
pub(crate) const EVENT_STREAM: &str = "text/event-stream";
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
pub(crate) const VERSION_HEADER: &str = "mcp-protocol-version";

/// One incoming JSON-RPC message, its parts as raw JSON slices of the body: the
/// `params` of a call are parsed once, by the method that reads them.
#[derive(Deserialize)]
pub(crate) struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

/// What a message is.
pub(crate) enum Kind<'a> {
    Request {
        id: &'a RawValue,
        method: &'a str,
    },
    Notification {
        method: &'a str,
    },
    /// The client's answer to a request the gateway sent it (sampling, elicitation…).
    Answer {
        id: &'a RawValue,
    },
    Invalid,
}

impl<'a> Envelope<'a> {
    pub(crate) fn parse(body: &'a [u8]) -> Result<Self, String> {
        match body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => serde_json::from_slice(body).map_err(|e| e.to_string()),
            // The caller adds what to send instead (stdio reads these too: "message",
            // not "body").
            Some(b'[') => Err("JSON-RPC batches are not supported by this protocol version".into()),
            _ => Err("the message is not a JSON object".into()),
        }
    }

    pub(crate) fn kind(&'a self) -> Kind<'a> {
        if self.jsonrpc.as_deref() != Some("2.0") {
            return Kind::Invalid;
        }
        match (&self.method, self.id) {
            (Some(method), Some(id)) if is_valid_id(id) => Kind::Request { id, method },
            (Some(method), None) => Kind::Notification { method },
            (None, Some(id)) if self.result.is_some() || self.error.is_some() => {
                Kind::Answer { id }
            }
            _ => Kind::Invalid,
        }
    }

    /// The id of an `initialize` request; `None` for any other message.
    pub(crate) fn initialize_id(&'a self) -> Option<&'a RawValue> {
        match self.kind() {
            Kind::Request {
                id,
                method: "initialize",
            } => Some(id),
            _ => None,
        }
    }

    /// `params` parsed as `T`; an absent `params` is parsed from `{}`.
    pub(crate) fn params<T: Deserialize<'a>>(&'a self) -> Result<T, String> {
        let text = self.params.map_or("{}", RawValue::get);
        serde_json::from_str(text).map_err(|e| format!("invalid params: {e}"))
    }
}

/// A request id is a string or a number.
fn is_valid_id(id: &RawValue) -> bool {
    matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}` with the result already JSON text.
pub(crate) fn result_message(id: &str, result: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.len() + id.len() + 32);
    out.extend_from_slice(&result_head(id));
    out.extend_from_slice(result.as_bytes());
    out.push(b'}');
    out
}

/// [`result_message`] as body parts, the result written by `write` (large shared
/// pieces sent without a copy, see [`json_parts_response`]); `copied` is about how
/// many bytes of it are copied (to size the buffer once).
pub(crate) fn result_message_parts(
    id: &str,
    copied: usize,
    write: impl FnOnce(&mut MessageParts),
) -> Vec<Bytes> {
    let mut pending = Vec::with_capacity(copied + id.len() + 32);
    pending.extend_from_slice(&result_head(id));
    let mut parts = MessageParts {
        pending,
        ..MessageParts::default()
    };
    write(&mut parts);
    parts.push_str("}");
    parts.into_parts()
}

/// `{"jsonrpc":"2.0","id":<id>,"result":`
fn result_head(id: &str) -> Vec<u8> {
    let mut head = Vec::with_capacity(id.len() + 32);
    head.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    head.extend_from_slice(id.as_bytes());
    head.extend_from_slice(b",\"result\":");
    head
}

/// A JSON-RPC error message for request `id` (raw JSON; `null` when unknown).
pub(crate) fn error_message(id: &str, code: i64, message: &str, data: Option<Value>) -> Vec<u8> {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    let mut out = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":").into_bytes();
    // Serializing a `Value` cannot fail.
    out.extend_from_slice(&serde_json::to_vec(&error).unwrap_or_default());
    out.push(b'}');
    out
}

/// A notification message.
pub(crate) fn notification(method: &str, params: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
        .unwrap_or_default()
}

/// A request the gateway sends to the client.
pub(crate) fn request(id: &str, method: &str, params: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .unwrap_or_default()
}

/// A `200` answer carrying one JSON message.
pub(crate) fn json_response(message: Vec<u8>) -> Response {
    json_with_status(StatusCode::OK, message)
}

pub(crate) fn json_with_status(status: StatusCode, message: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(message));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

/// A `200` answer carrying one JSON message made of `parts`, sent as they are: a
/// message assembled from text the catalog already holds (a `tools/list` of
/// thousands of definitions is megabytes) is never copied into one buffer.
pub(crate) fn json_parts_response(parts: Vec<Bytes>) -> Response {
    let mut response = Response::new(Body::new(Parts::new(parts)));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

/// Body parts made of copied small pieces and shared large ones: text at least
/// [`MessageParts::SHARE_FROM`] long is sent as the catalog holds it (no copy), the
/// rest is gathered into few parts (each part is a frame for the HTTP stack to
/// handle, which costs more than copying a small piece).
#[derive(Default)]
pub(crate) struct MessageParts {
    parts: Vec<Bytes>,
    pending: Vec<u8>,
}

impl MessageParts {
    const SHARE_FROM: usize = 16 * 1024;

    /// Whether `text` is copied into a part (else it is sent as it is held).
    pub(crate) fn copies(text: &str) -> bool {
        text.len() < Self::SHARE_FROM
    }

    pub(crate) fn push_str(&mut self, text: &str) {
        self.pending.extend_from_slice(text.as_bytes());
    }

    pub(crate) fn push_shared(&mut self, text: &std::sync::Arc<str>) {
        struct SharedText(std::sync::Arc<str>);
        impl AsRef<[u8]> for SharedText {
            fn as_ref(&self) -> &[u8] {
                self.0.as_bytes()
            }
        }
        if Self::copies(text) {
            return self.push_str(text);
        }
        self.flush();
        self.parts.push(Bytes::from_owner(SharedText(text.clone())));
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.parts
                .push(Bytes::from(std::mem::take(&mut self.pending)));
        }
    }

    pub(crate) fn into_parts(mut self) -> Vec<Bytes> {
        self.flush();
        self.parts
    }
}

/// A body of ready parts, its exact length known (so it goes with `Content-Length`).
struct Parts {
    parts: std::collections::VecDeque<Bytes>,
    remaining: u64,
}

impl Parts {
    fn new(parts: Vec<Bytes>) -> Parts {
        let remaining = parts.iter().map(|p| p.len() as u64).sum();
        Parts {
            parts: parts.into(),
            remaining,
        }
    }
}

impl http_body::Body for Parts {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let part = self.parts.pop_front();
        if let Some(part) = &part {
            self.remaining -= part.len() as u64;
        }
        std::task::Poll::Ready(part.map(|p| Ok(http_body::Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

/// `202 Accepted`: a notification or an answer was taken.
pub(crate) fn accepted() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

/// `200 OK` with no body: a session ended by DELETE.
pub(crate) fn ended() -> Response {
    Response::new(Body::empty())
}

/// One SSE event carrying `message` (the frame rmcp and every client reads: `data:`
/// lines only, the default event type being `message`).
pub(crate) fn sse_frame(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(message.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(message);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The answer headers of an SSE stream.
pub(crate) fn sse_response(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Whether the `Accept` header lists `media` (or `*/*`), parameters ignored; a range
/// weighted `q=0` means "not acceptable".
fn accepts(headers: &HeaderMap, media: &str) -> bool {
    accept_lists(headers, &[media, "*/*"])
}

/// Whether the `Accept` header lists one of `media` (exactly: a wildcard counts only
/// when given), parameters ignored, with a weight above 0.
pub(crate) fn accept_lists(headers: &HeaderMap, media: &[&str]) -> bool {
    let mut listed = false;
    for_each_accepted(headers, |essence| {
        listed |= media.iter().any(|m| essence.eq_ignore_ascii_case(m));
    });
    listed
}

/// Gives `each` the essence (`type/subtype`) of every media range the `Accept`
/// header lists with a weight above 0. Read in place, in one pass: this runs on
/// every request, twice over when it was read once per media type asked about.
fn for_each_accepted(headers: &HeaderMap, mut each: impl FnMut(&str)) {
    let values = headers.get_all(header::ACCEPT).iter();
    for range in values
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let mut parts = range.split(';');
        let essence = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        if !refused {
            each(essence);
        }
    }
}

/// Whether the `Accept` header takes both of a POST's answer forms, JSON and an SSE
/// stream (each listed, or `*/*`).
fn accepts_json_and_stream(headers: &HeaderMap) -> bool {
    let (mut json, mut stream) = (false, false);
    for_each_accepted(headers, |essence| {
        let any = essence == "*/*";
        json |= any || essence.eq_ignore_ascii_case(JSON);
        stream |= any || essence.eq_ignore_ascii_case(EVENT_STREAM);
    });
    json && stream
}

/// The checks of a POST: the client accepts both answer forms, sends JSON, and names
/// a protocol version this gateway speaks (when it names one).
pub(crate) fn refuse_post(headers: &HeaderMap) -> Option<Response> {
    if !accepts_json_and_stream(headers) {
        return Some(
            McpError::not_acceptable(
                "Not Acceptable: the client must accept both application/json and \
                 text/event-stream (send `Accept: application/json, text/event-stream`)",
            )
            .response(),
        );
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(JSON));
    if !is_json {
        return Some(
            McpError::unsupported_media_type(
                "Unsupported Media Type: send the JSON-RPC message with \
                 `Content-Type: application/json`",
            )
            .response(),
        );
    }
    refuse_version(headers)
}

/// A GET opens a stream: the client must accept one.
pub(crate) fn refuse_get(headers: &HeaderMap) -> Option<Response> {
    if !accepts(headers, EVENT_STREAM) {
        return Some(
            McpError::not_acceptable("Not Acceptable: the client must accept text/event-stream")
                .response(),
        );
    }
    refuse_version(headers)
}

pub(crate) fn refuse_version(headers: &HeaderMap) -> Option<Response> {
    let value = headers.get(VERSION_HEADER)?;
    let known = value
        .to_str()
        .is_ok_and(|v| SUPPORTED_VERSIONS.contains(&v.trim()));
    if known {
        return None;
    }
    Some(
        McpError::invalid_request(format!(
            "Bad Request: unsupported MCP-Protocol-Version {:?}; supported: {}",
            String::from_utf8_lossy(value.as_bytes()),
            SUPPORTED_VERSIONS.join(", ")
        ))
        .response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_messages() {
        let request = Envelope::parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
        assert!(matches!(request.kind(), Kind::Request { method: "ping", id } if id.get() == "7"));
        let note =
            Envelope::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(note.kind(), Kind::Notification { .. }));
        let answer = Envelope::parse(br#"{"jsonrpc":"2.0","id":"g-1","result":{}}"#).unwrap();
        assert!(matches!(answer.kind(), Kind::Answer { id } if id.get() == "\"g-1\""));
        let old = Envelope::parse(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#).unwrap();
        assert!(matches!(old.kind(), Kind::Invalid));
        let bad_id = Envelope::parse(br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#).unwrap();
        assert!(matches!(bad_id.kind(), Kind::Invalid));
        // The caller says what to send instead, once: these only say what is wrong.
        let batch = Envelope::parse(b"[{}]").err().unwrap_or_default();
        assert!(
            batch.contains("batches") && !batch.contains("send"),
            "{batch}"
        );
        let text = Envelope::parse(b"nope").err().unwrap_or_default();
        assert!(
            text.contains("not a JSON object") && !text.contains("body"),
            "{text}"
        );
        assert!(Envelope::parse(b"{").is_err());
    }

    #[test]
    fn accept_and_content_type() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(refuse_post(&headers).is_none());
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream;q=0"),
        );
        assert_eq!(
            refuse_post(&headers).unwrap().status(),
            StatusCode::NOT_ACCEPTABLE
        );
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert_eq!(
            refuse_post(&headers).unwrap().status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        // A wildcard weighted zero accepts nothing it would have covered.
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, */*;q=0"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        assert_eq!(
            refuse_post(&headers).unwrap().status(),
            StatusCode::NOT_ACCEPTABLE
        );
        assert!(refuse_get(&headers).is_some());
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("Text/Event-Stream"),
        );
        assert!(refuse_get(&headers).is_none());
        // Both forms are needed, from one value or several, in any case; a wildcard
        // covers both.
        for (accept, taken) in [
            (&["application/json"][..], false),
            (&["text/event-stream"][..], false),
            (&["application/json", "text/event-stream"][..], true),
            (&["TEXT/EVENT-STREAM;q=0.5, Application/JSON"][..], true),
            (&["*/*"][..], true),
            (&["text/event-stream", "*/*;q=0"][..], false),
        ] {
            headers.remove(header::ACCEPT);
            for value in accept {
                headers.append(header::ACCEPT, HeaderValue::from_static(value));
            }
            let refused = refuse_post(&headers).map(|r| r.status());
            let expected = (!taken).then_some(StatusCode::NOT_ACCEPTABLE);
            assert_eq!(refused, expected, "Accept: {accept:?}");
        }
    }
}
