//! Credentials from the config applied as the spec's security schemes say: API keys in
//! a header, query parameter or cookie; HTTP bearer and basic; OAuth2 client
//! credentials with the token cached until shortly before it expires (and dropped on a
//! 401, so the next try fetches a fresh one). Secrets never reach a log line or error.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use tokio::sync::Mutex;
use url::Url;

use super::config::Credential;
use super::encode::enc;
use super::guard::Guard;
use super::load::LoadError;
use super::model::{Location, SecurityScheme};
use crate::error::error_chain;

/// Whether each credential names a scheme of the spec and is of a kind that fits it
/// (the upstream's own `auth` when loaded, a caller's own on each call).
fn check(
    schemes: &BTreeMap<String, SecurityScheme>,
    creds: &BTreeMap<String, Credential>,
) -> Result<(), String> {
    for (name, c) in creds {
        let Some(s) = schemes.get(name) else {
            let known: Vec<&String> = schemes.keys().collect();
            return Err(format!(
                "auth.{name}: the spec defines no security scheme '{name}' (it has {known:?})"
            ));
        };
        let fits = matches!(
            (s, c),
            (SecurityScheme::ApiKey { .. }, Credential::ApiKey { .. })
                | (SecurityScheme::Http { .. }, Credential::Bearer { .. })
                | (SecurityScheme::Http { .. }, Credential::Basic { .. })
                | (
                    SecurityScheme::OAuth2 { .. },
                    Credential::Oauth2ClientCredentials { .. }
                )
                | (SecurityScheme::OAuth2 { .. }, Credential::Bearer { .. })
                | (SecurityScheme::Other(_), Credential::Bearer { .. })
        );
        if !fits {
            return Err(format!(
                "auth.{name}: this credential kind does not fit the scheme ({s:?})"
            ));
        }
        if let (
            SecurityScheme::OAuth2 {
                token_url: None, ..
            },
            Credential::Oauth2ClientCredentials {
                token_url: None, ..
            },
        ) = (s, c)
        {
            return Err(format!(
                "auth.{name}: the scheme has no clientCredentials tokenUrl; set token_url"
            ));
        }
    }
    Ok(())
}

/// Where a client-credentials token is cached: per scheme *and* client (its id and a
/// digest of its secret), so callers with their own clients never share a token.
fn token_key(scheme: &str, client_id: &str, secret: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{client_id}\u{1f}{secret}").as_bytes());
    let short: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("{scheme}\u{1f}{short}")
}

/// Refresh a token this long before it expires.
const REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// What the chosen security requirement adds to a request.
#[derive(Debug, Default)]
pub(super) struct Applied {
    pub headers: Vec<(String, String)>,
    /// Encoded `key=value` query pairs.
    pub query: Vec<String>,
    pub cookies: Vec<String>,
    /// The cache keys of the OAuth2 tokens used (a 401 should drop them).
    pub used_oauth: Vec<String>,
}

#[derive(Debug, Clone)]
struct Token {
    value: String,
    expires: Instant,
}

/// The schemes of a spec with their configured credentials.
#[derive(Debug)]
pub(super) struct Auth {
    schemes: BTreeMap<String, SecurityScheme>,
    creds: BTreeMap<String, Credential>,
    tokens: Mutex<HashMap<String, Token>>,
    /// Relative token URLs resolve against this (the spec's location).
    base: Option<Url>,
    /// The scheme a caller's own bearer token (`CallerCredentials::Bearer`, a user's
    /// OAuth token) is applied as, when the upstream is called with users' tokens.
    user_scheme: Option<String>,
}

impl Auth {
    /// Pairs credentials with schemes; a credential for a scheme the spec does not
    /// define, or of the wrong kind, is a config error.
    pub(super) fn new(
        schemes: BTreeMap<String, SecurityScheme>,
        creds: BTreeMap<String, Credential>,
        base: Option<Url>,
    ) -> Result<Self, LoadError> {
        check(&schemes, &creds).map_err(LoadError::Config)?;
        Ok(Self {
            schemes,
            creds,
            tokens: Mutex::new(HashMap::new()),
            base,
            user_scheme: None,
        })
    }

    /// Applies a caller's own bearer token as scheme `name` from now on (a scheme of
    /// the spec: [`super::oauth_flows`] chose it).
    pub(super) fn take_user_tokens_as(&mut self, name: String) {
        self.user_scheme = Some(name);
    }

    /// The scheme the call's own bearer token goes to, when it carries one.
    pub(super) fn user_scheme_of(&self, caller: Option<&crate::CallerCredentials>) -> Option<&str> {
        match caller {
            Some(crate::CallerCredentials::Bearer { .. }) => self.user_scheme.as_deref(),
            _ => None,
        }
    }

    /// The schemes to apply: the first alternative whose schemes all have credentials
    /// (an empty alternative means "no auth needed") — among those, first one that
    /// holds `preferred` (the scheme of the caller's own token: a user is called as
    /// themselves where the operation allows it) — or, when the spec declares no
    /// security for the operation at all, every configured credential (specs often
    /// define schemes but forget to require them). Empty when nothing fits.
    pub(super) fn choose(
        creds: &BTreeMap<String, Credential>,
        security: Option<&[Vec<String>]>,
        preferred: Option<&str>,
    ) -> Vec<String> {
        match security {
            None => creds.keys().cloned().collect(),
            Some(alts) => {
                let usable = || {
                    alts.iter()
                        .filter(|alt| alt.iter().all(|s| creds.contains_key(s)))
                };
                preferred
                    .and_then(|p| usable().find(|alt| alt.iter().any(|s| s == p)))
                    .or_else(|| usable().next())
                    .cloned()
                    .unwrap_or_default()
            }
        }
    }

    /// The credentials a call uses: the caller's own when the gateway resolved some
    /// for it (checked against the spec's schemes: they replace the upstream's shared
    /// ones, never add to them); a caller's own bearer token in place of the
    /// upstream's credential for the scheme it is applied as (the others stay: an API
    /// may want its application key beside the user's token); else the upstream's.
    pub(super) fn credentials_for<'a>(
        &'a self,
        caller: Option<&'a crate::CallerCredentials>,
    ) -> Result<Cow<'a, BTreeMap<String, Credential>>, String> {
        match caller {
            Some(crate::CallerCredentials::OpenApi(creds)) => check(&self.schemes, creds)
                .map(|()| Cow::Borrowed(&**creds))
                .map_err(|e| format!("the caller's credentials for this API: {e}")),
            Some(crate::CallerCredentials::Bearer { token, .. }) => {
                let Some(scheme) = &self.user_scheme else {
                    return Err("the call carries a user's token, and this API takes none \
                                (it is not set up for `credentials: oauth`)"
                        .into());
                };
                let mut creds = self.creds.clone();
                creds.insert(
                    scheme.clone(),
                    Credential::Bearer {
                        token: token.clone(),
                    },
                );
                Ok(Cow::Owned(creds))
            }
            None => Ok(Cow::Borrowed(&self.creds)),
        }
    }

    /// Adds the credentials of `schemes` to `out`.
    pub(super) async fn apply(
        &self,
        guard: &Guard,
        creds: &BTreeMap<String, Credential>,
        schemes: &[String],
        out: &mut Applied,
        timeout: Duration,
    ) -> Result<(), String> {
        for name in schemes {
            let (Some(scheme), Some(cred)) = (self.schemes.get(name), creds.get(name)) else {
                continue;
            };
            match (scheme, cred) {
                (
                    SecurityScheme::ApiKey {
                        name: key,
                        location,
                    },
                    Credential::ApiKey { value },
                ) => {
                    let v = value.expose().to_owned();
                    match location {
                        Location::Query => {
                            out.query
                                .push(format!("{}={}", enc(key, false), enc(&v, false)))
                        }
                        Location::Cookie => out.cookies.push(format!("{key}={v}")),
                        _ => out.headers.push((key.clone(), v)),
                    }
                }
                (_, Credential::Bearer { token }) => {
                    out.headers
                        .push(("authorization".into(), format!("Bearer {}", token.expose())));
                }
                (_, Credential::Basic { username, password }) => {
                    let raw = format!("{username}:{}", password.expose());
                    let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
                    out.headers
                        .push(("authorization".into(), format!("Basic {b64}")));
                }
                (
                    SecurityScheme::OAuth2 { token_url, .. },
                    Credential::Oauth2ClientCredentials {
                        client_id,
                        client_secret,
                        scopes,
                        token_url: override_url,
                    },
                ) => {
                    let url = override_url
                        .as_ref()
                        .or(token_url.as_ref())
                        .cloned()
                        .unwrap_or_default();
                    let key = token_key(name, client_id, client_secret.expose());
                    let token = self
                        .token(
                            guard,
                            (name, &key),
                            &url,
                            client_id,
                            client_secret.expose(),
                            scopes,
                            timeout,
                        )
                        .await?;
                    out.headers
                        .push(("authorization".into(), format!("Bearer {token}")));
                    out.used_oauth.push(key);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Forgets a cached token (after the API answered 401 with it); `key` as
    /// [`Applied::used_oauth`] names it.
    pub(super) async fn invalidate(&self, key: &str) {
        self.tokens.lock().await.remove(key);
    }

    #[allow(clippy::too_many_arguments)]
    async fn token(
        &self,
        guard: &Guard,
        (scheme, key): (&str, &str),
        token_url: &str,
        client_id: &str,
        secret: &str,
        scopes: &[String],
        timeout: Duration,
    ) -> Result<String, String> {
        // Holding the lock while fetching makes concurrent calls share one fetch.
        let mut tokens = self.tokens.lock().await;
        if let Some(t) = tokens.get(key)
            && t.expires > Instant::now() + REFRESH_MARGIN
        {
            return Ok(t.value.clone());
        }
        let url = match &self.base {
            Some(b) => b.join(token_url),
            None => Url::parse(token_url),
        }
        .map_err(|e| format!("OAuth2 token URL '{token_url}' is not usable: {e}"))?;
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            enc(client_id),
            enc(secret)
        ));
        let form = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials");
            if !scopes.is_empty() {
                form.append_pair("scope", &scopes.join(" "));
            }
            form.finish()
        };
        let fail = |d: String| {
            format!("could not obtain an OAuth2 token for scheme '{scheme}' from {url}: {d}")
        };
        // The token URL comes from the spec (or a registration): the same guard as
        // every other URL, IP literals and redirects included.
        let request = guard
            .request(reqwest::Method::POST, url.clone())
            .map_err(|e| fail(format!("refused: {e}")))?;
        let resp = tokio::time::timeout(
            timeout,
            request
                .header("authorization", format!("Basic {basic}"))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("accept", "application/json")
                .body(form)
                .send(),
        )
        .await
        .map_err(|_| fail("timed out".into()))?
        .map_err(|e| fail(error_chain(&e)))?;
        let status = resp.status();
        let body: Value = tokio::time::timeout(timeout, resp.json())
            .await
            .map_err(|_| fail("timed out".into()))?
            .map_err(|e| fail(format!("HTTP {status}, body is not JSON ({e})")))?;
        if !status.is_success() {
            let err = body
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            return Err(fail(format!("HTTP {status} ({err})")));
        }
        let value = body
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or_else(|| fail("the answer has no access_token".into()))?
            .to_owned();
        let ttl = body
            .get("expires_in")
            .and_then(Value::as_u64)
            .unwrap_or(3600);
        tokens.insert(
            key.to_owned(),
            Token {
                value: value.clone(),
                expires: Instant::now() + Duration::from_secs(ttl),
            },
        );
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::Secret;
    use super::*;

    fn bearer(token: &str) -> Credential {
        Credential::Bearer {
            token: Secret(token.into()),
        }
    }

    #[test]
    fn a_users_token_replaces_only_its_schemes_credential_and_is_preferred() {
        let schemes = BTreeMap::from([
            (
                "key".to_owned(),
                SecurityScheme::ApiKey {
                    name: "X-Key".into(),
                    location: Location::Header,
                },
            ),
            (
                "user".to_owned(),
                SecurityScheme::OAuth2 {
                    token_url: None,
                    authorization_code: None,
                },
            ),
        ]);
        let own = BTreeMap::from([
            (
                "key".to_owned(),
                Credential::ApiKey {
                    value: Secret("app-key".into()),
                },
            ),
            ("user".to_owned(), bearer("shared")),
        ]);
        let mut auth = Auth::new(schemes, own, None).unwrap();
        let caller = crate::CallerCredentials::Bearer {
            holder: "acme\u{1f}alice".into(),
            token: Secret("alices".into()),
        };
        // Not set up for users' tokens: refused, never sent as something else.
        assert!(auth.credentials_for(Some(&caller)).is_err());
        assert_eq!(auth.user_scheme_of(Some(&caller)), None);
        auth.take_user_tokens_as("user".into());
        let creds = auth.credentials_for(Some(&caller)).unwrap();
        assert_eq!(creds["user"], bearer("alices"));
        assert!(matches!(creds["key"], Credential::ApiKey { .. }));
        // Without the caller's token the upstream's own apply.
        assert_eq!(
            auth.credentials_for(None).unwrap()["user"],
            bearer("shared")
        );
        assert_eq!(auth.user_scheme_of(None), None);

        let preferred = auth.user_scheme_of(Some(&caller));
        assert_eq!(preferred, Some("user"));
        let alts = vec![vec!["key".to_owned()], vec!["user".to_owned()]];
        assert_eq!(Auth::choose(&creds, Some(&alts), preferred), ["user"]);
        assert_eq!(Auth::choose(&creds, Some(&alts), None), ["key"]);
        // An operation the user's scheme does not cover keeps its own choice.
        let key_only = vec![vec!["key".to_owned()]];
        assert_eq!(Auth::choose(&creds, Some(&key_only), preferred), ["key"]);
        let open: Vec<Vec<String>> = vec![vec![]];
        assert!(Auth::choose(&creds, Some(&open), preferred).is_empty());
    }
}
