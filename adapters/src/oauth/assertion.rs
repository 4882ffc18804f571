//! private_key_jwt client authentication (RFC 7523 §2.2, OpenID Connect Core §9): a
//! short-lived JWT signed with the client's key, sent as `client_assertion`.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

use super::{Discovery, OAuthError, SigningAlg, SigningKey};

/// The `client_assertion_type` of a JWT assertion.
pub(super) const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How long an assertion is valid: well under the five minutes servers accept.
const LIFETIME_SECS: u64 = 60;

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    jti: String,
    iat: u64,
    exp: u64,
}

/// A fresh assertion for `client_id` at the authorization server `discovery` found.
///
/// Its audience is the server's issuer identifier, alone: RFC 7523bis (and the
/// conformance suite's client-credentials scenario, which accepts exactly the issuer,
/// with or without a trailing slash) requires it, to keep an assertion meant for one
/// server from being replayed at another. `iss` and `sub` are the client id, `jti` is
/// random, `exp` one minute after `iat`.
pub(super) fn client_assertion(
    client_id: &str,
    key: &SigningKey,
    discovery: &Discovery,
) -> Result<String, OAuthError> {
    let (alg, name) = match key.alg {
        SigningAlg::RS256 => (Algorithm::RS256, "RS256"),
        SigningAlg::ES256 => (Algorithm::ES256, "ES256"),
    };
    if let Some(algs) = &discovery.token_endpoint_auth_signing_alg_values_supported
        && !algs.iter().any(|a| a == name)
    {
        return Err(OAuthError::Config(format!(
            "the authorization server takes {algs:?} for private_key_jwt, the client's key \
             is {name}"
        )));
    }
    let pem = key.pem.expose().as_bytes();
    let encoding = match key.alg {
        SigningAlg::RS256 => EncodingKey::from_rsa_pem(pem),
        SigningAlg::ES256 => EncodingKey::from_ec_pem(pem),
    }
    .map_err(|e| {
        OAuthError::Config(format!(
            "the client's {name} signing key does not load ({:?})",
            e.kind()
        ))
    })?;
    let mut header = Header::new(alg);
    header.kid = key.kid.clone();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let claims = Claims {
        iss: client_id,
        sub: client_id,
        aud: &discovery.issuer,
        jti: oauth2::CsrfToken::new_random_len(16).into_secret(),
        iat: now,
        exp: now + LIFETIME_SECS,
    };
    jsonwebtoken::encode(&header, &claims, &encoding).map_err(|e| {
        OAuthError::Config(format!(
            "could not sign the client assertion with the {name} key ({:?})",
            e.kind()
        ))
    })
}
