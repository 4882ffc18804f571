//! The gateway as each user's OAuth client at upstreams configured `credentials:
//! oauth`: it keeps every user's token for every such upstream (sealed, in the state
//! store), refreshes it, and sends the user through the upstream's consent when it
//! holds none — or none with enough scope.
//!
//! A user connects through a *connect link*: a single-use, short-lived URL the gateway
//! gives in the `authorization_required` answer (and on `POST /v1/connections/…`),
//! bound to the tenant, the subject and the upstream it was made for. Opening it shows
//! whose account is being connected; confirming sends the browser to the upstream's
//! authorization server (discovered from the upstream's own 401 answer: RFC 9728, RFC
//! 8414) with PKCE and the upstream as `resource`; the server sends it back to
//! `/oauth/callback`, where the `state` (single use) and the issuer (RFC 9207) are
//! checked before the code is exchanged. See [`connect`] for those steps.
//!
//! The core asks for tokens through [`crate::gateway::UpstreamTokens`], which this
//! service implements.

mod connect;
mod exchange;
mod records;
mod service;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use toolgate_adapters::oauth::{
    Challenge, Discovery, OAuthClient, OAuthError, RegisteredClient, TokenHint, union_scopes,
};
use toolgate_adapters::{Secret, ToolError};

use crate::config::{Config, CredentialSource};
use crate::gateway::Gateway;
use crate::policy::Principal;
use crate::state::tokens::{StoredToken, TokenKey, TokenStore};

pub use connect::{CallbackOutcome, CallbackParams, ConnectPage};
use records::Link;

/// A token that expires within this is refreshed before use (see [`refresh_margin`]).
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// How long one replica waits for another's refresh of the same token.
const REFRESH_WAIT: Duration = Duration::from_secs(10);
/// Bounds every exchange with an authorization server (metadata, registration, token).
const OAUTH_TIMEOUT: Duration = Duration::from_secs(10);

/// See the module docs.
pub struct UpstreamAuth {
    gateway: Arc<Gateway>,
    store: TokenStore,
    /// Clients registered at authorization servers (RFC 7591), by upstream and
    /// issuer: registered once per process, not once per user.
    registered: tokio::sync::Mutex<HashMap<(String, String), RegisteredClient>>,
    /// The gateway's own tokens at `client_credentials` upstreams.
    service: service::ServiceTokens,
    /// Tokens exchanged from callers' own (`credentials: token_exchange`).
    exchanged: exchange::Exchanged,
    /// This service itself, for the tasks it starts for upstreams mounted later.
    me: std::sync::Weak<UpstreamAuth>,
}

/// An upstream's authorization server as found from its own 401 answer, with the
/// client that talks to it and the scope to ask for (its challenge's, its metadata's,
/// else the configured `oauth.scopes`).
struct Found {
    client: OAuthClient,
    discovery: Discovery,
    scope: Option<String>,
}

/// What a stored token keeps besides the token: how to refresh and revoke it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Grant {
    discovery: Discovery,
    client: RegisteredClient,
}

impl UpstreamAuth {
    /// The service for `gateway`, keeping tokens where its config says once
    /// `oauth.token_keys` are set: in Redis with `state.backend: redis`, otherwise in
    /// a file in `data_dir` (tokens outlive a restart); without keys in memory, sealed
    /// with a key of this process.
    pub fn for_gateway(gateway: Arc<Gateway>) -> Result<Arc<UpstreamAuth>, String> {
        use crate::state::tokens::Keyring;
        let config = gateway.config();
        let keys = &config.oauth.token_keys;
        let keyring = if keys.is_empty() {
            Keyring::ephemeral().map_err(|_| "cannot make a key for the token store: the system random number generator failed".to_owned())?
        } else {
            Keyring::new(keys).map_err(|e| format!("oauth.token_keys: {e}"))?
        };
        // Without keys nothing outlives the process (the config's check refuses
        // `credentials: oauth` with Redis and no keys).
        let store = match (&gateway.shared, keys.is_empty()) {
            (_, true) => TokenStore::memory(keyring),
            (Some(shared), false) => TokenStore::redis(shared.conn.clone(), keyring)?,
            (None, false) => TokenStore::file(&config.data_dir, keyring)?,
        };
        Ok(Self::new(gateway, store))
    }

    /// Starts the work each upstream reached with users' or the service's own tokens
    /// needs, for the upstreams mounted now (those mounted later are handed in as they
    /// are: [`crate::gateway::UpstreamTokens::mounted`]).
    pub fn watch_mounted(&self) {
        use crate::gateway::UpstreamTokens;
        for (name, mounted) in self.gateway.upstreams().iter() {
            if let Some(per_caller) = &mounted.per_caller {
                self.mounted(name, per_caller.clone(), mounted.stop_token());
            }
        }
    }

    /// Opens each tenant's own connection to a `per_tenant` HTTP MCP upstream with its
    /// token, so that every tenant's tools are listed before its first call.
    fn warm_tenants(&self, upstream: &str, per_caller: &toolgate_adapters::mcp::PerCallerUpstream) {
        let config = self.config();
        let per_tenant = config
            .upstreams
            .get(upstream)
            .is_some_and(|u| u.settings.credentials == CredentialSource::PerTenant);
        if !per_tenant {
            return;
        }
        for (tenant, settings) in &config.tenants {
            if let Some(token) = settings
                .upstream_credentials
                .get(upstream)
                .and_then(crate::config::mcp_bearer)
            {
                let holder = Principal {
                    tenant: tenant.clone(),
                    subject: None,
                }
                .holder_for(CredentialSource::PerTenant);
                per_caller.warm(holder, token);
            }
        }
    }

    /// Keeps an OAuth upstream's tool list in the store as connections list it, and
    /// starts it from the list kept: a replica started afresh lists (and routes to) the
    /// tools users connected before, without waiting for one of them to call. Runs
    /// until `stop` (the upstream unmounted or replaced, the gateway stopping).
    fn keep_listing(
        &self,
        upstream: String,
        per_caller: Arc<toolgate_adapters::mcp::PerCallerUpstream>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            let mut changes = toolgate_adapters::Upstream::tools_changed(&*per_caller);
            if let Ok(Some(bytes)) = me.store.get_listing(&upstream).await
                && let Ok(raw) =
                    serde_json::from_slice::<Vec<toolgate_adapters::JsonObject>>(&bytes)
            {
                per_caller.seed(
                    raw.into_iter()
                        .filter_map(toolgate_adapters::ToolDef::from_raw)
                        .collect(),
                );
            }
            changes.borrow_and_update();
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    _ = stop.cancelled() => return,
                }
                let tools = toolgate_adapters::Upstream::tools(&*per_caller);
                let raw: Vec<&toolgate_adapters::JsonObject> =
                    tools.iter().map(|t| &*t.raw).collect();
                let Ok(bytes) = serde_json::to_vec(&raw) else {
                    continue;
                };
                if let Err(error) = me.store.put_listing(&upstream, &bytes).await {
                    tracing::warn!(upstream = %upstream, %error, "tool list not kept");
                }
            }
        });
    }

    /// The service over `store`, for `gateway`'s upstreams.
    pub fn new(gateway: Arc<Gateway>, store: TokenStore) -> Arc<UpstreamAuth> {
        Arc::new_cyclic(|me| UpstreamAuth {
            gateway,
            store,
            registered: tokio::sync::Mutex::new(HashMap::new()),
            service: Default::default(),
            exchanged: Default::default(),
            me: me.clone(),
        })
    }

    fn config(&self) -> Arc<Config> {
        self.gateway.config()
    }

    /// The gateway's `public_url`, when set (its browser pages' origin behind a proxy).
    pub fn public_url(&self) -> Option<String> {
        self.config().public_url.clone()
    }

    /// The gateway's Client ID Metadata Document, when it publishes one.
    pub fn client_metadata(&self) -> Option<serde_json::Value> {
        connect::client_metadata(&self.config())
    }

    /// Whether `upstream` is one this service keeps tokens for.
    pub fn is_oauth(&self, upstream: &str) -> bool {
        self.config()
            .upstreams
            .get(upstream)
            .is_some_and(|u| u.settings.credentials == CredentialSource::Oauth)
    }

    /// Whether `upstream` is reached with callers' exchanged tokens.
    fn is_token_exchange(&self, upstream: &str) -> bool {
        self.config()
            .upstreams
            .get(upstream)
            .is_some_and(|u| u.settings.credentials == CredentialSource::TokenExchange)
    }

    /// The upstreams configured `credentials: oauth`, by name.
    pub fn oauth_upstreams(&self) -> Vec<String> {
        self.config()
            .upstreams
            .iter()
            .filter(|(_, u)| u.settings.credentials == CredentialSource::Oauth)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `upstream`'s OAuth client settings (the defaults when it sets none).
    fn settings(&self, upstream: &str) -> crate::config::oauth::UpstreamOAuth {
        self.config()
            .upstreams
            .get(upstream)
            .and_then(|u| u.settings.oauth.clone())
            .unwrap_or_default()
    }

    /// Finds `upstream`'s authorization server: asks the MCP endpoint without
    /// credentials for its challenge, then discovers from it (RFC 9728, RFC 8414); an
    /// OpenAPI upstream's from its spec's flow.
    async fn discover_upstream(&self, upstream: &str) -> Result<Found, String> {
        let endpoint = match self.config().upstreams.get(upstream).map(|u| &u.kind) {
            Some(
                crate::config::UpstreamKind::StreamableHttp(http)
                | crate::config::UpstreamKind::Sse(http),
            ) => http.url.clone(),
            Some(crate::config::UpstreamKind::Openapi(_)) => {
                let flow = (self.gateway.upstreams().get(upstream))
                    .and_then(|m| m.code_flow.clone())
                    .ok_or("its spec is not imported (yet, or its import failed)")?;
                let client = self.client_for(upstream).map_err(|e| e.to_string())?;
                let settings = self.settings(upstream);
                let (discovery, scope) =
                    crate::gateway::openapi_oauth::authorization_server(&client, &flow, &settings)
                        .await?;
                return Ok(Found {
                    client,
                    discovery,
                    scope,
                });
            }
            Some(_) => return Err("not an HTTP MCP server".into()),
            None => return Err("no longer configured".into()),
        };
        let resource = url::Url::parse(&endpoint).map_err(|e| e.to_string())?;
        let client = self.client_for(upstream).map_err(|e| e.to_string())?;
        let challenge = connect::probe(&endpoint).await;
        let discovery = client
            .discover(&resource, challenge.as_ref())
            .await
            .map_err(|e| e.to_string())?;
        let configured = self.settings(upstream).scopes;
        let scope = discovery
            .scope_for(challenge.as_ref())
            .or_else(|| (!configured.is_empty()).then(|| configured.join(" ")));
        Ok(Found {
            client,
            discovery,
            scope,
        })
    }

    fn client_for(&self, upstream: &str) -> Result<OAuthClient, ToolError> {
        let allow_private = self.settings(upstream).allow_private_networks;
        OAuthClient::new(allow_private, OAUTH_TIMEOUT).map_err(ToolError::Unavailable)
    }

    fn key(upstream: &str, principal: &Principal) -> TokenKey {
        TokenKey {
            upstream: upstream.to_owned(),
            tenant: principal.tenant.clone(),
            subject: principal.subject.clone(),
        }
    }

    /// The connection state of `principal` at every OAuth upstream.
    pub async fn connections(&self, principal: &Principal) -> Result<Vec<Connection>, String> {
        let mut all = Vec::new();
        for upstream in self.oauth_upstreams() {
            let token = self
                .store
                .get(&Self::key(&upstream, principal))
                .await
                .map_err(|e| e.to_string())?;
            all.push(Connection {
                connected: token.is_some(),
                scope: token.as_ref().and_then(|t| t.scope.clone()),
                expires_at: token.as_ref().and_then(|t| t.expires_at),
                upstream,
            });
        }
        Ok(all)
    }

    /// Forgets `principal`'s token for `upstream` and revokes it at its authorization
    /// server (best effort: the token is forgotten whatever the server says).
    /// `false` when none was held.
    pub async fn disconnect(&self, upstream: &str, principal: &Principal) -> Result<bool, String> {
        let removed = self
            .store
            .remove(&Self::key(upstream, principal))
            .await
            .map_err(|e| e.to_string())?;
        if let Some(mounted) = self.gateway.upstreams().get(upstream)
            && let Some(per_caller) = &mounted.per_caller
        {
            per_caller.disconnect(&principal.holder());
        }
        let Some(token) = removed else {
            return Ok(false);
        };
        if let Some(grant) = grant_of(&token)
            && let Ok(client) = self.client_for(upstream)
        {
            let held = [
                (Some(&token.access_token), TokenHint::AccessToken),
                (token.refresh_token.as_ref(), TokenHint::RefreshToken),
            ];
            for (secret, hint) in held {
                let Some(secret) = secret else { continue };
                if let Err(e) = client
                    .revoke(&grant.discovery, &grant.client, secret, hint)
                    .await
                {
                    tracing::warn!(upstream = %upstream, error = %e, "token revocation failed; the token is forgotten anyway");
                }
            }
        }
        tracing::info!(upstream = %upstream, tenant = %principal.tenant, subject = principal.subject.as_deref().unwrap_or("-"), "upstream authorization disconnected");
        Ok(true)
    }

    /// A connect link for `principal` at `upstream`, asking for `scope` (`None`: what
    /// the upstream's challenge and metadata name).
    pub async fn connect_link(
        &self,
        upstream: &str,
        principal: &Principal,
        scope: Option<String>,
    ) -> Result<String, ToolError> {
        let config = self.config();
        let Some(base) = config.public_url.as_deref() else {
            return Err(ToolError::Unavailable(
                "the gateway has no `public_url`, so it cannot send users to connect".into(),
            ));
        };
        let link = Link {
            upstream: upstream.to_owned(),
            tenant: principal.tenant.clone(),
            subject: principal.subject.clone(),
            scope,
        };
        let id = records::new_id().map_err(ToolError::Unavailable)?;
        self.store
            .put_pending(
                &records::link_id(&id),
                &link.to_bytes(),
                config.oauth.connect_ttl,
            )
            .await
            .map_err(|e| ToolError::Unavailable(e.to_string()))?;
        Ok(format!("{}/oauth/connect/{id}", base.trim_end_matches('/')))
    }

    /// The error a call gets when `principal` holds no (good enough) token.
    async fn authorization_required(
        &self,
        upstream: &str,
        principal: &Principal,
        scope: Option<String>,
        why: &str,
    ) -> ToolError {
        match self.connect_link(upstream, principal, scope).await {
            Ok(url) => ToolError::AuthorizationRequired {
                message: format!(
                    "upstream '{upstream}' {why}: the user connects their account by \
                     opening {url} in a browser (the link works once, within {}), then \
                     calls the tool again",
                    toolgate_adapters::error::duration_text(self.config().oauth.connect_ttl)
                ),
                connect_url: Some(url),
            },
            Err(error) => error,
        }
    }

    /// Refreshes `token` (held under `key`) once across replicas; `None` when it
    /// cannot be refreshed (no refresh token, or the server refused it: it is then
    /// forgotten).
    async fn refresh(
        &self,
        key: &TokenKey,
        token: StoredToken,
    ) -> Result<Option<StoredToken>, ToolError> {
        let unavailable = |e: String| ToolError::Unavailable(e);
        let _gate = self.store.refresh_gate(key).await;
        // Another caller of this process may have refreshed it meanwhile.
        let token = match self
            .store
            .get(key)
            .await
            .map_err(|e| unavailable(e.to_string()))?
        {
            Some(now) if now.access_token != token.access_token => return Ok(Some(now)),
            Some(now) => now,
            None => return Ok(None),
        };
        let (Some(refresh_token), Some(grant)) = (token.refresh_token.clone(), grant_of(&token))
        else {
            return Ok(None);
        };
        let lock = self
            .store
            .lock_refresh(key, REFRESH_WAIT)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if lock.is_none() {
            // Another replica refreshes it: wait for its result (bounded).
            let until = tokio::time::Instant::now() + REFRESH_WAIT;
            while tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match self
                    .store
                    .get(key)
                    .await
                    .map_err(|e| unavailable(e.to_string()))?
                {
                    Some(now) if now.access_token != token.access_token => return Ok(Some(now)),
                    Some(_) => {}
                    None => return Ok(None),
                }
            }
            return Err(ToolError::Unavailable(format!(
                "upstream '{}': another gateway replica is refreshing this token; retry",
                key.upstream
            )));
        }
        let client = self.client_for(&key.upstream)?;
        match client
            .refresh(&grant.discovery, &grant.client, &refresh_token, None)
            .await
        {
            Ok(set) => {
                let fresh = stored_token(set, &grant, token.scope.clone(), Some(refresh_token));
                self.store
                    .put(key, &fresh)
                    .await
                    .map_err(|e| unavailable(e.to_string()))?;
                Ok(Some(fresh))
            }
            Err(OAuthError::Refused { .. }) => {
                self.store
                    .remove(key)
                    .await
                    .map_err(|e| unavailable(e.to_string()))?;
                Ok(None)
            }
            Err(other) => Err(ToolError::Unavailable(format!(
                "upstream '{}': refreshing the user's token failed ({other}); retry",
                key.upstream
            ))),
        }
    }
}

/// One upstream's connection state for a user.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Connection {
    pub upstream: String,
    pub connected: bool,
    /// The scope granted, as the authorization server said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// When the access token expires (Unix seconds; it is refreshed before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn grant_of(token: &StoredToken) -> Option<Grant> {
    serde_json::from_str(token.grant.as_deref()?).ok()
}

/// A token set as stored: `scope` is what the server granted, else what was asked.
fn stored_token(
    set: toolgate_adapters::oauth::TokenSet,
    grant: &Grant,
    asked: Option<String>,
    old_refresh: Option<Secret>,
) -> StoredToken {
    let now = now_secs();
    StoredToken {
        access_token: set.access_token,
        refresh_token: set.refresh_token.or(old_refresh),
        token_type: set.token_type,
        expires_at: set.expires_in.map(|s| now.saturating_add(s)),
        scope: set.scope.or(asked),
        issuer: grant.discovery.issuer.clone(),
        client_id: grant.client.client_id.clone(),
        resource: grant.discovery.resource.clone(),
        obtained_at: now,
        grant: serde_json::to_string(grant).ok(),
    }
}

/// How long before it expires a token is refreshed: [`REFRESH_MARGIN`], or half its
/// lifetime for a token that lives less than two margins.
fn refresh_margin(token: &StoredToken) -> u64 {
    let lifetime = token
        .expires_at
        .unwrap_or(0)
        .saturating_sub(token.obtained_at);
    REFRESH_MARGIN.as_secs().min(lifetime / 2)
}

/// Whether `granted` (space-separated) holds every scope of `wanted`.
fn covers(granted: Option<&str>, wanted: &str) -> bool {
    let granted: Vec<&str> = granted.unwrap_or("").split_whitespace().collect();
    wanted.split_whitespace().all(|w| granted.contains(&w))
}

#[async_trait]
impl crate::gateway::UpstreamTokens for UpstreamAuth {
    fn mounted(
        &self,
        upstream: &str,
        per_caller: Arc<toolgate_adapters::mcp::PerCallerUpstream>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        if self.is_oauth(upstream) {
            self.keep_listing(upstream.to_owned(), per_caller, stop);
        } else if self.is_client_credentials(upstream) {
            self.warm_service(upstream.to_owned(), per_caller, stop);
        } else {
            self.warm_tenants(upstream, &per_caller);
        }
    }

    async fn token(&self, upstream: &str, principal: &Principal) -> Result<Secret, ToolError> {
        if self.is_client_credentials(upstream) {
            return self.service_token(upstream, false).await;
        }
        let key = Self::key(upstream, principal);
        let held = self
            .store
            .get(&key)
            .await
            .map_err(|e| ToolError::Unavailable(e.to_string()))?;
        let Some(token) = held else {
            let why =
                "is reached with each user's own authorization, and this user has not connected it";
            return Err(self
                .authorization_required(upstream, principal, None, why)
                .await);
        };
        let fresh = token
            .expires_at
            .is_none_or(|at| at > now_secs() + refresh_margin(&token));
        if fresh {
            return Ok(token.access_token);
        }
        match self.refresh(&key, token).await? {
            Some(token) => Ok(token.access_token),
            None => {
                let why = "needs this user's authorization again (the token expired and could not be refreshed)";
                Err(self
                    .authorization_required(upstream, principal, None, why)
                    .await)
            }
        }
    }

    async fn exchanged(
        &self,
        upstream: &str,
        principal: &Principal,
        assertion: &crate::policy::Assertion,
    ) -> Result<Secret, ToolError> {
        self.exchange(upstream, principal, assertion).await
    }

    async fn connected(&self, upstream: &str, principal: &Principal) -> Result<bool, ToolError> {
        self.store
            .get(&Self::key(upstream, principal))
            .await
            .map(|held| held.is_some())
            .map_err(|e| ToolError::Unavailable(e.to_string()))
    }

    async fn refused(
        &self,
        upstream: &str,
        principal: &Principal,
        status: u16,
        challenge: Option<&str>,
    ) -> Result<(), ToolError> {
        if self.is_token_exchange(upstream) {
            // Exchanged anew once; a refusal of that one is the call's answer.
            self.forget_exchanged(upstream, principal);
            return Ok(());
        }
        if self.is_client_credentials(upstream) {
            // A refused service token is replaced once; the call says if that failed.
            return self.service_token(upstream, true).await.map(|_| ());
        }
        let key = Self::key(upstream, principal);
        let challenge = challenge.and_then(Challenge::parse);
        let held = self
            .store
            .get(&key)
            .await
            .map_err(|e| ToolError::Unavailable(e.to_string()))?;
        let insufficient = status == 403
            || challenge
                .as_ref()
                .is_some_and(|c| c.error.as_deref() == Some("insufficient_scope"));
        if insufficient {
            let wanted = challenge.as_ref().and_then(|c| c.scope.clone());
            let granted = held.as_ref().and_then(|t| t.scope.clone());
            return Err(match wanted {
                // Asking again for what was granted would not help (and would loop).
                Some(wanted) if !covers(granted.as_deref(), &wanted) => {
                    let scope = union_scopes(granted.as_deref(), Some(&wanted)).unwrap_or(wanted);
                    let why = format!("needs more of this user's authorization (scope '{scope}')");
                    self.authorization_required(upstream, principal, Some(scope.clone()), &why)
                        .await
                }
                _ => ToolError::Unauthorized {
                    message: format!(
                        "upstream '{upstream}' refuses this call even with the user's \
                         authorization (HTTP {status}, insufficient scope); connecting again \
                         would not change that: the user's account at the upstream lacks \
                         the permission"
                    ),
                    status,
                    challenge: None,
                },
            });
        }
        // 401: the token is no longer good. Refresh it once, else connect again.
        if let Some(token) = held {
            let obtained = token.obtained_at;
            if let Some(fresh) = self.refresh(&key, token).await?
                && fresh.obtained_at >= obtained
            {
                return Ok(());
            }
            let _ = self.store.remove(&key).await;
        }
        let scope = challenge.and_then(|c| c.scope);
        let why = "refused this user's authorization (it may have been revoked)";
        Err(self
            .authorization_required(upstream, principal, scope, why)
            .await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_cover() {
        assert!(covers(Some("mcp:basic mcp:write"), "mcp:write"));
        assert!(!covers(Some("mcp:basic"), "mcp:write"));
        assert!(!covers(None, "x"));
        assert!(covers(None, ""));
    }
}
