//! The `jwt:` section: where verification keys come from (exactly one source, by
//! construction) and what tokens must carry. The authenticator that uses it is
//! `crate::credentials`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where JWT verification keys come from: exactly one source, by construction.
/// (`Debug` is safe: a [`Secret`](toolgate_adapters::Secret) prints as `***`.)
#[derive(Debug, Clone, PartialEq)]
pub enum JwtKeys {
    /// A shared secret for HS256 tokens (`hs256_secret`).
    Hs256Secret(toolgate_adapters::Secret),
    /// A JWKS document on disk (`jwks_file`).
    JwksFile(PathBuf),
    /// The issuer's JWKS URL (`jwks_url`).
    JwksUrl(String),
}

/// JWT authentication: where the keys come from and what tokens must carry. Written in
/// the file as exactly one of `hs256_secret`, `jwks_file`, `jwks_url` beside the other
/// settings (the JSON Schema, `toolgate config-schema`, describes each field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "JwtFile", into = "JwtFile")]
pub struct JwtConfig {
    pub keys: JwtKeys,
    /// A top-level claim name, or a JSON Pointer (`/org/tenant`).
    pub tenant_claim: String,
    /// The claim naming the person (the subject): `sub` unless configured.
    pub subject_claim: String,
    /// The `iss` tokens must carry, when set.
    pub issuer: Option<String>,
    /// The value tokens must carry in `aud`, when set.
    pub audience: Option<String>,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
    /// How often a JWKS is reloaded.
    pub jwks_refresh: Duration,
}

/// JWT authentication. Set exactly one of `hs256_secret`, `jwks_file`, `jwks_url`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "JwtConfig")]
struct JwtFile {
    /// Shared secret for HS256 tokens, at least 32 bytes; put it in the environment:
    /// `hs256_secret: ${TOOLGATE_JWT_SECRET}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hs256_secret: Option<toolgate_adapters::Secret>,
    /// A JWKS document (the issuer's public keys: RS256, ES256, …) on disk. A relative
    /// path is resolved against the config file's directory. Re-read every
    /// `jwks_refresh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jwks_file: Option<PathBuf>,
    /// URL of the issuer's JWKS (e.g. `https://issuer.example.com/.well-known/jwks.json`),
    /// fetched at startup (failing startup if it cannot be), every `jwks_refresh`, and
    /// when a token names an unknown key id (at most every 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jwks_url: Option<String>,
    /// The claim naming the tenant: a top-level claim name, or a JSON Pointer such as
    /// `/org/tenant` for a nested one. Its value must be a non-empty string.
    #[serde(default = "default_tenant_claim")]
    tenant_claim: String,
    /// The claim naming the person calling (the subject): a top-level claim name or a
    /// JSON Pointer. When the token carries it, it must be a non-empty string of at
    /// most 255 bytes; a token without it calls as its tenant alone.
    #[serde(default = "default_subject_claim")]
    subject_claim: String,
    /// When set, tokens must carry this `iss`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issuer: Option<String>,
    /// When set, tokens must carry this value in `aud`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    audience: Option<String>,
    /// Clock skew tolerated on `exp` and `nbf`.
    #[serde(default = "default_leeway", with = "humantime_serde")]
    #[schemars(with = "String")]
    leeway: Duration,
    /// How often the JWKS is reloaded.
    #[serde(default = "default_jwks_refresh", with = "humantime_serde")]
    #[schemars(with = "String")]
    jwks_refresh: Duration,
}

impl TryFrom<JwtFile> for JwtConfig {
    type Error = String;

    fn try_from(file: JwtFile) -> Result<Self, String> {
        let keys = crate::config::one_of::exactly_one(
            [
                file.hs256_secret.map(JwtKeys::Hs256Secret),
                file.jwks_file.map(JwtKeys::JwksFile),
                file.jwks_url.map(JwtKeys::JwksUrl),
            ],
            &["hs256_secret", "jwks_file", "jwks_url"],
        )?;
        Ok(JwtConfig {
            keys,
            tenant_claim: file.tenant_claim,
            subject_claim: file.subject_claim,
            issuer: file.issuer,
            audience: file.audience,
            leeway: file.leeway,
            jwks_refresh: file.jwks_refresh,
        })
    }
}

impl From<JwtConfig> for JwtFile {
    fn from(config: JwtConfig) -> Self {
        let mut file = JwtFile {
            hs256_secret: None,
            jwks_file: None,
            jwks_url: None,
            tenant_claim: config.tenant_claim,
            subject_claim: config.subject_claim,
            issuer: config.issuer,
            audience: config.audience,
            leeway: config.leeway,
            jwks_refresh: config.jwks_refresh,
        };
        match config.keys {
            JwtKeys::Hs256Secret(secret) => file.hs256_secret = Some(secret),
            JwtKeys::JwksFile(path) => file.jwks_file = Some(path),
            JwtKeys::JwksUrl(url) => file.jwks_url = Some(url),
        }
        file
    }
}

crate::config::one_of::schema_of_file_shape!(JwtConfig, JwtFile);

fn default_tenant_claim() -> String {
    "tenant".to_owned()
}

fn default_subject_claim() -> String {
    "sub".to_owned()
}

fn default_leeway() -> Duration {
    Duration::from_secs(30)
}

fn default_jwks_refresh() -> Duration {
    Duration::from_secs(600)
}

impl JwtConfig {
    /// Keys from `keys`, every other setting at its default.
    pub fn new(keys: JwtKeys) -> JwtConfig {
        JwtConfig {
            keys,
            tenant_claim: default_tenant_claim(),
            subject_claim: default_subject_claim(),
            issuer: None,
            audience: None,
            leeway: default_leeway(),
            jwks_refresh: default_jwks_refresh(),
        }
    }

    /// These settings for a gateway whose resource identifier is `public_url`: tokens
    /// must then name it in `aud` (RFC 8707) unless `audience` says otherwise, so a
    /// token issued for another resource is refused here.
    pub fn for_resource(mut self, public_url: Option<&str>) -> JwtConfig {
        if self.audience.is_none() {
            self.audience = public_url.map(|url| url.trim_end_matches('/').to_owned());
        }
        self
    }

    /// Checks what serde cannot (the key source is one by construction): a long enough
    /// secret, an http(s) JWKS URL, a tenant claim, a non-zero refresh interval. The
    /// message names the field (relative to this section).
    pub fn validate(&self) -> Result<(), String> {
        match &self.keys {
            JwtKeys::Hs256Secret(secret) if secret.expose().len() < 32 => {
                return Err(
                    "`hs256_secret` must be at least 32 bytes long (e.g. `openssl rand -hex 32`)"
                        .into(),
                );
            }
            JwtKeys::JwksUrl(url)
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                return Err(format!(
                    "`jwks_url`: '{url}' is not an http:// or https:// URL"
                ));
            }
            _ => {}
        }
        if self.tenant_claim.trim().is_empty() {
            return Err("`tenant_claim` must name a claim".into());
        }
        if self.subject_claim.trim().is_empty() {
            return Err("`subject_claim` must name a claim".into());
        }
        if self.issuer.as_deref().is_some_and(|s| s.is_empty()) {
            return Err("`issuer` is empty: remove it or set the expected `iss`".into());
        }
        if self.audience.as_deref().is_some_and(|s| s.is_empty()) {
            return Err("`audience` is empty: remove it or set the expected `aud`".into());
        }
        if self.jwks_refresh < Duration::from_secs(1) {
            return Err("`jwks_refresh` must be at least 1s".into());
        }
        Ok(())
    }

    /// Resolves a relative `jwks_file` against `dir` (the config file's directory).
    pub fn resolve_relative_paths(&mut self, dir: &Path) {
        if let JwtKeys::JwksFile(file) = &mut self.keys
            && file.is_relative()
        {
            *file = dir.join(&*file);
        }
    }
}
