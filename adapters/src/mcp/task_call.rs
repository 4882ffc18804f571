//! A background call relayed as the upstream's own task (MCP 2025-11-25 tasks): when
//! the gateway runs a call as a task and the upstream runs that tool as a task too, the
//! call goes up task-augmented, the upstream's task is followed with `tasks/get` (its
//! status messages become the call's progress), and its outcome is fetched with
//! `tasks/result` — the same `CallToolResult`, or JSON-RPC error, a plain call would
//! have answered. Cancelling the call (or its deadline) cancels the upstream's task.
//!
//! The upstream's task id stays in here: callers see only the gateway's task.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::jsonrpc::{Answer, Origin, Reply, Rpc, RpcFailure};
use crate::{CallContext, Progress, ToolDef};

/// The protocol version whose tasks this relays.
const TASKS_VERSION: &str = "2025-11-25";

/// Bounds on the upstream's `pollInterval`: not busier than this, and a stalled
/// upstream is still looked at this often.
const MIN_POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(5);

/// How long one `tasks/get` or `tasks/cancel` may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a background call of `tool` goes up as the upstream's task: the upstream
/// negotiated 2025-11-25, declares task-augmented `tools/call`, and the tool's own
/// `execution.taskSupport` allows it.
pub(super) fn relayable(
    initialize: Option<&Map<String, Value>>,
    protocol_version: Option<&str>,
    tools: &[ToolDef],
    tool: &str,
) -> bool {
    if protocol_version != Some(TASKS_VERSION) {
        return false;
    }
    let declared = initialize
        .and_then(|init| init.get("capabilities"))
        .and_then(|c| c.pointer("/tasks/requests/tools/call"))
        .is_some();
    let support = tools
        .iter()
        .find(|t| t.name == tool)
        .and_then(|t| t.raw.get("execution"))
        .and_then(|e| e.get("taskSupport"))
        .and_then(Value::as_str);
    declared && matches!(support, Some("optional" | "required"))
}

/// Runs `tools/call` (`params`, without `task`) as the upstream's task; answers what
/// the plain call would have.
pub(super) async fn run(rpc: &Arc<Rpc>, mut params: Value, ctx: &CallContext) -> Reply {
    let deadline = Instant::from_std(ctx.deadline);
    let ttl_ms = ctx.remaining().as_millis().min(u128::from(u64::MAX)) as u64;
    if let Value::Object(fields) = &mut params {
        fields.insert("task".into(), json!({"ttl": ttl_ms}));
    }
    let created = rpc
        .request(
            "tools/call",
            params.into(),
            deadline,
            Some(&ctx.cancel),
            ctx.progress.clone(),
            Origin::Call(ctx.client.clone()),
        )
        .await
        .map(Answer::into_value)?;
    // An upstream may run the call at once and answer its result: that is the answer.
    let Some(task) = created.get("task").filter(|t| t.is_object()) else {
        return Ok(created);
    };
    let Some(task_id) = task
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Err(RpcFailure::Transport(
            "the upstream answered a task without a taskId".into(),
        ));
    };
    let poll = task
        .get("pollInterval")
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(1))
        .clamp(MIN_POLL, MAX_POLL);
    let mut last_message = None;
    let mut step = 0u64;
    let mut status = task.clone();
    loop {
        match status.get("status").and_then(Value::as_str) {
            Some("completed" | "failed") => break,
            // The upstream's input requests are delivered on `tasks/result`.
            Some("input_required") => break,
            Some("cancelled") => {
                return Err(RpcFailure::Transport(format!(
                    "the upstream cancelled its task{}",
                    message_of(&status)
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                )));
            }
            _ => {}
        }
        let message = message_of(&status);
        if message.is_some() && message != last_message {
            step += 1;
            if let Some(progress) = &ctx.progress {
                // `try_send`: a full queue loses an update, never blocks the relay.
                let _ = progress.try_send(Progress {
                    progress: step as f64,
                    total: None,
                    message: message.clone(),
                });
            }
            last_message = message;
        }
        let wait = tokio::time::sleep_until((Instant::now() + poll).min(deadline));
        tokio::select! {
            _ = ctx.cancel.cancelled() => {
                cancel(rpc, &task_id).await;
                return Err(RpcFailure::Cancelled);
            }
            _ = wait => {}
        }
        if Instant::now() >= deadline {
            cancel(rpc, &task_id).await;
            return Err(RpcFailure::Timeout);
        }
        let step_deadline = (Instant::now() + STEP_TIMEOUT).min(deadline);
        status = rpc
            .protocol_request("tasks/get", json!({"taskId": task_id}), step_deadline)
            .await?;
    }
    let result = rpc
        .request(
            "tasks/result",
            json!({"taskId": task_id}).into(),
            deadline,
            Some(&ctx.cancel),
            ctx.progress.clone(),
            Origin::Call(ctx.client.clone()),
        )
        .await
        .map(Answer::into_value);
    if matches!(result, Err(RpcFailure::Cancelled | RpcFailure::Timeout)) {
        cancel(rpc, &task_id).await;
    }
    result
}

fn message_of(task: &Value) -> Option<String> {
    task.get("statusMessage")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Tells the upstream to stop its task (best effort: the call is over either way).
async fn cancel(rpc: &Arc<Rpc>, task_id: &str) {
    let deadline = Instant::now() + STEP_TIMEOUT;
    if let Err(error) = rpc
        .protocol_request("tasks/cancel", json!({"taskId": task_id}), deadline)
        .await
    {
        tracing::debug!(
            ?error,
            "the upstream did not take the cancellation of its task"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, support: Option<&str>) -> ToolDef {
        let mut raw = json!({"name": name, "inputSchema": {"type": "object"}});
        if let Some(support) = support {
            raw["execution"] = json!({"taskSupport": support});
        }
        ToolDef::from_raw(raw.as_object().cloned().unwrap_or_default()).unwrap()
    }

    #[test]
    fn relayed_only_when_the_upstream_and_the_tool_run_tasks() {
        let tools = [
            tool("plain", None),
            tool("forbidden", Some("forbidden")),
            tool("optional", Some("optional")),
            tool("required", Some("required")),
        ];
        let init = json!({"capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}}});
        let init = init.as_object();
        let relay = |name: &str| relayable(init, Some("2025-11-25"), &tools, name);
        assert!(!relay("plain") && !relay("forbidden") && !relay("missing"));
        assert!(relay("optional") && relay("required"));
        assert!(!relayable(init, Some("2025-06-18"), &tools, "optional"));
        let without = json!({"capabilities": {"tasks": {"list": {}}}});
        assert!(!relayable(
            without.as_object(),
            Some("2025-11-25"),
            &tools,
            "optional"
        ));
    }
}
