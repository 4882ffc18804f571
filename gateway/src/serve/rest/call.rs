//! One tool call over HTTP, shared by `POST /v1/tools/{name}/call` (plain and
//! streamed) and the batch endpoints: name resolution, argument clean-up for
//! function-calling clients, the policy-checked call, and the answer with its summary.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use serde_json::Value;
use toolgate_adapters::{CallContext, JsonObject, ToolError};

use crate::access::Caller;
use crate::call::{ResultUsage, protocol_tools};
use crate::export::{self, Format};
use crate::gateway::Gateway;
use crate::summary;

/// What a result without `content` answers as its content.
static EMPTY_CONTENT: Value = Value::Array(Vec::new());

/// The answer of one call over HTTP.
// Field order is the wire order. `CallAnswer` in `/openapi.json`, as it always was.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "CallAnswer")]
pub(super) struct Answer<'a> {
    /// MCP content blocks.
    // The result's own blocks, borrowed and passed through as they are.
    #[schemars(with = "Vec<JsonObject>")]
    content: &'a Value,
    is_error: bool,
    /// One human line: `GET /pets/42 → 200 (1.2 KB)`.
    summary: &'a str,
    usage: AnswerUsage,
    // The result's own `structuredContent`, passed through as it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<JsonObject>")]
    structured_content: Option<&'a Value>,
}

/// The result's size in tokens, and whether the result budget cut it.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "Usage")]
pub(super) struct AnswerUsage {
    truncated: bool,
    result_tokens: Option<usize>,
    original_tokens: Option<usize>,
}

impl AnswerUsage {
    /// What a stored result says of its tokens: the counts the budget wrote in its
    /// `_meta` when it cut the result, none when it passed untouched (a background
    /// task keeps the result, not the call's counts).
    pub(super) fn from_meta(raw: &JsonObject) -> AnswerUsage {
        let meta = raw.get("_meta").and_then(Value::as_object);
        let count = |key: &str| {
            meta.and_then(|m| m.get(key))
                .and_then(Value::as_u64)
                .map(|n| n as usize)
        };
        AnswerUsage {
            truncated: meta
                .and_then(|m| m.get("toolgate/truncated"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            result_tokens: count("toolgate/resultTokens"),
            original_tokens: count("toolgate/originalTokens"),
        }
    }
}

impl<'a> Answer<'a> {
    pub(super) fn result_tokens(&self) -> Option<usize> {
        self.usage.result_tokens
    }

    /// The answer for a raw `CallToolResult`.
    pub(super) fn new(raw: &'a JsonObject, summary: &'a str, usage: AnswerUsage) -> Answer<'a> {
        Answer {
            content: raw.get("content").unwrap_or(&EMPTY_CONTENT),
            is_error: is_error(raw),
            summary,
            usage,
            structured_content: raw.get("structuredContent"),
        }
    }
}

/// Whether a raw result reports an error (`isError`).
pub(super) fn is_error(raw: &JsonObject) -> bool {
    raw.get("isError").and_then(Value::as_bool).unwrap_or(false)
}

/// A finished call: its result or the error that stopped it, and the summary line.
pub(super) struct Finished {
    pub outcome: Result<JsonObject, ToolError>,
    /// Token counts of the result (none for protocol tools and failed calls).
    pub usage: Option<ResultUsage>,
    pub summary: String,
    pub duration: Duration,
}

impl Finished {
    pub(super) fn is_error(&self) -> bool {
        self.outcome.as_ref().map_or(true, is_error)
    }

    /// Tokens of the returned result (none when no result came back from a tool).
    pub(super) fn result_tokens(&self) -> Option<usize> {
        self.usage.map(|u| u.result_tokens)
    }

    /// The answer of `POST /v1/tools/{name}/call`: `{content, is_error, summary,
    /// usage, structured_content?}`, borrowing the result (it is serialized once,
    /// never copied into a tree). `None` for a call that failed (an HTTP error).
    pub(super) fn answer(&self) -> Option<Answer<'_>> {
        let raw = self.outcome.as_ref().ok()?;
        let usage = AnswerUsage {
            truncated: self.usage.is_some_and(|u| u.truncated),
            result_tokens: self.usage.map(|u| u.result_tokens),
            original_tokens: self.usage.map(|u| u.original_tokens),
        };
        Some(Answer::new(raw, &self.summary, usage))
    }

    /// The text a model reads back: the result's text blocks (other blocks described
    /// in a line each), or the error with its kind and what to do about it.
    pub(super) fn text_for_model(&self) -> String {
        match &self.outcome {
            Err(error) => format!("Error ({}): {error}", error.code()),
            Ok(raw) => {
                let mut parts: Vec<String> = summary::content_blocks(raw)
                    .iter()
                    .map(block_as_text)
                    .collect();
                if parts.is_empty()
                    && let Some(structured) = raw.get("structuredContent")
                {
                    parts.push(structured.to_string());
                }
                parts.join("\n")
            }
        }
    }
}

/// A content block as text: text as it is, anything else as a one-line description.
pub(super) fn block_as_text(block: &Value) -> String {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => block
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        "resource" => {
            let resource = block.get("resource");
            match resource.and_then(|r| r.get("text")).and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => format!(
                    "[resource {}]",
                    resource
                        .and_then(|r| r.get("uri"))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                ),
            }
        }
        "resource_link" => format!(
            "[resource link {}]",
            block.get("uri").and_then(Value::as_str).unwrap_or("?")
        ),
        _ => {
            let mime = block
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("unknown type");
            let bytes = block
                .get("data")
                .and_then(Value::as_str)
                .map_or(0, |d| d.len() * 3 / 4);
            format!(
                "[{} content: {mime}, {} — not shown as text]",
                if kind.is_empty() { "binary" } else { kind },
                summary::size(bytes as u64)
            )
        }
    }
}

/// The catalog name a function-calling client means: the name itself, or, for a name
/// that Gemini's rules made us rename (a leading `_`), the tool it was made from.
pub(super) fn resolve_name(gateway: &Gateway, caller: &Caller, name: &str) -> String {
    if protocol_tools::is_protocol_tool(name) {
        return name.to_owned();
    }
    let catalog = crate::access::View::of(gateway, caller).catalog;
    if catalog.get(name).is_some() || !name.starts_with('_') {
        return name.to_owned();
    }
    catalog
        .entries()
        .iter()
        .find(|entry| export::export_name(&entry.name, Format::Gemini).as_deref() == Ok(name))
        .map(|entry| entry.name.clone())
        .unwrap_or_else(|| name.to_owned())
}

/// The catalog name a call means ([`resolve_name`]) with its arguments made ready for
/// that tool: the strict and Gemini exports ask for some values as JSON strings, and
/// OpenAI strict mode sends `null` for the optional arguments it leaves out; the tool's
/// own schema would reject both, so they are turned back here, for every format and
/// for plain and background calls alike.
pub(super) fn prepare(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    arguments: &mut JsonObject,
) -> String {
    let catalog = crate::access::View::of(gateway, caller).catalog;
    let name = resolve_name(gateway, caller, name);
    if let Some(entry) = catalog.get(&name) {
        export::prepare_call_arguments(entry.get("inputSchema"), arguments);
    } else if let Some(definition) = protocol_tools::definition(&name) {
        export::prepare_call_arguments(definition.get("inputSchema"), arguments);
    }
    name
}

/// Runs one call through the policy and the one call path, and summarizes it.
pub(super) async fn execute(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    mut arguments: JsonObject,
    ctx: CallContext,
) -> Finished {
    let started = Instant::now();
    let name = prepare(gateway, caller, name, &mut arguments);
    let (outcome, usage) = match crate::call::call(gateway, caller, &name, arguments, ctx).await {
        Ok(called) => (Ok(called.output.into_object()), called.usage),
        Err(error) => (Err(error), None),
    };
    let summary = match &outcome {
        Ok(output) => summary::complete(&name, output),
        Err(error) => summary::failed(&name, error),
    };
    Finished {
        outcome,
        usage,
        summary,
        duration: started.elapsed(),
    }
}

/// [`execute`] for a caller that may hang up. The call runs in the caller's task; if
/// the caller drops it before the end (the client went away, so the request handler
/// was dropped), the call is cancelled and moved to a task of its own, which runs on
/// until the upstream has been told (`notifications/cancelled`, or the request
/// aborted) and the call path has written its audit line and metric with outcome
/// `cancelled`. No task per call otherwise: spawning one cost a tool call about as
/// much as the router's layers.
pub(super) async fn execute_cancellable(
    gateway: Arc<Gateway>,
    caller: Caller,
    name: String,
    arguments: JsonObject,
    ctx: CallContext,
) -> Finished {
    let cancel = ctx.cancel.clone();
    let call = {
        let name = name.clone();
        Box::pin(async move { execute(&gateway, &caller, &name, arguments, ctx).await })
    };
    FinishOnDrop {
        call: Some(call),
        cancel,
        name,
        started: Instant::now(),
    }
    .await
}

/// A call polled by its caller and handed to a task of its own when the caller drops
/// it unfinished ([`execute_cancellable`]).
struct FinishOnDrop {
    call: Option<Pin<Box<dyn Future<Output = Finished> + Send>>>,
    cancel: CancellationToken,
    name: String,
    started: Instant,
}

impl Future for FinishOnDrop {
    type Output = Finished;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Finished> {
        let Some(call) = self.call.as_mut() else {
            return Poll::Pending;
        };
        // A panic inside the call answers as a failed call, as it did when the call ran
        // in a task of its own, instead of taking the connection down.
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx)));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(finished)) => {
                self.call = None;
                Poll::Ready(finished)
            }
            Err(_) => {
                self.call = None;
                let error = ToolError::Failed(format!(
                    "the call to '{}' stopped unexpectedly inside the gateway; retry it",
                    self.name
                ));
                Poll::Ready(Finished {
                    summary: summary::failed(&self.name, &error),
                    outcome: Err(error),
                    usage: None,
                    duration: self.started.elapsed(),
                })
            }
        }
    }
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        // Cancelled when the caller is done with it, finished or not (nothing of the
        // call outlives its answer).
        self.cancel.cancel();
        if let Some(call) = self.call.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(call);
        }
    }
}
