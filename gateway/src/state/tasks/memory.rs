//! Tasks in this process (`state.backend: memory`): a table bounded by
//! `tasks.max_stored`, and each tenant's share of it by
//! `tasks.max_stored_per_tenant`. A full table (or share) refuses new tasks rather
//! than forget results not yet fetched; expired tasks (finished ones past
//! `tasks.ttl`) are dropped first.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::{
    CANCELLED, InputRequest, LEASE_EXPIRED, Lease, MAX_INPUT_KEYS, NewTask, Outcome, Owner,
    TaskError, TaskId, TaskPage, TaskRecord, TaskState, TaskStore, TaskUpdate, bounded_result,
    check_transition, checked_answers, checked_input_key, list_position, page_size, parse_cursor,
};
use crate::config::TasksConfig;

/// Most tasks one reaper pass fails (the Redis store's batch, kept the same here).
const REAP_BATCH: usize = 100;

pub struct MemoryTaskStore {
    config: TasksConfig,
    tasks: Mutex<HashMap<TaskId, TaskRecord>>,
}

/// Unix ms now.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn ms(duration: Duration) -> u64 {
    duration.as_millis().min(u128::from(u64::MAX)) as u64
}

impl MemoryTaskStore {
    pub fn new(config: &TasksConfig) -> MemoryTaskStore {
        MemoryTaskStore {
            config: config.clone(),
            tasks: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<TaskId, TaskRecord>> {
        // A panic elsewhere while holding the lock leaves a consistent map (every
        // change is one insert or field write): keep using it.
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `task` is past keeping at `now`: a finished task `ttl` after it
    /// ended; a running one (whose replica never reported, nor a reaper ran) after
    /// the longest a call may run plus `ttl`, as the Redis store's key expiry does.
    fn expired(&self, task: &TaskRecord, now: u64) -> bool {
        let keep = if task.state.is_terminal() {
            ms(self.config.ttl)
        } else {
            ms(self.config.call_timeout).saturating_add(ms(self.config.ttl))
        };
        task.updated_ms.saturating_add(keep) <= now
    }

    /// The owner's live task `id`, for a change.
    fn owned<'a>(
        &self,
        tasks: &'a mut HashMap<TaskId, TaskRecord>,
        owner: &Owner,
        id: &TaskId,
        now: u64,
    ) -> Result<&'a mut TaskRecord, TaskError> {
        if tasks.get(id).is_some_and(|task| self.expired(task, now)) {
            tasks.remove(id);
        }
        match tasks.get_mut(id) {
            Some(task) if task.owner == *owner => Ok(task),
            _ => Err(TaskError::NotFound),
        }
    }

    /// Moves a task to `to` (checked), ending its lease when `to` is terminal.
    fn transition(task: &mut TaskRecord, to: TaskState, now: u64) -> Result<(), TaskError> {
        check_transition(task.state, to)?;
        task.state = to;
        task.updated_ms = now;
        if to.is_terminal() {
            task.lease = None;
            task.input_requests.clear();
            task.input_responses.clear();
        }
        Ok(())
    }
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn create(&self, new: NewTask) -> Result<TaskRecord, TaskError> {
        let now = now_ms();
        let mut tasks = self.lock();
        // One pass counts the tenant's kept and running tasks (expired ones are gone
        // already for every purpose but memory).
        let (mut kept, mut running) = (0usize, 0usize);
        for task in tasks.values() {
            if task.owner.tenant == new.owner.tenant && !self.expired(task, now) {
                kept += 1;
                running += usize::from(!task.state.is_terminal());
            }
        }
        let limit = self.config.max_running_per_tenant;
        if running >= limit as usize {
            return Err(TaskError::TooManyRunning {
                tenant: new.owner.tenant,
                limit,
            });
        }
        // The tenant's own share before the shared bound: a tenant at its share is told
        // so, and never brings the store to where other tenants are refused.
        let share = self.config.stored_per_tenant();
        if kept >= share {
            return Err(TaskError::TenantStoreFull {
                tenant: new.owner.tenant,
                limit: share,
                ttl: self.config.ttl,
            });
        }
        if tasks.len() >= self.config.max_stored {
            tasks.retain(|_, task| !self.expired(task, now));
            if tasks.len() >= self.config.max_stored {
                return Err(TaskError::StoreFull {
                    limit: self.config.max_stored,
                });
            }
        }
        let task = TaskRecord {
            id: TaskId::new(),
            owner: new.owner,
            tool: new.tool,
            created_ms: now,
            updated_ms: now,
            state: TaskState::Working,
            message: None,
            poll_interval_ms: new.poll_interval_ms,
            progress: None,
            progress_log: Vec::new(),
            result: None,
            error: None,
            lease: Some(Lease {
                replica: new.replica,
                expires_ms: now.saturating_add(ms(self.config.lease)),
            }),
            input_requests: Default::default(),
            input_responses: Default::default(),
        };
        tasks.insert(task.id.clone(), task.clone());
        Ok(task)
    }

    async fn get(&self, owner: &Owner, id: &TaskId) -> Result<Option<TaskRecord>, TaskError> {
        let now = now_ms();
        let mut tasks = self.lock();
        match self.owned(&mut tasks, owner, id, now) {
            Ok(task) => Ok(Some(task.clone())),
            Err(_) => Ok(None),
        }
    }

    async fn list(
        &self,
        owner: &Owner,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TaskPage, TaskError> {
        let after = cursor.map(parse_cursor).transpose()?;
        let limit = page_size(limit);
        let now = now_ms();
        let mut tasks = self.lock();
        tasks.retain(|_, task| !self.expired(task, now));
        let mut mine: Vec<(String, &TaskRecord)> = tasks
            .values()
            .filter(|t| t.owner == *owner)
            .map(|t| (list_position(t.created_ms, &t.id), t))
            .filter(|(position, _)| after.as_ref().is_none_or(|after| position > after))
            .collect();
        mine.sort_by(|a, b| a.0.cmp(&b.0));
        let more = mine.len() > limit;
        mine.truncate(limit);
        let next_cursor = more.then(|| mine.last().map(|(p, _)| p.clone())).flatten();
        Ok(TaskPage {
            tasks: mine.into_iter().map(|(_, t)| t.clone()).collect(),
            next_cursor,
        })
    }

    async fn update(
        &self,
        owner: &Owner,
        id: &TaskId,
        update: TaskUpdate,
    ) -> Result<TaskRecord, TaskError> {
        super::checked_update(&update)?;
        let now = now_ms();
        let mut tasks = self.lock();
        let task = self.owned(&mut tasks, owner, id, now)?;
        let to = update.state.unwrap_or(task.state);
        Self::transition(task, to, now)?;
        if let Some(message) = update.message {
            task.message = Some(message);
        }
        if let Some(progress) = update.progress {
            if task.progress_log.len() < super::MAX_PROGRESS_LOG {
                task.progress_log.push(progress.clone());
            }
            task.progress = Some(progress);
        }
        Ok(task.clone())
    }

    async fn finish(
        &self,
        owner: &Owner,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<TaskRecord, TaskError> {
        let (to, result, error) = outcome.into_parts();
        if let Some(result) = &result {
            bounded_result(result, self.config.max_result_bytes)?;
        }
        let now = now_ms();
        let mut tasks = self.lock();
        let task = self.owned(&mut tasks, owner, id, now)?;
        Self::transition(task, to, now)?;
        task.result = result;
        task.error = error;
        Ok(task.clone())
    }

    async fn cancel(&self, owner: &Owner, id: &TaskId) -> Result<TaskRecord, TaskError> {
        let now = now_ms();
        let mut tasks = self.lock();
        let task = self.owned(&mut tasks, owner, id, now)?;
        Self::transition(task, TaskState::Cancelled, now)?;
        task.error = Some(CANCELLED.to_owned());
        Ok(task.clone())
    }

    async fn renew_lease(
        &self,
        owner: &Owner,
        id: &TaskId,
        replica: &str,
    ) -> Result<TaskRecord, TaskError> {
        let now = now_ms();
        let mut tasks = self.lock();
        let task = self.owned(&mut tasks, owner, id, now)?;
        check_transition(task.state, task.state)?;
        match &mut task.lease {
            Some(lease) if lease.replica == replica => {
                lease.expires_ms = now.saturating_add(ms(self.config.lease));
            }
            other => {
                return Err(TaskError::LeaseLost {
                    holder: other
                        .as_ref()
                        .map(|l| l.replica.clone())
                        .unwrap_or_default(),
                });
            }
        }
        Ok(task.clone())
    }

    async fn ask_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        key: &str,
        request: InputRequest,
    ) -> Result<TaskRecord, TaskError> {
        checked_input_key(key)?;
        let text = serde_json::to_value(&request).unwrap_or_default();
        bounded_result(&text, self.config.max_result_bytes)?;
        let now = now_ms();
        let mut tasks = self.lock();
        let task = self.owned(&mut tasks, owner, id, now)?;
        check_transition(task.state, TaskState::InputRequired)?;
        if task.input_requests.contains_key(key) || task.input_responses.contains_key(key) {
            return Err(TaskError::InvalidInput(format!(
                "input key '{key}' was used before"
            )));
        }
        if task.input_requests.len() >= MAX_INPUT_KEYS {
            return Err(TaskError::InvalidInput(format!(
                "{MAX_INPUT_KEYS} input requests are pending already"
            )));
        }
        task.input_requests.insert(key.to_owned(), request);
        Self::transition(task, TaskState::InputRequired, now)?;
        Ok(task.clone())
    }

    async fn answer_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        answers: std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Result<TaskRecord, TaskError> {
        let answers = checked_answers(answers, self.config.max_result_bytes)?;
        let now = now_ms();
        let mut tasks = self.lock();
        let task = self.owned(&mut tasks, owner, id, now)?;
        let mut changed = false;
        for (key, text) in answers {
            if task.input_requests.remove(&key).is_some() {
                // Stored as the Redis store keeps it: JSON text read back.
                let answer = serde_json::from_str(&text).unwrap_or_default();
                task.input_responses.insert(key, answer);
                changed = true;
            }
        }
        if changed {
            let to = if task.input_requests.is_empty() && task.state == TaskState::InputRequired {
                TaskState::Working
            } else {
                task.state
            };
            Self::transition(task, to, now)?;
        }
        Ok(task.clone())
    }

    async fn reap_expired_leases(&self) -> Result<Vec<TaskId>, TaskError> {
        let now = now_ms();
        let mut tasks = self.lock();
        tasks.retain(|_, task| !self.expired(task, now));
        let mut reaped = Vec::new();
        for task in tasks.values_mut() {
            if reaped.len() >= REAP_BATCH {
                break;
            }
            let lapsed = task.lease.as_ref().is_some_and(|l| l.expires_ms <= now);
            if lapsed && Self::transition(task, TaskState::Failed, now).is_ok() {
                task.error = Some(LEASE_EXPIRED.to_owned());
                reaped.push(task.id.clone());
            }
        }
        Ok(reaped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tasks::suite;

    #[tokio::test]
    async fn memory_store_passes_the_task_suite() {
        suite::run_all(&|config| {
            let store: std::sync::Arc<dyn TaskStore> =
                std::sync::Arc::new(MemoryTaskStore::new(&config));
            Box::pin(async move { Some(store) })
        })
        .await;
    }

    /// Three tenants fill a store of 3 (each within its share): a fourth tenant is
    /// refused with the store's bound until a finished task expires.
    #[tokio::test]
    async fn a_full_store_refuses_until_finished_tasks_expire() {
        let config = TasksConfig {
            max_stored: 3,
            max_stored_per_tenant: Some(2),
            ttl: Duration::from_millis(300),
            ..TasksConfig::default()
        };
        let store = MemoryTaskStore::new(&config);
        let owners: Vec<Owner> = ["a", "b", "c"].into_iter().map(Owner::tenant).collect();
        let mut ids = Vec::new();
        for owner in &owners {
            ids.push(store.create(suite::new_task(owner)).await.unwrap().id);
        }
        let late = Owner::tenant("d");
        assert_eq!(
            store.create(suite::new_task(&late)).await,
            Err(TaskError::StoreFull { limit: 3 })
        );
        store
            .finish(
                &owners[0],
                &ids[0],
                Outcome::Completed(serde_json::json!(1)),
            )
            .await
            .unwrap();
        assert!(
            store.create(suite::new_task(&late)).await.is_err(),
            "a finished task is kept for its ttl"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        store
            .create(suite::new_task(&late))
            .await
            .expect("the expired task made room");
        assert_eq!(store.get(&owners[0], &ids[0]).await.unwrap(), None);
        assert!(store.get(&owners[1], &ids[1]).await.unwrap().is_some());
    }
}
