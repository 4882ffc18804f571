//! A minimal MCP server whose one tool, `echo_meta`, answers with the `_meta` its
//! `tools/call` carried (as JSON text): the tracing test reads from it what the
//! gateway passed on. [`answer`] is the whole protocol; the `meta_echo` binary serves
//! it over stdio, a test over HTTP.

use serde_json::{Value, json};

/// The answer to one JSON-RPC message (`None` for a notification).
pub fn answer(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let result = match method {
        "initialize" => json!({
            "protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-11-25")),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "meta-echo", "version": "1.0.0"},
        }),
        "ping" => json!({}),
        "tools/list" => json!({"tools": [{
            "name": "echo_meta",
            "description": "Answers with the _meta of the call",
            "inputSchema": {"type": "object", "properties": {}},
        }]}),
        "tools/call" => {
            let meta = params.get("_meta").cloned().unwrap_or_else(|| json!({}));
            json!({"content": [{"type": "text", "text": meta.to_string()}]})
        }
        other => {
            return Some(json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": format!("method not found: {other}"),
            }}));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}
