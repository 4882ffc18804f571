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

use toolgate_adapters::codes::INTERNAL_ERROR;

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
        // Until answered, a question the call stops waiting for (cancelled, out of
        // time, the upstream gave up) is withdrawn, so the task does not stay
        // `input_required` for a question nobody waits for.
        let mut pending = Withdraw {
            input: Some((self.tasks.clone(), self.owner.clone(), self.id.clone())),
            key: key.clone(),
        };
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
                Some(answer) => {
                    pending.input = None;
                    answer_of(answer)
                }
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

    /// The owner answers when it polls, perhaps much later: the call's own deadline
    /// is the bound, not the adapter's.
    fn answer_within(&self) -> Option<std::time::Duration> {
        Some(
            self.deadline
                .saturating_duration_since(std::time::Instant::now()),
        )
    }

    /// A task has no stream to carry a notification: its progress is in the store,
    /// and a log line about it has no reader.
    fn notify(&self, method: &str, _params: Value) {
        tracing::debug!(task = %self.id, method, "a background call's notification dropped");
    }
}

/// Withdraws a question when dropped unanswered: it is answered with an error in
/// the store (the key is then used, as any answered one), which takes the task back
/// to `working` when it was the last one.
struct Withdraw {
    input: Option<(Arc<Tasks>, Owner, TaskId)>,
    key: String,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let Some((tasks, owner, id)) = self.input.take() else {
            return;
        };
        let withdrawn = error_answer(&refused("the call stopped waiting for this answer".into()));
        let answers = std::iter::once((std::mem::take(&mut self.key), withdrawn)).collect();
        // Dropped outside a runtime only at process exit: nothing left to tidy.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if tasks.store.answer_input(&owner, &id, answers).await.is_ok() {
                    tasks.bump();
                }
            });
        }
    }
}

fn store_failure(error: &TaskError) -> RpcError {
    refused(format!(
        "the task store failed while waiting for the answer: {error}"
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::TasksConfig;
    use crate::state::tasks::memory::MemoryTaskStore;
    use crate::state::tasks::{TaskState, suite};

    /// A running task and the bridge of its call, answering within `timeout`.
    async fn bridge(timeout: Duration) -> (Arc<Tasks>, Arc<TaskInput>) {
        let config = TasksConfig::default();
        let tasks = Tasks::new(&config, Arc::new(MemoryTaskStore::new(&config)));
        let owner = Owner::tenant("acme");
        let task = tasks.store.create(suite::new_task(&owner)).await.unwrap();
        let input = Arc::new(TaskInput {
            tasks: tasks.clone(),
            owner,
            id: task.id,
            deadline: std::time::Instant::now() + timeout,
            cancel: CancellationToken::new(),
            next: Default::default(),
        });
        (tasks, input)
    }

    /// The task once it asks something (bounded wait).
    async fn asking(tasks: &Tasks, input: &TaskInput) -> crate::tasks::TaskRecord {
        let id = input.id.as_str();
        let task = tasks
            .wait_until(&input.owner, id, Duration::from_secs(5), |t| {
                !t.input_requests.is_empty()
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(task.state, TaskState::InputRequired);
        task
    }

    #[tokio::test]
    async fn a_question_waits_for_the_owners_answer_or_error() {
        let (tasks, input) = bridge(Duration::from_secs(30)).await;
        let asker = input.clone();
        let question = tokio::spawn(async move {
            asker
                .request("elicitation/create", json!({"message": "which?"}))
                .await
        });
        let task = asking(&tasks, &input).await;
        let request = &task.input_requests["input-1"];
        assert_eq!(request.method, "elicitation/create");
        assert_eq!(request.params["message"], "which?");
        let answer = json!({"action": "accept", "content": {"x": 1}});
        let answers = std::iter::once(("input-1".to_owned(), answer.clone())).collect();
        tasks
            .answer_input(&input.owner, input.id.as_str(), answers)
            .await
            .unwrap();
        assert_eq!(question.await.unwrap(), Ok(answer));
        let after = tasks.get(&input.owner, input.id.as_str()).await.unwrap();
        assert_eq!(after.unwrap().state, TaskState::Working);

        // A client's error answer is the upstream's error; the next key is new.
        let asker = input.clone();
        let question =
            tokio::spawn(async move { asker.request("sampling/createMessage", json!({})).await });
        asking(&tasks, &input).await;
        let refusal = RpcError {
            code: -1,
            message: "user rejected".into(),
            data: None,
        };
        let answers = std::iter::once(("input-2".to_owned(), error_answer(&refusal))).collect();
        tasks
            .answer_input(&input.owner, input.id.as_str(), answers)
            .await
            .unwrap();
        assert_eq!(question.await.unwrap(), Err(refusal));
    }

    #[tokio::test]
    async fn a_question_past_the_deadline_or_cancelled_is_withdrawn() {
        let (tasks, input) = bridge(Duration::from_millis(300)).await;
        let error = input.request("roots/list", json!({})).await.unwrap_err();
        assert!(error.message.contains("deadline"), "{error:?}");
        let back = tasks
            .wait_until(
                &input.owner,
                input.id.as_str(),
                Duration::from_secs(5),
                |t| t.state == TaskState::Working,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back.state, TaskState::Working, "withdrawn: {back:?}");
        assert!(back.input_requests.is_empty());

        let (tasks, input) = bridge(Duration::from_secs(30)).await;
        let asker = input.clone();
        let question = tokio::spawn(async move { asker.request("roots/list", json!({})).await });
        asking(&tasks, &input).await;
        input.cancel.cancel();
        let error = question.await.unwrap().unwrap_err();
        assert!(error.message.contains("cancelled"), "{error:?}");
    }

    #[test]
    fn only_an_error_object_reads_back_as_an_error() {
        let error = RpcError {
            code: toolgate_adapters::codes::INVALID_REQUEST,
            message: "no".into(),
            data: Some(json!({"why": 1})),
        };
        assert_eq!(answer_of(&error_answer(&error)), Err(error));
        for result in [
            json!({"action": "accept", "content": {"error": 1}}),
            json!({"error": "text, not a JSON-RPC error"}),
            json!({"roots": []}),
        ] {
            assert_eq!(answer_of(&result), Ok(result.clone()));
        }
    }
}
