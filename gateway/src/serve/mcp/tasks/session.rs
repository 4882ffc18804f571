//! 2025-11-25 core tasks, on sessions.

use super::*;

/// A session's `tools/call` with `params.task`: the `CreateTaskResult`, `{task}`.
/// The requested `ttl` is not honoured: the answer says the one `tasks.ttl` gives.
pub(crate) async fn session_call(
    app: &App,
    live: &Arc<Live>,
    caller: &Caller,
    id: &str,
    name: String,
    arguments: JsonObject,
    headers: Arc<http::HeaderMap>,
) -> Vec<u8> {
    match start(app, caller, name, arguments, headers).await {
        Ok(record) => {
            let task = session_task(&app.tasks, &record);
            if let Some(session) = caller.session_id() {
                announce_status(app, live, session, &record);
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
fn announce_status(app: &App, live: &Arc<Live>, session: &str, record: &TaskRecord) {
    let tasks = app.tasks.clone();
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
            let task = Value::Object(session_task(&tasks, &record));
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
pub(crate) async fn session_method(
    app: &App,
    caller: &Caller,
    id: &str,
    method: &str,
    envelope: &Envelope<'_>,
) -> Vec<u8> {
    let gateway = &app.gateway;
    let tasks = &app.tasks;
    let owner = Tasks::owner_of(caller);
    if method == "tasks/list" {
        #[derive(Deserialize)]
        struct ListParams {
            #[serde(default)]
            cursor: Option<String>,
        }
        let cursor = match envelope.params::<ListParams>() {
            Ok(params) => params.cursor,
            Err(error) => {
                return wire::error_message(
                    id,
                    toolgate_adapters::codes::INVALID_PARAMS,
                    &error,
                    None,
                );
            }
        };
        return match tasks.list(&owner, cursor.as_deref(), LIST_PAGE).await {
            Ok(page) => {
                let listed: Vec<Value> = page
                    .tasks
                    .iter()
                    .map(|record| Value::Object(session_task(tasks, record)))
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
                &to_text(with_progress(session_task(tasks, &record), &record)),
            ),
            Ok(None) => not_found(id),
            Err(error) => task_error(id, &error),
        },
        "tasks/cancel" => match tasks.cancel(gateway, &owner, &task).await {
            Ok(record) => wire::result_message(id, &to_text(session_task(tasks, &record))),
            Err(error) => task_error(id, &error),
        },
        other => wire::error_message(
            id,
            toolgate_adapters::codes::METHOD_NOT_FOUND,
            &format!(
                "method not found: {other} (protocol {SESSION_TASKS_VERSION} has tasks/get, \
                 tasks/result, tasks/list and tasks/cancel)"
            ),
            None,
        ),
    }
}

/// `tasks/result` on a session: waits until the task ends (at most a task's
/// `call_timeout`), then answers what the plain call would have: its result tied to
/// the task, or an error. A task that asks its owner for input meanwhile
/// (`input_required`) gets the answer on this request's stream, as the spec has it:
/// each pending input request goes to the client as a server request
/// (`elicitation/create`, …, tagged with the related task), the client's answer —
/// POSTed in the session like any answer — is recorded in the task store, where the
/// call waits for it, and the stream ends with the result.
pub(crate) async fn session_result(
    app: &App,
    live: &Arc<Live>,
    caller: &Caller,
    id: &str,
    envelope: &Envelope<'_>,
) -> Reply {
    let task = match task_id(envelope, id, "tasks/result") {
        Ok(task) => task,
        Err(refused) => return Reply::Message(refused),
    };
    let tasks = app.tasks.clone();
    let owner = Tasks::owner_of(caller);
    let max = tasks.config().call_timeout;
    let until = tokio::time::Instant::now() + max;
    let first = tasks
        .wait_until(&owner, &task, max, |record| {
            record.state.is_terminal() || !record.input_requests.is_empty()
        })
        .await;
    let record = match first {
        Ok(Some(record)) => record,
        Ok(None) => return Reply::Message(not_found(id)),
        Err(error) => return Reply::Message(task_error(id, &error)),
    };
    let Some(session) = caller.session_id() else {
        return Reply::Message(final_message(id, &record, max));
    };
    if record.input_requests.is_empty() {
        return Reply::Message(final_message(id, &record, max));
    }
    let (out, messages) = tokio::sync::mpsc::channel(16);
    let asking = Asking {
        tasks,
        live: live.clone(),
        session: session.to_owned(),
        owner,
        task,
        id: id.to_owned(),
        until,
        max,
    };
    tokio::spawn(asking.run(out));
    Reply::from_receiver(messages)
}

/// A `tasks/result` stream that relays a task's input requests to its session's
/// client and their answers back to the task, until the task ends.
struct Asking {
    tasks: Arc<Tasks>,
    live: Arc<Live>,
    session: String,
    owner: crate::tasks::Owner,
    task: String,
    /// The `tasks/result` request's JSON-RPC id (raw JSON).
    id: String,
    until: tokio::time::Instant,
    max: Duration,
}

impl Asking {
    /// Bounded by `until`: each round waits for an answer, a change of the task or
    /// the end of the time.
    async fn run(self, out: tokio::sync::mpsc::Sender<bytes::Bytes>) {
        use futures::StreamExt;
        let mut sent = std::collections::HashSet::new();
        let mut asked = Vec::new();
        let mut answers = futures::stream::FuturesUnordered::new();
        let last = loop {
            let record = match self.tasks.get(&self.owner, &self.task).await {
                Ok(Some(record)) => record,
                Ok(None) => break not_found(&self.id),
                Err(error) => break task_error(&self.id, &error),
            };
            if record.state.is_terminal() || tokio::time::Instant::now() >= self.until {
                break final_message(&self.id, &record, self.max);
            }
            for (key, request) in &record.input_requests {
                if !sent.insert(key.clone()) {
                    continue;
                }
                let (answer, answered) = tokio::sync::oneshot::channel();
                let request_id = self.live.request_sent(&self.session, answer);
                asked.push(request_id.clone());
                let mut params = request.params.clone();
                if let Some(object) = params.as_object_mut()
                    && let Value::Object(meta) = object
                        .entry("_meta")
                        .or_insert_with(|| Value::Object(Map::new()))
                {
                    meta.insert(RELATED_TASK.into(), json!({"taskId": record.id.as_str()}));
                }
                let message = wire::request(&request_id, &request.method, &params);
                if out.send(bytes::Bytes::from(message)).await.is_err() {
                    return self.abandon(&asked);
                }
                let key = key.clone();
                answers.push(async move { (key, answered.await) });
            }
            let left = self
                .until
                .saturating_duration_since(tokio::time::Instant::now());
            tokio::select! {
                Some((key, answered)) = answers.next() => {
                    // A dropped sender: the session ended, nothing to record.
                    if let Ok(answer) = answered {
                        let stored = answer.unwrap_or_else(|error| crate::tasks::error_answer(&error));
                        let answers = std::iter::once((key, stored)).collect();
                        if let Err(error) = self.tasks.answer_input(&self.owner, &self.task, answers).await {
                            tracing::debug!(%error, "a task's input answer was not recorded");
                        }
                    }
                }
                _ = self.tasks.wait_until(&self.owner, &self.task, left, |record| {
                    record.state.is_terminal()
                        || record.input_requests.keys().any(|key| !sent.contains(key))
                }) => {}
                _ = out.closed() => return self.abandon(&asked),
            }
        };
        let _ = out.send(bytes::Bytes::from(last)).await;
        self.abandon(&asked);
    }

    /// Forgets the requests the client was sent and will not answer any more here.
    fn abandon(&self, asked: &[String]) {
        for request_id in asked {
            self.live.request_abandoned(request_id);
        }
    }
}

/// The end of `tasks/result`: the task's result or error, or (still running after
/// `max`) an error that says to ask again.
fn final_message(id: &str, record: &TaskRecord, max: Duration) -> Vec<u8> {
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
            Some(related(record)),
        ),
        (TaskState::Failed, None) => wire::error_message(
            id,
            INTERNAL_ERROR,
            record.error.as_deref().unwrap_or("the task failed"),
            Some(related(record)),
        ),
        (_, _) => wire::error_message(
            id,
            INTERNAL_ERROR,
            &format!(
                "the task is still {} after {}: call tasks/result again",
                record.state,
                humantime::format_duration(max)
            ),
            Some(related(record)),
        ),
    }
}

fn related(record: &TaskRecord) -> Value {
    json!({"_meta": {RELATED_TASK: {"taskId": record.id.as_str()}}})
}
