//! The wire shapes of a task: one function per generation's `Task`.

use super::*;

/// Unix ms as the ISO 8601 text MCP uses for `createdAt` / `lastUpdatedAt`.
pub(super) fn iso(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The task's `statusMessage`: its own message, else the reason it failed, else its
/// call's last progress (the message, or "n/total"), so a poller sees it move.
pub(super) fn status_message(record: &TaskRecord) -> Option<String> {
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

pub(super) fn ttl_ms(tasks: &Tasks) -> u64 {
    tasks.config().ttl.as_millis() as u64
}

/// A 2025-11-25 `Task`.
pub(super) fn session_task(tasks: &Tasks, record: &TaskRecord) -> Map<String, Value> {
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
pub(super) fn extension_state(record: &TaskRecord) -> TaskState {
    match record.state {
        TaskState::Failed if record.result.is_some() => TaskState::Completed,
        state => state,
    }
}

/// A 2026-07-28 `Task` (flat, `ttlMs` / `pollIntervalMs`), without `resultType`.
pub(super) fn extension_task(tasks: &Tasks, record: &TaskRecord) -> Map<String, Value> {
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
pub(super) fn with_progress(
    mut task: Map<String, Value>,
    record: &TaskRecord,
) -> Map<String, Value> {
    if let Some(progress) = &record.progress
        && let Ok(progress) = serde_json::to_value(progress)
    {
        task.insert("_meta".into(), json!({"toolgate/progress": progress}));
    }
    task
}

/// A task's pending input requests, `{key: {method, params}}` (MRTR's shape).
pub(super) fn input_requests(record: &TaskRecord) -> Map<String, Value> {
    record
        .input_requests
        .iter()
        .map(|(key, request)| {
            let request = json!({"method": request.method, "params": request.params});
            (key.clone(), request)
        })
        .collect()
}

/// The 2026-07-28 `tasks/get` result: the task, with its result (completed), error
/// (failed) or input requests (input_required) inlined.
pub(super) fn detailed_task(tasks: &Tasks, record: &TaskRecord) -> Map<String, Value> {
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
        (TaskState::InputRequired, _) => {
            task.insert(
                "inputRequests".into(),
                Value::Object(input_requests(record)),
            );
        }
        _ => {}
    }
    task
}

pub(super) fn to_text(object: Map<String, Value>) -> String {
    Value::Object(object).to_string()
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
            input_requests: Default::default(),
            input_responses: Default::default(),
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
