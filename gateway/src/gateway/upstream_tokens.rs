//! The port through which the core asks for users' upstream tokens.

use async_trait::async_trait;
use toolgate_adapters::{Secret, ToolError};

use crate::policy::Principal;

/// The tokens users hold at upstreams reached with each user's own (`credentials:
/// oauth`). The core only asks; the service that keeps, refreshes and obtains them
/// is built beside it and handed in ([`super::Gateway::set_upstream_tokens`]).
#[async_trait]
pub trait UpstreamTokens: Send + Sync {
    /// `principal`'s token for `upstream`, refreshed when about to expire. Without
    /// one: `AuthorizationRequired`, saying where the user connects.
    async fn token(&self, upstream: &str, principal: &Principal) -> Result<Secret, ToolError>;

    /// Whether `principal` holds a token for `upstream` (connected), without asking
    /// for one.
    async fn connected(&self, upstream: &str, principal: &Principal) -> Result<bool, ToolError>;

    /// A token for `upstream` made by exchanging the caller's own `assertion` at its
    /// issuer (RFC 8693), kept until shortly before it expires.
    async fn exchanged(
        &self,
        upstream: &str,
        principal: &Principal,
        assertion: &crate::policy::Assertion,
    ) -> Result<Secret, ToolError>;

    /// The upstream refused `principal`'s token (`status` 401 or 403, its
    /// `WWW-Authenticate` challenge). `Ok` when a new token is held and the call may be
    /// tried once more; otherwise the error the caller gets (connect again, with more
    /// scope, or a plain refusal when connecting again would not help).
    async fn refused(
        &self,
        upstream: &str,
        principal: &Principal,
        status: u16,
        challenge: Option<&str>,
    ) -> Result<(), ToolError>;

    /// `upstream`, reached with users' or the service's own tokens, was mounted (at
    /// startup, by a reload, replacing an earlier one): the service starts what it
    /// keeps for it (its kept tool list, its service connection) until `stop`.
    fn mounted(
        &self,
        upstream: &str,
        per_caller: std::sync::Arc<toolgate_adapters::mcp::PerCallerUpstream>,
        stop: tokio_util::sync::CancellationToken,
    );
}
