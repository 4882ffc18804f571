//! An OpenAPI upstream called with each user's own token (`credentials: oauth`): the
//! spec's authorization code flow users connect through (chosen when the spec is
//! imported; see `toolgate_adapters::openapi::CodeFlow`), and the authorization server
//! it leads to, found again whenever a user connects (by the token service,
//! `crate::upstream_auth`) as for an MCP upstream. An import whose users could not
//! connect fails, saying why: no such flow in the spec, or no client the gateway
//! could use at its authorization server.

use toolgate_adapters::oauth::{Discovery, OAuthClient};
use toolgate_adapters::openapi::{CodeFlow, LoadError, OpenApiUpstream};

use crate::config::oauth::UpstreamOAuth;

/// Bounds each request to the flow's authorization server made at import.
const IMPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Sets `upstream` up to be called with its users' tokens (the flow of
/// `settings.scheme`, or the one its operations use) and checks that the gateway has a
/// client at the flow's authorization server: configured (`client_id`), or one it can
/// register. Answers the flow.
pub(super) async fn take_user_tokens(
    upstream: &mut OpenApiUpstream,
    settings: &UpstreamOAuth,
) -> Result<CodeFlow, LoadError> {
    let flow = upstream.take_user_tokens(settings.scheme.as_deref())?;
    if settings.client_id.is_none() {
        let client = OAuthClient::new(settings.allow_private_networks, IMPORT_TIMEOUT)
            .map_err(LoadError::Config)?;
        authorization_server(&client, &flow, settings)
            .await
            .map_err(|e| LoadError::Config(format!("credentials: oauth: {e}")))?;
    }
    Ok(flow)
}

/// The authorization server of `flow` as `client` reaches it, and the scope to ask
/// users for: `settings.scopes`, else those the spec's operations require. Without a
/// configured `client_id` its RFC 8414 metadata must offer a way to obtain one
/// (registration, or a Client ID Metadata Document).
pub async fn authorization_server(
    client: &OAuthClient,
    flow: &CodeFlow,
    settings: &UpstreamOAuth,
) -> Result<(Discovery, Option<String>), String> {
    let discovery = client
        .discover_endpoints(
            &flow.authorization_url,
            &flow.token_url,
            flow.refresh_url.as_ref(),
        )
        .await;
    if settings.client_id.is_none()
        && discovery.registration_endpoint.is_none()
        && !discovery.client_id_metadata_document_supported
    {
        let mut origin = flow.token_url.clone();
        origin.set_path("/");
        origin.set_query(None);
        return Err(format!(
            "the spec's flow (security scheme '{}', token URL {}) needs a client at its \
             authorization server, and none is configured: its RFC 8414 metadata at {} names \
             no registration endpoint (or could not be read); set `oauth.client_id` (and \
             `oauth.client_secret`) to a client registered there with redirect URI \
             `<public_url>/oauth/callback`",
            flow.scheme,
            shown(&flow.token_url),
            origin
        ));
    }
    let scopes = if settings.scopes.is_empty() {
        &flow.scopes
    } else {
        &settings.scopes
    };
    let scope = (!scopes.is_empty()).then(|| scopes.join(" "));
    Ok((discovery, scope))
}

/// `url` without its query (which may carry a key).
fn shown(url: &url::Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    let _ = shown.set_password(None);
    shown.to_string()
}
