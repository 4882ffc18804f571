//! Connecting a user's account, step by step: the link's page, the start of the
//! authorization (discovery, client registration, PKCE), and the callback (state,
//! issuer, code exchange).

use std::time::Duration;

use toolgate_adapters::oauth::{Challenge, ClientIdentity, PreRegistered, RegisteredClient};

use super::records::{self, Flow, Link};
use super::{Found, Grant, UpstreamAuth, stored_token};
use crate::config::oauth::TokenEndpointAuth;

/// How long the upstream's own 401 answer (the challenge naming its authorization
/// server) is waited for.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connect link's page shows: whose account connects which upstream.
#[derive(Debug, Clone)]
pub struct ConnectPage {
    pub upstream: String,
    pub tenant: String,
    pub subject: Option<String>,
}

/// How the authorization server's answer at `/oauth/callback` ended.
#[derive(Debug, Clone)]
pub enum CallbackOutcome {
    Connected { upstream: String },
    Failed { message: String },
}

/// The query of `/oauth/callback`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct CallbackParams {
    pub code: Option<String>,
    pub state: Option<String>,
    pub iss: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

const GONE: &str = "this connect link was already used or has expired: call the tool \
                    again (or ask the gateway for a new link) to get a fresh one";

impl UpstreamAuth {
    /// The page of connect link `id` (it stays usable); `None` when unknown, used or
    /// expired.
    pub async fn link_page(&self, id: &str) -> Option<ConnectPage> {
        let bytes = self
            .store
            .peek_pending(&records::link_id(id))
            .await
            .ok()??;
        let link = Link::from_bytes(&bytes)?;
        Some(ConnectPage {
            upstream: link.upstream,
            tenant: link.tenant,
            subject: link.subject,
        })
    }

    /// Uses connect link `id`: discovers the upstream's authorization server,
    /// registers the gateway with it when needed, and answers the authorization URL
    /// the browser goes to. The error is written for the person at the browser.
    pub async fn begin(&self, id: &str) -> Result<String, String> {
        let bytes = self
            .store
            .take_pending(&records::link_id(id))
            .await
            .map_err(|e| e.to_string())?
            .ok_or(GONE)?;
        let link = Link::from_bytes(&bytes).ok_or(GONE)?;
        if !self.is_oauth(&link.upstream) {
            return Err(format!(
                "upstream '{}' is no longer configured",
                link.upstream
            ));
        }
        let Found {
            client,
            discovery,
            scope,
        } = self
            .discover_upstream(&link.upstream)
            .await
            .map_err(|e| format!("upstream '{}': {e}", link.upstream))?;
        let config = self.config();
        let base = config
            .public_url
            .as_deref()
            .ok_or("the gateway has no `public_url`")?
            .trim_end_matches('/')
            .to_owned();
        let redirect_uri = format!("{base}/oauth/callback");
        let registered = self
            .registered_client(&link.upstream, &discovery, &redirect_uri, &base)
            .await?;
        let scope = link.scope.clone().or(scope);
        let request = client
            .authorization_request(&discovery, &registered, &redirect_uri, scope.as_deref())
            .map_err(|e| format!("upstream '{}': {e}", link.upstream))?;
        let flow = Flow {
            link,
            verifier: request.pkce_verifier,
            discovery,
            client: registered,
            redirect_uri,
            scope,
        };
        self.store
            .put_pending(
                &records::flow_id(&request.state),
                &flow.to_bytes(),
                config.oauth.connect_ttl,
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(request.url)
    }

    /// The gateway's client at the authorization server of `discovery`: configured,
    /// its Client ID Metadata Document, or registered (once per process and issuer).
    async fn registered_client(
        &self,
        upstream: &str,
        discovery: &toolgate_adapters::oauth::Discovery,
        redirect_uri: &str,
        base: &str,
    ) -> Result<RegisteredClient, String> {
        let key = (upstream.to_owned(), discovery.issuer.clone());
        let mut registered = self.registered.lock().await;
        if let Some(client) = registered.get(&key) {
            return Ok(client.clone());
        }
        let config = self.config();
        let settings = self.settings(upstream);
        let preregistered = settings.client_id.clone().map(|client_id| PreRegistered {
            client_id,
            client_secret: settings.client_secret.clone(),
            auth_method: settings
                .token_endpoint_auth_method
                .map(TokenEndpointAuth::method),
            signing_key: None,
        });
        let identity = ClientIdentity {
            client_name: config.oauth.client_name.clone(),
            redirect_uri: redirect_uri.to_owned(),
            metadata_url: metadata_url(&config, base),
            preregistered,
        };
        let client = self
            .client_for(upstream)
            .map_err(|e| e.to_string())?
            .register(discovery, &identity)
            .await
            .map_err(|e| format!("upstream '{upstream}': {e}"))?;
        // A client of the upstream's previous authorization server is never shown to
        // its new one: keep only this issuer's.
        registered.retain(|(u, _), _| u != upstream);
        registered.insert(key, client.clone());
        Ok(client)
    }

    /// The authorization server's answer: checks `state` (single use) and `iss`,
    /// exchanges the code, and keeps the token for the user the link was made for.
    pub async fn finish(&self, params: CallbackParams) -> CallbackOutcome {
        let failed = |message: String| CallbackOutcome::Failed { message };
        let Some(state) = params.state.as_deref() else {
            return failed("the authorization server's answer has no `state`".into());
        };
        let flow = match self.store.take_pending(&records::flow_id(state)).await {
            Ok(Some(bytes)) => match Flow::from_bytes(&bytes) {
                Some(flow) => flow,
                None => return failed(GONE.into()),
            },
            Ok(None) => return failed(GONE.into()),
            Err(e) => return failed(e.to_string()),
        };
        let upstream = flow.link.upstream.clone();
        if let Err(e) = flow.discovery.check_issuer(params.iss.as_deref()) {
            tracing::warn!(upstream = %upstream, error = %e, "authorization response refused");
            return failed(format!("the answer cannot be trusted: {e}"));
        }
        if let Some(error) = params.error {
            let detail = params.error_description.unwrap_or_default();
            return failed(format!(
                "the authorization server of '{upstream}' answered '{error}' {detail}"
            ));
        }
        let Some(code) = params.code else {
            return failed("the authorization server's answer has no code".into());
        };
        let client = match self.client_for(&upstream) {
            Ok(client) => client,
            Err(e) => return failed(e.to_string()),
        };
        let set = match client
            .exchange_code(
                &flow.discovery,
                &flow.client,
                &code,
                &flow.verifier,
                &flow.redirect_uri,
            )
            .await
        {
            Ok(set) => set,
            Err(e) => return failed(format!("upstream '{upstream}': {e}")),
        };
        let grant = Grant {
            discovery: flow.discovery,
            client: flow.client,
        };
        let token = stored_token(set, &grant, flow.scope, None);
        let principal = flow.link.principal();
        if let Err(e) = self
            .store
            .put(&Self::key(&upstream, &principal), &token)
            .await
        {
            return failed(e.to_string());
        }
        tracing::info!(upstream = %upstream, tenant = %principal.tenant, subject = principal.subject.as_deref().unwrap_or("-"), "upstream authorization connected");
        // Open the user's connection now: its tool list joins the catalog, so the
        // tools are there when the agent looks again.
        if let Some(mounted) = self.gateway.upstreams().get(&upstream)
            && let Some(per_caller) = &mounted.per_caller
        {
            per_caller.warm(principal.holder(), &token.access_token);
        }
        CallbackOutcome::Connected { upstream }
    }
}

/// The URL of the gateway's Client ID Metadata Document, when it has one.
fn metadata_url(config: &crate::config::Config, base: &str) -> Option<String> {
    config.oauth.client_metadata_url.clone().or_else(|| {
        base.starts_with("https://")
            .then(|| format!("{base}/oauth/client-metadata.json"))
    })
}

/// The upstream's challenge to a request without credentials (its 401
/// `WWW-Authenticate`), which names its protected-resource metadata and scope. A list
/// of tools is asked for first (servers that let `initialize` through without
/// credentials challenge it), then `initialize`.
pub(super) async fn probe(endpoint: &str) -> Option<Challenge> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(PROBE_TIMEOUT)
        .build()
        .ok()?;
    let bodies = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
        concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","#,
            r#""capabilities":{},"clientInfo":{"name":"toolgate","version":"0"}}}"#
        ),
    ];
    for body in bodies {
        let answer = client
            .post(endpoint)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
            .await
            .ok()?;
        if answer.status() == reqwest::StatusCode::UNAUTHORIZED {
            return answer
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .and_then(Challenge::parse);
        }
    }
    None
}

/// The gateway's Client ID Metadata Document.
pub(super) fn client_metadata(config: &crate::config::Config) -> Option<serde_json::Value> {
    let base = config.public_url.as_deref()?.trim_end_matches('/');
    let url = metadata_url(config, base)?;
    toolgate_adapters::oauth::client_metadata_document(&ClientIdentity {
        client_name: config.oauth.client_name.clone(),
        redirect_uri: format!("{base}/oauth/callback"),
        metadata_url: Some(url),
        preregistered: None,
    })
    .ok()
}
