//! Background tool calls (MCP Tasks) on `/mcp`, in both protocol generations, served
//! from [`crate::tasks`] (the gateway runs the call; any replica answers for it).
//!
//! - 2025-11-25 (sessions): `initialize` declares `capabilities.tasks`; a `tools/call`
//!   with `params.task` becomes a task and answers `{task: Task}`; `tasks/get`,
//!   `tasks/result` (blocks until the task ends; meanwhile it carries the task's input
//!   requests to the client as server requests and records its answers),
//!   `tasks/list`, `tasks/cancel`. A tool result with `isError` makes the task
//!   `failed`.
//! - 2026-07-28 (sessionless): the `io.modelcontextprotocol/tasks` extension, declared
//!   per request in `_meta`'s client capabilities. The gateway decides: a declaring
//!   request for a tool whose taskSupport is `optional` or `required` gets a task
//!   (`resultType: "task"`), anything else a plain result; `tasks/get` inlines the
//!   result or error (or, `input_required`, the `inputRequests`), `tasks/update`
//!   records the answers to those, and it and `tasks/cancel` answer an empty ack, and
//!   `tasks/result` and `tasks/list` do not exist. A tool result with `isError` is a
//!   `completed` task here.
//!
//! Tasks belong to their creator (tenant, and session for sessions): another
//! caller's task id gets exactly the answer of an unknown one.

mod extension;
mod session;
mod shapes;

pub(super) use extension::{
    CallMode, declares_extension, extension_call, extension_method, extension_mode,
};
pub(super) use session::{session_call, session_method, session_result};

// What the submodules share (they `use super::*`).
use shapes::*;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate_adapters::JsonObject;

use super::Reply;
use super::call::CallMeta;
use super::error::McpError;
use super::live::Live;
use super::wire::{self, Envelope};
use crate::access::{Caller, View};
use crate::app::App;
use crate::errors::{self, McpFailure};
use crate::gateway::Gateway;
use crate::policy::{Item, Method};
use crate::tasks::{StartRefused, TaskCall, TaskError, TaskRecord, TaskState, TaskSupport, Tasks};

/// The 2026-07-28 tasks extension's identifier.
pub(super) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The 2025-11-25 version, the one that has core tasks.
pub(super) const SESSION_TASKS_VERSION: &str = "2025-11-25";

use toolgate_adapters::codes::INTERNAL_ERROR;

/// What ties a message to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Largest `tasks/list` page.
const LIST_PAGE: usize = 50;

/// The 2025-11-25 server capability: tasks for `tools/call`, listed and cancellable
/// (they are bound to the session that made them, so a list reveals nothing).
pub(super) fn session_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Whether a method is one of the tasks methods (of either generation).
pub(super) fn is_task_method(method: &str) -> bool {
    method.starts_with("tasks/")
}

// Errors, the same words in both generations.

/// The answer for a task that is unknown, expired or another caller's: one answer
/// for all three, byte for byte, so ids reveal nothing.
fn not_found(id: &str) -> Vec<u8> {
    wire::error_message(
        id,
        toolgate_adapters::codes::INVALID_PARAMS,
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
            toolgate_adapters::codes::INVALID_PARAMS,
            "invalid cursor: pass a nextCursor from an earlier tasks/list, or none",
            None,
        ),
        TaskError::Finished { state, .. } => wire::error_message(
            id,
            toolgate_adapters::codes::INVALID_PARAMS,
            &format!("the task is already {state}: a finished task cannot be cancelled"),
            None,
        ),
        TaskError::InvalidInput(_) => wire::error_message(
            id,
            toolgate_adapters::codes::INVALID_PARAMS,
            &error.to_string(),
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
                toolgate_adapters::codes::INVALID_PARAMS,
                &format!("{error} ({method} needs {{\"taskId\": \"<id>\"}})"),
                None,
            )
        })
}

/// Starts `name` as a task for `caller`.
async fn start(
    app: &App,
    caller: &Caller,
    name: String,
    arguments: JsonObject,
    headers: Arc<http::HeaderMap>,
) -> Result<TaskRecord, StartRefused> {
    let gateway = &app.gateway;
    // The task's call continues the caller's trace when the request's headers carry
    // one (`traceparent`), as a plain call does.
    let trace = crate::telemetry::CallTrace::start("mcp", &headers, None);
    let call = TaskCall {
        caller: caller.clone(),
        tool: name,
        arguments,
        request_headers: headers,
        trace: Some(trace),
    };
    app.tasks.start(gateway, call).await
}
