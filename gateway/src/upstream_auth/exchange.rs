//! `credentials: token_exchange`: each caller reaches the upstream as themselves with
//! no connecting — the JWT they authenticated with (verified by the gateway; its
//! audience is the gateway) is exchanged at the issuer that made it (RFC 8693) for a
//! token whose audience is the upstream. Exchanged tokens are kept in this process
//! only, per (upstream, caller, the caller's token), until shortly before the earlier
//! of their own expiry and the caller's token's; they are never stored or shared.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use toolgate_adapters::oauth::{Discovery, ExchangeRequest};
use toolgate_adapters::{Secret, ToolError};

use super::UpstreamAuth;
use crate::policy::{Assertion, Principal};

/// Exchanged tokens kept at once; past it the one expiring first goes.
const MAX_KEPT: usize = 4096;
/// A token is exchanged anew this long before it expires (at most half its life).
const RENEW_MARGIN: Duration = Duration::from_secs(30);
/// Kept this long when neither token says when it expires.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// How long an issuer's metadata is kept before it is read again.
const METADATA_TTL: Duration = Duration::from_secs(3600);

#[derive(Default)]
pub(super) struct Exchanged {
    tokens: Mutex<HashMap<Key, Kept>>,
    issuers: Mutex<HashMap<String, (Discovery, Instant)>>,
}

/// (upstream, holder, SHA-256 of the caller's token): a new caller token (after the
/// caller's own refresh) is exchanged anew, and one caller's never serves another.
type Key = (String, Arc<str>, [u8; 32]);

struct Kept {
    token: Secret,
    renew_at: Instant,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl UpstreamAuth {
    /// `principal`'s token for `upstream`, exchanged from `assertion`.
    pub(super) async fn exchange(
        &self,
        upstream: &str,
        principal: &Principal,
        assertion: &Assertion,
    ) -> Result<Secret, ToolError> {
        let key: Key = (
            upstream.to_owned(),
            principal.holder(),
            Sha256::digest(assertion.token.expose().as_bytes()).into(),
        );
        if let Some(kept) = lock(&self.exchanged.tokens).get(&key)
            && Instant::now() < kept.renew_at
        {
            return Ok(kept.token.clone());
        }
        let settings = self.settings(upstream);
        let failed = |detail: String| {
            ToolError::authorization_required(format!(
                "upstream '{upstream}' is reached with the caller's own identity, and \
                 exchanging the caller's token for one there failed: {detail}"
            ))
        };
        let unavailable = |detail: String| {
            ToolError::Unavailable(format!(
                "upstream '{upstream}': the caller's token could not be exchanged ({detail}); \
                 retry later"
            ))
        };
        let client = super::service::service_client(&settings)
            .ok_or_else(|| unavailable("no exchange client is configured".into()))?;
        let idp = self.issuer(upstream).await.map_err(unavailable)?;
        let scope = (!settings.scopes.is_empty()).then(|| settings.scopes.join(" "));
        let subject_token_type = settings
            .subject_token_type
            .unwrap_or(crate::config::oauth::SubjectTokenType::AccessToken)
            .uri();
        let request = ExchangeRequest {
            subject_token: &assertion.token,
            subject_token_type,
            resource: (!idp.resource.is_empty()).then_some(idp.resource.as_str()),
            audience: settings.audience.as_deref(),
            scope: scope.as_deref(),
        };
        let oauth = self.client_for(upstream)?;
        let set = oauth
            .token_exchange(&idp, &client, &request)
            .await
            .map_err(|e| match e {
                // The issuer's word on this caller's token: theirs to act on.
                toolgate_adapters::oauth::OAuthError::Refused { .. } => failed(e.to_string()),
                other => unavailable(other.to_string()),
            })?;
        let lifetime = set
            .expires_in
            .map(Duration::from_secs)
            .into_iter()
            .chain(lifetime_left(assertion.expires_at))
            .min()
            .unwrap_or(DEFAULT_LIFETIME);
        let renew_at = Instant::now() + lifetime - RENEW_MARGIN.min(lifetime / 2);
        let mut tokens = lock(&self.exchanged.tokens);
        let now = Instant::now();
        tokens.retain(|_, kept| kept.renew_at > now);
        if tokens.len() >= MAX_KEPT
            && let Some(first) = tokens
                .iter()
                .min_by_key(|(_, kept)| kept.renew_at)
                .map(|(k, _)| k.clone())
        {
            tokens.remove(&first);
        }
        tokens.insert(
            key,
            Kept {
                token: set.access_token.clone(),
                renew_at,
            },
        );
        tracing::debug!(upstream = %upstream, "caller's token exchanged");
        Ok(set.access_token)
    }

    /// Forgets what was exchanged for `principal` at `upstream` (the upstream refused
    /// it): the next call exchanges anew.
    pub(super) fn forget_exchanged(&self, upstream: &str, principal: &Principal) {
        let holder = principal.holder();
        lock(&self.exchanged.tokens).retain(|(u, h, _), _| !(u == upstream && *h == holder));
    }

    /// The issuer's metadata, with `resource` the upstream's URL when it has one (read
    /// again every [`METADATA_TTL`]).
    async fn issuer(&self, upstream: &str) -> Result<Discovery, String> {
        if let Some((discovery, at)) = lock(&self.exchanged.issuers).get(upstream)
            && at.elapsed() < METADATA_TTL
        {
            return Ok(discovery.clone());
        }
        let config = self.config();
        let upstream_config = config
            .upstreams
            .get(upstream)
            .ok_or("no longer configured")?;
        let resource = match &upstream_config.kind {
            crate::config::UpstreamKind::StreamableHttp(http)
            | crate::config::UpstreamKind::Sse(http) => http.url.clone(),
            // A stdio server has no URL to name: `oauth.audience` names it alone, and
            // no `resource` is sent.
            crate::config::UpstreamKind::Stdio(_) => String::new(),
            _ => return Err("not an MCP server".into()),
        };
        let issuer = upstream_config
            .settings
            .oauth
            .as_ref()
            .and_then(|o| o.issuer.clone())
            .ok_or("no `oauth.issuer` is configured")?;
        let client = self.client_for(upstream).map_err(|e| e.to_string())?;
        let discovery = client
            .discover_issuer(&issuer, &resource)
            .await
            .map_err(|e| e.to_string())?;
        lock(&self.exchanged.issuers)
            .insert(upstream.to_owned(), (discovery.clone(), Instant::now()));
        Ok(discovery)
    }
}

/// How long the caller's token has left, by the `exp` the gateway verified: nothing
/// exchanged from it outlives it.
fn lifetime_left(expires_at: Option<u64>) -> Option<Duration> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(expires_at?.saturating_sub(now)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchanged_token_never_outlives_the_callers() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let left = lifetime_left(Some(now + 120)).unwrap();
        assert!(left <= Duration::from_secs(120) && left >= Duration::from_secs(110));
        assert_eq!(lifetime_left(Some(now - 5)), Some(Duration::ZERO));
        assert_eq!(lifetime_left(None), None);
    }
}
