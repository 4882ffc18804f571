//! Credentials: how a request's `Authorization` header becomes a tenant.
//!
//! Two kinds of bearer credentials are accepted, both optional:
//!
//! - **API keys.** The config holds only their SHA-256 digests, written
//!   `sha256:<64 hex digits>` ([`hash_key`], `toolgate hash-key`); a presented key is
//!   hashed and compared with every configured digest without early exit.
//! - **JWTs** ([`JwtConfig`]): HS256 with a shared secret, or RS256 / ES256 (and the
//!   other RSA, EC and Ed25519 algorithms) with public keys from a JWKS file or URL.
//!   The signature, `exp` / `nbf` (with leeway) and, when configured, `iss` / `aud`
//!   are checked; the tenant is read from a string claim (`tenant` by default). A
//!   JWKS is reloaded every `jwks_refresh`, and at once (at most every 30 s) when a
//!   token names a key id it does not know, so key rotation needs no restart.
//!
//! Either may also name the person calling, the *subject*: a JWT by its `sub` claim
//! (or `subject_claim`), an API key when it is a personal one (`{hash, subject}`).
//!
//! [`Authenticator::authenticate`] turns the header into `Ok(Some(identity))`, `Ok(None)`
//! when there is no header (the caller decides whether anonymous requests are allowed),
//! or an [`AuthError`] whose message tells the client what to fix without echoing the
//! token or naming any tenant. Tokens are never logged.

mod jwt;

pub use crate::config::jwt::{JwtConfig, JwtKeys};

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

/// Longest bearer token looked at; longer ones are refused before any work.
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// The form API keys take in the config: `sha256:<64 lowercase hex digits>` of the
/// key's UTF-8 bytes. The gateway never stores plain keys.
pub fn hash_key(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Parses `sha256:<64 hex digits>` (either case) into the digest.
fn parse_key_hash(hash: &str) -> Option<[u8; 32]> {
    let hex = hash.trim().strip_prefix("sha256:")?.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = nibble(hex[2 * i])? << 4 | nibble(hex[2 * i + 1])?;
    }
    Some(digest)
}

/// Why a request's credentials were refused. The message says what to fix; it never
/// contains the presented token nor any tenant name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthError {
    /// An empty `Authorization` header, or `Bearer` without a token.
    MissingCredentials,
    /// A scheme other than `Bearer` (e.g. `Basic`).
    UnsupportedScheme,
    /// Not a known API key, or a JWT that does not verify (malformed, bad signature,
    /// unknown key, refused algorithm). The text says which.
    InvalidCredentials(String),
    /// A JWT past its `exp` (plus leeway).
    Expired,
    /// A JWT before its `nbf` (minus leeway).
    NotYetValid,
    /// A JWT whose signature verifies but whose claims do not fit: `iss`, `aud`, or
    /// the tenant claim.
    InvalidClaims(String),
    /// A valid token (or key) naming a tenant that this gateway does not have. Said
    /// apart from missing credentials, since a token was sent; no tenant is named.
    UnknownTenant,
}

impl AuthError {
    /// A stable, machine-readable code: `missing_credentials`, `unsupported_scheme`,
    /// `invalid_credentials`, `expired`, `not_yet_valid`, `invalid_claims`,
    /// `unknown_tenant`.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::MissingCredentials => "missing_credentials",
            AuthError::UnsupportedScheme => "unsupported_scheme",
            AuthError::InvalidCredentials(_) => "invalid_credentials",
            AuthError::Expired => "expired",
            AuthError::NotYetValid => "not_yet_valid",
            AuthError::InvalidClaims(_) => "invalid_claims",
            AuthError::UnknownTenant => "unknown_tenant",
        }
    }

    /// A `WWW-Authenticate` value for the 401 (RFC 6750): `Bearer realm="toolgate"`,
    /// plus `error="invalid_token"` and a description when a token was presented.
    pub fn www_authenticate(&self) -> String {
        match self {
            AuthError::MissingCredentials | AuthError::UnsupportedScheme => {
                r#"Bearer realm="toolgate""#.to_owned()
            }
            _ => format!(
                r#"Bearer realm="toolgate", error="invalid_token", error_description="{}""#,
                self.to_string().replace(['"', '\\'], "'")
            ),
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::MissingCredentials => {
                f.write_str("no credentials: send `Authorization: Bearer <API key or JWT>`")
            }
            AuthError::UnsupportedScheme => f.write_str(
                "unsupported authorization scheme: send `Authorization: Bearer <API key or JWT>`",
            ),
            AuthError::InvalidCredentials(reason) => write!(f, "invalid credentials: {reason}"),
            AuthError::Expired => {
                f.write_str("the token has expired (`exp` is in the past): get a new token")
            }
            AuthError::NotYetValid => f.write_str(
                "the token is not valid yet (`nbf` is in the future): check the issuer's clock",
            ),
            AuthError::InvalidClaims(reason) => write!(f, "the token is not accepted: {reason}"),
            AuthError::UnknownTenant => f.write_str(
                "unknown tenant: the token verifies, but the tenant it names is not configured \
                 on this gateway; ask its issuer for a token naming a tenant you belong to, or \
                 ask the gateway's operator to add the tenant",
            ),
        }
    }
}

impl std::error::Error for AuthError {}

/// Who a credential names: its tenant, and the person within it when it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub tenant: String,
    pub subject: Option<String>,
    /// The JWT itself, when the credential was one the gateway verified.
    pub assertion: Option<crate::policy::Assertion>,
}

struct ApiKey {
    digest: [u8; 32],
    tenant: String,
    subject: Option<String>,
}

struct Inner {
    api_keys: Vec<ApiKey>,
    jwt: Option<jwt::JwtVerifier>,
}

/// Turns `Authorization` headers into tenants. Cheap to clone (shared state); a JWKS
/// refresh task runs while any clone is alive. A config reload swaps the keys and JWT
/// settings of every clone at once ([`Authenticator::replace`]).
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<arc_swap::ArcSwap<Inner>>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.current();
        f.debug_struct("Authenticator")
            .field("api_keys", &inner.api_keys.len())
            .field("jwt", &inner.jwt.is_some())
            .finish()
    }
}

impl Authenticator {
    /// The authenticator a config describes: its tenants' API keys and its JWT
    /// settings, with the audience defaulted to `public_url` (see
    /// [`JwtConfig::for_resource`]). Used at startup and on every reload.
    pub async fn for_config(config: &crate::config::Config) -> Result<Authenticator, String> {
        Authenticator::new(config.api_keys(), config.jwt_settings()).await
    }

    /// Builds the authenticator from the tenants' keys and the JWT settings. Refuses
    /// malformed hashes (naming the tenant), one hash given to two tenants or two
    /// subjects, an invalid subject, an invalid [`JwtConfig`], and a JWKS that cannot
    /// be read or fetched (10 s timeout) or holds no usable key.
    pub async fn new(
        api_keys: Vec<crate::config::KeyGrant>,
        jwt: Option<JwtConfig>,
    ) -> Result<Authenticator, String> {
        let mut keys: Vec<ApiKey> = Vec::with_capacity(api_keys.len());
        for crate::config::KeyGrant {
            tenant,
            hash,
            subject,
        } in api_keys
        {
            if tenant.trim().is_empty() {
                return Err("an API key has an empty tenant name".into());
            }
            let Some(digest) = parse_key_hash(&hash) else {
                return Err(format!(
                    "the API key of tenant `{tenant}` is not of the form `sha256:<64 hex \
                     digits>`: put the output of `toolgate hash-key` in the config, never \
                     the key itself"
                ));
            };
            if let Some(subject) = &subject {
                crate::config::subject::check(subject)
                    .map_err(|why| format!("an API key of tenant `{tenant}`: {why}"))?;
            }
            if let Some(other) = keys.iter().find(|k| k.digest == digest) {
                if other.tenant == tenant && other.subject == subject {
                    continue;
                }
                return Err(format!(
                    "tenants `{}` and `{tenant}` have the same API key (or one key is given \
                     to two subjects): give each tenant and each person its own key",
                    other.tenant
                ));
            }
            keys.push(ApiKey {
                digest,
                tenant,
                subject,
            });
        }
        let jwt = match jwt {
            Some(config) => {
                config.validate().map_err(|e| format!("jwt: {e}"))?;
                Some(jwt::JwtVerifier::new(config).await?)
            }
            None => None,
        };
        Ok(Authenticator {
            inner: Arc::new(arc_swap::ArcSwap::from_pointee(Inner {
                api_keys: keys,
                jwt,
            })),
        })
    }

    /// The keys and JWT settings as of now; a request uses one snapshot throughout.
    fn current(&self) -> Arc<Inner> {
        self.inner.load_full()
    }

    /// Swaps in the keys and JWT settings of `next` for this authenticator and every
    /// clone of it (a config reload). Requests already being authenticated finish with
    /// the old ones; the old JWKS refresh task stops once they are done.
    pub fn replace(&self, next: Authenticator) {
        let next = next.current();
        self.inner.store(next);
    }

    /// Whether any credential is configured (API keys or JWT). With none, every bearer
    /// token is refused; the caller may then choose to not require authentication.
    pub fn is_enabled(&self) -> bool {
        let inner = self.current();
        !inner.api_keys.is_empty() || inner.jwt.is_some()
    }

    /// Who an `Authorization` header value names: `Ok(None)` without a header,
    /// `Ok(Some(identity))` for a valid API key or JWT, an [`AuthError`] otherwise.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
    ) -> Result<Option<Identity>, AuthError> {
        let Some(header) = authorization else {
            return Ok(None);
        };
        let header = header.trim();
        if header.is_empty() {
            return Err(AuthError::MissingCredentials);
        }
        let (scheme, token) = match header.split_once(|c: char| c.is_ascii_whitespace()) {
            Some((scheme, token)) => (scheme, token.trim()),
            None => (header, ""),
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::UnsupportedScheme);
        }
        if token.is_empty() {
            return Err(AuthError::MissingCredentials);
        }
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::InvalidCredentials(format!(
                "the bearer token is longer than {MAX_TOKEN_LEN} bytes"
            )));
        }
        let inner = self.current();
        let jwt_header = jwt::jwt_header(token);
        if let (Some(verifier), Some(header)) = (&inner.jwt, &jwt_header) {
            return verifier.verify(token, header).await.map(Some);
        }
        match inner.lookup_api_key(token) {
            Some(key) => Ok(Some(Identity {
                tenant: key.tenant.clone(),
                subject: key.subject.clone(),
                assertion: None,
            })),
            None if jwt_header.is_some() => Err(AuthError::InvalidCredentials(
                "the bearer token looks like a JWT, but JWT authentication is not enabled \
                 on this gateway: use an API key"
                    .into(),
            )),
            None if inner.api_keys.is_empty() && inner.jwt.is_some() => {
                Err(AuthError::InvalidCredentials(
                    "the bearer token is not a JWT (`header.payload.signature`)".into(),
                ))
            }
            None => Err(AuthError::InvalidCredentials(
                "the bearer token is not a known API key".into(),
            )),
        }
    }
}

impl Inner {
    /// Compares the presented key's digest with every configured digest, without
    /// stopping at the first match or at the first differing byte.
    fn lookup_api_key(&self, token: &str) -> Option<&ApiKey> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for key in &self.api_keys {
            if toolgate_adapters::secret::digests_equal(&key.digest, &presented) {
                found = Some(key);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn grant(tenant: &str, key: &str, subject: Option<&str>) -> crate::config::KeyGrant {
        crate::config::KeyGrant {
            tenant: tenant.into(),
            hash: hash_key(key),
            subject: subject.map(Into::into),
        }
    }

    fn identity(tenant: &str, subject: Option<&str>) -> Identity {
        Identity {
            tenant: tenant.into(),
            subject: subject.map(Into::into),
            assertion: None,
        }
    }

    #[tokio::test]
    async fn replace_swaps_the_keys_of_every_clone() {
        let old = Authenticator::new(vec![grant("a", "key-a", None)], None)
            .await
            .unwrap();
        let clone = old.clone();
        let next = Authenticator::new(vec![grant("b", "key-b", None)], None)
            .await
            .unwrap();
        assert_eq!(
            clone.authenticate(Some("Bearer key-a")).await,
            Ok(Some(identity("a", None)))
        );
        old.replace(next);
        assert!(clone.authenticate(Some("Bearer key-a")).await.is_err());
        assert_eq!(
            clone.authenticate(Some("Bearer key-b")).await,
            Ok(Some(identity("b", None)))
        );
    }

    /// A personal key names its subject; a shared one none; one key cannot be given
    /// to two people, and a subject must be printable and bounded.
    #[tokio::test]
    async fn a_personal_key_names_its_subject() {
        let keys = vec![
            grant("team", "alice-key", Some("alice")),
            grant("team", "bob-key", Some("bob")),
            grant("team", "team-key", None),
        ];
        let auth = Authenticator::new(keys, None).await.unwrap();
        assert_eq!(
            auth.authenticate(Some("Bearer alice-key")).await,
            Ok(Some(identity("team", Some("alice"))))
        );
        assert_eq!(
            auth.authenticate(Some("Bearer bob-key")).await,
            Ok(Some(identity("team", Some("bob"))))
        );
        assert_eq!(
            auth.authenticate(Some("Bearer team-key")).await,
            Ok(Some(identity("team", None)))
        );
        let twice = vec![
            grant("team", "k", Some("alice")),
            grant("team", "k", Some("bob")),
        ];
        assert!(Authenticator::new(twice, None).await.is_err());
        let control = vec![grant("team", "k", Some("al\nice"))];
        assert!(Authenticator::new(control, None).await.is_err());
    }

    #[test]
    fn hash_key_is_prefixed_lowercase_sha256() {
        assert_eq!(
            hash_key("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let hash = hash_key("some key");
        assert_eq!(hash.len(), 7 + 64);
        assert_eq!(
            parse_key_hash(&hash),
            Some(Sha256::digest(b"some key").into())
        );
    }

    #[test]
    fn key_hashes_are_parsed_strictly() {
        let good = hash_key("k");
        assert!(parse_key_hash(&good.to_uppercase().replace("SHA256", "sha256")).is_some());
        for bad in [
            "k",
            "sha256:",
            "sha256:abc",
            "sha1:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256:ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad00",
        ] {
            assert_eq!(parse_key_hash(bad), None, "{bad}");
        }
    }

    fn parse(yaml: &str) -> Result<JwtConfig, String> {
        let deserializer = serde_norway::Deserializer::from_str(yaml);
        serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let path = e.path().to_string();
            format!("{path}: {}", e.into_inner())
        })
    }

    #[test]
    fn config_defaults_and_durations() {
        let config = parse("jwks_url: https://issuer.example/jwks.json\n").unwrap();
        assert_eq!(config.tenant_claim, "tenant");
        assert_eq!(config.leeway, Duration::from_secs(30));
        assert_eq!(config.jwks_refresh, Duration::from_secs(600));
        config.validate().unwrap();
        let config =
            parse("jwks_file: keys.json\nleeway: 5s\njwks_refresh: 1h\ntenant_claim: org\n")
                .unwrap();
        assert_eq!(config.leeway, Duration::from_secs(5));
        assert_eq!(config.jwks_refresh, Duration::from_secs(3600));
        let mut resolved = config.clone();
        resolved.resolve_relative_paths(Path::new("/etc/toolgate"));
        assert_eq!(
            resolved.keys,
            JwtKeys::JwksFile("/etc/toolgate/keys.json".into())
        );
    }

    #[test]
    fn config_rejects_unknown_fields_with_their_name() {
        let err = parse("jwks_url: https://x\naudiance: a\n").unwrap_err();
        assert!(err.contains("audiance"), "{err}");
    }

    #[test]
    fn validate_requires_one_source_and_a_long_secret() {
        // One key source is a matter of parsing: the type holds exactly one.
        let none = parse("tenant_claim: t\n").unwrap_err();
        assert!(none.contains("found 0"), "{none}");
        let two = parse(&format!(
            "hs256_secret: {}\njwks_url: https://x\n",
            "x".repeat(32)
        ))
        .unwrap_err();
        assert!(two.contains("found 2"), "{two}");
        let short = JwtConfig::new(JwtKeys::Hs256Secret("short".into()));
        let err = short.validate().unwrap_err();
        assert!(err.contains("32 bytes") && !err.contains("short"), "{err}");
        let url = JwtConfig::new(JwtKeys::JwksUrl("ftp://x".into()));
        assert!(url.validate().unwrap_err().contains("jwks_url"));
        let claim = JwtConfig {
            tenant_claim: " ".into(),
            ..JwtConfig::new(JwtKeys::Hs256Secret("x".repeat(32).into()))
        };
        assert!(claim.validate().unwrap_err().contains("tenant_claim"));
    }

    #[test]
    fn every_credential_in_the_config_is_one_redacted_secret_type() {
        let admin = crate::config::AdminConfig {
            token: "admin-token-admin-token-0123".into(),
            spec_dir: None,
        };
        assert!(!format!("{admin:?}").contains("admin-token"), "{admin:?}");
        let jwt = JwtConfig::new(JwtKeys::Hs256Secret(
            "jwt-secret-jwt-secret-jwt-secret-0123".into(),
        ));
        let JwtKeys::Hs256Secret(secret) = &jwt.keys else {
            panic!("an HS256 config: {jwt:?}");
        };
        let secret: &toolgate_adapters::Secret = secret;
        assert_eq!(format!("{secret}"), "***");
        assert!(secret.matches("jwt-secret-jwt-secret-jwt-secret-0123"));
    }

    #[test]
    fn debug_hides_the_secret() {
        let config = JwtConfig::new(JwtKeys::Hs256Secret(
            "s3cret-s3cret-s3cret-s3cret-s3cret".into(),
        ));
        let printed = format!("{config:?}");
        assert!(
            !printed.contains("s3cret") && printed.contains("***"),
            "{printed}"
        );
    }

    #[test]
    fn schema_is_generated() {
        let schema = serde_json::to_value(schemars::schema_for!(JwtConfig)).unwrap();
        for field in ["hs256_secret", "jwks_url", "tenant_claim", "leeway"] {
            assert!(schema["properties"][field].is_object(), "{field}: {schema}");
        }
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn error_codes_are_stable() {
        assert_eq!(AuthError::MissingCredentials.code(), "missing_credentials");
        assert_eq!(AuthError::Expired.code(), "expired");
        assert_eq!(
            AuthError::InvalidCredentials("x".into()).code(),
            "invalid_credentials"
        );
        let header = AuthError::InvalidClaims("a \"quoted\" thing".into()).www_authenticate();
        assert!(header.starts_with("Bearer realm=\"toolgate\", error=\"invalid_token\""));
        assert_eq!(header.matches('"').count(), 6, "{header}");
    }
}
