//! Background calls, the service: a call that becomes a task runs here ([`Tasks`]: the
//! running calls, their leases, the reaper of dead replicas' tasks, and the owner's
//! input a call waits for), while every replica answers for it from the task store.
//!
//! What a task *is* — its record, its states and their one transition rule, and the
//! stores that keep it in this process or in Redis — is [`crate::state::tasks`]; the
//! record types the surfaces read are re-exported here, so a surface names the service
//! it uses and not where its records are kept. The MCP and REST task surfaces are
//! built on this module.

mod input;
mod runner;

pub use crate::config::TaskSupport;
pub use crate::state::tasks::{Owner, Progress, TaskError, TaskId, TaskRecord, TaskState};
pub use input::{answer_of, error_answer};
pub use runner::{POLL_INTERVAL, SHUT_DOWN, StartRefused, TaskCall, Tasks};

// The store's contract as the runner and its input bridge use it (`super::…`).
use crate::state::tasks::{
    InputRequest, LEASE_EXPIRED, NewTask, Outcome, TaskPage, TaskStore, TaskUpdate,
    checked_progress,
};
