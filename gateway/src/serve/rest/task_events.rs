//! `GET /v1/tasks/{id}/events`: a task's tool-call event stream (SSE), in the event
//! names and shapes of the streamed call (`stream.rs`), resumable from any replica.
//!
//! The events are a function of the stored task alone ([`events`]): `tool_call_start`
//! (id 0), one `tool_progress` per entry of its progress log (ids 1…n), and once it is
//! over a `closed: true` progress event (when there was progress), `tool_call_complete`
//! and `result`. The log only grows while the task runs and nothing changes once it is
//! over, so every event keeps its id: a client that reconnects with `Last-Event-ID: N`
//! (on any replica) gets exactly the events after N — none lost, none repeated.
//!
//! The stream sends what is there, then waits for changes (woken at once by changes on
//! this replica, polling the store for other replicas'), with a keep-alive comment
//! every [`KEEP_ALIVE`]; it ends after `result`, when the task is gone, or after
//! [`MAX_LIFE`] (the client reconnects with `Last-Event-ID`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::tasks::{self, TaskQuery};
use super::types::{ErrorBody, ErrorDetail};
use super::{error, stream};
use crate::serve::auth::FrontDoor;
use crate::tasks::{Owner, TaskRecord};

/// How long the stream may go without sending anything: a comment line then keeps
/// proxies from closing it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Longest one connection lasts; the client resumes with `Last-Event-ID`.
const MAX_LIFE: Duration = Duration::from_secs(10 * 60);

/// The largest `Last-Event-ID` taken: the largest integer every JSON and JavaScript
/// client holds exactly (ids are far smaller).
pub(super) const MAX_EVENT_ID: u64 = (1 << 53) - 1;

/// One event of a task's stream.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Event {
    pub id: u64,
    pub name: &'static str,
    pub data: Value,
}

/// Every event the task has so far, in order, each with its stable id.
pub(super) fn events(record: &TaskRecord) -> Vec<Event> {
    let tool_call_id = record.id.as_str();
    let mut out = Vec::with_capacity(record.progress_log.len() + 4);
    out.push(Event {
        id: 0,
        name: "tool_call_start",
        data: json!({
            "tool_call_id": tool_call_id,
            "task_id": record.id,
            "tool": record.tool,
            "summary": crate::summary::start(&record.tool, &Default::default()),
        }),
    });
    for progress in &record.progress_log {
        let mut data = json!({
            "tool_call_id": tool_call_id,
            "text": progress.message.as_ref().map(|m| format!("{m}\n")).unwrap_or_default(),
            "stream": crate::coalesce::Stream::Info.as_str(),
            "progress": progress.progress,
            "closed": false,
        });
        if let Some(total) = progress.total {
            data["total"] = json!(total);
        }
        push(&mut out, "tool_progress", data);
    }
    if !record.state.is_terminal() {
        return out;
    }
    if !record.progress_log.is_empty() {
        let closed = json!({
            "tool_call_id": tool_call_id,
            "text": "",
            "stream": crate::coalesce::Stream::Info.as_str(),
            "closed": true,
        });
        push(&mut out, "tool_progress", closed);
    }
    let summary = tasks::summary(record);
    let ending = tasks::ending(record, &summary);
    let (is_error, result_tokens, result) = match ending {
        Some(tasks::Ending {
            answer: Some(answer),
            ..
        }) => {
            let value = serde_json::to_value(&answer).unwrap_or_default();
            (value["is_error"] == true, answer.result_tokens(), value)
        }
        Some(tasks::Ending {
            error: Some(error), ..
        }) => (true, None, error_body(ErrorDetail::of(&error))),
        // Completed without a stored result: nothing to show but that.
        _ => (
            false,
            None,
            error_body(ErrorDetail::new("failed", "no result")),
        ),
    };
    let complete = json!({
        "tool_call_id": tool_call_id,
        "is_error": is_error,
        "summary": summary,
        "duration_ms": record.updated_ms.saturating_sub(record.created_ms),
        "result_tokens": result_tokens,
        "status": record.state.as_str(),
    });
    push(&mut out, "tool_call_complete", complete);
    push(&mut out, "result", result);
    out
}

/// A `result` event's data for a call that has no result: the REST error body.
fn error_body(error: ErrorDetail) -> Value {
    serde_json::to_value(ErrorBody::from(error)).unwrap_or_default()
}

fn push(out: &mut Vec<Event>, name: &'static str, data: Value) {
    let id = out.len() as u64;
    out.push(Event { id, name, data });
}

/// The SSE frame of an event.
fn frame(event: &Event) -> Bytes {
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {}\n\n",
        event.id, event.name, event.data
    ))
}

/// The id after which to resume: the `Last-Event-ID` header, if sent; an error for
/// one that is not an id of ours.
fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, &'static str> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("").trim();
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<u64>() {
        Ok(id) if id <= MAX_EVENT_ID => Ok(Some(id)),
        _ => {
            Err("Last-Event-ID must be the id of an event of this stream (a non-negative integer)")
        }
    }
}

/// `GET /v1/tasks/{id}/events`.
pub(super) async fn task_events(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<TaskQuery>,
) -> Response {
    let owner = match tasks::owner(&door, &headers, &query).await {
        Ok(owner) => owner,
        Err(response) => return response,
    };
    let after = match last_event_id(&headers) {
        Ok(after) => after,
        Err(message) => return error(StatusCode::BAD_REQUEST, "invalid_last_event_id", message),
    };
    // Read before answering, so a task the caller cannot have is a plain 404.
    let record = match tasks::owned(&door, &owner, &id).await {
        Ok(record) => record,
        Err(response) => return response,
    };
    let (sender, body) = mpsc::channel::<Bytes>(64);
    let follow = Follow {
        door,
        owner,
        id,
        sender,
        next: after.map_or(0, |n| n.saturating_add(1)),
    };
    tokio::spawn(follow.run(record));
    stream::event_stream_response(body, stream::Framing::Sse)
}

/// One connection following one task.
struct Follow {
    door: Arc<FrontDoor>,
    owner: Owner,
    id: String,
    sender: mpsc::Sender<Bytes>,
    /// The id of the next event to send.
    next: u64,
}

/// The client hung up.
struct Gone;

impl Follow {
    async fn run(mut self, mut record: TaskRecord) {
        let until = tokio::time::Instant::now() + MAX_LIFE;
        // How soon an EventSource should come back after the stream ends.
        let retry = format!("retry: {}\n\n", record.poll_interval_ms.max(100));
        if self.send(Bytes::from(retry)).await.is_err() {
            return;
        }
        loop {
            if self.send_new(&record).await.is_err() || record.state.is_terminal() {
                return;
            }
            let now = tokio::time::Instant::now();
            if now >= until {
                return;
            }
            let seen = record.progress_log.len();
            let wait = KEEP_ALIVE.min(until - now);
            let tasks = &self.door.app.tasks;
            let read = tokio::select! {
                read = tasks.wait_until(&self.owner, &self.id, wait, |r| r.progress_log.len() > seen) => read,
                _ = self.sender.closed() => return,
            };
            match read {
                Ok(Some(fresh)) => {
                    let changed = fresh.progress_log.len() != seen || fresh.state.is_terminal();
                    record = fresh;
                    if !changed
                        && self
                            .send(Bytes::from_static(b": keep-alive\n\n"))
                            .await
                            .is_err()
                    {
                        return;
                    }
                }
                // Forgotten (past `tasks.ttl`): nothing more will come.
                Ok(None) => return,
                Err(refusal) => {
                    // The store did not answer: end here; the client resumes later.
                    tracing::debug!(task = %self.id, error = %refusal, "task events stream ended");
                    let _ = self
                        .send(Bytes::from(format!(
                            ": {}\n\n",
                            refusal.to_string().replace('\n', " ")
                        )))
                        .await;
                    return;
                }
            }
        }
    }

    /// Sends the events of `record` from [`Follow::next`] on.
    async fn send_new(&mut self, record: &TaskRecord) -> Result<(), Gone> {
        let from = self.next;
        for event in events(record).into_iter().filter(|e| e.id >= from) {
            self.send(frame(&event)).await?;
            self.next = event.id + 1;
        }
        Ok(())
    }

    async fn send(&self, bytes: Bytes) -> Result<(), Gone> {
        self.sender.send(bytes).await.map_err(|_| Gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::{Owner, Progress, TaskId, TaskState};

    fn task(log: usize, state: TaskState) -> TaskRecord {
        TaskRecord {
            id: TaskId::parse("task-id-0123456789ab").unwrap(),
            owner: Owner::tenant("acme"),
            tool: "ev__slow".into(),
            created_ms: 1_000,
            updated_ms: 3_500,
            state,
            message: None,
            poll_interval_ms: 500,
            progress: None,
            progress_log: (0..log)
                .map(|i| Progress {
                    progress: i as f64,
                    total: Some(10.0),
                    message: Some(format!("step {i}")),
                })
                .collect(),
            result: state
                .is_terminal()
                .then(|| json!({"content": [{"type": "text", "text": "done"}]})),
            error: None,
            lease: None,
            input_requests: Default::default(),
            input_responses: Default::default(),
        }
    }

    #[test]
    fn a_running_tasks_events_are_a_prefix_of_its_final_ones() {
        let last = events(&task(5, TaskState::Completed));
        let names: Vec<&str> = last.iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [
                "tool_call_start",
                "tool_progress",
                "tool_progress",
                "tool_progress",
                "tool_progress",
                "tool_progress",
                "tool_progress",
                "tool_call_complete",
                "result"
            ]
        );
        let ids: Vec<u64> = last.iter().map(|e| e.id).collect();
        assert_eq!(ids, (0..9).collect::<Vec<u64>>());
        for n in 0..=5 {
            let running = events(&task(n, TaskState::Working));
            assert_eq!(running.len(), n + 1);
            assert_eq!(running[..], last[..n + 1], "after {n} progress updates");
        }
        assert_eq!(last[1].data["text"], "step 0\n");
        assert_eq!(last[1].data["total"], 10.0);
        assert_eq!(last[6].data["closed"], true);
        assert_eq!(last[7].data["duration_ms"], 2500);
        assert_eq!(last[8].data["content"][0]["text"], "done");
    }

    #[test]
    fn a_task_without_progress_has_no_closing_progress_event() {
        let names: Vec<&str> = events(&task(0, TaskState::Completed))
            .iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["tool_call_start", "tool_call_complete", "result"]);
    }

    #[test]
    fn a_cancelled_task_ends_with_the_cancelled_error() {
        let mut cancelled = task(2, TaskState::Cancelled);
        cancelled.result = None;
        cancelled.error = Some("cancelled by its owner".into());
        let all = events(&cancelled);
        let complete = &all[all.len() - 2];
        assert_eq!(complete.name, "tool_call_complete");
        assert_eq!(complete.data["is_error"], true);
        assert_eq!(complete.data["status"], "cancelled");
        assert_eq!(all[all.len() - 1].data["error"]["code"], "cancelled");
    }

    #[test]
    fn last_event_id_is_a_number_or_absent() {
        let mut headers = HeaderMap::new();
        assert_eq!(last_event_id(&headers).ok(), Some(None));
        headers.insert("last-event-id", "7".parse().unwrap());
        assert_eq!(last_event_id(&headers).ok(), Some(Some(7)));
        headers.insert("last-event-id", "x".parse().unwrap());
        assert!(last_event_id(&headers).is_err());
    }
}
