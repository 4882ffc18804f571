//! Background tool calls (MCP Tasks) on `/mcp`, in both protocol generations, served
//! from [`crate::tasks`] (the gateway runs the call; any replica answers for it).
//!
//! - 2025-11-25 (sessions): `initialize` declares `capabilities.tasks`; a `tools/call`
//!   with `params.task` becomes a task and answers `{task: Task}`; `tasks/get`,
//!   `tasks/result` (blocks until the task ends), `tasks/list`, `tasks/cancel`. A tool
//!   result with `isError` makes the task `failed`.
//! - 2026-07-28 (sessionless): the `io.modelcontextprotocol/tasks` extension, declared
//!   per request in `_meta`'s client capabilities. The gateway decides: a declaring
//!   request for a tool whose taskSupport is `optional` or `required` gets a task
//!   (`resultType: "task"`), anything else a plain result; `tasks/get` inlines the
//!   result or error, `tasks/update` and `tasks/cancel` answer an empty ack, and
//!   `tasks/result` and `tasks/list` do not exist. A tool result with `isError` is a
//!   `completed` task here.
//!
//! Tasks belong to their creator (tenant, and session for sessions): another
//! caller's task id gets exactly the answer of an unknown one.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::response::Response;
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate_adapters::JsonObject;

use super::call::CallMeta;
use super::live::Live;
use super::wire::{self, Envelope};
use crate::access::{Caller, View};
use crate::errors::{self, McpFailure};
use crate::gateway::Gateway;
use crate::tasks::{StartRefused, TaskCall, TaskError, TaskRecord, TaskState, TaskSupport, Tasks};

/// The 2026-07-28 tasks extension's identifier.
pub(super) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The 2025-11-25 version, the one that has core tasks.
pub(super) const LEGACY_TASKS_VERSION: &str = "2025-11-25";

/// 2026-07-28: the request lacks a capability the method needs (HTTP 400).
const MISSING_CAPABILITY: i64 = -32021;
const INTERNAL_ERROR: i64 = -32603;

/// What ties a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Largest `tasks/list` page.
const LIST_PAGE: usize = 50;

/// The 2025-11-25 server capability: tasks for `tools/call`, listed and cancellable
/// (they are bound to the session that made them, so a list reveals nothing).
pub(super) fn legacy_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Whether a method is one of the tasks methods (of either generation).
pub(super) fn is_task_method(method: &str) -> bool {
    method.starts_with("tasks/")
}

// ---------------------------------------------------------------------------------
// Wire shapes: one function per generation's Task.

/// Unix ms as the ISO 8601 text MCP uses for `createdAt` / `lastUpdatedAt`.
fn iso(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The task's `statusMessage`: its own message, else the reason it failed, else its
/// call's last progress (the message, or "n/total"), so a poller sees it move.
fn status_message(record: &TaskRecord) -> Option<String> {
    if let Some(message) = &record.message {
        return Some(message.clone());
    }
    if record.state.is_terminal() {
        return record.error.clone();
    }
    let progress = record.progress.as_ref()?;
    if let Some(message) = &progress.message {
        return Some(message.clone());
    }
    Some(match progress.total {
        Some(total) => format!("{}/{}", progress.progress, total),
        None => progress.progress.to_string(),
    })
}

fn ttl_ms(tasks: &Tasks) -> u64 {
    tasks.config().ttl.as_millis() as u64
}

/// A 2025-11-25 `Task`.
fn legacy_task(tasks: &Tasks, record: &TaskRecord) -> Map<String, Value> {
    let mut task = Map::new();
    task.insert("taskId".into(), json!(record.id.as_str()));
    task.insert("status".into(), json!(record.state.as_str()));
    if let Some(message) = status_message(record) {
        task.insert("statusMessage".into(), json!(message));
    }
    task.insert("createdAt".into(), json!(iso(record.created_ms)));
    task.insert("lastUpdatedAt".into(), json!(iso(record.updated_ms)));
    task.insert("ttl".into(), json!(ttl_ms(tasks)));
    task.insert("pollInterval".into(), json!(record.poll_interval_ms));
    task
}

/// The state a 2026-07-28 client is told: a tool result with `isError` is a
/// completed task there (`failed` means a JSON-RPC error only).
fn extension_state(record: &TaskRecord) -> TaskState {
    match record.state {
        TaskState::Failed if record.result.is_some() => TaskState::Completed,
        state => state,
    }
}

/// A 2026-07-28 `Task` (flat, `ttlMs` / `pollIntervalMs`), without `resultType`.
fn extension_task(tasks: &Tasks, record: &TaskRecord) -> Map<String, Value> {
    let mut task = Map::new();
    task.insert("taskId".into(), json!(record.id.as_str()));
    task.insert("status".into(), json!(extension_state(record).as_str()));
    if let Some(message) = status_message(record) {
        task.insert("statusMessage".into(), json!(message));
    }
    task.insert("createdAt".into(), json!(iso(record.created_ms)));
    task.insert("lastUpdatedAt".into(), json!(iso(record.updated_ms)));
    task.insert("ttlMs".into(), json!(ttl_ms(tasks)));
    task.insert("pollIntervalMs".into(), json!(record.poll_interval_ms));
    task
}

/// The call's last progress, in `_meta` of `tasks/get` (both generations): the
/// numbers a status message only summarizes.
fn with_progress(mut task: Map<String, Value>, record: &TaskRecord) -> Map<String, Value> {
    if let Some(progress) = &record.progress
        && let Ok(progress) = serde_json::to_value(progress)
    {
        task.insert("_meta".into(), json!({"toolgate/progress": progress}));
    }
    task
}

/// The 2026-07-28 `tasks/get` result: the task, with its result (completed) or
/// error (failed) inlined.
fn detailed_task(tasks: &Tasks, record: &TaskRecord) -> Map<String, Value> {
    let mut task = with_progress(extension_task(tasks, record), record);
    task.insert("resultType".into(), json!("complete"));
    match (extension_state(record), &record.result) {
        (TaskState::Completed, Some(result)) => {
            let mut result = result.clone();
            if let Some(object) = result.as_object_mut() {
                object
                    .entry("resultType")
                    .or_insert_with(|| json!("complete"));
            }
            task.insert("result".into(), result);
        }
        (TaskState::Failed, _) => {
            let message = record.error.as_deref().unwrap_or("the task failed");
            task.insert(
                "error".into(),
                json!({"code": INTERNAL_ERROR, "message": message}),
            );
        }
        _ => {}
    }
    task
}

fn to_text(object: Map<String, Value>) -> String {
    Value::Object(object).to_string()
}

// ---------------------------------------------------------------------------------
// Errors, the same words in both generations.

/// The answer for a task that is unknown, expired or another caller's: one answer
/// for all three, byte for byte, so ids reveal nothing.
fn not_found(id: &str) -> Vec<u8> {
    wire::error_message(
        id,
        wire::INVALID_PARAMS,
        "no such task: it is unknown or expired (tasks are visible only to the caller that \
         created them)",
        None,
    )
}

/// A store failure, or a refusal the caller can act on.
fn task_error(id: &str, error: &TaskError) -> Vec<u8> {
    match error {
        TaskError::NotFound => not_found(id),
        TaskError::BadCursor => wire::error_message(
            id,
            wire::INVALID_PARAMS,
            "invalid cursor: pass a nextCursor from an earlier tasks/list, or none",
            None,
        ),
        TaskError::Finished { state, .. } => wire::error_message(
            id,
            wire::INVALID_PARAMS,
            &format!("the task is already {state}: a finished task cannot be cancelled"),
            None,
        ),
        other => wire::error_message(id, INTERNAL_ERROR, &other.to_string(), None),
    }
}

/// A call that did not become a task, answered as the plain call's refusal would be
/// (`to_mcp`), or as an internal error when the store refused it (limits).
fn start_refused(id: &str, refusal: StartRefused, sessionless: bool) -> Vec<u8> {
    match refusal {
        StartRefused::Tool(error) => match errors::to_mcp(&error) {
            McpFailure::Protocol(error) => {
                wire::error_message(id, i64::from(error.code.0), &error.message, error.data)
            }
            McpFailure::ToolResult(mut raw) => {
                if sessionless {
                    raw.insert("resultType".into(), json!("complete"));
                }
                wire::result_message(id, &Value::Object(raw).to_string())
            }
        },
        StartRefused::Task(error) => wire::error_message(
            id,
            INTERNAL_ERROR,
            &format!("the call could not start as a task: {error}"),
            None,
        ),
    }
}

/// Parameters of `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/update`.
#[derive(Deserialize)]
struct TaskIdParams {
    #[serde(rename = "taskId")]
    task_id: String,
}

fn task_id(envelope: &Envelope<'_>, id: &str, method: &str) -> Result<String, Vec<u8>> {
    envelope
        .params::<TaskIdParams>()
        .map(|p| p.task_id)
        .map_err(|error| {
            wire::error_message(
                id,
                wire::INVALID_PARAMS,
                &format!("{error} ({method} needs {{\"taskId\": \"<id>\"}})"),
                None,
            )
        })
}

/// Starts `name` as a task for `caller`.
async fn start(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    name: String,
    arguments: JsonObject,
    headers: Arc<http::HeaderMap>,
) -> Result<TaskRecord, StartRefused> {
    // The gateway's own tools answer at once and are not in the catalog: refused as a
    // forbidden tool is, not as an unknown one.
    if crate::protocol_tools::is_protocol_tool(&name) {
        return Err(StartRefused::Tool(errors::task_forbidden(&name)));
    }
    let call = TaskCall {
        caller: caller.clone(),
        tool: name,
        arguments,
        request_headers: headers,
    };
    gateway.tasks.start(gateway, call).await
}

// ---------------------------------------------------------------------------------
// 2025-11-25: sessions.

/// A session's `tools/call` with `params.task`: the `CreateTaskResult`, `{task}`.
/// The requested `ttl` is not honoured: the answer says the one `tasks.ttl` gives.
pub(super) async fn legacy_call(
    gateway: &Arc<Gateway>,
    live: &Arc<Live>,
    caller: &Caller,
    id: &str,
    name: String,
    arguments: JsonObject,
    headers: Arc<http::HeaderMap>,
) -> Vec<u8> {
    match start(gateway, caller, name, arguments, headers).await {
        Ok(record) => {
            let task = legacy_task(&gateway.tasks, &record);
            if let Some(session) = caller.session_id() {
                announce_status(gateway, live, session, &record);
            }
            wire::result_message(id, &json!({"task": task}).to_string())
        }
        Err(refusal) => start_refused(id, refusal, false),
    }
}

/// Least time between two status notifications of one task: a tool that floods
/// progress must not flood (and so lose) the session's stream; later changes are
/// coalesced into the next one.
const STATUS_EVERY: Duration = Duration::from_millis(250);

/// Sends `notifications/tasks/status` on the session's GET stream for each change of
/// the task's status or status message this replica sees, until it ends (or a
/// task's `call_timeout` and a lease later). Best effort, as the spec has it: a
/// client must not rely on them, and polls.
fn announce_status(gateway: &Arc<Gateway>, live: &Arc<Live>, session: &str, record: &TaskRecord) {
    let tasks = gateway.tasks.clone();
    let live = Arc::downgrade(live);
    let session = session.to_owned();
    let owner = record.owner.clone();
    let id = record.id.to_string();
    let mut last = (record.state, status_message(record));
    let until = tokio::time::Instant::now() + tasks.config().call_timeout + tasks.config().lease;
    tokio::spawn(async move {
        // Bounded: by time, and each round but the last waits for a change.
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            let seen = tasks
                .wait_until(&owner, &id, left, |r| (r.state, status_message(r)) != last)
                .await;
            let Ok(Some(record)) = seen else { return };
            let now = (record.state, status_message(&record));
            if now == last {
                return; // out of time, or ended as last announced
            }
            last = now;
            let Some(live) = live.upgrade() else { return };
            let task = Value::Object(legacy_task(&tasks, &record));
            live.send_to_session(
                &session,
                &wire::notification("notifications/tasks/status", &task),
            );
            if record.state.is_terminal() {
                return;
            }
            drop(live);
            tokio::time::sleep(STATUS_EVERY).await;
        }
    });
}

/// A session's `tasks/*` request.
pub(super) async fn legacy_method(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    id: &str,
    method: &str,
    envelope: &Envelope<'_>,
) -> Vec<u8> {
    let tasks = &gateway.tasks;
    let owner = Tasks::owner_of(caller);
    if method == "tasks/list" {
        #[derive(Deserialize)]
        struct ListParams {
            #[serde(default)]
            cursor: Option<String>,
        }
        let cursor = match envelope.params::<ListParams>() {
            Ok(params) => params.cursor,
            Err(error) => return wire::error_message(id, wire::INVALID_PARAMS, &error, None),
        };
        return match tasks.list(&owner, cursor.as_deref(), LIST_PAGE).await {
            Ok(page) => {
                let listed: Vec<Value> = page
                    .tasks
                    .iter()
                    .map(|record| Value::Object(legacy_task(tasks, record)))
                    .collect();
                let mut result = json!({"tasks": listed});
                if let Some(next) = page.next_cursor {
                    result["nextCursor"] = json!(next);
                }
                wire::result_message(id, &result.to_string())
            }
            Err(error) => task_error(id, &error),
        };
    }
    let task = match task_id(envelope, id, method) {
        Ok(task) => task,
        Err(refused) => return refused,
    };
    match method {
        "tasks/get" => match tasks.get(&owner, &task).await {
            Ok(Some(record)) => wire::result_message(
                id,
                &to_text(with_progress(legacy_task(tasks, &record), &record)),
            ),
            Ok(None) => not_found(id),
            Err(error) => task_error(id, &error),
        },
        "tasks/cancel" => match tasks.cancel(gateway, &owner, &task).await {
            Ok(record) => wire::result_message(id, &to_text(legacy_task(tasks, &record))),
            Err(error) => task_error(id, &error),
        },
        "tasks/result" => legacy_result(tasks, &owner, id, &task).await,
        other => wire::error_message(
            id,
            wire::METHOD_NOT_FOUND,
            &format!(
                "method not found: {other} (protocol {LEGACY_TASKS_VERSION} has tasks/get, \
                 tasks/result, tasks/list and tasks/cancel)"
            ),
            None,
        ),
    }
}

/// `tasks/result`: waits until the task ends (at most a task's `call_timeout`), then
/// answers what the plain call would have: its result tied to the task, or an error.
async fn legacy_result(
    tasks: &Tasks,
    owner: &crate::tasks::Owner,
    id: &str,
    task: &str,
) -> Vec<u8> {
    let max = tasks.config().call_timeout;
    let record = match tasks
        .wait_until(owner, task, max, |record| record.state.is_terminal())
        .await
    {
        Ok(Some(record)) => record,
        Ok(None) => return not_found(id),
        Err(error) => return task_error(id, &error),
    };
    match (record.state, record.result.clone()) {
        (TaskState::Completed | TaskState::Failed, Some(mut result)) => {
            if let Some(object) = result.as_object_mut()
                && let Value::Object(meta) = object
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Map::new()))
            {
                meta.insert(RELATED_TASK.into(), json!({"taskId": record.id.as_str()}));
            }
            wire::result_message(id, &result.to_string())
        }
        (TaskState::Cancelled, _) => wire::error_message(
            id,
            INTERNAL_ERROR,
            "the task was cancelled: it has no result",
            Some(related(&record)),
        ),
        (TaskState::Failed, None) => wire::error_message(
            id,
            INTERNAL_ERROR,
            record.error.as_deref().unwrap_or("the task failed"),
            Some(related(&record)),
        ),
        (_, _) => wire::error_message(
            id,
            INTERNAL_ERROR,
            &format!(
                "the task is still {} after {}: call tasks/result again",
                record.state,
                humantime::format_duration(max)
            ),
            Some(related(&record)),
        ),
    }
}

fn related(record: &TaskRecord) -> Value {
    json!({"_meta": {RELATED_TASK: {"taskId": record.id.as_str()}}})
}

// ---------------------------------------------------------------------------------
// 2026-07-28: the tasks extension, sessionless.

/// Whether a request's client capabilities declare the tasks extension.
pub(super) fn declares_extension(meta: Option<&CallMeta>) -> bool {
    meta.and_then(|m| m.client_capabilities.as_ref())
        .and_then(|caps| caps.get("extensions"))
        .and_then(|extensions| extensions.get(EXTENSION))
        .is_some()
}

/// The -32021 answer (HTTP 400) for a request that needs the extension declared.
fn extension_required(id: &str, why: &str) -> Response {
    let data = json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}});
    wire::json_with_status(
        StatusCode::BAD_REQUEST,
        wire::error_message(
            id,
            MISSING_CAPABILITY,
            &format!(
                "{why}: declare the '{EXTENSION}' extension in \
                 params._meta['io.modelcontextprotocol/clientCapabilities'].extensions"
            ),
            Some(data),
        ),
    )
}

/// How a sessionless `tools/call` is served.
pub(super) enum CallMode {
    /// As a plain call.
    Plain,
    /// As a task (the request declared the extension; the tool may run as one).
    Task,
    /// Refused: the tool runs only as a task and the request did not declare the
    /// extension.
    Refused(Response),
}

/// The gateway's choice for a sessionless call of `name` (the extension leaves it to
/// the server): a task when the request declares the extension and the tool's
/// taskSupport allows one. A tool the caller may not call is left to the plain path,
/// which refuses it as it refuses any unknown name.
pub(super) fn extension_mode(
    gateway: &Gateway,
    caller: &Caller,
    id: &str,
    name: &str,
    declared: bool,
) -> CallMode {
    let view = View::of(gateway, caller);
    let support = view
        .catalog
        .get(name)
        .map_or(TaskSupport::Forbidden, |entry| {
            TaskSupport::of(&entry.definition)
        });
    match support {
        TaskSupport::Forbidden => CallMode::Plain,
        _ if declared => CallMode::Task,
        TaskSupport::Required if view.access(caller, name).callable(caller.scope()) => {
            CallMode::Refused(extension_required(
                id,
                &format!("tool '{name}' runs only as a background task"),
            ))
        }
        _ => CallMode::Plain,
    }
}

/// A sessionless call started as a task: the flat `CreateTaskResult`.
pub(super) async fn extension_call(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    id: &str,
    name: String,
    arguments: JsonObject,
    headers: Arc<http::HeaderMap>,
) -> Response {
    let message = match start(gateway, caller, name, arguments, headers).await {
        Ok(record) => {
            let mut task = extension_task(&gateway.tasks, &record);
            task.insert("resultType".into(), json!("task"));
            wire::result_message(id, &to_text(task))
        }
        Err(refusal) => start_refused(id, refusal, true),
    };
    wire::json_response(message)
}

/// A sessionless `tasks/*` request (its `_meta` already checked by the version's
/// ladder).
pub(super) async fn extension_method(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    id: &str,
    method: &str,
    envelope: &Envelope<'_>,
) -> Response {
    if matches!(method, "tasks/result" | "tasks/list") {
        return wire::json_response(wire::error_message(
            id,
            wire::METHOD_NOT_FOUND,
            &format!(
                "method not found: {method} (the {EXTENSION} extension has tasks/get, which \
                 carries the result, tasks/update and tasks/cancel)"
            ),
            None,
        ));
    }
    #[derive(Deserialize)]
    struct Params {
        #[serde(default, rename = "_meta")]
        meta: Option<CallMeta>,
    }
    let declared = envelope
        .params::<Params>()
        .is_ok_and(|params| declares_extension(params.meta.as_ref()));
    if !declared {
        return extension_required(id, &format!("{method} belongs to the tasks extension"));
    }
    let task = match task_id(envelope, id, method) {
        Ok(task) => task,
        Err(refused) => return wire::json_response(refused),
    };
    let tasks = &gateway.tasks;
    let owner = Tasks::owner_of(caller);
    let ack = || wire::result_message(id, r#"{"resultType":"complete"}"#);
    let message = match method {
        "tasks/get" => match tasks.get(&owner, &task).await {
            Ok(Some(record)) => wire::result_message(id, &to_text(detailed_task(tasks, &record))),
            Ok(None) => not_found(id),
            Err(error) => task_error(id, &error),
        },
        // Gateway-hosted tasks never ask for input: an update of one is acknowledged
        // and its responses ignored, as the extension says of unknown keys.
        "tasks/update" => match tasks.get(&owner, &task).await {
            Ok(Some(_)) => ack(),
            Ok(None) => not_found(id),
            Err(error) => task_error(id, &error),
        },
        // Cancellation is cooperative in this version: a task that already ended is
        // acknowledged too (it keeps its ending).
        "tasks/cancel" => match tasks.cancel(gateway, &owner, &task).await {
            Ok(_) | Err(TaskError::Finished { .. }) => ack(),
            Err(error) => task_error(id, &error),
        },
        other => wire::error_message(
            id,
            wire::METHOD_NOT_FOUND,
            &format!(
                "method not found: {other} (the {EXTENSION} extension has tasks/get, \
                 tasks/update and tasks/cancel)"
            ),
            None,
        ),
    };
    wire::json_response(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::{Owner, Progress, TaskId};

    fn record(state: TaskState) -> TaskRecord {
        TaskRecord {
            id: TaskId::parse("abcdefghijklmnopqrstuv").unwrap(),
            owner: Owner::tenant("t"),
            tool: "up__sleep".into(),
            created_ms: 1_700_000_000_000,
            updated_ms: 1_700_000_001_500,
            state,
            message: None,
            poll_interval_ms: 500,
            progress: None,
            progress_log: Vec::new(),
            result: None,
            error: None,
            lease: None,
        }
    }

    #[test]
    fn times_are_iso_8601() {
        assert_eq!(iso(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
    }

    #[test]
    fn status_messages_follow_progress_then_the_reason() {
        let mut working = record(TaskState::Working);
        assert_eq!(status_message(&working), None);
        working.progress = Some(Progress {
            progress: 2.0,
            total: Some(4.0),
            message: None,
        });
        assert_eq!(status_message(&working).as_deref(), Some("2/4"));
        working.progress.as_mut().unwrap().message = Some("step 2".into());
        assert_eq!(status_message(&working).as_deref(), Some("step 2"));
        let mut failed = record(TaskState::Failed);
        failed.error = Some("boom".into());
        assert_eq!(status_message(&failed).as_deref(), Some("boom"));
    }

    #[test]
    fn a_tool_error_is_failed_in_2025_and_completed_in_2026() {
        let mut failed = record(TaskState::Failed);
        failed.error = Some("quota".into());
        failed.result = Some(json!({"content": [], "isError": true}));
        assert_eq!(extension_state(&failed), TaskState::Completed);
        failed.result = None;
        assert_eq!(extension_state(&failed), TaskState::Failed);
    }
}
