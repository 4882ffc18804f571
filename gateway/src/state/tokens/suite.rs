//! One test suite for every token backend: the same async functions run against
//! [`MemoryBackend`](super::memory::MemoryBackend), [`FileBackend`](super::file::FileBackend)
//! and [`RedisBackend`](super::redis::RedisBackend) through a [`TokenStore`], so all
//! keep the same contract. Redis is found as in [`crate::state::suite`] (skipped with
//! a notice when it does not answer, a failure under `CI=true`). Every wait is a
//! bounded sleep or a bounded number of polls.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::keyring::tests::key;
use super::{Keyring, StoreError, StoredToken, TokenBackend, TokenKey, TokenStore};

pub(crate) type Factory =
    dyn Fn() -> Pin<Box<dyn Future<Output = Option<Arc<dyn TokenBackend>>> + Send>>;

/// A token whose secrets are `access` and `refresh-of-<access>`.
pub(crate) fn token(access: &str) -> StoredToken {
    StoredToken {
        access_token: access.into(),
        refresh_token: Some(format!("refresh-of-{access}").into()),
        token_type: "Bearer".to_owned(),
        expires_at: Some(1_900_000_000),
        scope: Some("repo read:user".to_owned()),
        issuer: "https://auth.example.com".to_owned(),
        client_id: "toolgate-client".to_owned(),
        resource: "https://api.example.com".to_owned(),
        obtained_at: 1_800_000_000,
        grant: None,
    }
}

/// A store over `backend` sealing with `keys` (made of those bytes, the first seals).
fn store(backend: &Arc<dyn TokenBackend>, keys: &[u8]) -> TokenStore {
    let keys: Vec<_> = keys.iter().map(|&b| key(b)).collect();
    TokenStore::shared(Keyring::new(&keys).unwrap(), backend.clone())
}

/// Runs every test against one backend made by `factory`; returns early when the
/// factory has none (a skipped backend).
pub(crate) async fn run_all(factory: &Factory) {
    let Some(backend) = factory().await else {
        return;
    };
    round_trip_and_remove(&backend).await;
    callers_are_kept_apart(&backend).await;
    a_value_copied_under_another_name_does_not_open(&backend).await;
    rotation_reseals_on_read(&backend).await;
    a_reseal_never_undoes_a_newer_value(&backend).await;
    pending_is_single_use_under_concurrency(&backend).await;
    pending_expires(&backend).await;
    pending_ids_and_bounds_are_checked(&backend).await;
    refresh_lock_is_exclusive_until_released(&backend).await;
    refresh_lock_frees_itself_after_its_ttl(&backend).await;
}

async fn round_trip_and_remove(backend: &Arc<dyn TokenBackend>) {
    let store = store(backend, &[1]);
    let alice = TokenKey::new("suite-round", "acme", Some("alice"));
    assert_eq!(store.get(&alice).await.unwrap(), None);
    assert_eq!(store.remove(&alice).await.unwrap(), None);
    store.put(&alice, &token("first")).await.unwrap();
    assert_eq!(store.get(&alice).await.unwrap(), Some(token("first")));
    store.put(&alice, &token("second")).await.unwrap();
    assert_eq!(
        store.get(&alice).await.unwrap(),
        Some(token("second")),
        "put replaces"
    );
    assert_eq!(store.remove(&alice).await.unwrap(), Some(token("second")));
    assert_eq!(store.get(&alice).await.unwrap(), None);
    assert_eq!(store.remove(&alice).await.unwrap(), None);
}

/// The tenant's own token, each subject's (the empty one too), another tenant's and
/// another upstream's are five records.
async fn callers_are_kept_apart(backend: &Arc<dyn TokenBackend>) {
    let store = store(backend, &[1]);
    let keys = [
        TokenKey::new("suite-apart", "acme", None),
        TokenKey::new("suite-apart", "acme", Some("")),
        TokenKey::new("suite-apart", "acme", Some("alice")),
        TokenKey::new("suite-apart", "other", None),
        TokenKey::new("suite-apart-2", "acme", None),
    ];
    for (n, key) in keys.iter().enumerate() {
        store.put(key, &token(&format!("t{n}"))).await.unwrap();
    }
    for (n, key) in keys.iter().enumerate() {
        assert_eq!(
            store.get(key).await.unwrap(),
            Some(token(&format!("t{n}"))),
            "{key:?}"
        );
    }
    for key in &keys {
        store.remove(key).await.unwrap();
    }
}

async fn a_value_copied_under_another_name_does_not_open(backend: &Arc<dyn TokenBackend>) {
    let store = store(backend, &[1]);
    let alice = TokenKey::new("suite-copy", "acme", Some("alice"));
    store.put(&alice, &token("alices-token")).await.unwrap();
    let sealed = backend.get(&alice.name()).await.unwrap().expect("stored");
    for other in [
        TokenKey::new("suite-copy", "acme", Some("bob")),
        TokenKey::new("suite-copy", "acme", None),
        TokenKey::new("suite-copy", "evil", Some("alice")),
        TokenKey::new("suite-copy-2", "acme", Some("alice")),
    ] {
        backend.put(&other.name(), &sealed).await.unwrap();
        match store.get(&other).await {
            Err(StoreError::Corrupt(message)) => {
                assert!(
                    message.contains(&format!("'{}'", other.upstream))
                        && message.contains(&format!("'{}'", other.tenant)),
                    "{message}"
                );
                assert!(!message.contains("alices-token"), "{message}");
            }
            outcome => panic!("alice's token opened as {other:?}'s: {outcome:?}"),
        }
        store.remove(&other).await.unwrap();
        assert_eq!(
            backend.get(&other.name()).await.unwrap(),
            None,
            "removed all the same"
        );
    }
    assert_eq!(
        store.remove(&alice).await.unwrap(),
        Some(token("alices-token"))
    );
}

/// Sealed with key 1, read by a keyring [2, 1]: it opens, and is re-sealed with key 2
/// (which alone then opens it; key 1 alone no longer does).
async fn rotation_reseals_on_read(backend: &Arc<dyn TokenBackend>) {
    let old = store(backend, &[1]);
    let rotated = store(backend, &[2, 1]);
    let alice = TokenKey::new("suite-rotate", "acme", Some("alice"));
    old.put(&alice, &token("rotating")).await.unwrap();
    let sealed = backend.get(&alice.name()).await.unwrap().unwrap();
    assert!(rotated.keyring.needs_reseal(&sealed));
    assert_eq!(rotated.get(&alice).await.unwrap(), Some(token("rotating")));
    let resealed = backend.get(&alice.name()).await.unwrap().unwrap();
    assert_ne!(sealed, resealed, "re-sealed on read");
    assert!(!rotated.keyring.needs_reseal(&resealed));
    assert_eq!(
        store(backend, &[2]).get(&alice).await.unwrap(),
        Some(token("rotating"))
    );
    assert!(matches!(old.get(&alice).await, Err(StoreError::Corrupt(_))));
    rotated.remove(&alice).await.unwrap();
}

async fn a_reseal_never_undoes_a_newer_value(backend: &Arc<dyn TokenBackend>) {
    let name = TokenKey::new("suite-replace", "acme", None).name();
    assert!(!backend.replace(&name, b"old", b"resealed").await.unwrap());
    assert_eq!(
        backend.get(&name).await.unwrap(),
        None,
        "nothing to replace"
    );
    backend.put(&name, b"newer").await.unwrap();
    assert!(!backend.replace(&name, b"old", b"resealed").await.unwrap());
    assert_eq!(
        backend.get(&name).await.unwrap().as_deref(),
        Some(&b"newer"[..])
    );
    assert!(backend.replace(&name, b"newer", b"resealed").await.unwrap());
    assert_eq!(
        backend.get(&name).await.unwrap().as_deref(),
        Some(&b"resealed"[..])
    );
    backend.remove(&name).await.unwrap();
}

async fn pending_is_single_use_under_concurrency(backend: &Arc<dyn TokenBackend>) {
    let store = Arc::new(store(backend, &[1]));
    let id = crate::state::sessions::new_session_id();
    store
        .put_pending(&id, b"connect alice", Duration::from_secs(30))
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(
            store.peek_pending(&id).await.unwrap().as_deref(),
            Some(&b"connect alice"[..]),
            "a peek leaves it"
        );
    }
    let mut takers = Vec::new();
    for _ in 0..16 {
        let store = store.clone();
        let id = id.clone();
        takers.push(tokio::spawn(async move {
            store.take_pending(&id).await.unwrap()
        }));
    }
    let mut winners = 0;
    for taker in takers {
        if let Some(bytes) = taker.await.unwrap() {
            assert_eq!(bytes, b"connect alice");
            winners += 1;
        }
    }
    assert_eq!(winners, 1, "exactly one of 16 concurrent takers gets it");
    assert_eq!(store.peek_pending(&id).await.unwrap(), None);
    assert_eq!(store.take_pending(&id).await.unwrap(), None);
}

async fn pending_expires(backend: &Arc<dyn TokenBackend>) {
    let store = store(backend, &[1]);
    let id = crate::state::sessions::new_session_id();
    store
        .put_pending(&id, b"soon gone", Duration::from_millis(300))
        .await
        .unwrap();
    assert!(store.peek_pending(&id).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(store.peek_pending(&id).await.unwrap(), None);
    assert_eq!(store.take_pending(&id).await.unwrap(), None);
}

async fn pending_ids_and_bounds_are_checked(backend: &Arc<dyn TokenBackend>) {
    let store = store(backend, &[1]);
    let ttl = Duration::from_secs(30);
    for bad in [
        "short",
        "with:colon-0123456789",
        "../../../etc/passwd-0123",
        "white space 0123456789",
        &"x".repeat(129),
        "",
    ] {
        assert!(
            matches!(
                store.put_pending(bad, b"x", ttl).await,
                Err(StoreError::Refused(_))
            ),
            "{bad:?}"
        );
        assert_eq!(store.take_pending(bad).await.unwrap(), None, "{bad:?}");
        assert_eq!(store.peek_pending(bad).await.unwrap(), None, "{bad:?}");
    }
    let id = "a".repeat(16);
    for ttl in [
        Duration::ZERO,
        super::MAX_PENDING_TTL + Duration::from_secs(1),
    ] {
        assert!(matches!(
            store.put_pending(&id, b"x", ttl).await,
            Err(StoreError::Refused(_))
        ));
    }
    let too_big = vec![0u8; super::MAX_PENDING_BYTES + 1];
    assert!(matches!(
        store.put_pending(&id, &too_big, ttl).await,
        Err(StoreError::Refused(_))
    ));

    // A pending record copied under another id does not open.
    let (a, b) = ("pending-a-0123456789", "pending-b-0123456789");
    store.put_pending(a, b"for a", ttl).await.unwrap();
    let sealed = backend
        .peek_pending(&super::pending_name(a))
        .await
        .unwrap()
        .unwrap();
    backend
        .put_pending(&super::pending_name(b), &sealed, ttl)
        .await
        .unwrap();
    assert!(matches!(
        store.take_pending(b).await,
        Err(StoreError::Corrupt(_))
    ));
    assert_eq!(
        store.take_pending(a).await.unwrap().as_deref(),
        Some(&b"for a"[..])
    );
}

async fn refresh_lock_is_exclusive_until_released(backend: &Arc<dyn TokenBackend>) {
    let store = store(backend, &[1]);
    let alice = TokenKey::new("suite-lock", "acme", Some("alice"));
    let bob = TokenKey::new("suite-lock", "acme", Some("bob"));
    let ttl = Duration::from_secs(30);
    let first = store
        .lock_refresh(&alice, ttl)
        .await
        .unwrap()
        .expect("free");
    assert!(
        store.lock_refresh(&alice, ttl).await.unwrap().is_none(),
        "held"
    );
    let other = store.lock_refresh(&bob, ttl).await.unwrap();
    assert!(other.is_some(), "another caller's refresh is not held up");
    first.release().await.unwrap();
    let second = store
        .lock_refresh(&alice, ttl)
        .await
        .unwrap()
        .expect("released");
    drop(second);
    // Dropping releases in the background: poll, bounded.
    let mut third = None;
    for _ in 0..40 {
        third = store.lock_refresh(&alice, ttl).await.unwrap();
        if third.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let third = third.expect("a dropped lock is released");
    assert!(matches!(
        store.lock_refresh(&alice, Duration::ZERO).await,
        Err(StoreError::Refused(_))
    ));
    third.release().await.unwrap();
    if let Some(other) = other {
        other.release().await.unwrap();
    }
}

/// A holder that outlives its TTL loses the lock to the next one, and its late
/// release does not free the next holder's lock.
async fn refresh_lock_frees_itself_after_its_ttl(backend: &Arc<dyn TokenBackend>) {
    let store = store(backend, &[1]);
    let alice = TokenKey::new("suite-lock-ttl", "acme", None);
    let slow = store
        .lock_refresh(&alice, Duration::from_millis(300))
        .await
        .unwrap()
        .expect("free");
    assert!(
        store
            .lock_refresh(&alice, Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let next = store
        .lock_refresh(&alice, Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the TTL passed");
    slow.release().await.unwrap();
    assert!(
        store
            .lock_refresh(&alice, Duration::from_secs(30))
            .await
            .unwrap()
            .is_none(),
        "the late release left the next holder's lock alone"
    );
    next.release().await.unwrap();
}
