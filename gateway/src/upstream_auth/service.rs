//! The gateway's own service identity at upstreams configured `credentials:
//! client_credentials`: a token from the upstream's authorization server (discovered
//! as for a user's, RFC 9728 / RFC 8414) by the client credentials grant, with a
//! secret or a signed assertion (`private_key_jwt`, RFC 7523). One token per upstream,
//! for every caller, kept in this process and renewed before it expires or when the
//! upstream refuses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use toolgate_adapters::oauth::{ServiceClient, SigningAlg, SigningKey};
use toolgate_adapters::{Secret, ToolError};

use super::UpstreamAuth;
use crate::config::CredentialSource;
use crate::config::oauth::{SigningAlgorithm, TokenEndpointAuth};

/// A token renewed this long before it expires (at most half its lifetime).
const RENEW_MARGIN: Duration = Duration::from_secs(60);
/// The longest pause between attempts to obtain a token at startup.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The service tokens of this process, one slot per upstream (each fetched under its
/// own lock: a slow authorization server holds up only its own upstream).
#[derive(Default)]
pub(super) struct ServiceTokens {
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Held>>>>>,
}

struct Held {
    token: Secret,
    renew_at: Option<Instant>,
}

impl ServiceTokens {
    fn slot(&self, upstream: &str) -> Arc<tokio::sync::Mutex<Option<Held>>> {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(upstream.to_owned())
            .or_default()
            .clone()
    }
}

impl UpstreamAuth {
    /// Whether `upstream` is called with the gateway's service identity.
    pub(super) fn is_client_credentials(&self, upstream: &str) -> bool {
        self.config()
            .upstreams
            .get(upstream)
            .is_some_and(|u| u.settings.credentials == CredentialSource::ClientCredentials)
    }

    /// The service token for `upstream`: the one held while it is fresh, else (or
    /// with `renew`) a new one.
    pub(super) async fn service_token(
        &self,
        upstream: &str,
        renew: bool,
    ) -> Result<Secret, ToolError> {
        let slot = self.service.slot(upstream);
        let mut held = slot.lock().await;
        if !renew
            && let Some(h) = held.as_ref()
            && h.renew_at.is_none_or(|at| Instant::now() < at)
        {
            return Ok(h.token.clone());
        }
        let unavailable = |detail: String| {
            ToolError::Unavailable(format!(
                "upstream '{upstream}': the gateway could not obtain its service token \
                 ({detail}); retry later"
            ))
        };
        let service = service_client(&self.settings(upstream))
            .ok_or_else(|| unavailable("no client configured".into()))?;
        let super::Found {
            client,
            discovery,
            scope,
        } = self
            .discover_upstream(upstream)
            .await
            .map_err(unavailable)?;
        let set = client
            .client_credentials(&discovery, &service, scope.as_deref())
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let renew_at = set.expires_in.map(|secs| {
            let lifetime = Duration::from_secs(secs);
            Instant::now() + lifetime - RENEW_MARGIN.min(lifetime / 2)
        });
        *held = Some(Held {
            token: set.access_token.clone(),
            renew_at,
        });
        tracing::info!(upstream = %upstream, "service token obtained");
        Ok(set.access_token)
    }

    /// Obtains a `client_credentials` upstream's service token and opens its
    /// connection with it (its tools join the catalog), retrying with backoff until it
    /// succeeds or `stop` (the upstream unmounted or replaced, the gateway stopping).
    pub(super) fn warm_service(
        &self,
        upstream: String,
        per_caller: Arc<toolgate_adapters::mcp::PerCallerUpstream>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(500);
            loop {
                match me.service_token(&upstream, false).await {
                    Ok(token) => {
                        per_caller.warm(crate::call::SERVICE.into(), &token);
                        return;
                    }
                    Err(error) => {
                        tracing::warn!(upstream = %upstream, %error, retry_in_ms = pause.as_millis() as u64, "no service token yet");
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = stop.cancelled() => return,
                }
                pause = (pause * 2).min(RETRY_MAX);
            }
        });
    }
}

/// The client the settings describe: a signed assertion with a private key, else a
/// secret.
pub(super) fn service_client(
    settings: &crate::config::oauth::UpstreamOAuth,
) -> Option<ServiceClient> {
    let client_id = settings.client_id.clone()?;
    if let Some(pem) = &settings.private_key {
        return Some(ServiceClient::PrivateKeyJwt {
            client_id,
            key: SigningKey {
                pem: pem.clone(),
                alg: match settings.signing_algorithm {
                    Some(SigningAlgorithm::RS256) => SigningAlg::RS256,
                    Some(SigningAlgorithm::ES256) | None => SigningAlg::ES256,
                },
                kid: settings.key_id.clone(),
            },
        });
    }
    Some(ServiceClient::Secret {
        client_id,
        client_secret: settings.client_secret.clone()?,
        auth_method: settings
            .token_endpoint_auth_method
            .map(TokenEndpointAuth::method),
    })
}
