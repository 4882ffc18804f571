//! The short-lived records of connecting, kept sealed in the token store's pending
//! records (single use, with a TTL): a connect link, and the authorization it started
//! (under its OAuth `state`).

use serde::{Deserialize, Serialize};
use toolgate_adapters::Secret;
use toolgate_adapters::oauth::{Discovery, RegisteredClient};

use crate::policy::Principal;

/// A connect link: who connects which upstream, asking for what scope.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Link {
    pub upstream: String,
    pub tenant: String,
    pub subject: Option<String>,
    /// The scope to ask for (`None`: what the upstream names).
    pub scope: Option<String>,
}

impl Link {
    pub(super) fn principal(&self) -> Principal {
        Principal {
            tenant: self.tenant.clone(),
            subject: self.subject.clone(),
        }
    }

    pub(super) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub(super) fn from_bytes(bytes: &[u8]) -> Option<Link> {
        serde_json::from_slice(bytes).ok()
    }
}

/// An authorization under way: the browser is at the authorization server.
#[derive(Serialize, Deserialize)]
pub(super) struct Flow {
    pub link: Link,
    pub verifier: Secret,
    pub discovery: Discovery,
    pub client: RegisteredClient,
    pub redirect_uri: String,
    /// The scope asked for.
    pub scope: Option<String>,
}

impl Flow {
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub(super) fn from_bytes(bytes: &[u8]) -> Option<Flow> {
        serde_json::from_slice(bytes).ok()
    }
}

/// A new random id (128 bits, URL-safe).
pub(super) fn new_id() -> Result<String, String> {
    use base64::Engine as _;
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system's random number generator failed".to_owned())?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The pending record name of connect link `id`.
pub(super) fn link_id(id: &str) -> String {
    format!("link-{id}")
}

/// The pending record name of the authorization under OAuth `state`.
pub(super) fn flow_id(state: &str) -> String {
    format!("flow-{state}")
}
