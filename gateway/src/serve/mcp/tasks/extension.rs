//! 2026-07-28: the tasks extension, sessionless.

use super::*;

/// Whether a request's client capabilities declare the tasks extension.
pub(crate) fn declares_extension(meta: Option<&CallMeta>) -> bool {
    meta.and_then(|m| m.client_capabilities.as_ref())
        .and_then(|caps| caps.get("extensions"))
        .and_then(|extensions| extensions.get(EXTENSION))
        .is_some()
}

/// The -32021 answer (HTTP 400) for a request that needs the extension declared.
fn extension_required(id: &str, why: &str) -> Reply {
    let data = json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}});
    let error = McpError::missing_capability(
        format!(
            "{why}: declare the '{EXTENSION}' extension in \
             params._meta['io.modelcontextprotocol/clientCapabilities'].extensions"
        ),
        data,
    );
    Reply::refused(error, id)
}

/// How a sessionless `tools/call` is served.
pub(crate) enum CallMode {
    /// As a plain call.
    Plain,
    /// As a task (the request declared the extension; the tool may run as one).
    Task,
    /// Refused: the tool runs only as a task and the request did not declare the
    /// extension.
    Refused(Box<Reply>),
}

/// The gateway's choice for a sessionless call of `name` (the extension leaves it to
/// the server): a task when the request declares the extension and the tool's
/// taskSupport allows one. A tool the caller may not call is left to the plain path,
/// which refuses it as it refuses any unknown name.
pub(crate) fn extension_mode(
    gateway: &Gateway,
    caller: &Caller,
    id: &str,
    name: &str,
    declared: bool,
) -> CallMode {
    let view = View::of(gateway, caller);
    let support = view
        .catalog
        .get(name)
        .map_or(TaskSupport::Forbidden, |entry| entry.task_support());
    match support {
        TaskSupport::Forbidden => CallMode::Plain,
        _ if declared => CallMode::Task,
        TaskSupport::Required if view.permits(caller, Item::Tool(name), Method::Use) => {
            CallMode::Refused(Box::new(extension_required(
                id,
                &format!("tool '{name}' runs only as a background task"),
            )))
        }
        _ => CallMode::Plain,
    }
}

/// A sessionless call started as a task: the flat `CreateTaskResult`.
pub(crate) async fn extension_call(
    app: &App,
    caller: &Caller,
    id: &str,
    name: String,
    arguments: JsonObject,
    headers: Arc<http::HeaderMap>,
) -> Reply {
    let message = match start(app, caller, name, arguments, headers).await {
        Ok(record) => {
            let mut task = extension_task(&app.tasks, &record);
            task.insert("resultType".into(), json!("task"));
            wire::result_message(id, &to_text(task))
        }
        Err(refusal) => start_refused(id, refusal, true),
    };
    Reply::Message(message)
}

/// `tasks/update`'s parameters (`taskId` is read by [`task_id`]).
#[derive(Deserialize)]
struct UpdateParams {
    #[serde(default, rename = "inputResponses")]
    input_responses: std::collections::BTreeMap<String, Value>,
}

/// A sessionless `tasks/*` request (its `_meta` already checked by the version's
/// ladder).
pub(crate) async fn extension_method(
    app: &App,
    caller: &Caller,
    id: &str,
    method: &str,
    envelope: &Envelope<'_>,
) -> Reply {
    let gateway = &app.gateway;
    if matches!(method, "tasks/result" | "tasks/list") {
        return Reply::Message(wire::error_message(
            id,
            toolgate_adapters::codes::METHOD_NOT_FOUND,
            &format!(
                "method not found: {method} (the {EXTENSION} extension has tasks/get, which \
                 carries the result, tasks/update and tasks/cancel)"
            ),
            None,
        ));
    }
    #[derive(Deserialize)]
    struct Params {
        #[serde(default, rename = "_meta")]
        meta: Option<CallMeta>,
    }
    let declared = envelope
        .params::<Params>()
        .is_ok_and(|params| declares_extension(params.meta.as_ref()));
    if !declared {
        return extension_required(id, &format!("{method} belongs to the tasks extension"));
    }
    let task = match task_id(envelope, id, method) {
        Ok(task) => task,
        Err(refused) => return Reply::Message(refused),
    };
    let tasks = &app.tasks;
    let owner = Tasks::owner_of(caller);
    let ack = || wire::result_message(id, r#"{"resultType":"complete"}"#);
    let message = match method {
        "tasks/get" => match tasks.get(&owner, &task).await {
            Ok(Some(record)) => wire::result_message(id, &to_text(detailed_task(tasks, &record))),
            Ok(None) => not_found(id),
            Err(error) => task_error(id, &error),
        },
        // The owner's answers to the call's input requests: recorded (unknown and
        // already-answered keys ignored, as the extension says), then acknowledged.
        "tasks/update" => match envelope.params::<UpdateParams>() {
            Ok(update) => match tasks
                .answer_input(&owner, &task, update.input_responses)
                .await
            {
                Ok(_) => ack(),
                Err(error) => task_error(id, &error),
            },
            Err(error) => wire::error_message(
                id,
                toolgate_adapters::codes::INVALID_PARAMS,
                &format!(
                    "{error} (tasks/update needs {{\"taskId\": \"<id>\", \"inputResponses\": \
                     {{\"<key>\": <response>}}}})"
                ),
                None,
            ),
        },
        // Cancellation is cooperative in this version: a task that already ended is
        // acknowledged too (it keeps its ending).
        "tasks/cancel" => match tasks.cancel(gateway, &owner, &task).await {
            Ok(_) | Err(TaskError::Finished { .. }) => ack(),
            Err(error) => task_error(id, &error),
        },
        other => wire::error_message(
            id,
            toolgate_adapters::codes::METHOD_NOT_FOUND,
            &format!(
                "method not found: {other} (the {EXTENSION} extension has tasks/get, \
                 tasks/update and tasks/cancel)"
            ),
            None,
        ),
    };
    Reply::Message(message)
}
