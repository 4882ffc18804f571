//! Which identity a call reaches its upstream with. An upstream configured
//! `credentials: static` is called with its own credentials, the same for every
//! caller; one configured `per_tenant` with the calling tenant's own
//! (`tenants.<name>.upstream_credentials.<upstream>`), which replace the upstream's —
//! a tenant without them is refused with `authorization_required`, never served with
//! another tenant's or the shared identity; one configured `oauth` with the token the
//! calling user connected, or one configured `client_credentials` with the gateway's
//! own service token there (both kept by the service handed in as
//! [`crate::gateway::UpstreamTokens`]).
//! The caller's own token to the gateway is never among them: its audience is the
//! gateway.

use std::sync::Arc;

use toolgate_adapters::{CallContext, CallerCredentials, ToolError};

use crate::access::Caller;
use crate::config::CredentialSource;
use crate::gateway::{Gateway, Mounted, UpstreamTokens};

/// The holder of an upstream's service identity (`client_credentials`): one for every
/// caller. No principal's holder starts with the separator (a tenant name is never
/// empty).
pub(crate) const SERVICE: &str = "\u{1f}service";

/// The caller's own credentials for `upstream` (`None`: the upstream's own apply).
pub(super) async fn for_call(
    gateway: &Gateway,
    mounted: &Mounted,
    caller: &Caller,
    upstream: &str,
) -> Result<Option<CallerCredentials>, ToolError> {
    match mounted.credentials {
        CredentialSource::Static => Ok(None),
        CredentialSource::PerTenant => match caller.tenant.upstream_credentials(upstream) {
            // An HTTP MCP upstream: the tenant's own connections, with its token.
            Some(credentials) if mounted.per_caller.is_some() => {
                let token = credentials
                    .openapi()
                    .and_then(crate::config::mcp_bearer)
                    .ok_or_else(|| {
                        ToolError::Unavailable(format!(
                            "upstream '{upstream}': tenant '{}' has no bearer token for it",
                            caller.tenant.name
                        ))
                    })?;
                Ok(Some(CallerCredentials::Bearer {
                    holder: caller.principal().holder_for(CredentialSource::PerTenant),
                    token: token.clone(),
                }))
            }
            Some(credentials) => Ok(Some(credentials.clone())),
            None => Err(ToolError::authorization_required(format!(
                "upstream '{upstream}' is called with each tenant's own credentials, and \
                 none are configured for tenant '{}': the gateway's operator sets them \
                 under tenants.{}.upstream_credentials.{upstream}",
                caller.tenant.name, caller.tenant.name
            ))),
        },
        CredentialSource::Oauth => {
            let principal = caller.principal();
            let token = upstream_tokens(gateway, upstream)?
                .token(upstream, &principal)
                .await?;
            Ok(Some(CallerCredentials::Bearer {
                holder: principal.holder(),
                token,
            }))
        }
        CredentialSource::TokenExchange => {
            let principal = caller.principal();
            let Some(assertion) = &caller.assertion else {
                return Err(ToolError::authorization_required(format!(
                    "upstream '{upstream}' is reached with the caller's own identity, \
                     exchanged for a token there: this call was authenticated with an API \
                     key, and only a JWT access token of the gateway's identity provider \
                     can be exchanged"
                )));
            };
            let token = upstream_tokens(gateway, upstream)?
                .exchanged(upstream, &principal, assertion)
                .await?;
            Ok(Some(CallerCredentials::Bearer {
                holder: principal.holder(),
                token,
            }))
        }
        CredentialSource::ClientCredentials => {
            let token = upstream_tokens(gateway, upstream)?
                .token(upstream, &caller.principal())
                .await?;
            Ok(Some(CallerCredentials::Bearer {
                holder: SERVICE.into(),
                token,
            }))
        }
    }
}

/// What a refusal of the caller's token by `upstream` comes to: `Ok` when the call
/// may be tried once more with a new token.
pub(super) async fn after_refusal(
    gateway: &Gateway,
    caller: &Caller,
    upstream: &str,
    (status, challenge): (u16, Option<&str>),
) -> Result<(), ToolError> {
    upstream_tokens(gateway, upstream)?
        .refused(upstream, &caller.principal(), status, challenge)
        .await
}

/// The per-user upstream `name` would belong to when the caller's catalog does not
/// have it because the caller's own connection there has not listed yet (they never
/// connected, or it was on another replica or before a restart): a name of a
/// prefixed `credentials: oauth` upstream that the tenant's patterns allow. `None`
/// otherwise — a name the tenant may not use stays unknown, as if it did not exist.
pub(super) fn unlisted_own(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    catalog: &crate::catalog::Catalog,
) -> Option<Arc<Mounted>> {
    if catalog.get(name).is_some() || !caller.tenant.allows(name) {
        return None;
    }
    let (upstream, _) = name.split_once(crate::catalog::SEPARATOR)?;
    let mounted = gateway.upstreams().get(upstream)?.clone();
    let per_caller = mounted.per_caller.as_ref()?;
    let holder = caller.principal().holder_for(mounted.credentials);
    (mounted.credentials.lists_per_caller()
        && mounted.namespace == crate::config::Namespace::Prefix
        && per_caller.tools_for(&holder).is_none())
    .then_some(mounted)
}

/// Opens the caller's own connection to `upstream` (a per-user upstream) and waits,
/// until `deadline`, for it to list: then the caller's catalog has their tools. A
/// caller who has not connected gets `authorization_required` with their link.
pub(super) async fn list_own(
    gateway: &Gateway,
    caller: &Caller,
    mounted: &Mounted,
    ctx: &CallContext,
) -> Result<(), ToolError> {
    let Some(upstream) = &mounted.per_caller else {
        return Ok(());
    };
    let name = toolgate_adapters::Upstream::name(&**upstream);
    let Some(CallerCredentials::Bearer { holder, token }) =
        for_call_or_connect(gateway, mounted, caller, name, ctx).await?
    else {
        return Ok(());
    };
    upstream.warm(holder.clone(), &token);
    let deadline = tokio::time::Instant::from_std(ctx.deadline);
    for _ in 0..LIST_WAIT_POLLS {
        if upstream.tools_for(&holder).is_some() || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(LIST_WAIT_POLL).await;
    }
    Ok(())
}

/// How often, and at most how many times, a connection being opened is looked at for
/// its list (10 s in all; the call's deadline ends it sooner).
const LIST_WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(20);
const LIST_WAIT_POLLS: usize = 500;

fn upstream_tokens(
    gateway: &Gateway,
    upstream: &str,
) -> Result<Arc<dyn UpstreamTokens>, ToolError> {
    gateway.upstream_tokens().ok_or_else(|| {
        ToolError::Unavailable(format!(
            "upstream '{upstream}' is reached with each user's own token, and this gateway \
             keeps no tokens (it was started without its OAuth service)"
        ))
    })
}

/// [`for_call`], and when the caller must first connect their account and their
/// client takes URL-mode elicitations: the client is asked (`elicitation/create`,
/// `mode: "url"`, the connect link; over 2026-07-28 the same request rides an
/// input-required result) to send its user to the link, and once the user has
/// connected — within the call's deadline — the call goes on with the new token
/// (`notifications/elicitation/complete` tells the client). A client that declines,
/// or a user who does not finish in time, gets the `authorization_required` error
/// with the link, as a client without elicitation does.
pub(super) async fn for_call_or_connect(
    gateway: &Gateway,
    mounted: &Mounted,
    caller: &Caller,
    upstream: &str,
    ctx: &CallContext,
) -> Result<Option<CallerCredentials>, ToolError> {
    let required = match for_call(gateway, mounted, caller, upstream).await {
        Err(error @ ToolError::AuthorizationRequired { .. }) => error,
        other => return other,
    };
    let (Some(client), Some(link)) = (
        ctx.client.as_ref().filter(|c| c.elicits_urls()),
        required.connect_url(),
    ) else {
        return Err(required);
    };
    // The id the client matches the completion notice with: not guessable.
    let mut random = [0u8; 16];
    if getrandom::fill(&mut random).is_err() {
        return Err(required);
    }
    let elicitation = format!("{:032x}", u128::from_be_bytes(random));
    let asked = client.request(
        "elicitation/create",
        serde_json::json!({
            "mode": "url",
            "elicitationId": elicitation,
            "url": link,
            "message": format!(
                "To continue, connect your account at '{upstream}': open the link, sign in \
                 there and allow access."
            ),
        }),
    );
    let deadline = tokio::time::Instant::from_std(ctx.deadline);
    let accepted = match tokio::time::timeout_at(deadline, asked).await {
        Ok(Ok(answer)) => answer.get("action").and_then(|a| a.as_str()) == Some("accept"),
        _ => false,
    };
    if !accepted {
        return Err(required);
    }
    let principal = caller.principal();
    let tokens = upstream_tokens(gateway, upstream)?;
    for _ in 0..CONNECT_WAIT_POLLS {
        if ctx.cancel.is_cancelled() || tokio::time::Instant::now() >= deadline {
            break;
        }
        if tokens.connected(upstream, &principal).await? {
            client.notify(
                "notifications/elicitation/complete",
                serde_json::json!({"elicitationId": elicitation}),
            );
            return for_call(gateway, mounted, caller, upstream).await;
        }
        tokio::select! {
            _ = tokio::time::sleep(CONNECT_WAIT_POLL) => {}
            _ = ctx.cancel.cancelled() => break,
        }
    }
    Err(required)
}

/// How often, and at most how many times, a user connecting in the browser is looked
/// for (10 minutes in all; the call's deadline ends it sooner).
const CONNECT_WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(250);
const CONNECT_WAIT_POLLS: usize = 2400;
