//! A background call's questions to its owner: the downstream client of a task's
//! call. A task has no connection to ask on (its requestor polls, perhaps on another
//! replica, perhaps later), so an upstream's `elicitation/create`,
//! `sampling/createMessage` or `roots/list` made during the call is recorded in the
//! task store as an input request (the task becomes `input_required`), and the call
//! waits until the owner's answer is in the store — put there by any replica's
//! surface: 2026-07-28 `tasks/update`, 2025-11-25 `tasks/result`, REST
//! `POST /v1/tasks/{id}/input` — or until the call is cancelled or out of time.
//!
//! Answers are stored as raw results; a client that answered with a JSON-RPC error
//! is stored as [`error_answer`] and read back by [`answer_of`], the one place that
//! tells the two apart.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_adapters::{ClientBridge, RpcError};

use super::{InputRequest, Owner, TaskError, TaskId, Tasks};

const INTERNAL_ERROR: i64 = -32603;

/// The stored form of a client's error answer: an object with only `error`, which
/// no MCP result (elicitation, sampling, roots) is.
pub fn error_answer(error: &RpcError) -> Value {
    let mut inner = json!({"code": error.code, "message": error.message});
    if let Some(data) = &error.data {
        inner["data"] = data.clone();
    }
    json!({"error": inner})
}

/// A stored answer as the upstream gets it: the result, or the client's error.
pub fn answer_of(stored: &Value) -> Result<Value, RpcError> {
    let error = stored
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.get("error"))
        .filter(|e| e.get("code").is_some_and(Value::is_i64));
    match error {
        Some(error) => Err(RpcError {
            code: error["code"].as_i64().unwrap_or(INTERNAL_ERROR),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the client refused the request")
                .to_owned(),
            data: error.get("data").cloned(),
        }),
        None => Ok(stored.clone()),
    }
}

/// The [`ClientBridge`] of one task's call.
pub(super) struct TaskInput {
    pub tasks: Arc<Tasks>,
    pub owner: Owner,
    pub id: TaskId,
    /// The call's own deadline and cancellation: no question outlives the call.
    pub deadline: std::time::Instant,
    pub cancel: CancellationToken,
    /// Keys are `input-N`, N counting this call's questions: unique for the task's
    /// life, as only this replica runs it.
    pub next: AtomicU64,
}

fn refused(message: String) -> RpcError {
    RpcError {
        code: INTERNAL_ERROR,
        message,
        data: None,
    }
}

#[async_trait]
impl ClientBridge for TaskInput {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let key = format!("input-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let request = InputRequest {
            method: method.to_owned(),
            params,
        };
        self.tasks
            .store
            .ask_input(&self.owner, &self.id, &key, request)
            .await
            .map_err(|e| refused(format!("the task could not ask its owner: {e}")))?;
        self.tasks.bump();
        let max = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        let waited = tokio::select! {
            waited = self.tasks.wait_until(&self.owner, self.id.as_str(), max, |task| {
                task.input_responses.contains_key(&key)
            }) => waited,
            _ = self.cancel.cancelled() => {
                return Err(refused("the task was cancelled before its owner answered".into()));
            }
        };
        match waited {
            Ok(Some(task)) => match task.input_responses.get(&key) {
                Some(answer) => answer_of(answer),
                None if task.state.is_terminal() => Err(refused(format!(
                    "the task is {} before its owner answered",
                    task.state
                ))),
                None => Err(refused(
                    "the task's owner did not answer before the call's deadline".into(),
                )),
            },
            Ok(None) => Err(refused("the task is gone".into())),
            Err(error) => Err(store_failure(&error)),
        }
    }

    /// A task has no stream to carry a notification: its progress is in the store,
    /// and a log line about it has no reader.
    fn notify(&self, method: &str, _params: Value) {
        tracing::debug!(task = %self.id, method, "a background call's notification dropped");
    }
}

fn store_failure(error: &TaskError) -> RpcError {
    refused(format!(
        "the task store failed while waiting for the answer: {error}"
    ))
}
