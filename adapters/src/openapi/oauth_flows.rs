//! A spec's OAuth 2.0 authorization code flows (OpenAPI 3.x `flows.authorizationCode`;
//! Swagger 2.0 `flow: accessCode`, normalized to the same), read for an upstream whose
//! users each connect their own account (`credentials: oauth`): which scheme their
//! tokens satisfy, where the authorization and token endpoints are, and which scopes
//! the imported operations need. The requests themselves are the OAuth client's
//! (`crate::oauth`); nothing here goes to the network.
//!
//! The scheme is the one named, else the one the imported operations' security
//! requirements reference, else the first the spec defines (by name); operations that
//! reference several make naming one necessary. Relative URLs resolve against the
//! spec's own URL when it was fetched over http(s) (OpenAPI 3.1's rule), else against
//! the API's base URL (its first server, or `base_url`).

use std::collections::{BTreeMap, BTreeSet};

use url::Url;

use super::model::{CodeFlowUrls, Operation, SecurityScheme};

/// One authorization code flow, ready to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFlow {
    /// The security scheme's name: the requirement a user's token satisfies.
    pub scheme: String,
    pub authorization_url: Url,
    pub token_url: Url,
    /// Where tokens are refreshed, when the spec names a place other than `token_url`.
    pub refresh_url: Option<Url>,
    /// Every scope the imported operations require from the scheme, sorted; empty
    /// when they name none.
    pub scopes: Vec<String>,
}

/// An authorization code scheme of the spec, with what the imported operations ask of
/// it.
#[derive(Debug)]
struct Candidate {
    urls: CodeFlowUrls,
    /// How many imported operations list it in a security requirement.
    operations: usize,
    scopes: BTreeSet<String>,
}

/// What [`read`] found, for [`Flows::choose`].
#[derive(Debug, Default)]
pub(super) struct Flows {
    candidates: BTreeMap<String, Candidate>,
    /// Every scheme of the spec, by name (to say what a wrong name could have been).
    schemes: Vec<String>,
    /// What relative URLs resolve against.
    base: Option<Url>,
}

/// The authorization code flows of `schemes`, with what `operations` (the imported
/// ones) require of each; relative URLs will resolve against `base`.
pub(super) fn read<'a>(
    schemes: &BTreeMap<String, SecurityScheme>,
    operations: impl IntoIterator<Item = &'a Operation>,
    base: Option<Url>,
) -> Flows {
    let mut candidates: BTreeMap<String, Candidate> = schemes
        .iter()
        .filter_map(|(name, scheme)| match scheme {
            SecurityScheme::OAuth2 {
                authorization_code: Some(urls),
                ..
            } => Some((
                name.clone(),
                Candidate {
                    urls: urls.clone(),
                    operations: 0,
                    scopes: BTreeSet::new(),
                },
            )),
            _ => None,
        })
        .collect();
    for op in operations {
        for (name, scopes) in &op.scopes {
            if let Some(c) = candidates.get_mut(name) {
                c.operations += 1;
                c.scopes.extend(scopes.iter().cloned());
            }
        }
    }
    Flows {
        candidates,
        schemes: schemes.keys().cloned().collect(),
        base,
    }
}

impl Flows {
    /// The flow users connect through: scheme `named` when given, else as the module
    /// docs say. The error says what the spec has and what to set.
    pub(super) fn choose(&self, named: Option<&str>) -> Result<CodeFlow, String> {
        let (name, candidate) = match named {
            Some(name) => match self.candidates.get_key_value(name) {
                Some(found) => found,
                None if self.schemes.iter().any(|s| s == name) => {
                    return Err(format!(
                        "the spec's security scheme '{name}' has no OAuth 2.0 authorizationCode \
                         flow (Swagger 2.0: accessCode) with an authorizationUrl and a tokenUrl{}",
                        self.listed()
                    ));
                }
                None => {
                    return Err(format!(
                        "the spec defines no security scheme '{name}' (it has {:?})",
                        self.schemes
                    ));
                }
            },
            None => self.default_choice()?,
        };
        let resolve = |what: &str, raw: &str| self.resolve(name, what, raw);
        Ok(CodeFlow {
            scheme: name.clone(),
            authorization_url: resolve("authorizationUrl", &candidate.urls.authorization_url)?,
            token_url: resolve("tokenUrl", &candidate.urls.token_url)?,
            refresh_url: match &candidate.urls.refresh_url {
                Some(raw) if raw != &candidate.urls.token_url => Some(resolve("refreshUrl", raw)?),
                _ => None,
            },
            scopes: candidate.scopes.iter().cloned().collect(),
        })
    }

    /// The scheme the operations reference, else the first one; an error when there
    /// is none or the choice is not the spec's to make.
    fn default_choice(&self) -> Result<(&String, &Candidate), String> {
        let referenced: Vec<_> = self
            .candidates
            .iter()
            .filter(|(_, c)| c.operations > 0)
            .collect();
        match referenced.as_slice() {
            [one] => Ok(*one),
            [] => self.candidates.iter().next().ok_or_else(|| {
                "the spec has no OAuth 2.0 security scheme with an authorizationCode flow \
                 (Swagger 2.0: accessCode) with an authorizationUrl and a tokenUrl, which \
                 each user's authorization needs"
                    .to_owned()
            }),
            several => {
                let names: Vec<&String> = several.iter().map(|(n, _)| *n).collect();
                Err(format!(
                    "the operations require several authorizationCode schemes ({names:?}): \
                     name the one users connect through (`oauth.scheme`)"
                ))
            }
        }
    }

    /// `raw` (the `what` of scheme `name`) as an absolute http(s) URL.
    fn resolve(&self, name: &str, what: &str, raw: &str) -> Result<Url, String> {
        let url = match (Url::parse(raw), &self.base) {
            (Ok(url), _) => url,
            (Err(url::ParseError::RelativeUrlWithoutBase), Some(base)) => {
                base.join(raw).map_err(|e| {
                    format!("security scheme '{name}': {what} '{raw}' cannot be resolved: {e}")
                })?
            }
            (Err(url::ParseError::RelativeUrlWithoutBase), None) => {
                return Err(format!(
                    "security scheme '{name}': {what} '{raw}' is relative, and there is no \
                     URL to resolve it against (the spec was read from a file and the API has \
                     no absolute server URL: set base_url)"
                ));
            }
            (Err(e), _) => {
                return Err(format!(
                    "security scheme '{name}': {what} '{raw}' is not a URL: {e}"
                ));
            }
        };
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(format!(
                "security scheme '{name}': {what} '{url}' is not an http(s) URL"
            ));
        }
        Ok(url)
    }

    /// ` (its authorizationCode schemes: [...])`, or nothing when it has none.
    fn listed(&self) -> String {
        if self.candidates.is_empty() {
            String::new()
        } else {
            let names: Vec<&String> = self.candidates.keys().collect();
            format!(" (its authorizationCode schemes: {names:?})")
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::config::OpenApiConfig;
    use super::super::import;
    use super::super::load::Documents;
    use super::*;

    /// The flows of `spec`, read from `spec_url` (`None`: a file), as an import with
    /// `config` finds them.
    fn flows_with(spec: Value, spec_url: Option<&str>, config: &OpenApiConfig) -> Flows {
        let base = spec_url.map(|u| Url::parse(u).unwrap());
        let docs = Documents::single(base, spec);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        match import::build("api", config, docs, deadline) {
            Ok(built) => built.flows,
            Err(e) => panic!("the spec imports: {e}"),
        }
    }

    fn flows(spec: Value, spec_url: Option<&str>) -> Flows {
        flows_with(spec, spec_url, &OpenApiConfig::from_path("unused"))
    }

    fn code(authorization: &str, token: &str) -> Value {
        json!({"type": "oauth2", "flows": {"authorizationCode": {
            "authorizationUrl": authorization, "tokenUrl": token,
            "scopes": {"read": "", "write": "", "admin": ""}}}})
    }

    fn op(id: &str, security: Value) -> Value {
        json!({"operationId": id, "security": security, "responses": {"200": {"description": "ok"}}})
    }

    #[test]
    fn relative_urls_resolve_against_the_spec_url_and_scopes_are_the_operations_union() {
        let spec = json!({
            "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "servers": [{"url": "https://api.example.com/v1"}],
            "security": [{"user": ["read"]}],
            "components": {"securitySchemes": {
                "user": {"type": "oauth2", "flows": {"authorizationCode": {
                    "authorizationUrl": "/oauth/authorize", "tokenUrl": "token",
                    "refreshUrl": "https://auth.example.com/refresh", "scopes": {}}}}
            }},
            "paths": {
                "/a": {"get": {"operationId": "a", "responses": {"200": {"description": "ok"}}}},
                "/b": {"post": op("b", json!([{"user": ["write", "read"]}, {"user": ["extra"]}]))},
                "/c": {"delete": op("c", json!([{"user": ["admin"]}]))},
            }
        });
        let flow = flows(
            spec.clone(),
            Some("https://docs.example.com/specs/openapi.json"),
        )
        .choose(None)
        .unwrap();
        assert_eq!(flow.scheme, "user");
        assert_eq!(
            flow.authorization_url.as_str(),
            "https://docs.example.com/oauth/authorize"
        );
        assert_eq!(
            flow.token_url.as_str(),
            "https://docs.example.com/specs/token"
        );
        assert_eq!(
            flow.refresh_url.as_ref().map(Url::as_str),
            Some("https://auth.example.com/refresh")
        );
        assert_eq!(flow.scopes, ["admin", "extra", "read", "write"]);

        // Read from a file: against the API's server instead.
        let flow = flows(spec.clone(), None).choose(None).unwrap();
        assert_eq!(
            flow.authorization_url.as_str(),
            "https://api.example.com/oauth/authorize"
        );
        assert_eq!(flow.token_url.as_str(), "https://api.example.com/token");

        // Only the imported operations count: without `c`, no `admin`.
        let mut config = OpenApiConfig::from_path("unused");
        config.filters.exclude.methods = vec!["delete".into()];
        let flow = flows_with(spec, None, &config).choose(None).unwrap();
        assert_eq!(flow.scopes, ["extra", "read", "write"]);
    }

    #[test]
    fn a_relative_url_with_nothing_to_resolve_it_against_is_an_error() {
        let spec = json!({
            "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "servers": [{"url": "/v1"}],
            "components": {"securitySchemes": {"user": code("/authorize", "/token")}},
            "paths": {"/a": {"get": op("a", json!([{"user": []}]))}}
        });
        let e = flows(spec, None).choose(None).unwrap_err();
        assert!(e.contains("'/authorize' is relative"), "{e}");
        let spec = json!({
            "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "components": {"securitySchemes": {"user": code("ftp://x.example/a", "https://x.example/t")}},
            "paths": {}
        });
        let e = flows(spec, None).choose(None).unwrap_err();
        assert!(e.contains("not an http(s) URL"), "{e}");
    }

    #[test]
    fn the_scheme_the_operations_use_is_chosen_unless_one_is_named() {
        let spec = |paths: Value| {
            json!({
                "openapi": "3.1.0", "info": {"title": "t", "version": "1"},
                "components": {"securitySchemes": {
                    "a_first": code("https://a.example/authorize", "https://a.example/token"),
                    "b_used": code("https://b.example/authorize", "https://b.example/token"),
                    "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                    "machine": {"type": "oauth2", "flows": {"clientCredentials": {
                        "tokenUrl": "https://m.example/token", "scopes": {}}}},
                }},
                "paths": paths
            })
        };
        let url = Some("https://docs.example.com/openapi.json");
        let one = flows(
            spec(json!({
                "/x": {"get": op("x", json!([{"key": []}, {"b_used": ["read"]}]))},
                "/y": {"get": op("y", json!([{"machine": []}]))},
            })),
            url,
        );
        let flow = one.choose(None).unwrap();
        assert_eq!(flow.scheme, "b_used");
        assert_eq!(flow.token_url.as_str(), "https://b.example/token");
        assert_eq!(flow.scopes, ["read"]);
        // Named: that one, whatever the operations use.
        let named = one.choose(Some("a_first")).unwrap();
        assert_eq!(named.scheme, "a_first");
        assert_eq!(
            named.authorization_url.as_str(),
            "https://a.example/authorize"
        );
        assert_eq!(named.scopes, Vec::<String>::new());
        // A name of no scheme, or of one without the flow: said so.
        let e = one.choose(Some("nope")).unwrap_err();
        assert!(e.contains("no security scheme 'nope'"), "{e}");
        let e = one.choose(Some("machine")).unwrap_err();
        assert!(
            e.contains("'machine' has no OAuth 2.0 authorizationCode flow"),
            "{e}"
        );
        assert!(e.contains("a_first"), "{e}");

        // None used: the first by name.
        let unused = flows(
            spec(json!({"/x": {"get": op("x", json!([{"key": []}]))}})),
            url,
        );
        assert_eq!(unused.choose(None).unwrap().scheme, "a_first");

        // Both used: not a guess to make.
        let both = flows(
            spec(json!({
                "/x": {"get": op("x", json!([{"a_first": []}]))},
                "/y": {"get": op("y", json!([{"b_used": []}]))},
            })),
            url,
        );
        let e = both.choose(None).unwrap_err();
        assert!(e.contains("several") && e.contains("oauth.scheme"), "{e}");
        assert_eq!(both.choose(Some("b_used")).unwrap().scheme, "b_used");
    }

    #[test]
    fn a_spec_without_an_authorization_code_flow_says_so() {
        let spec = json!({
            "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "components": {"securitySchemes": {
                "machine": {"type": "oauth2", "flows": {"clientCredentials": {
                    "tokenUrl": "https://m.example/token", "scopes": {}}}},
                "browser": {"type": "oauth2", "flows": {"implicit": {
                    "authorizationUrl": "https://m.example/authorize", "scopes": {}}}},
                // Without its tokenUrl the flow cannot be followed.
                "half": {"type": "oauth2", "flows": {"authorizationCode": {
                    "authorizationUrl": "https://m.example/authorize", "scopes": {}}}},
            }},
            "paths": {"/x": {"get": op("x", json!([{"half": []}]))}}
        });
        let e = flows(spec, Some("https://docs.example.com/o.json"))
            .choose(None)
            .unwrap_err();
        assert!(
            e.contains("no OAuth 2.0 security scheme with an authorizationCode flow"),
            "{e}"
        );
        let none = json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {}});
        assert!(flows(none, None).choose(None).is_err());
    }

    #[test]
    fn a_swagger_2_access_code_flow_is_read_the_same() {
        let spec = json!({
            "swagger": "2.0", "info": {"title": "t", "version": "1"},
            "host": "api.example.com", "basePath": "/v2", "schemes": ["https"],
            "securityDefinitions": {
                "petstore_auth": {"type": "oauth2", "flow": "accessCode",
                    "authorizationUrl": "https://auth.example.com/oauth/authorize",
                    "tokenUrl": "/oauth/token",
                    "scopes": {"read:pets": "", "write:pets": ""}},
                "app": {"type": "oauth2", "flow": "application",
                    "tokenUrl": "https://auth.example.com/token", "scopes": {}},
            },
            "security": [{"petstore_auth": ["read:pets"]}],
            "paths": {
                "/pets": {
                    "get": {"operationId": "list", "responses": {"200": {"description": "ok"}}},
                    "post": {"operationId": "add",
                        "security": [{"petstore_auth": ["write:pets", "read:pets"]}],
                        "responses": {"200": {"description": "ok"}}},
                },
            }
        });
        let flow = flows(spec, None).choose(None).unwrap();
        assert_eq!(flow.scheme, "petstore_auth");
        assert_eq!(
            flow.authorization_url.as_str(),
            "https://auth.example.com/oauth/authorize"
        );
        // Relative to the API (host and basePath) when read from a file.
        assert_eq!(
            flow.token_url.as_str(),
            "https://api.example.com/oauth/token"
        );
        assert_eq!(flow.refresh_url, None);
        assert_eq!(flow.scopes, ["read:pets", "write:pets"]);
    }
}
