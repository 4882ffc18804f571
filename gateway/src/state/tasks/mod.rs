//! Durable task records: the state of calls that run in the background, kept so that
//! any replica can answer for them and they outlive the caller's connection. This is
//! the store's contract (the trait and the records it keeps); the service that runs
//! the calls, renews their leases and reaps the dead ones is [`crate::tasks`], built
//! on it.
//!
//! A task is created `working` for an [`Owner`] (a tenant, and for MCP sessions the
//! session); it may go to `input_required` and back, and ends `completed`, `failed` or
//! `cancelled` — a terminal state never changes again ([`check_transition`], the one
//! rule both stores apply). Every method is owner-checked: another owner's task is
//! [`TaskError::NotFound`] (or `None`), exactly like a missing one, so task ids reveal
//! nothing across tenants. Ids are the gateway's own ([`TaskId`]: 128 random bits),
//! never an upstream's.
//!
//! A running task holds a lease (the replica running it and an expiry) that its
//! replica renews; [`TaskStore::reap_expired_leases`] turns tasks whose lease ran out
//! into `failed` with a reason, so a task whose replica died never stays `working`.
//! Finished tasks are kept for `tasks.ttl`, then forgotten.
//!
//! While it runs, a task's call may ask its owner something (an upstream's
//! elicitation, sampling or roots request): the request is kept with the task under a
//! key, the task is `input_required` until every one is answered
//! ([`TaskStore::ask_input`], [`TaskStore::answer_input`]), and the answers are kept
//! until the task ends, so a key is never asked or answered twice.
//!
//! Two stores keep the same contract (one test suite, `suite`, runs against both):
//! [`memory::MemoryTaskStore`] for one process and [`redis::RedisTaskStore`] shared
//! by replicas. Timestamps are Unix milliseconds of the store's clock (Redis' own for
//! the Redis store), so replicas whose clocks differ still agree on lease expiry.

mod checks;
pub mod memory;
pub mod redis;
#[cfg(test)]
pub(crate) mod suite;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::state::conn::Unavailable;

pub(crate) use checks::{
    CANCELLED, bounded_result, checked_answers, checked_input_key, checked_progress,
    checked_update, list_position, page_size, parse_cursor,
};

/// Most tasks in one page of [`TaskStore::list`].
pub const MAX_PAGE: usize = 100;

/// Most progress updates a task's log keeps (see [`TaskRecord::progress_log`]).
pub const MAX_PROGRESS_LOG: usize = 100;

/// Most input requests one task may have pending, and most answers one
/// [`TaskStore::answer_input`] call may carry.
pub const MAX_INPUT_KEYS: usize = 100;

/// The reason a task whose lease ran out is failed with.
pub const LEASE_EXPIRED: &str = "the replica running it stopped (its lease expired)";

/// A task's id: 128 random bits, base64url without padding. Opaque and unguessable:
/// holding one is not enough to read a task (every read is owner-checked), but ids
/// must not be enumerable either.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    /// A fresh random id.
    pub fn new() -> TaskId {
        TaskId(crate::state::sessions::new_session_id())
    }

    /// An id a caller sent, if it has the form of one (16 to 64 characters of the
    /// base64url alphabet); anything else cannot name a task. The check also keeps
    /// ids safe inside store keys.
    pub fn parse(text: &str) -> Option<TaskId> {
        let valid = (16..=64).contains(&text.len())
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        valid.then(|| TaskId(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for TaskId {
    fn default() -> Self {
        TaskId::new()
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A task's state, named as MCP names task statuses (2025-11-25 `tasks/get` and the
/// 2026-07-28 tasks extension use the same five). The REST task routes answer it as
/// it is, so `/openapi.json` describes it from this type (as `TaskStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(
    rename = "TaskStatus",
    description = "A task's status (MCP's task statuses)."
)]
pub enum TaskState {
    /// Running.
    Working,
    /// Waiting for input from its requestor; goes back to `working` when it has it.
    InputRequired,
    /// Finished with a result (terminal).
    Completed,
    /// Finished without one, or with a tool error (terminal).
    Failed,
    /// Cancelled by its owner (terminal).
    Cancelled,
}

impl TaskState {
    pub const ALL: [TaskState; 5] = [
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Cancelled,
    ];

    /// The wire name (`input_required`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Working => "working",
            TaskState::InputRequired => "input_required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// The state named `name` (a wire name), if any.
    pub fn from_name(name: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Completed, failed or cancelled: the task is over and never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one transition rule: a running task (`working`, `input_required`) may become
/// any state (staying in its state is an update of its message or progress); a
/// terminal one never changes again.
pub fn check_transition(from: TaskState, to: TaskState) -> Result<(), TaskError> {
    if from.is_terminal() {
        return Err(TaskError::Finished { state: from, to });
    }
    Ok(())
}

/// Whose task it is: the tenant, the subject (the person calling, when the credential
/// named one), and for tasks created in an MCP session, the session. Only the same
/// owner sees the task.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owner {
    pub tenant: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl Owner {
    pub fn tenant(tenant: &str) -> Owner {
        Owner {
            tenant: tenant.to_owned(),
            subject: None,
            session: None,
        }
    }

    pub fn session(tenant: &str, session: &str) -> Owner {
        Owner {
            tenant: tenant.to_owned(),
            subject: None,
            session: Some(session.to_owned()),
        }
    }

    /// The same owner as the person `subject`.
    pub fn as_subject(self, subject: Option<&str>) -> Owner {
        Owner {
            subject: subject.map(str::to_owned),
            ..self
        }
    }
}

/// The last progress notification of a task's call (`TaskProgress` in
/// `/openapi.json`: `GET /v1/tasks/{id}` answers it as it is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(
    rename = "TaskProgress",
    description = "The latest progress of a task's call."
)]
pub struct Progress {
    pub progress: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A request a task's call makes of its requestor while it runs (an upstream's
/// `elicitation/create`, `sampling/createMessage`, `roots/list`): MCP's input
/// request shape, `{method, params}`. `GET /v1/tasks/{id}` answers it as it is, so
/// `/openapi.json` describes it from this type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(
    description = "A question the task's call asks its owner (an upstream's `elicitation/create`, `sampling/createMessage`, `roots/list` during the call)."
)]
pub struct InputRequest {
    pub method: String,
    // Always written, so `/openapi.json` has it required (`default` is for reading).
    #[serde(default)]
    #[schemars(!default)]
    pub params: serde_json::Value,
}

/// Which replica runs a task, until when (Unix ms of the store's clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub replica: String,
    pub expires_ms: u64,
}

/// One task, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: TaskId,
    pub owner: Owner,
    /// The catalog name of the tool it calls.
    pub tool: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub state: TaskState,
    /// A human-readable word on the state (MCP's `statusMessage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How often a poller should ask, in ms (MCP's `pollInterval`).
    pub poll_interval_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Every progress so far, oldest first, up to [`MAX_PROGRESS_LOG`] (later ones
    /// change only `progress`): what a task's event stream replays on resume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub progress_log: Vec<Progress>,
    /// The call's result (raw JSON), once there is one; at most `tasks.max_result_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Why it failed (or was cancelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Held while it runs; gone once it is terminal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// The call's input requests its owner has not answered yet, by key (the task is
    /// `input_required` while there is one); cleared when it ends.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_requests: BTreeMap<String, InputRequest>,
    /// The owner's answers, by the key of the request they answer (raw results, or
    /// [`crate::tasks::error_answer`]s); kept while the task runs, so a key is never
    /// asked or answered twice; cleared when it ends.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_responses: BTreeMap<String, serde_json::Value>,
}

/// What [`TaskStore::create`] needs.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub owner: Owner,
    pub tool: String,
    pub poll_interval_ms: u64,
    /// The replica that will run it: it holds the first lease.
    pub replica: String,
}

/// A change of a running task: its state (running ones only: finishing goes through
/// [`TaskStore::finish`] or [`TaskStore::cancel`]), message or progress.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskUpdate {
    pub state: Option<TaskState>,
    pub message: Option<String>,
    pub progress: Option<Progress>,
}

/// How a task's call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A result: the task becomes `completed`.
    Completed(serde_json::Value),
    /// The task becomes `failed` with `reason`, and the result when there is one (a
    /// tool result with `isError`).
    Failed {
        reason: String,
        result: Option<serde_json::Value>,
    },
}

impl Outcome {
    /// The state it ends the task in, its result and its error reason.
    pub(crate) fn into_parts(self) -> (TaskState, Option<serde_json::Value>, Option<String>) {
        match self {
            Outcome::Completed(result) => (TaskState::Completed, Some(result), None),
            Outcome::Failed { reason, result } => (TaskState::Failed, result, Some(reason)),
        }
    }
}

/// One page of an owner's tasks, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskPage {
    pub tasks: Vec<TaskRecord>,
    /// Pass it back for the next page; `None` on the last one.
    pub next_cursor: Option<String>,
}

/// Why a task operation was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TaskError {
    /// No such task for this owner: missing, expired, or another owner's.
    #[error("no such task")]
    NotFound,
    /// The tenant already has `limit` tasks running.
    #[error(
        "tenant '{tenant}' already has {limit} tasks running (`tasks.max_running_per_tenant`); \
         wait for one to finish"
    )]
    TooManyRunning { tenant: String, limit: u32 },
    /// The tenant keeps `limit` tasks, running and finished: its share of the store
    /// (`tasks.max_stored_per_tenant`), so that it cannot fill the store for others.
    /// Only time frees a place: a finished task is kept for `ttl`, then forgotten.
    #[error(
        "tenant '{tenant}' already keeps {limit} tasks, running and finished \
         (`tasks.max_stored_per_tenant`); a finished task is kept for `tasks.ttl` \
         ({ttl:?}) after it ends and then frees its place: fetch the results you need \
         and start new tasks then"
    )]
    TenantStoreFull {
        tenant: String,
        limit: usize,
        ttl: std::time::Duration,
    },
    /// The in-process store holds `limit` tasks.
    #[error("the task store is full ({limit} tasks, `tasks.max_stored`); retry later")]
    StoreFull { limit: usize },
    /// The task is over: its state never changes again.
    #[error("the task is already {state}; it cannot become {to}")]
    Finished { state: TaskState, to: TaskState },
    /// [`TaskStore::update`] was asked for a terminal state.
    #[error("use finish or cancel to end a task, not an update to {0}")]
    NotAnUpdate(TaskState),
    /// A progress with a value that is not a finite number.
    #[error("progress values must be finite numbers")]
    InvalidProgress,
    /// A result over `tasks.max_result_bytes`.
    #[error("the task's result is {bytes} bytes, over `tasks.max_result_bytes` ({limit})")]
    ResultTooLarge { bytes: usize, limit: usize },
    /// Another replica holds the task's lease.
    #[error("the task is run by replica '{holder}', not this one")]
    LeaseLost { holder: String },
    /// A list cursor this store did not give out.
    #[error("invalid cursor")]
    BadCursor,
    /// An input request or answer the store cannot take (a key of the wrong form or
    /// used before, too many at once).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A stored record that cannot be read back (written by an incompatible version).
    #[error("task record {id} is unreadable: {detail}")]
    Corrupt { id: String, detail: String },
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Where tasks are kept. Every method but the reaper is owner-checked.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// A new `working` task leased to `new.replica`, unless its tenant already has
    /// `tasks.max_running_per_tenant` running or keeps its
    /// [`stored_per_tenant`](crate::config::TasksConfig::stored_per_tenant) tasks.
    async fn create(&self, new: NewTask) -> Result<TaskRecord, TaskError>;

    /// The task, if it exists and belongs to `owner` (`None` either way otherwise).
    async fn get(&self, owner: &Owner, id: &TaskId) -> Result<Option<TaskRecord>, TaskError>;

    /// Up to `limit` (1 to [`MAX_PAGE`]) of the owner's tasks, oldest first, after
    /// `cursor` (a page's `next_cursor`).
    async fn list(
        &self,
        owner: &Owner,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TaskPage, TaskError>;

    /// Changes a running task's state (to `working` or `input_required`), message or
    /// progress.
    async fn update(
        &self,
        owner: &Owner,
        id: &TaskId,
        update: TaskUpdate,
    ) -> Result<TaskRecord, TaskError>;

    /// Ends a running task with its call's outcome (the result bounded by
    /// `tasks.max_result_bytes`); it is kept for `tasks.ttl` from now.
    async fn finish(
        &self,
        owner: &Owner,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<TaskRecord, TaskError>;

    /// Cancels a running task (the runner notices and stops the call).
    async fn cancel(&self, owner: &Owner, id: &TaskId) -> Result<TaskRecord, TaskError>;

    /// Extends the lease of `replica`'s running task by `tasks.lease` from now.
    async fn renew_lease(
        &self,
        owner: &Owner,
        id: &TaskId,
        replica: &str,
    ) -> Result<TaskRecord, TaskError>;

    /// Records an input request of the running task's call under `key` (unique for
    /// the task's life: a key asked or answered before is refused) and makes the task
    /// `input_required`.
    async fn ask_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        key: &str,
        request: InputRequest,
    ) -> Result<TaskRecord, TaskError>;

    /// Records the owner's answers to pending input requests, by key; an answer for
    /// an unknown or already-answered key is ignored (SEP-2663), and so are the
    /// answers to a task that ended. The task goes back to `working` once no request
    /// is pending.
    async fn answer_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        answers: BTreeMap<String, serde_json::Value>,
    ) -> Result<TaskRecord, TaskError>;

    /// Fails running tasks whose lease ran out by the store's clock, with
    /// [`LEASE_EXPIRED`]; returns their ids (a bounded batch per call: call it
    /// periodically, well within `tasks.lease`).
    async fn reap_expired_leases(&self) -> Result<Vec<TaskId>, TaskError>;
}

/// The store for a gateway: in Redis when the gateway shares state there (`shared`,
/// from [`crate::state::RedisState::from_config`]), otherwise in this process.
pub fn store_for(
    config: &crate::config::Config,
    shared: Option<&crate::state::RedisState>,
) -> Arc<dyn TaskStore> {
    match shared {
        Some(shared) => Arc::new(redis::RedisTaskStore::new(
            shared.conn.clone(),
            &config.tasks,
        )),
        None => Arc::new(memory::MemoryTaskStore::new(&config.tasks)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_never_change_and_running_ones_may_become_any() {
        for from in TaskState::ALL {
            for to in TaskState::ALL {
                let allowed = check_transition(from, to).is_ok();
                assert_eq!(allowed, !from.is_terminal(), "{from} -> {to}");
            }
        }
        assert!(check_transition(TaskState::Working, TaskState::InputRequired).is_ok());
        assert!(check_transition(TaskState::InputRequired, TaskState::Working).is_ok());
        assert!(check_transition(TaskState::InputRequired, TaskState::Cancelled).is_ok());
        assert_eq!(
            check_transition(TaskState::Completed, TaskState::Completed),
            Err(TaskError::Finished {
                state: TaskState::Completed,
                to: TaskState::Completed
            })
        );
        assert!(check_transition(TaskState::Cancelled, TaskState::Working).is_err());
        assert!(check_transition(TaskState::Failed, TaskState::Completed).is_err());
    }

    #[test]
    fn states_use_the_mcp_names() {
        let names: Vec<String> = TaskState::ALL
            .iter()
            .map(|s| {
                serde_json::to_value(s)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "working",
                "input_required",
                "completed",
                "failed",
                "cancelled"
            ]
        );
        for state in TaskState::ALL {
            assert_eq!(TaskState::from_name(state.as_str()), Some(state));
        }
        assert_eq!(TaskState::from_name("running"), None);
    }

    #[test]
    fn ids_are_random_and_parsed_strictly() {
        let a = TaskId::new();
        let b = TaskId::new();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 22, "128 bits in base64url");
        assert_eq!(TaskId::parse(a.as_str()), Some(a));
        for bad in [
            "",
            "short",
            "has}brace-and-long-enough",
            "a b c d e f g h i j k l",
        ] {
            assert_eq!(TaskId::parse(bad), None, "{bad}");
        }
        assert_eq!(TaskId::parse(&"x".repeat(65)), None);
    }

    #[test]
    fn the_memory_backend_keeps_tasks_in_process() {
        let config = crate::config::Config::parse("{}", &|_| None).unwrap();
        let shared = crate::state::RedisState::from_config(&config).unwrap();
        assert!(shared.is_none());
        // A memory store: creating works without any server.
        let store = store_for(&config, shared.as_deref());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let task = runtime
            .block_on(store.create(NewTask {
                owner: Owner::tenant("acme"),
                tool: "t".into(),
                poll_interval_ms: 1000,
                replica: "r".into(),
            }))
            .unwrap();
        assert_eq!(task.state, TaskState::Working);
    }
}
