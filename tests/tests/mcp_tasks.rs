//! Background tool calls (MCP Tasks) on `/mcp`, hosted by the gateway: the tools of
//! `fixtures/task_tools/server.mjs` (stdio, mounted as `fx`) get their
//! `execution.taskSupport` from their own definition or from the `background` config,
//! and implement no tasks, so the gateway runs each task itself (as it does for
//! server-everything's tools with `background: optional`). Both protocol generations: 2025-11-25 core tasks in a session and the
//! 2026-07-28 tasks extension, sessionless — driven by PyPI `mcp` 2.3
//! (`python/mcp_tasks.py`) and, where bytes matter, by the raw client: the wire
//! shapes, the refusals, and tasks that belong to their creator only.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::redis::{delete_prefix, shared_redis, unique_prefix};
use toolgate_e2e::{
    Gateway, McpSession, NodeDeps, RpcExchange, everything_stdio_upstream, hash_key, python,
    require, run_python, unique_marker, wait_for, workspace_root,
};

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";
const EXT: &str = "io.modelcontextprotocol/tasks";
const RELATED: &str = "io.modelcontextprotocol/related-task";

const KEY_A: &str = "tasks-tenant-a-key-0123456789abcdef";
const KEY_B: &str = "tasks-tenant-b-key-0123456789abcdef";

/// An id of the right form that names no task.
const UNKNOWN_ID: &str = "AAAAAAAAAAAAAAAAAAAAAA";

/// A gateway in front of the task tools fixture, with two tenants that both see it.
async fn gateway(deps: &NodeDeps) -> Gateway {
    let fixture = workspace_root().join("tests/fixtures/task_tools/server.mjs");
    Gateway::start(json!({
        "startup_timeout": "60s",
        "upstreams": {"fx": {
            "stdio": {"command": deps.node(), "args": [fixture, unique_marker("task-tools")]},
            // `slow` keeps its own `optional`; the config overrides the other two.
            "tools": {"slow_required": {"background": "required"}, "echo": {"background": "forbidden"}}
        }},
        "tenants": {
            "a": {"api_keys": [hash_key(KEY_A)], "allow": ["fx__*"]},
            "b": {"api_keys": [hash_key(KEY_B)], "allow": ["fx__*"]}
        }
    }))
    .await
}

fn bare(gateway: &Gateway, key: &str, protocol: &str) -> McpSession {
    let mut c = McpSession::bare(&gateway.mcp_url())
        .with_bearer(key)
        .with_timeout(Duration::from_secs(60))
        .reading_to_end();
    c.protocol = protocol.to_string();
    c
}

/// A 2025-11-25 session of the tenant of `key`.
async fn session(gateway: &Gateway, key: &str) -> McpSession {
    let mut c = bare(gateway, key, LEGACY);
    let (init, _) = c.handshake(json!({})).await.expect("initialize");
    assert_eq!(init.result()["protocolVersion"], LEGACY, "{init:#?}");
    c
}

/// A 2026-07-28 request that declares the tasks extension (or not).
async fn modern(c: &McpSession, method: &str, mut params: Value, declare: bool) -> RpcExchange {
    if declare {
        params["_meta"] =
            json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}});
    }
    c.rpc(method, params).await.exchange
}

async fn rpc(c: &McpSession, method: &str, params: Value) -> RpcExchange {
    c.rpc(method, params).await.exchange
}

/// A task of `fx__slow` that runs `seconds`: its id.
async fn legacy_task(c: &McpSession, seconds: u64) -> String {
    let created = rpc(
        c,
        "tools/call",
        json!({"name": "fx__slow", "arguments": {"seconds": seconds, "steps": seconds}, "task": {"ttl": 60000}}),
    )
    .await;
    created.result()["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {created:#?}"))
        .to_owned()
}

async fn modern_task(c: &McpSession, seconds: u64) -> String {
    let created = modern(
        c,
        "tools/call",
        json!({"name": "fx__slow", "arguments": {"seconds": seconds, "steps": seconds}}),
        true,
    )
    .await;
    assert_eq!(created.result()["resultType"], "task", "{created:#?}");
    created.result()["taskId"].as_str().unwrap().to_owned()
}

/// Runs `python/mcp_tasks.py` in `mode` against `url` as tenant A.
async fn run_client(py: std::path::PathBuf, url: String, mode: &'static str) -> Value {
    tokio::task::spawn_blocking(move || {
        run_python(
            &py,
            "mcp_tasks.py",
            &[&url, KEY_A, mode, "fx"],
            Duration::from_secs(170),
        )
    })
    .await
    .unwrap()
}

fn code(error: &Value) -> i64 {
    error[0]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {error}"))
}

/// Some poll saw the task working with its call's progress as the status message.
fn saw_progress(polled: &Value) -> bool {
    polled
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p.as_str().unwrap().starts_with("working:step "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_legacy_client_runs_gateway_hosted_tasks() {
    let deps = require!(NodeDeps::find());
    let py = require!(python());
    let gateway = gateway(&deps).await;
    let out = run_client(py, gateway.mcp_url(), "legacy").await;

    assert_eq!(out["protocol_version"], LEGACY);
    assert_eq!(
        out["tasks_capability"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    assert_eq!(out["task_support"]["fx__slow"], "optional", "{out}");
    assert_eq!(out["task_support"]["fx__slow_required"], "required");
    assert_eq!(out["task_support"]["fx__echo"], "forbidden");

    // Created working, with the 2025 field names.
    let task = &out["created_raw"]["task"];
    assert_eq!(task["status"], "working", "{out}");
    assert!(
        task["ttl"].as_u64().is_some() && task["pollInterval"] == 500,
        "{task}"
    );
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'), "{task}");
    // Polled through its progress to completed; tasks/result carries the related task.
    assert!(saw_progress(&out["polled"]), "{}", out["polled"]);
    assert_eq!(out["final"]["status"], "completed", "{out}");
    assert_eq!(out["result"]["content"][0]["text"], "worked 3s in 3 steps");
    assert_eq!(out["result"]["_meta"][RELATED]["taskId"], out["task_id"]);

    // Cancel: the task, cancelled; a second cancel -32602; no result; the upstream
    // call was stopped.
    assert_eq!(out["cancel"]["status"], "cancelled", "{out}");
    assert_eq!(out["after_cancel"], "cancelled");
    assert_eq!(code(&out["cancel_again"]), -32602, "{out}");
    assert_eq!(code(&out["cancelled_result"]), -32603, "{out}");
    assert!(
        out["cancelled_result"][1]
            .as_str()
            .unwrap()
            .contains("cancelled")
    );
    assert_eq!(out["upstream_cancelled"], json!(["1"]), "{out}");

    // A tool error: a failed task, its reason the status message; tasks/result gives
    // the isError result the plain call would have.
    assert_eq!(out["failed"]["status"], "failed", "{out}");
    assert_eq!(out["failed"]["statusMessage"], "slow was asked to fail");
    assert_eq!(out["failed_result"]["isError"], true, "{out}");

    // Execution modes and refusals, as a plain call's.
    assert_eq!(code(&out["required_plain"]), -32601, "{out}");
    assert_eq!(out["required_task"], "completed");
    assert_eq!(code(&out["forbidden_task"]), -32601, "{out}");
    assert_eq!(code(&out["unknown_tool_task"]), -32602, "{out}");
    assert_eq!(out["unknown_tool_task"], out["unknown_tool_plain"]);
    assert_eq!(out["plain_call"], json!(["worked 0.1s in 1 steps"]));

    // Status changes reached the session's stream (best effort by the spec, but this
    // replica runs the tasks: it sees every ending).
    let notes = out["status_notifications"].as_array().unwrap();
    for (id, status) in [
        (&out["task_id"], "completed"),
        (&out["cancelled_id"], "cancelled"),
    ] {
        let note = json!(format!("{}:{status}", id.as_str().unwrap()));
        assert!(notes.contains(&note), "{note} not in {notes:?}");
    }

    // The session's tasks, all of them and nothing else; an unknown id -32602.
    assert_eq!(out["list"], out["created_ids"], "{out}");
    assert_eq!(code(&out["unknown_id"]), -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_modern_client_runs_gateway_hosted_tasks() {
    let deps = require!(NodeDeps::find());
    let py = require!(python());
    let gateway = gateway(&deps).await;
    let out = run_client(py, gateway.mcp_url(), "modern").await;

    assert_eq!(out["protocol_version"], MODERN);
    assert_eq!(out["extensions"][EXT], json!({}), "{out}");
    assert_eq!(out["transparent"], json!(["worked 0.5s in 1 steps"]));

    let created = &out["created"];
    assert_eq!(created["resultType"], "task", "{out}");
    assert_eq!(created["status"], "working");
    assert_eq!(created["pollIntervalMs"], 500);
    assert!(created["ttlMs"].as_u64().is_some(), "{created}");
    assert!(saw_progress(&out["polled"]), "{}", out["polled"]);
    assert_eq!(out["final"]["status"], "completed", "{out}");
    assert_eq!(
        out["final"]["result"]["content"][0]["text"],
        "worked 3s in 3 steps"
    );

    assert_eq!(out["after_cancel"], "cancelled", "{out}");
    assert_eq!(out["acks"], "ok");
    assert_eq!(out["upstream_cancelled"], json!(["1"]), "{out}");
    // In this generation a tool error is a completed task with the result.
    assert_eq!(out["failed"]["status"], "completed", "{out}");
    assert_eq!(out["failed"]["result"]["isError"], true);

    assert_eq!(out["forbidden_call"], "CallToolResult", "{out}");
    assert_eq!(out["required_call"], "CreateTaskResult", "{out}");
    assert_eq!(out["required_final"], "completed");
    assert_eq!(code(&out["unknown_id"]), -32602, "{out}");
    assert_eq!(code(&out["tasks_result"]), -32601, "{out}");
    assert_eq!(code(&out["tasks_list"]), -32601, "{out}");

    // A client that does not declare the extension.
    assert_eq!(out["undeclared_call"], json!(["worked 0.1s in 1 steps"]));
    assert_eq!(code(&out["undeclared_required"]), -32021, "{out}");
    assert_eq!(code(&out["undeclared_get"]), -32021, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_shapes_and_refusals_of_both_generations() {
    let deps = require!(NodeDeps::find());
    let gateway = gateway(&deps).await;

    // Core tasks are declared to 2025-11-25 sessions only.
    let older = bare(&gateway, KEY_A, LEGACY)
        .rpc(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await
        .exchange;
    assert_eq!(older.result()["protocolVersion"], "2025-06-18");
    assert!(
        older.result()["capabilities"].get("tasks").is_none(),
        "{older:#?}"
    );
    let s = session(&gateway, KEY_A).await;
    assert_eq!(
        s.init_result["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({})
    );

    // 2026: discover advertises the extension (and no legacy block); tools/list
    // keeps each tool's taskSupport.
    let m = bare(&gateway, KEY_A, MODERN);
    let discover = modern(&m, "server/discover", json!({}), false).await;
    assert_eq!(
        discover.result()["capabilities"]["extensions"][EXT],
        json!({})
    );
    assert!(discover.result()["capabilities"].get("tasks").is_none());
    let tools = modern(&m, "tools/list", json!({}), false).await;
    let slow = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fx__slow")
        .cloned()
        .unwrap_or_else(|| panic!("{tools:#?}"));
    assert_eq!(slow["execution"]["taskSupport"], "optional");

    // A required tool without the extension: -32021, HTTP 400, naming what to declare.
    let refused = modern(
        &m,
        "tools/call",
        json!({"name": "fx__slow_required", "arguments": {}}),
        false,
    )
    .await;
    assert_eq!(refused.status, 400, "{refused:#?}");
    assert_eq!(refused.rpc_error()["code"], -32021);
    assert_eq!(
        refused.rpc_error()["data"]["requiredCapabilities"]["extensions"][EXT],
        json!({})
    );
    // A hidden tool stays unknown (-32602), whatever its taskSupport.
    let hidden = modern(&m, "tools/call", json!({"name": "fx__nothing"}), false).await;
    assert_eq!(hidden.rpc_error()["code"], -32602, "{hidden:#?}");

    // tasks/* without the extension: -32021 (400).
    let id = modern_task(&m, 1).await;
    let undeclared = modern(&m, "tasks/get", json!({"taskId": id}), false).await;
    assert_eq!(undeclared.status, 400);
    assert_eq!(undeclared.rpc_error()["code"], -32021);
    // Mcp-Name must carry the task id.
    let body = json!({"jsonrpc": "2.0", "id": 99, "method": "tasks/get", "params": {
        "taskId": id,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}
        }
    }});
    let headers = [
        ("Mcp-Method", "tasks/get".to_owned()),
        ("Mcp-Name", "another".to_owned()),
    ];
    let mismatch = m
        .send_body_with_headers(
            body.to_string().into_bytes(),
            &headers,
            Some(json!(99)),
            None,
            Duration::from_secs(30),
        )
        .await
        .unwrap()
        .exchange;
    assert_eq!(mismatch.rpc_error()["code"], -32020, "{mismatch:#?}");
    // tasks/get until completed: the flat shape, the result inlined.
    let mut done = Value::Null;
    for _ in 0..100 {
        let got = modern(&m, "tasks/get", json!({"taskId": id}), true).await;
        done = got.result().clone();
        if done["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "worked 1s in 1 steps");
    for key in [
        "taskId",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
    ] {
        assert!(done.get(key).is_some(), "{key} missing: {done}");
    }
    // Cancelling a finished task is acknowledged in this generation.
    let ack = modern(&m, "tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(ack.result(), &json!({"resultType": "complete"}));

    // 2025: tasks/result blocks until the end, then the result with its related task.
    let id = legacy_task(&s, 1).await;
    let result = rpc(&s, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result.result()["content"][0]["text"],
        "worked 1s in 1 steps"
    );
    assert_eq!(result.result()["_meta"][RELATED]["taskId"], id.as_str());
    let got = rpc(&s, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "completed");
    // The gateway's own tools are never tasks.
    let own = rpc(
        &s,
        "tools/call",
        json!({"name": "tool_search", "arguments": {"query": "slow"}, "task": {}}),
    )
    .await;
    assert_eq!(own.rpc_error()["code"], -32601, "{own:#?}");
    // 2026's tasks/update is not a 2025 method.
    let update = rpc(&s, "tasks/update", json!({"taskId": id})).await;
    assert_eq!(update.rpc_error()["code"], -32601);
}

/// The error object a request answers (its message and code, without the id).
fn error_of(exchange: &RpcExchange) -> (u16, Value) {
    (exchange.status, exchange.rpc_error().clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_belong_to_their_tenant_and_session() {
    let deps = require!(NodeDeps::find());
    let gateway = gateway(&deps).await;

    // Tenant A's session task and sessionless task, both running.
    let owner_session = session(&gateway, KEY_A).await;
    let session_task = legacy_task(&owner_session, 60).await;
    let owner_modern = bare(&gateway, KEY_A, MODERN);
    let modern_task = modern_task(&owner_modern, 60).await;

    // Everyone else: tenant B (session and sessionless), another session of tenant A,
    // and tenant A sessionless for the session's task.
    let b_session = session(&gateway, KEY_B).await;
    let a_other_session = session(&gateway, KEY_A).await;
    let b_modern = bare(&gateway, KEY_B, MODERN);

    for (who, probe) in [
        ("tenant B", &b_session),
        ("A's other session", &a_other_session),
    ] {
        for target in [&session_task, &modern_task] {
            for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
                let unknown = rpc(probe, method, json!({"taskId": UNKNOWN_ID})).await;
                let foreign = rpc(probe, method, json!({"taskId": target})).await;
                assert_eq!(
                    error_of(&foreign),
                    error_of(&unknown),
                    "{who}: {method} of another's task"
                );
                assert_eq!(unknown.rpc_error()["code"], -32602);
            }
        }
        let list = rpc(probe, "tasks/list", json!({})).await;
        assert_eq!(list.result()["tasks"], json!([]), "{who}: {list:#?}");
    }
    for (who, probe, targets) in [
        (
            "tenant B sessionless",
            &b_modern,
            vec![&session_task, &modern_task],
        ),
        ("tenant A sessionless", &owner_modern, vec![&session_task]),
    ] {
        for target in targets {
            for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
                let params = |id: &str| json!({"taskId": id, "inputResponses": {}});
                let unknown = modern(probe, method, params(UNKNOWN_ID), true).await;
                let foreign = modern(probe, method, params(target), true).await;
                assert_eq!(
                    error_of(&foreign),
                    error_of(&unknown),
                    "{who}: {method} of another's task"
                );
                assert_eq!(unknown.rpc_error()["code"], -32602);
            }
        }
    }
    // The session's own list has its task only (not the sessionless one).
    let own = rpc(&owner_session, "tasks/list", json!({})).await;
    let ids: Vec<&Value> = own.result()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["taskId"])
        .collect();
    assert_eq!(ids, vec![&json!(session_task)]);

    // Nobody else's cancel reached them: the owners still see them working, and
    // cancel them.
    let got = rpc(&owner_session, "tasks/get", json!({"taskId": session_task})).await;
    assert_eq!(got.result()["status"], "working", "{got:#?}");
    let got = modern(
        &owner_modern,
        "tasks/get",
        json!({"taskId": modern_task}),
        true,
    )
    .await;
    assert_eq!(got.result()["status"], "working", "{got:#?}");
    let cancel = rpc(
        &owner_session,
        "tasks/cancel",
        json!({"taskId": session_task}),
    )
    .await;
    assert_eq!(cancel.result()["status"], "cancelled");
    let cancel = modern(
        &owner_modern,
        "tasks/cancel",
        json!({"taskId": modern_task}),
        true,
    )
    .await;
    assert_eq!(cancel.result()["resultType"], "complete");
}

/// `toolgate stdio` as a child process, spoken to in JSON-RPC lines.
struct Stdio {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    _dir: toolgate_e2e::TempDir,
}

impl Stdio {
    fn start(deps: &NodeDeps) -> Stdio {
        let dir = toolgate_e2e::TempDir::new("tasks-stdio");
        let config = dir.path().join("toolgate.yaml");
        let fixture = workspace_root().join("tests/fixtures/task_tools/server.mjs");
        let text = json!({
            "startup_timeout": "60s",
            "upstreams": {"fx": {
                "stdio": {"command": deps.node(), "args": [fixture, unique_marker("task-tools-stdio")]},
                "tools": {"slow_required": {"background": "required"}}
            }}
        });
        std::fs::write(&config, text.to_string()).unwrap();
        let mut child = tokio::process::Command::new(toolgate_e2e::toolgate_bin())
            .arg("stdio")
            .arg("--config")
            .arg(&config)
            .current_dir(workspace_root())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn toolgate stdio");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        Stdio {
            child,
            stdin,
            lines,
            _dir: dir,
        }
    }

    /// Sends a request; its response (other lines are skipped), within 60 s.
    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let line = format!("{message}\n");
        tokio::io::AsyncWriteExt::write_all(&mut self.stdin, line.as_bytes())
            .await
            .unwrap();
        let wait = async {
            for _ in 0..10_000 {
                let line = self.lines.next_line().await.unwrap().expect("stdout open");
                let v: Value = serde_json::from_str(&line).unwrap();
                if v["id"] == id {
                    return v;
                }
            }
            panic!("no response to {message}");
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("no response to {method} within 60 s"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toolgate_stdio_serves_tasks_in_both_generations() {
    let deps = require!(NodeDeps::find());
    let mut stdio = Stdio::start(&deps);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}
    });

    // The gateway answers before its upstream is up: wait until the tool joins.
    let mut listed = Value::Null;
    for n in 0..200 {
        listed = stdio
            .request(900 + n, "tools/list", json!({"_meta": meta}))
            .await;
        let names = listed["result"]["tools"].as_array().into_iter().flatten();
        if names.clone().any(|t| t["name"] == "fx__slow") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed.to_string().contains("fx__slow"), "{listed}");

    // Sessionless first (stdio mirrors Mcp-Name from the task id).
    let created = stdio
        .request(
            1,
            "tools/call",
            json!({"name": "fx__slow", "arguments": {"seconds": 0.5, "steps": 1}, "_meta": meta}),
        )
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let mut got = Value::Null;
    for n in 0..100 {
        got = stdio
            .request(100 + n, "tasks/get", json!({"taskId": id, "_meta": meta}))
            .await;
        if got["result"]["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(
        got["result"]["result"]["content"][0]["text"],
        "worked 0.5s in 1 steps"
    );

    // Then a 2025-11-25 session: the capability, a task, its result.
    let init = stdio
        .request(
            2,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"]["cancel"],
        json!({}),
        "{init}"
    );
    let created = stdio
        .request(
            3,
            "tools/call",
            json!({"name": "fx__slow", "arguments": {"seconds": 0.5, "steps": 1}, "task": {}}),
        )
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = stdio
        .request(4, "tasks/result", json!({"taskId": id}))
        .await;
    assert_eq!(
        result["result"]["content"][0]["text"], "worked 0.5s in 1 steps",
        "{result}"
    );
    assert_eq!(result["result"]["_meta"][RELATED]["taskId"], id.as_str());
    let listed = stdio.request(5, "tasks/list", json!({})).await;
    assert_eq!(
        listed["result"]["tasks"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    // EOF on stdin ends it (and its upstream) cleanly.
    let Stdio {
        mut child, stdin, ..
    } = stdio;
    drop(stdin);
    let ended = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    assert!(
        ended.is_ok_and(|s| s.is_ok()),
        "toolgate stdio did not end on EOF"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_tools_run_as_tasks_when_the_config_allows() {
    let deps = require!(NodeDeps::find());
    let mut upstream = everything_stdio_upstream(&deps, &unique_marker("tasks-everything"));
    upstream["background"] = json!("optional");
    let gateway = Gateway::start(json!({
        "startup_timeout": "60s",
        "upstreams": {"everything": upstream}
    }))
    .await;
    const LONG: &str = "everything__trigger-long-running-operation";
    let support = |list: &RpcExchange| {
        list.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == LONG)
            .map(|t| t["execution"]["taskSupport"].clone())
    };
    // Both generations list the effective value.
    let m = McpSession::modern(&gateway.mcp_url());
    let listed = modern(&m, "tools/list", json!({}), false).await;
    assert_eq!(support(&listed), Some(json!("optional")), "{listed:#?}");
    let s = McpSession::connect(&gateway.mcp_url()).await.unwrap();
    let listed = rpc(&s, "tools/list", json!({})).await;
    assert_eq!(support(&listed), Some(json!("optional")));

    // A 2025-11-25 task: progress shows while it works, then the result.
    let created = rpc(
        &s,
        "tools/call",
        json!({"name": LONG, "arguments": {"duration": 2, "steps": 4}, "task": {}}),
    )
    .await;
    let id = created.result()["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut progress_seen = false;
    let mut status = Value::Null;
    for _ in 0..200 {
        let got = rpc(&s, "tasks/get", json!({"taskId": id})).await;
        status = got.result()["status"].clone();
        if status != "working" {
            break;
        }
        progress_seen |= got.result()["_meta"]["toolgate/progress"]["total"] == 4.0
            && got.result()["statusMessage"].is_string();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "completed");
    assert!(progress_seen, "no progress seen while the task worked");
    let result = rpc(&s, "tasks/result", json!({"taskId": id})).await;
    let text = result.result()["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("Long running operation completed"),
        "{result:#?}"
    );

    // The same tool for a 2026-07-28 client that declares the extension: a task.
    let created = modern(
        &m,
        "tools/call",
        json!({"name": LONG, "arguments": {"duration": 0.2, "steps": 1}}),
        true,
    )
    .await;
    assert_eq!(created.result()["resultType"], "task", "{created:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_clients_get_an_upstreams_own_task_relayed() {
    let deps = require!(NodeDeps::find());
    let py = require!(python());
    let upstream = everything_stdio_upstream(&deps, &unique_marker("tasks-relay"));
    let gateway = Gateway::start(json!({
        "startup_timeout": "60s",
        "tenants": {"a": {"api_keys": [hash_key(KEY_A)], "allow": ["everything__*"]}},
        "upstreams": {"everything": upstream}
    }))
    .await;
    // The server registers its task tools after initialization.
    let s = session(&gateway, KEY_A).await;
    let research = wait_for("the research tool", Duration::from_secs(30), || async {
        let listed = rpc(&s, "tools/list", json!({})).await;
        listed.result()["tools"]
            .as_array()
            .and_then(|tools| {
                tools
                    .iter()
                    .find(|t| t["name"] == "everything__simulate-research-query")
            })
            .cloned()
    })
    .await;
    assert_eq!(
        research["execution"]["taskSupport"], "required",
        "{research}"
    );

    let url = gateway.mcp_url();
    let out = tokio::task::spawn_blocking(move || {
        run_python(
            &py,
            "mcp_tasks.py",
            &[&url, KEY_A, "relay", "everything"],
            Duration::from_secs(170),
        )
    })
    .await
    .unwrap();
    // 2025-11-25: the server's stages arrive as the task's status, then its report.
    assert_eq!(out["legacy_status"], "completed", "{out:#}");
    let polled: Vec<&str> = out["legacy_polled"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let stages: std::collections::BTreeSet<&str> = polled
        .iter()
        .filter_map(|p| p.strip_prefix("working:"))
        .filter(|m| *m != "None")
        .collect();
    assert!(
        stages.len() >= 2,
        "the server's stages as status: {polled:?}"
    );
    assert!(
        out["legacy_result"][0]
            .as_str()
            .unwrap_or_default()
            .contains("Research Report"),
        "{out:#}"
    );
    assert_eq!(out["legacy_cancelled"], "cancelled", "{out:#}");
    assert_eq!(code(&out["legacy_plain"]), -32601, "{out:#}");
    // 2026-07-28: the SDK's transparent call resolves the relayed task.
    assert_eq!(out["modern_protocol"], "2026-07-28", "{out:#}");
    assert!(
        out["modern_result"][0]
            .as_str()
            .unwrap_or_default()
            .contains("Research Report"),
        "{out:#}"
    );
}

/// Polls `tasks/get` (2026) until the task is not working: its last read.
async fn modern_until_done(c: &McpSession, id: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        last = modern(c, "tasks/get", json!({"taskId": id}), true)
            .await
            .result()
            .clone();
        if last["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_replica_answers_for_a_task_when_state_is_in_redis() {
    let deps = require!(NodeDeps::find());
    let redis_url = require!(shared_redis().await);
    let prefix = unique_prefix("mcp-tasks");
    let fixture = workspace_root().join("tests/fixtures/task_tools/server.mjs");
    let config = |label: &str| {
        json!({
            "startup_timeout": "60s",
            "state": {"backend": "redis", "url": redis_url, "key_prefix": prefix},
            "upstreams": {"fx": {"stdio": {
                "command": deps.node(), "args": [&fixture, unique_marker(label)]
            }}},
            "tenants": {"a": {"api_keys": [hash_key(KEY_A)], "allow": ["fx__*"]}}
        })
    };
    let (a, b) = tokio::join!(
        Gateway::start(config("tasks-replica-a")),
        Gateway::start(config("tasks-replica-b"))
    );

    // Sessionless: created on A, polled and its result read on B.
    let on_a = bare(&a, KEY_A, MODERN);
    let on_b = on_a.at(&b.mcp_url());
    let id = modern_task(&on_a, 1).await;
    let done = modern_until_done(&on_b, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "worked 1s in 1 steps");

    // A session made on A, used on B: its task's result, its list.
    let s_a = session(&a, KEY_A).await;
    let s_b = s_a.at(&b.mcp_url());
    let id = legacy_task(&s_a, 1).await;
    let result = rpc(&s_b, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result.result()["content"][0]["text"],
        "worked 1s in 1 steps",
        "{result:#?}"
    );
    let listed = rpc(&s_b, "tasks/list", json!({})).await;
    assert_eq!(
        listed.result()["tasks"][0]["taskId"],
        id.as_str(),
        "{listed:#?}"
    );

    // Cancelled on B, the call running on A stops (A sees it at its next look at
    // the store): A's upstream reports the cancellation.
    let running = modern_task(&on_a, 60).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ack = modern(&on_b, "tasks/cancel", json!({"taskId": running}), true).await;
    assert_eq!(ack.result()["resultType"], "complete", "{ack:#?}");
    let mut stopped = Value::Null;
    for _ in 0..100 {
        let count = modern(
            &on_a,
            "tools/call",
            json!({"name": "fx__cancelled", "arguments": {}}),
            false,
        )
        .await;
        stopped = count.result()["content"][0]["text"].clone();
        if stopped == "1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stopped, "1", "the upstream call on A was not cancelled");
    let got = modern(&on_a, "tasks/get", json!({"taskId": running}), true).await;
    assert_eq!(got.result()["status"], "cancelled");
    delete_prefix(&redis_url, &prefix).await;
}
