//! Runtime registrations as stored between restarts: the [`RegistrationStore`]
//! contract and its two backends, [`file`] (the embedded default: a JSON file in the
//! data directory) and [`redis`] (shared by every replica, with announcements other
//! replicas follow). What a registration does once stored is `crate::registry`.

pub mod file;
pub mod redis;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use toolgate_adapters::openapi::OpenApiConfig;

/// One upstream registered through the admin API, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    pub name: String,
    pub openapi: OpenApiConfig,
}

/// Why the registration store could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The shared store (Redis) does not answer: retry later.
    #[error(transparent)]
    Unavailable(#[from] crate::state::conn::Unavailable),
    /// The file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// What is stored cannot be read back (not a registration file, or an entry that
    /// is not a registration).
    #[error("{0}")]
    Corrupt(String),
}

/// Where registrations are kept between restarts.
#[async_trait]
pub trait RegistrationStore: Send + Sync {
    async fn load(&self) -> Result<Vec<Registration>, StoreError>;
    /// Adds or replaces one registration.
    async fn put(&self, registration: &Registration) -> Result<(), StoreError>;
    /// Removes one registration; `false` when there was none of that name.
    async fn remove(&self, name: &str) -> Result<bool, StoreError>;
    /// Tells other replicas sharing this store that `name`'s spec was re-fetched.
    async fn announce_refresh(&self, _name: &str) -> Result<(), StoreError> {
        Ok(())
    }
}
