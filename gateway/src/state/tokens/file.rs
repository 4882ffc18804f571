//! The token backend of one restartable process: `<data_dir>/upstream-tokens.json`,
//! replaced atomically on every change (write, fsync, rename; mode 0600 on unix).
//!
//! The file holds sealed values only (base64url, by name), never a token or a
//! principal in clear: `{"version": 1, "tokens": {"tokens:<upstream>:<digest>":
//! "<sealed>"}}`. It is read once and then kept in memory (this process is its only
//! writer); a file that cannot be read is an error on every call, never overwritten.
//! Pending records and refresh locks live minutes: they stay in memory
//! ([`MemoryBackend`]), so a restart forgets them (a connect link is asked again).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::memory::MemoryBackend;
use super::{StoreError, TokenBackend};
use crate::state::registrations::file::write_atomically;

const VERSION: u32 = 1;

/// What [`FileBackend::change`] does to one name.
enum Change {
    Keep,
    Set(Vec<u8>),
    Remove,
}

pub struct FileBackend {
    path: PathBuf,
    max_records: usize,
    /// The file's tokens once read; one change at a time (read, change, write whole).
    tokens: tokio::sync::Mutex<Option<BTreeMap<String, Vec<u8>>>>,
    ephemeral: MemoryBackend,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    version: u32,
    /// Name -> sealed value (base64url).
    tokens: BTreeMap<String, String>,
}

impl FileBackend {
    /// Tokens in `<data_dir>/upstream-tokens.json`, at most `max_records` of them.
    pub fn new(data_dir: &std::path::Path, max_records: usize) -> FileBackend {
        FileBackend {
            path: data_dir.join("upstream-tokens.json"),
            max_records: max_records.max(1),
            tokens: tokio::sync::Mutex::new(None),
            ephemeral: MemoryBackend::new(max_records),
        }
    }

    /// The tokens (read from the file on first use), one caller at a time.
    async fn tokens(
        &self,
    ) -> Result<tokio::sync::MappedMutexGuard<'_, BTreeMap<String, Vec<u8>>>, StoreError> {
        let mut cached = self.tokens.lock().await;
        if cached.is_none() {
            *cached = Some(self.load().await?);
        }
        Ok(tokio::sync::MutexGuard::map(cached, |c| {
            c.get_or_insert_default()
        }))
    }

    /// Changes the value of `name` as `decide` says (given the current one) and writes
    /// the file; the change is kept only once written.
    async fn change<T>(
        &self,
        name: &str,
        decide: impl FnOnce(Option<&Vec<u8>>, usize) -> Result<(T, Change), StoreError>,
    ) -> Result<T, StoreError> {
        let mut tokens = self.tokens().await?;
        let (answer, change) = decide(tokens.get(name), tokens.len())?;
        let previous = match change {
            Change::Keep => return Ok(answer),
            Change::Set(value) => tokens.insert(name.to_owned(), value),
            Change::Remove => tokens.remove(name),
        };
        if let Err(error) = self.save(&tokens).await {
            match previous {
                Some(value) => tokens.insert(name.to_owned(), value),
                None => tokens.remove(name),
            };
            return Err(error);
        }
        Ok(answer)
    }

    async fn load(&self) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        let bytes = match tokio::fs::read(&self.path).await {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => {
                return Err(StoreError::Io(format!(
                    "cannot read {}: {e}",
                    self.path.display()
                )));
            }
        };
        let corrupt = |what: &str| {
            StoreError::Corrupt(format!(
                "{} is not a valid upstream-token file ({what}); move it aside to start \
                 without stored tokens",
                self.path.display()
            ))
        };
        // serde's message could quote a sealed value: only its position is told.
        let file: TokenFile = serde_json::from_slice(&bytes)
            .map_err(|e| corrupt(&format!("line {} column {}", e.line(), e.column())))?;
        if file.version != VERSION {
            return Err(corrupt(&format!("version {}", file.version)));
        }
        let mut tokens = BTreeMap::new();
        for (name, sealed) in file.tokens {
            let sealed = URL_SAFE_NO_PAD
                .decode(&sealed)
                .map_err(|_| corrupt("a value that is not base64url"))?;
            tokens.insert(name, sealed);
        }
        Ok(tokens)
    }

    async fn save(&self, tokens: &BTreeMap<String, Vec<u8>>) -> Result<(), StoreError> {
        let file = TokenFile {
            version: VERSION,
            tokens: tokens
                .iter()
                .map(|(name, sealed)| (name.clone(), URL_SAFE_NO_PAD.encode(sealed)))
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| StoreError::Io(e.to_string()))?;
        let path = self.path.clone();
        // Blocking file I/O (fsync) off the runtime.
        tokio::task::spawn_blocking(move || write_atomically(&path, &bytes))
            .await
            .map_err(|e| StoreError::Io(e.to_string()))?
            .map_err(StoreError::Io)
    }
}

#[async_trait]
impl TokenBackend for FileBackend {
    async fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.tokens().await?.get(name).cloned())
    }

    async fn put(&self, name: &str, value: &[u8]) -> Result<(), StoreError> {
        let max = self.max_records;
        self.change(name, |current, len| {
            if current.is_none() && len >= max {
                return Err(StoreError::Refused(format!(
                    "the upstream-token file holds its maximum of {max} tokens"
                )));
            }
            Ok(((), Change::Set(value.to_vec())))
        })
        .await
    }

    async fn replace(&self, name: &str, current: &[u8], new: &[u8]) -> Result<bool, StoreError> {
        self.change(name, |stored, _| {
            Ok(match stored {
                Some(stored) if stored.as_slice() == current => (true, Change::Set(new.to_vec())),
                _ => (false, Change::Keep),
            })
        })
        .await
    }

    async fn remove(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.change(name, |current, _| {
            Ok(match current {
                Some(value) => (Some(value.clone()), Change::Remove),
                None => (None, Change::Keep),
            })
        })
        .await
    }

    async fn put_pending(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        self.ephemeral.put_pending(name, value, ttl).await
    }

    async fn take_pending(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.ephemeral.take_pending(name).await
    }

    async fn peek_pending(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.ephemeral.peek_pending(name).await
    }

    async fn try_lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.ephemeral.try_lock(name, owner, ttl).await
    }

    async fn unlock(&self, name: &str, owner: &str) -> Result<(), StoreError> {
        self.ephemeral.unlock(name, owner).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::state::tokens::keyring::tests::key;
    use crate::state::tokens::{Keyring, TokenKey, TokenStore, suite};

    fn temp_dir(what: &str) -> PathBuf {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        std::env::temp_dir().join(format!(
            "toolgate-tokens-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ))
    }

    #[tokio::test]
    async fn file_backend_passes_the_token_suite() {
        let dir = temp_dir("suite");
        let backend_dir = dir.clone();
        suite::run_all(&move || {
            let backend: Arc<dyn TokenBackend> = Arc::new(FileBackend::new(&backend_dir, 1000));
            Box::pin(async move { Some(backend) })
        })
        .await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn tokens_survive_a_new_store_sealed_and_private() {
        let dir = temp_dir("restart");
        let alice = TokenKey::new("github", "acme", Some("alice@example.com"));
        let token = suite::token("gho_plaintext-access-token-1234");
        {
            let store = TokenStore::file(&dir, Keyring::new(&[key(7)]).unwrap()).unwrap();
            store.put(&alice, &token).await.unwrap();
        }
        let store = TokenStore::file(&dir, Keyring::new(&[key(7)]).unwrap()).unwrap();
        assert_eq!(store.get(&alice).await.unwrap(), Some(token.clone()));

        let path = dir.join("upstream-tokens.json");
        let bytes = std::fs::read(&path).unwrap();
        for clear in [
            "gho_plaintext-access-token-1234",
            "refresh-of-gho_plaintext-access-token-1234",
            "alice@example.com",
            "acme",
            "https://auth.example.com",
        ] {
            assert!(
                !bytes.windows(clear.len()).any(|w| w == clear.as_bytes()),
                "{clear} is in the file in clear"
            );
        }
        assert!(!dir.join("upstream-tokens.json.tmp").exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "only the gateway's user reads it");
        }

        // Another key opens nothing; an ephemeral key is refused for a file.
        let other = TokenStore::file(&dir, Keyring::new(&[key(8)]).unwrap()).unwrap();
        assert!(
            matches!(other.get(&alice).await, Err(StoreError::Corrupt(m)) if m.contains("'github'") && m.contains("'acme'"))
        );
        assert!(TokenStore::file(&dir, Keyring::ephemeral().unwrap()).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn an_unreadable_file_is_an_error_and_left_alone() {
        let dir = temp_dir("corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("upstream-tokens.json");
        std::fs::write(
            &path,
            b"{\"version\": 1, \"tokens\": {\"tokens:a:b\": \"s3cr3t!\"}}",
        )
        .unwrap();
        let store = TokenStore::file(&dir, Keyring::new(&[key(7)]).unwrap()).unwrap();
        let alice = TokenKey::new("github", "acme", None);
        for outcome in [
            store.get(&alice).await.map(drop),
            store.put(&alice, &suite::token("t")).await,
        ] {
            match outcome {
                Err(StoreError::Corrupt(message)) => {
                    assert!(
                        message.contains("not a valid upstream-token file"),
                        "{message}"
                    );
                    assert!(!message.contains("s3cr3t"), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(
            std::fs::read(&path).unwrap().ends_with(b"}}"),
            "not overwritten"
        );
        std::fs::write(&path, b"{not json").unwrap();
        assert!(matches!(
            store.get(&alice).await,
            Err(StoreError::Corrupt(_))
        ));
        std::fs::remove_file(&path).unwrap();
        store
            .put(&alice, &suite::token("t"))
            .await
            .expect("a fixed file is read again");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_full_file_refuses_new_tokens() {
        let dir = temp_dir("full");
        let backend = FileBackend::new(&dir, 2);
        backend.put("a", b"1").await.unwrap();
        backend.put("b", b"2").await.unwrap();
        assert!(matches!(
            backend.put("c", b"3").await,
            Err(StoreError::Refused(_))
        ));
        backend
            .put("a", b"again")
            .await
            .expect("a replacement is no new token");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
