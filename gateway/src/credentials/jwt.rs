//! JWT verification and the JWKS key store behind it.
//!
//! The accepted algorithms come from the key, never from the token alone: with
//! `hs256_secret` only HS256; with a JWKS only the asymmetric algorithms that fit each
//! key's type and curve (and its `alg`, when the JWKS states one). Symmetric (`oct`)
//! keys in a JWKS are ignored, so an HS256 token can never be checked against bytes
//! of a public key (algorithm confusion), and `alg: none` is refused outright.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::Value;

use super::{AuthError, JwtConfig, JwtKeys};

/// Timeout of one JWKS fetch.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Unknown key ids trigger a reload at most this often.
const UNKNOWN_KID_RELOAD_INTERVAL: Duration = Duration::from_secs(30);
/// Largest JWKS document accepted.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// The decoded header of a token shaped like a JWT (`header.payload.signature`, each
/// part base64url, the header a JSON object); `None` for anything else, which is then
/// treated as an API key.
pub(super) fn jwt_header(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (header, payload, signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || header.is_empty() || payload.is_empty() {
        return None;
    }
    let base64url = |part: &str| {
        part.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !(base64url(header) && base64url(payload) && base64url(signature)) {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(header).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value.is_object().then_some(value)
}

fn invalid(reason: impl Into<String>) -> AuthError {
    AuthError::InvalidCredentials(reason.into())
}

/// Verifies JWTs per one [`JwtConfig`].
pub(super) struct JwtVerifier {
    keys: Keys,
    tenant_claim: String,
    subject_claim: String,
    issuer: Option<String>,
    audience: Option<String>,
    leeway: u64,
    /// Stops the JWKS reload task when the verifier goes away.
    _reloader: Option<AbortOnDrop>,
}

enum Keys {
    Secret(DecodingKey),
    Jwks(Arc<JwksStore>),
}

/// Loads a JWKS from `origin` now and starts its reload every `refresh`.
async fn jwks_keys(
    origin: JwksOrigin,
    refresh: std::time::Duration,
) -> Result<(Keys, Option<AbortOnDrop>), String> {
    let store = Arc::new(JwksStore {
        origin,
        keys: arc_swap::ArcSwap::from_pointee(Vec::new()),
        last_on_demand: tokio::sync::Mutex::new(None),
    });
    let keys = store.load().await.map_err(|e| format!("jwt: {e}"))?;
    tracing::info!(
        keys = keys.len(),
        source = %store.origin,
        "JWKS loaded"
    );
    store.replace(keys);
    let reloader = spawn_reloader(Arc::downgrade(&store), refresh);
    Ok((Keys::Jwks(store), Some(reloader)))
}

impl JwtVerifier {
    /// Expects a validated config. Loads the JWKS (file or URL) now and starts its
    /// periodic reload.
    pub(super) async fn new(config: JwtConfig) -> Result<JwtVerifier, String> {
        let (keys, reloader) = match &config.keys {
            JwtKeys::Hs256Secret(secret) => (
                Keys::Secret(DecodingKey::from_secret(secret.expose().as_bytes())),
                None,
            ),
            JwtKeys::JwksFile(path) => {
                jwks_keys(JwksOrigin::File(path.clone()), config.jwks_refresh).await?
            }
            JwtKeys::JwksUrl(url) => {
                let client = reqwest::Client::builder()
                    .timeout(FETCH_TIMEOUT)
                    .build()
                    .map_err(|e| format!("jwt: cannot build an HTTP client: {e}"))?;
                let origin = JwksOrigin::Url {
                    url: url.clone(),
                    client,
                };
                jwks_keys(origin, config.jwks_refresh).await?
            }
        };
        Ok(JwtVerifier {
            keys,
            tenant_claim: config.tenant_claim,
            subject_claim: config.subject_claim,
            issuer: config.issuer,
            audience: config.audience,
            leeway: config.leeway.as_secs(),
            _reloader: reloader,
        })
    }

    /// Verifies `token` (whose decoded header is `header`) and returns who it names.
    pub(super) async fn verify(
        &self,
        token: &str,
        header: &Value,
    ) -> Result<super::Identity, AuthError> {
        let Some(alg_name) = header.get("alg").and_then(Value::as_str) else {
            return Err(invalid("the JWT header has no `alg`"));
        };
        if alg_name.eq_ignore_ascii_case("none") {
            return Err(invalid("unsigned tokens (`alg: none`) are not accepted"));
        }
        let Ok(alg) = Algorithm::from_str(alg_name) else {
            return Err(invalid("the JWT is signed with an unsupported algorithm"));
        };
        let claims = match &self.keys {
            Keys::Secret(key) => {
                if alg != Algorithm::HS256 {
                    return Err(invalid(format!(
                        "this gateway accepts HS256 tokens, not {alg:?}"
                    )));
                }
                self.decode(token, key, alg)
                    .map_err(|e| map_error(e.kind()))?
            }
            Keys::Jwks(store) => {
                if AlgorithmFamily::Hmac.algorithms().contains(&alg) {
                    return Err(invalid(format!(
                        "{alg:?} tokens are not accepted: this gateway verifies tokens with \
                         the issuer's public keys (RS256, ES256, …)"
                    )));
                }
                let kid = header.get("kid").and_then(Value::as_str);
                let keys = match kid {
                    Some(kid) => store.keys_knowing(kid).await,
                    None => store.current(),
                };
                // Keys published without a `kid` stay candidates for any token.
                let mut candidates = keys
                    .iter()
                    .filter(|k| kid.is_none() || k.kid.is_none() || k.kid.as_deref() == kid)
                    .peekable();
                if candidates.peek().is_none() {
                    return Err(invalid(
                        "the JWT is signed with a key (`kid`) this gateway does not know: \
                         check that the token comes from the configured issuer",
                    ));
                }
                let mut candidates = candidates
                    .filter(|k| k.algorithms.contains(&alg))
                    .peekable();
                if candidates.peek().is_none() {
                    return Err(invalid(format!(
                        "the JWT's algorithm {alg:?} does not fit its signing key"
                    )));
                }
                let mut outcome = None;
                for candidate in candidates {
                    let result = self.decode(token, &candidate.key, alg);
                    // Claims are checked only once a signature verifies: any error but
                    // a bad signature is final.
                    let done =
                        !matches!(&result, Err(e) if *e.kind() == ErrorKind::InvalidSignature);
                    outcome = Some(result);
                    if done {
                        break;
                    }
                }
                match outcome {
                    Some(result) => result.map_err(|e| map_error(e.kind()))?,
                    None => return Err(invalid(SIGNATURE)),
                }
            }
        };
        Ok(super::Identity {
            tenant: self.tenant(&claims)?,
            subject: self.subject(&claims)?,
            assertion: Some(crate::policy::Assertion {
                token: toolgate_adapters::Secret::from(token.to_owned()),
                expires_at: claims.get("exp").and_then(Value::as_u64),
            }),
        })
    }

    fn decode(
        &self,
        token: &str,
        key: &DecodingKey,
        alg: Algorithm,
    ) -> jsonwebtoken::errors::Result<Value> {
        let mut validation = Validation::new(alg);
        validation.leeway = self.leeway;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        let mut required = vec!["exp"];
        match &self.audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                required.push("aud");
            }
            None => validation.validate_aud = false,
        }
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        jsonwebtoken::decode::<Value>(token, key, &validation).map(|data| data.claims)
    }

    fn tenant(&self, claims: &Value) -> Result<String, AuthError> {
        let claim = &self.tenant_claim;
        match claim_value(claims, claim) {
            Some(Value::String(tenant)) if !tenant.trim().is_empty() => Ok(tenant.clone()),
            Some(_) => Err(AuthError::InvalidClaims(format!(
                "the `{claim}` claim must be a non-empty string naming the tenant"
            ))),
            None => Err(AuthError::InvalidClaims(format!(
                "the token has no `{claim}` claim naming the tenant"
            ))),
        }
    }

    /// The person the token names (`subject_claim`), when it names one.
    fn subject(&self, claims: &Value) -> Result<Option<String>, AuthError> {
        let claim = &self.subject_claim;
        match claim_value(claims, claim) {
            None => Ok(None),
            Some(Value::String(subject)) => crate::config::subject::check(subject)
                .map(|()| Some(subject.clone()))
                .map_err(|why| AuthError::InvalidClaims(format!("the `{claim}` claim: {why}"))),
            Some(_) => Err(AuthError::InvalidClaims(format!(
                "the `{claim}` claim must be a string naming the subject"
            ))),
        }
    }
}

/// A claim by top-level name, or by JSON Pointer (`/org/tenant`).
fn claim_value<'c>(claims: &'c Value, claim: &str) -> Option<&'c Value> {
    if claim.starts_with('/') {
        claims.pointer(claim)
    } else {
        claims.get(claim)
    }
}

const SIGNATURE: &str = "the JWT's signature does not verify";

fn map_error(kind: &ErrorKind) -> AuthError {
    match kind {
        ErrorKind::ExpiredSignature => AuthError::Expired,
        ErrorKind::ImmatureSignature => AuthError::NotYetValid,
        ErrorKind::InvalidIssuer => {
            AuthError::InvalidClaims("the token's `iss` is not the configured issuer".into())
        }
        ErrorKind::InvalidAudience => AuthError::InvalidClaims(
            "the token's `aud` does not name this gateway's audience".into(),
        ),
        ErrorKind::MissingRequiredClaim(claim) => {
            AuthError::InvalidClaims(format!("the token has no `{claim}` claim"))
        }
        ErrorKind::InvalidClaimFormat(claim) => {
            AuthError::InvalidClaims(format!("the token's `{claim}` claim is malformed"))
        }
        ErrorKind::InvalidSignature => invalid(SIGNATURE),
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidKeyFormat => {
            invalid("the JWT's algorithm does not fit its signing key")
        }
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => invalid("the JWT is malformed"),
        _ => invalid("the JWT could not be verified"),
    }
}

/// One public key from a JWKS, with the algorithms it may verify.
#[derive(Debug)]
struct VerificationKey {
    kid: Option<String>,
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

enum JwksOrigin {
    File(PathBuf),
    Url {
        url: String,
        client: reqwest::Client,
    },
}

impl std::fmt::Display for JwksOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JwksOrigin::File(path) => write!(f, "{}", path.display()),
            JwksOrigin::Url { url, .. } => f.write_str(url),
        }
    }
}

struct JwksStore {
    origin: JwksOrigin,
    keys: arc_swap::ArcSwap<Vec<VerificationKey>>,
    /// When an unknown key id last caused a reload; held during that reload, so
    /// concurrent requests wait for one fetch instead of starting their own.
    last_on_demand: tokio::sync::Mutex<Option<Instant>>,
}

impl JwksStore {
    fn current(&self) -> Arc<Vec<VerificationKey>> {
        self.keys.load_full()
    }

    fn replace(&self, keys: Vec<VerificationKey>) {
        self.keys.store(Arc::new(keys));
    }

    /// The keys, reloaded first if none has id `kid` and no such reload happened in
    /// the last 30 s.
    async fn keys_knowing(&self, kid: &str) -> Arc<Vec<VerificationKey>> {
        let knows = |keys: &[VerificationKey]| keys.iter().any(|k| k.kid.as_deref() == Some(kid));
        let keys = self.current();
        if knows(&keys) {
            return keys;
        }
        let mut last = self.last_on_demand.lock().await;
        let keys = self.current();
        if knows(&keys) || last.is_some_and(|at| at.elapsed() < UNKNOWN_KID_RELOAD_INTERVAL) {
            return keys;
        }
        *last = Some(Instant::now());
        match self.load().await {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), source = %self.origin, "JWKS reloaded for an unknown key id");
                self.replace(keys);
            }
            Err(error) => {
                tracing::warn!(%error, "JWKS reload failed; keeping the keys loaded before");
            }
        }
        self.current()
    }

    async fn load(&self) -> Result<Vec<VerificationKey>, String> {
        let bytes = match &self.origin {
            JwksOrigin::File(path) => tokio::fs::read(path)
                .await
                .map_err(|e| format!("cannot read the JWKS file {}: {e}", path.display()))?,
            JwksOrigin::Url { url, client } => fetch(client, url).await?,
        };
        parse_jwks(&bytes).map_err(|e| format!("the JWKS at {} {e}", self.origin))
    }
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, String> {
    let failed = |e: reqwest::Error| {
        format!(
            "cannot fetch the JWKS from {url}: {}",
            toolgate_adapters::error::error_chain(&e)
        )
    };
    let mut response = client
        .get(url)
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(failed)?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "cannot fetch the JWKS from {url}: the server answered {status}"
        ));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(format!(
                "the JWKS at {url} is larger than {MAX_JWKS_BYTES} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The usable signing keys of a JWKS document. Keys of other kinds (encryption keys,
/// symmetric keys, unknown curves) are skipped; a document with none left is an error.
/// Errors read after "the JWKS at <origin> …".
fn parse_jwks(bytes: &[u8]) -> Result<Vec<VerificationKey>, String> {
    let document: Value = serde_json::from_slice(bytes).map_err(|e| format!("is not JSON: {e}"))?;
    let Some(entries) = document.get("keys").and_then(Value::as_array) else {
        return Err("is not a JWKS: expected {\"keys\": [...]}".into());
    };
    let mut keys = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let parsed = serde_json::from_value::<Jwk>(entry.clone())
            .map_err(|e| e.to_string())
            .and_then(|jwk| verification_key(&jwk));
        match parsed {
            Ok(key) => keys.push(key),
            Err(reason) => tracing::debug!(index, %reason, "JWKS key skipped"),
        }
    }
    if keys.is_empty() {
        return Err(
            "has no usable signing key (RSA, EC P-256 / P-384 or Ed25519 public keys)".into(),
        );
    }
    Ok(keys)
}

fn verification_key(jwk: &Jwk) -> Result<VerificationKey, String> {
    if matches!(
        &jwk.common.public_key_use,
        Some(usage) if *usage != PublicKeyUse::Signature
    ) {
        return Err("not a signature key (`use`)".into());
    }
    let by_type: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa.algorithms().to_vec(),
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return Err("unsupported curve".into()),
        },
        AlgorithmParameters::OctetKeyPair(params) if params.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        AlgorithmParameters::OctetKey(_) => {
            return Err("symmetric keys are not accepted from a JWKS".into());
        }
        _ => return Err("unsupported key type".into()),
    };
    let algorithms = match jwk.common.key_algorithm {
        None => by_type,
        Some(declared) => {
            let declared = Algorithm::from_str(&declared.to_string())
                .map_err(|_| format!("unsupported `alg` {declared}"))?;
            if !by_type.contains(&declared) {
                return Err(format!("`alg` {declared:?} does not fit the key type"));
            }
            vec![declared]
        }
    };
    let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("unreadable key: {e}"))?;
    Ok(VerificationKey {
        kid: jwk.common.key_id.clone(),
        key,
        algorithms,
    })
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reloads the JWKS every `every`, keeping the previous keys when a reload fails.
fn spawn_reloader(store: Weak<JwksStore>, every: Duration) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(store) = store.upgrade() else {
                break;
            };
            match store.load().await {
                Ok(keys) => {
                    tracing::debug!(keys = keys.len(), source = %store.origin, "JWKS reloaded");
                    store.replace(keys);
                }
                Err(error) => {
                    tracing::warn!(%error, "JWKS reload failed; keeping the keys loaded before");
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(text: &str) -> String {
        URL_SAFE_NO_PAD.encode(text)
    }

    #[test]
    fn jwt_shape_is_recognised() {
        let header = b64(r#"{"alg":"RS256","kid":"a"}"#);
        let token = format!("{header}.{}.sig", b64("{}"));
        assert_eq!(jwt_header(&token).unwrap()["kid"], "a");
        // `alg: none` tokens have an empty signature: still a JWT, refused later.
        assert!(jwt_header(&format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64("{}"))).is_some());
        for not_jwt in [
            "tg_live_0123456789",
            "a.b",
            "a.b.c.d",
            "abc.def.ghi",
            &format!("{header}.{}.s+g", b64("{}")),
            &format!("{}.{}.sig", b64("[1]"), b64("{}")),
        ] {
            assert!(jwt_header(not_jwt).is_none(), "{not_jwt}");
        }
    }

    #[test]
    fn jwks_keys_are_filtered() {
        let document = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "sym"},
            {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB", "kid": "enc"},
            {"kty": "EC", "crv": "P-256", "alg": "RS256", "kid": "mismatch",
             "x": "AQAB", "y": "AQAB"},
            {"kty": "EC", "crv": "P-256", "kid": "ec",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "RSA", "alg": "RS256", "kid": "rsa", "n": "AQAB", "e": "AQAB"}
        ]});
        let keys = parse_jwks(document.to_string().as_bytes()).unwrap();
        let summary: Vec<(Option<&str>, &[Algorithm])> = keys
            .iter()
            .map(|k| (k.kid.as_deref(), k.algorithms.as_slice()))
            .collect();
        assert_eq!(
            summary,
            vec![
                (Some("ec"), &[Algorithm::ES256][..]),
                (Some("rsa"), &[Algorithm::RS256][..])
            ]
        );
        let only_symmetric = r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#;
        assert!(
            parse_jwks(only_symmetric.as_bytes())
                .unwrap_err()
                .contains("no usable")
        );
        assert!(parse_jwks(b"[]").unwrap_err().contains("not a JWKS"));
        assert!(parse_jwks(b"<html>").unwrap_err().contains("not JSON"));
    }
}
