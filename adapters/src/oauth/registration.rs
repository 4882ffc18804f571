//! Obtaining a client at an authorization server, in the MCP spec's order of
//! preference: a pre-registered client when the operator configured one; a Client ID
//! Metadata Document (the gateway's own URL as its `client_id`) when the server
//! supports them and the gateway publishes one; else RFC 7591 dynamic registration.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use url::Url;

use super::http::{FetchError, post_json, short, shown, shown_str};
use super::{Discovery, OAuthClient, OAuthError};
use crate::Secret;

/// How a client authenticates at the token endpoint (RFC 7591 §2
/// `token_endpoint_auth_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuthMethod {
    /// A public client: `client_id` in the body, nothing else.
    None,
    /// `Authorization: Basic` with the client id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the body.
    ClientSecretPost,
    /// A JWT signed with the client's private key (RFC 7523 §2.2).
    PrivateKeyJwt,
}

impl TokenAuthMethod {
    /// The RFC 7591 name.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenAuthMethod::None => "none",
            TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
            TokenAuthMethod::ClientSecretPost => "client_secret_post",
            TokenAuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method an RFC 7591 name stands for, when it is one of these.
    pub fn from_name(name: &str) -> Option<TokenAuthMethod> {
        [
            TokenAuthMethod::None,
            TokenAuthMethod::ClientSecretBasic,
            TokenAuthMethod::ClientSecretPost,
            TokenAuthMethod::PrivateKeyJwt,
        ]
        .into_iter()
        .find(|m| m.as_str() == name)
    }

    fn needs_secret(self) -> bool {
        matches!(
            self,
            TokenAuthMethod::ClientSecretBasic | TokenAuthMethod::ClientSecretPost
        )
    }
}

/// The signature algorithm of a private_key_jwt client assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SigningAlg {
    RS256,
    ES256,
}

/// A private key the client signs its assertions with (RFC 7523): PEM (PKCS#8 for EC
/// keys; PKCS#1 or PKCS#8 for RSA), its algorithm, and the key id the server knows it by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKey {
    pub pem: Secret,
    pub alg: SigningAlg,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
}

/// A client the operator registered at the authorization server beforehand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreRegistered {
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<Secret>,
    /// When unset: private_key_jwt with a signing key, a secret method the server
    /// supports with a secret (client_secret_basic first), none without either.
    #[serde(default)]
    pub auth_method: Option<TokenAuthMethod>,
    #[serde(default)]
    pub signing_key: Option<SigningKey>,
}

/// Who the gateway is to authorization servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientIdentity {
    pub client_name: String,
    /// The gateway's OAuth callback.
    pub redirect_uri: String,
    /// The https URL at which the gateway serves its Client ID Metadata Document
    /// ([`client_metadata_document`]), when it publishes one.
    #[serde(default)]
    pub metadata_url: Option<String>,
    #[serde(default)]
    pub preregistered: Option<PreRegistered>,
}

/// How a client was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    PreRegistered,
    MetadataDocument,
    Dynamic,
}

/// A client at one authorization server. It is bound to that server's issuer
/// (SEP-2352): never present it to another one (see [`RegisteredClient::is_for`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredClient {
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<Secret>,
    pub auth_method: TokenAuthMethod,
    /// The issuer of the authorization server this client belongs to.
    pub issuer: String,
    pub registration: Registration,
    /// For private_key_jwt.
    #[serde(default)]
    pub signing_key: Option<SigningKey>,
    /// RFC 7591 `client_secret_expires_at` (seconds since the epoch; 0: never), when the
    /// server said: register again after it.
    #[serde(default)]
    pub client_secret_expires_at: Option<u64>,
}

impl RegisteredClient {
    /// Whether this client belongs to the authorization server `discovery` found. After
    /// a resource moved to another authorization server, a client of the previous one
    /// must not be used (SEP-2352): register again.
    pub fn is_for(&self, discovery: &Discovery) -> bool {
        self.issuer == discovery.issuer
    }

    /// Refuses a client of another authorization server.
    pub(super) fn check_for(&self, discovery: &Discovery) -> Result<(), OAuthError> {
        if self.is_for(discovery) {
            return Ok(());
        }
        Err(OAuthError::Registration(format!(
            "client '{}' was registered with '{}', but the resource's authorization server \
             is now '{}': register again there",
            short(&self.client_id),
            shown_str(&self.issuer),
            shown_str(&discovery.issuer)
        )))
    }
}

/// `web` for an https callback on a public host, `native` for a loopback or plain-http
/// one (OpenID Connect Registration §2 `application_type`, which SEP-837 asks for).
fn application_type(redirect_uri: &str) -> &'static str {
    let Ok(url) = Url::parse(redirect_uri) else {
        return "web";
    };
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => {
            d.eq_ignore_ascii_case("localhost") || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => true,
    };
    if loopback || url.scheme() != "https" {
        "native"
    } else {
        "web"
    }
}

/// The grant types the gateway registers: the authorization code, and refresh tokens
/// (SEP-2207) unless the server rules them out.
fn grant_types(discovery: Option<&Discovery>) -> Vec<&'static str> {
    let refresh = discovery
        .and_then(|d| d.grant_types_supported.as_ref())
        .is_none_or(|g| g.iter().any(|g| g == "refresh_token"));
    if refresh {
        vec!["authorization_code", "refresh_token"]
    } else {
        vec!["authorization_code"]
    }
}

/// A Client ID Metadata Document URL as the draft requires it: https, with a path.
fn metadata_url(identity: &ClientIdentity) -> Result<Option<&str>, OAuthError> {
    let Some(url) = identity.metadata_url.as_deref() else {
        return Ok(None);
    };
    match Url::parse(url) {
        Ok(u) if u.scheme() == "https" && u.path() != "/" && u.fragment().is_none() => {
            Ok(Some(url))
        }
        _ => Err(OAuthError::Config(format!(
            "the client metadata URL '{}' must be an https URL with a path",
            shown_str(url)
        ))),
    }
}

/// The gateway's Client ID Metadata Document for `identity`, to be served at its
/// `metadata_url` (which is its `client_id`): a public client using the authorization
/// code with PKCE and refresh tokens.
pub fn client_metadata_document(identity: &ClientIdentity) -> Result<Value, OAuthError> {
    let url = metadata_url(identity)?.ok_or_else(|| {
        OAuthError::Config("a Client ID Metadata Document needs a metadata_url".into())
    })?;
    Ok(json!({
        "client_id": url,
        "client_name": identity.client_name,
        "redirect_uris": [identity.redirect_uri],
        "grant_types": grant_types(None),
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": application_type(&identity.redirect_uri),
    }))
}

/// Whether the server lists `method` (or lists nothing, in which case RFC 8414 §2 says
/// client_secret_basic).
fn supports(discovery: &Discovery, method: TokenAuthMethod) -> bool {
    match &discovery.token_endpoint_auth_methods_supported {
        Some(list) => list.iter().any(|m| m == method.as_str()),
        None => method == TokenAuthMethod::ClientSecretBasic,
    }
}

/// The method a client with a secret uses: client_secret_basic unless the server only
/// takes client_secret_post, or only public clients.
pub(super) fn secret_method(discovery: &Discovery) -> TokenAuthMethod {
    if supports(discovery, TokenAuthMethod::ClientSecretBasic) {
        TokenAuthMethod::ClientSecretBasic
    } else if supports(discovery, TokenAuthMethod::ClientSecretPost) {
        TokenAuthMethod::ClientSecretPost
    } else if supports(discovery, TokenAuthMethod::None) {
        TokenAuthMethod::None
    } else {
        TokenAuthMethod::ClientSecretBasic
    }
}

/// A pre-registered client's method, checked to have what it needs.
fn preregistered(
    pre: &PreRegistered,
    discovery: &Discovery,
) -> Result<RegisteredClient, OAuthError> {
    let method = match pre.auth_method {
        Some(m) => m,
        None if pre.signing_key.is_some() => TokenAuthMethod::PrivateKeyJwt,
        None if pre.client_secret.is_some() => secret_method(discovery),
        None => TokenAuthMethod::None,
    };
    if method.needs_secret() && pre.client_secret.is_none() {
        return Err(OAuthError::Config(format!(
            "the pre-registered client '{}' uses {} but has no client_secret",
            short(&pre.client_id),
            method.as_str()
        )));
    }
    if method == TokenAuthMethod::PrivateKeyJwt && pre.signing_key.is_none() {
        return Err(OAuthError::Config(format!(
            "the pre-registered client '{}' uses private_key_jwt but has no signing key",
            short(&pre.client_id)
        )));
    }
    Ok(RegisteredClient {
        client_id: pre.client_id.clone(),
        client_secret: pre.client_secret.clone().filter(|_| method.needs_secret()),
        auth_method: method,
        issuer: discovery.issuer.clone(),
        registration: Registration::PreRegistered,
        signing_key: pre
            .signing_key
            .clone()
            .filter(|_| method == TokenAuthMethod::PrivateKeyJwt),
        client_secret_expires_at: None,
    })
}

/// RFC 7591 §3.2.1, the part used here.
#[derive(Deserialize)]
struct RegistrationAnswer {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: Option<String>,
    client_secret_expires_at: Option<u64>,
}

impl OAuthClient {
    /// A client at the authorization server `discovery` found: the pre-registered one
    /// when `identity` has one; else the Client ID Metadata Document when the server
    /// advertises `client_id_metadata_document_supported`, takes public clients and
    /// `identity` has a `metadata_url`; else RFC 7591 dynamic registration. The error
    /// says why none was possible.
    pub async fn register(
        &self,
        discovery: &Discovery,
        identity: &ClientIdentity,
    ) -> Result<RegisteredClient, OAuthError> {
        if let Some(pre) = &identity.preregistered {
            return preregistered(pre, discovery);
        }
        let cimd_public = discovery
            .token_endpoint_auth_methods_supported
            .as_ref()
            .is_none_or(|l| l.iter().any(|m| m == "none"));
        if discovery.client_id_metadata_document_supported
            && cimd_public
            && let Some(url) = metadata_url(identity)?
        {
            return Ok(RegisteredClient {
                client_id: url.to_owned(),
                client_secret: None,
                auth_method: TokenAuthMethod::None,
                issuer: discovery.issuer.clone(),
                registration: Registration::MetadataDocument,
                signing_key: None,
                client_secret_expires_at: None,
            });
        }
        let Some(endpoint) = discovery.registration_endpoint.as_deref() else {
            return Err(OAuthError::Registration(format!(
                "the authorization server '{}' offers no dynamic registration{}, and no \
                 client is pre-registered for it",
                shown_str(&discovery.issuer),
                if discovery.client_id_metadata_document_supported {
                    " (it takes Client ID Metadata Documents, but the gateway publishes none)"
                } else {
                    " and no Client ID Metadata Documents"
                }
            )));
        };
        self.register_dynamically(discovery, identity, endpoint)
            .await
    }

    async fn register_dynamically(
        &self,
        discovery: &Discovery,
        identity: &ClientIdentity,
        endpoint: &str,
    ) -> Result<RegisteredClient, OAuthError> {
        let url = Url::parse(endpoint).map_err(|_| {
            OAuthError::Registration(format!(
                "the registration endpoint '{}' is not a URL",
                shown_str(endpoint)
            ))
        })?;
        // The gateway is a confidential client: a secret when the server gives one
        // (client_secret_basic, else client_secret_post), a public client when that is
        // all the server takes. private_key_jwt would need published keys.
        let requested = [
            TokenAuthMethod::ClientSecretBasic,
            TokenAuthMethod::ClientSecretPost,
            TokenAuthMethod::None,
        ]
        .into_iter()
        .find(|m| supports(discovery, *m))
        .ok_or_else(|| {
            OAuthError::Registration(format!(
                "the authorization server '{}' takes none of the token endpoint \
                 authentication methods a registered client can use (it lists {:?})",
                shown_str(&discovery.issuer),
                discovery
                    .token_endpoint_auth_methods_supported
                    .as_deref()
                    .unwrap_or_default()
            ))
        })?;
        let body = json!({
            "client_name": identity.client_name,
            "redirect_uris": [identity.redirect_uri],
            "grant_types": grant_types(Some(discovery)),
            "response_types": ["code"],
            "token_endpoint_auth_method": requested.as_str(),
            "application_type": application_type(&identity.redirect_uri),
        });
        tracing::debug!(url = %shown(&url), method = requested.as_str(), "registering an OAuth client");
        let answer = match post_json(&self.guard, &url, &body, self.timeout).await {
            Ok(answer) => answer,
            Err(FetchError::Status { status, body }) => {
                let text = |k: &str| body.as_ref().and_then(|b| b.get(k)).and_then(Value::as_str);
                let why = match (text("error"), text("error_description")) {
                    (Some(e), Some(d)) => format!("{}: {}", short(e), short(d)),
                    (Some(e), None) => short(e),
                    _ => format!("HTTP {status}"),
                };
                return Err(OAuthError::Registration(format!(
                    "{} refused the registration: {why}",
                    shown(&url)
                )));
            }
            Err(FetchError::Unreachable(e)) => {
                return Err(OAuthError::Transport(format!("POST {}: {e}", shown(&url))));
            }
            Err(e) => {
                return Err(OAuthError::Registration(format!(
                    "POST {}: {}",
                    shown(&url),
                    e.describe()
                )));
            }
        };
        let answer: RegistrationAnswer = serde_json::from_value(answer).map_err(|_| {
            OAuthError::Registration(format!(
                "{} answered the registration without a valid client_id",
                shown(&url)
            ))
        })?;
        let secret = answer.client_secret.filter(|s| !s.is_empty()).map(Secret);
        // The method the server registered, when it says; else the one asked for, unless
        // that needs a secret the server did not give (then it made a public client).
        let method = match answer
            .token_endpoint_auth_method
            .as_deref()
            .and_then(TokenAuthMethod::from_name)
        {
            Some(m) => m,
            None if requested.needs_secret() && secret.is_none() => TokenAuthMethod::None,
            None => requested,
        };
        if method == TokenAuthMethod::PrivateKeyJwt || (method.needs_secret() && secret.is_none()) {
            return Err(OAuthError::Registration(format!(
                "{} registered the client for {} without what it needs",
                shown(&url),
                method.as_str()
            )));
        }
        Ok(RegisteredClient {
            client_id: answer.client_id,
            client_secret: secret.filter(|_| method.needs_secret()),
            auth_method: method,
            issuer: discovery.issuer.clone(),
            registration: Registration::Dynamic,
            signing_key: None,
            client_secret_expires_at: answer.client_secret_expires_at,
        })
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn application_types() {
        assert_eq!(
            application_type("https://gw.example.com/oauth/callback"),
            "web"
        );
        assert_eq!(application_type("http://localhost:3000/callback"), "native");
        assert_eq!(application_type("https://127.0.0.1/cb"), "native");
        assert_eq!(application_type("http://gw.example.com/cb"), "native");
    }

    #[test]
    fn the_metadata_document() {
        let mut identity = ClientIdentity {
            client_name: "toolgate".into(),
            redirect_uri: "https://gw.example.com/oauth/callback".into(),
            metadata_url: Some("https://gw.example.com/oauth/client.json".into()),
            preregistered: None,
        };
        let doc = client_metadata_document(&identity).unwrap();
        assert_eq!(doc["client_id"], "https://gw.example.com/oauth/client.json");
        assert_eq!(
            doc["redirect_uris"],
            json!(["https://gw.example.com/oauth/callback"])
        );
        assert_eq!(
            doc["grant_types"],
            json!(["authorization_code", "refresh_token"])
        );
        assert_eq!(doc["token_endpoint_auth_method"], "none");
        assert_eq!(doc["application_type"], "web");
        identity.metadata_url = Some("http://gw.example.com/oauth/client.json".into());
        assert!(matches!(
            client_metadata_document(&identity),
            Err(OAuthError::Config(_))
        ));
        identity.metadata_url = Some("https://gw.example.com/".into());
        assert!(client_metadata_document(&identity).is_err());
        identity.metadata_url = None;
        assert!(client_metadata_document(&identity).is_err());
    }

    #[test]
    fn method_names_round_trip() {
        for m in [
            TokenAuthMethod::None,
            TokenAuthMethod::ClientSecretBasic,
            TokenAuthMethod::ClientSecretPost,
            TokenAuthMethod::PrivateKeyJwt,
        ] {
            assert_eq!(TokenAuthMethod::from_name(m.as_str()), Some(m));
            assert_eq!(
                serde_json::to_value(m).unwrap(),
                Value::String(m.as_str().into())
            );
        }
        assert_eq!(TokenAuthMethod::from_name("tls_client_auth"), None);
    }
}
