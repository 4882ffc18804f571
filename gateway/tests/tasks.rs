//! Background calls in process: a real OpenAPI API served on 127.0.0.1, imported by the
//! gateway, its operations run as tasks through `Tasks` — the machinery every surface
//! (MCP tasks, REST jobs) uses. The surfaces' own tests cover their wire shapes.
//!
//! `TOOLGATE_LONG_TASK_SECONDS` sets how long the "longer than call_timeout" call runs:
//! 6 s by default, five minutes (300) when `scripts/test` runs the whole suite, where
//! it runs beside the other test binaries rather than after them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::access::Caller;
use toolgate::app::App;
use toolgate::call;
use toolgate::config::Config;
use toolgate::tasks::{StartRefused, TaskCall, TaskRecord, TaskState, Tasks};
use toolgate_adapters::{CallContext, ToolError};
use toolgate_test_support::SlowApi;

async fn start(api: &SlowApi, extra: &str) -> Arc<App> {
    let yaml = format!(
        "call_timeout: 2s\n\
         tasks: {{call_timeout: 10m, lease: 3s, max_result_bytes: 4000}}\n\
         results: {{max_tokens: 100000}}\n\
         {extra}\
         upstreams:\n  slow:\n    openapi:\n      spec_url: '{}'\n      allow_private_networks: true\n    tools:\n      sleep_only_task: {{background: required}}\n      ping: {{background: forbidden}}\n",
        api.spec_url()
    );
    let mut config = Config::parse(&yaml, &|_| None).expect("the test config parses");
    config.data_dir = std::env::temp_dir().join(format!(
        "toolgate-tasks-test-{}-{}",
        std::process::id(),
        toolgate::state::sessions::new_session_id()
    ));
    let app = App::start(config).await.expect("toolgate starts");
    app.finish_startup().await.expect("the API is imported");
    app
}

fn caller(app: &App, tenant: &str) -> Caller {
    let tenant = app
        .gateway
        .policy()
        .tenant(tenant)
        .expect("a configured tenant");
    Caller::new(tenant, None)
}

fn call(caller: &Caller, tool: &str, arguments: Value) -> TaskCall {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    TaskCall {
        caller: caller.clone(),
        tool: tool.to_owned(),
        arguments,
        request_headers: Arc::default(),
        trace: None,
    }
}

/// Starts `tool` as a task of `caller`.
async fn start_task(app: &App, caller: &Caller, tool: &str, arguments: Value) -> TaskRecord {
    app.tasks
        .start(&app.gateway, call(caller, tool, arguments))
        .await
        .unwrap_or_else(|refused| panic!("{tool} did not start as a task: {refused:?}"))
}

/// Waits (bounded by `max`) until the task is over.
async fn finished(app: &App, caller: &Caller, task: &TaskRecord, max: Duration) -> TaskRecord {
    let owner = Tasks::owner_of(caller);
    let done = app
        .tasks
        .wait_until(&owner, task.id.as_str(), max, |t| t.state.is_terminal())
        .await
        .expect("the store answers")
        .expect("the task exists");
    assert!(
        done.state.is_terminal(),
        "the task is still {} after {max:?}",
        done.state
    );
    done
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_call_longer_than_call_timeout_times_out_plainly_and_completes_as_a_task() {
    let seconds: u64 = std::env::var("TOOLGATE_LONG_TASK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let api = SlowApi::start().await;
    let app = start(&api, "").await;
    let caller = caller(&app, "default");
    let arguments = json!({"ms": seconds * 1000});

    let started = Instant::now();
    let ctx = CallContext::new(Duration::from_secs(2), "plain");
    let Value::Object(plain_args) = arguments.clone() else {
        unreachable!()
    };
    let plain = call::call(&app.gateway, &caller, "slow__sleep", plain_args, ctx).await;
    assert!(
        matches!(plain, Err(ToolError::Timeout(ref m)) if m.contains("2s")),
        "{plain:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(seconds));

    let task = start_task(&app, &caller, "slow__sleep", arguments).await;
    assert_eq!(task.state, TaskState::Working);
    let done = finished(&app, &caller, &task, Duration::from_secs(seconds + 30)).await;
    assert_eq!(done.state, TaskState::Completed, "{done:?}");
    let result = done.result.expect("a completed task has its result");
    assert!(
        text_of(&result).contains(&format!("\"slept_ms\":{}", seconds * 1000)),
        "{result}"
    );
    assert!(done.lease.is_none(), "a finished task holds no lease");
    let metrics = app.gateway.metrics.render();
    for line in [
        "toolgate_tasks_total{outcome=\"created\"} 1",
        "toolgate_tasks_total{outcome=\"completed\"} 1",
        "toolgate_task_duration_seconds_count{outcome=\"completed\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
}

#[tokio::test]
async fn cancelling_a_task_stops_its_upstream_call() {
    let api = SlowApi::start().await;
    let app = start(&api, "").await;
    let caller = caller(&app, "default");
    let task = start_task(&app, &caller, "slow__sleep", json!({"ms": 60_000})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let owner = Tasks::owner_of(&caller);
    let cancelled = app
        .tasks
        .cancel(&app.gateway, &owner, task.id.as_str())
        .await
        .expect("a running task can be cancelled");
    assert_eq!(cancelled.state, TaskState::Cancelled);
    let until = Instant::now() + Duration::from_secs(10);
    while api.abandoned() == 0 {
        assert!(
            Instant::now() < until,
            "the upstream request was not dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The ending stands, whatever the stopped call reports afterwards.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let read = app
        .tasks
        .get(&owner, task.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.state, TaskState::Cancelled);
    let again = app
        .tasks
        .cancel(&app.gateway, &owner, task.id.as_str())
        .await;
    assert!(again.is_err(), "a finished task cannot be cancelled again");
}

#[tokio::test]
async fn execution_modes_and_refusals_are_checked_before_a_task_exists() {
    let api = SlowApi::start().await;
    let key = |n: u8| format!("sha256:{}", format!("{n:02x}").repeat(32));
    let tenants = format!(
        "tenants:\n  acme: {{api_keys: ['{}'], allow: ['slow__*', '!slow__big']}}\n  other: {{api_keys: ['{}'], allow: ['slow__*']}}\n",
        key(1),
        key(2)
    );
    let tenants = tenants.as_str();
    let app = start(&api, tenants).await;
    let acme = caller(&app, "acme");
    let tasks = &app.tasks;
    let refused = |r: Result<TaskRecord, StartRefused>| match r {
        Err(StartRefused::Tool(error)) => error,
        other => panic!("expected a refusal, got {other:?}"),
    };
    // A tool the tenant may not see, and one that does not exist: the same answer.
    let hidden = refused(
        tasks
            .start(&app.gateway, call(&acme, "slow__big", json!({})))
            .await,
    );
    let missing = refused(
        tasks
            .start(&app.gateway, call(&acme, "slow__nope", json!({})))
            .await,
    );
    assert!(matches!(hidden, ToolError::NotFound(_)), "{hidden:?}");
    assert_eq!(
        hidden.to_string().replace("slow__big", "X"),
        missing.to_string().replace("slow__nope", "X")
    );
    // `background: forbidden` refuses a task; `required` refuses a plain call.
    let forbidden = refused(
        tasks
            .start(&app.gateway, call(&acme, "slow__ping", json!({})))
            .await,
    );
    assert_eq!(forbidden.code(), "execution_mode", "{forbidden}");
    let ctx = CallContext::new(Duration::from_secs(5), "plain");
    let Value::Object(args) = json!({"ms": 1}) else {
        unreachable!()
    };
    let plain = call::call(&app.gateway, &acme, "slow__sleep_only_task", args, ctx).await;
    assert!(
        matches!(&plain, Err(e) if e.code() == "execution_mode" && e.to_string().contains("background")),
        "{plain:?}"
    );
    // Nothing was created by the refusals.
    let owner = Tasks::owner_of(&acme);
    assert!(
        tasks
            .list(&owner, None, 100)
            .await
            .unwrap()
            .tasks
            .is_empty()
    );
    // The task-only tool runs as a task; another tenant cannot see it.
    let task = start_task(&app, &acme, "slow__sleep_only_task", json!({"ms": 10})).await;
    let done = finished(&app, &acme, &task, Duration::from_secs(20)).await;
    assert_eq!(done.state, TaskState::Completed, "{done:?}");
    let other = Tasks::owner_of(&caller(&app, "other"));
    assert!(tasks.get(&other, task.id.as_str()).await.unwrap().is_none());
    assert!(
        tasks
            .cancel(&app.gateway, &other, task.id.as_str())
            .await
            .is_err()
    );
    assert!(
        tasks
            .list(&other, None, 100)
            .await
            .unwrap()
            .tasks
            .is_empty()
    );
}

#[tokio::test]
async fn failures_end_the_task_with_a_reason() {
    let api = SlowApi::start().await;
    let app = start(&api, "").await;
    let caller = caller(&app, "default");
    // Arguments the schema refuses: failed, with the validation message.
    let task = start_task(&app, &caller, "slow__sleep", json!({"ms": "x"})).await;
    let done = finished(&app, &caller, &task, Duration::from_secs(20)).await;
    assert_eq!(done.state, TaskState::Failed);
    let reason = done.error.clone().unwrap_or_default();
    assert!(reason.contains("ms"), "{reason}");
    assert_eq!(done.result.as_ref().unwrap()["isError"], true);
    // A result over `tasks.max_result_bytes`: failed, saying which limit.
    let task = start_task(&app, &caller, "slow__big", json!({})).await;
    let done = finished(&app, &caller, &task, Duration::from_secs(20)).await;
    assert_eq!(done.state, TaskState::Failed);
    let reason = done.error.unwrap_or_default();
    assert!(reason.contains("max_result_bytes"), "{reason}");
    assert!(done.result.is_none());
}

#[tokio::test]
async fn openapi_tools_list_their_task_support() {
    let api = SlowApi::start().await;
    let app = start(&api, "").await;
    let catalog = app.gateway.catalog();
    let support = |name: &str| {
        let entry = catalog.get(name).expect("in the catalog");
        entry.definition()["execution"]["taskSupport"].clone()
    };
    assert_eq!(support("slow__sleep"), "optional");
    assert_eq!(support("slow__sleep_only_task"), "required");
    assert_eq!(support("slow__ping"), "forbidden");
}

/// server-everything over stdio: its `simulate-research-query` runs only as a task
/// (2025-11-25 tasks), so a gateway task of it is relayed as the upstream's own task.
async fn start_everything(deps: &toolgate_test_support::deps::NodeDeps) -> Arc<App> {
    let upstream = json!({
        "upstreams": {"everything": {"stdio": {
            "command": deps.node(),
            "args": [deps.everything_entry(), "stdio"],
        }}},
        "tasks": {"lease": "3s"},
    });
    let mut config = Config::parse(&upstream.to_string(), &|_| None).expect("the config parses");
    config.data_dir = std::env::temp_dir().join(format!(
        "toolgate-tasks-relay-{}-{}",
        std::process::id(),
        toolgate::state::sessions::new_session_id()
    ));
    let app = App::start(config).await.expect("toolgate starts");
    app.finish_startup()
        .await
        .expect("server-everything starts");
    // Its task tools are registered after initialization: wait for the list change.
    let until = Instant::now() + Duration::from_secs(30);
    while app.gateway.catalog().get(RESEARCH).is_none() {
        assert!(Instant::now() < until, "{RESEARCH} never appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app
}

const RESEARCH: &str = "everything__simulate-research-query";

#[tokio::test]
async fn an_upstream_task_is_relayed_with_its_status_and_result() {
    let deps = toolgate_test_support::require!(toolgate_test_support::deps::NodeDeps::everything());
    let app = start_everything(&deps).await;
    let caller = caller(&app, "default");
    let listed = app.gateway.catalog().get(RESEARCH).unwrap().definition()["execution"].clone();
    assert_eq!(listed["taskSupport"], "required", "{listed}");
    // A plain call of a task-only tool is refused by the gateway, before the upstream.
    let ctx = CallContext::new(Duration::from_secs(10), "plain");
    let Value::Object(args) = json!({"topic": "gateways"}) else {
        unreachable!()
    };
    let plain = call::call(&app.gateway, &caller, RESEARCH, args, ctx).await;
    assert!(
        matches!(&plain, Err(e) if e.code() == "execution_mode"),
        "{plain:?}"
    );

    let task = start_task(&app, &caller, RESEARCH, json!({"topic": "gateways"})).await;
    let done = finished(&app, &caller, &task, Duration::from_secs(60)).await;
    assert_eq!(done.state, TaskState::Completed, "{done:?}");
    let report = text_of(done.result.as_ref().unwrap());
    assert!(report.contains("Research Report"), "{report}");
    // The upstream's stages arrived as progress, in order.
    let messages: Vec<String> = done
        .progress_log
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    assert!(messages.len() >= 2, "{messages:?}");
    let steps: Vec<f64> = done.progress_log.iter().map(|p| p.progress).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");

    // Cancelled through the gateway: the relay stops following it at once.
    let task = start_task(&app, &caller, RESEARCH, json!({"topic": "cancel me"})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let owner = Tasks::owner_of(&caller);
    let cancelled = app
        .tasks
        .cancel(&app.gateway, &owner, task.id.as_str())
        .await
        .expect("cancelled");
    assert_eq!(cancelled.state, TaskState::Cancelled);
    // No upstream task id ever reaches the gateway's record.
    let read = app
        .tasks
        .get(&owner, task.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.state, TaskState::Cancelled);
    assert!(read.result.is_none(), "{read:?}");
}

#[tokio::test]
async fn shutting_down_fails_the_tasks_running_here_with_the_reason() {
    let api = SlowApi::start().await;
    let app = start(&api, "").await;
    let caller = caller(&app, "default");
    let task = start_task(&app, &caller, "slow__sleep", json!({"ms": 60_000})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    app.shutdown().await;
    let owner = Tasks::owner_of(&caller);
    let read = app
        .tasks
        .get(&owner, task.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.state, TaskState::Failed, "{read:?}");
    assert_eq!(read.error.as_deref(), Some(toolgate::tasks::SHUT_DOWN));
}
