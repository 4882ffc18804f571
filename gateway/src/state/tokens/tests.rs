//! The contract's own parts: names, the record's serialization, the refresh gate.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::keyring::tests::key;
use super::*;

#[test]
fn names_are_safe_and_distinct_and_hide_the_principal() {
    let alice = TokenKey::new("github", "acme", Some("alice@example.com"));
    let name = alice.name();
    let digest = name
        .strip_prefix("tokens:github:")
        .unwrap_or_else(|| panic!("{name}"));
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{name}"
    );
    assert!(!name.contains("acme") && !name.contains("alice"));

    let keys = [
        TokenKey::new("github", "acme", None),
        TokenKey::new("github", "acme", Some("")),
        TokenKey::new("github", "acme", Some("alice")),
        TokenKey::new("github", "acme\u{1f}\u{1}", None),
        TokenKey::new("github", "acme\u{1f}", Some("")),
        TokenKey::new("github", "", Some("acme")),
        TokenKey::new("gitlab", "acme", None),
    ];
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a.name(), b.name(), "{a:?} {b:?}");
            assert_ne!(a.aad(), b.aad(), "{a:?} {b:?}");
            assert_ne!(a.lock_name(), b.lock_name(), "{a:?} {b:?}");
        }
    }

    // An upstream name config would refuse still gives a plain name.
    for upstream in ["a:b", "x\r\nSET k v", "{tag}", "ü", "", &"u".repeat(65)] {
        let name = TokenKey::new(upstream, "acme", None).name();
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-:~".contains(&b)),
            "{upstream:?}: {name}"
        );
        assert_eq!(name.matches(':').count(), 2, "{name}");
        assert_ne!(name, TokenKey::new("a-b", "acme", None).name());
    }
}

#[test]
fn the_record_hides_its_secrets_except_when_serialized_to_be_sealed() {
    let token = suite::token("the-access-token");
    let shown = format!("{token:?}");
    assert!(!shown.contains("the-access-token"), "{shown}");
    assert!(!shown.contains("refresh-of"), "{shown}");
    let json = serde_json::to_string(&token).unwrap();
    assert!(
        json.contains("\"the-access-token\"") && json.contains("\"refresh-of-the-access-token\""),
        "the sealed record carries the real values: {json}"
    );
    let back: StoredToken = serde_json::from_str(&json).unwrap();
    assert_eq!(back, token);
    assert_eq!(back.access_token.expose(), "the-access-token");
    // Optional fields may be absent (a record written before they existed).
    let minimal: StoredToken = serde_json::from_str(
        r#"{"access_token":"a","token_type":"Bearer","issuer":"i","client_id":"c",
            "resource":"r","obtained_at":1}"#,
    )
    .unwrap();
    assert_eq!((minimal.refresh_token, minimal.expires_at), (None, None));
}

#[tokio::test]
async fn records_too_large_are_refused() {
    let store = TokenStore::memory(Keyring::new(&[key(1)]).unwrap());
    let alice = TokenKey::new("github", "acme", None);
    let mut token = suite::token("t");
    token.scope = Some("s".repeat(MAX_RECORD_BYTES));
    match store.put(&alice, &token).await {
        Err(StoreError::Refused(message)) => assert!(message.contains("'github'"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get(&alice).await.unwrap(), None);
}

#[tokio::test]
async fn an_ephemeral_keyring_serves_the_memory_store() {
    let store = TokenStore::memory(Keyring::ephemeral().unwrap());
    let alice = TokenKey::new("github", "acme", Some("alice"));
    store.put(&alice, &suite::token("t")).await.unwrap();
    assert_eq!(store.get(&alice).await.unwrap(), Some(suite::token("t")));
}

/// Eight callers of one key pass its gate one at a time; another key's gate is not
/// held up meanwhile.
#[tokio::test]
async fn the_refresh_gate_lets_one_caller_through_at_a_time() {
    let store = Arc::new(TokenStore::memory(Keyring::new(&[key(1)]).unwrap()));
    let alice = TokenKey::new("github", "acme", Some("alice"));
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut callers = Vec::new();
    for _ in 0..8 {
        let (store, alice, inside, most) =
            (store.clone(), alice.clone(), inside.clone(), most.clone());
        callers.push(tokio::spawn(async move {
            let _gate = store.refresh_gate(&alice).await;
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
        }));
    }
    let held = store.refresh_gate(&alice).await;
    let bob = TokenKey::new("github", "acme", Some("bob"));
    tokio::time::timeout(Duration::from_secs(1), store.refresh_gate(&bob))
        .await
        .expect("bob's gate is not alice's");
    drop(held);
    for caller in callers {
        caller.await.unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "never two inside at once");
}
