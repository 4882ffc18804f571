//! Tasks in Redis, shared by every replica.
//!
//! Keys (under `state.key_prefix`; `{id}` is a Redis Cluster hash tag, as for sessions):
//!
//! - `task:{ID}` — a hash: `tenant`, `session` and `subject` (empty for none),
//!   `tool`, `created`,
//!   `updated` (Unix ms), `state`, `poll`, and when set `message`, `progress` (JSON),
//!   `progress_log` (the first `MAX_PROGRESS_LOG` progress JSONs joined by commas) and
//!   `progress_count`,
//!   `result` (the raw JSON text, never decoded by Redis), `error`, `lease_replica`,
//!   `lease_expires`, and per input key `input_request:KEY` (a pending request's
//!   `{method, params}` JSON) or `input_response:KEY` (the owner's answer, JSON text;
//!   one field per key, so answers sent to different replicas never overwrite each
//!   other). It expires `tasks.ttl` after the task ends; while it runs, after
//!   `tasks.call_timeout` plus `tasks.ttl` without an update (a backstop: the reaper
//!   normally ends it first).
//! - `tasks:running:TENANT` — a set of the tenant's running task ids: what
//!   `max_running_per_tenant` counts. A creation first drops ids whose task ended or
//!   expired, so the set heals whatever way a task went.
//! - `tasks:stored:TENANT` — a sorted set of the tenant's kept task ids (running and
//!   finished) by creation time: what `max_stored_per_tenant` counts. A task leaves
//!   it by expiring; a creation that finds it full first drops ids whose task is gone.
//! - `tasks:leases` — a sorted set of running task ids scored by lease expiry: what
//!   the reaper scans.
//! - `tasks:owner:TENANT:SESSION` (`…:~SUBJECT` for a subject's) — the owner's
//!   index for listing: members
//!   `CREATED:ID` (zero-padded, all scored 0, so lexical order is creation order and a
//!   cursor is a member); members whose task expired are dropped when a listing meets
//!   them.
//!
//! Every change is one Lua script, so it is atomic across replicas: the owner check,
//! the transition check and the write cannot be interleaved with another replica's.
//! The scripts run on Redis' clock (`TIME`), one clock for every replica's leases.
//! The transition table in the scripts is generated from
//! [`check_transition`](super::check_transition), so both stores apply the one rule
//! (the scripts are in `scripts`).
//! Like the session scripts, they name keys computed inside the script: right for one
//! Redis server, not for Redis Cluster.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::{FromRedisValue, Script};

use super::{
    CANCELLED, InputRequest, LEASE_EXPIRED, Lease, MAX_INPUT_KEYS, NewTask, Outcome, Owner,
    Progress, TaskError, TaskId, TaskPage, TaskRecord, TaskState, TaskStore, TaskUpdate,
    bounded_result, checked_answers, checked_input_key, page_size, parse_cursor,
};
use crate::config::TasksConfig;
use crate::state::conn::RedisConn;
use scripts::{ANSWER, ASK, CREATE, LIST, PRELUDE, REAP, RENEW, TRANSITION, rule_tables};

mod scripts;

/// Most tasks one reaper pass fails.
const REAP_BATCH: usize = 100;

pub struct RedisTaskStore {
    conn: Arc<RedisConn>,
    config: TasksConfig,
    create: Script,
    transition: Script,
    renew: Script,
    reap: Script,
    list: Script,
    ask: Script,
    answer: Script,
}

fn ms(duration: Duration) -> u64 {
    duration.as_millis().clamp(1, u128::from(u64::MAX)) as u64
}

/// A script's answer: an outcome word and its fields (or detail).
type Answer = (String, Vec<String>);

impl RedisTaskStore {
    pub fn new(conn: Arc<RedisConn>, config: &TasksConfig) -> RedisTaskStore {
        let rules = rule_tables();
        let script = |body: &str| Script::new(&format!("{rules}{PRELUDE}{body}"));
        RedisTaskStore {
            conn,
            config: config.clone(),
            create: script(CREATE),
            transition: script(TRANSITION),
            renew: script(RENEW),
            reap: script(REAP),
            list: script(LIST),
            ask: script(ASK),
            answer: script(ANSWER),
        }
    }

    fn task_key(&self, id: &TaskId) -> String {
        self.conn.key(&format!("task:{{{id}}}"))
    }

    fn index_key(&self, owner: &Owner) -> String {
        // `~` starts no session id (base64url), so a subject's index never meets a
        // session's.
        let subject = owner
            .subject
            .as_deref()
            .map_or(String::new(), |s| format!(":~{s}"));
        self.conn.key(&format!(
            "tasks:owner:{}:{}{subject}",
            owner.tenant,
            owner.session.as_deref().unwrap_or("")
        ))
    }

    /// Runs `script` with the shared arguments, then `args`, within `command_timeout`.
    async fn invoke<T: FromRedisValue>(
        &self,
        what: &str,
        script: &Script,
        key: Option<String>,
        args: Vec<String>,
    ) -> Result<T, TaskError> {
        let keep_running = ms(self.config.call_timeout).saturating_add(ms(self.config.ttl));
        let shared = [
            self.conn.key(""),
            ms(self.config.ttl).to_string(),
            keep_running.to_string(),
            ms(self.config.lease).to_string(),
        ];
        let answer = self
            .conn
            .run(what, |mut c| async move {
                let mut invocation = script.prepare_invoke();
                if let Some(key) = key {
                    invocation.key(key);
                }
                for arg in shared.iter().chain(&args) {
                    invocation.arg(arg);
                }
                invocation.invoke_async(&mut c).await
            })
            .await?;
        Ok(answer)
    }

    /// Moves the owner's task to `to` (`None`: keeps its state) writing `fields`.
    async fn change(
        &self,
        what: &str,
        owner: &Owner,
        id: &TaskId,
        to: Option<TaskState>,
        fields: Vec<(&str, String)>,
    ) -> Result<TaskRecord, TaskError> {
        let mut args = owner_args(id, owner);
        args.push(to.map(|s| s.as_str().to_owned()).unwrap_or_default());
        for (field, value) in fields {
            args.push(field.to_owned());
            args.push(value);
        }
        let (outcome, detail): Answer = self
            .invoke(what, &self.transition, Some(self.task_key(id)), args)
            .await?;
        match outcome.as_str() {
            "ok" => record(id, detail),
            "refused" => Err(refused(id, &detail, to)),
            _ => Err(TaskError::NotFound),
        }
    }
}

/// Id, tenant and scope, as the scripts take them: the scope is the session and the
/// subject joined by `\x1f` (neither holds a control character: session ids are
/// base64url, subjects are checked by `config::subject`).
fn owner_args(id: &TaskId, owner: &Owner) -> Vec<String> {
    vec![
        id.to_string(),
        owner.tenant.clone(),
        format!(
            "{}\x1f{}",
            owner.session.as_deref().unwrap_or(""),
            owner.subject.as_deref().unwrap_or("")
        ),
    ]
}

/// The error for a refused transition from the state the script reported.
fn refused(id: &TaskId, detail: &[String], to: Option<TaskState>) -> TaskError {
    match detail.first().and_then(|s| TaskState::from_name(s)) {
        Some(state) => TaskError::Finished {
            state,
            to: to.unwrap_or(state),
        },
        None => corrupt(id, "unknown state"),
    }
}

fn corrupt(id: &TaskId, detail: &str) -> TaskError {
    TaskError::Corrupt {
        id: id.to_string(),
        detail: detail.to_owned(),
    }
}

/// Whether a task hash's fields (HGETALL's flat list) name `owner`: checked before a
/// record is decoded, so another owner's task is "not found" even when unreadable.
fn owned_by(flat: &[String], owner: &Owner) -> bool {
    let field = |name: &str| {
        flat.chunks(2)
            .find(|pair| pair[0] == name)
            .and_then(|pair| pair.get(1))
            .map(String::as_str)
    };
    field("tenant") == Some(owner.tenant.as_str())
        && field("session").unwrap_or("") == owner.session.as_deref().unwrap_or("")
        && field("subject").unwrap_or("") == owner.subject.as_deref().unwrap_or("")
}

/// A record from a task hash's fields (HGETALL's flat field, value list).
fn record(id: &TaskId, flat: Vec<String>) -> Result<TaskRecord, TaskError> {
    let mut fields = std::collections::HashMap::new();
    let mut pairs = flat.into_iter();
    while let (Some(field), Some(value)) = (pairs.next(), pairs.next()) {
        fields.insert(field, value);
    }
    let text = |name: &str| fields.get(name).cloned();
    let number = |name: &str| -> Result<u64, TaskError> {
        fields
            .get(name)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| corrupt(id, &format!("field `{name}`")))
    };
    let state = text("state")
        .and_then(|s| TaskState::from_name(&s))
        .ok_or_else(|| corrupt(id, "field `state`"))?;
    let progress = match text("progress") {
        Some(json) => Some(
            serde_json::from_str::<Progress>(&json)
                .map_err(|e| corrupt(id, &format!("progress: {e}")))?,
        ),
        None => None,
    };
    // The log is the progress JSON objects joined by commas (appended by the script).
    let progress_log = match text("progress_log") {
        Some(joined) => serde_json::from_str::<Vec<Progress>>(&format!("[{joined}]"))
            .map_err(|e| corrupt(id, &format!("progress_log: {e}")))?,
        None => Vec::new(),
    };
    let result = match text("result") {
        Some(json) => {
            Some(serde_json::from_str(&json).map_err(|e| corrupt(id, &format!("result: {e}")))?)
        }
        None => None,
    };
    let mut input_requests = std::collections::BTreeMap::new();
    let mut input_responses = std::collections::BTreeMap::new();
    for (field, value) in &fields {
        if let Some(key) = field.strip_prefix("input_request:") {
            let request: InputRequest = serde_json::from_str(value)
                .map_err(|e| corrupt(id, &format!("input request {key}: {e}")))?;
            input_requests.insert(key.to_owned(), request);
        } else if let Some(key) = field.strip_prefix("input_response:") {
            let answer = serde_json::from_str(value)
                .map_err(|e| corrupt(id, &format!("input response {key}: {e}")))?;
            input_responses.insert(key.to_owned(), answer);
        }
    }
    let lease = match text("lease_replica") {
        Some(replica) => Some(Lease {
            replica,
            expires_ms: number("lease_expires")?,
        }),
        None => None,
    };
    Ok(TaskRecord {
        id: id.clone(),
        owner: Owner {
            tenant: text("tenant").ok_or_else(|| corrupt(id, "field `tenant`"))?,
            subject: text("subject").filter(|s| !s.is_empty()),
            session: text("session").filter(|s| !s.is_empty()),
        },
        tool: text("tool").unwrap_or_default(),
        created_ms: number("created")?,
        updated_ms: number("updated")?,
        state,
        message: text("message"),
        poll_interval_ms: number("poll")?,
        progress,
        progress_log,
        result,
        error: text("error"),
        lease,
        input_requests,
        input_responses,
    })
}

#[async_trait]
impl TaskStore for RedisTaskStore {
    async fn create(&self, new: NewTask) -> Result<TaskRecord, TaskError> {
        let id = TaskId::new();
        let mut args = owner_args(&id, &new.owner);
        args.extend([
            new.tool,
            new.poll_interval_ms.to_string(),
            new.replica,
            self.config.max_running_per_tenant.to_string(),
            self.index_key(&new.owner),
            self.config.stored_per_tenant().to_string(),
        ]);
        let (outcome, fields): Answer = self
            .invoke("create task", &self.create, Some(self.task_key(&id)), args)
            .await?;
        match outcome.as_str() {
            "ok" => record(&id, fields),
            "kept" => Err(TaskError::TenantStoreFull {
                tenant: new.owner.tenant,
                limit: self.config.stored_per_tenant(),
                ttl: self.config.ttl,
            }),
            _ => Err(TaskError::TooManyRunning {
                tenant: new.owner.tenant,
                limit: self.config.max_running_per_tenant,
            }),
        }
    }

    async fn get(&self, owner: &Owner, id: &TaskId) -> Result<Option<TaskRecord>, TaskError> {
        let key = self.task_key(id);
        let flat: Vec<String> = self
            .conn
            .run("read task", |mut c| async move {
                redis::cmd("HGETALL").arg(key).query_async(&mut c).await
            })
            .await?;
        if !owned_by(&flat, owner) {
            return Ok(None);
        }
        let task = record(id, flat)?;
        Ok((task.owner == *owner).then_some(task))
    }

    async fn list(
        &self,
        owner: &Owner,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<TaskPage, TaskError> {
        let start = match cursor {
            Some(cursor) => format!("({}", parse_cursor(cursor)?),
            None => "-".to_owned(),
        };
        let limit = page_size(limit);
        let args = vec![self.index_key(owner), start, (limit + 1).to_string()];
        let mut members: Vec<(String, Vec<String>)> =
            self.invoke("list tasks", &self.list, None, args).await?;
        let next_cursor = (members.len() > limit).then(|| members[limit - 1].0.clone());
        members.truncate(limit);
        let mut tasks = Vec::new();
        for (member, fields) in members {
            let Some(id) = member.get(16..).and_then(TaskId::parse) else {
                continue;
            };
            if !owned_by(&fields, owner) {
                continue;
            }
            let task = record(&id, fields)?;
            if task.owner == *owner {
                tasks.push(task);
            }
        }
        Ok(TaskPage { tasks, next_cursor })
    }

    async fn update(
        &self,
        owner: &Owner,
        id: &TaskId,
        update: TaskUpdate,
    ) -> Result<TaskRecord, TaskError> {
        super::checked_update(&update)?;
        let mut fields = Vec::new();
        if let Some(message) = update.message {
            fields.push(("message", message));
        }
        if let Some(progress) = update.progress {
            let json = serde_json::to_string(&progress).map_err(|e| corrupt(id, &e.to_string()))?;
            fields.push(("progress", json));
        }
        self.change("update task", owner, id, update.state, fields)
            .await
    }

    async fn finish(
        &self,
        owner: &Owner,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<TaskRecord, TaskError> {
        let (to, result, error) = outcome.into_parts();
        let mut fields = Vec::new();
        if let Some(result) = &result {
            fields.push((
                "result",
                bounded_result(result, self.config.max_result_bytes)?,
            ));
        }
        if let Some(error) = error {
            fields.push(("error", error));
        }
        self.change("finish task", owner, id, Some(to), fields)
            .await
    }

    async fn cancel(&self, owner: &Owner, id: &TaskId) -> Result<TaskRecord, TaskError> {
        let fields = vec![("error", CANCELLED.to_owned())];
        self.change("cancel task", owner, id, Some(TaskState::Cancelled), fields)
            .await
    }

    async fn renew_lease(
        &self,
        owner: &Owner,
        id: &TaskId,
        replica: &str,
    ) -> Result<TaskRecord, TaskError> {
        let mut args = owner_args(id, owner);
        args.push(replica.to_owned());
        let (outcome, detail): Answer = self
            .invoke(
                "renew task lease",
                &self.renew,
                Some(self.task_key(id)),
                args,
            )
            .await?;
        match outcome.as_str() {
            "ok" => record(id, detail),
            "refused" => Err(refused(id, &detail, None)),
            "lost" => Err(TaskError::LeaseLost {
                holder: detail.into_iter().next().unwrap_or_default(),
            }),
            _ => Err(TaskError::NotFound),
        }
    }

    async fn ask_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        key: &str,
        request: InputRequest,
    ) -> Result<TaskRecord, TaskError> {
        checked_input_key(key)?;
        let value = serde_json::to_value(&request).map_err(|e| corrupt(id, &e.to_string()))?;
        let text = bounded_result(&value, self.config.max_result_bytes)?;
        let mut args = owner_args(id, owner);
        args.extend([key.to_owned(), text, MAX_INPUT_KEYS.to_string()]);
        let (outcome, detail): Answer = self
            .invoke("ask task input", &self.ask, Some(self.task_key(id)), args)
            .await?;
        match outcome.as_str() {
            "ok" => record(id, detail),
            "refused" => Err(refused(id, &detail, Some(TaskState::InputRequired))),
            "used" => Err(TaskError::InvalidInput(format!(
                "input key '{key}' was used before"
            ))),
            "full" => Err(TaskError::InvalidInput(format!(
                "{MAX_INPUT_KEYS} input requests are pending already"
            ))),
            _ => Err(TaskError::NotFound),
        }
    }

    async fn answer_input(
        &self,
        owner: &Owner,
        id: &TaskId,
        answers: std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Result<TaskRecord, TaskError> {
        let answers = checked_answers(answers, self.config.max_result_bytes)?;
        let mut args = owner_args(id, owner);
        for (key, text) in answers {
            args.push(key);
            args.push(text);
        }
        let (outcome, detail): Answer = self
            .invoke(
                "answer task input",
                &self.answer,
                Some(self.task_key(id)),
                args,
            )
            .await?;
        match outcome.as_str() {
            "ok" => record(id, detail),
            _ => Err(TaskError::NotFound),
        }
    }

    async fn reap_expired_leases(&self) -> Result<Vec<TaskId>, TaskError> {
        let args = vec![REAP_BATCH.to_string(), LEASE_EXPIRED.to_owned()];
        let ids: Vec<String> = self
            .invoke("reap task leases", &self.reap, None, args)
            .await?;
        Ok(ids.iter().filter_map(|id| TaskId::parse(id)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::suite as state_suite;
    use crate::state::tasks::suite;

    #[tokio::test]
    async fn redis_store_passes_the_task_suite() {
        suite::run_all(&|config| Box::pin(redis_store(config))).await;
    }

    async fn redis_store(config: TasksConfig) -> Option<Arc<dyn TaskStore>> {
        let config = short_lived(config);
        let state = state_suite::test_state(&state_suite::redis_url());
        let conn = state_suite::redis_conn(&state).await?;
        let store: Arc<dyn TaskStore> = Arc::new(RedisTaskStore::new(conn, &config));
        Some(store)
    }

    /// The suite's config with keys that leave the test Redis within a minute (no
    /// test waits on `ttl` or `call_timeout` longer than that).
    fn short_lived(config: TasksConfig) -> TasksConfig {
        TasksConfig {
            ttl: config.ttl.min(Duration::from_secs(30)),
            call_timeout: config.call_timeout.min(Duration::from_secs(30)),
            ..config
        }
    }

    /// Two connections are two replicas: a task created on one is read, renewed and
    /// finished on the other; concurrent creations never pass the tenant's limit.
    #[tokio::test]
    async fn two_replicas_share_tasks_and_the_running_limit() {
        let state = state_suite::test_state(&state_suite::redis_url());
        let Some(a) = state_suite::redis_conn(&state).await else {
            return;
        };
        let b = RedisConn::new(&state).unwrap();
        let config = short_lived(TasksConfig {
            max_running_per_tenant: 5,
            ..TasksConfig::default()
        });
        let a = Arc::new(RedisTaskStore::new(a, &config));
        let b = Arc::new(RedisTaskStore::new(b, &config));
        let owner = Owner::tenant("acme");
        let mut creations = Vec::new();
        for i in 0..20 {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            let new = suite::new_task(&owner);
            creations.push(tokio::spawn(async move { store.create(new).await }));
        }
        let mut created = Vec::new();
        for creation in creations {
            if let Ok(task) = creation.await.unwrap() {
                created.push(task);
            }
        }
        assert_eq!(created.len(), 5, "exactly the limit was admitted");
        let task = &created[0];
        let seen = b.get(&owner, &task.id).await.unwrap().expect("shared");
        assert_eq!(seen.id, task.id);
        b.finish(
            &owner,
            &task.id,
            Outcome::Completed(serde_json::json!({"ok": true})),
        )
        .await
        .unwrap();
        assert_eq!(
            a.get(&owner, &task.id).await.unwrap().unwrap().state,
            TaskState::Completed
        );
        a.create(suite::new_task(&owner))
            .await
            .expect("a finished task frees its place");
    }

    /// Replica A runs a task and stops renewing its lease (it died): replica B's
    /// reaper fails it with the reason, and A sees the same.
    #[tokio::test]
    async fn another_replica_fails_a_task_whose_replica_stopped() {
        let state = state_suite::test_state(&state_suite::redis_url());
        let Some(a) = state_suite::redis_conn(&state).await else {
            return;
        };
        let b = RedisConn::new(&state).unwrap();
        let config = short_lived(TasksConfig {
            lease: Duration::from_millis(300),
            ..TasksConfig::default()
        });
        let a = RedisTaskStore::new(a, &config);
        let b = RedisTaskStore::new(b, &config);
        let owner = Owner::session("acme", "s1");
        let task = a.create(suite::new_task(&owner)).await.unwrap();
        assert!(
            b.reap_expired_leases().await.unwrap().is_empty(),
            "a live lease is left alone"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            b.reap_expired_leases().await.unwrap(),
            std::slice::from_ref(&task.id)
        );
        let failed = a.get(&owner, &task.id).await.unwrap().unwrap();
        assert_eq!(failed.state, TaskState::Failed);
        assert_eq!(failed.error.as_deref(), Some(LEASE_EXPIRED));
    }

    #[tokio::test]
    async fn unreachable_redis_is_unavailable() {
        let mut state = state_suite::test_state("redis://127.0.0.1:1");
        state.connect_timeout = Duration::from_millis(300);
        state.command_timeout = Duration::from_millis(300);
        let conn = RedisConn::new(&state).unwrap();
        let store = RedisTaskStore::new(conn, &TasksConfig::default());
        let started = std::time::Instant::now();
        let error = store
            .get(&Owner::tenant("acme"), &TaskId::new())
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3), "bounded wait");
        assert!(matches!(error, TaskError::Unavailable(_)), "{error:?}");
    }
}
