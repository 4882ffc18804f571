//! Background calls over REST, on the gateway's task machinery ([`crate::tasks`]):
//!
//! - `POST /v1/tools/{name}/call` with `"background": true` (and the same flag per call
//!   in the batches) starts the call as a task: `202 {task_id, tool, status,
//!   poll_interval_ms, status_url, events_url}` with `Location: <status_url>`;
//! - `GET /v1/tasks/{id}`: the task ([`view`]): status, progress, and once it is over
//!   the result in the shape a plain call answers, or the error;
//! - `GET /v1/tasks/{id}/events`: its event stream (see `task_events.rs`);
//! - `DELETE /v1/tasks/{id}`: cancels it (the call stops), answers the task;
//! - `POST /v1/tasks/{id}/input`: answers the call's input requests (an upstream's
//!   elicitation or sampling during the call, shown as `input_requests` while the task
//!   is `input_required`), `{key: response}`; answers the task.
//!
//! A task belongs to the caller that started it: the tenant, and the session when the
//! call named one (`?session=` on these routes then; the task's URLs carry it). Any
//! other caller gets the same 404 as for an id that never existed, on every route.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use toolgate_adapters::{JsonObject, ToolError};

use super::call::{self, Answer, AnswerUsage};
use super::types::ErrorDetail;
use super::{RestBody, caller, caller_of, tool_error};
use crate::access::Caller;
use crate::serve::auth::FrontDoor;
use crate::state::tasks::InputRequest;
use crate::tasks::{
    Owner, Progress, StartRefused, TaskCall, TaskError, TaskRecord, TaskState, Tasks,
};

/// The query of the task routes: the session a task was started in, if any.
#[derive(serde::Deserialize)]
pub(super) struct TaskQuery {
    session: Option<String>,
}

/// Starts `name` as a background task for `caller` (the name and arguments prepared as
/// for a plain call). A refusal is the plain call's refusal (an unknown or hidden tool
/// is the same 404), or the task store's ([`task_refusal`]).
pub(super) async fn start(
    door: &FrontDoor,
    caller: &Caller,
    name: &str,
    mut arguments: JsonObject,
    request_headers: Arc<HeaderMap>,
    trace: &crate::telemetry::CallTrace,
) -> Result<TaskRecord, ToolError> {
    let gateway = &door.gateway;
    let tool = call::prepare(gateway, caller, name, &mut arguments);
    let task = TaskCall {
        caller: caller.clone(),
        tool,
        arguments,
        request_headers,
        trace: Some(trace.clone()),
    };
    match door.app.tasks.start(gateway, task).await {
        Ok(record) => Ok(record),
        Err(StartRefused::Tool(refusal)) => Err(refusal),
        Err(StartRefused::Task(refusal)) => Err(task_refusal(refusal)),
    }
}

/// A task error as the REST surface answers it (one mapping, through the error kinds'
/// statuses): the tenant's own limits (running, kept) are 429 — the tenant's to wait
/// out, never another's — a full or unreachable store 503, a task that is not the
/// caller's 404.
pub(super) fn task_refusal(refusal: TaskError) -> ToolError {
    let message = refusal.to_string();
    match refusal {
        TaskError::NotFound => not_found(),
        TaskError::TooManyRunning { .. } | TaskError::TenantStoreFull { .. } => {
            ToolError::RateLimited {
                message,
                retry_after: None,
            }
        }
        TaskError::StoreFull { .. } | TaskError::Unavailable(_) => ToolError::Unavailable(message),
        TaskError::InvalidInput(_) | TaskError::ResultTooLarge { .. } => {
            ToolError::InvalidArgs(message)
        }
        _ => ToolError::Failed(message),
    }
}

/// The one answer for a task the caller cannot have: missing, expired, or another
/// caller's (indistinguishable on purpose).
fn not_found() -> ToolError {
    ToolError::NotFound(
        "no such task for these credentials: it never existed, or it finished longer ago \
         than `tasks.ttl` and was forgotten (a task started in a session is found with \
         that `session`)"
            .into(),
    )
}

/// The task's URLs: status and events (with the session, when it has one).
pub(super) fn urls(record: &TaskRecord) -> (String, String) {
    let status = format!("/v1/tasks/{}", record.id);
    let query = match &record.owner.session {
        Some(session) => format!("?session={session}"),
        None => String::new(),
    };
    (
        format!("{status}{query}"),
        format!("{status}/events{query}"),
    )
}

/// A call started in the background (`202`).
#[derive(Serialize, JsonSchema)]
pub(super) struct TaskStarted<'a> {
    task_id: &'a str,
    /// The tool's catalog name.
    tool: &'a str,
    status: TaskState,
    /// How often to poll `status_url`, in ms.
    poll_interval_ms: u64,
    /// `GET` it for the status and, once over, the result; `DELETE` it to cancel.
    status_url: String,
    /// The task's event stream (SSE, resumable with `Last-Event-ID`).
    events_url: String,
}

/// What a started task answers: `{task_id, tool, status, poll_interval_ms,
/// status_url, events_url}`.
pub(super) fn started(record: &TaskRecord) -> TaskStarted<'_> {
    let (status_url, events_url) = urls(record);
    TaskStarted {
        task_id: record.id.as_str(),
        tool: &record.tool,
        status: record.state,
        poll_interval_ms: record.poll_interval_ms,
        status_url,
        events_url,
    }
}

/// `202 Accepted` for a call started in the background, `Location` its status URL.
pub(super) fn accepted(record: &TaskRecord) -> Response {
    let body = started(record);
    let location = HeaderValue::from_str(&body.status_url).ok();
    let mut response = (StatusCode::ACCEPTED, Json(body)).into_response();
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// How a finished task ended, for the REST surface: the result in the plain call's
/// shape (when the tool answered), and the error (when it did not succeed).
pub(super) struct Ending<'a> {
    pub answer: Option<Answer<'a>>,
    pub error: Option<ToolError>,
}

/// The ending of a task that is over (`None` while it runs). A gateway error (a
/// timeout, an upstream down) is stored as an error result with its code in
/// `_meta["toolgate/error"]`: it comes back as that error, as a plain call's would; a
/// tool's own error result comes back as the result (`is_error: true`) and a `failed`
/// error with its reason.
pub(super) fn ending<'a>(record: &'a TaskRecord, summary: &'a str) -> Option<Ending<'a>> {
    let raw = record.result.as_ref().and_then(Value::as_object);
    let reason = || {
        record
            .error
            .clone()
            .or_else(|| record.message.clone())
            .unwrap_or_else(|| format!("the task {}", record.state))
    };
    let gateway_error = raw.and_then(gateway_error);
    let answer = |raw| Answer::new(raw, summary, AnswerUsage::from_meta(raw));
    match record.state {
        TaskState::Working | TaskState::InputRequired => None,
        TaskState::Completed => Some(Ending {
            answer: raw.map(answer),
            error: None,
        }),
        TaskState::Cancelled => Some(Ending {
            answer: None,
            error: Some(ToolError::Cancelled(reason())),
        }),
        TaskState::Failed => match gateway_error {
            Some(code) => Some(Ending {
                answer: None,
                error: Some(error_of(code, reason())),
            }),
            None => Some(Ending {
                answer: raw.map(answer),
                error: Some(ToolError::Failed(reason())),
            }),
        },
    }
}

/// The error a stored code names (`ToolError::code`), with its message.
fn error_of(code: &str, message: String) -> ToolError {
    match code {
        "not_found" => ToolError::NotFound(message),
        "invalid_args" => ToolError::InvalidArgs(message),
        "cancelled" => ToolError::Cancelled(message),
        "unavailable" => ToolError::Unavailable(message),
        "timeout" => ToolError::Timeout(message),
        "rate_limited" => ToolError::RateLimited {
            message,
            retry_after: None,
        },
        "not_selected" => ToolError::NotSelected(message),
        "authorization_required" => ToolError::authorization_required(message),
        "execution_mode" => ToolError::ExecutionMode(message),
        "upstream_unauthorized" => ToolError::Unauthorized {
            message,
            status: 401,
            challenge: None,
        },
        _ => ToolError::Failed(message),
    }
}

/// The one-line summary of a finished task, as a plain call's answer carries.
pub(super) fn summary(record: &TaskRecord) -> String {
    let tool_result = tool_result(record).filter(|_| record.state.is_terminal());
    match (tool_result, ending(record, "").and_then(|e| e.error)) {
        (Some(raw), _) => crate::summary::complete(&record.tool, raw),
        (None, Some(error)) => crate::summary::failed(&record.tool, &error),
        (None, None) => crate::summary::start(&record.tool, &JsonObject::new()),
    }
}

/// The task's stored result when the tool answered it — not when it is the gateway's
/// error result (its code in `_meta["toolgate/error"]`), which stands for an error.
fn tool_result(record: &TaskRecord) -> Option<&JsonObject> {
    let raw = record.result.as_ref()?.as_object()?;
    gateway_error(raw).is_none().then_some(raw)
}

/// The code of a gateway error result (`crate::errors::error_result`).
fn gateway_error(raw: &JsonObject) -> Option<&str> {
    raw.get("_meta")?.get("toolgate/error")?.as_str()
}

/// A Unix time in ms as ISO 8601 (UTC, ms precision).
pub(super) fn iso8601(ms: u64) -> String {
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// `GET /v1/tasks/{id}`, `DELETE /v1/tasks/{id}`, `POST /v1/tasks/{id}/input`.
#[derive(Serialize, JsonSchema)]
pub(super) struct TaskView<'a> {
    task_id: &'a str,
    tool: &'a str,
    status: TaskState,
    /// ISO 8601 (UTC).
    #[schemars(extend("format" = "date-time"))]
    created_at: String,
    /// ISO 8601 (UTC): the last change.
    #[schemars(extend("format" = "date-time"))]
    updated_at: String,
    poll_interval_ms: u64,
    /// A word on the status.
    #[serde(skip_serializing_if = "Option::is_none")]
    status_message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<&'a Progress>,
    /// While `input_required`: the questions waiting for an answer, by key; answer
    /// with `POST /v1/tasks/{id}/input`.
    #[serde(skip_serializing_if = "Option::is_none")]
    input_requests: Option<&'a BTreeMap<String, InputRequest>>,
    /// Once `completed` (or `failed` with the tool's own error result): what a plain
    /// call answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Answer<'a>>,
    /// Once `failed` or `cancelled`: why (`code` as in error bodies).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDetail>,
}

/// `GET /v1/tasks/{id}`'s body: `{task_id, tool, status, created_at, updated_at,
/// poll_interval_ms, status_message?, progress?, input_requests?, result?, error?}`;
/// `summary` is the task's [`summary`], which a result carries.
pub(super) fn view<'a>(record: &'a TaskRecord, summary: &'a str) -> TaskView<'a> {
    let (result, error) = match ending(record, summary) {
        Some(ending) => (ending.answer, ending.error.as_ref().map(ErrorDetail::of)),
        None => (None, None),
    };
    TaskView {
        task_id: record.id.as_str(),
        tool: &record.tool,
        status: record.state,
        created_at: iso8601(record.created_ms),
        updated_at: iso8601(record.updated_ms),
        poll_interval_ms: record.poll_interval_ms,
        status_message: record.message.as_deref(),
        progress: record.progress.as_ref(),
        input_requests: Some(&record.input_requests).filter(|requests| !requests.is_empty()),
        result,
        error,
    }
}

/// The answer of the task routes: the task as [`view`] has it.
fn answer_task(record: &TaskRecord) -> Response {
    let summary = summary(record);
    Json(view(record, &summary)).into_response()
}

/// `DELETE /v1/tasks/{id}` of a task already over (`409`).
#[derive(Serialize, JsonSchema)]
pub(super) struct TaskFinished {
    /// `code` is `task_finished`.
    error: ErrorDetail,
    status: TaskState,
}

/// The caller of a task route and the owner its tasks have.
pub(super) async fn owner(
    door: &FrontDoor,
    headers: &HeaderMap,
    query: &TaskQuery,
) -> Result<Owner, Response> {
    let caller = caller(door, headers, query.session.as_deref()).await?;
    Ok(Tasks::owner_of(&caller))
}

/// The caller's task, or the answer that it is not theirs (404) or cannot be read.
pub(super) async fn owned(
    door: &FrontDoor,
    owner: &Owner,
    id: &str,
) -> Result<TaskRecord, Response> {
    match door.app.tasks.get(owner, id).await {
        Ok(Some(record)) => Ok(record),
        Ok(None) => Err(tool_error(&not_found())),
        Err(refusal) => Err(tool_error(&task_refusal(refusal))),
    }
}

/// `GET /v1/tasks/{id}`.
pub(super) async fn get_task(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<TaskQuery>,
) -> Response {
    let owner = match owner(&door, &headers, &query).await {
        Ok(owner) => owner,
        Err(response) => return response,
    };
    match owned(&door, &owner, &id).await {
        Ok(record) => answer_task(&record),
        Err(response) => response,
    }
}

/// `DELETE /v1/tasks/{id}`: cancels a running task (its call stops) and answers it;
/// a task already over is a 409 naming its state.
pub(super) async fn cancel_task(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<TaskQuery>,
) -> Response {
    let owner = match owner(&door, &headers, &query).await {
        Ok(owner) => owner,
        Err(response) => return response,
    };
    let gateway = &door.gateway;
    match door.app.tasks.cancel(gateway, &owner, &id).await {
        Ok(record) => answer_task(&record),
        Err(TaskError::Finished { state, .. }) => (
            StatusCode::CONFLICT,
            Json(TaskFinished {
                error: ErrorDetail::new(
                    "task_finished",
                    format!(
                        "the task is already {state}: only a running task can be cancelled \
                         (GET its status_url for its outcome)"
                    ),
                ),
                status: state,
            }),
        )
            .into_response(),
        Err(refusal) => tool_error(&task_refusal(refusal)),
    }
}

/// `POST /v1/tasks/{id}/input`: the owner's answers to the call's input requests,
/// `{key: response}` (a response is the result the request asks for, e.g. an
/// elicitation's `{action, content}`); unknown or already-answered keys are ignored.
/// Answers the task as `GET` does.
pub(super) async fn answer_input(
    State(door): State<Arc<FrontDoor>>,
    Path(id): Path<String>,
    Query(query): Query<TaskQuery>,
    RestBody {
        caller: admitted,
        body,
    }: RestBody,
) -> Response {
    let owner = match caller_of(&door, admitted, query.session.as_deref()).await {
        Ok(caller) => Tasks::owner_of(&caller),
        Err(response) => return response,
    };
    let answers = match serde_json::from_slice(&body) {
        Ok(answers) => answers,
        Err(e) => {
            return super::error(
                StatusCode::BAD_REQUEST,
                "invalid_body",
                format!(
                    "expected {{\"<input key>\": <response>, …}} (the keys of the task's \
                     input_requests): {e}"
                ),
            );
        }
    };
    match door.app.tasks.answer_input(&owner, &id, answers).await {
        Ok(record) => answer_task(&record),
        Err(refusal) => tool_error(&task_refusal(refusal)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::{Owner, Progress, TaskId};
    use serde_json::json;

    /// A task's body as a client reads it.
    fn view_json(record: &TaskRecord) -> Value {
        let summary = summary(record);
        serde_json::to_value(view(record, &summary)).expect("a task's body is JSON")
    }

    pub(crate) fn record(
        state: TaskState,
        result: Option<Value>,
        error: Option<&str>,
    ) -> TaskRecord {
        TaskRecord {
            id: TaskId::new(),
            owner: Owner::tenant("acme"),
            tool: "api__slow".into(),
            created_ms: 1_700_000_000_000,
            updated_ms: 1_700_000_001_500,
            state,
            message: None,
            poll_interval_ms: 500,
            progress: Some(Progress {
                progress: 1.0,
                total: Some(2.0),
                message: None,
            }),
            progress_log: Vec::new(),
            result,
            error: error.map(str::to_owned),
            lease: None,
            input_requests: Default::default(),
            input_responses: Default::default(),
        }
    }

    #[test]
    fn a_completed_task_answers_the_plain_calls_result() {
        let raw =
            json!({"content": [{"type": "text", "text": "done"}], "structuredContent": {"n": 1}});
        let view = view_json(&record(TaskState::Completed, Some(raw), None));
        assert_eq!(view["status"], "completed");
        assert_eq!(view["created_at"], "2023-11-14T22:13:20.000Z");
        assert_eq!(view["updated_at"], "2023-11-14T22:13:21.500Z");
        assert_eq!(view["result"]["content"][0]["text"], "done");
        assert_eq!(view["result"]["structured_content"]["n"], 1);
        assert_eq!(view["result"]["is_error"], false);
        assert_eq!(view["result"]["usage"]["truncated"], false);
        assert!(
            view["result"]["summary"]
                .as_str()
                .unwrap()
                .starts_with("api__slow")
        );
        assert!(view.get("error").is_none(), "{view}");
        assert_eq!(view["progress"], json!({"progress": 1.0, "total": 2.0}));
    }

    #[test]
    fn a_gateway_error_comes_back_as_that_error_and_a_tool_error_as_a_result() {
        let timeout = ToolError::Timeout("took too long".into());
        let raw = Value::Object(crate::errors::error_result(&timeout));
        let view = view_json(&record(TaskState::Failed, Some(raw), Some("took too long")));
        assert_eq!(
            view["error"],
            json!({"code": "timeout", "message": "took too long"})
        );
        assert!(view.get("result").is_none(), "{view}");

        let raw = json!({"content": [{"type": "text", "text": "quota"}], "isError": true});
        let view = view_json(&record(TaskState::Failed, Some(raw), Some("quota")));
        assert_eq!(view["result"]["is_error"], true);
        assert_eq!(view["error"]["code"], "failed");

        let view = view_json(&record(
            TaskState::Cancelled,
            None,
            Some("cancelled by its owner"),
        ));
        assert_eq!(view["error"]["code"], "cancelled");
        let view = view_json(&record(TaskState::Working, None, None));
        assert!(view.get("result").is_none() && view.get("error").is_none());
    }

    #[test]
    fn task_errors_map_to_the_rest_statuses() {
        use crate::errors::http_status;
        let status = |e| http_status(&task_refusal(e)).as_u16();
        assert_eq!(status(TaskError::NotFound), 404);
        assert_eq!(
            status(TaskError::TooManyRunning {
                tenant: "t".into(),
                limit: 1
            }),
            429
        );
        assert_eq!(
            status(TaskError::TenantStoreFull {
                tenant: "t".into(),
                limit: 1,
                ttl: std::time::Duration::from_secs(1)
            }),
            429,
            "a tenant's own share is its to wait out"
        );
        assert_eq!(status(TaskError::StoreFull { limit: 1 }), 503);
    }

    #[test]
    fn a_session_task_carries_its_session_in_its_urls() {
        let mut task = record(TaskState::Working, None, None);
        let (status, events) = urls(&task);
        assert_eq!(status, format!("/v1/tasks/{}", task.id));
        assert_eq!(events, format!("/v1/tasks/{}/events", task.id));
        task.owner = Owner::session("acme", "s1");
        let (status, _) = urls(&task);
        assert!(status.ends_with("?session=s1"), "{status}");
    }
}
