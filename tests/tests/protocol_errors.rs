//! Malformed JSON-RPC, unknown methods, unknown tools and huge bodies get JSON-RPC
//! errors or 4xx answers — never a panic, a hang or a 5xx — and the gateway keeps
//! serving afterwards.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, RpcExchange, everything_stdio_upstream, first_text, heavy_lock,
    http, require, unique_marker,
};

/// A 4xx status, or a JSON-RPC error with one of `codes`.
fn assert_rejected(what: &str, ex: &RpcExchange, codes: &[i64]) {
    if (400..500).contains(&ex.status) {
        // Even an HTTP refusal carries a JSON-RPC error body a client can parse.
        assert_json_rpc_error_body(what, &ex.body);
        return;
    }
    assert!(
        ex.status < 500,
        "{what}: server error {}: {}",
        ex.status,
        ex.body
    );
    let code = ex
        .error()
        .and_then(|e| e["code"].as_i64())
        .unwrap_or_else(|| panic!("{what}: neither 4xx nor a JSON-RPC error: {ex:#?}"));
    assert!(
        codes.contains(&code),
        "{what}: JSON-RPC error code {code}, expected one of {codes:?}"
    );
}

/// A JSON-RPC error object (integer code, non-empty message) as the whole body.
fn assert_json_rpc_error_body(what: &str, body: &str) {
    let v: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("{what}: 4xx body is not JSON ({e}): {body:?}"));
    let err = &v["error"];
    assert!(
        err["code"].is_i64() && err["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: 4xx body is not a JSON-RPC error: {body}"
    );
    assert_eq!(v["jsonrpc"], "2.0", "{what}: {body}");
}

async fn gateway_still_serves(gw: &mut Gateway, session: &McpSession) {
    gw.assert_alive();
    let r = http()
        .get(gw.url("/healthz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("healthz");
    assert_eq!(r.status(), 200);
    let ex = session
        .call_tool("everything__echo", json!({"message": "still alive"}))
        .await
        .expect("echo");
    assert_eq!(first_text(ex.result()), "Echo: still alive");
}

async fn start(deps: &NodeDeps) -> (Gateway, McpSession) {
    let gw = Gateway::start(json!({
        "upstreams": {"everything": everything_stdio_upstream(deps, &unique_marker("errors"))}
    }))
    .await;
    let session = McpSession::connect(&gw.mcp_url())
        .await
        .expect("initialize");
    (gw, session)
}

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_is_rejected() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let (mut gw, session) = start(&deps).await;
    let bare = McpSession::bare(&gw.mcp_url());

    let cases: Vec<(&str, Vec<u8>, &[i64])> = vec![
        (
            "truncated JSON",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":".to_vec(),
            &[-32700],
        ),
        ("not JSON at all", b"\x00\xffhello".to_vec(), &[-32700]),
        ("empty body", Vec::new(), &[-32700, -32600]),
        (
            "JSON but not JSON-RPC",
            b"{\"hello\":\"world\"}".to_vec(),
            &[-32600, -32700],
        ),
        (
            "wrong jsonrpc version",
            br#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#.to_vec(),
            &[-32600, -32700],
        ),
        (
            "method is a number",
            br#"{"jsonrpc":"2.0","id":1,"method":42}"#.to_vec(),
            &[-32600, -32700],
        ),
        (
            "params is a string",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}"#.to_vec(),
            &[-32602, -32600, -32700],
        ),
        (
            "tools/call without name",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#.to_vec(),
            // rmcp answers a known method whose params do not parse with -32601.
            &[-32602, -32600, -32601],
        ),
    ];
    for (what, body, codes) in cases {
        for (who, s) in [("in session", &session), ("without session", &bare)] {
            let ex = s
                .send_body(body.clone(), Some(json!(1)), None, T)
                .await
                .unwrap_or_else(|e| panic!("{what} ({who}): no answer: {e}"));
            assert_rejected(&format!("{what} ({who})"), &ex, codes);
        }
    }
    gateway_still_serves(&mut gw, &session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_method_and_unknown_tool_are_json_rpc_errors() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let (mut gw, session) = start(&deps).await;

    let ex = session
        .request("no/such/method", json!({}))
        .await
        .expect("unknown method answered");
    assert_eq!(ex.status, 200, "unknown method: HTTP {}", ex.status);
    let err = ex
        .error()
        .unwrap_or_else(|| panic!("unknown method: no error: {:#?}", ex.exchange));
    assert_eq!(err["code"], -32601, "unknown method code: {err}");

    for name in [
        "everything__no-such-tool",
        "nosuchupstream__echo",
        "echo",
        "",
    ] {
        let ex = session
            .request("tools/call", json!({"name": name, "arguments": {}}))
            .await
            .expect("unknown tool answered");
        assert!(ex.status < 500, "unknown tool {name:?}: HTTP {}", ex.status);
        let err = ex.error().unwrap_or_else(|| {
            panic!(
                "unknown tool {name:?}: not a JSON-RPC error: {:#?}",
                ex.exchange
            )
        });
        let code = err["code"].as_i64().unwrap_or(0);
        assert!(
            [-32602, -32601].contains(&code),
            "unknown tool {name:?}: code {code}: {err}"
        );
        let msg = err["message"].as_str().unwrap_or_default();
        assert!(!msg.is_empty(), "unknown tool {name:?}: empty message");
        if !name.is_empty() {
            assert!(
                msg.contains(name),
                "unknown tool {name:?}: message does not name the tool: {msg:?}"
            );
        }
    }

    // A notification for an unknown method is accepted and ignored (no response).
    let status = session
        .notify("notifications/no-such-thing", Some(json!({})))
        .await
        .expect("unknown notification");
    assert!(status < 500, "unknown notification: HTTP {status}");
    gateway_still_serves(&mut gw, &session).await;
}

/// POSTs `body` over a raw TCP connection while reading the answer concurrently.
///
/// A server refusing a huge body answers early and closes without reading the rest,
/// which resets the connection under a client still writing; an HTTP client that
/// reads only after sending would see "connection reset" instead of the answer.
/// Returns the status and (up to 1 MB of) the body, or `None` when the connection
/// ended before any status line arrived.
async fn post_huge(port: u16, session: &McpSession, body: Vec<u8>) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let (mut rd, mut wr) = stream.into_split();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        session.protocol,
        body.len()
    );
    if let Some(id) = &session.session_id {
        head.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
    }
    head.push_str("\r\n");
    let writer = tokio::spawn(async move {
        if wr.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for chunk in body.chunks(64 * 1024) {
            if wr.write_all(chunk).await.is_err() {
                return; // the server stopped reading: expected
            }
        }
        let _ = wr.flush().await;
    });
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        while buf.len() < 1024 * 1024 {
            match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    writer.abort();
    assert!(read.is_ok(), "no answer to a 10 MB body within 60 s");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status_line = text.lines().next()?;
    let status: u16 = status_line.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_bodies_are_refused_without_harm() {
    let deps = require!(NodeDeps::find());
    let _serial = heavy_lock().await;
    let (mut gw, session) = start(&deps).await;

    // A 10 MB tools/call: valid JSON-RPC, absurd size.
    let message = "x".repeat(10 * 1024 * 1024);
    let call = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "everything__echo", "arguments": {"message": message}}
    }))
    .unwrap();
    // 10 MB of garbage.
    let garbage = vec![b'['; 10 * 1024 * 1024];
    for (what, body) in [("10 MB tools/call", call), ("10 MB garbage", garbage)] {
        // A reset that beats the answer to the client is a TCP race, not a refusal
        // we can check: retry a few times.
        let mut answer = None;
        for _ in 0..3 {
            answer = post_huge(gw.port, &session, body.clone()).await;
            if answer.is_some() {
                break;
            }
        }
        let (status, text) = answer
            .unwrap_or_else(|| panic!("{what}: connection closed without an answer, 3 times"));
        assert!(status < 500, "{what}: server error {status}: {text}");
        if (400..500).contains(&status) {
            println!("{what}: HTTP {status} {text}");
            assert_json_rpc_error_body(what, text.trim());
            continue;
        }
        // 2xx: must carry a JSON-RPC error (JSON body or an SSE data line).
        let error = std::iter::once(text.as_str())
            .chain(text.lines().filter_map(|l| l.strip_prefix("data:")))
            .filter_map(|t| serde_json::from_str::<Value>(t.trim()).ok())
            .find_map(|v| v.get("error").cloned());
        let error = error.unwrap_or_else(|| {
            panic!(
                "{what}: accepted: HTTP {status} {}",
                &text[..200.min(text.len())]
            )
        });
        println!("{what}: JSON-RPC error {error}");
    }
    gateway_still_serves(&mut gw, &session).await;
}
