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
use serde_json::{Value, json};
use toolgate_adapters::{JsonObject, ToolError};

use super::call::{self, Finished};
use super::{RestBody, caller_of, error, tasks};
use crate::access::Caller;
use crate::serve::auth::FrontDoor;
use crate::tasks::TaskRecord;
use crate::telemetry::CallTrace;

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
    let (items, session) = match read_batch(&body, &query, "tool_calls", expected) {
        Ok(batch) => batch,
        Err(message) => return invalid_body(message),
    };
    let mut requests = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match openai_request(item) {
            Ok(request) => requests.push(request),
            Err(message) => return invalid_body(format!("tool_calls[{index}]: {message}")),
        }
    }
    let finished = match run(&door, &trace, &headers, admitted, session, &requests).await {
        Ok(finished) => finished,
        Err(response) => return response,
    };
    let messages: Vec<Value> = requests
        .iter()
        .zip(&finished)
        .map(|(request, entry)| {
            let content = match entry {
                BatchOutcome::Called(finished) => finished.text_for_model(),
                BatchOutcome::Started(task) => task_text(task),
            };
            json!({"role": "tool", "tool_call_id": request.id, "content": content})
        })
        .collect();
    let started: Vec<Value> = requests
        .iter()
        .zip(&finished)
        .filter_map(|(request, entry)| match entry {
            BatchOutcome::Started(task) => {
                let mut task = tasks::started(task);
                task["tool_call_id"] = json!(request.id);
                Some(task)
            }
            BatchOutcome::Called(_) => None,
        })
        .collect();
    let mut answer = json!({"messages": messages});
    if !started.is_empty() {
        answer["tasks"] = Value::Array(started);
    }
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
    let (blocks, session) = match read_batch(&body, &query, "content", expected) {
        Ok(batch) => batch,
        Err(message) => return invalid_body(message),
    };
    let mut requests = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        if ["id", "name"]
            .iter()
            .any(|key| block.get(*key).is_some_and(|v| !v.is_string()))
        {
            return invalid_body(format!(
                "content[{index}]: a block's `id` and `name` are strings"
            ));
        }
        // Typed like `id` and `name` on every block, as the document says, whether or
        // not the block is a call.
        if let Err(message) = tasks::background_flag(block.get("background")) {
            return invalid_body(format!("content[{index}]: {message}"));
        }
        match block.get("type") {
            Some(Value::String(kind)) if kind == "tool_use" => {}
            // Text and thinking blocks of the same message carry no call.
            Some(Value::String(_)) => continue,
            _ => {
                return invalid_body(format!(
                    "content[{index}]: every content block needs a `type` (a string)"
                ));
            }
        }
        match anthropic_request(block) {
            Ok(request) => requests.push(request),
            Err(message) => return invalid_body(format!("content[{index}]: {message}")),
        }
    }
    let finished = match run(&door, &trace, &headers, admitted, session, &requests).await {
        Ok(finished) => finished,
        Err(response) => return response,
    };
    let results: Vec<Value> = requests
        .iter()
        .zip(&finished)
        .map(|(request, entry)| match entry {
            BatchOutcome::Called(finished) => tool_result(&request.id, finished),
            BatchOutcome::Started(task) => json!({
                "type": "tool_result",
                "tool_use_id": request.id,
                "content": [{"type": "text", "text": task_text(task)}],
            }),
        })
        .collect();
    axum::Json(json!({"role": "user", "content": results})).into_response()
}

/// The calls of a batch body — the array itself, or the object's `key` — and the session
/// it names; the error says what is wrong (`expected` when the shape is).
fn read_batch(
    body: &[u8],
    query: &HashMap<String, String>,
    key: &str,
    expected: &str,
) -> Result<(Vec<Value>, Option<String>), String> {
    let body: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let session = session_of(&body, query)?;
    let items = match body {
        Value::Array(items) => items,
        Value::Object(mut fields) => match fields.remove(key) {
            Some(Value::Array(items)) => items,
            _ => return Err(expected.to_owned()),
        },
        _ => return Err(expected.to_owned()),
    };
    Ok((items, session))
}

/// The session named by `?session=` or the body's `session` (a string when present).
fn session_of(body: &Value, query: &HashMap<String, String>) -> Result<Option<String>, String> {
    if let Some(id) = query.get("session") {
        return Ok(Some(id.clone()));
    }
    match body.get("session") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) => Ok(Some(id.clone())),
        Some(_) => Err("`session` must be a string".into()),
    }
}

fn invalid_body(message: String) -> Response {
    error(StatusCode::BAD_REQUEST, "invalid_body", message)
}

/// What the model reads back for a call started in the background: JSON text with the
/// task's id, status and URLs, and how to follow it.
fn task_text(task: &TaskRecord) -> String {
    let mut text = tasks::started(task);
    text["note"] = json!(
        "The call runs in the background: its result is not here yet. GET status_url \
         for its status and, once completed, its result; events_url streams its progress."
    );
    text.to_string()
}

fn openai_request(item: &Value) -> Result<Request, String> {
    let id = item
        .get("id")
        .and_then(Value::as_str)
        .ok_or("each tool call needs its `id` (a string)")?;
    match item.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "function" => {}
        Some(_) => return Err("only tool calls of `type` `function` can be run".into()),
    }
    let function = item
        .get("function")
        .filter(|f| f.is_object())
        .ok_or("each tool call needs its `function` object")?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or("`function.name` must be a string")?;
    let arguments = match function.get("arguments") {
        // The API sends a JSON string; an object is taken as it is.
        Some(Value::String(text)) if text.trim().is_empty() => Ok(JsonObject::new()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(arguments)) => Ok(arguments),
            Ok(other) => Err(format!(
                "the arguments must be a JSON object, got {}",
                toolgate_adapters::error::json_kind(&other)
            )),
            Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
        },
        Some(Value::Object(arguments)) => Ok(arguments.clone()),
        None | Some(Value::Null) => Ok(JsonObject::new()),
        Some(other) => Err(format!(
            "the arguments must be a JSON object encoded as a string, got {}",
            toolgate_adapters::error::json_kind(other)
        )),
    };
    Ok(Request {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments,
        background: tasks::background_flag(item.get("background"))?,
    })
}

fn anthropic_request(block: &Value) -> Result<Request, String> {
    let id = block
        .get("id")
        .and_then(Value::as_str)
        .ok_or("each tool_use block needs its `id` (a string)")?;
    let name = block
        .get("name")
        .and_then(Value::as_str)
        .ok_or("each tool_use block needs its `name` (a string)")?;
    let arguments = match block.get("input") {
        Some(Value::Object(input)) => Ok(input.clone()),
        None | Some(Value::Null) => Ok(JsonObject::new()),
        Some(other) => Err(format!(
            "the input must be a JSON object, got {}",
            toolgate_adapters::error::json_kind(other)
        )),
    };
    Ok(Request {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments,
        background: tasks::background_flag(block.get("background"))?,
    })
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
fn tool_result(id: &str, finished: &Finished) -> Value {
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
    let mut result = json!({"type": "tool_result", "tool_use_id": id, "content": content});
    if finished.is_error() {
        result["is_error"] = json!(true);
    }
    result
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
        let ok = openai_request(&json!({"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{\"a\":1}"}})).unwrap();
        assert_eq!(ok.arguments.unwrap()["a"], 1);
        let empty =
            openai_request(&json!({"id": "c2", "function": {"name": "t", "arguments": ""}}))
                .unwrap();
        assert!(empty.arguments.unwrap().is_empty());
        let broken =
            openai_request(&json!({"id": "c3", "function": {"name": "t", "arguments": "{\"a\":"}}))
                .unwrap();
        assert!(broken.arguments.unwrap_err().contains("not valid JSON"));
        let array =
            openai_request(&json!({"id": "c4", "function": {"name": "t", "arguments": "[1]"}}))
                .unwrap();
        assert!(array.arguments.unwrap_err().contains("an array"));
        assert!(openai_request(&json!({"function": {"name": "t"}})).is_err());
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
