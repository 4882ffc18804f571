//! Which identity a call reaches its upstream with. An upstream configured
//! `credentials: static` is called with its own credentials, the same for every
//! caller; one configured `per_tenant` with the calling tenant's own
//! (`tenants.<name>.upstream_credentials.<upstream>`), which replace the upstream's —
//! a tenant without them is refused with `authorization_required`, never served with
//! another tenant's or the shared identity. The caller's own token to the gateway is
//! never among them: its audience is the gateway.

use toolgate_adapters::{CallerCredentials, ToolError};

use crate::access::Caller;
use crate::config::CredentialSource;
use crate::gateway::Mounted;

/// The caller's own credentials for `upstream` (`None`: the upstream's own apply).
pub(super) fn for_call(
    mounted: &Mounted,
    caller: &Caller,
    upstream: &str,
) -> Result<Option<CallerCredentials>, ToolError> {
    match mounted.credentials {
        CredentialSource::Static => Ok(None),
        CredentialSource::PerTenant => match caller.tenant.upstream_credentials(upstream) {
            Some(credentials) => Ok(Some(credentials.clone())),
            None => Err(ToolError::AuthorizationRequired(format!(
                "upstream '{upstream}' is called with each tenant's own credentials, and \
                 none are configured for tenant '{}': the gateway's operator sets them \
                 under tenants.{}.upstream_credentials.{upstream}",
                caller.tenant.name, caller.tenant.name
            ))),
        },
    }
}
