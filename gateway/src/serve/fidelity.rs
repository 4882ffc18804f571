//! Puts the upstreams' raw tool definitions back into `tools/list` results.
//!
//! rmcp 3.9 serializes tools through its typed `Tool`, which drops every field it does
//! not model (`execution`, vendor extensions, newer spec fields). Where rmcp still
//! answers (2026-07-28 sessionless requests, `toolgate stdio`), this layer rewrites
//! the outgoing messages: any JSON-RPC result
//! whose `result.tools` lists catalog names gets each entry replaced by the catalog's
//! raw definition. Everything else passes through byte for byte; a cheap substring test
//! keeps the cost off tool-call responses.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::Value;

use crate::catalog::Catalog;
use crate::gateway::Gateway;

mod splice;

const TOOLS_KEY: &[u8] = b"\"tools\":[";

/// Restores the raw definitions in an `/mcp` answer (the same rewrite serves
/// `toolgate stdio`).
pub async fn restore_raw_definitions(gateway: &Arc<Gateway>, response: Response) -> Response {
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if content_type.starts_with("application/json") {
        let (mut parts, body) = response.into_parts();
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(%error, "could not read an MCP response body");
                return Response::from_parts(parts, Body::empty());
            }
        };
        let bytes = rewrite_message(&gateway.catalog(), bytes);
        parts.headers.remove(http::header::CONTENT_LENGTH);
        Response::from_parts(parts, Body::from(bytes))
    } else if content_type.starts_with("text/event-stream") {
        let (parts, body) = response.into_parts();
        let catalog_source = gateway.clone();
        let stream = futures::stream::unfold(
            (body.into_data_stream(), BytesMut::new(), false),
            move |(mut inner, mut buffer, done)| {
                let gateway = catalog_source.clone();
                async move {
                    if done {
                        return None;
                    }
                    loop {
                        if let Some(end) = find_event_end(&buffer) {
                            let event = buffer.split_to(end).freeze();
                            let event = rewrite_event(&gateway.catalog(), event);
                            return Some((Ok::<Bytes, axum::Error>(event), (inner, buffer, false)));
                        }
                        match inner.next().await {
                            Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                            Some(Err(error)) => return Some((Err(error), (inner, buffer, true))),
                            None if buffer.is_empty() => return None,
                            None => {
                                let rest = buffer.split().freeze();
                                return Some((Ok(rest), (inner, buffer, true)));
                            }
                        }
                    }
                }
            },
        );
        Response::from_parts(parts, Body::from_stream(stream))
    } else {
        response
    }
}

/// The end (exclusive, including the blank line) of the first complete SSE event.
fn find_event_end(buffer: &[u8]) -> Option<usize> {
    buffer.windows(2).position(|w| w == b"\n\n").map(|p| p + 2)
}

/// Rewrites the `data:` lines of one SSE event.
fn rewrite_event(catalog: &Catalog, event: Bytes) -> Bytes {
    if !contains(&event, TOOLS_KEY) {
        return event;
    }
    // Bytes throughout: every piece is copied once, nothing re-validated as text.
    let mut out = BytesMut::with_capacity(event.len() * 2);
    for line in event.split_inclusive(|&b| b == b'\n') {
        match line.strip_prefix(b"data:") {
            Some(data) => {
                let (body, newline): (&[u8], &[u8]) = match data.strip_suffix(b"\n") {
                    Some(body) => (body, b"\n"),
                    None => (data, b""),
                };
                let body = body.strip_prefix(b" ").unwrap_or(body);
                let rewritten = rewrite_message(catalog, event.slice_ref(body));
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&rewritten);
                out.extend_from_slice(newline);
            }
            None => out.extend_from_slice(line),
        }
    }
    out.freeze()
}

/// Rewrites one JSON-RPC message (or batch); returns the input untouched when there is
/// nothing to restore.
pub fn rewrite_message(catalog: &Catalog, bytes: Bytes) -> Bytes {
    if !contains(&bytes, TOOLS_KEY) {
        return bytes;
    }
    if bytes.first() == Some(&b'{') {
        return match splice::rewrite(catalog, &bytes) {
            Some(out) => Bytes::from(out),
            None => bytes,
        };
    }
    // A batch (rare): the general path through `Value`.
    let Ok(mut message) = serde_json::from_slice::<Value>(&bytes) else {
        return bytes;
    };
    let changed = match &mut message {
        // Every message of a batch must be visited: no short-circuit.
        Value::Array(batch) => {
            batch
                .iter_mut()
                .map(|m| restore(catalog, m))
                .filter(|changed| *changed)
                .count()
                > 0
        }
        single => restore(catalog, single),
    };
    if !changed {
        return bytes;
    }
    match serde_json::to_vec(&message) {
        Ok(out) => Bytes::from(out),
        Err(_) => bytes,
    }
}

fn restore(catalog: &Catalog, message: &mut Value) -> bool {
    let Some(tools) = message
        .get_mut("result")
        .and_then(|r| r.get_mut("tools"))
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let mut changed = false;
    for tool in tools {
        let Some(entry) = tool
            .get("name")
            .and_then(Value::as_str)
            .and_then(|name| catalog.get(name))
        else {
            continue;
        };
        *tool = Value::Object(entry.definition.clone());
        changed = true;
    }
    changed
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Source;
    use crate::config::Namespace;
    use serde_json::json;
    use toolgate_adapters::ToolDef;

    fn catalog() -> Catalog {
        let raw = json!({"name": "echo", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}});
        let tools = [ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap()];
        Catalog::build(&[Source {
            upstream: "ev",
            namespace: Namespace::Prefix,
            tools: &tools,
        }])
        .0
    }

    #[test]
    fn restores_dropped_fields_in_json_and_sse() {
        let catalog = catalog();
        let typed = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "ev__echo", "inputSchema": {"type": "object"}}]}});
        let out = rewrite_message(&catalog, Bytes::from(typed.to_string()));
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            out["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
        assert_eq!(
            out["result"]["tools"][0]["_meta"]["toolgate/upstream"],
            "ev"
        );

        let event = format!("id: 0\ndata: {typed}\n\n");
        let out = rewrite_event(&catalog, Bytes::from(event));
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(text.starts_with("id: 0\ndata: {"), "{text}");
        assert!(text.ends_with("}\n\n"), "{text}");
        assert!(text.contains("taskSupport"), "{text}");
    }

    #[test]
    fn other_messages_pass_through_untouched() {
        let catalog = catalog();
        let call = Bytes::from_static(br#"{"jsonrpc":"2.0","id":2,"result":{"content":[]}}"#);
        assert_eq!(rewrite_message(&catalog, call.clone()), call);
        let nested = Bytes::from_static(br#"{"jsonrpc":"2.0","id":2,"result":{"structuredContent":{"tools":[{"name":"ev__echo"}]}}}"#);
        assert_eq!(rewrite_message(&catalog, nested.clone()), nested);
    }

    #[test]
    fn the_fast_path_writes_what_the_general_path_does() {
        let catalog = catalog();
        let typed = json!({"jsonrpc": "2.0", "id": "a\"b", "result": {
            "tools": [
                {"name": "tool_search", "inputSchema": {"type": "object"}},
                {"name": "ev__echo", "inputSchema": {"type": "object"}},
                {"name": "not_in_catalog", "description": "é \u{1F600}"}
            ],
            "nextCursor": "x"
        }});
        let fast = rewrite_message(&catalog, Bytes::from(typed.to_string()));
        let fast: Value = serde_json::from_slice(&fast).expect("valid JSON");
        let mut general = typed.clone();
        assert!(restore(&catalog, &mut general));
        assert_eq!(fast, general);
        assert_eq!(
            fast["result"]["tools"][1]["execution"]["taskSupport"],
            "optional"
        );
        // A batch takes the general path and gets the same.
        let batch = Value::Array(vec![
            typed.clone(),
            json!({"jsonrpc": "2.0", "id": 9, "result": {}}),
        ]);
        let out: Value =
            serde_json::from_slice(&rewrite_message(&catalog, Bytes::from(batch.to_string())))
                .unwrap();
        assert_eq!(out[0], general);
    }

    #[test]
    fn finds_event_boundaries() {
        assert_eq!(find_event_end(b"data: x\n\nmore"), Some(9));
        assert_eq!(find_event_end(b"data: x\n"), None);
    }
}
