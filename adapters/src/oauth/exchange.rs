//! RFC 8693 token exchange: a token the caller brought (validated by the gateway,
//! whose audience is the gateway) traded at the issuer that made it for one whose
//! audience is an upstream. The `oauth2` crate has no such grant, so the form is
//! written here; it goes out through the same guard, client authentication and
//! limits as every other token request.

use http::header::{ACCEPT, CONTENT_TYPE};
use serde::Deserialize;

use super::http::shown_str;
use super::token::{ClientAuth, scrub};
use super::{Discovery, OAuthClient, OAuthError, ServiceClient, TokenSet};
use crate::Secret;

/// The grant type (RFC 8693 §2.1).
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// An OAuth access token (RFC 8693 §3): what is asked for, and the default kind of
/// subject token.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// One exchange: whose token, and for what.
#[derive(Debug, Clone)]
pub struct ExchangeRequest<'a> {
    /// The token the caller brought.
    pub subject_token: &'a Secret,
    /// Its type URI (RFC 8693 §3), e.g. [`ACCESS_TOKEN_TYPE`] or
    /// `urn:ietf:params:oauth:token-type:jwt`.
    pub subject_token_type: &'a str,
    /// The RFC 8707 resource the new token is for (the upstream).
    pub resource: Option<&'a str>,
    /// The logical audience the issuer knows the upstream by, when it needs one.
    pub audience: Option<&'a str>,
    pub scope: Option<&'a str>,
}

/// The form of an exchange (built apart from the request's future, which must be
/// `Send`: the form builder is not).
fn exchange_form(request: &ExchangeRequest<'_>, auth: &ClientAuth) -> Vec<u8> {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", TOKEN_EXCHANGE_GRANT)
        .append_pair("subject_token", request.subject_token.expose())
        .append_pair("subject_token_type", request.subject_token_type)
        .append_pair("requested_token_type", ACCESS_TOKEN_TYPE);
    for (name, value) in [
        ("resource", request.resource),
        ("audience", request.audience),
        ("scope", request.scope),
    ] {
        if let Some(value) = value {
            form.append_pair(name, value);
        }
    }
    for (name, value) in auth.form_params() {
        form.append_pair(name, &value);
    }
    form.finish().into_bytes()
}

/// RFC 8693 §2.2.1 (the part used here).
#[derive(Deserialize)]
struct Issued {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
}

/// RFC 6749 §5.2.
#[derive(Deserialize)]
struct Refused {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

impl OAuthClient {
    /// An issuer's own metadata (RFC 8414, or OpenID Connect discovery, with the path
    /// variants): for a token exchange, where no protected resource names it. The
    /// answer's `resource` is `resource`.
    pub async fn discover_issuer(
        &self,
        issuer: &str,
        resource: &str,
    ) -> Result<Discovery, OAuthError> {
        self.discover_server(issuer, resource).await
    }

    /// Exchanges `request.subject_token` at `idp`'s token endpoint, authenticated as
    /// `client`, for an access token (RFC 8693).
    pub async fn token_exchange(
        &self,
        idp: &Discovery,
        client: &ServiceClient,
        request: &ExchangeRequest<'_>,
    ) -> Result<TokenSet, OAuthError> {
        let auth = ClientAuth::of_service(client, idp)?;
        let mut secrets = auth.secrets();
        secrets.push(request.subject_token.expose().to_owned());
        let body = exchange_form(request, &auth);
        let http_request = http::Request::builder()
            .method(http::Method::POST)
            .uri(idp.token_endpoint.as_str())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(body)
            .map_err(|_| {
                OAuthError::Discovery(format!(
                    "the token endpoint '{}' is not a URL",
                    shown_str(&idp.token_endpoint)
                ))
            })?;
        let send = self.sender(auth.header.clone()).client();
        let answer = send(http_request)
            .await
            .map_err(|e| OAuthError::Transport(scrub(&e.0, &secrets)))?;
        let status = answer.status();
        let body = answer.into_body();
        if status != http::StatusCode::OK {
            return Err(match serde_json::from_slice::<Refused>(&body) {
                Ok(refused) => OAuthError::Refused {
                    error: scrub(&refused.error, &secrets),
                    description: refused.error_description.map(|d| scrub(&d, &secrets)),
                },
                Err(_) => OAuthError::Transport(format!(
                    "{}: HTTP {} to a token exchange",
                    shown_str(&idp.token_endpoint),
                    status.as_u16()
                )),
            });
        }
        // Never the body in an error: it holds a token.
        let issued: Issued = serde_json::from_slice(&body).map_err(|_| {
            OAuthError::Transport(format!(
                "{}: the answer is not a valid token exchange response",
                shown_str(&idp.token_endpoint)
            ))
        })?;
        Ok(TokenSet {
            access_token: Secret(issued.access_token),
            refresh_token: None,
            token_type: match issued.token_type {
                Some(t) if !t.eq_ignore_ascii_case("bearer") && !t.eq_ignore_ascii_case("n_a") => t,
                _ => "Bearer".to_owned(),
            },
            expires_in: issued.expires_in,
            scope: issued
                .scope
                .filter(|s| !s.is_empty())
                .or_else(|| request.scope.map(str::to_owned)),
        })
    }
}
