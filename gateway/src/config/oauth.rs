//! The gateway as an OAuth client of its upstreams (`credentials: oauth`): its
//! identity towards their authorization servers (`oauth:` at the top level) and each
//! upstream's own client settings (`oauth:` on the upstream).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgate_adapters::Secret;

/// The gateway's identity towards the authorization servers of upstreams called with
/// each user's own token, and how it keeps those tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthSettings {
    /// The name the gateway registers under (shown on consent screens).
    #[serde(default = "default_client_name")]
    pub client_name: String,
    /// Where the gateway's Client ID Metadata Document is reachable, used as its
    /// `client_id` by authorization servers that accept one (instead of registering).
    /// The gateway serves the document at `/oauth/client-metadata.json`; unset: that
    /// path under `public_url` when it is `https://`, otherwise no document is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// Keys sealing the stored tokens (AES-256-GCM), each 32 bytes in base64
    /// (`openssl rand -base64 32`). The first seals; every one opens, so a new key is
    /// added first and old ones are removed once tokens were re-sealed. Required with
    /// `state.backend: redis`; without keys tokens are sealed with a key that lives
    /// only as long as the process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_keys: Vec<Secret>,
    /// How long a connect link (and the authorization it starts) stays usable.
    #[serde(default = "default_connect_ttl", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub connect_ttl: Duration,
}

impl Default for OAuthSettings {
    fn default() -> Self {
        Self {
            client_name: default_client_name(),
            client_metadata_url: None,
            token_keys: Vec::new(),
            connect_ttl: default_connect_ttl(),
        }
    }
}

impl OAuthSettings {
    /// Whether nothing is set (a normalized config leaves it out).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

fn default_client_name() -> String {
    "toolgate".into()
}

fn default_connect_ttl() -> Duration {
    Duration::from_secs(600)
}

/// How client credentials are presented at an authorization server's token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenEndpointAuth {
    None,
    ClientSecretBasic,
    ClientSecretPost,
}

/// The kind of token a caller brought, as a token exchange names it (RFC 8693 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubjectTokenType {
    AccessToken,
    Jwt,
    IdToken,
}

impl SubjectTokenType {
    /// The token type URI.
    pub fn uri(self) -> &'static str {
        match self {
            SubjectTokenType::AccessToken => toolgate_adapters::oauth::ACCESS_TOKEN_TYPE,
            SubjectTokenType::Jwt => "urn:ietf:params:oauth:token-type:jwt",
            SubjectTokenType::IdToken => "urn:ietf:params:oauth:token-type:id_token",
        }
    }
}

/// The algorithm of a `private_key_jwt` client assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SigningAlgorithm {
    ES256,
    RS256,
}

impl TokenEndpointAuth {
    /// The same method as the OAuth client names it.
    pub fn method(self) -> toolgate_adapters::oauth::TokenAuthMethod {
        use toolgate_adapters::oauth::TokenAuthMethod as M;
        match self {
            TokenEndpointAuth::None => M::None,
            TokenEndpointAuth::ClientSecretBasic => M::ClientSecretBasic,
            TokenEndpointAuth::ClientSecretPost => M::ClientSecretPost,
        }
    }
}

/// An upstream's OAuth client settings (`credentials: oauth` or `client_credentials`).
/// With `oauth` all are optional: by default the gateway discovers an MCP upstream's
/// authorization server from its 401 answer, an OpenAPI upstream's from its spec's
/// `authorizationCode` flow, and registers itself. With `client_credentials`,
/// `client_id` and a `client_secret` or `private_key` are needed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuth {
    /// A client registered beforehand with the upstream's authorization server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Its secret (with `client_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// How the pre-registered client authenticates at the token endpoint. Unset:
    /// `client_secret_basic` with a secret, `none` without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_method: Option<TokenEndpointAuth>,
    /// With `credentials: client_credentials`: the client's private key (PEM; PKCS#8
    /// for EC keys), to authenticate with a signed assertion (`private_key_jwt`, RFC
    /// 7523) instead of a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<Secret>,
    /// The private key's algorithm: `ES256` (default) or `RS256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_algorithm: Option<SigningAlgorithm>,
    /// The private key's id (`kid`), when the authorization server needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Scopes to ask for when the upstream's challenge and metadata name none; for an
    /// OpenAPI upstream, instead of those its operations require.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// An OpenAPI upstream's security scheme users connect through (an `oauth2`
    /// scheme with an `authorizationCode` flow; Swagger 2.0 `accessCode`). Unset: the
    /// one its operations require, else the first the spec defines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// With `credentials: token_exchange`: the issuer of the callers' tokens (the
    /// enterprise identity provider), whose metadata names the token endpoint the
    /// exchange (RFC 8693) goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// With `credentials: token_exchange`: the `audience` to ask for, when the issuer
    /// knows the upstream by a name rather than by its URL (the `resource`, always
    /// sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// With `credentials: token_exchange`: what the caller's token is, as the issuer
    /// is told (`access_token`, the default; `jwt`; `id_token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_token_type: Option<SubjectTokenType>,
    /// Let the metadata, authorization and token URLs the upstream's metadata names
    /// point at private, loopback or link-local addresses (off: refused, like any URL
    /// a document names).
    #[serde(default)]
    pub allow_private_networks: bool,
}
