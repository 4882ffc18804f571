//! Batch calls in the function-calling formats of the two big model APIs, so an agent
//! loop can hand over what the model said and append what comes back:
//!
//! - `POST /v1/tool_calls`: the `tool_calls` of an OpenAI assistant message in (the
//!   array itself, `{"tool_calls": […]}` or the whole message), `{"messages": [{"role":
//!   "tool", "tool_call_id", "content"}]}` out, in the calls' order;
//! - `POST /v1/tool_use`: Anthropic `tool_use` blocks in (the array, or the assistant
//!   message with its `content`), a `user` message of `tool_result` blocks out.
//!
//! Calls run concurrently, at most `rest.batch_concurrency` at once. A call the model
//! got wrong (arguments that are not JSON, an unknown or unselected tool) becomes a
//! result carrying the error, so the model can correct itself; only a request that is
//! not a batch at all is an HTTP error. `?session=ID` (or `"session"` in the body)
//! names the session whose visible set applies.
//!
//! A call marked `"background": true` (on the OpenAI tool call, beside `function`; on
//! the Anthropic `tool_use` block) starts as a task instead: its message (its
//! `tool_result`) stays valid for the model's API and tells the model, as JSON text,
//! the task's id, status and URLs ([`task_text`]). The OpenAI answer also lists the
//! started tasks under `tasks` (beside `messages`, which are appended as they are).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_adapters::{JsonObject, ToolError};

use super::call::{self, Finished};
use super::tasks::TaskStarted;
use super::types::{self, Member, Object};
use super::{RestBody, caller_of, error, tasks};
use crate::access::Caller;
use crate::serve::auth::FrontDoor;
use crate::tasks::TaskRecord;
use crate::telemetry::CallTrace;

/// `POST /v1/tool_calls` as an object: an assistant message, or any object holding
/// its `tool_calls`.
#[derive(Deserialize, JsonSchema)]
pub(super) struct OpenAiToolCalls {
    // Each call is read on its own ([`OpenAiToolCall`]), so a problem names its index.
    #[serde(default)]
    #[schemars(!default, with = "Vec<OpenAiToolCall>")]
    tool_calls: Member<Vec<Value>>,
    #[serde(default)]
    session: Member<Option<String>>,
}

/// One OpenAI tool call, as in an assistant message.
#[derive(Deserialize, JsonSchema)]
pub(super) struct OpenAiToolCall {
    #[serde(default)]
    #[schemars(!default)]
    id: Member<String>,
    #[serde(rename = "type", default)]
    kind: Member<Option<FunctionKind>>,
    #[serde(default)]
    #[schemars(!default)]
    function: Member<Object<OpenAiFunction>>,
    /// Start this call in the background: its message carries the task (JSON text).
    #[serde(default)]
    background: Member<Option<bool>>,
}

/// Only function tool calls are run.
#[derive(Deserialize, JsonSchema)]
enum FunctionKind {
    #[serde(rename = "function")]
    Function,
}

#[derive(Deserialize, JsonSchema)]
struct OpenAiFunction {
    #[serde(default)]
    #[schemars(!default)]
    name: Member<String>,
    /// The arguments as a JSON-encoded object. Anything else (text that is not JSON, a
    /// number, …) is the model's mistake: it comes back as that call's tool message.
    arguments: Option<Value>,
}

/// `POST /v1/tool_calls`'s answer.
#[derive(Serialize, JsonSchema)]
pub(super) struct ToolMessages<'a> {
    /// `{"role": "tool", "tool_call_id", "content"}`, in the calls' order.
    messages: Vec<ToolMessage<'a>>,
    /// The calls started in the background, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    tasks: Option<Vec<BatchTask<'a>>>,
}

#[derive(Serialize, JsonSchema)]
struct ToolMessage<'a> {
    role: &'static str,
    tool_call_id: &'a str,
    content: String,
}

/// A background call started by a batch (beside the tool messages).
#[derive(Serialize, JsonSchema)]
struct BatchTask<'a> {
    #[serde(flatten)]
    task: TaskStarted<'a>,
    /// The call it was started for.
    tool_call_id: &'a str,
}

/// `POST /v1/tool_use` as an object: the assistant message with its `content`.
#[derive(Deserialize, JsonSchema)]
pub(super) struct AnthropicMessage {
    // Each block is read on its own ([`AnthropicBlock`]), so a problem names its index.
    #[serde(default)]
    #[schemars(!default, with = "Vec<AnthropicBlock>")]
    content: Member<Vec<Value>>,
    #[serde(default)]
    session: Member<Option<String>>,
}

/// One Anthropic content block; only `tool_use` blocks are run.
#[derive(Deserialize, JsonSchema)]
pub(super) struct AnthropicBlock {
    #[serde(rename = "type", default)]
    #[schemars(!default)]
    kind: Member<String>,
    /// Required on `tool_use` blocks (a string wherever it is present).
    #[serde(default)]
    id: Member<String>,
    /// Required on `tool_use` blocks (a string wherever it is present).
    #[serde(default)]
    name: Member<String>,
    /// The tool's arguments (an object; anything else comes back as an error result).
    input: Option<Value>,
    /// Start this call in the background: its `tool_result` carries the task (JSON
    /// text).
    #[serde(default)]
    background: Member<Option<bool>>,
}

/// `POST /v1/tool_use`'s answer: the user message to append.
#[derive(Serialize, JsonSchema)]
pub(super) struct ToolResults<'a> {
    role: &'static str,
    content: Vec<ToolResultBlock<'a>>,
}

#[derive(Serialize, JsonSchema)]
struct ToolResultBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    tool_use_id: &'a str,
    // Built as JSON ([`anthropic_block`]): text blocks, and images as base64 ones.
    #[schemars(with = "Vec<JsonObject>")]
    content: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
}

/// What the model reads of a call started in the background ([`task_text`]).
#[derive(Serialize)]
struct TaskNote<'a> {
    #[serde(flatten)]
    task: TaskStarted<'a>,
    note: &'static str,
}

/// One call as the model asked for it.
struct Request {
    id: String,
    name: String,
    /// The arguments, or why they cannot be used.
    arguments: Result<JsonObject, String>,
    /// Started as a background task rather than called.
    background: bool,
}

/// What became of one call of a batch.
enum BatchOutcome {
    Called(Finished),
    Started(Box<TaskRecord>),
}

pub(super) async fn openai(
    State(door): State<Arc<FrontDoor>>,
    Extension(trace): Extension<CallTrace>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    RestBody {
        caller: admitted,
        body,
    }: RestBody,
) -> Response {
    let expected = "expected the `tool_calls` array of an assistant message (the array itself, or an object holding it as `tool_calls`)";
    let parts = |message: OpenAiToolCalls| (message.tool_calls, message.session);
    let (items, session) = match read_batch(&body, &query, parts, expected) {
        Ok(batch) => batch,
        Err(message) => return invalid_body(message),
    };
    let mut requests = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        match openai_request(item) {
            Ok(request) => requests.push(request),
            Err(message) => return invalid_body(format!("tool_calls[{index}]: {message}")),
        }
    }
    let finished = match run(&door, &trace, &headers, admitted, session, &requests).await {
        Ok(finished) => finished,
        Err(response) => return response,
    };
    let messages = requests
        .iter()
        .zip(&finished)
        .map(|(request, entry)| ToolMessage {
            role: "tool",
            tool_call_id: &request.id,
            content: match entry {
                BatchOutcome::Called(finished) => finished.text_for_model(),
                BatchOutcome::Started(task) => task_text(task),
            },
        })
        .collect();
    let started: Vec<BatchTask> = requests
        .iter()
        .zip(&finished)
        .filter_map(|(request, entry)| match entry {
            BatchOutcome::Started(task) => Some(BatchTask {
                task: tasks::started(task),
                tool_call_id: &request.id,
            }),
            BatchOutcome::Called(_) => None,
        })
        .collect();
    let answer = ToolMessages {
        messages,
        tasks: Some(started).filter(|started| !started.is_empty()),
    };
    axum::Json(answer).into_response()
}

pub(super) async fn anthropic(
    State(door): State<Arc<FrontDoor>>,
    Extension(trace): Extension<CallTrace>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    RestBody {
        caller: admitted,
        body,
    }: RestBody,
) -> Response {
    let expected =
        "expected an assistant message with a `content` array of blocks (or the array itself)";
    let parts = |message: AnthropicMessage| (message.content, message.session);
    let (blocks, session) = match read_batch(&body, &query, parts, expected) {
        Ok(batch) => batch,
        Err(message) => return invalid_body(message),
    };
    let mut requests = Vec::new();
    for (index, block) in blocks.into_iter().enumerate() {
        match anthropic_request(block) {
            Ok(Some(request)) => requests.push(request),
            // Text and thinking blocks of the same message carry no call.
            Ok(None) => {}
            Err(message) => return invalid_body(format!("content[{index}]: {message}")),
        }
    }
    let finished = match run(&door, &trace, &headers, admitted, session, &requests).await {
        Ok(finished) => finished,
        Err(response) => return response,
    };
    let results = requests
        .iter()
        .zip(&finished)
        .map(|(request, entry)| match entry {
            BatchOutcome::Called(finished) => tool_result(&request.id, finished),
            BatchOutcome::Started(task) => ToolResultBlock {
                kind: "tool_result",
                tool_use_id: &request.id,
                content: vec![json!({"type": "text", "text": task_text(task)})],
                is_error: None,
            },
        })
        .collect();
    let answer = ToolResults {
        role: "user",
        content: results,
    };
    axum::Json(answer).into_response()
}

/// The calls of a batch body — the array itself, or the calls and session the object
/// `M` holds, which `parts` takes out — and the session it names; the error says what
/// is wrong (`expected` when the shape is). A `?session=` wins over the body's, which
/// is then not read.
fn read_batch<M: DeserializeOwned>(
    body: &[u8],
    query: &HashMap<String, String>,
    parts: impl FnOnce(M) -> (Member<Vec<Value>>, Member<Option<String>>),
    expected: &str,
) -> Result<(Vec<Value>, Option<String>), String> {
    let body: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let (items, session) = match body {
        Value::Array(items) => (Member::Given(items), Member::Absent),
        object @ Value::Object(_) => parts(types::fields_of(object).map_err(|e| e.to_string())?),
        _ => (Member::Absent, Member::Absent),
    };
    let session = match query.get("session") {
        Some(id) => Some(id.clone()),
        None => session
            .optional()
            .map_err(|()| "`session` must be a string".to_owned())?,
    };
    let items = items.given().ok_or_else(|| expected.to_owned())?;
    Ok((items, session))
}

fn invalid_body(message: String) -> Response {
    error(StatusCode::BAD_REQUEST, "invalid_body", message)
}

/// What the model reads back for a call started in the background: JSON text with the
/// task's id, status and URLs, and how to follow it.
fn task_text(task: &TaskRecord) -> String {
    let note = TaskNote {
        task: tasks::started(task),
        note: "The call runs in the background: its result is not here yet. GET status_url \
               for its status and, once completed, its result; events_url streams its progress.",
    };
    serde_json::to_string(&note).unwrap_or_default()
}

/// The call an OpenAI tool call asks for; the error says what is wrong with it, in the
/// order its members were always checked.
fn openai_request(item: Value) -> Result<Request, String> {
    let call: OpenAiToolCall = types::fields_of(item).map_err(|e| e.to_string())?;
    let id = call
        .id
        .given()
        .ok_or("each tool call needs its `id` (a string)")?;
    if call.kind.optional().is_err() {
        return Err("only tool calls of `type` `function` can be run".into());
    }
    let Object(function) = call
        .function
        .given()
        .ok_or("each tool call needs its `function` object")?;
    let name = function
        .name
        .given()
        .ok_or("`function.name` must be a string")?;
    let arguments = match function.arguments {
        // The API sends a JSON string; an object is taken as it is.
        Some(Value::String(text)) if text.trim().is_empty() => Ok(JsonObject::new()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(arguments)) => Ok(arguments),
            Ok(other) => Err(format!(
                "the arguments must be a JSON object, got {}",
                toolgate_adapters::error::json_kind(&other)
            )),
            Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
        },
        Some(Value::Object(arguments)) => Ok(arguments),
        None => Ok(JsonObject::new()),
        Some(other) => Err(format!(
            "the arguments must be a JSON object encoded as a string, got {}",
            toolgate_adapters::error::json_kind(&other)
        )),
    };
    Ok(Request {
        id,
        name,
        arguments,
        background: types::background(call.background)?,
    })
}

/// The call an Anthropic content block asks for, `None` for a block that is no
/// `tool_use`; the error says what is wrong with it, in the order its members were
/// always checked.
fn anthropic_request(block: Value) -> Result<Option<Request>, String> {
    let block: AnthropicBlock = types::fields_of(block).map_err(|e| e.to_string())?;
    if block.id.is_wrong() || block.name.is_wrong() {
        return Err("a block's `id` and `name` are strings".into());
    }
    // Typed like `id` and `name` on every block, as the document says, whether or not
    // the block is a call.
    let background = types::background(block.background)?;
    match block.kind {
        Member::Given(kind) if kind == "tool_use" => {}
        Member::Given(_) => return Ok(None),
        Member::Absent | Member::Wrong => {
            return Err("every content block needs a `type` (a string)".into());
        }
    }
    let id = block
        .id
        .given()
        .ok_or("each tool_use block needs its `id` (a string)")?;
    let name = block
        .name
        .given()
        .ok_or("each tool_use block needs its `name` (a string)")?;
    let arguments = match block.input {
        Some(Value::Object(input)) => Ok(input),
        None => Ok(JsonObject::new()),
        Some(other) => Err(format!(
            "the input must be a JSON object, got {}",
            toolgate_adapters::error::json_kind(&other)
        )),
    };
    Ok(Some(Request {
        id,
        name,
        arguments,
        background,
    }))
}

/// Runs the calls, at most `rest.batch_concurrency` at once, answers in request order.
async fn run(
    door: &Arc<FrontDoor>,
    trace: &CallTrace,
    headers: &HeaderMap,
    admitted: Caller,
    session: Option<String>,
    requests: &[Request],
) -> Result<Vec<BatchOutcome>, Response> {
    let config = door.gateway.config();
    if requests.len() > config.rest.batch_max_calls {
        return Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_calls",
            format!(
                "{} calls in one batch; at most {} are accepted (rest.batch_max_calls): split the batch",
                requests.len(),
                config.rest.batch_max_calls
            ),
        ));
    }
    let caller: Caller = caller_of(door, admitted, session.as_deref()).await?;
    let request_headers = Arc::new(headers.clone());
    let calls: Vec<_> = requests
        .iter()
        .enumerate()
        .map(|(index, request)| {
            one(
                door,
                trace,
                &caller,
                request,
                request_headers.clone(),
                config.call_timeout,
                // The request itself was admitted as the first call; each further call
                // costs one more unit of the tenant's rate limit.
                index > 0,
            )
        })
        .collect();
    let finished = futures::stream::iter(calls)
        .buffered(config.rest.batch_concurrency.max(1))
        .collect()
        .await;
    Ok(finished)
}

async fn one(
    door: &FrontDoor,
    trace: &CallTrace,
    caller: &Caller,
    request: &Request,
    request_headers: Arc<HeaderMap>,
    call_timeout: std::time::Duration,
    admit: bool,
) -> BatchOutcome {
    if admit && let Err(refusal) = door.gateway.count_request(&caller.tenant).await {
        return BatchOutcome::Called(over_limit(door, request, refusal));
    }
    let arguments = match &request.arguments {
        Ok(arguments) => arguments.clone(),
        Err(problem) => return BatchOutcome::Called(not_called(request, problem)),
    };
    if request.name.is_empty() {
        return BatchOutcome::Called(not_called(request, "the call names no tool"));
    }
    if request.background {
        return match tasks::start(
            door,
            caller,
            &request.name,
            arguments,
            request_headers,
            trace,
        )
        .await
        {
            Ok(task) => BatchOutcome::Started(Box::new(task)),
            Err(refusal) => BatchOutcome::Called(refused(request, refusal)),
        };
    }
    // The batch's calls share the request's trace (and so its correlation id).
    let mut ctx = trace.call_context(call_timeout);
    ctx.request_headers = request_headers;
    let finished = call::execute_cancellable(
        door.gateway.clone(),
        caller.clone(),
        request.name.clone(),
        arguments,
        ctx,
    )
    .await;
    BatchOutcome::Called(finished)
}

/// A call of a batch refused by the tenant's rate limit (each call costs one unit).
fn over_limit(door: &FrontDoor, request: &Request, refusal: crate::policy::Refusal) -> Finished {
    use crate::policy::Refusal;
    door.gateway.metrics.record_refusal(match &refusal {
        Refusal::RateLimited { .. } => "rate_limited",
        Refusal::LimiterUnavailable { .. } => "state_unavailable",
        Refusal::Unauthenticated => "missing_credentials",
    });
    let error = match refusal {
        Refusal::RateLimited { retry_after } => ToolError::RateLimited {
            message: format!(
                "this call is over the tenant's rate limit (every call of a batch counts); \
                 retry '{}' in {}",
                request.name,
                toolgate_adapters::error::duration_text(
                    retry_after.max(std::time::Duration::from_millis(1))
                )
            ),
            retry_after: Some(retry_after),
        },
        Refusal::LimiterUnavailable { message } => ToolError::Unavailable(message),
        Refusal::Unauthenticated => ToolError::Unavailable(
            "the tenant's credentials are no longer accepted; authenticate again".into(),
        ),
    };
    refused(request, error)
}

/// A call that was never made: the model's request itself was wrong.
fn not_called(request: &Request, problem: &str) -> Finished {
    let error = ToolError::InvalidArgs(format!(
        "{problem}. Call '{}' again with a JSON object of arguments that matches its input schema",
        request.name
    ));
    refused(request, error)
}

/// A call refused before it ran, with `error` as its answer.
fn refused(request: &Request, error: ToolError) -> Finished {
    Finished {
        summary: crate::summary::failed(&request.name, &error),
        outcome: Err(error),
        usage: None,
        duration: std::time::Duration::ZERO,
    }
}

/// An Anthropic `tool_result` block for one finished call.
fn tool_result<'a>(id: &'a str, finished: &Finished) -> ToolResultBlock<'a> {
    let content: Vec<Value> = match &finished.outcome {
        Err(_) => vec![json!({"type": "text", "text": finished.text_for_model()})],
        Ok(raw) => {
            let mut content: Vec<Value> = crate::summary::content_blocks(raw)
                .iter()
                .map(anthropic_block)
                .collect();
            if content.is_empty() {
                content.push(json!({"type": "text", "text": finished.text_for_model()}));
            }
            content
        }
    };
    ToolResultBlock {
        kind: "tool_result",
        tool_use_id: id,
        content,
        is_error: finished.is_error().then_some(true),
    }
}

/// An MCP content block as an Anthropic one: text as text, images as base64 images,
/// anything else described in text.
fn anthropic_block(block: &Value) -> Value {
    if block.get("type").and_then(Value::as_str) == Some("image")
        && let (Some(data), Some(mime)) = (
            block.get("data").and_then(Value::as_str),
            block.get("mimeType").and_then(Value::as_str),
        )
    {
        return json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}});
    }
    json!({"type": "text", "text": call::block_as_text(block)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_arguments_are_parsed_or_explained() {
        let ok = openai_request(json!({"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{\"a\":1}"}})).unwrap();
        assert_eq!(ok.arguments.unwrap()["a"], 1);
        let empty = openai_request(json!({"id": "c2", "function": {"name": "t", "arguments": ""}}))
            .unwrap();
        assert!(empty.arguments.unwrap().is_empty());
        let broken =
            openai_request(json!({"id": "c3", "function": {"name": "t", "arguments": "{\"a\":"}}))
                .unwrap();
        assert!(broken.arguments.unwrap_err().contains("not valid JSON"));
        let array =
            openai_request(json!({"id": "c4", "function": {"name": "t", "arguments": "[1]"}}))
                .unwrap();
        assert!(array.arguments.unwrap_err().contains("an array"));
        assert!(openai_request(json!({"function": {"name": "t"}})).is_err());
    }

    #[test]
    fn anthropic_blocks_map_images_and_text() {
        let image =
            anthropic_block(&json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}));
        assert_eq!(image["source"]["media_type"], "image/png");
        let text = anthropic_block(&json!({"type": "text", "text": "hi"}));
        assert_eq!(text, json!({"type": "text", "text": "hi"}));
        let audio =
            anthropic_block(&json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}));
        assert!(audio["text"].as_str().unwrap().contains("audio/wav"));
    }
}
