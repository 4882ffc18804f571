//! Finding the authorization server of a protected resource: RFC 9728 protected-resource
//! metadata, then RFC 8414 / OpenID Connect discovery of the first authorization
//! server it lists, each document checked against what it must describe. Also the two
//! decisions that depend on the result only: which scope to ask for (the MCP spec's
//! scope selection strategy) and whether an authorization response's `iss` is
//! acceptable (RFC 9207).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use super::http::{FetchError, get_json, shown, shown_str};
use super::{Challenge, OAuthClient, OAuthError};

/// What a protected resource and its authorization server said about themselves: all
/// the rest of the module needs. Persist it with the connection; discover again when
/// the resource answers 401 to a token that worked (its authorization server may have
/// changed, see [`crate::oauth::RegisteredClient::is_for`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    /// The protected resource's identifier, as its metadata states it: the RFC 8707
    /// `resource` of every authorization and token request. Empty for a server known
    /// by its endpoints alone ([`OAuthClient::discover_endpoints`]): then none is sent.
    pub resource: String,
    /// Where the protected-resource metadata was found.
    pub resource_metadata_url: String,
    /// The resource's own `scopes_supported` (RFC 9728), the scope-selection fallback.
    pub resource_scopes_supported: Option<Vec<String>>,
    /// The authorization server's issuer identifier, exactly as its metadata states it
    /// (and as RFC 9207 `iss` must repeat it); empty when no metadata named it.
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    /// Where tokens are refreshed when that is not the token endpoint (an OpenAPI
    /// flow's `refreshUrl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_endpoint: Option<String>,
    pub registration_endpoint: Option<String>,
    pub revocation_endpoint: Option<String>,
    /// The authorization server's `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub token_endpoint_auth_signing_alg_values_supported: Option<Vec<String>>,
    pub grant_types_supported: Option<Vec<String>>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub client_id_metadata_document_supported: bool,
    pub authorization_response_iss_parameter_supported: bool,
}

/// RFC 9728 §2, the part used here.
#[derive(Deserialize)]
struct ResourceMetadata {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
    scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 §2 (and OpenID Connect Discovery §3), the part used here.
#[derive(Deserialize)]
struct ServerMetadata {
    issuer: String,
    authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    registration_endpoint: Option<String>,
    revocation_endpoint: Option<String>,
    scopes_supported: Option<Vec<String>>,
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
    token_endpoint_auth_signing_alg_values_supported: Option<Vec<String>>,
    grant_types_supported: Option<Vec<String>>,
    code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    client_id_metadata_document_supported: bool,
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
}

/// `url` with `path` instead of its own, and no query, fragment or user info.
fn with_path(url: &Url, path: &str) -> Url {
    let mut u = url.clone();
    u.set_path(path);
    u.set_query(None);
    u.set_fragment(None);
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u
}

/// RFC 9728 §3.1 and the MCP spec's fallback: the path-based well-known URL first
/// (when the resource has a path), then the one at the root.
fn resource_metadata_urls(resource: &Url) -> Vec<Url> {
    const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";
    let path = resource.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(with_path(resource, &format!("{WELL_KNOWN}{path}")));
    }
    urls.push(with_path(resource, WELL_KNOWN));
    urls
}

/// The MCP spec's order: for an issuer with a path, RFC 8414 path insertion, OIDC path
/// insertion, then OIDC path appending; without one, RFC 8414 then OIDC at the root.
fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    const OAUTH: &str = "/.well-known/oauth-authorization-server";
    const OIDC: &str = "/.well-known/openid-configuration";
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![with_path(issuer, OAUTH), with_path(issuer, OIDC)]
    } else {
        vec![
            with_path(issuer, &format!("{OAUTH}{path}")),
            with_path(issuer, &format!("{OIDC}{path}")),
            with_path(issuer, &format!("{path}{OIDC}")),
        ]
    }
}

/// Whether the metadata's `resource` covers the URL the client is calling: the same
/// origin, and its path equal to the called one or a whole-segment prefix of it (a
/// resource's root metadata names the origin while the client calls `/mcp`; RFC 9728
/// §3.3 and the MCP spec's canonical server URI). Anything else is another resource:
/// a token obtained for it must not be sent here (RFC 9728 §7.3).
fn resource_covers(stated: &Url, called: &Url) -> bool {
    if stated.scheme() != called.scheme()
        || stated.host_str() != called.host_str()
        || stated.port_or_known_default() != called.port_or_known_default()
        || stated.fragment().is_some()
    {
        return false;
    }
    let stated_path = stated.path().trim_end_matches('/');
    let called_path = called.path().trim_end_matches('/');
    stated_path.is_empty()
        || called_path == stated_path
        || called_path
            .strip_prefix(stated_path)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// RFC 8414 §3.3: the metadata's `issuer` must be the issuer identifier its URL was
/// built from. Identical strings, with one allowance: an issuer without a path may be
/// written with or without its trailing slash (`https://as.example` and
/// `https://as.example/` are the same URI, RFC 3986 §6.2.3, and resource servers that
/// pass URLs through a URL type add the slash). No other normalization.
fn same_issuer(used: &str, stated: &str) -> bool {
    if used == stated {
        return true;
    }
    let root = |s: &str| Url::parse(s).is_ok_and(|u| u.path() == "/" && u.query().is_none());
    (used.strip_suffix('/') == Some(stated) || stated.strip_suffix('/') == Some(used))
        && root(used)
        && root(stated)
}

/// An endpoint URL of the metadata, when it is an absolute http(s) URL.
fn endpoint(name: &str, value: Option<String>, at: &Url) -> Result<Option<String>, OAuthError> {
    let Some(value) = value else {
        return Ok(None);
    };
    match Url::parse(&value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(Some(value)),
        _ => Err(OAuthError::Discovery(format!(
            "the authorization server metadata at {} has an invalid {name} ({})",
            shown(at),
            shown_str(&value)
        ))),
    }
}

/// What authorization server metadata found at `meta_url` says, for no resource yet.
fn described(meta_url: &Url, meta: ServerMetadata) -> Result<Discovery, OAuthError> {
    let token_endpoint =
        endpoint("token_endpoint", meta.token_endpoint, meta_url)?.ok_or_else(|| {
            OAuthError::Discovery(format!(
                "the authorization server metadata at {} has no token_endpoint",
                shown(meta_url)
            ))
        })?;
    Ok(Discovery {
        resource: String::new(),
        resource_metadata_url: String::new(),
        resource_scopes_supported: None,
        issuer: meta.issuer,
        authorization_endpoint: endpoint(
            "authorization_endpoint",
            meta.authorization_endpoint,
            meta_url,
        )?,
        token_endpoint,
        refresh_endpoint: None,
        registration_endpoint: endpoint(
            "registration_endpoint",
            meta.registration_endpoint,
            meta_url,
        )?,
        revocation_endpoint: endpoint("revocation_endpoint", meta.revocation_endpoint, meta_url)?,
        scopes_supported: meta.scopes_supported,
        token_endpoint_auth_methods_supported: meta.token_endpoint_auth_methods_supported,
        token_endpoint_auth_signing_alg_values_supported: meta
            .token_endpoint_auth_signing_alg_values_supported,
        grant_types_supported: meta.grant_types_supported,
        code_challenge_methods_supported: meta.code_challenge_methods_supported,
        client_id_metadata_document_supported: meta.client_id_metadata_document_supported,
        authorization_response_iss_parameter_supported: meta
            .authorization_response_iss_parameter_supported,
    })
}

/// The URLs a search tried and why each did not do.
#[derive(Default)]
struct Tried {
    why: Vec<String>,
    /// Some server answered (or the guard refused): not a passing failure.
    answered: bool,
}

impl Tried {
    fn failed(&mut self, url: &Url, e: &FetchError) {
        self.answered |= !matches!(e, FetchError::Unreachable(_));
        self.why.push(format!("{}: {}", shown(url), e.describe()));
    }

    fn invalid(&mut self, url: &Url, e: &serde_json::Error) {
        self.answered = true;
        self.why
            .push(format!("{}: not valid metadata ({e})", shown(url)));
    }

    /// [`OAuthError::Transport`] when no server could be reached at all (try again
    /// later), else [`OAuthError::Discovery`].
    fn error(self, what: &str) -> OAuthError {
        let text = format!("{what} ({})", self.why.join("; "));
        if self.answered {
            OAuthError::Discovery(text)
        } else {
            OAuthError::Transport(text)
        }
    }
}

impl OAuthClient {
    /// Discovers how `resource` (the URL the gateway calls) is protected: its
    /// protected-resource metadata (from the challenge's `resource_metadata` when the
    /// resource gave one, else the well-known URLs), checked to describe `resource`;
    /// then the metadata of its first authorization server, checked to be that
    /// server's. The error names every URL tried and why it did not do.
    pub async fn discover(
        &self,
        resource: &Url,
        challenge: Option<&Challenge>,
    ) -> Result<Discovery, OAuthError> {
        let (prm_url, prm) = self.resource_metadata(resource, challenge).await?;
        let stated = Url::parse(&prm.resource).map_err(|_| {
            OAuthError::Discovery(format!(
                "the protected-resource metadata at {} states a resource that is not a URL",
                shown(&prm_url)
            ))
        })?;
        if !resource_covers(&stated, resource) {
            return Err(OAuthError::Discovery(format!(
                "the protected-resource metadata at {} is for resource {}, not for {} \
                 (RFC 9728 §3.3): refusing to authorize",
                shown(&prm_url),
                shown(&stated),
                shown(resource)
            )));
        }
        let Some(server) = prm.authorization_servers.first() else {
            return Err(OAuthError::Discovery(format!(
                "the protected-resource metadata at {} lists no authorization_servers",
                shown(&prm_url)
            )));
        };
        let (meta_url, meta) = self.server_metadata(server).await?;
        let mut discovery = described(&meta_url, meta)?;
        discovery.resource = prm.resource;
        discovery.resource_metadata_url = prm_url.to_string();
        discovery.resource_scopes_supported = prm.scopes_supported;
        Ok(discovery)
    }

    /// What authorization server `issuer` says of itself, for `resource`.
    pub(super) async fn discover_server(
        &self,
        issuer: &str,
        resource: &str,
    ) -> Result<Discovery, OAuthError> {
        let (meta_url, meta) = self.server_metadata(issuer).await?;
        let mut discovery = described(&meta_url, meta)?;
        discovery.resource = resource.to_owned();
        Ok(discovery)
    }

    /// How to reach an authorization server known by its endpoints alone, as an
    /// OpenAPI spec's authorization code flow names them (no protected-resource
    /// metadata, so no `resource` is sent): those endpoints, with what RFC 8414 / OIDC
    /// metadata at the token endpoint's origin adds (the issuer, registration and
    /// revocation endpoints, PKCE and client authentication methods) when it describes
    /// the same token endpoint. Without such metadata the issuer is not known (empty,
    /// see [`Discovery::check_issuer`]) and PKCE S256 is used all the same: OAuth 2.1
    /// requires it, and a server without it ignores its parameters.
    pub async fn discover_endpoints(
        &self,
        authorization: &Url,
        token: &Url,
        refresh: Option<&Url>,
    ) -> Discovery {
        let origin = token.origin().ascii_serialization();
        let known = match self.server_metadata(&origin).await {
            Ok((meta_url, meta)) => match described(&meta_url, meta) {
                Ok(d) if Url::parse(&d.token_endpoint).ok().as_ref() == Some(token) => Some(d),
                Ok(_) => {
                    tracing::debug!(url = %shown(&meta_url), "the authorization server metadata names another token endpoint; not used");
                    None
                }
                Err(e) => {
                    tracing::debug!(error = %e, "authorization server metadata not used");
                    None
                }
            },
            Err(e) => {
                tracing::debug!(error = %e, "no authorization server metadata");
                None
            }
        };
        let mut discovery = known.unwrap_or_else(|| Discovery {
            resource: String::new(),
            resource_metadata_url: String::new(),
            resource_scopes_supported: None,
            issuer: String::new(),
            authorization_endpoint: None,
            token_endpoint: String::new(),
            refresh_endpoint: None,
            registration_endpoint: None,
            revocation_endpoint: None,
            scopes_supported: None,
            token_endpoint_auth_methods_supported: None,
            token_endpoint_auth_signing_alg_values_supported: None,
            grant_types_supported: None,
            code_challenge_methods_supported: Some(vec!["S256".into()]),
            client_id_metadata_document_supported: false,
            authorization_response_iss_parameter_supported: false,
        });
        // The spec's endpoints are the ones its operator chose.
        discovery.authorization_endpoint = Some(authorization.to_string());
        discovery.token_endpoint = token.to_string();
        discovery.refresh_endpoint = refresh.map(Url::to_string);
        discovery
    }

    /// The protected-resource metadata and where it was found: only the challenge's URL
    /// when it has one (the MCP spec: use it when present), else the well-known URLs in
    /// order.
    async fn resource_metadata(
        &self,
        resource: &Url,
        challenge: Option<&Challenge>,
    ) -> Result<(Url, ResourceMetadata), OAuthError> {
        let urls = match challenge.and_then(|c| c.resource_metadata.as_deref()) {
            Some(given) => vec![resource.join(given).map_err(|_| {
                OAuthError::Discovery(format!(
                    "the resource's challenge names a resource_metadata that is not a URL ({})",
                    shown_str(given)
                ))
            })?],
            None => resource_metadata_urls(resource),
        };
        let mut tried = Tried::default();
        for url in urls {
            tracing::debug!(url = %shown(&url), "fetching protected-resource metadata");
            match get_json(&self.guard, &url, self.timeout).await {
                Ok(doc) => match serde_json::from_value::<ResourceMetadata>(doc) {
                    Ok(prm) => return Ok((url, prm)),
                    Err(e) => tried.invalid(&url, &e),
                },
                Err(e) => tried.failed(&url, &e),
            }
        }
        Err(tried.error(&format!(
            "no protected-resource metadata for {}",
            shown(resource)
        )))
    }

    /// The metadata of authorization server `issuer` and where it was found. A document
    /// that names another issuer ends the search: it must not be used (RFC 8414 §3.3).
    async fn server_metadata(&self, issuer: &str) -> Result<(Url, ServerMetadata), OAuthError> {
        let parsed = Url::parse(issuer)
            .ok()
            .filter(|u| u.query().is_none() && u.fragment().is_none())
            .ok_or_else(|| {
                OAuthError::Discovery(format!(
                    "the authorization server '{}' is not a valid issuer URL",
                    shown_str(issuer)
                ))
            })?;
        let mut tried = Tried::default();
        for url in server_metadata_urls(&parsed) {
            tracing::debug!(url = %shown(&url), "fetching authorization server metadata");
            let doc = match get_json(&self.guard, &url, self.timeout).await {
                Ok(doc) => doc,
                Err(e) => {
                    tried.failed(&url, &e);
                    continue;
                }
            };
            let stated = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
            if !same_issuer(issuer, stated) {
                return Err(OAuthError::Discovery(format!(
                    "the authorization server metadata at {} states issuer '{}', not '{}' \
                     (RFC 8414 §3.3): refusing to use it",
                    shown(&url),
                    shown_str(stated),
                    shown_str(issuer)
                )));
            }
            match serde_json::from_value::<ServerMetadata>(doc) {
                Ok(meta) => return Ok((url, meta)),
                Err(e) => tried.invalid(&url, &e),
            }
        }
        Err(tried.error(&format!(
            "no authorization server metadata for {}",
            shown(&parsed)
        )))
    }
}

/// Every scope of `a` then those of `b` not in it, space-separated; `None` when both
/// are empty. The scope of a re-authorization after a 403 `insufficient_scope` is the
/// union of what was granted before and what the challenge asks (SEP-2350), so that
/// the new token can still do what the old one could.
pub fn union_scopes(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for s in a
        .into_iter()
        .chain(b)
        .flat_map(|s| s.split_ascii_whitespace())
    {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

impl Discovery {
    /// The scope to ask for, as the MCP spec's scope selection strategy says: the
    /// challenge's `scope` when it has one, else every scope of the resource's
    /// `scopes_supported`, else none (the parameter is left out). When the
    /// authorization server lists `offline_access` in its `scopes_supported` and does
    /// not rule out the `refresh_token` grant, it is added, so that the connection
    /// gets a refresh token (SEP-2207); never when the server does not list it.
    pub fn scope_for(&self, challenge: Option<&Challenge>) -> Option<String> {
        let chosen = match challenge.and_then(|c| c.scope.as_deref()) {
            Some(scope) => union_scopes(Some(scope), None),
            None => self
                .resource_scopes_supported
                .as_ref()
                .and_then(|s| union_scopes(Some(&s.join(" ")), None)),
        }?;
        Some(self.with_offline_access(chosen))
    }

    /// The scope of a re-authorization after a 403 `insufficient_scope` (step-up): what
    /// was granted before (`granted`, [`crate::oauth::TokenSet::scope`]) and what the
    /// challenge asks, per [`Discovery::scope_for`].
    pub fn step_up_scope(&self, granted: Option<&str>, challenge: &Challenge) -> Option<String> {
        union_scopes(granted, self.scope_for(Some(challenge)).as_deref())
    }

    fn with_offline_access(&self, scope: String) -> String {
        const OFFLINE: &str = "offline_access";
        let listed = self
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == OFFLINE));
        let refresh = self
            .grant_types_supported
            .as_ref()
            .is_none_or(|g| g.iter().any(|g| g == "refresh_token"));
        if listed && refresh && !scope.split_ascii_whitespace().any(|s| s == OFFLINE) {
            format!("{scope} {OFFLINE}")
        } else {
            scope
        }
    }

    /// Whether the server supports PKCE with S256, which the MCP spec requires before
    /// any authorization request.
    pub fn supports_pkce_s256(&self) -> bool {
        self.code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m == "S256"))
    }

    /// RFC 9207 §2.4 on the `iss` parameter of an authorization response (the callback's
    /// query): present, it must equal this server's issuer by simple string comparison
    /// (no normalization at all, not even a trailing slash), whether or not the server
    /// advertised the parameter; absent, it is refused when the server advertised
    /// `authorization_response_iss_parameter_supported`. Check before exchanging the
    /// code; on error, drop the response (never exchange its code).
    ///
    /// A server whose issuer is not known (no metadata named it, see
    /// [`OAuthClient::discover_endpoints`]) leaves nothing to compare an `iss` with:
    /// any is taken, as a client without RFC 9207 takes the response.
    pub fn check_issuer(&self, iss: Option<&str>) -> Result<(), OAuthError> {
        match iss {
            _ if self.issuer.is_empty() => Ok(()),
            Some(iss) if iss == self.issuer => Ok(()),
            Some(iss) => Err(OAuthError::InsecureIssuer(format!(
                "the authorization response comes from issuer '{}', but the authorization \
                 was requested from '{}' (RFC 9207)",
                shown_str(iss),
                shown_str(&self.issuer)
            ))),
            None if self.authorization_response_iss_parameter_supported => {
                Err(OAuthError::InsecureIssuer(format!(
                    "the authorization response has no iss parameter, although '{}' \
                     advertises authorization_response_iss_parameter_supported (RFC 9207)",
                    shown_str(&self.issuer)
                )))
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn resource_metadata_is_looked_for_path_first() {
        let urls: Vec<String> = resource_metadata_urls(&u("https://mcp.example.com/api/mcp?x=1"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "https://mcp.example.com/.well-known/oauth-protected-resource/api/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource"
            ]
        );
        let urls = resource_metadata_urls(&u("https://mcp.example.com/"));
        assert_eq!(urls.len(), 1);
    }

    #[test]
    fn server_metadata_urls_follow_the_spec_order() {
        let urls: Vec<String> = server_metadata_urls(&u("https://as.example.com/tenant1/"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "https://as.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://as.example.com/.well-known/openid-configuration/tenant1",
                "https://as.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        let urls: Vec<String> = server_metadata_urls(&u("https://as.example.com"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "https://as.example.com/.well-known/oauth-authorization-server",
                "https://as.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_resource_covers_itself_and_what_is_under_it() {
        let called = u("https://mcp.example.com/mcp");
        assert!(resource_covers(&u("https://mcp.example.com/mcp"), &called));
        assert!(resource_covers(&u("https://mcp.example.com/mcp/"), &called));
        assert!(resource_covers(&u("https://mcp.example.com"), &called));
        assert!(resource_covers(&u("https://MCP.example.com:443/"), &called));
        assert!(!resource_covers(
            &u("https://evil.example.com/mcp"),
            &called
        ));
        assert!(!resource_covers(&u("http://mcp.example.com/mcp"), &called));
        assert!(!resource_covers(
            &u("https://mcp.example.com:8443/mcp"),
            &called
        ));
        assert!(!resource_covers(&u("https://mcp.example.com/mc"), &called));
        assert!(!resource_covers(
            &u("https://mcp.example.com/mcp/x"),
            &called
        ));
        assert!(!resource_covers(
            &u("https://mcp.example.com/mcp#f"),
            &called
        ));
    }

    #[test]
    fn issuers_compare_as_strings_but_for_a_root_slash() {
        assert!(same_issuer("https://as.example", "https://as.example"));
        assert!(same_issuer("https://as.example/", "https://as.example"));
        assert!(same_issuer("https://as.example", "https://as.example/"));
        assert!(!same_issuer(
            "https://as.example/t",
            "https://as.example/t/"
        ));
        assert!(!same_issuer("https://as.example", "https://AS.example"));
        assert!(!same_issuer(
            "https://as.example",
            "https://attacker.example"
        ));
        assert!(!same_issuer("https://as.example", ""));
    }

    fn discovery() -> Discovery {
        Discovery {
            resource: "https://mcp.example.com/mcp".into(),
            resource_metadata_url: String::new(),
            resource_scopes_supported: None,
            issuer: "https://as.example.com".into(),
            authorization_endpoint: None,
            token_endpoint: "https://as.example.com/token".into(),
            refresh_endpoint: None,
            registration_endpoint: None,
            revocation_endpoint: None,
            scopes_supported: None,
            token_endpoint_auth_methods_supported: None,
            token_endpoint_auth_signing_alg_values_supported: None,
            grant_types_supported: None,
            code_challenge_methods_supported: None,
            client_id_metadata_document_supported: false,
            authorization_response_iss_parameter_supported: false,
        }
    }

    #[test]
    fn scope_selection() {
        let mut d = discovery();
        let challenge = Challenge {
            scope: Some("mcp:basic".into()),
            ..Challenge::default()
        };
        // Nothing known: omitted.
        assert_eq!(d.scope_for(None), None);
        assert_eq!(d.scope_for(Some(&Challenge::default())), None);
        // The resource's scopes_supported, all of them.
        d.resource_scopes_supported = Some(vec!["a".into(), "b".into()]);
        assert_eq!(d.scope_for(None).as_deref(), Some("a b"));
        // The challenge wins over it.
        assert_eq!(d.scope_for(Some(&challenge)).as_deref(), Some("mcp:basic"));
        // offline_access when the authorization server lists it...
        d.scopes_supported = Some(vec!["mcp:basic".into(), "offline_access".into()]);
        assert_eq!(
            d.scope_for(Some(&challenge)).as_deref(),
            Some("mcp:basic offline_access")
        );
        // ...unless it rules out refresh tokens.
        d.grant_types_supported = Some(vec!["authorization_code".into()]);
        assert_eq!(d.scope_for(Some(&challenge)).as_deref(), Some("mcp:basic"));
        d.grant_types_supported = Some(vec!["authorization_code".into(), "refresh_token".into()]);
        assert_eq!(d.scope_for(None).as_deref(), Some("a b offline_access"));
        // Never when it is not listed.
        d.scopes_supported = Some(vec!["mcp:basic".into(), "mcp:read".into()]);
        assert_eq!(d.scope_for(None).as_deref(), Some("a b"));
    }

    #[test]
    fn step_up_keeps_what_was_granted() {
        let d = discovery();
        let challenge = Challenge {
            scope: Some("mcp:write".into()),
            error: Some("insufficient_scope".into()),
            ..Challenge::default()
        };
        assert_eq!(
            d.step_up_scope(Some("mcp:basic"), &challenge).as_deref(),
            Some("mcp:basic mcp:write")
        );
        assert_eq!(
            d.step_up_scope(Some("mcp:write mcp:basic"), &challenge)
                .as_deref(),
            Some("mcp:write mcp:basic")
        );
        assert_eq!(union_scopes(None, Some("  ")), None);
    }

    #[test]
    fn iss_is_compared_exactly() {
        let mut d = discovery();
        // Not advertised: absent is fine, present must match.
        assert!(d.check_issuer(None).is_ok());
        assert!(d.check_issuer(Some("https://as.example.com")).is_ok());
        assert!(matches!(
            d.check_issuer(Some("https://evil.example.com")),
            Err(OAuthError::InsecureIssuer(_))
        ));
        // Advertised: absent is refused.
        d.authorization_response_iss_parameter_supported = true;
        assert!(matches!(
            d.check_issuer(None),
            Err(OAuthError::InsecureIssuer(_))
        ));
        assert!(d.check_issuer(Some("https://as.example.com")).is_ok());
        // No normalization: a trailing slash or another case is another issuer.
        for variant in [
            "https://as.example.com/",
            "HTTPS://as.example.com",
            "https://AS.example.com",
            "https://as.example.com:443",
        ] {
            assert!(
                matches!(
                    d.check_issuer(Some(variant)),
                    Err(OAuthError::InsecureIssuer(_))
                ),
                "{variant}"
            );
        }
    }
}
