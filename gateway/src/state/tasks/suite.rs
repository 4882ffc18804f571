//! One test suite for every task store: the same async functions run against
//! [`MemoryTaskStore`](super::memory::MemoryTaskStore) and
//! [`RedisTaskStore`](super::redis::RedisTaskStore), so both keep the same contract.
//! Redis is found as in [`crate::state::suite`] (skipped with a notice when it does
//! not answer, a failure under `CI=true`). Every wait is a bounded sleep.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{
    InputRequest, LEASE_EXPIRED, NewTask, Outcome, Owner, Progress, TaskError, TaskId, TaskState,
    TaskStore, TaskUpdate,
};
use crate::config::TasksConfig;

pub(crate) type Factory =
    dyn Fn(TasksConfig) -> Pin<Box<dyn Future<Output = Option<Arc<dyn TaskStore>>> + Send>>;

/// A task of `owner` run by replica `r1`.
pub(crate) fn new_task(owner: &Owner) -> NewTask {
    NewTask {
        owner: owner.clone(),
        tool: "docs__search".to_owned(),
        poll_interval_ms: 500,
        replica: "r1".to_owned(),
    }
}

/// Runs every store test, each with a store made by `factory` for its config;
/// returns early when the factory has no store (a skipped backend).
pub(crate) async fn run_all(factory: &Factory) {
    let Some(store) = factory(TasksConfig::default()).await else {
        return;
    };
    create_and_read(store.as_ref()).await;
    one_ending_wins(store.clone()).await;
    owners_are_isolated_on_every_method(store.as_ref()).await;
    transitions_and_terminal_states(store.as_ref()).await;
    listing_pages(store.as_ref()).await;
    progress_is_logged_up_to_its_bound(store.as_ref()).await;
    input_requests_and_answers(store.as_ref()).await;
    concurrent_answers_all_count(store.clone()).await;
    let Some(limited) = factory(TasksConfig {
        max_running_per_tenant: 3,
        ..TasksConfig::default()
    })
    .await
    else {
        return;
    };
    running_limit_per_tenant(limited.as_ref()).await;
    let Some(small) = factory(TasksConfig {
        max_result_bytes: 100,
        ..TasksConfig::default()
    })
    .await
    else {
        return;
    };
    results_are_bounded(small.as_ref()).await;
    let Some(leased) = factory(TasksConfig {
        lease: Duration::from_millis(400),
        ..TasksConfig::default()
    })
    .await
    else {
        return;
    };
    expired_leases_fail_the_task(leased.as_ref()).await;
    let Some(short) = factory(TasksConfig {
        ttl: Duration::from_millis(500),
        ..TasksConfig::default()
    })
    .await
    else {
        return;
    };
    finished_tasks_expire_after_ttl(short.as_ref()).await;
    let Some(shared) = factory(TasksConfig {
        max_stored: 10,
        max_stored_per_tenant: Some(3),
        ttl: Duration::from_millis(500),
        ..TasksConfig::default()
    })
    .await
    else {
        return;
    };
    kept_tasks_are_bounded_per_tenant(shared).await;
}

async fn create_and_read(store: &dyn TaskStore) {
    let owner = Owner::session("acme", "s1");
    let task = store.create(new_task(&owner)).await.unwrap();
    assert_eq!(task.state, TaskState::Working);
    assert_eq!(task.owner, owner);
    assert_eq!(task.tool, "docs__search");
    assert_eq!(task.poll_interval_ms, 500);
    assert_eq!(task.id.as_str().len(), 22, "128 random bits");
    assert!(task.created_ms > 1_600_000_000_000, "Unix ms");
    assert_eq!(task.created_ms, task.updated_ms);
    let lease = task.lease.clone().expect("a running task is leased");
    assert_eq!(lease.replica, "r1");
    assert!(lease.expires_ms >= task.created_ms + 29_000, "{lease:?}");
    assert_eq!(store.get(&owner, &task.id).await.unwrap(), Some(task));
    assert_eq!(store.get(&owner, &TaskId::new()).await.unwrap(), None);
}

/// Another tenant, the same tenant in another session, the same tenant without a
/// session, and another person (subject) of the same tenant all get "not found" from
/// every method, and nothing changes.
async fn owners_are_isolated_on_every_method(store: &dyn TaskStore) {
    let alice = |owner: Owner| owner.as_subject(Some("alice"));
    let candidates = [
        Owner::session("acme", "s1"),
        Owner::session("other", "s1"),
        Owner::session("acme", "s2"),
        Owner::tenant("acme"),
        alice(Owner::tenant("acme")),
        alice(Owner::session("acme", "s1")),
        Owner::tenant("acme").as_subject(Some("bob")),
        alice(Owner::tenant("other")),
    ];
    for owner in [&candidates[0], &candidates[4]] {
        isolated_from(store, owner, candidates.iter().filter(|o| *o != owner)).await;
    }
}

async fn isolated_from<'a>(
    store: &dyn TaskStore,
    owner: &Owner,
    others: impl Iterator<Item = &'a Owner>,
) {
    let task = store.create(new_task(owner)).await.unwrap();
    assert_eq!(task.owner, *owner);
    let missing = TaskId::new();
    for other in others {
        for id in [&task.id, &missing] {
            assert_eq!(store.get(other, id).await.unwrap(), None, "{other:?}");
            let update = TaskUpdate {
                state: Some(TaskState::InputRequired),
                message: Some("x".into()),
                progress: None,
            };
            assert_eq!(
                store.update(other, id, update).await,
                Err(TaskError::NotFound)
            );
            assert_eq!(
                store
                    .finish(other, id, Outcome::Completed(json!("stolen")))
                    .await,
                Err(TaskError::NotFound)
            );
            assert_eq!(store.cancel(other, id).await, Err(TaskError::NotFound));
            assert_eq!(
                store.renew_lease(other, id, "r1").await,
                Err(TaskError::NotFound)
            );
        }
        let page = store.list(other, None, 100).await.unwrap();
        assert!(
            page.tasks.iter().all(|t| t.id != task.id),
            "another owner's listing never shows it"
        );
    }
    let own = store.list(owner, None, 100).await.unwrap();
    assert!(
        own.tasks.iter().any(|t| t.id == task.id),
        "its owner lists it"
    );
    let unchanged = store.get(owner, &task.id).await.unwrap().unwrap();
    assert_eq!(unchanged, task, "refused calls changed nothing");
}

async fn transitions_and_terminal_states(store: &dyn TaskStore) {
    let owner = Owner::tenant("acme");
    let task = store.create(new_task(&owner)).await.unwrap();
    let progress = Progress {
        progress: 3.0,
        total: Some(10.0),
        message: Some("page 3".into()),
    };
    let waiting = store
        .update(
            &owner,
            &task.id,
            TaskUpdate {
                state: Some(TaskState::InputRequired),
                message: Some("which repository?".into()),
                progress: Some(progress.clone()),
            },
        )
        .await
        .unwrap();
    assert_eq!(waiting.state, TaskState::InputRequired);
    assert_eq!(waiting.message.as_deref(), Some("which repository?"));
    assert_eq!(waiting.progress, Some(progress));
    assert!(waiting.updated_ms >= task.updated_ms);
    let working = store
        .update(
            &owner,
            &task.id,
            TaskUpdate {
                state: Some(TaskState::Working),
                ..TaskUpdate::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(working.state, TaskState::Working);
    assert_eq!(
        working.message.as_deref(),
        Some("which repository?"),
        "fields not named stay"
    );
    assert_eq!(
        store
            .update(
                &owner,
                &task.id,
                TaskUpdate {
                    state: Some(TaskState::Completed),
                    ..TaskUpdate::default()
                },
            )
            .await,
        Err(TaskError::NotAnUpdate(TaskState::Completed))
    );
    let nan = TaskUpdate {
        progress: Some(Progress {
            progress: f64::NAN,
            total: None,
            message: None,
        }),
        ..TaskUpdate::default()
    };
    assert_eq!(
        store.update(&owner, &task.id, nan).await,
        Err(TaskError::InvalidProgress)
    );
    let result = json!({"content": [{"type": "text", "text": "done"}], "structuredContent": {"n": [1, 2.5, []]}});
    let done = store
        .finish(&owner, &task.id, Outcome::Completed(result.clone()))
        .await
        .unwrap();
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(done.result, Some(result.clone()), "the result as given");
    assert_eq!(done.lease, None, "a finished task holds no lease");
    // Terminal stays terminal, whatever is asked.
    let finished = |to| {
        Err::<super::TaskRecord, _>(TaskError::Finished {
            state: TaskState::Completed,
            to,
        })
    };
    assert_eq!(
        store.update(&owner, &task.id, TaskUpdate::default()).await,
        finished(TaskState::Completed)
    );
    assert_eq!(
        store
            .update(
                &owner,
                &task.id,
                TaskUpdate {
                    state: Some(TaskState::Working),
                    ..TaskUpdate::default()
                }
            )
            .await,
        finished(TaskState::Working)
    );
    assert_eq!(
        store
            .finish(
                &owner,
                &task.id,
                Outcome::Failed {
                    reason: "late".into(),
                    result: None
                }
            )
            .await,
        finished(TaskState::Failed)
    );
    assert_eq!(
        store.cancel(&owner, &task.id).await,
        finished(TaskState::Cancelled)
    );
    assert!(matches!(
        store.renew_lease(&owner, &task.id, "r1").await,
        Err(TaskError::Finished { .. })
    ));
    let stored = store.get(&owner, &task.id).await.unwrap().unwrap();
    assert_eq!(stored.state, TaskState::Completed);
    assert_eq!(stored.result, Some(result));

    let cancelled = store.create(new_task(&owner)).await.unwrap();
    let after = store.cancel(&owner, &cancelled.id).await.unwrap();
    assert_eq!(after.state, TaskState::Cancelled);
    assert!(after.error.is_some());
    assert!(matches!(
        store.cancel(&owner, &cancelled.id).await,
        Err(TaskError::Finished { .. })
    ));

    let failing = store.create(new_task(&owner)).await.unwrap();
    let tool_error = json!({"content": [{"type": "text", "text": "no"}], "isError": true});
    let failed = store
        .finish(
            &owner,
            &failing.id,
            Outcome::Failed {
                reason: "the tool reported an error".into(),
                result: Some(tool_error.clone()),
            },
        )
        .await
        .unwrap();
    assert_eq!(failed.state, TaskState::Failed);
    assert_eq!(failed.error.as_deref(), Some("the tool reported an error"));
    assert_eq!(failed.result, Some(tool_error));
}

/// Pages of 3 over 7 tasks (another owner's interleaved): every task once, in
/// creation order, and the last page says so.
async fn progress_is_logged_up_to_its_bound(store: &dyn TaskStore) {
    let owner = Owner::tenant("acme");
    let task = store.create(new_task(&owner)).await.unwrap();
    let step = |i: usize| Progress {
        progress: i as f64,
        total: Some(1000.0),
        message: i.is_multiple_of(2).then(|| format!("step {i}")),
    };
    let updates = super::MAX_PROGRESS_LOG + 5;
    for i in 0..updates {
        let update = TaskUpdate {
            progress: Some(step(i)),
            ..TaskUpdate::default()
        };
        store.update(&owner, &task.id, update).await.unwrap();
    }
    let read = store.get(&owner, &task.id).await.unwrap().unwrap();
    let expected: Vec<Progress> = (0..super::MAX_PROGRESS_LOG).map(step).collect();
    assert_eq!(read.progress_log, expected, "the first updates, in order");
    assert_eq!(
        read.progress,
        Some(step(updates - 1)),
        "the latest progress"
    );
    let done = store
        .finish(&owner, &task.id, Outcome::Completed(json!({"content": []})))
        .await
        .unwrap();
    assert_eq!(done.progress_log.len(), super::MAX_PROGRESS_LOG);
}

async fn listing_pages(store: &dyn TaskStore) {
    let owner = Owner::session("lister", "s");
    let other = Owner::session("lister", "t");
    let mut mine = Vec::new();
    for _ in 0..7 {
        let task = store.create(new_task(&owner)).await.unwrap();
        store
            .finish(&owner, &task.id, Outcome::Completed(json!(1)))
            .await
            .unwrap();
        mine.push(task.id);
        let theirs = store.create(new_task(&other)).await.unwrap();
        store.cancel(&other, &theirs.id).await.unwrap();
        // Distinct creation times make "creation order" one answer.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    for _ in 0..10 {
        let page = store.list(&owner, cursor.as_deref(), 3).await.unwrap();
        pages += 1;
        assert!(page.tasks.len() <= 3);
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, mine, "every task once, oldest first");
    assert_eq!(pages, 3);
    assert_eq!(
        store.list(&owner, Some("not a cursor"), 3).await,
        Err(TaskError::BadCursor)
    );
    let empty = store.list(&Owner::tenant("nobody"), None, 3).await.unwrap();
    assert!(empty.tasks.is_empty() && empty.next_cursor.is_none());
}

/// A limit of 3 running per tenant: the fourth is refused, another tenant is not
/// affected, and a task that ends frees its place.
async fn running_limit_per_tenant(store: &dyn TaskStore) {
    let a = Owner::session("a", "s1");
    let mut running = Vec::new();
    for session in ["s1", "s2", "s1"] {
        let owner = Owner::session("a", session);
        running.push((owner.clone(), store.create(new_task(&owner)).await.unwrap()));
    }
    assert_eq!(
        store.create(new_task(&a)).await,
        Err(TaskError::TooManyRunning {
            tenant: "a".into(),
            limit: 3
        }),
        "the limit is the tenant's, across its sessions"
    );
    store
        .create(new_task(&Owner::tenant("b")))
        .await
        .expect("another tenant has its own limit");
    let (owner, first) = &running[0];
    store
        .update(
            owner,
            &first.id,
            TaskUpdate {
                state: Some(TaskState::InputRequired),
                ..TaskUpdate::default()
            },
        )
        .await
        .unwrap();
    assert!(
        store.create(new_task(&a)).await.is_err(),
        "input_required still counts as running"
    );
    store.cancel(owner, &first.id).await.unwrap();
    store
        .create(new_task(&a))
        .await
        .expect("a cancelled task freed its place");
}

async fn results_are_bounded(store: &dyn TaskStore) {
    let owner = Owner::tenant("acme");
    let task = store.create(new_task(&owner)).await.unwrap();
    let big = json!({"text": "x".repeat(200)});
    assert!(matches!(
        store
            .finish(&owner, &task.id, Outcome::Completed(big.clone()))
            .await,
        Err(TaskError::ResultTooLarge { limit: 100, .. })
    ));
    assert!(matches!(
        store
            .finish(
                &owner,
                &task.id,
                Outcome::Failed {
                    reason: "r".into(),
                    result: Some(big)
                }
            )
            .await,
        Err(TaskError::ResultTooLarge { .. })
    ));
    assert_eq!(
        store.get(&owner, &task.id).await.unwrap().unwrap().state,
        TaskState::Working,
        "a refused result leaves the task running"
    );
    let small = json!({"text": "fits"});
    let done = store
        .finish(&owner, &task.id, Outcome::Completed(small.clone()))
        .await
        .unwrap();
    assert_eq!(done.result, Some(small));
}

/// A lease of 400 ms: renewed by its holder it holds; another replica cannot renew
/// it; left alone it runs out and the reaper fails the task with the reason.
async fn expired_leases_fail_the_task(store: &dyn TaskStore) {
    let owner = Owner::tenant("acme");
    let kept = store.create(new_task(&owner)).await.unwrap();
    let abandoned = store.create(new_task(&owner)).await.unwrap();
    let finished = store.create(new_task(&owner)).await.unwrap();
    store
        .finish(&owner, &finished.id, Outcome::Completed(json!(1)))
        .await
        .unwrap();
    assert!(matches!(
        store.renew_lease(&owner, &kept.id, "r2").await,
        Err(TaskError::LeaseLost { holder }) if holder == "r1"
    ));
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let renewed = store.renew_lease(&owner, &kept.id, "r1").await.unwrap();
        assert!(renewed.lease.unwrap().expires_ms > kept.lease.clone().unwrap().expires_ms);
    }
    // 800 ms since `abandoned` was created: its lease ran out; `kept`'s did not.
    let reaped = store.reap_expired_leases().await.unwrap();
    assert_eq!(reaped, std::slice::from_ref(&abandoned.id));
    let failed = store.get(&owner, &abandoned.id).await.unwrap().unwrap();
    assert_eq!(failed.state, TaskState::Failed);
    assert_eq!(failed.error.as_deref(), Some(LEASE_EXPIRED));
    assert_eq!(failed.lease, None);
    assert_eq!(
        store.get(&owner, &kept.id).await.unwrap().unwrap().state,
        TaskState::Working
    );
    assert_eq!(
        store
            .get(&owner, &finished.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        TaskState::Completed,
        "a finished task is never reaped"
    );
    assert!(
        store.reap_expired_leases().await.unwrap().is_empty(),
        "reaped once"
    );
    // The replica running `abandoned` comes back too late: the task stays failed.
    assert!(matches!(
        store
            .finish(&owner, &abandoned.id, Outcome::Completed(json!(1)))
            .await,
        Err(TaskError::Finished {
            state: TaskState::Failed,
            ..
        })
    ));
}

/// A ttl of 500 ms: a finished task is readable until then, gone after; a running
/// one is not expired by the ttl.
async fn finished_tasks_expire_after_ttl(store: &dyn TaskStore) {
    let owner = Owner::tenant("acme");
    let done = store.create(new_task(&owner)).await.unwrap();
    let running = store.create(new_task(&owner)).await.unwrap();
    store
        .finish(&owner, &done.id, Outcome::Completed(json!("r")))
        .await
        .unwrap();
    assert!(store.get(&owner, &done.id).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(store.get(&owner, &done.id).await.unwrap(), None, "expired");
    assert!(
        store
            .list(&owner, None, 100)
            .await
            .unwrap()
            .tasks
            .iter()
            .all(|t| t.id != done.id),
        "an expired task leaves the listing"
    );
    assert_eq!(
        store.cancel(&owner, &done.id).await,
        Err(TaskError::NotFound)
    );
    assert_eq!(
        store.get(&owner, &running.id).await.unwrap().unwrap().state,
        TaskState::Working,
        "a running task outlives the ttl"
    );
}

/// Finishing, failing and cancelling one task at once (as a runner, a caller and a
/// reaper on different replicas might): exactly one ending wins, and the task keeps it.
async fn one_ending_wins(store: Arc<dyn TaskStore>) {
    let owner = Owner::tenant("racer");
    for _ in 0..5 {
        let task = store.create(new_task(&owner)).await.unwrap();
        let mut endings = Vec::new();
        for i in 0..6 {
            let store = store.clone();
            let owner = owner.clone();
            let id = task.id.clone();
            endings.push(tokio::spawn(async move {
                match i % 3 {
                    0 => {
                        store
                            .finish(&owner, &id, Outcome::Completed(json!(i)))
                            .await
                    }
                    1 => {
                        let failed = Outcome::Failed {
                            reason: format!("r{i}"),
                            result: None,
                        };
                        store.finish(&owner, &id, failed).await
                    }
                    _ => store.cancel(&owner, &id).await,
                }
            }));
        }
        let mut winners = Vec::new();
        for ending in endings {
            match ending.await.unwrap() {
                Ok(record) => winners.push(record),
                Err(TaskError::Finished { .. }) => {}
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "exactly one ending wins");
        let stored = store.get(&owner, &task.id).await.unwrap().unwrap();
        assert_eq!(stored, winners[0], "and the task keeps it");
    }
}

fn elicitation(message: &str) -> InputRequest {
    InputRequest {
        method: "elicitation/create".into(),
        params: json!({"message": message, "requestedSchema": {"type": "object"}}),
    }
}

fn answers(
    pairs: &[(&str, serde_json::Value)],
) -> std::collections::BTreeMap<String, serde_json::Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// A call's questions make the task `input_required` until every one is answered;
/// keys are never reused; unknown and repeated answers are ignored; only the owner
/// answers; an ended task forgets its questions.
async fn input_requests_and_answers(store: &dyn TaskStore) {
    let owner = Owner::session("acme", "s1");
    let task = store.create(new_task(&owner)).await.unwrap();
    let asked = store
        .ask_input(&owner, &task.id, "input-1", elicitation("which one?"))
        .await
        .unwrap();
    assert_eq!(asked.state, TaskState::InputRequired);
    assert_eq!(asked.input_requests["input-1"], elicitation("which one?"));
    assert!(
        matches!(
            store
                .ask_input(&owner, &task.id, "input-1", elicitation("again"))
                .await,
            Err(TaskError::InvalidInput(_))
        ),
        "a key is asked once"
    );
    for bad in ["", "has space", "x}"] {
        assert!(matches!(
            store
                .ask_input(&owner, &task.id, bad, elicitation("x"))
                .await,
            Err(TaskError::InvalidInput(_))
        ));
    }
    store
        .ask_input(&owner, &task.id, "input-2", elicitation("and?"))
        .await
        .unwrap();

    // Another owner answers nothing, and sees nothing.
    for other in [Owner::session("acme", "s2"), Owner::tenant("other")] {
        assert_eq!(
            store
                .answer_input(
                    &other,
                    &task.id,
                    answers(&[("input-1", json!({"action": "decline"}))])
                )
                .await,
            Err(TaskError::NotFound)
        );
        assert!(matches!(
            store
                .ask_input(&other, &task.id, "input-9", elicitation("x"))
                .await,
            Err(TaskError::NotFound)
        ));
    }
    let unchanged = store.get(&owner, &task.id).await.unwrap().unwrap();
    assert_eq!(unchanged.input_requests.len(), 2);
    assert!(unchanged.input_responses.is_empty());

    // One answered (and an unknown key ignored): still waiting for the other.
    let accept = json!({"action": "accept", "content": {"choice": "a"}});
    let one = store
        .answer_input(
            &owner,
            &task.id,
            answers(&[("input-1", accept.clone()), ("nope", json!(1))]),
        )
        .await
        .unwrap();
    assert_eq!(one.state, TaskState::InputRequired);
    assert_eq!(one.input_responses, answers(&[("input-1", accept.clone())]));
    assert_eq!(one.input_requests.keys().collect::<Vec<_>>(), ["input-2"]);
    // A second answer to the same key is ignored.
    let again = store
        .answer_input(
            &owner,
            &task.id,
            answers(&[("input-1", json!({"action": "decline"}))]),
        )
        .await
        .unwrap();
    assert_eq!(again.input_responses["input-1"], accept);
    // The last one: working again.
    let all = store
        .answer_input(
            &owner,
            &task.id,
            answers(&[("input-2", json!({"action": "cancel"}))]),
        )
        .await
        .unwrap();
    assert_eq!(all.state, TaskState::Working);
    assert!(all.input_requests.is_empty());
    assert_eq!(all.input_responses.len(), 2);
    assert!(
        matches!(
            store
                .ask_input(&owner, &task.id, "input-2", elicitation("x"))
                .await,
            Err(TaskError::InvalidInput(_))
        ),
        "an answered key is not asked again"
    );
    // Too many answers at once are refused whole.
    let flood: Vec<(String, serde_json::Value)> = (0..=super::MAX_INPUT_KEYS)
        .map(|i| (format!("k{i}"), json!(i)))
        .collect();
    assert!(matches!(
        store
            .answer_input(&owner, &task.id, flood.into_iter().collect())
            .await,
        Err(TaskError::InvalidInput(_))
    ));

    // An ended task forgets its questions; answers to it are ignored.
    store
        .ask_input(&owner, &task.id, "input-3", elicitation("last"))
        .await
        .unwrap();
    let ended = store
        .finish(&owner, &task.id, Outcome::Completed(json!({"content": []})))
        .await
        .unwrap();
    assert!(ended.input_requests.is_empty() && ended.input_responses.is_empty());
    let ignored = store
        .answer_input(
            &owner,
            &task.id,
            answers(&[("input-3", json!({"action": "accept"}))]),
        )
        .await
        .unwrap();
    assert_eq!(ignored, ended);
    assert!(matches!(
        store
            .ask_input(&owner, &task.id, "input-4", elicitation("late"))
            .await,
        Err(TaskError::Finished { .. })
    ));
}

/// Answers to different keys sent at once (as from two replicas) are all kept.
async fn concurrent_answers_all_count(store: Arc<dyn TaskStore>) {
    let owner = Owner::tenant("acme");
    let task = store.create(new_task(&owner)).await.unwrap();
    let keys: Vec<String> = (0..8).map(|i| format!("input-{i}")).collect();
    for key in &keys {
        store
            .ask_input(&owner, &task.id, key, elicitation(key))
            .await
            .unwrap();
    }
    let mut sent = Vec::new();
    for key in keys.clone() {
        let (store, owner, id) = (store.clone(), owner.clone(), task.id.clone());
        sent.push(tokio::spawn(async move {
            store
                .answer_input(&owner, &id, answers(&[(key.as_str(), json!({"key": key}))]))
                .await
        }));
    }
    for answer in sent {
        answer.await.unwrap().unwrap();
    }
    let done = store.get(&owner, &task.id).await.unwrap().unwrap();
    assert_eq!(done.state, TaskState::Working);
    assert_eq!(done.input_responses.len(), keys.len());
    for key in &keys {
        assert_eq!(done.input_responses[key], json!({"key": key}));
    }
}

/// A share of 3 kept tasks per tenant (of 10 in all): concurrent creations never pass
/// it; a tenant at its share — finished tasks count until they expire — is refused
/// with its own limit in every session, while another tenant still creates; a
/// finished task's expiry frees its place.
async fn kept_tasks_are_bounded_per_tenant(store: Arc<dyn TaskStore>) {
    let rush = Owner::tenant("rush");
    let mut creations = Vec::new();
    for _ in 0..10 {
        let (store, new) = (store.clone(), new_task(&rush));
        creations.push(tokio::spawn(async move { store.create(new).await }));
    }
    let mut admitted = 0;
    for creation in creations {
        match creation.await.unwrap() {
            Ok(_) => admitted += 1,
            Err(TaskError::TenantStoreFull { tenant, limit, .. }) => {
                assert_eq!((tenant.as_str(), limit), ("rush", 3));
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(admitted, 3, "exactly the share was admitted");

    let hog = Owner::session("hog", "s1");
    let mut kept = Vec::new();
    for _ in 0..3 {
        kept.push(store.create(new_task(&hog)).await.unwrap().id);
    }
    for id in &kept[..2] {
        store
            .finish(&hog, id, Outcome::Completed(json!("r")))
            .await
            .unwrap();
    }
    for owner in [
        hog.clone(),
        Owner::session("hog", "s2"),
        Owner::tenant("hog"),
    ] {
        let refused = store.create(new_task(&owner)).await.unwrap_err();
        assert!(
            matches!(&refused, TaskError::TenantStoreFull { tenant, limit: 3, .. } if tenant == "hog"),
            "finished tasks count until they expire, across the tenant's sessions: {refused:?}"
        );
        let message = refused.to_string();
        for part in [
            "tenant 'hog'",
            "3 tasks",
            "tasks.max_stored_per_tenant",
            "tasks.ttl",
        ] {
            assert!(message.contains(part), "{message}");
        }
    }
    let other = Owner::tenant("other");
    for _ in 0..3 {
        store
            .create(new_task(&other))
            .await
            .expect("another tenant keeps its own share");
    }
    tokio::time::sleep(Duration::from_millis(900)).await;
    for _ in 0..2 {
        store
            .create(new_task(&hog))
            .await
            .expect("the expired finished tasks freed their places");
    }
    assert!(
        matches!(
            store.create(new_task(&hog)).await,
            Err(TaskError::TenantStoreFull { .. })
        ),
        "the running task still counts"
    );
    assert_eq!(
        store.get(&hog, &kept[2]).await.unwrap().unwrap().state,
        TaskState::Working
    );
}
