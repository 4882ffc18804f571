//! The embedded registration store: a JSON file in the data directory replaced
//! atomically (write, fsync, rename).

use std::path::PathBuf;

use async_trait::async_trait;

use super::{Registration, RegistrationStore, StoreError};

/// The embedded store: `<data_dir>/registrations.json`.
pub struct FileStore {
    path: PathBuf,
    /// One change at a time: the file is read, changed and written whole.
    changes: tokio::sync::Mutex<()>,
}

impl FileStore {
    pub fn new(data_dir: &std::path::Path) -> Self {
        Self {
            path: data_dir.join("registrations.json"),
            changes: tokio::sync::Mutex::new(()),
        }
    }

    async fn save(&self, all: &[Registration]) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(all).map_err(|e| StoreError::Io(e.to_string()))?;
        let path = self.path.clone();
        // Blocking file I/O (fsync) off the runtime.
        tokio::task::spawn_blocking(move || write_atomically(&path, &bytes))
            .await
            .map_err(|e| StoreError::Io(e.to_string()))?
            .map_err(StoreError::Io)
    }
}

#[async_trait]
impl RegistrationStore for FileStore {
    async fn load(&self) -> Result<Vec<Registration>, StoreError> {
        match tokio::fs::read(&self.path).await {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                StoreError::Corrupt(format!(
                    "{} is not a valid registration file: {e}",
                    self.path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(StoreError::Io(format!(
                "cannot read {}: {e}",
                self.path.display()
            ))),
        }
    }

    async fn put(&self, registration: &Registration) -> Result<(), StoreError> {
        let _serial = self.changes.lock().await;
        let mut all = self.load().await?;
        all.retain(|r| r.name != registration.name);
        all.push(registration.clone());
        all.sort_by(|a, b| a.name.cmp(&b.name));
        self.save(&all).await
    }

    async fn remove(&self, name: &str) -> Result<bool, StoreError> {
        let _serial = self.changes.lock().await;
        let mut all = self.load().await?;
        let before = all.len();
        all.retain(|r| r.name != name);
        if all.len() == before {
            return Ok(false);
        }
        self.save(&all).await.map(|()| true)
    }
}

/// Replaces `path` with `bytes` (write a temporary file beside it, fsync, rename,
/// fsync the directory), readable by the gateway's user only on unix. Shared with
/// the upstream-token file (`state::tokens::file`).
pub(crate) fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = path.with_extension("json.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    // Registrations can carry API credentials, the token file sealed tokens: readable
    // by the gateway's user only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(&tmp)
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    #[cfg(unix)]
    {
        // `mode` only applies when the file is created; a leftover temp file keeps its
        // old mode unless set explicitly.
        use std::os::unix::fs::PermissionsExt;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    }
    file.write_all(bytes)
        .and_then(|_| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot replace {}: {e}", path.display()))?;
    // Make the rename itself durable.
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn file_store_round_trips_and_replaces_atomically() {
        let dir = std::env::temp_dir().join(format!("toolgate-store-{}", std::process::id()));
        let store = FileStore::new(&dir);
        assert_eq!(store.load().await.unwrap(), Vec::new());
        let one = Registration {
            name: "pets".into(),
            openapi: toolgate_adapters::openapi::OpenApiConfig::from_url(
                "https://example.com/openapi.json",
            ),
        };
        store.put(&one).await.unwrap();
        assert_eq!(store.load().await.unwrap(), vec![one.clone()]);
        store.put(&one).await.unwrap();
        assert_eq!(
            store.load().await.unwrap(),
            vec![one.clone()],
            "put replaces"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("registrations.json"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(
                mode & 0o777,
                0o600,
                "credentials must not be world-readable"
            );
        }
        assert!(store.remove("pets").await.unwrap());
        assert!(!store.remove("pets").await.unwrap());
        assert_eq!(store.load().await.unwrap(), Vec::new());
        assert!(!dir.join("registrations.json.tmp").exists());
        std::fs::write(dir.join("registrations.json"), b"{not json").unwrap();
        assert!(
            store
                .load()
                .await
                .unwrap_err()
                .to_string()
                .contains("not a valid registration file")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
