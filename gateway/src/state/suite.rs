//! One test suite for every session store: the same async functions run against
//! [`crate::state::sessions::MemoryStore`] and the Redis store, so both backends keep the
//! same contract. Plus the Redis-only parts: the shared rate limit (exact under
//! concurrency, fail-open and fail-closed) and the registration store.
//!
//! Redis is found through `REDIS_URL` (default `redis://127.0.0.1:6379`); each run
//! uses its own key prefix. Without a reachable Redis the Redis tests print a notice
//! and skip, except under `CI=true`, where they fail.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, StateConfig};
use crate::state::conn::RedisConn;
use crate::state::sessions::redis::RedisSessionStore;
use crate::state::sessions::{Limits, Refused, SessionStore};

pub(crate) type Factory =
    dyn Fn(Duration, Limits) -> Pin<Box<dyn Future<Output = Option<Arc<dyn SessionStore>>> + Send>>;

/// Limits no suite test reaches but the quota one.
pub(crate) const LIMITS: Limits = Limits {
    max_sessions: 1000,
    max_per_tenant: None,
};

/// Runs every store test with stores made by `factory` (given the idle TTL and the
/// limits); returns early when the factory has no store (a skipped backend).
pub(crate) async fn run_all(factory: &Factory) {
    let Some(store) = factory(Duration::from_secs(60), LIMITS).await else {
        return;
    };
    create_get_and_ownership(store.as_ref()).await;
    expansion_union_and_partial_success(store.as_ref()).await;
    concurrent_overlapping_expansions(store.clone()).await;
    delete_forgets(store.as_ref()).await;
    let Some(short) = factory(Duration::from_millis(600), LIMITS).await else {
        return;
    };
    idle_ttl_slides(short.as_ref()).await;
    let small = Limits {
        max_sessions: 5,
        max_per_tenant: Some(3),
    };
    let Some(small) = factory(Duration::from_millis(1500), small).await else {
        return;
    };
    full_table_refuses_and_never_evicts(small.as_ref()).await;
}

/// A table of 5, 3 per tenant (idle TTL 1.5 s): a tenant at its quota is refused
/// with a retry hint while another still gets sessions; a full table refuses
/// everyone; no live session is ever evicted; idle ones are reclaimed.
async fn full_table_refuses_and_never_evicts(store: &dyn SessionStore) {
    let mut a = Vec::new();
    for _ in 0..3 {
        a.push(store.create("a", None).await.unwrap());
    }
    let b = store.create("b", None).await.unwrap();
    match store.create("a", None).await {
        Err(Refused::Full {
            message,
            retry_after,
        }) => {
            assert!(message.contains("max_per_tenant"), "{message}");
            assert!(
                retry_after >= Duration::from_secs(1) && retry_after <= Duration::from_secs(2),
                "{retry_after:?}"
            );
        }
        other => panic!("a's fourth session: {other:?}"),
    }
    let b2 = store.create("b", None).await.expect("b is under its quota");
    // 5 of 5: the table is full, for every tenant.
    match store.create("c", None).await {
        Err(Refused::Full { message, .. }) => {
            assert!(message.contains("max_sessions"), "{message}")
        }
        other => panic!("c in a full table: {other:?}"),
    }
    for session in a.iter().chain([&b, &b2]) {
        assert!(
            store.get(&session.id).await.unwrap().is_some(),
            "nothing was evicted"
        );
    }
    // Ending one frees its place.
    store.delete(&a[0].id).await.unwrap();
    let c = store.create("c", None).await.expect("a place was freed");
    // Idle sessions are reclaimed: keep c in use, let the others idle out.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        store.get(&c.id).await.unwrap();
    }
    for _ in 0..3 {
        store
            .create("a", None)
            .await
            .expect("a's idle sessions were reclaimed");
    }
    assert!(store.get(&c.id).await.unwrap().is_some(), "c stayed");
}

async fn create_get_and_ownership(store: &dyn SessionStore) {
    let session = store.create("acme", None).await.unwrap();
    assert_eq!(session.tenant, "acme");
    assert!(session.expanded.is_empty());
    assert!(session.id.len() >= 22, "ids carry at least 128 bits");
    let again = store.get(&session.id).await.unwrap().expect("stored");
    assert_eq!(again, session);
    assert_eq!(
        store.get_owned(&session.id, "acme", None).await.unwrap(),
        Some(session.clone())
    );
    assert_eq!(
        store.get_owned(&session.id, "other", None).await.unwrap(),
        None,
        "another tenant's session is not found"
    );
    assert_eq!(
        store
            .get_owned(&session.id, "acme", Some("alice"))
            .await
            .unwrap(),
        None,
        "a person's credential does not reach the tenant's shared session"
    );

    // A person's session is that person's: not the tenant's as a whole, not another
    // person's of the same tenant.
    let alice = store.create("acme", Some("alice")).await.unwrap();
    assert_eq!(alice.subject.as_deref(), Some("alice"));
    assert_eq!(store.get(&alice.id).await.unwrap(), Some(alice.clone()));
    assert_eq!(
        store
            .get_owned(&alice.id, "acme", Some("alice"))
            .await
            .unwrap(),
        Some(alice.clone())
    );
    for (tenant, subject) in [
        ("acme", Some("bob")),
        ("acme", None),
        ("other", Some("alice")),
    ] {
        assert_eq!(
            store.get_owned(&alice.id, tenant, subject).await.unwrap(),
            None,
            "{tenant}/{subject:?} reaches alice's session"
        );
    }
    let kept = store
        .get_or_create(&alice.id, "acme", Some("bob"))
        .await
        .unwrap();
    assert_eq!(
        kept.subject.as_deref(),
        Some("alice"),
        "the first owner keeps it"
    );
    assert_eq!(store.get("no-such-session").await.unwrap(), None);

    let fixed = format!("fixed-{}", crate::state::sessions::new_session_id());
    let first = store.get_or_create(&fixed, "acme", None).await.unwrap();
    assert_eq!(
        (first.id.as_str(), first.tenant.as_str()),
        (fixed.as_str(), "acme")
    );
    let second = store.get_or_create(&fixed, "other", None).await.unwrap();
    assert_eq!(second.tenant, "acme", "the first owner keeps the session");
}

async fn expansion_union_and_partial_success(store: &dyn SessionStore) {
    let session = store.create("acme", None).await.unwrap();
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let first = store
        .expand(&session.id, "acme", &names(&["a__x", "a__y"]))
        .await
        .unwrap()
        .expect("session exists");
    assert_eq!(first.added, names(&["a__x", "a__y"]));
    assert!(first.already.is_empty());
    let second = store
        .expand(&session.id, "acme", &names(&["a__y", "a__z", "a__z"]))
        .await
        .unwrap()
        .expect("session exists");
    assert_eq!(second.added, names(&["a__z"]), "duplicates count once");
    assert_eq!(second.already, names(&["a__y"]));
    assert_eq!(
        second.expanded.iter().collect::<Vec<_>>(),
        ["a__x", "a__y", "a__z"]
    );
    let empty = store
        .expand(&session.id, "acme", &[])
        .await
        .unwrap()
        .expect("session exists");
    assert_eq!(empty.expanded.len(), 3);
    assert_eq!(
        store
            .expand(&session.id, "other", &names(&["a__w"]))
            .await
            .unwrap(),
        None,
        "another tenant cannot expand the session"
    );
    assert_eq!(
        store
            .get(&session.id)
            .await
            .unwrap()
            .unwrap()
            .expanded
            .len(),
        3,
        "a refused expansion changes nothing"
    );
    assert_eq!(
        store
            .expand("no-such-session", "acme", &names(&["a__x"]))
            .await
            .unwrap(),
        None
    );
}

async fn concurrent_overlapping_expansions(store: Arc<dyn SessionStore>) {
    let session = store.create("acme", None).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..32 {
        let store = store.clone();
        let id = session.id.clone();
        tasks.push(tokio::spawn(async move {
            store
                .expand(&id, "acme", &[format!("tool_{i}"), "shared".to_owned()])
                .await
                .unwrap()
                .unwrap()
        }));
    }
    let mut added_shared = 0;
    let mut already_shared = 0;
    for task in tasks {
        let expansion = task.await.unwrap();
        added_shared += expansion.added.iter().filter(|n| *n == "shared").count();
        already_shared += expansion.already.iter().filter(|n| *n == "shared").count();
        assert!(expansion.expanded.contains("shared"));
    }
    assert_eq!(added_shared, 1, "exactly one expansion adds a shared name");
    assert_eq!(
        already_shared, 31,
        "the others report it as already selected"
    );
    let stored = store.get(&session.id).await.unwrap().unwrap();
    assert_eq!(stored.expanded.len(), 33, "the union of every expansion");
}

async fn delete_forgets(store: &dyn SessionStore) {
    let session = store.create("acme", None).await.unwrap();
    store
        .expand(&session.id, "acme", &["a__x".to_owned()])
        .await
        .unwrap();
    store.delete(&session.id).await.unwrap();
    assert_eq!(store.get(&session.id).await.unwrap(), None);
    let again = store
        .get_or_create(&session.id, "acme", None)
        .await
        .unwrap();
    assert!(
        again.expanded.is_empty(),
        "a deleted session leaves nothing behind"
    );
}

/// TTL 600 ms: a session used every 300 ms stays; one left alone for 1.5 s is gone.
async fn idle_ttl_slides(store: &dyn SessionStore) {
    let session = store.create("acme", None).await.unwrap();
    store
        .expand(&session.id, "acme", &["a__x".to_owned()])
        .await
        .unwrap();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            store.get(&session.id).await.unwrap().is_some(),
            "a session in use stays alive past its TTL"
        );
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        store.get(&session.id).await.unwrap(),
        None,
        "idle session expired"
    );
    assert_eq!(
        store
            .expand(&session.id, "acme", &["a__y".to_owned()])
            .await
            .unwrap(),
        None
    );
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// `REDIS_URL` or the local default.
pub(crate) fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A state config on the test Redis under a prefix of its own.
pub(crate) fn test_state(url: &str) -> StateConfig {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut state = StateConfig {
        backend: crate::config::StateBackend::Redis,
        url: Some(url.into()),
        ..StateConfig::default()
    };
    state.key_prefix = format!(
        "toolgate-test:{}-{nanos}-{}:",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    state
}

/// A connection to the test Redis, or `None` (with a notice) when it does not answer;
/// under `CI=true` an unreachable Redis fails the test instead.
pub(crate) async fn redis_conn(state: &StateConfig) -> Option<Arc<RedisConn>> {
    let conn = RedisConn::new(state).expect("valid Redis URL");
    match conn.ready().await {
        Ok(()) => Some(conn),
        Err(reason) => {
            let message = format!(
                "Redis at {} is not reachable ({reason}); start one (`redis-server`) or set REDIS_URL",
                conn.address()
            );
            if under_ci() {
                panic!("CI=true: {message}");
            }
            eprintln!("NOTICE: skipping Redis test: {message}");
            None
        }
    }
}

/// A Redis session store with `ttl` and `limits` under a fresh prefix.
pub(crate) async fn redis_store(ttl: Duration, limits: Limits) -> Option<Arc<dyn SessionStore>> {
    let conn = redis_conn(&test_state(&redis_url())).await?;
    let store: Arc<dyn SessionStore> = Arc::new(RedisSessionStore::new(conn, ttl, limits));
    Some(store)
}

/// A config with a tenant `t` limited by `rate_limit` (YAML flow map).
pub(crate) fn limited_config(
    state: &StateConfig,
    rate_limit: &str,
    on_unavailable: &str,
) -> Config {
    let yaml = format!(
        "state: {{backend: redis, url: '{}', replicas: 2, on_unavailable: {on_unavailable}, \
         key_prefix: '{}', command_timeout: 300ms, connect_timeout: 300ms}}\n\
         tenants:\n  t:\n    rate_limit: {rate_limit}\n",
        state
            .url
            .as_ref()
            .map(toolgate_adapters::Secret::expose)
            .unwrap_or_default(),
        state.key_prefix
    );
    Config::parse(&yaml, &|_| None).expect("test config")
}
