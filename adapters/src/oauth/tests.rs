//! The OAuth client against a resource and an authorization server served by axum on
//! 127.0.0.1 in each test: what it fetches, in which order, what it sends, and what it
//! refuses. Shaped after the MCP conformance suite's client auth scenarios.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;

use super::*;
use crate::Secret;

/// A request as the test server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
    body: String,
}

impl Seen {
    fn form(&self) -> HashMap<String, String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    /// The id and secret of a Basic `Authorization` header.
    fn basic(&self) -> Option<String> {
        let b64 = self.authorization.as_deref()?.strip_prefix("Basic ")?;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        Some(String::from_utf8(raw).unwrap())
    }
}

type Hook = Arc<dyn Fn(&Seen) -> (u16, Value) + Send + Sync>;

/// One server on 127.0.0.1 playing whatever the test routes to it: a resource, an
/// authorization server, or both. Unrouted paths answer 404 like a plain web server.
#[derive(Clone)]
struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    routes: Arc<Mutex<HashMap<(String, String), Hook>>>,
}

impl Server {
    async fn start() -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let server = Server {
            base,
            seen: Arc::default(),
            routes: Arc::default(),
        };
        let state = server.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = state.clone();
                async move { state.answer(method, uri, headers, body) }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        server
    }

    fn answer(&self, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
        let seen = Seen {
            method: method.to_string(),
            path: uri.path().to_owned(),
            authorization: headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned()),
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        self.seen.lock().unwrap().push(seen.clone());
        let hook = self
            .routes
            .lock()
            .unwrap()
            .get(&(seen.method.clone(), seen.path.clone()))
            .cloned();
        match hook {
            Some(hook) => {
                let (status, body) = hook(&seen);
                (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
            }
            None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn route(
        &self,
        method: &str,
        path: &str,
        hook: impl Fn(&Seen) -> (u16, Value) + Send + Sync + 'static,
    ) {
        self.routes
            .lock()
            .unwrap()
            .insert((method.to_owned(), path.to_owned()), Arc::new(hook));
    }

    fn json(&self, method: &str, path: &str, status: u16, body: Value) {
        self.route(method, path, move |_| (status, body.clone()));
    }

    /// Every path requested, in order.
    fn paths(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.path.clone())
            .collect()
    }

    fn seen_at(&self, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path == path)
            .cloned()
            .collect()
    }

    fn last(&self, path: &str) -> Seen {
        self.seen_at(path)
            .pop()
            .unwrap_or_else(|| panic!("no request to {path}"))
    }
}

fn client() -> OAuthClient {
    OAuthClient::new(true, Duration::from_secs(5)).unwrap()
}

/// Authorization server metadata at `base` + `prefix`, as the suite's server writes it.
fn as_metadata(base: &str, prefix: &str, extra: Value) -> Value {
    let mut meta = json!({
        "issuer": format!("{base}{prefix}"),
        "authorization_endpoint": format!("{base}{prefix}/authorize"),
        "token_endpoint": format!("{base}{prefix}/token"),
        "registration_endpoint": format!("{base}{prefix}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    });
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            meta.as_object_mut().unwrap().remove(k);
        } else {
            meta[k] = v.clone();
        }
    }
    meta
}

/// A resource at `/mcp` with path-based metadata naming `server` + `prefix` as its
/// authorization server, which serves RFC 8414 metadata at the root well-known path.
async fn setup(extra: Value) -> (Server, Url) {
    let s = Server::start().await;
    s.json(
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
        json!({"resource": s.url("/mcp"), "authorization_servers": [s.base]}),
    );
    s.json(
        "GET",
        "/.well-known/oauth-authorization-server",
        200,
        as_metadata(&s.base, "", extra),
    );
    let resource = Url::parse(&s.url("/mcp")).unwrap();
    (s, resource)
}

fn challenge_at(url: String) -> Challenge {
    Challenge {
        resource_metadata: Some(url),
        ..Challenge::default()
    }
}

fn identity() -> ClientIdentity {
    ClientIdentity {
        client_name: "toolgate".into(),
        redirect_uri: "http://localhost:3000/callback".into(),
        metadata_url: None,
        preregistered: None,
    }
}

fn token_answer(token: &str, refresh: Option<&str>) -> Value {
    let mut v = json!({"access_token": token, "token_type": "bearer", "expires_in": 3600});
    if let Some(r) = refresh {
        v["refresh_token"] = json!(r);
    }
    v
}

// ---- discovery: the four metadata locations of the suite's metadata-* scenarios ----

#[tokio::test]
async fn metadata_default_prm_from_the_challenge_and_rfc8414_at_the_root() {
    let (s, resource) = setup(json!({})).await;
    let challenge = Challenge::parse(&format!(
        r#"Bearer resource_metadata="{}""#,
        s.url("/.well-known/oauth-protected-resource/mcp")
    ));
    let d = client()
        .discover(&resource, challenge.as_ref())
        .await
        .unwrap();
    assert_eq!(d.resource, s.url("/mcp"));
    assert_eq!(d.issuer, s.base);
    assert_eq!(d.token_endpoint, s.url("/token"));
    assert_eq!(d.authorization_endpoint, Some(s.url("/authorize")));
    assert_eq!(d.registration_endpoint, Some(s.url("/register")));
    assert!(d.supports_pkce_s256());
    // Never the root PRM (the suite's prm-priority-order trap).
    assert_eq!(
        s.paths(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server"
        ]
    );
}

#[tokio::test]
async fn metadata_var1_path_prm_by_well_known_and_oidc_at_the_root() {
    let s = Server::start().await;
    s.json(
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
        json!({"resource": s.url("/mcp"), "authorization_servers": [s.base]}),
    );
    s.json(
        "GET",
        "/.well-known/openid-configuration",
        200,
        as_metadata(&s.base, "", json!({"jwks_uri": s.url("/jwks")})),
    );
    let resource = Url::parse(&s.url("/mcp")).unwrap();
    let d = client().discover(&resource, None).await.unwrap();
    assert_eq!(d.issuer, s.base);
    assert_eq!(
        s.paths(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ]
    );
}

#[tokio::test]
async fn metadata_var2_root_prm_and_rfc8414_with_the_issuer_path() {
    let s = Server::start().await;
    // The root metadata names the origin as the resource: it covers /mcp.
    s.json(
        "GET",
        "/.well-known/oauth-protected-resource",
        200,
        json!({"resource": s.base, "authorization_servers": [s.url("/tenant1")]}),
    );
    s.json(
        "GET",
        "/.well-known/oauth-authorization-server/tenant1",
        200,
        as_metadata(&s.base, "/tenant1", json!({})),
    );
    let resource = Url::parse(&s.url("/mcp")).unwrap();
    let d = client().discover(&resource, None).await.unwrap();
    assert_eq!(d.resource, s.base);
    assert_eq!(d.issuer, s.url("/tenant1"));
    assert_eq!(d.token_endpoint, s.url("/tenant1/token"));
    assert_eq!(
        s.paths(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-authorization-server/tenant1",
        ]
    );
}

#[tokio::test]
async fn metadata_var3_custom_prm_and_oidc_appended_to_the_issuer_path() {
    let s = Server::start().await;
    s.json(
        "GET",
        "/custom/metadata/location.json",
        200,
        json!({"resource": s.url("/mcp"), "authorization_servers": [s.url("/tenant1")]}),
    );
    s.json(
        "GET",
        "/tenant1/.well-known/openid-configuration",
        200,
        as_metadata(&s.base, "/tenant1", json!({})),
    );
    let resource = Url::parse(&s.url("/mcp")).unwrap();
    let challenge = challenge_at(s.url("/custom/metadata/location.json"));
    let d = client()
        .discover(&resource, Some(&challenge))
        .await
        .unwrap();
    assert_eq!(d.issuer, s.url("/tenant1"));
    assert_eq!(
        d.resource_metadata_url,
        s.url("/custom/metadata/location.json")
    );
    assert_eq!(
        s.paths(),
        [
            "/custom/metadata/location.json",
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
            "/tenant1/.well-known/openid-configuration",
        ]
    );
}

#[tokio::test]
async fn no_metadata_anywhere_names_every_url_tried() {
    let s = Server::start().await;
    let resource = Url::parse(&s.url("/mcp")).unwrap();
    let e = client().discover(&resource, None).await.unwrap_err();
    let OAuthError::Discovery(text) = &e else {
        panic!("{e:?}")
    };
    assert!(
        text.contains("/.well-known/oauth-protected-resource/mcp: HTTP 404"),
        "{text}"
    );
    assert!(
        text.contains("/.well-known/oauth-protected-resource: HTTP 404"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unreachable_resource_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let resource = Url::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
    let e = client().discover(&resource, None).await.unwrap_err();
    assert!(matches!(e, OAuthError::Transport(_)), "{e:?}");
}

#[tokio::test]
async fn a_prm_for_another_resource_is_refused_before_any_authorization() {
    let s = Server::start().await;
    s.json(
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
        json!({"resource": "https://evil.example.com/mcp", "authorization_servers": [s.base]}),
    );
    let resource = Url::parse(&s.url("/mcp")).unwrap();
    let e = client().discover(&resource, None).await.unwrap_err();
    let OAuthError::Discovery(text) = &e else {
        panic!("{e:?}")
    };
    assert!(text.contains("https://evil.example.com/mcp"), "{text}");
    assert!(text.contains("refusing to authorize"), "{text}");
    // The authorization server was never asked.
    assert_eq!(s.paths(), ["/.well-known/oauth-protected-resource/mcp"]);
}

#[tokio::test]
async fn metadata_naming_another_issuer_is_not_used() {
    let (s, resource) = setup(json!({})).await;
    s.json(
        "GET",
        "/.well-known/oauth-authorization-server",
        200,
        as_metadata(
            &s.base,
            "/mismatched-as",
            json!({"issuer": "https://attacker.example.com"}),
        ),
    );
    let e = client().discover(&resource, None).await.unwrap_err();
    let OAuthError::Discovery(text) = &e else {
        panic!("{e:?}")
    };
    assert!(text.contains("https://attacker.example.com"), "{text}");
    assert!(text.contains("RFC 8414"), "{text}");
    assert!(!s.paths().iter().any(|p| p.starts_with("/mismatched-as")));
}

#[tokio::test]
async fn an_issuer_with_a_root_slash_is_the_same_issuer() {
    let s = Server::start().await;
    s.json(
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
        json!({"resource": s.url("/mcp"), "authorization_servers": [format!("{}/", s.base)]}),
    );
    s.json(
        "GET",
        "/.well-known/oauth-authorization-server",
        200,
        as_metadata(&s.base, "", json!({})),
    );
    let d = client()
        .discover(&Url::parse(&s.url("/mcp")).unwrap(), None)
        .await
        .unwrap();
    // The issuer is the metadata's own, which `iss` must repeat exactly.
    assert_eq!(d.issuer, s.base);
}

#[tokio::test]
async fn the_guard_refuses_metadata_urls_at_private_addresses() {
    let (s, resource) = setup(json!({})).await;
    let strict = OAuthClient::new(false, Duration::from_secs(5)).unwrap();
    // A challenge pointing at an internal address: refused before any connection.
    let challenge = challenge_at("http://10.0.0.1/.well-known/oauth-protected-resource".into());
    let e = strict
        .discover(
            &Url::parse("https://mcp.example.com/mcp").unwrap(),
            Some(&challenge),
        )
        .await
        .unwrap_err();
    let OAuthError::Discovery(text) = &e else {
        panic!("{e:?}")
    };
    assert!(text.contains("10.0.0.1"), "{text}");
    assert!(text.contains("private"), "{text}");
    // Loopback too: the test server is never reached.
    let e = strict.discover(&resource, None).await.unwrap_err();
    assert!(e.to_string().contains("127.0.0.1"), "{e}");
    assert!(s.paths().is_empty());
}

#[tokio::test]
async fn oversized_metadata_is_refused() {
    let s = Server::start().await;
    let big = "x".repeat(300 * 1024);
    s.json(
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
        json!({"resource": s.url("/mcp"), "authorization_servers": [s.base], "pad": big}),
    );
    let e = client()
        .discover(&Url::parse(&s.url("/mcp")).unwrap(), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("larger than 256 KiB"), "{e}");
}

// ---- registration ----

#[tokio::test]
async fn dynamic_registration_sends_the_client_metadata() {
    let (s, resource) =
        setup(json!({"token_endpoint_auth_methods_supported": ["client_secret_post"]})).await;
    s.json(
        "POST",
        "/register",
        201,
        json!({"client_id": "dyn-1", "client_secret": "dyn-secret", "token_endpoint_auth_method": "client_secret_post"}),
    );
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let registered = c.register(&d, &identity()).await.unwrap();
    assert_eq!(registered.client_id, "dyn-1");
    assert_eq!(registered.auth_method, TokenAuthMethod::ClientSecretPost);
    assert_eq!(registered.client_secret, Some(Secret::from("dyn-secret")));
    assert_eq!(registered.registration, Registration::Dynamic);
    assert_eq!(registered.issuer, d.issuer);
    assert!(registered.is_for(&d));
    let body = s.last("/register").json();
    assert_eq!(body["client_name"], "toolgate");
    assert_eq!(
        body["redirect_uris"],
        json!(["http://localhost:3000/callback"])
    );
    assert_eq!(
        body["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(body["response_types"], json!(["code"]));
    assert_eq!(body["token_endpoint_auth_method"], "client_secret_post");
    assert_eq!(body["application_type"], "native");
    // The secret never shows.
    assert!(!format!("{registered:?}").contains("dyn-secret"));
}

#[tokio::test]
async fn dynamic_registration_picks_what_the_server_takes() {
    for (supported, expected) in [
        (json!(["none"]), "none"),
        (json!(["client_secret_basic"]), "client_secret_basic"),
        (
            json!(["private_key_jwt", "client_secret_post"]),
            "client_secret_post",
        ),
        (json!(null), "client_secret_basic"),
    ] {
        let (s, resource) =
            setup(json!({"token_endpoint_auth_methods_supported": supported})).await;
        // The suite's server gives a secret and no method even to a public client.
        s.json(
            "POST",
            "/register",
            201,
            json!({"client_id": "c", "client_secret": "test-client-secret"}),
        );
        let c = client();
        let d = c.discover(&resource, None).await.unwrap();
        let registered = c.register(&d, &identity()).await.unwrap();
        assert_eq!(registered.auth_method.as_str(), expected);
        assert_eq!(
            s.last("/register").json()["token_endpoint_auth_method"],
            expected
        );
        // A public client keeps no secret.
        assert_eq!(registered.client_secret.is_some(), expected != "none");
    }
    // Only methods a registered client cannot use: a clear error.
    let (s, resource) =
        setup(json!({"token_endpoint_auth_methods_supported": ["tls_client_auth"]})).await;
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let e = c.register(&d, &identity()).await.unwrap_err();
    assert!(matches!(e, OAuthError::Registration(_)), "{e:?}");
    assert!(s.seen_at("/register").is_empty());
}

#[tokio::test]
async fn a_refused_registration_says_why() {
    let (s, resource) = setup(json!({})).await;
    s.json(
        "POST",
        "/register",
        400,
        json!({"error": "invalid_redirect_uri", "error_description": "not allowed"}),
    );
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let e = c.register(&d, &identity()).await.unwrap_err();
    assert_eq!(
        e,
        OAuthError::Registration(format!(
            "{} refused the registration: invalid_redirect_uri: not allowed",
            s.url("/register")
        ))
    );
}

#[tokio::test]
async fn a_client_metadata_document_replaces_registration_when_advertised() {
    let (s, resource) = setup(json!({"client_id_metadata_document_supported": true})).await;
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let mut id = identity();
    id.metadata_url = Some("https://conformance-test.local/client-metadata.json".into());
    let registered = c.register(&d, &id).await.unwrap();
    assert_eq!(
        registered.client_id,
        "https://conformance-test.local/client-metadata.json"
    );
    assert_eq!(registered.auth_method, TokenAuthMethod::None);
    assert_eq!(registered.registration, Registration::MetadataDocument);
    assert!(s.seen_at("/register").is_empty());
    // Without a published document, dynamic registration as usual.
    s.json("POST", "/register", 201, json!({"client_id": "dyn"}));
    let registered = c.register(&d, &identity()).await.unwrap();
    assert_eq!(registered.client_id, "dyn");
    assert_eq!(s.seen_at("/register").len(), 1);
}

#[tokio::test]
async fn a_preregistered_client_skips_both_and_no_registration_is_an_error() {
    let (s, resource) = setup(json!({
        "client_id_metadata_document_supported": true,
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "registration_endpoint": null,
    }))
    .await;
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    assert_eq!(d.registration_endpoint, None);
    let mut id = identity();
    id.metadata_url = Some("https://gw.example.com/client.json".into());
    id.preregistered = Some(PreRegistered {
        client_id: "pre-registered-client".into(),
        client_secret: Some(Secret::from("pre-registered-secret")),
        auth_method: None,
        signing_key: None,
    });
    let registered = c.register(&d, &id).await.unwrap();
    assert_eq!(registered.client_id, "pre-registered-client");
    assert_eq!(registered.auth_method, TokenAuthMethod::ClientSecretBasic);
    assert_eq!(registered.registration, Registration::PreRegistered);
    // Nothing but discovery was requested.
    assert_eq!(s.paths().len(), 2);

    // Neither pre-registered, nor a document, nor DCR: says so.
    let e = c.register(&d, &identity()).await.unwrap_err();
    let OAuthError::Registration(text) = &e else {
        panic!("{e:?}")
    };
    assert!(text.contains("no dynamic registration"), "{text}");
}

// ---- the authorization request ----

#[tokio::test]
async fn the_authorization_url_carries_pkce_s256_resource_scope_and_state() {
    let (_s, resource) = setup(json!({})).await;
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let registered = RegisteredClient {
        client_id: "cid".into(),
        client_secret: None,
        auth_method: TokenAuthMethod::None,
        issuer: d.issuer.clone(),
        registration: Registration::Dynamic,
        signing_key: None,
        client_secret_expires_at: None,
    };
    let req = c
        .authorization_request(
            &d,
            &registered,
            "http://localhost:3000/callback",
            Some("mcp:basic mcp:write"),
        )
        .unwrap();
    assert_eq!(req.scope.as_deref(), Some("mcp:basic mcp:write"));
    let url = Url::parse(&req.url).unwrap();
    assert!(
        req.url
            .starts_with(&d.authorization_endpoint.clone().unwrap())
    );
    let q: HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "cid");
    assert_eq!(q["redirect_uri"], "http://localhost:3000/callback");
    assert_eq!(q["code_challenge_method"], "S256");
    let expected = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(req.pkce_verifier.expose().as_bytes()));
    assert_eq!(q["code_challenge"], expected);
    assert!(req.pkce_verifier.expose().len() >= 43);
    assert_eq!(q["resource"], d.resource);
    assert_eq!(q["scope"], "mcp:basic mcp:write");
    assert_eq!(q["state"], req.state);
    // 256 random bits, base64url: 43 characters; a new one each time.
    assert_eq!(req.state.len(), 43);
    let again = c
        .authorization_request(&d, &registered, "http://localhost:3000/callback", None)
        .unwrap();
    assert_ne!(again.state, req.state);
    assert_ne!(again.pkce_verifier, req.pkce_verifier);
    assert!(
        !Url::parse(&again.url)
            .unwrap()
            .query_pairs()
            .any(|(k, _)| k == "scope")
    );
    assert!(!format!("{again:?}").contains(again.pkce_verifier.expose()));
}

/// OpenID Connect Core §11: `offline_access` counts only with `prompt=consent`, so a
/// request asking for it carries both (an OpenID provider otherwise drops it and
/// issues no refresh token); a request without it never forces consent.
#[tokio::test]
async fn offline_access_is_asked_with_prompt_consent() {
    let (_s, resource) = setup(json!({"scopes_supported": ["mcp:basic", "offline_access"]})).await;
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let registered = registered_for(&d);
    let query = |scope: Option<&str>| -> HashMap<String, String> {
        let req = c
            .authorization_request(&d, &registered, "http://localhost:3000/callback", scope)
            .unwrap();
        Url::parse(&req.url)
            .unwrap()
            .query_pairs()
            .into_owned()
            .collect()
    };
    let q = query(Some("mcp:basic offline_access"));
    assert_eq!(q["scope"], "mcp:basic offline_access");
    assert_eq!(q["prompt"], "consent");
    assert!(!query(Some("mcp:basic")).contains_key("prompt"));
    assert!(!query(Some("offline_accessible")).contains_key("prompt"));
    assert!(!query(None).contains_key("prompt"));
}

#[tokio::test]
async fn no_authorization_without_pkce_s256_or_with_another_servers_client() {
    let (_s, resource) = setup(json!({"code_challenge_methods_supported": null})).await;
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let mut registered = RegisteredClient {
        client_id: "cid".into(),
        client_secret: None,
        auth_method: TokenAuthMethod::None,
        issuer: d.issuer.clone(),
        registration: Registration::Dynamic,
        signing_key: None,
        client_secret_expires_at: None,
    };
    let e = c
        .authorization_request(&d, &registered, "http://localhost:3000/callback", None)
        .unwrap_err();
    assert!(e.to_string().contains("PKCE"), "{e}");
    // SEP-2352: a client of the previous authorization server is never presented.
    let mut d2 = d.clone();
    d2.code_challenge_methods_supported = Some(vec!["S256".into()]);
    registered.issuer = "http://127.0.0.1:1/as1".into();
    assert!(!registered.is_for(&d2));
    let e = c
        .authorization_request(&d2, &registered, "http://localhost:3000/callback", None)
        .unwrap_err();
    assert!(matches!(e, OAuthError::Registration(_)), "{e:?}");
}

#[tokio::test]
async fn iss_of_the_authorization_response_per_the_metadata() {
    let (_s, resource) =
        setup(json!({"authorization_response_iss_parameter_supported": true})).await;
    let d = client().discover(&resource, None).await.unwrap();
    assert!(d.authorization_response_iss_parameter_supported);
    assert!(d.check_issuer(Some(&d.issuer)).is_ok());
    assert!(d.check_issuer(None).is_err());
    assert!(d.check_issuer(Some(&format!("{}/", d.issuer))).is_err());
    assert!(d.check_issuer(Some("https://evil.example.com")).is_err());

    let (_s, resource) = setup(json!({})).await;
    let d = client().discover(&resource, None).await.unwrap();
    assert!(!d.authorization_response_iss_parameter_supported);
    assert!(d.check_issuer(None).is_ok());
    assert!(matches!(
        d.check_issuer(Some("https://evil.example.com")),
        Err(OAuthError::InsecureIssuer(_))
    ));
}

// ---- the token endpoint ----

async fn exchange_with(method: TokenAuthMethod, secret: Option<&str>) -> Seen {
    let (s, resource) = setup(json!({})).await;
    s.json("POST", "/token", 200, token_answer("at-1", Some("rt-1")));
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let registered = RegisteredClient {
        client_id: "the-client".into(),
        client_secret: secret.map(Secret::from),
        auth_method: method,
        issuer: d.issuer.clone(),
        registration: Registration::Dynamic,
        signing_key: None,
        client_secret_expires_at: None,
    };
    let tokens = c
        .exchange_code(
            &d,
            &registered,
            "test-auth-code",
            &Secret::from("the-verifier-0123456789-0123456789-0123456789"),
            "http://localhost:3000/callback",
        )
        .await
        .unwrap();
    assert_eq!(tokens.access_token.expose(), "at-1");
    assert_eq!(tokens.refresh_token, Some(Secret::from("rt-1")));
    assert_eq!(tokens.token_type, "Bearer");
    assert_eq!(tokens.expires_in, Some(3600));
    let seen = s.last("/token");
    let form = seen.form();
    assert_eq!(form["grant_type"], "authorization_code");
    assert_eq!(form["code"], "test-auth-code");
    assert_eq!(
        form["code_verifier"],
        "the-verifier-0123456789-0123456789-0123456789"
    );
    assert_eq!(form["redirect_uri"], "http://localhost:3000/callback");
    assert_eq!(form["resource"], d.resource);
    seen
}

#[tokio::test]
async fn exchange_as_a_public_client() {
    let seen = exchange_with(TokenAuthMethod::None, None).await;
    let form = seen.form();
    assert_eq!(form["client_id"], "the-client");
    assert!(!form.contains_key("client_secret"));
    assert_eq!(seen.authorization, None);
}

#[tokio::test]
async fn exchange_with_client_secret_basic() {
    let seen = exchange_with(TokenAuthMethod::ClientSecretBasic, Some("s3cr/t=")).await;
    // Raw id:secret, as the suite's server splits it (see token::basic_part).
    assert_eq!(seen.basic().as_deref(), Some("the-client:s3cr/t="));
    let form = seen.form();
    assert!(!form.contains_key("client_secret"));
    assert!(!form.contains_key("client_id"));
}

#[tokio::test]
async fn exchange_with_client_secret_post() {
    let seen = exchange_with(TokenAuthMethod::ClientSecretPost, Some("s3cr/t=")).await;
    let form = seen.form();
    assert_eq!(form["client_id"], "the-client");
    assert_eq!(form["client_secret"], "s3cr/t=");
    assert_eq!(seen.authorization, None);
}

#[tokio::test]
async fn a_refused_exchange_is_refused_without_repeating_secrets() {
    let (s, resource) = setup(json!({})).await;
    s.json(
        "POST",
        "/token",
        400,
        json!({"error": "invalid_grant", "error_description": "code test-auth-code-xyz was used"}),
    );
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let registered = RegisteredClient {
        client_id: "c".into(),
        client_secret: None,
        auth_method: TokenAuthMethod::None,
        issuer: d.issuer.clone(),
        registration: Registration::Dynamic,
        signing_key: None,
        client_secret_expires_at: None,
    };
    let e = c
        .exchange_code(
            &d,
            &registered,
            "test-auth-code-xyz",
            &Secret::from("v".repeat(43)),
            "http://localhost:3000/callback",
        )
        .await
        .unwrap_err();
    assert_eq!(
        e,
        OAuthError::Refused {
            error: "invalid_grant".into(),
            description: Some("code *** was used".into())
        }
    );
    // A broken answer: named by status, never quoted.
    s.json(
        "POST",
        "/token",
        200,
        json!({"access_token": "leaky-token"}),
    );
    let e = c
        .exchange_code(
            &d,
            &registered,
            "code-2",
            &Secret::from("v".repeat(43)),
            "http://localhost:3000/callback",
        )
        .await
        .unwrap_err();
    assert!(matches!(e, OAuthError::Transport(_)), "{e:?}");
    assert!(!e.to_string().contains("leaky-token"), "{e}");
}

fn registered_for(d: &Discovery) -> RegisteredClient {
    RegisteredClient {
        client_id: "the-client".into(),
        client_secret: Some(Secret::from("the-secret")),
        auth_method: TokenAuthMethod::ClientSecretBasic,
        issuer: d.issuer.clone(),
        registration: Registration::Dynamic,
        signing_key: None,
        client_secret_expires_at: None,
    }
}

#[tokio::test]
async fn refresh_keeps_the_refresh_token_when_no_new_one_comes() {
    let (s, resource) = setup(json!({})).await;
    s.json("POST", "/token", 200, token_answer("at-2", None));
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let registered = registered_for(&d);
    let old = Secret::from("rt-old");
    let tokens = c.refresh(&d, &registered, &old, None).await.unwrap();
    assert_eq!(tokens.access_token.expose(), "at-2");
    assert_eq!(tokens.refresh_token, Some(old.clone()));
    let form = s.last("/token").form();
    assert_eq!(form["grant_type"], "refresh_token");
    assert_eq!(form["refresh_token"], "rt-old");
    assert_eq!(form["resource"], d.resource);
    assert!(!form.contains_key("scope"));
    assert_eq!(
        s.last("/token").basic().as_deref(),
        Some("the-client:the-secret")
    );

    // A rotated one replaces it; a scope asked for is sent, and granted when the answer
    // says nothing of it.
    s.json("POST", "/token", 200, token_answer("at-3", Some("rt-new")));
    let tokens = c
        .refresh(&d, &registered, &old, Some("mcp:basic"))
        .await
        .unwrap();
    assert_eq!(tokens.refresh_token, Some(Secret::from("rt-new")));
    assert_eq!(tokens.scope.as_deref(), Some("mcp:basic"));
    assert_eq!(s.last("/token").form()["scope"], "mcp:basic");

    // invalid_grant: Refused, for the caller to forget the refresh token.
    s.json("POST", "/token", 400, json!({"error": "invalid_grant"}));
    let e = c.refresh(&d, &registered, &old, None).await.unwrap_err();
    assert!(
        matches!(e, OAuthError::Refused { ref error, .. } if error == "invalid_grant"),
        "{e:?}"
    );
    assert!(!e.to_string().contains("rt-old"));
}

#[tokio::test]
async fn revoke_posts_the_token_or_does_nothing_without_an_endpoint() {
    let (s, resource) = setup(json!({})).await;
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let registered = registered_for(&d);
    // No revocation endpoint: nothing sent.
    c.revoke(
        &d,
        &registered,
        &Secret::from("rt"),
        TokenHint::RefreshToken,
    )
    .await
    .unwrap();
    assert!(s.seen_at("/revoke").is_empty());

    let mut d = d;
    d.revocation_endpoint = Some(s.url("/revoke"));
    s.json("POST", "/revoke", 200, json!({}));
    c.revoke(
        &d,
        &registered,
        &Secret::from("rt"),
        TokenHint::RefreshToken,
    )
    .await
    .unwrap();
    let seen = s.last("/revoke");
    let form = seen.form();
    assert_eq!(form["token"], "rt");
    assert_eq!(form["token_type_hint"], "refresh_token");
    assert_eq!(seen.basic().as_deref(), Some("the-client:the-secret"));

    s.json(
        "POST",
        "/revoke",
        400,
        json!({"error": "unsupported_token_type"}),
    );
    let e = c
        .revoke(&d, &registered, &Secret::from("at"), TokenHint::AccessToken)
        .await
        .unwrap_err();
    assert!(matches!(e, OAuthError::Refused { .. }), "{e:?}");
    assert_eq!(s.last("/revoke").form()["token_type_hint"], "access_token");

    // Off loopback, plain http is refused (RFC 7009 §2) before anything is sent.
    d.revocation_endpoint = Some("http://as.example.com/revoke".into());
    let e = c
        .revoke(
            &d,
            &registered,
            &Secret::from("rt"),
            TokenHint::RefreshToken,
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not https"), "{e}");
}

// ---- client credentials ----

fn pem(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut text = "-----BEGIN PRIVATE KEY-----\n".to_owned();
    for line in body.as_bytes().chunks(64) {
        text.push_str(std::str::from_utf8(line).unwrap());
        text.push('\n');
    }
    text.push_str("-----END PRIVATE KEY-----\n");
    text
}

#[tokio::test]
async fn client_credentials_with_private_key_jwt_verified_by_the_server() {
    use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Validation, jwk::Jwk};

    let pair = aws_lc_rs::signature::EcdsaKeyPair::generate(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
    )
    .unwrap();
    let private_pem = pem(pair.to_pkcs8v1().unwrap().as_ref());
    let public = Jwk::from_encoding_key(
        &EncodingKey::from_ec_pem(private_pem.as_bytes()).unwrap(),
        Algorithm::ES256,
    )
    .unwrap();
    let public = DecodingKey::from_jwk(&public).unwrap();

    let (s, resource) = setup(json!({
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
    }))
    .await;
    let issuer = s.base.clone();
    let verified = Arc::new(Mutex::new(None));
    let record = verified.clone();
    s.route("POST", "/token", move |seen| {
        let form = seen.form();
        if form.get("client_assertion_type").map(String::as_str)
            != Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        {
            return (401, json!({"error": "invalid_client"}));
        }
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_audience(&[issuer.as_str(), &format!("{issuer}/")]);
        validation.set_required_spec_claims(&["exp", "iat", "aud", "iss", "sub"]);
        match jsonwebtoken::decode::<Value>(&form["client_assertion"], &public, &validation) {
            Ok(data) => {
                let header_kid = data.header.kid.clone();
                *record.lock().unwrap() = Some((data.claims, header_kid, form.clone()));
                (
                    200,
                    json!({"access_token": "cc-token", "token_type": "Bearer", "expires_in": 60}),
                )
            }
            Err(e) => (
                401,
                json!({"error": "invalid_client", "error_description": format!("{e:?}")}),
            ),
        }
    });
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let service = ServiceClient::PrivateKeyJwt {
        client_id: "conformance-test-client".into(),
        key: SigningKey {
            pem: Secret(private_pem),
            alg: SigningAlg::ES256,
            kid: Some("k1".into()),
        },
    };
    let tokens = c
        .client_credentials(&d, &service, Some("mcp:basic"))
        .await
        .unwrap();
    assert_eq!(tokens.access_token.expose(), "cc-token");
    assert_eq!(tokens.scope.as_deref(), Some("mcp:basic"));
    let (claims, kid, form) = verified.lock().unwrap().clone().expect("verified");
    assert_eq!(claims["iss"], "conformance-test-client");
    assert_eq!(claims["sub"], "conformance-test-client");
    assert_eq!(claims["aud"], d.issuer);
    assert!(claims["jti"].as_str().unwrap().len() >= 16);
    let lifetime = claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap();
    assert!(lifetime <= 300, "{lifetime}");
    assert_eq!(kid.as_deref(), Some("k1"));
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["scope"], "mcp:basic");
    assert_eq!(form["resource"], d.resource);

    // An algorithm the server does not take: refused before sending.
    let mut d2 = d.clone();
    d2.token_endpoint_auth_signing_alg_values_supported = Some(vec!["RS256".into()]);
    let before = s.seen_at("/token").len();
    let e = c.client_credentials(&d2, &service, None).await.unwrap_err();
    assert!(matches!(e, OAuthError::Config(_)), "{e:?}");
    assert_eq!(s.seen_at("/token").len(), before);

    // A key that does not load: said, without the key.
    let broken = ServiceClient::PrivateKeyJwt {
        client_id: "c".into(),
        key: SigningKey {
            pem: Secret::from("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
            alg: SigningAlg::ES256,
            kid: None,
        },
    };
    let e = c.client_credentials(&d, &broken, None).await.unwrap_err();
    assert!(matches!(e, OAuthError::Config(_)), "{e:?}");
}

#[tokio::test]
async fn client_credentials_with_client_secret_basic() {
    let (s, resource) = setup(json!({
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    }))
    .await;
    s.json("POST", "/token", 200, token_answer("cc", None));
    let c = client();
    let d = c.discover(&resource, None).await.unwrap();
    let service = ServiceClient::Secret {
        client_id: "conformance-test-client".into(),
        client_secret: Secret::from("conformance-test-secret"),
        auth_method: None,
    };
    let tokens = c.client_credentials(&d, &service, None).await.unwrap();
    assert_eq!(tokens.access_token.expose(), "cc");
    assert_eq!(tokens.refresh_token, None);
    let seen = s.last("/token");
    assert_eq!(
        seen.basic().as_deref(),
        Some("conformance-test-client:conformance-test-secret")
    );
    assert_eq!(seen.form()["grant_type"], "client_credentials");
    assert!(!seen.form().contains_key("client_secret"));
}

// ---- the whole flow, as the conformance client runs it ----

#[tokio::test]
async fn the_whole_flow_with_step_up() {
    let (s, resource) =
        setup(json!({"authorization_response_iss_parameter_supported": true})).await;
    s.json("POST", "/register", 201, json!({"client_id": "dyn"}));
    s.route("POST", "/token", |seen| {
        let code = seen.form().get("code").cloned().unwrap_or_default();
        (
            200,
            json!({"access_token": format!("at-for-{code}"), "token_type": "Bearer"}),
        )
    });
    let c = client();
    // 401 with a scope: discover, register, authorize with it.
    let first = Challenge::parse(&format!(
        r#"Bearer scope="mcp:basic", resource_metadata="{}""#,
        s.url("/.well-known/oauth-protected-resource/mcp")
    ))
    .unwrap();
    let d = c.discover(&resource, Some(&first)).await.unwrap();
    let registered = c.register(&d, &identity()).await.unwrap();
    let scope = d.scope_for(Some(&first));
    assert_eq!(scope.as_deref(), Some("mcp:basic"));
    let req = c
        .authorization_request(&d, &registered, &identity().redirect_uri, scope.as_deref())
        .unwrap();
    d.check_issuer(Some(&d.issuer)).unwrap();
    let tokens = c
        .exchange_code(
            &d,
            &registered,
            "one",
            &req.pkce_verifier,
            &identity().redirect_uri,
        )
        .await
        .unwrap();
    assert_eq!(tokens.scope.as_deref(), None);
    // 403 insufficient_scope naming only the missing scope: ask for both.
    let step_up = Challenge::parse(&format!(
        r#"Bearer error="insufficient_scope", scope="mcp:write", resource_metadata="{}""#,
        s.url("/.well-known/oauth-protected-resource/mcp")
    ))
    .unwrap();
    assert!(step_up.is_insufficient_scope());
    let scope = d.step_up_scope(scope.as_deref(), &step_up);
    assert_eq!(scope.as_deref(), Some("mcp:basic mcp:write"));
}

#[test]
fn the_futures_can_cross_threads() {
    fn send<T: Send>(_: &T) {}
    let c = client();
    let d: Discovery = serde_json::from_value(json!({
        "resource": "https://r.example/mcp", "resource_metadata_url": "",
        "resource_scopes_supported": null, "issuer": "https://as.example",
        "authorization_endpoint": null, "token_endpoint": "https://as.example/token",
        "registration_endpoint": null, "revocation_endpoint": null, "scopes_supported": null,
        "token_endpoint_auth_methods_supported": null,
        "token_endpoint_auth_signing_alg_values_supported": null,
        "grant_types_supported": null, "code_challenge_methods_supported": null,
        "client_id_metadata_document_supported": false,
        "authorization_response_iss_parameter_supported": false
    }))
    .unwrap();
    let r = registered_for(&d);
    let secret = Secret::from("x");
    let service = ServiceClient::Secret {
        client_id: "c".into(),
        client_secret: Secret::from("s"),
        auth_method: None,
    };
    let u = Url::parse("https://r.example/mcp").unwrap();
    send(&c.discover(&u, None));
    send(&c.register(&d, &identity()));
    send(&c.exchange_code(&d, &r, "c", &secret, "https://gw/cb"));
    send(&c.refresh(&d, &r, &secret, None));
    send(&c.revoke(&d, &r, &secret, TokenHint::RefreshToken));
    send(&c.client_credentials(&d, &service, None));
}

/// An authorization server known by its endpoints alone (an OpenAPI spec's flow): its
/// metadata at the token endpoint's origin is used when it names the same token
/// endpoint; without it the issuer is unknown, PKCE S256 is used all the same, no
/// `resource` is sent, and a refresh goes to the flow's refresh URL.
#[tokio::test]
async fn a_server_known_by_its_endpoints_alone() {
    let s = Server::start().await;
    let u = |p: &str| Url::parse(&s.url(p)).unwrap();
    let c = client();
    // No metadata: the endpoints as given.
    let d = c
        .discover_endpoints(&u("/authorize?x=1"), &u("/token"), Some(&u("/refresh")))
        .await;
    assert_eq!(d.issuer, "");
    assert_eq!(d.authorization_endpoint, Some(s.url("/authorize?x=1")));
    assert_eq!(d.token_endpoint, s.url("/token"));
    assert_eq!(d.registration_endpoint, None);
    assert_eq!(d.revocation_endpoint, None);
    assert!(d.supports_pkce_s256());
    // Nothing to compare an `iss` with: any is taken.
    assert!(d.check_issuer(Some("https://anything.example")).is_ok());
    let registered = registered_for(&d);
    let req = c
        .authorization_request(&d, &registered, "http://localhost:3000/cb", Some("read"))
        .unwrap();
    let q: HashMap<String, String> = Url::parse(&req.url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!((q["x"].as_str(), q["scope"].as_str()), ("1", "read"));
    assert!(!q.contains_key("resource"), "{q:?}");
    assert_eq!(q["code_challenge_method"], "S256");
    s.json("POST", "/token", 200, token_answer("at-1", Some("rt-1")));
    s.json("POST", "/refresh", 200, token_answer("at-2", None));
    let verifier = Secret::from("v".repeat(43));
    c.exchange_code(
        &d,
        &registered,
        "code",
        &verifier,
        "http://localhost:3000/cb",
    )
    .await
    .unwrap();
    assert!(!s.last("/token").form().contains_key("resource"));
    let tokens = c
        .refresh(&d, &registered, &Secret::from("rt-1"), None)
        .await
        .unwrap();
    assert_eq!(tokens.access_token.expose(), "at-2");
    assert_eq!(s.last("/refresh").form()["grant_type"], "refresh_token");

    // Metadata naming the same token endpoint: its issuer, registration and
    // revocation endpoints; the spec's own endpoints stay.
    s.json(
        "GET",
        "/.well-known/oauth-authorization-server",
        200,
        as_metadata(
            &s.base,
            "",
            json!({"revocation_endpoint": s.url("/revoke"),
                   "authorization_endpoint": s.url("/elsewhere")}),
        ),
    );
    let d = c
        .discover_endpoints(&u("/authorize"), &u("/token"), None)
        .await;
    assert_eq!(d.issuer, s.base);
    assert_eq!(d.registration_endpoint, Some(s.url("/register")));
    assert_eq!(d.revocation_endpoint, Some(s.url("/revoke")));
    assert_eq!(d.authorization_endpoint, Some(s.url("/authorize")));
    assert!(d.check_issuer(Some("https://anything.example")).is_err());
    // Metadata of another token endpoint describes another server: not used.
    let d = c
        .discover_endpoints(&u("/authorize"), &u("/oauth/token"), None)
        .await;
    assert_eq!((d.issuer.as_str(), d.registration_endpoint), ("", None));
}
