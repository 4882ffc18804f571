//! Background tool calls: a call that becomes a task runs here, on the replica that
//! took it, while every replica answers for it from the task store.
//!
//! The runner holds the task's lease (renewed every [`Tasks::renew_every`]), writes
//! each progress update and the outcome to the store, and stops the call when the
//! task is cancelled — here, or on another replica (seen at the next renewal) — or
//! when its lease is lost. A replica that dies leaves a lease that runs out; the
//! reaper of any replica then fails the task with [`super::LEASE_EXPIRED`].
//!
//! The call's downstream client is the task's owner, reached through the store
//! ([`super::input`]): what the upstream asks during the call waits there as an input
//! request until the owner answers on any replica.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::{CallContext, JsonObject, ToolError, progress_channel};

use super::input::TaskInput;
use super::{
    NewTask, Outcome, Owner, Progress, TaskError, TaskId, TaskPage, TaskRecord, TaskStore,
    TaskUpdate,
};
use crate::access::Caller;
use crate::config::TasksConfig;
use crate::gateway::Gateway;

/// How often a poller is told to ask (MCP's `pollInterval`).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// How often a waiter looks at the store for changes made by another replica (changes
/// made here wake it at once).
const WAIT_STEP: Duration = Duration::from_millis(200);

/// Longest a running task's replica goes without looking at the store: how soon a
/// cancellation made on another replica stops the call.
const MAX_RENEW_EVERY: Duration = Duration::from_secs(2);

/// Longest shutdown waits to record the tasks it ends.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The reason of a task whose replica shut down while it ran.
pub const SHUT_DOWN: &str = "the replica running it shut down; start the call again";

/// Longest between two reaper passes.
const MAX_REAP_EVERY: Duration = Duration::from_secs(1);

/// A call to run as a task.
pub struct TaskCall {
    pub caller: Caller,
    /// The catalog name.
    pub tool: String,
    pub arguments: JsonObject,
    /// The headers of the request that asked (upstreams forward the ones they name).
    pub request_headers: Arc<http::HeaderMap>,
    /// The request's trace, when its surface has one: the task's call continues it
    /// and shares its correlation id.
    pub trace: Option<crate::telemetry::CallTrace>,
}

/// Why a call did not become a task.
#[derive(Debug)]
pub enum StartRefused {
    /// The call itself is refused (an unknown or unselected tool): answered as a plain
    /// call's refusal would be.
    Tool(ToolError),
    /// The store refused the task (the tenant's running limit, a full store, …).
    Task(TaskError),
}

/// The gateway's tasks: the store every replica shares and the calls this replica
/// runs.
pub struct Tasks {
    pub(super) store: Arc<dyn TaskStore>,
    config: TasksConfig,
    /// This process, as leases name it.
    replica: String,
    /// The owner and cancellation of each call running here.
    running: std::sync::Mutex<HashMap<TaskId, (Owner, CancellationToken)>>,
    /// Bumped on every change made here: wakes the waiters of this replica.
    changed: watch::Sender<u64>,
}

impl Tasks {
    pub fn new(config: &TasksConfig, store: Arc<dyn TaskStore>) -> Arc<Tasks> {
        Arc::new(Tasks {
            store,
            config: config.clone(),
            replica: TaskId::new().to_string(),
            running: std::sync::Mutex::default(),
            changed: watch::channel(0).0,
        })
    }

    pub fn config(&self) -> &TasksConfig {
        &self.config
    }

    /// The owner of the tasks `caller` creates: its tenant, its subject and its
    /// session, each if any.
    pub fn owner_of(caller: &Caller) -> Owner {
        let owner = match caller.session_id() {
            Some(session) => Owner::session(&caller.tenant.name, session),
            None => Owner::tenant(&caller.tenant.name),
        };
        owner.as_subject(caller.subject())
    }

    /// Checks the call with the policy, creates its task (durably, so that any replica
    /// answers for it at once) and starts the call in the background.
    pub async fn start(
        self: &Arc<Self>,
        gateway: &Arc<Gateway>,
        call: TaskCall,
    ) -> Result<TaskRecord, StartRefused> {
        let mut ctx = match &call.trace {
            Some(trace) => trace.call_context(self.config.call_timeout),
            None => CallContext::new(
                self.config.call_timeout,
                crate::telemetry::new_correlation_id(),
            ),
        };
        // The gateway's own tools answer at once and are not in the catalog: on every
        // surface they are refused as a forbidden tool is, not as an unknown one.
        if crate::catalog::protocol_tools::is_protocol_tool(&call.tool) {
            let refusal = crate::errors::task_forbidden(&call.tool);
            return Err(StartRefused::Tool(refusal));
        }
        let admitted = crate::call::authorize(gateway, &call.caller, &call.tool, &ctx)
            .map_err(StartRefused::Tool)?;
        if admitted.entry.task_support() == super::TaskSupport::Forbidden {
            let refusal = crate::errors::task_forbidden(&call.tool);
            return Err(StartRefused::Tool(refusal));
        }
        let owner = Self::owner_of(&call.caller);
        let record = self
            .store
            .create(NewTask {
                owner: owner.clone(),
                tool: call.tool.clone(),
                poll_interval_ms: POLL_INTERVAL.as_millis() as u64,
                replica: self.replica.clone(),
            })
            .await
            .map_err(StartRefused::Task)?;
        gateway.metrics.record_task("created");
        audit(&record, "created", None);
        ctx.background = true;
        ctx.request_headers = call.request_headers.clone();
        // What the upstream asks during the call waits in the store for the owner.
        ctx.client = Some(Arc::new(TaskInput {
            tasks: self.clone(),
            owner: owner.clone(),
            id: record.id.clone(),
            deadline: ctx.deadline,
            cancel: ctx.cancel.clone(),
            next: Default::default(),
        }));
        self.lock_running()
            .insert(record.id.clone(), (owner.clone(), ctx.cancel.clone()));
        self.bump();
        let runner = Run {
            tasks: self.clone(),
            gateway: gateway.clone(),
            owner,
            id: record.id.clone(),
        };
        tokio::spawn(runner.run(call, ctx));
        Ok(record)
    }

    /// The owner's task, `None` for any other (missing, expired, someone else's).
    pub async fn get(&self, owner: &Owner, id: &str) -> Result<Option<TaskRecord>, TaskError> {
        let Some(id) = TaskId::parse(id) else {
            return Ok(None);
        };
        self.store.get(owner, &id).await
    }

    /// A page of the owner's tasks, oldest first.
    pub async fn list(
        &self,
        owner: &Owner,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TaskPage, TaskError> {
        self.store.list(owner, cursor, limit).await
    }

    /// Cancels the owner's running task; its call stops here at once, or at the
    /// running replica's next look at the store (within [`MAX_RENEW_EVERY`]).
    pub async fn cancel(
        &self,
        gateway: &Gateway,
        owner: &Owner,
        id: &str,
    ) -> Result<TaskRecord, TaskError> {
        let id = TaskId::parse(id).ok_or(TaskError::NotFound)?;
        let record = self.store.cancel(owner, &id).await?;
        if let Some((_, token)) = self.lock_running().get(&id) {
            token.cancel();
        }
        self.bump();
        gateway.metrics.record_task("cancelled");
        gateway
            .metrics
            .record_task_duration("cancelled", duration_of(&record));
        audit(&record, "cancelled", None);
        Ok(record)
    }

    /// Records the owner's answers to its task's input requests (unknown or
    /// already-answered keys are ignored); the call waiting for them goes on, here
    /// at once, on another replica at its next look at the store.
    pub async fn answer_input(
        &self,
        owner: &Owner,
        id: &str,
        answers: std::collections::BTreeMap<String, Value>,
    ) -> Result<TaskRecord, TaskError> {
        let id = TaskId::parse(id).ok_or(TaskError::NotFound)?;
        let record = self.store.answer_input(owner, &id, answers).await?;
        self.bump();
        Ok(record)
    }

    /// Waits until the owner's task satisfies `done` (it is given each fresh read),
    /// for at most `max`; answers the last read (`None`: the task is gone).
    pub async fn wait_until(
        &self,
        owner: &Owner,
        id: &str,
        max: Duration,
        done: impl Fn(&TaskRecord) -> bool,
    ) -> Result<Option<TaskRecord>, TaskError> {
        let until = tokio::time::Instant::now() + max;
        let mut changes = self.changed.subscribe();
        loop {
            changes.mark_unchanged();
            let Some(task) = self.get(owner, id).await? else {
                return Ok(None);
            };
            if done(&task) || task.state.is_terminal() || tokio::time::Instant::now() >= until {
                return Ok(Some(task));
            }
            let step = (tokio::time::Instant::now() + WAIT_STEP).min(until);
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(step) => {}
            }
        }
    }

    /// Fails, every so often until `stop`, the running tasks whose replica stopped
    /// renewing their lease (any replica's, when the store is shared).
    pub fn spawn_reaper(self: &Arc<Self>, gateway: &Arc<Gateway>, stop: CancellationToken) {
        let every = (self.config.lease / 4).clamp(Duration::from_millis(50), MAX_REAP_EVERY);
        let tasks = Arc::downgrade(self);
        let gateway = Arc::downgrade(gateway);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let (Some(tasks), Some(gateway)) = (tasks.upgrade(), gateway.upgrade()) else {
                    return;
                };
                match tasks.store.reap_expired_leases().await {
                    Ok(reaped) if reaped.is_empty() => {}
                    Ok(reaped) => {
                        for id in &reaped {
                            gateway.metrics.record_task("lost");
                            tracing::info!(
                                target: crate::logging::AUDIT_TARGET,
                                task = %id,
                                outcome = "failed",
                                reason = super::LEASE_EXPIRED,
                                "task lost"
                            );
                        }
                        tasks.bump();
                    }
                    Err(error) => tracing::warn!(%error, "the task reaper could not run"),
                }
            }
        });
    }

    /// How often a running task's lease is renewed.
    fn renew_every(&self) -> Duration {
        (self.config.lease / 3).clamp(Duration::from_millis(50), MAX_RENEW_EVERY)
    }

    pub(super) fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// On shutdown: fails the tasks running here at once, saying why, rather than
    /// leaving them `working` until their lease runs out; stops their calls.
    pub async fn shut_down(&self, gateway: &Gateway) {
        let running: Vec<(TaskId, (Owner, CancellationToken))> =
            self.lock_running().drain().collect();
        let deadline = tokio::time::Instant::now() + SHUTDOWN_WAIT;
        for (id, (owner, cancel)) in running {
            let outcome = Outcome::Failed {
                reason: SHUT_DOWN.to_owned(),
                result: None,
            };
            let ended =
                tokio::time::timeout_at(deadline, self.store.finish(&owner, &id, outcome)).await;
            if let Ok(Ok(record)) = ended {
                gateway.metrics.record_task("failed");
                audit(&record, "failed", Some(SHUT_DOWN));
            }
            cancel.cancel();
        }
        self.bump();
    }

    fn lock_running(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<TaskId, (Owner, CancellationToken)>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One task's call, run on this replica.
struct Run {
    tasks: Arc<Tasks>,
    gateway: Arc<Gateway>,
    owner: Owner,
    id: TaskId,
}

impl Run {
    async fn run(self, call: TaskCall, mut ctx: CallContext) {
        let cancel = ctx.cancel.clone();
        let (sink, mut progress) = progress_channel();
        ctx.progress = Some(sink);
        // The one call path, as every surface takes it: the policy decides again on the
        // catalog of the moment the call runs.
        let execution =
            crate::call::call(&self.gateway, &call.caller, &call.tool, call.arguments, ctx);
        tokio::pin!(execution);
        let mut renew = tokio::time::interval(self.tasks.renew_every());
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        renew.tick().await; // the first tick is now: the lease was just taken
        let mut stopping = false;
        let outcome = loop {
            tokio::select! {
                biased;
                outcome = &mut execution => break outcome,
                Some(update) = progress.recv() => self.record_progress(update, &cancel).await,
                _ = renew.tick() => self.renew(&cancel).await,
                _ = cancel.cancelled(), if !stopping => {
                    // The call sees the same token and ends with `Cancelled` shortly.
                    stopping = true;
                }
            }
        };
        while let Ok(update) = progress.try_recv() {
            self.record_progress(update, &cancel).await;
        }
        self.finish(outcome).await;
        self.tasks.lock_running().remove(&self.id);
        self.tasks.bump();
    }

    async fn record_progress(
        &self,
        update: toolgate_adapters::Progress,
        cancel: &CancellationToken,
    ) {
        let progress = Progress {
            progress: update.progress,
            total: update.total,
            message: update.message,
        };
        if super::checked_progress(&progress).is_err() {
            return; // NaN or infinite: nothing a poller could read
        }
        let change = TaskUpdate {
            progress: Some(progress),
            ..TaskUpdate::default()
        };
        match self.tasks.store.update(&self.owner, &self.id, change).await {
            Ok(_) => self.tasks.bump(),
            Err(error) => self.lost_hold(error, cancel),
        }
    }

    async fn renew(&self, cancel: &CancellationToken) {
        if let Err(error) = self
            .tasks
            .store
            .renew_lease(&self.owner, &self.id, &self.tasks.replica)
            .await
        {
            self.lost_hold(error, cancel);
        }
    }

    /// A store answer that may mean the task is no longer this replica's to run.
    fn lost_hold(&self, error: TaskError, cancel: &CancellationToken) {
        match error {
            // Cancelled (or reaped) elsewhere, gone, or taken over: stop the call.
            TaskError::Finished { .. } | TaskError::NotFound | TaskError::LeaseLost { .. } => {
                tracing::debug!(task = %self.id, %error, "task no longer runs here: stopping its call");
                cancel.cancel();
            }
            // The store is down: keep running; the lease says how long that may last.
            error => tracing::warn!(task = %self.id, %error, "task store unavailable"),
        }
    }

    async fn finish(&self, outcome: Result<crate::call::Called, ToolError>) {
        let outcome = match outcome.map(|called| called.output) {
            Ok(output) if output.is_error() => {
                let output = output.into_object();
                Outcome::Failed {
                    reason: first_text(&output)
                        .unwrap_or_else(|| "the tool reported an error".to_owned()),
                    result: Some(Value::Object(output)),
                }
            }
            Ok(output) => Outcome::Completed(Value::Object(output.into_object())),
            Err(error) => Outcome::Failed {
                reason: error.to_string(),
                result: Some(Value::Object(crate::errors::error_result(&error))),
            },
        };
        let finished = match self
            .tasks
            .store
            .finish(&self.owner, &self.id, outcome)
            .await
        {
            Err(too_large @ TaskError::ResultTooLarge { .. }) => {
                let reason = format!(
                    "{too_large}: raise it, or lower the tool's result_max_tokens so results \
                     are cut to fit"
                );
                let outcome = Outcome::Failed {
                    reason,
                    result: None,
                };
                self.tasks
                    .store
                    .finish(&self.owner, &self.id, outcome)
                    .await
            }
            other => other,
        };
        match finished {
            Ok(record) => {
                let outcome = record.state.as_str();
                self.gateway.metrics.record_task(outcome);
                self.gateway
                    .metrics
                    .record_task_duration(outcome, duration_of(&record));
                audit(&record, outcome, record.error.as_deref());
            }
            // Cancelled or reaped meanwhile: that ending stands.
            Err(TaskError::Finished { state, .. }) => {
                tracing::debug!(task = %self.id, %state, "task ended before its call did");
            }
            Err(error) => {
                tracing::warn!(task = %self.id, %error, "could not store the task's outcome");
            }
        }
    }
}

/// The first text block of a tool result, as the reason of a failed task.
fn first_text(result: &JsonObject) -> Option<String> {
    result
        .get("content")?
        .as_array()?
        .iter()
        .find_map(|block| block.get("text")?.as_str().map(str::to_owned))
}

fn duration_of(record: &TaskRecord) -> Duration {
    Duration::from_millis(record.updated_ms.saturating_sub(record.created_ms))
}

/// One audit line per task event (creation and each ending).
fn audit(record: &TaskRecord, outcome: &str, reason: Option<&str>) {
    let session = record.owner.session.as_deref().unwrap_or("-");
    tracing::info!(
        target: crate::logging::AUDIT_TARGET,
        tenant = %record.owner.tenant,
        session,
        task = %record.id,
        tool = %record.tool,
        outcome,
        reason = reason.unwrap_or("-"),
        "task"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_tool_result_gives_its_first_text_as_the_reason() {
        let result = serde_json::json!({"content": [{"type": "image", "data": ""}, {"type": "text", "text": "quota exceeded"}], "isError": true});
        let Value::Object(result) = result else {
            unreachable!()
        };
        assert_eq!(first_text(&result).as_deref(), Some("quota exceeded"));
        assert_eq!(first_text(&JsonObject::new()), None);
    }
}
