//! The stdio upstream against a small scripted MCP server (a real node process) that
//! does what the reference server never does: malformed lines, batches, paginated and
//! odd tool lists, server->client requests, JSON-RPC errors, a protocol version we do
//! not speak.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_adapters::mcp::{McpOptions, McpTransport, McpUpstream, StdioConfig, spawn};
use toolgate_adapters::{CallContext, Connection, JsonObject, ToolError, Upstream};

const SERVER: &str = r#"
const readline = require('readline');
const fs = require('fs');
// A server that fails its first starts: each start counts itself in a file and exits
// until SCRIPTED_FAIL_STARTS starts have failed.
if (process.env.SCRIPTED_FAIL_STARTS) {
  const file = process.env.SCRIPTED_COUNT_FILE;
  const starts = (fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8')) : 0) + 1;
  fs.writeFileSync(file, String(starts));
  if (starts <= Number(process.env.SCRIPTED_FAIL_STARTS)) process.exit(1);
}
process.stderr.write('scripted server starting\nsecond stderr line\n');
const rl = readline.createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const replies = {};
const cancelled = [];
const waiting = {};
let pings = 0;
let lists = 0;
const ok = (id, result) => send({ jsonrpc: '2.0', id, result });
const text = (t) => ({ content: [{ type: 'text', text: t }] });
rl.on('line', (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.method === undefined) {
    replies[msg.id] = msg;
    if (waiting[msg.id]) waiting[msg.id](msg);
    return;
  }
  switch (msg.method) {
    case 'notifications/cancelled':
      cancelled.push(msg.params);
      break;
    case 'initialize':
      // A slow start (a cold npx on a loaded machine): the answer comes late.
      setTimeout(() => {
      process.stdout.write('this is not json\n');
      process.stdout.write('42\n\n');
      ok(msg.id, {
        protocolVersion: process.env.SCRIPTED_VERSION || '2025-06-18',
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: 'scripted', version: '1' },
      });
      }, Number(process.env.SCRIPTED_INIT_DELAY_MS || 0));
      break;
    case 'notifications/initialized':
      send({ jsonrpc: '2.0', id: 'p1', method: 'ping' });
      send({ jsonrpc: '2.0', id: 'r1', method: 'roots/list' });
      send({ jsonrpc: '2.0', id: 's1', method: 'sampling/createMessage', params: {} });
      break;
    case 'ping':
      if (process.env.SCRIPTED_NO_PING)
        send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } });
      else ok(msg.id, {});
      pings += 1;
      break;
    case 'tools/list':
      lists += 1;
      if (!msg.params || !msg.params.cursor) {
        ok(msg.id, {
          tools: [
            { name: 'a', inputSchema: { type: 'object' }, 'x-extra': { keep: [1, 2] },
              execution: { taskSupport: 'optional' }, _meta: { 'vendor/x': true } },
            { nameless: true },
          ],
          nextCursor: 'page-2',
        });
      } else {
        ok(msg.id, { tools: ['replies', 'bad-args', 'fails', 'tool-error', 'batch', 'a', 'slow', 'cancelled', 'meta', 'ask', 'huge', 'counts', 'unterminated', 'broken', 'banner', 'wrong-id']
          .map((name) => ({ name, inputSchema: { type: 'object' } })) });
      }
      break;
    case 'tools/call': {
      const name = msg.params.name;
      const token = msg.params._meta && msg.params._meta.progressToken;
      if (name === 'replies') ok(msg.id, text(JSON.stringify(replies)));
      else if (name === 'bad-args')
        send({ jsonrpc: '2.0', id: msg.id, error: { code: -32602, message: 'b must be a number' } });
      else if (name === 'fails')
        send({ jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: 'backend exploded' } });
      else if (name === 'tool-error') ok(msg.id, { ...text('no such city'), isError: true });
      else if (name === 'batch')
        // Progress and the response in one batch: the progress must still arrive first.
        send([
          { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2 } },
          { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 2, total: 2, message: 'done' } },
          { jsonrpc: '2.0', id: msg.id, result: text('batched') },
        ]);
      else if (name === 'ask') {
        // A log line and a request (sampling/createMessage unless `method` says
        // otherwise) during the call, then the client's answer as the result.
        const askId = 'ask-' + msg.id;
        const args = msg.params.arguments || {};
        waiting[askId] = (reply) => ok(msg.id, text(JSON.stringify(reply)));
        setTimeout(() => {
          send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'asking ' + msg.id } });
          send({ jsonrpc: '2.0', id: askId, method: args.method || 'sampling/createMessage', params: {} });
        }, args.delayMs || 0);
      }
      else if (name === 'huge') {
        // A line past the client's bound, then the answer.
        const size = Number(process.env.SCRIPTED_HUGE_BYTES || 2 * 1024 * 1024);
        process.stdout.write('x'.repeat(size) + '\n', () => ok(msg.id, text('"after huge"')));
      }
      else if (name === 'unterminated')
        // The start of a line that never ends, and then silence.
        process.stdout.write('{"jsonrpc":"2.0","id":' + msg.id + ',"result":{"content":"' + 'y'.repeat(2 * 1024 * 1024));
      else if (name === 'broken')
        // Half a response (its end lost), then nothing for this call.
        process.stdout.write('{"jsonrpc":"2.0","id":' + msg.id + ',"result":{"conte\n');
      else if (name === 'banner') {
        // Plain text on stdout (against the spec, but common), then the answer.
        process.stdout.write('Server running on stdio\n');
        ok(msg.id, text('"after banner"'));
      }
      else if (name === 'wrong-id') ok(msg.id + 1000000, text('"lost"'));
      else if (name === 'slow') { /* never answers: the client must cancel or time out */ }
      else if (name === 'cancelled') ok(msg.id, text(JSON.stringify(cancelled)));
      else if (name === 'counts') ok(msg.id, text(JSON.stringify({ pings, lists })));
      else if (name === 'meta') ok(msg.id, text(JSON.stringify(msg.params._meta || null)));
      else ok(msg.id, text('a'));
      break;
    }
  }
});
"#;

/// Writes the script to a file of its own per test (tests run in parallel).
fn script(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolgate-scripted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("{test}.cjs"));
    std::fs::write(&path, SERVER).expect("write script");
    path
}

fn upstream(test: &str, version: Option<&str>) -> std::sync::Arc<McpUpstream> {
    upstream_with(test, version, &[])
}

fn upstream_with(
    test: &str,
    version: Option<&str>,
    extra_env: &[(&str, &str)],
) -> std::sync::Arc<McpUpstream> {
    upstream_with_options(
        test,
        version,
        extra_env,
        McpOptions {
            request_timeout: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_millis(200),
            ..McpOptions::default()
        },
    )
}

fn upstream_with_options(
    test: &str,
    version: Option<&str>,
    extra_env: &[(&str, &str)],
    options: McpOptions,
) -> std::sync::Arc<McpUpstream> {
    let mut env: std::collections::BTreeMap<String, toolgate_adapters::Secret> = extra_env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string().into()))
        .collect();
    env.insert("SCRIPTED_TOKEN".to_owned(), SECRET.into());
    if let Some(v) = version {
        env.insert("SCRIPTED_VERSION".to_owned(), v.into());
    }
    spawn(
        "scripted".into(),
        McpTransport::Stdio(StdioConfig {
            command: "node".into(),
            args: vec![script(test).display().to_string()],
            env,
            inherit_env: Default::default(),
            cwd: None,
            token_env: None,
            max_line_bytes: MAX_LINE,
        }),
        options,
    )
}

/// The scripted upstreams' stdout line bound (the `huge` and `unterminated` tools
/// write 2 MiB).
const MAX_LINE: usize = 1024 * 1024;

/// An env value that must never show up in logs.
const SECRET: &str = "hunter2-not-for-logs";

fn ctx() -> CallContext {
    CallContext::new(Duration::from_secs(10), "test")
}

/// node is needed; it comes with the same setup as the npm test servers.
fn have_node() -> bool {
    common::everything_entry().is_some()
}

async fn connected(up: &McpUpstream) {
    let mut rx = up.connection_changes();
    let r = tokio::time::timeout(
        Duration::from_secs(15),
        rx.wait_for(|c| *c == Connection::Connected),
    )
    .await;
    assert!(
        matches!(r, Ok(Ok(_))),
        "not connected: {:?}",
        up.last_error()
    );
}

#[tokio::test]
async fn survives_a_misbehaving_server_and_maps_its_errors() {
    common::init_tracing();
    if !have_node() {
        return;
    }
    tokio::time::timeout(Duration::from_secs(30), async {
        let up = upstream("misbehaving", None);
        connected(&up).await;
        assert_eq!(up.protocol_version().as_deref(), Some("2025-06-18"));

        // Both pages listed, the nameless entry and the duplicate 'a' skipped, every
        // field of 'a' kept.
        let names: Vec<String> = up.tools().iter().map(|t| t.name.clone()).collect();
        assert_eq!(
            names,
            [
                "a",
                "replies",
                "bad-args",
                "fails",
                "tool-error",
                "batch",
                "slow",
                "cancelled",
                "meta",
                "ask",
                "huge",
                "counts",
                "unterminated",
                "broken",
                "banner",
                "wrong-id"
            ]
        );
        let a = &up.tools()[0];
        assert_eq!(a.raw["x-extra"], json!({"keep": [1, 2]}));
        assert_eq!(a.raw["execution"], json!({"taskSupport": "optional"}));
        assert_eq!(a.raw["_meta"], json!({"vendor/x": true}));

        // Server->client requests were answered: ping, empty roots, method not found.
        let mut replies = Value::Null;
        for _ in 0..50 {
            let out = up
                .call("replies", JsonObject::new(), ctx())
                .await
                .expect("replies");
            replies = serde_json::from_str(out.object()["content"][0]["text"].as_str().unwrap())
                .expect("json");
            if replies.as_object().is_some_and(|m| m.len() == 3) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(replies["p1"]["result"], json!({}), "{replies}");
        assert_eq!(replies["r1"]["result"], json!({"roots": []}), "{replies}");
        assert_eq!(replies["s1"]["error"]["code"], -32601, "{replies}");

        let r = up.call("bad-args", JsonObject::new(), ctx()).await;
        match r {
            Err(ToolError::InvalidArgs(m)) => assert!(m.contains("b must be a number"), "{m}"),
            other => panic!("expected InvalidArgs, got {other:?}"),
        }
        let r = up.call("fails", JsonObject::new(), ctx()).await;
        match r {
            Err(ToolError::Failed(m)) => {
                assert!(
                    m.contains("backend exploded") && m.contains("-32000"),
                    "{m}"
                )
            }
            other => panic!("expected Failed, got {other:?}"),
        }
        let out = up
            .call("tool-error", JsonObject::new(), ctx())
            .await
            .expect("an isError result is a successful call");
        assert!(out.is_error());

        let (tx, mut rx) = toolgate_adapters::progress_channel();
        let mut c = ctx();
        c.progress = Some(tx);
        let out = up.call("batch", JsonObject::new(), c).await.expect("batch");
        assert_eq!(out.object()["content"][0]["text"], "batched");
        let first = rx.try_recv().expect("first progress before the result");
        let second = rx.try_recv().expect("second progress before the result");
        assert_eq!((first.progress, second.progress), (1.0, 2.0));
        assert_eq!(second.message.as_deref(), Some("done"));

        up.check(Duration::from_secs(5)).await.expect("check");
        up.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn refuses_a_protocol_version_it_does_not_speak() {
    common::init_tracing();
    if !have_node() {
        return;
    }
    tokio::time::timeout(Duration::from_secs(20), async {
        let up = upstream("version", Some("1999-01-01"));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(e) = up.last_error() {
                assert!(e.contains("1999-01-01"), "{e}");
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "no error reported");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_ne!(up.connection(), Connection::Connected);
        let r = up.call("a", JsonObject::new(), ctx()).await;
        assert!(matches!(r, Err(ToolError::Unavailable(_))), "{r:?}");
        up.shutdown().await;
        assert_eq!(up.connection(), Connection::Closed);
    })
    .await
    .expect("bounded");
}

fn text(out: &toolgate_adapters::CallOutput) -> Value {
    serde_json::from_str(out.object()["content"][0]["text"].as_str().expect("text")).expect("json")
}

#[tokio::test]
async fn cancellation_and_timeout_are_sent_upstream_and_progress_tokens_only_on_request() {
    common::init_tracing();
    if !have_node() {
        return;
    }
    tokio::time::timeout(Duration::from_secs(30), async {
        let up = upstream("cancel", None);
        connected(&up).await;

        // No progress sink: no progressToken. With one: a fresh token.
        let out = up
            .call("meta", JsonObject::new(), ctx())
            .await
            .expect("meta");
        assert_eq!(text(&out), Value::Null);
        let (tx, _rx) = toolgate_adapters::progress_channel();
        let mut c = ctx();
        c.progress = Some(tx);
        let out = up.call("meta", JsonObject::new(), c).await.expect("meta");
        assert!(text(&out)["progressToken"].is_string(), "{}", text(&out));

        // Cancelled by the caller.
        let c = ctx();
        let token = c.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            token.cancel();
        });
        let r = up.call("slow", JsonObject::new(), c).await;
        assert!(matches!(r, Err(ToolError::Cancelled(_))), "{r:?}");

        // Out of time.
        let r = up
            .call(
                "slow",
                JsonObject::new(),
                CallContext::new(Duration::from_millis(100), "t"),
            )
            .await;
        assert!(matches!(r, Err(ToolError::Timeout(_))), "{r:?}");

        // Both reached the server as notifications/cancelled naming the request.
        let mut seen = Value::Null;
        for _ in 0..50 {
            let out = up
                .call("cancelled", JsonObject::new(), ctx())
                .await
                .expect("cancelled");
            seen = text(&out);
            if seen.as_array().is_some_and(|a| a.len() == 2) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seen = seen.as_array().cloned().unwrap_or_default();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen.iter().all(|c| c["requestId"].is_number()), "{seen:?}");
        assert_ne!(seen[0]["requestId"], seen[1]["requestId"]);
        assert!(seen[0]["reason"].as_str().unwrap_or("").contains("cancel"));
        assert!(
            seen[1]["reason"]
                .as_str()
                .unwrap_or("")
                .contains("deadline")
        );
        up.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn server_requests_during_a_call_reach_that_calls_client_only() {
    common::init_tracing();
    if !have_node() {
        return;
    }
    tokio::time::timeout(Duration::from_secs(30), async {
        let up = upstream("bridge", None);
        connected(&up).await;

        // Callers of several tenants (the default until told otherwise): nothing over
        // stdio names the call, so even the only call in flight is not given the
        // request or the log line, and the server hears why.
        let client = std::sync::Arc::new(common::RecordingClient::default());
        let mut c = ctx();
        c.client = Some(client.clone());
        let out = up.call("ask", JsonObject::new(), c).await.expect("ask");
        assert_eq!(text(&out)["error"]["code"], -32601, "{}", text(&out));
        let reason = text(&out)["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(reason.contains("one tenant"), "{reason}");
        assert!(client.seen.lock().unwrap().is_empty());

        // One tenant behind every call: the only call in flight is the caller. Its
        // client gets the log line, then the request, in order, and its answer reaches
        // the server.
        up.set_one_tenant(true);
        let client = std::sync::Arc::new(common::RecordingClient::default());
        let mut c = ctx();
        c.client = Some(client.clone());
        let out = up.call("ask", JsonObject::new(), c).await.expect("ask");
        assert_eq!(
            text(&out)["result"]["content"]["text"],
            "hi from the client",
            "{}",
            text(&out)
        );
        let seen = client.seen.lock().unwrap().clone();
        let methods: Vec<&str> = seen.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(methods, ["notifications/message", "sampling/createMessage"]);

        // Roots describe the connection: over stdio nothing ties a roots/list to the
        // call in flight, so its client is not asked and the server gets none.
        let client = std::sync::Arc::new(common::RecordingClient::default());
        let mut c = ctx();
        c.client = Some(client.clone());
        let mut roots = JsonObject::new();
        roots.insert("method".into(), json!("roots/list"));
        let out = up.call("ask", roots, c).await.expect("ask roots");
        assert_eq!(text(&out)["result"]["roots"], json!([]), "{}", text(&out));
        let asked: Vec<String> = client
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _)| m.clone())
            .collect();
        assert_eq!(asked, ["notifications/message"]);

        // Two calls in flight on stdio: nothing ties the request to either, so neither
        // client is asked (no cross-client leak) and the server hears "method not found".
        let (a, b) = (
            std::sync::Arc::new(common::RecordingClient::default()),
            std::sync::Arc::new(common::RecordingClient::default()),
        );
        let mut ca = ctx();
        ca.client = Some(a.clone());
        let mut cb = ctx();
        cb.client = Some(b.clone());
        let delayed = || {
            let mut m = JsonObject::new();
            // Long enough that both calls are in flight when either asks, even on a
            // loaded machine (200 ms was seen to be too short once).
            m.insert("delayMs".into(), json!(2000));
            m
        };
        let (ra, rb) = tokio::join!(up.call("ask", delayed(), ca), up.call("ask", delayed(), cb));
        for r in [ra, rb] {
            let out = r.expect("ask");
            assert_eq!(text(&out)["error"]["code"], -32601, "{}", text(&out));
        }
        assert!(a.seen.lock().unwrap().is_empty());
        assert!(b.seen.lock().unwrap().is_empty());
        up.shutdown().await;
    })
    .await
    .expect("bounded");
}

/// Collects formatted log output in memory.
#[derive(Clone, Default)]
struct LogBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// A current-thread runtime (the default for tokio::test): every task of the upstream
// runs on this thread, under the thread-local subscriber set here.
#[tokio::test]
async fn logs_stderr_per_line_with_the_upstream_and_never_secrets_and_restarts_on_huge_lines() {
    if !have_node() {
        return;
    }
    let logs = LogBuffer::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("toolgate_adapters=trace")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    tokio::time::timeout(Duration::from_secs(30), async {
        let up = upstream("logs", None);
        connected(&up).await;
        let error = up
            .call("huge", JsonObject::new(), ctx())
            .await
            .expect_err("a line over the bound ends the connection");
        assert!(matches!(error, ToolError::Unavailable(_)), "{error:?}");
        connected(&up).await;
        let out = call_when_back(&up, "a").await;
        assert!(!out.is_error());
        up.shutdown().await;
    })
    .await
    .expect("bounded");

    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    let stderr_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("stream=\"stderr\""))
        .collect();
    assert!(
        stderr_lines
            .iter()
            .any(|l| l.contains("scripted server starting") && l.contains("upstream=scripted")),
        "{text}"
    );
    assert!(
        stderr_lines
            .iter()
            .any(|l| l.contains("second stderr line")),
        "one event per line: {text}"
    );
    assert!(text.contains("max_line_bytes"), "{text}");
    assert!(!text.contains(SECRET), "a secret was logged: {text}");
}

#[tokio::test]
async fn check_pings_and_falls_back_to_tools_list_without_ping() {
    common::init_tracing();
    if !have_node() {
        return;
    }
    tokio::time::timeout(Duration::from_secs(30), async {
        for (no_ping, env) in [(false, vec![]), (true, vec![("SCRIPTED_NO_PING", "1")])] {
            let up = upstream_with(&format!("check-{no_ping}"), None, &env);
            connected(&up).await;
            let before = text(
                &up.call("counts", JsonObject::new(), ctx())
                    .await
                    .expect("counts"),
            );
            up.check(Duration::from_secs(5)).await.expect("check");
            let after = text(
                &up.call("counts", JsonObject::new(), ctx())
                    .await
                    .expect("counts"),
            );
            assert_eq!(after["pings"], before["pings"].as_i64().unwrap() + 1);
            let extra_lists = after["lists"].as_i64().unwrap() - before["lists"].as_i64().unwrap();
            assert_eq!(extra_lists, i64::from(no_ping), "{before} -> {after}");
            up.shutdown().await;
        }
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn a_stdio_servers_initialize_may_take_the_startup_window() {
    common::init_tracing();
    if !have_node() {
        return;
    }
    tokio::time::timeout(Duration::from_secs(40), async {
        // The answer to initialize takes 2.5 s, longer than any other request may.
        let slow = [("SCRIPTED_INIT_DELAY_MS", "2500")];
        let options = |startup_timeout| McpOptions {
            request_timeout: Duration::from_secs(1),
            startup_timeout,
            ..McpOptions::default()
        };
        let up = upstream_with_options("slow-start", None, &slow, options(Duration::from_secs(20)));
        connected(&up).await;
        assert!(
            up.tools().iter().any(|t| t.name == "ask"),
            "listed after the slow start"
        );
        up.shutdown().await;

        // Without the window the same start times out, again and again.
        let up = upstream_with_options("no-window", None, &slow, options(Duration::ZERO));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let error = loop {
            if let Some(e) = up.last_error() {
                break e;
            }
            assert!(tokio::time::Instant::now() < deadline, "no error reported");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(error.contains("initialize"), "{error}");
        assert_ne!(up.connection(), Connection::Connected);
        up.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn a_failed_first_start_is_retried_like_a_crash() {
    common::init_tracing();
    if !have_node() {
        return;
    }
    tokio::time::timeout(Duration::from_secs(40), async {
        let count = script("fail-first").with_extension("count");
        let _ = std::fs::remove_file(&count);
        let count_path = count.display().to_string();
        let env = [
            ("SCRIPTED_FAIL_STARTS", "3"),
            ("SCRIPTED_COUNT_FILE", count_path.as_str()),
        ];
        // The production backoff: 250 ms doubling, at most 1 s apart while starting.
        let up = upstream_with_options("fail-first", None, &env, McpOptions::default());
        connected(&up).await;
        let starts = std::fs::read_to_string(&count).expect("count file");
        assert_eq!(
            starts.trim(),
            "4",
            "three failed starts, then the fourth connected"
        );
        assert!(up.tools().iter().any(|t| t.name == "ask"), "listed");
        up.shutdown().await;
    })
    .await
    .expect("bounded");
}

/// Calls `tool` until the upstream answers again after a restart (bounded).
async fn call_when_back(up: &McpUpstream, tool: &str) -> toolgate_adapters::CallOutput {
    let mut last = None;
    for _ in 0..100 {
        match up.call(tool, JsonObject::new(), ctx()).await {
            Ok(out) => return out,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{tool} never answered again: {last:?}");
}

/// Framing errors on stdout fail the call in flight at once with a reason that says
/// what the server did — never by sitting out the call's deadline — and the process
/// is restarted: a line over `max_line_bytes` that never ends, half a JSON message.
/// A plain-text line is skipped (the call still gets its answer); a response with an
/// id never sent is dropped.
#[tokio::test]
async fn framing_errors_fail_calls_at_once_and_restart_the_process() {
    common::init_tracing();
    if !have_node() {
        return;
    }
    // Far beyond the bounded wait below: an answer only by the deadline fails the test.
    let patient = || CallContext::new(Duration::from_secs(300), "test");
    tokio::time::timeout(Duration::from_secs(60), async {
        let up = upstream("framing", None);
        connected(&up).await;
        let first_pid = up.child_pid();

        let out = up
            .call("banner", JsonObject::new(), patient())
            .await
            .expect("a plain-text line is skipped");
        assert_eq!(text(&out), "after banner");

        for (tool, says) in [
            ("unterminated", "max_line_bytes"),
            ("broken", "broken JSON-RPC message"),
        ] {
            let pid = up.child_pid();
            let error = up
                .call(tool, JsonObject::new(), patient())
                .await
                .expect_err(tool);
            match &error {
                ToolError::Unavailable(m) => {
                    assert!(m.contains(says) && m.contains("restarted"), "{tool}: {m}")
                }
                other => panic!("{tool}: expected Unavailable, got {other:?}"),
            }
            let out = call_when_back(&up, "a").await;
            assert!(!out.is_error());
            assert_ne!(up.child_pid(), pid, "{tool}: the process was restarted");
        }
        assert_ne!(up.child_pid(), first_pid);

        // A response under an id the gateway never sent is dropped: the call meets its
        // (short) deadline, the connection lives on.
        let pid = up.child_pid();
        let error = up
            .call(
                "wrong-id",
                JsonObject::new(),
                CallContext::new(Duration::from_millis(500), "test"),
            )
            .await
            .expect_err("no answer under the call's id");
        assert!(matches!(error, ToolError::Timeout(_)), "{error:?}");
        let out = up.call("a", JsonObject::new(), ctx()).await.expect("a");
        assert!(!out.is_error());
        assert_eq!(up.child_pid(), pid, "no restart for a wrong id");
        up.shutdown().await;
    })
    .await
    .expect("bounded");
}

/// The `retry_in_ms` of every "MCP connection lost" line in `logs`.
fn lost_retry_delays(logs: &str) -> Vec<u64> {
    logs.lines()
        .filter(|l| l.contains("MCP connection lost"))
        .filter_map(|l| {
            let (_, rest) = l.split_once("retry_in_ms=")?;
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// Kills the upstream's child with SIGKILL once it is connected; returns once a new
/// child is connected (bounded).
async fn kill_and_wait_for_the_restart(up: &McpUpstream) {
    connected(up).await;
    let pid = up
        .child_pid()
        .expect("a connected stdio upstream has a pid");
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -9 {pid}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if up.connection() == Connection::Connected && up.child_pid().is_some_and(|p| p != pid) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not restarted after the kill: {:?}",
            up.last_error()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// A current-thread runtime: the upstream's tasks log under the subscriber set here.
#[tokio::test]
async fn a_crash_after_a_healthy_run_is_restarted_without_the_doubled_backoff() {
    if !have_node() {
        return;
    }
    let logs = LogBuffer::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("toolgate_adapters=info")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let text = || String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();

    tokio::time::timeout(Duration::from_secs(60), async {
        // The production backoff: 250 ms doubling to 30 s.
        let up = upstream_with_options("healthy-crash", None, &[], McpOptions::default());
        // Killed three times, each after a healthy run: each restart comes after the
        // initial delay, none after a doubled one.
        for _ in 0..3 {
            connected(&up).await;
            tokio::time::sleep(toolgate_adapters::mcp::HEALTHY_AFTER + Duration::from_millis(100))
                .await;
            let out = up.call("a", JsonObject::new(), ctx()).await.expect("a");
            assert!(!out.is_error());
            kill_and_wait_for_the_restart(&up).await;
        }
        assert_eq!(lost_retry_delays(&text()), [250, 250, 250], "{}", text());

        // Killed as soon as it is up, again and again (a crash loop): doubled.
        for _ in 0..3 {
            kill_and_wait_for_the_restart(&up).await;
        }
        assert_eq!(
            lost_retry_delays(&text())[3..],
            [500, 1000, 2000],
            "{}",
            text()
        );
        let out = call_when_back(&up, "a").await;
        assert!(!out.is_error());
        up.shutdown().await;
    })
    .await
    .expect("bounded");
}
