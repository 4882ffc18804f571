//! The authorization request and the token endpoint: authorization URL (PKCE S256,
//! RFC 8707 `resource`, scope), code exchange, refresh, client credentials and RFC 7009
//! revocation. The `oauth2` crate builds the requests; they go out through the guard
//! (`super::http::send_form`), with the client authenticated as it was registered.

use std::borrow::Cow;
use std::time::Duration;

use base64::Engine;
use futures::future::BoxFuture;
use oauth2::basic::{BasicClient, BasicTokenResponse};
use oauth2::{
    AccessToken, AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken,
    EndpointNotSet, EndpointSet, ErrorResponseType, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RefreshToken, RequestTokenError, RevocationUrl, Scope, StandardErrorResponse,
    StandardRevocableToken, TokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};
use url::Url;

use super::assertion::{JWT_BEARER, client_assertion};
use super::http::{HttpError, send_form, short, shown_str};
use super::registration::secret_method;
use super::{Discovery, OAuthClient, OAuthError, RegisteredClient, SigningKey, TokenAuthMethod};
use crate::Secret;
use crate::openapi::guard::Guard;

/// An authorization request to send the user's browser to, and what its callback
/// needs: the `state` to match (256 random bits) and the PKCE verifier to exchange the
/// code with. Keep them server-side, bound to the user who started it.
#[derive(Debug, Clone)]
pub struct AuthorizationRequest {
    pub url: String,
    pub state: String,
    pub pkce_verifier: Secret,
    /// The scope asked for: what was granted when the token answer names none
    /// (RFC 6749 §5.1), and so the base of a later step-up ([`Discovery::step_up_scope`]).
    pub scope: Option<String>,
}

/// What a token endpoint granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSet {
    pub access_token: Secret,
    #[serde(default)]
    pub refresh_token: Option<Secret>,
    /// `Bearer` (written so whatever case the server used), or the server's own type.
    pub token_type: String,
    /// Seconds from when the answer came.
    #[serde(default)]
    pub expires_in: Option<u64>,
    /// The scope granted: the answer's; when it names none, the scope requested
    /// (RFC 6749 §5.1) for a refresh or client credentials, and `None` for a code
    /// exchange (the scope is then [`AuthorizationRequest::scope`]).
    #[serde(default)]
    pub scope: Option<String>,
}

/// A client that obtains tokens for itself (the client credentials grant, SEP-1046):
/// with a secret, or with a private key (private_key_jwt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ServiceClient {
    Secret {
        client_id: String,
        client_secret: Secret,
        /// client_secret_basic or client_secret_post; when unset, what the server takes
        /// (client_secret_basic first).
        #[serde(default)]
        auth_method: Option<TokenAuthMethod>,
    },
    PrivateKeyJwt {
        client_id: String,
        key: SigningKey,
    },
}

/// Which kind of token is being revoked (RFC 7009 `token_type_hint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenHint {
    AccessToken,
    RefreshToken,
}

/// One part of HTTP Basic client credentials.
///
/// RFC 6749 §2.3.1 has the id and secret form-urlencoded before Basic encoding, and
/// the `oauth2` crate does so. The MCP conformance suite's authorization server (like
/// the TypeScript SDK, and many servers) takes them raw: it base64-decodes and splits
/// at ':' (`pre-registration.ts`, `client-credentials.ts`), so an encoded secret with
/// `/` or `=` in it (DCR secrets often are base64) would not match there. Servers that
/// do decode only change `%XX` and `+`. So only what a decoding server would misread
/// is encoded — `%`, `+`, and `:` in the id (where it would end the user-id) — and the
/// rest stays raw: both kinds of server read such credentials the same.
fn basic_part(s: &str, id: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '+' => out.push_str("%2B"),
            ':' if id => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    out
}

/// The `Authorization` value of client_secret_basic.
fn basic_credentials(client_id: &str, secret: &str) -> http::HeaderValue {
    let raw = format!(
        "{}:{}",
        basic_part(client_id, true),
        basic_part(secret, false)
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
    let mut value = http::HeaderValue::from_str(&format!("Basic {b64}"))
        .expect("base64 is a valid header value");
    value.set_sensitive(true);
    value
}

/// The RFC 8707 `resource` parameter, when the server was found through a resource's
/// metadata (none for one known by its endpoints alone).
fn resource(discovery: &Discovery) -> Vec<(&'static str, String)> {
    if discovery.resource.is_empty() {
        Vec::new()
    } else {
        vec![("resource", discovery.resource.clone())]
    }
}

/// How one request authenticates the client, in the crate's terms and ours.
pub(super) struct ClientAuth {
    client_id: String,
    auth_type: AuthType,
    /// Given to the crate: with `BasicAuth` it keeps the id and secret out of the body
    /// (the header is replaced by [`basic_credentials`]); with `RequestBody` it puts
    /// them in it (client_secret_post).
    secret: Option<ClientSecret>,
    pub(super) header: Option<http::HeaderValue>,
    /// private_key_jwt: `client_assertion`.
    assertion: Option<String>,
}

impl ClientAuth {
    /// `none` sends the client id in the body and nothing else, as RFC 6749 §3.2.1 and
    /// OAuth 2.1 ask of a public client (the crate does so when it has no secret).
    fn new(
        client_id: &str,
        method: TokenAuthMethod,
        secret: Option<&Secret>,
        key: Option<&SigningKey>,
        discovery: &Discovery,
    ) -> Result<ClientAuth, OAuthError> {
        let missing = |what: &str| {
            OAuthError::Config(format!(
                "client '{}' uses {} but has no {what}",
                short(client_id),
                method.as_str()
            ))
        };
        let mut auth = ClientAuth {
            client_id: client_id.to_owned(),
            auth_type: AuthType::RequestBody,
            secret: None,
            header: None,
            assertion: None,
        };
        match method {
            TokenAuthMethod::None => {}
            TokenAuthMethod::ClientSecretBasic => {
                let secret = secret.ok_or_else(|| missing("client_secret"))?;
                auth.auth_type = AuthType::BasicAuth;
                auth.secret = Some(ClientSecret::new(secret.expose().to_owned()));
                auth.header = Some(basic_credentials(client_id, secret.expose()));
            }
            TokenAuthMethod::ClientSecretPost => {
                let secret = secret.ok_or_else(|| missing("client_secret"))?;
                auth.secret = Some(ClientSecret::new(secret.expose().to_owned()));
            }
            TokenAuthMethod::PrivateKeyJwt => {
                let key = key.ok_or_else(|| missing("signing key"))?;
                auth.assertion = Some(client_assertion(client_id, key, discovery)?);
            }
        }
        Ok(auth)
    }

    fn of(client: &RegisteredClient, discovery: &Discovery) -> Result<ClientAuth, OAuthError> {
        client.check_for(discovery)?;
        ClientAuth::new(
            &client.client_id,
            client.auth_method,
            client.client_secret.as_ref(),
            client.signing_key.as_ref(),
            discovery,
        )
    }

    /// How a client of the gateway's own (a service identity, or the token-exchange
    /// client) authenticates: a secret (`client_secret_basic` unless the server only
    /// takes `client_secret_post`, or as configured), or a signed assertion.
    pub(super) fn of_service(
        client: &ServiceClient,
        discovery: &Discovery,
    ) -> Result<ClientAuth, OAuthError> {
        Ok(match client {
            ServiceClient::Secret {
                client_id,
                client_secret,
                auth_method,
            } => {
                let method = match auth_method {
                    Some(
                        m
                        @ (TokenAuthMethod::ClientSecretBasic | TokenAuthMethod::ClientSecretPost),
                    ) => *m,
                    Some(other) => {
                        return Err(OAuthError::Config(format!(
                            "a client with a secret authenticates with client_secret_basic \
                         or client_secret_post, not {}",
                            other.as_str()
                        )));
                    }
                    None => match secret_method(discovery) {
                        TokenAuthMethod::ClientSecretPost => TokenAuthMethod::ClientSecretPost,
                        _ => TokenAuthMethod::ClientSecretBasic,
                    },
                };
                ClientAuth::new(client_id, method, Some(client_secret), None, discovery)?
            }
            ServiceClient::PrivateKeyJwt { client_id, key } => ClientAuth::new(
                client_id,
                TokenAuthMethod::PrivateKeyJwt,
                None,
                Some(key),
                discovery,
            )?,
        })
    }

    /// The client's own parameters of a form this module writes itself (the crate
    /// adds them to the forms it writes): the id and, for client_secret_post, the
    /// secret; a signed assertion's parameters. client_secret_basic sends neither.
    pub(super) fn form_params(&self) -> Vec<(&'static str, String)> {
        let mut params = Vec::new();
        if matches!(self.auth_type, AuthType::RequestBody) {
            params.push(("client_id", self.client_id.clone()));
            if let Some(secret) = &self.secret {
                params.push(("client_secret", secret.secret().clone()));
            }
        }
        params.extend(self.extra());
        params
    }

    /// The texts no error may repeat (a server's error description might).
    pub(super) fn secrets(&self) -> Vec<String> {
        self.secret
            .iter()
            .map(|s| s.secret().clone())
            .chain(self.assertion.clone())
            .collect()
    }

    /// The extra parameters of private_key_jwt.
    fn extra(&self) -> Vec<(&'static str, String)> {
        match &self.assertion {
            Some(a) => vec![
                ("client_assertion_type", JWT_BEARER.to_owned()),
                ("client_assertion", a.clone()),
            ],
            None => Vec::new(),
        }
    }

    /// The extra parameters of a token request: the resource, and those of
    /// private_key_jwt.
    fn token_extra(&self, discovery: &Discovery) -> Vec<(&'static str, String)> {
        let mut extra = resource(discovery);
        extra.extend(self.extra());
        extra
    }

    /// A crate client for the token endpoint, authenticating as this.
    fn token_client(
        &self,
        endpoint: &str,
    ) -> Result<
        BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>,
        OAuthError,
    > {
        let url = TokenUrl::new(endpoint.to_owned()).map_err(|_| {
            OAuthError::Discovery(format!(
                "the token endpoint '{}' is not a URL",
                shown_str(endpoint)
            ))
        })?;
        let mut client = BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_auth_type(self.auth_type.clone())
            .set_token_uri(url);
        if let Some(secret) = &self.secret {
            client = client.set_client_secret(secret.clone());
        }
        Ok(client)
    }
}

/// Sends the crate's requests through the guard.
#[derive(Clone)]
pub(super) struct Sender {
    guard: Guard,
    timeout: Duration,
    authorization: Option<http::HeaderValue>,
    /// Where to send instead of the URL the crate was given (see [`OAuthClient::revoke`]).
    actual_url: Option<Url>,
}

impl Sender {
    /// The crate's HTTP client: a closure returning a `Send` future, so that the
    /// futures of this module are `Send` too.
    pub(super) fn client(
        &self,
    ) -> impl Fn(oauth2::HttpRequest) -> BoxFuture<'static, Result<oauth2::HttpResponse, HttpError>>
    + Send
    + Sync
    + use<> {
        let sender = self.clone();
        move |mut request| {
            let sender = sender.clone();
            Box::pin(async move {
                if let Some(url) = &sender.actual_url {
                    *request.uri_mut() = url
                        .as_str()
                        .parse()
                        .map_err(|_| HttpError("the endpoint URL is not valid".into()))?;
                }
                send_form(&sender.guard, request, sender.authorization, sender.timeout).await
            })
        }
    }
}

/// Replaces every secret in a server's text with `***`, and shortens it.
pub(super) fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(s.as_str(), "***");
    }
    short(&out)
}

/// What a failed token or revocation request means to the caller.
fn request_error<T>(
    error: RequestTokenError<HttpError, StandardErrorResponse<T>>,
    endpoint: &str,
    secrets: &[String],
) -> OAuthError
where
    T: ErrorResponseType + AsRef<str> + std::fmt::Display + 'static,
{
    match error {
        RequestTokenError::ServerResponse(answer) => OAuthError::Refused {
            error: scrub(answer.error().as_ref(), secrets),
            description: answer.error_description().map(|d| scrub(d, secrets)),
        },
        RequestTokenError::Request(e) => OAuthError::Transport(e.0),
        // Never the body: it may hold a token. Where it went wrong is enough.
        RequestTokenError::Parse(e, _) => OAuthError::Transport(format!(
            "{}: the answer is not a valid token response (at '{}')",
            shown_str(endpoint),
            e.path()
        )),
        RequestTokenError::Other(e) => {
            OAuthError::Transport(format!("{}: {}", shown_str(endpoint), scrub(&e, secrets)))
        }
    }
}

/// A token answer as the caller keeps it.
fn token_set(
    answer: &BasicTokenResponse,
    requested_scope: Option<&str>,
    previous_refresh: Option<&Secret>,
) -> TokenSet {
    let token_type = answer.token_type().as_ref();
    TokenSet {
        access_token: Secret(answer.access_token().secret().clone()),
        refresh_token: answer
            .refresh_token()
            .map(|t| Secret(t.secret().clone()))
            .or_else(|| previous_refresh.cloned()),
        token_type: if token_type.eq_ignore_ascii_case("bearer") {
            "Bearer".to_owned()
        } else {
            token_type.to_owned()
        },
        expires_in: answer.expires_in().map(|d| d.as_secs()),
        scope: answer
            .scopes()
            .map(|s| s.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
            .filter(|s| !s.is_empty())
            .or_else(|| requested_scope.map(str::to_owned)),
    }
}

fn scopes(scope: Option<&str>) -> Vec<Scope> {
    scope
        .into_iter()
        .flat_map(str::split_ascii_whitespace)
        .map(|s| Scope::new(s.to_owned()))
        .collect()
}

/// Whether `scope` asks for a refresh token the OpenID Connect way.
fn asks_offline_access(scope: Option<&str>) -> bool {
    scope.is_some_and(|s| s.split_ascii_whitespace().any(|s| s == "offline_access"))
}

/// Whether `url`'s host is this machine.
fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

impl OAuthClient {
    pub(super) fn sender(&self, authorization: Option<http::HeaderValue>) -> Sender {
        Sender {
            guard: self.guard.clone(),
            timeout: self.timeout,
            authorization,
            actual_url: None,
        }
    }

    /// The authorization request for `client`: PKCE S256 always, the resource (RFC
    /// 8707) always, `scope` when given (see [`Discovery::scope_for`]), a fresh random
    /// `state`. Refused when the server does not support PKCE S256 (the MCP spec: the
    /// client MUST refuse to proceed), has no authorization endpoint, or is not the
    /// one `client` belongs to.
    pub fn authorization_request(
        &self,
        discovery: &Discovery,
        client: &RegisteredClient,
        redirect_uri: &str,
        scope: Option<&str>,
    ) -> Result<AuthorizationRequest, OAuthError> {
        client.check_for(discovery)?;
        if !discovery.supports_pkce_s256() {
            return Err(OAuthError::Discovery(format!(
                "the authorization server '{}' does not advertise PKCE with S256 \
                 (code_challenge_methods_supported is {:?}): refusing to authorize",
                shown_str(&discovery.issuer),
                discovery.code_challenge_methods_supported
            )));
        }
        let endpoint = discovery.authorization_endpoint.as_deref().ok_or_else(|| {
            OAuthError::Discovery(format!(
                "the authorization server '{}' has no authorization_endpoint",
                shown_str(&discovery.issuer)
            ))
        })?;
        let auth_url = AuthUrl::new(endpoint.to_owned()).map_err(|_| {
            OAuthError::Discovery(format!(
                "the authorization endpoint '{}' is not a URL",
                shown_str(endpoint)
            ))
        })?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned()).map_err(|_| {
            OAuthError::Config(format!(
                "the redirect URI '{}' is not a URL",
                shown_str(redirect_uri)
            ))
        })?;
        let oauth = BasicClient::new(ClientId::new(client.client_id.clone()))
            .set_auth_uri(auth_url)
            .set_redirect_uri(redirect);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = oauth
            .authorize_url(|| CsrfToken::new_random_len(32))
            .set_pkce_challenge(challenge)
            .add_scopes(scopes(scope));
        for (name, value) in resource(discovery) {
            request = request.add_extra_param(name, value);
        }
        if asks_offline_access(scope) {
            // OpenID Connect Core §11: an OpenID provider ignores `offline_access`
            // unless the request also has `prompt=consent` (oidc-provider drops it, and
            // issues no refresh token); a plain OAuth server ignores the parameter.
            request = request.add_extra_param("prompt", "consent");
        }
        let (url, state) = request.url();
        Ok(AuthorizationRequest {
            url: url.to_string(),
            state: state.into_secret(),
            pkce_verifier: Secret(verifier.into_secret()),
            scope: scope
                .map(|s| s.split_ascii_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|s| !s.is_empty()),
        })
    }

    /// Exchanges an authorization code (after [`Discovery::check_issuer`] accepted the
    /// response and its `state` matched) for tokens, with the request's PKCE verifier,
    /// redirect URI and resource. `scope` in the result is the one granted.
    pub async fn exchange_code(
        &self,
        discovery: &Discovery,
        client: &RegisteredClient,
        code: &str,
        verifier: &Secret,
        redirect_uri: &str,
    ) -> Result<TokenSet, OAuthError> {
        let auth = ClientAuth::of(client, discovery)?;
        let redirect = RedirectUrl::new(redirect_uri.to_owned()).map_err(|_| {
            OAuthError::Config(format!(
                "the redirect URI '{}' is not a URL",
                shown_str(redirect_uri)
            ))
        })?;
        let oauth = auth.token_client(&discovery.token_endpoint)?;
        let extra = auth.token_extra(discovery);
        let mut request = oauth
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.expose().to_owned()))
            .set_redirect_uri(Cow::Owned(redirect));
        for (name, value) in &extra {
            request = request.add_extra_param(*name, value.as_str());
        }
        let client_http = self.sender(auth.header.clone()).client();
        let mut secrets = auth.secrets();
        secrets.extend([code.to_owned(), verifier.expose().to_owned()]);
        let answer = request
            .request_async(&client_http)
            .await
            .map_err(|e| request_error(e, &discovery.token_endpoint, &secrets))?;
        Ok(token_set(&answer, None, None))
    }

    /// A new access token from a refresh token, for the same resource; the refresh token
    /// given stays in the result when the server issues no new one. `scope` narrows the
    /// grant when given. [`OAuthError::Refused`] (`invalid_grant`): the refresh token
    /// is no good any more; forget it and authorize again.
    pub async fn refresh(
        &self,
        discovery: &Discovery,
        client: &RegisteredClient,
        refresh_token: &Secret,
        scope: Option<&str>,
    ) -> Result<TokenSet, OAuthError> {
        let auth = ClientAuth::of(client, discovery)?;
        let endpoint = discovery
            .refresh_endpoint
            .as_deref()
            .unwrap_or(&discovery.token_endpoint);
        let oauth = auth.token_client(endpoint)?;
        let extra = auth.token_extra(discovery);
        let token = RefreshToken::new(refresh_token.expose().to_owned());
        let mut request = oauth
            .exchange_refresh_token(&token)
            .add_scopes(scopes(scope));
        for (name, value) in &extra {
            request = request.add_extra_param(*name, value.as_str());
        }
        let client_http = self.sender(auth.header.clone()).client();
        let mut secrets = auth.secrets();
        secrets.push(refresh_token.expose().to_owned());
        let answer = request
            .request_async(&client_http)
            .await
            .map_err(|e| request_error(e, endpoint, &secrets))?;
        Ok(token_set(&answer, scope, Some(refresh_token)))
    }

    /// A token for `client` itself (the client credentials grant), for the resource
    /// `discovery` found.
    pub async fn client_credentials(
        &self,
        discovery: &Discovery,
        client: &ServiceClient,
        scope: Option<&str>,
    ) -> Result<TokenSet, OAuthError> {
        let auth = ClientAuth::of_service(client, discovery)?;
        let oauth = auth.token_client(&discovery.token_endpoint)?;
        let extra = auth.token_extra(discovery);
        let mut request = oauth
            .exchange_client_credentials()
            .add_scopes(scopes(scope));
        for (name, value) in &extra {
            request = request.add_extra_param(*name, value.as_str());
        }
        let client_http = self.sender(auth.header.clone()).client();
        let answer = request
            .request_async(&client_http)
            .await
            .map_err(|e| request_error(e, &discovery.token_endpoint, &auth.secrets()))?;
        Ok(token_set(&answer, scope, None))
    }

    /// Revokes a token (RFC 7009), e.g. when a user disconnects; nothing to do (`Ok`)
    /// when the server has no revocation endpoint.
    pub async fn revoke(
        &self,
        discovery: &Discovery,
        client: &RegisteredClient,
        token: &Secret,
        hint: TokenHint,
    ) -> Result<(), OAuthError> {
        let Some(endpoint) = discovery.revocation_endpoint.as_deref() else {
            return Ok(());
        };
        let auth = ClientAuth::of(client, discovery)?;
        let actual = Url::parse(endpoint).map_err(|_| {
            OAuthError::Discovery(format!(
                "the revocation endpoint '{}' is not a URL",
                shown_str(endpoint)
            ))
        })?;
        // RFC 7009 §2 has clients refuse a revocation endpoint that is not https, and the
        // crate does. On a loopback host nothing crosses a network (as RFC 8252 §8.3 says
        // of loopback redirects): such an endpoint is handed to the crate as https and
        // the request sent to its real URL.
        let loopback_http = actual.scheme() == "http" && is_loopback(&actual);
        let mut given = actual.clone();
        if loopback_http {
            let port = actual.port_or_known_default();
            let _ = given.set_scheme("https");
            let _ = given.set_port(port);
        }
        let oauth = BasicClient::new(ClientId::new(auth.client_id.clone()))
            .set_auth_type(auth.auth_type.clone())
            .set_revocation_url(RevocationUrl::from_url(given));
        let oauth = match &auth.secret {
            Some(secret) => oauth.set_client_secret(secret.clone()),
            None => oauth,
        };
        let revocable = match hint {
            TokenHint::AccessToken => {
                StandardRevocableToken::AccessToken(AccessToken::new(token.expose().to_owned()))
            }
            TokenHint::RefreshToken => {
                StandardRevocableToken::RefreshToken(RefreshToken::new(token.expose().to_owned()))
            }
        };
        let extra = auth.extra();
        let mut request = oauth.revoke_token(revocable).map_err(|_| {
            OAuthError::Discovery(format!(
                "the revocation endpoint {} is not https (RFC 7009 §2)",
                shown_str(endpoint)
            ))
        })?;
        for (name, value) in &extra {
            request = request.add_extra_param(*name, value.as_str());
        }
        let mut sender = self.sender(auth.header.clone());
        if loopback_http {
            sender.actual_url = Some(actual);
        }
        let client_http = sender.client();
        let mut secrets = auth.secrets();
        secrets.push(token.expose().to_owned());
        request
            .request_async(&client_http)
            .await
            .map_err(|e| request_error(e, endpoint, &secrets))
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn decode(header: &http::HeaderValue) -> String {
        let b64 = header.to_str().unwrap().strip_prefix("Basic ").unwrap();
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn basic_credentials_stay_raw_but_for_what_a_decoder_misreads() {
        assert_eq!(
            decode(&basic_credentials("client", "s3cr/t=")),
            "client:s3cr/t="
        );
        assert_eq!(
            decode(&basic_credentials("a:b", "x+y%z:w")),
            "a%3Ab:x%2By%25z:w"
        );
        assert!(basic_credentials("c", "s").is_sensitive());
    }

    #[test]
    fn server_texts_lose_the_secrets_they_repeat() {
        let secrets = vec!["the-code-123".to_owned(), "ab".to_owned()];
        assert_eq!(
            scrub("code the-code-123 is\nused ab", &secrets),
            "code *** is used ab"
        );
    }
}
