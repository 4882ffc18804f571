//! Upstream tokens: what the gateway, as an OAuth client of an upstream, holds on
//! behalf of each caller. A caller is a principal (tenant, optional subject); tokens
//! are kept by [`TokenKey`] (upstream, tenant, subject).
//!
//! [`TokenStore`] is the one entry point: it seals every record with its [`Keyring`]
//! (AES-256-GCM, the record's logical key as AAD: a value copied under another
//! caller's name does not open) and keeps the sealed bytes in a [`TokenBackend`]:
//! [`memory`] (this process, bounded), [`file`] (`<data_dir>/upstream-tokens.json`,
//! for one restartable process) or [`redis`] (shared by replicas). Backends only ever
//! see sealed bytes and names that carry no tenant or subject in clear.
//!
//! Beside the tokens it keeps short-lived single-use records (a connect link, an
//! OAuth `state`: [`TokenStore::put_pending`], [`TokenStore::take_pending`]), and the
//! single-flight of a refresh: across replicas with [`TokenStore::lock_refresh`] (a
//! lock with a TTL), within a process with [`TokenStore::refresh_gate`] (callers
//! wait for the one refresh under way instead of each spending the refresh token).
//!
//! Errors are [`StoreError`]: a value that does not open is `Corrupt` and named by
//! its upstream and tenant, never by its content.

pub mod file;
mod gates;
pub mod keyring;
pub mod memory;
pub mod redis;
#[cfg(test)]
pub(crate) mod suite;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolgate_adapters::Secret;

pub use keyring::{Keyring, OpenError, SealError};

/// A sealed token record larger than this is refused (a token response is a few KiB).
pub const MAX_RECORD_BYTES: usize = 64 * 1024;
/// The largest tool listing kept ([`TokenStore::put_listing`]).
pub const MAX_LISTING_BYTES: usize = 4 * 1024 * 1024;
/// A pending record larger than this is refused.
pub const MAX_PENDING_BYTES: usize = 16 * 1024;
/// Pending records live at most this long (they are links and `state`s for minutes).
pub const MAX_PENDING_TTL: Duration = Duration::from_secs(24 * 3600);
/// A refresh lock is held at most this long (a refresh is one HTTP exchange).
pub const MAX_LOCK_TTL: Duration = Duration::from_secs(600);
/// Records the memory and file backends keep at most, unless told otherwise.
pub const DEFAULT_MAX_RECORDS: usize = 100_000;

/// Whose token, for which upstream. `subject: None` is the tenant's own token,
/// distinct from any subject's (`Some("")` included).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenKey {
    pub upstream: String,
    pub tenant: String,
    pub subject: Option<String>,
}

impl TokenKey {
    pub fn new(upstream: &str, tenant: &str, subject: Option<&str>) -> TokenKey {
        TokenKey {
            upstream: upstream.to_owned(),
            tenant: tenant.to_owned(),
            subject: subject.map(str::to_owned),
        }
    }

    /// The canonical bytes of the key, sealed into the record as its AAD: every field
    /// length-prefixed, so no two keys share a form whatever bytes they hold.
    pub fn aad(&self) -> Vec<u8> {
        let mut out = b"toolgate-token-v1".to_vec();
        push_field(&mut out, self.upstream.as_bytes());
        push_principal(&mut out, &self.tenant, self.subject.as_deref());
        out
    }

    /// The backend's name for the record: `tokens:<upstream>:<hex SHA-256 of the
    /// principal>`. An upstream name that is not `[A-Za-z0-9_-]{1,64}` (config
    /// refuses those; this is a second guard) is replaced by `~` and a digest of it,
    /// so a name never holds a byte that would break a Redis key or the file.
    pub fn name(&self) -> String {
        format!("tokens:{}", self.suffix())
    }

    /// `<upstream>:<hex SHA-256 of the principal>`, the part every name of this key shares.
    fn suffix(&self) -> String {
        let mut principal = Vec::new();
        push_principal(&mut principal, &self.tenant, self.subject.as_deref());
        let upstream = if is_plain_name(&self.upstream, 1, 64) {
            self.upstream.clone()
        } else {
            format!("~{}", &hex(&Sha256::digest(self.upstream.as_bytes()))[..32])
        };
        format!("{upstream}:{}", hex(&Sha256::digest(&principal)))
    }

    /// The name of the refresh lock of this key.
    fn lock_name(&self) -> String {
        format!("tokens-lock:{}", self.suffix())
    }

    /// How errors name this key: upstream and tenant (a subject can be personal).
    fn describe(&self) -> String {
        format!(
            "the stored token of upstream '{}' for tenant '{}'",
            self.upstream.escape_debug(),
            self.tenant.escape_debug()
        )
    }
}

/// `tenant 0x1f marker subject`: the tenant length-prefixed (so a tenant holding
/// `0x1f` cannot pose as another), then `0x00` for no subject or `0x01` and the
/// subject (so `None` and `Some("")` differ).
fn push_principal(out: &mut Vec<u8>, tenant: &str, subject: Option<&str>) {
    push_field(out, tenant.as_bytes());
    out.push(0x1f);
    match subject {
        None => out.push(0),
        Some(subject) => {
            out.push(1);
            push_field(out, subject.as_bytes());
        }
    }
}

fn push_field(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Whether `s` is `[A-Za-z0-9_-]{min,max}`.
fn is_plain_name(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `id` can name a pending record: `[A-Za-z0-9_-]{16,128}`.
pub fn valid_pending_id(id: &str) -> bool {
    is_plain_name(id, 16, 128)
}

/// The record name of an upstream's kept tool list: its name when it is a valid
/// upstream name, otherwise a digest (never a byte that breaks a key or file).
fn listing_name(upstream: &str) -> String {
    let safe = !upstream.is_empty()
        && upstream.len() <= 64
        && upstream
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if safe {
        format!("listing:{upstream}")
    } else {
        format!("listing:~{}", hex(&Sha256::digest(upstream.as_bytes())))
    }
}

/// One caller's token for one upstream, as stored (sealed). `Debug` shows neither
/// token; serializing shows both (`Secret` serializes its value), which is what the
/// sealed record needs: serialize it nowhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredToken {
    pub access_token: Secret,
    #[serde(default)]
    pub refresh_token: Option<Secret>,
    pub token_type: String,
    /// Unix seconds; `None`: the authorization server did not say.
    #[serde(default)]
    pub expires_at: Option<u64>,
    #[serde(default)]
    pub scope: Option<String>,
    /// The authorization server that issued it, and the client it was issued to:
    /// a refresh goes back to the same pair.
    pub issuer: String,
    pub client_id: String,
    /// The resource indicator (RFC 8707) it was asked for.
    pub resource: String,
    /// Unix seconds.
    pub obtained_at: u64,
    /// How to refresh and revoke it (the authorization server's metadata and the
    /// gateway's client there, secret included: sealed with the token), as the
    /// service that obtained it wrote it.
    #[serde(default)]
    pub grant: Option<String>,
}

/// Why the token store could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The shared store (Redis) does not answer: retry later.
    #[error(transparent)]
    Unavailable(#[from] crate::state::conn::Unavailable),
    /// The file could not be read or written, or nothing could be sealed.
    #[error("{0}")]
    Io(String),
    /// What is stored cannot be read back: it does not open with the keyring, or is
    /// not a token record once opened.
    #[error("{0}")]
    Corrupt(String),
    /// Over a bound: a record too large, a TTL out of range, a full memory store, an
    /// id that is not a pending id.
    #[error("{0}")]
    Refused(String),
}

impl From<SealError> for StoreError {
    fn from(error: SealError) -> Self {
        StoreError::Io(error.to_string())
    }
}

/// Where sealed bytes are kept, by name. Names come from [`TokenKey::name`] and the
/// store's own prefixes (`tokens-pending:`, `tokens-lock:`); values are opaque.
#[async_trait]
pub trait TokenBackend: Send + Sync {
    async fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Adds or replaces.
    async fn put(&self, name: &str, value: &[u8]) -> Result<(), StoreError>;
    /// Replaces the value only while it is still `current` (a re-seal must not undo a
    /// concurrent put); whether it did.
    async fn replace(&self, name: &str, current: &[u8], new: &[u8]) -> Result<bool, StoreError>;
    /// Removes, giving what was there.
    async fn remove(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Keeps a single-use record for `ttl`.
    async fn put_pending(&self, name: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError>;
    /// Removes and gives a live pending record, atomically: of concurrent takers at
    /// most one gets it.
    async fn take_pending(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// A live pending record, left in place.
    async fn peek_pending(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Takes the lock `name` for `owner` unless someone holds it; it frees itself
    /// after `ttl`. Whether it was taken.
    async fn try_lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<bool, StoreError>;
    /// Frees the lock if `owner` still holds it (not once it expired and another took it).
    async fn unlock(&self, name: &str, owner: &str) -> Result<(), StoreError>;
}

/// The upstream-token store: a keyring over a backend.
pub struct TokenStore {
    keyring: Keyring,
    backend: Arc<dyn TokenBackend>,
    gates: gates::Gates,
}

impl TokenStore {
    pub fn new(keyring: Keyring, backend: Box<dyn TokenBackend>) -> TokenStore {
        TokenStore::shared(keyring, Arc::from(backend))
    }

    fn shared(keyring: Keyring, backend: Arc<dyn TokenBackend>) -> TokenStore {
        TokenStore {
            keyring,
            backend,
            gates: gates::Gates::default(),
        }
    }

    /// In this process, at most [`DEFAULT_MAX_RECORDS`] records.
    pub fn memory(keyring: Keyring) -> TokenStore {
        TokenStore::new(
            keyring,
            Box::new(memory::MemoryBackend::new(DEFAULT_MAX_RECORDS)),
        )
    }

    /// In `<dir>/upstream-tokens.json`. Refuses an ephemeral keyring: what it sealed
    /// would not open after a restart.
    pub fn file(dir: &std::path::Path, keyring: Keyring) -> Result<TokenStore, String> {
        refuse_ephemeral(&keyring, "file")?;
        Ok(TokenStore::new(
            keyring,
            Box::new(file::FileBackend::new(dir, DEFAULT_MAX_RECORDS)),
        ))
    }

    /// In Redis, shared by replicas (which must all hold the same keys). Refuses an
    /// ephemeral keyring: no other replica, nor this one restarted, could open it.
    pub fn redis(
        conn: Arc<crate::state::conn::RedisConn>,
        keyring: Keyring,
    ) -> Result<TokenStore, String> {
        refuse_ephemeral(&keyring, "redis")?;
        Ok(TokenStore::new(
            keyring,
            Box::new(redis::RedisBackend::new(conn)),
        ))
    }

    /// The caller's token, if stored. A token sealed with an older key is re-sealed
    /// with the first (unless it changed meanwhile); a failed re-seal is logged and
    /// the token given all the same.
    pub async fn get(&self, key: &TokenKey) -> Result<Option<StoredToken>, StoreError> {
        let name = key.name();
        let Some(sealed) = self.backend.get(&name).await? else {
            return Ok(None);
        };
        let (token, plain) = self.open_token(key, &sealed)?;
        if self.keyring.needs_reseal(&sealed) {
            let resealed = self.keyring.seal(&key.aad(), &plain);
            let outcome = match resealed {
                Ok(resealed) => self.backend.replace(&name, &sealed, &resealed).await,
                Err(e) => Err(e.into()),
            };
            if let Err(error) = outcome {
                tracing::warn!(upstream = %key.upstream, tenant = %key.tenant, %error, "stored token not re-sealed with the current key");
            }
        }
        Ok(Some(token))
    }

    /// Stores (or replaces) the caller's token.
    pub async fn put(&self, key: &TokenKey, token: &StoredToken) -> Result<(), StoreError> {
        let plain = serde_json::to_vec(token).map_err(|e| StoreError::Io(e.to_string()))?;
        let sealed = self.keyring.seal(&key.aad(), &plain)?;
        if sealed.len() > MAX_RECORD_BYTES {
            return Err(StoreError::Refused(format!(
                "{} is {} bytes sealed, over the bound of {MAX_RECORD_BYTES}",
                key.describe(),
                sealed.len()
            )));
        }
        self.backend.put(&key.name(), &sealed).await
    }

    /// Keeps the tool list `upstream` last answered a user's connection (the list a
    /// replica starting afresh shows before any user's connection listed), sealed
    /// like a token: it may name what only users see.
    pub async fn put_listing(&self, upstream: &str, listing: &[u8]) -> Result<(), StoreError> {
        let name = listing_name(upstream);
        let sealed = self.keyring.seal(name.as_bytes(), listing)?;
        if sealed.len() > MAX_LISTING_BYTES {
            return Err(StoreError::Refused(format!(
                "the tool list of upstream '{}' is {} bytes sealed, over the bound of \
                 {MAX_LISTING_BYTES}",
                upstream.escape_debug(),
                sealed.len()
            )));
        }
        self.backend.put(&name, &sealed).await
    }

    /// The tool list kept by [`TokenStore::put_listing`], if any (one that does not
    /// open, e.g. sealed with a key no longer held, is none).
    pub async fn get_listing(&self, upstream: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let name = listing_name(upstream);
        let Some(sealed) = self.backend.get(&name).await? else {
            return Ok(None);
        };
        Ok(self.keyring.open(name.as_bytes(), &sealed).ok())
    }

    /// Forgets the caller's token; gives it back if there was one. A value that did
    /// not open is removed all the same (and logged): `Ok(None)`.
    pub async fn remove(&self, key: &TokenKey) -> Result<Option<StoredToken>, StoreError> {
        let Some(sealed) = self.backend.remove(&key.name()).await? else {
            return Ok(None);
        };
        match self.open_token(key, &sealed) {
            Ok((token, _)) => Ok(Some(token)),
            Err(error) => {
                tracing::warn!(%error, "an unreadable stored token was removed");
                Ok(None)
            }
        }
    }

    fn open_token(
        &self,
        key: &TokenKey,
        sealed: &[u8],
    ) -> Result<(StoredToken, Vec<u8>), StoreError> {
        let plain = self.keyring.open(&key.aad(), sealed).map_err(|e| {
            StoreError::Corrupt(format!("{} cannot be opened: it {e}", key.describe()))
        })?;
        let token = serde_json::from_slice(&plain).map_err(|_| {
            StoreError::Corrupt(format!("{} is not a token record", key.describe()))
        })?;
        Ok((token, plain))
    }

    /// Keeps `bytes` sealed under the pending id `id` for `ttl` (at most
    /// [`MAX_PENDING_TTL`]). `id` must be `[A-Za-z0-9_-]{16,128}`, random from the
    /// caller.
    pub async fn put_pending(
        &self,
        id: &str,
        bytes: &[u8],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        if !valid_pending_id(id) {
            return Err(StoreError::Refused(
                "a pending id is 16 to 128 characters of [A-Za-z0-9_-]".to_owned(),
            ));
        }
        check_ttl(ttl, MAX_PENDING_TTL, "a pending record's")?;
        if bytes.len() > MAX_PENDING_BYTES {
            return Err(StoreError::Refused(format!(
                "a pending record is at most {MAX_PENDING_BYTES} bytes ({} given)",
                bytes.len()
            )));
        }
        let sealed = self.keyring.seal(pending_aad(id).as_bytes(), bytes)?;
        self.backend
            .put_pending(&pending_name(id), &sealed, ttl)
            .await
    }

    /// Removes and gives the pending record `id`: of concurrent takers, at most one
    /// gets it. `None` when absent, expired, taken, or `id` is not a pending id.
    pub async fn take_pending(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if !valid_pending_id(id) {
            return Ok(None);
        }
        let sealed = self.backend.take_pending(&pending_name(id)).await?;
        sealed.map(|s| self.open_pending(id, &s)).transpose()
    }

    /// The pending record `id`, left in place.
    pub async fn peek_pending(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if !valid_pending_id(id) {
            return Ok(None);
        }
        let sealed = self.backend.peek_pending(&pending_name(id)).await?;
        sealed.map(|s| self.open_pending(id, &s)).transpose()
    }

    fn open_pending(&self, id: &str, sealed: &[u8]) -> Result<Vec<u8>, StoreError> {
        self.keyring
            .open(pending_aad(id).as_bytes(), sealed)
            .map_err(|e| StoreError::Corrupt(format!("a pending record cannot be opened: it {e}")))
    }

    /// The refresh lock of `key` across replicas, for `ttl` (at most
    /// [`MAX_LOCK_TTL`]; it frees itself then, should this process die). `None`
    /// while another holder has it. Released by [`RefreshLock::release`] or on drop.
    pub async fn lock_refresh(
        &self,
        key: &TokenKey,
        ttl: Duration,
    ) -> Result<Option<RefreshLock>, StoreError> {
        check_ttl(ttl, MAX_LOCK_TTL, "a refresh lock's")?;
        let name = key.lock_name();
        let owner = crate::state::sessions::new_session_id();
        if !self.backend.try_lock(&name, &owner, ttl).await? {
            return Ok(None);
        }
        Ok(Some(RefreshLock {
            backend: self.backend.clone(),
            name,
            owner,
            held: true,
        }))
    }

    /// Waits for `key`'s refresh gate in this process: callers that find a token due
    /// for refresh take it, and the ones after the first find the token refreshed.
    /// Wrap the wait in a timeout; the gate is freed when the guard is dropped.
    pub async fn refresh_gate(&self, key: &TokenKey) -> tokio::sync::OwnedMutexGuard<()> {
        self.gates.gate(key.name()).lock_owned().await
    }
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore")
            .field("keyring", &self.keyring)
            .finish_non_exhaustive()
    }
}

fn refuse_ephemeral(keyring: &Keyring, backend: &str) -> Result<(), String> {
    if keyring.is_ephemeral() {
        return Err(format!(
            "upstream tokens in the {backend} backend need configured encryption keys: a \
             random key would not open them after a restart (or on another replica)"
        ));
    }
    Ok(())
}

fn check_ttl(ttl: Duration, max: Duration, what: &str) -> Result<(), StoreError> {
    if ttl < Duration::from_millis(1) || ttl > max {
        return Err(StoreError::Refused(format!(
            "{what} TTL must be between 1 ms and {max:?} ({ttl:?} given)"
        )));
    }
    Ok(())
}

fn pending_name(id: &str) -> String {
    format!("tokens-pending:{id}")
}

fn pending_aad(id: &str) -> String {
    format!("pending:{id}")
}

/// A held refresh lock. [`RefreshLock::release`] frees it now; dropping it frees it
/// in the background (or, without a runtime, when its TTL passes).
pub struct RefreshLock {
    backend: Arc<dyn TokenBackend>,
    name: String,
    owner: String,
    held: bool,
}

impl RefreshLock {
    pub async fn release(mut self) -> Result<(), StoreError> {
        self.held = false;
        self.backend.unlock(&self.name, &self.owner).await
    }
}

impl std::fmt::Debug for RefreshLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefreshLock")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Drop for RefreshLock {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let backend = self.backend.clone();
        let name = std::mem::take(&mut self.name);
        let owner = std::mem::take(&mut self.owner);
        runtime.spawn(async move {
            if let Err(error) = backend.unlock(&name, &owner).await {
                tracing::debug!(%error, "refresh lock not released; it expires by itself");
            }
        });
    }
}

#[cfg(test)]
mod tests;
