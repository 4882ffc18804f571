//! The gateway as an OAuth 2.1 client of its upstreams, as the MCP authorization spec
//! (2025-11-25 and the 2026-07-28 draft) asks an MCP client to be: the stateless
//! mechanics only. Whoever keeps tokens, runs the connect and callback routes and
//! knows which user is connected to which upstream builds on this; nothing here holds
//! state between calls.
//!
//! The steps, one room each:
//!
//! ```text
//! 401/403 from the upstream -> challenge  (WWW-Authenticate: resource_metadata, scope, error)
//!   -> discovery    (RFC 9728 protected-resource metadata, resource check; RFC 8414 /
//!                    OIDC discovery of authorization_servers[0], issuer check;
//!                    scope selection; RFC 9207 `iss` of the authorization response)
//!   -> registration (pre-registered, Client ID Metadata Document, RFC 7591 DCR)
//!   -> token        (authorization URL with PKCE S256 and RFC 8707 `resource`; code
//!                    exchange, refresh, client credentials, revocation — built by
//!                    the `oauth2` crate; client authentication none, basic, post or
//!                    private_key_jwt, see `assertion`)
//! ```
//!
//! Every URL fetched here was learned from a server (a challenge, a metadata
//! document), so every request goes through the OpenAPI adapter's SSRF guard
//! (`crate::openapi::guard::Guard`, see `http`): private, loopback and link-local
//! addresses are refused unless `allow_private`, each request is bounded by the
//! client's timeout and each answer by [`http::MAX_BODY`]. No error text and no log
//! line carries a token, a code, a verifier, a client secret or an assertion; URLs are
//! shown without their query.

mod assertion;
mod challenge;
mod discovery;
mod exchange;
mod http;
mod registration;
mod token;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use challenge::Challenge;
pub use discovery::{Discovery, union_scopes};
pub use exchange::{ACCESS_TOKEN_TYPE, ExchangeRequest, TOKEN_EXCHANGE_GRANT};
pub use registration::{
    ClientIdentity, PreRegistered, RegisteredClient, Registration, SigningAlg, SigningKey,
    TokenAuthMethod, client_metadata_document,
};
pub use token::{AuthorizationRequest, ServiceClient, TokenHint, TokenSet};

use crate::openapi::guard::Guard;

/// What went wrong, in a form the caller can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// Metadata missing, invalid or not matching what was asked (the resource, the
    /// issuer), or an authorization server that lacks what the spec requires (PKCE
    /// S256): nothing to do but tell the operator.
    #[error("OAuth discovery failed: {0}")]
    Discovery(String),
    /// No way to obtain a client at this authorization server, or a client that
    /// belongs to another one (register again).
    #[error("OAuth client registration failed: {0}")]
    Registration(String),
    /// The authorization server answered with an OAuth error (`invalid_grant`,
    /// `invalid_client`, ...): the grant or token used is no good; forget it.
    #[error("the authorization server refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        error: String,
        description: Option<String>,
    },
    /// No usable answer: refused by the SSRF guard, connection, timeout, size, or an
    /// answer that is not what the protocol says.
    #[error("OAuth request failed: {0}")]
    Transport(String),
    /// RFC 9207: the authorization response's `iss` is missing (when the server said it
    /// sends one) or names another issuer: a possible mix-up attack; drop the response.
    #[error("authorization response refused: {0}")]
    InsecureIssuer(String),
    /// The caller's own input is unusable (a signing key that does not load, a
    /// redirect URI that is not a URL, an auth method without its secret).
    #[error("OAuth client configuration: {0}")]
    Config(String),
}

/// The protocol mechanics of the gateway as an OAuth client: every request through the
/// SSRF guard, each bounded by `timeout`. Cheap to clone; holds no state.
#[derive(Debug, Clone)]
pub struct OAuthClient {
    guard: Guard,
    timeout: Duration,
}

impl OAuthClient {
    /// A client that reaches private, loopback and link-local addresses only when
    /// `allow_private`; the error says what could not be set up.
    pub fn new(allow_private: bool, timeout: Duration) -> Result<OAuthClient, String> {
        Ok(OAuthClient {
            guard: Guard::new(allow_private, timeout)?,
            timeout,
        })
    }
}
