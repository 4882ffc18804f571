//! Credentials end to end with real keys: RSA and EC P-256 keys are generated here,
//! their public halves published as a JWKS (in a file, or by an HTTP server on
//! 127.0.0.1), and tokens signed with `jsonwebtoken::encode`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use base64::Engine;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use toolgate::credentials::{AuthError, Authenticator, JwtConfig, JwtKeys, hash_key};

const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";

/// A signing key and its public JWK.
struct TestKey {
    encoding: EncodingKey,
    jwk: Jwk,
    alg: Algorithm,
    kid: String,
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut text = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        text.push_str(std::str::from_utf8(line).unwrap());
        text.push('\n');
    }
    text.push_str(&format!("-----END {label}-----\n"));
    text
}

fn rsa_key(kid: &str) -> TestKey {
    let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let pkcs8: aws_lc_rs::encoding::Pkcs8V1Der<'static> = pair.as_der().unwrap();
    let encoding =
        EncodingKey::from_rsa_pem(pem("PRIVATE KEY", pkcs8.as_ref()).as_bytes()).unwrap();
    test_key(encoding, Algorithm::RS256, kid)
}

fn ec_key(kid: &str) -> TestKey {
    let pair = aws_lc_rs::signature::EcdsaKeyPair::generate(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
    )
    .unwrap();
    let pkcs8 = pair.to_pkcs8v1().unwrap();
    let encoding = EncodingKey::from_ec_pem(pem("PRIVATE KEY", pkcs8.as_ref()).as_bytes()).unwrap();
    test_key(encoding, Algorithm::ES256, kid)
}

fn test_key(encoding: EncodingKey, alg: Algorithm, kid: &str) -> TestKey {
    let mut jwk = Jwk::from_encoding_key(&encoding, alg).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    TestKey {
        encoding,
        jwk,
        alg,
        kid: kid.to_owned(),
    }
}

fn jwks(keys: &[&TestKey]) -> Value {
    serde_json::to_value(JwkSet {
        keys: keys.iter().map(|k| k.jwk.clone()).collect(),
    })
    .unwrap()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn claims(tenant: &str) -> Value {
    json!({"sub": "agent-1", "tenant": tenant, "iss": "https://issuer.test",
           "aud": "toolgate", "iat": now(), "exp": now() + 300})
}

fn sign(key: &TestKey, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

fn sign_hs256(secret: &[u8], claims: &Value) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A JWKS file in a fresh temporary directory.
fn jwks_file(document: &Value) -> std::path::PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "toolgate-credentials-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jwks.json");
    std::fs::write(&path, document.to_string()).unwrap();
    path
}

fn jwks_file_config(document: &Value) -> JwtConfig {
    JwtConfig::new(JwtKeys::JwksFile(jwks_file(document)))
}

/// Expects a refusal with `code` whose message gives away neither the token nor
/// `tenant`.
async fn refused(auth: &Authenticator, token: &str, code: &str, tenant: &str) -> AuthError {
    let err = auth
        .authenticate(Some(&bearer(token)))
        .await
        .expect_err("should be refused");
    assert_eq!(err.code(), code, "{err}");
    let message = err.to_string();
    assert!(!message.contains(token), "{message}");
    assert!(!message.contains(tenant), "{message}");
    assert!(!err.www_authenticate().contains(token));
    err
}

#[tokio::test]
async fn valid_rs256_and_es256_tokens_map_to_their_tenant() {
    let rsa = rsa_key("rsa-1");
    let ec = ec_key("ec-1");
    let auth = Authenticator::new(vec![], Some(jwks_file_config(&jwks(&[&rsa, &ec]))))
        .await
        .unwrap();
    let token = sign(&rsa, &claims("acme"));
    assert_eq!(
        auth.authenticate(Some(&bearer(&token)))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
    let token = sign(&ec, &claims("globex"));
    assert_eq!(
        auth.authenticate(Some(&bearer(&token)))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("globex".into())
    );
    // Without a `kid`, every key that fits the algorithm is tried; a key published
    // without one verifies tokens that name any.
    let mut anonymous = ec_key("ignored");
    anonymous.jwk.common.key_id = None;
    let auth_without_kids =
        Authenticator::new(vec![], Some(jwks_file_config(&jwks(&[&anonymous]))))
            .await
            .unwrap();
    assert_eq!(
        auth_without_kids
            .authenticate(Some(&bearer(&sign(&anonymous, &claims("acme")))))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
    let no_kid = jsonwebtoken::encode(
        &Header::new(Algorithm::ES256),
        &claims("initech"),
        &ec.encoding,
    )
    .unwrap();
    assert_eq!(
        auth.authenticate(Some(&bearer(&no_kid)))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("initech".into())
    );
}

#[tokio::test]
async fn valid_hs256_token_maps_to_its_tenant_and_others_are_refused() {
    let auth = Authenticator::new(
        vec![],
        Some(JwtConfig::new(JwtKeys::Hs256Secret(SECRET.into()))),
    )
    .await
    .unwrap();
    let token = sign_hs256(SECRET.as_bytes(), &claims("acme"));
    assert_eq!(
        auth.authenticate(Some(&bearer(&token)))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
    let forged = sign_hs256(b"another-secret-of-at-least-32-bytes!!", &claims("acme"));
    let err = refused(&auth, &forged, "invalid_credentials", "acme").await;
    assert!(err.to_string().contains("signature"), "{err}");
    // An RS256 token is not accepted where only HS256 is configured.
    let rsa = rsa_key("rsa-1");
    refused(
        &auth,
        &sign(&rsa, &claims("acme")),
        "invalid_credentials",
        "acme",
    )
    .await;
}

#[tokio::test]
async fn time_claims_are_checked_with_leeway() {
    let rsa = rsa_key("k");
    let auth = Authenticator::new(vec![], Some(jwks_file_config(&jwks(&[&rsa]))))
        .await
        .unwrap();
    let mut within_leeway = claims("acme");
    within_leeway["exp"] = json!(now() - 10);
    within_leeway["nbf"] = json!(now() + 10);
    assert_eq!(
        auth.authenticate(Some(&bearer(&sign(&rsa, &within_leeway))))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
    let mut expired = claims("acme");
    expired["exp"] = json!(now() - 120);
    let err = refused(&auth, &sign(&rsa, &expired), "expired", "acme").await;
    assert_eq!(err, AuthError::Expired);
    let mut early = claims("acme");
    early["nbf"] = json!(now() + 120);
    refused(&auth, &sign(&rsa, &early), "not_yet_valid", "acme").await;
    let mut no_exp = claims("acme");
    no_exp.as_object_mut().unwrap().remove("exp");
    let err = refused(&auth, &sign(&rsa, &no_exp), "invalid_claims", "acme").await;
    assert!(err.to_string().contains("`exp`"), "{err}");
}

#[tokio::test]
async fn issuer_and_audience_are_checked_when_configured() {
    let rsa = rsa_key("k");
    let config = JwtConfig {
        issuer: Some("https://issuer.test".into()),
        audience: Some("toolgate".into()),
        ..jwks_file_config(&jwks(&[&rsa]))
    };
    let auth = Authenticator::new(vec![], Some(config)).await.unwrap();
    assert_eq!(
        auth.authenticate(Some(&bearer(&sign(&rsa, &claims("acme")))))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
    let mut wrong_issuer = claims("acme");
    wrong_issuer["iss"] = json!("https://evil.test");
    let err = refused(&auth, &sign(&rsa, &wrong_issuer), "invalid_claims", "acme").await;
    assert!(err.to_string().contains("`iss`"), "{err}");
    let mut wrong_audience = claims("acme");
    wrong_audience["aud"] = json!(["other-service"]);
    let err = refused(
        &auth,
        &sign(&rsa, &wrong_audience),
        "invalid_claims",
        "acme",
    )
    .await;
    assert!(err.to_string().contains("`aud`"), "{err}");
    let mut no_issuer = claims("acme");
    no_issuer.as_object_mut().unwrap().remove("iss");
    refused(&auth, &sign(&rsa, &no_issuer), "invalid_claims", "acme").await;

    // Without `audience` configured, a token's `aud` is not held against it.
    let lenient = Authenticator::new(vec![], Some(jwks_file_config(&jwks(&[&rsa]))))
        .await
        .unwrap();
    assert!(
        lenient
            .authenticate(Some(&bearer(&sign(&rsa, &wrong_audience))))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn forged_tampered_and_unsigned_tokens_are_refused() {
    let rsa = rsa_key("k");
    let auth = Authenticator::new(vec![], Some(jwks_file_config(&jwks(&[&rsa]))))
        .await
        .unwrap();

    // Signed by another key that claims the published key id.
    let impostor = rsa_key("k");
    let err = refused(
        &auth,
        &sign(&impostor, &claims("acme")),
        "invalid_credentials",
        "acme",
    )
    .await;
    assert!(err.to_string().contains("signature"), "{err}");

    // A valid token whose payload is swapped for another tenant.
    let token = sign(&rsa, &claims("acme"));
    let parts: Vec<&str> = token.split('.').collect();
    let payload =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims("globex").to_string());
    let tampered = format!("{}.{payload}.{}", parts[0], parts[2]);
    refused(&auth, &tampered, "invalid_credentials", "globex").await;

    // `alg: none`, with and without a signature part.
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let header = b64(&json!({"alg": "none", "typ": "JWT", "kid": "k"}));
    let body = b64(&claims("acme"));
    for unsigned in [
        format!("{header}.{body}."),
        format!("{header}.{body}.{}", parts[2]),
    ] {
        let err = refused(&auth, &unsigned, "invalid_credentials", "acme").await;
        assert!(err.to_string().contains("alg: none"), "{err}");
    }

    // A key id nobody published.
    let stranger = rsa_key("unknown-kid");
    let err = refused(
        &auth,
        &sign(&stranger, &claims("acme")),
        "invalid_credentials",
        "acme",
    )
    .await;
    assert!(err.to_string().contains("kid"), "{err}");
}

#[tokio::test]
async fn hs256_token_is_not_checked_against_rsa_public_keys() {
    let rsa = rsa_key("k");
    let document = jwks(&[&rsa]);
    let auth = Authenticator::new(vec![], Some(jwks_file_config(&document)))
        .await
        .unwrap();
    // The classic confusion attack: HMAC keyed with the public key's published bytes.
    let n = document["keys"][0]["n"].as_str().unwrap().to_owned();
    for secret in [document.to_string(), n] {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k".into());
        let token = jsonwebtoken::encode(
            &header,
            &claims("acme"),
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap();
        let err = refused(&auth, &token, "invalid_credentials", "acme").await;
        assert!(err.to_string().contains("HS256"), "{err}");
    }
    // A JWKS `oct` key is never used either.
    let with_oct = json!({"keys": [
        rsa.jwk,
        {"kty": "oct", "kid": "sym", "k": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(SECRET)}
    ]});
    let auth = Authenticator::new(vec![], Some(jwks_file_config(&with_oct)))
        .await
        .unwrap();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("sym".into());
    let token = jsonwebtoken::encode(
        &header,
        &claims("acme"),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap();
    refused(&auth, &token, "invalid_credentials", "acme").await;
}

#[tokio::test]
async fn algorithm_must_fit_the_key() {
    let rsa = rsa_key("k");
    let ec = ec_key("e");
    let auth = Authenticator::new(vec![], Some(jwks_file_config(&jwks(&[&rsa, &ec]))))
        .await
        .unwrap();
    // An ES256 token naming the RSA key's id.
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k".into());
    let token = jsonwebtoken::encode(&header, &claims("acme"), &ec.encoding).unwrap();
    let err = refused(&auth, &token, "invalid_credentials", "acme").await;
    assert!(err.to_string().contains("algorithm"), "{err}");
}

#[tokio::test]
async fn the_tenant_claim_is_required_and_configurable() {
    let rsa = rsa_key("k");
    let auth = Authenticator::new(vec![], Some(jwks_file_config(&jwks(&[&rsa]))))
        .await
        .unwrap();
    let mut missing = claims("acme");
    missing.as_object_mut().unwrap().remove("tenant");
    let err = refused(&auth, &sign(&rsa, &missing), "invalid_claims", "acme").await;
    assert!(err.to_string().contains("`tenant`"), "{err}");
    let mut not_a_string = claims("acme");
    not_a_string["tenant"] = json!(42);
    refused(&auth, &sign(&rsa, &not_a_string), "invalid_claims", "acme").await;

    let nested = JwtConfig {
        tenant_claim: "/org/id".into(),
        ..jwks_file_config(&jwks(&[&rsa]))
    };
    let auth = Authenticator::new(vec![], Some(nested)).await.unwrap();
    let mut claims = claims("ignored");
    claims["org"] = json!({"id": "acme"});
    assert_eq!(
        auth.authenticate(Some(&bearer(&sign(&rsa, &claims))))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
}

#[tokio::test]
async fn api_keys_map_to_their_tenant() {
    let auth = Authenticator::new(
        vec![
            grant("acme", hash_key("tg_acme_0123456789abcdef")),
            grant("globex", hash_key("tg_globex_fedcba9876543210")),
        ],
        None,
    )
    .await
    .unwrap();
    assert!(auth.is_enabled());
    assert_eq!(
        auth.authenticate(Some("Bearer tg_acme_0123456789abcdef"))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
    assert_eq!(
        auth.authenticate(Some("bearer   tg_globex_fedcba9876543210  "))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("globex".into())
    );
    let err = refused(
        &auth,
        "tg_acme_0123456789abcdeX",
        "invalid_credentials",
        "acme",
    )
    .await;
    assert!(!err.to_string().contains("globex"));
    // A JWT where JWT authentication is off: told so.
    let jwt = sign_hs256(SECRET.as_bytes(), &claims("acme"));
    let err = refused(&auth, &jwt, "invalid_credentials", "acme").await;
    assert!(err.to_string().contains("not enabled"), "{err}");
}

#[tokio::test]
async fn api_keys_and_jwts_work_side_by_side() {
    let auth = Authenticator::new(
        vec![grant("acme", hash_key("tg_acme_0123456789abcdef"))],
        Some(JwtConfig::new(JwtKeys::Hs256Secret(SECRET.into()))),
    )
    .await
    .unwrap();
    assert_eq!(
        auth.authenticate(Some("Bearer tg_acme_0123456789abcdef"))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
    let token = sign_hs256(SECRET.as_bytes(), &claims("globex"));
    assert_eq!(
        auth.authenticate(Some(&bearer(&token)))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("globex".into())
    );
    // A dotted API key that is not a JWT is still looked up as a key.
    let auth = Authenticator::new(
        vec![grant("acme", hash_key("part.two.three"))],
        Some(JwtConfig::new(JwtKeys::Hs256Secret(SECRET.into()))),
    )
    .await
    .unwrap();
    assert_eq!(
        auth.authenticate(Some("Bearer part.two.three"))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
}

#[tokio::test]
async fn headers_without_a_bearer_token() {
    let auth = Authenticator::new(vec![grant("acme", hash_key("k"))], None)
        .await
        .unwrap();
    assert_eq!(
        auth.authenticate(None).await.unwrap().map(|i| i.tenant),
        None
    );
    for (header, code) in [
        ("", "missing_credentials"),
        ("   ", "missing_credentials"),
        ("Bearer", "missing_credentials"),
        ("Bearer   ", "missing_credentials"),
        ("Basic YWNtZTpr", "unsupported_scheme"),
        ("k", "unsupported_scheme"),
    ] {
        let err = auth.authenticate(Some(header)).await.unwrap_err();
        assert_eq!(err.code(), code, "{header:?}: {err}");
        assert!(err.to_string().contains("Authorization: Bearer"), "{err}");
    }
    let huge = format!("Bearer {}", "a".repeat(20_000));
    assert_eq!(
        auth.authenticate(Some(&huge)).await.unwrap_err().code(),
        "invalid_credentials"
    );
}

#[tokio::test]
async fn malformed_api_key_hashes_are_build_errors_naming_the_tenant() {
    for hash in [
        "tg_acme_plain_key_by_mistake",
        "sha256:1234",
        "md5:0123456789abcdef0123456789abcdef",
    ] {
        let err = Authenticator::new(vec![grant("acme", hash)], None)
            .await
            .unwrap_err();
        assert!(err.contains("`acme`") && err.contains("sha256:"), "{err}");
        assert!(!err.contains(hash), "the value is not echoed: {err}");
    }
    let shared = hash_key("same");
    let err = Authenticator::new(
        vec![grant("acme", shared.clone()), grant("globex", shared)],
        None,
    )
    .await
    .unwrap_err();
    assert!(err.contains("acme") && err.contains("globex"), "{err}");
    let err = Authenticator::new(
        vec![],
        Some(JwtConfig::new(JwtKeys::Hs256Secret("too-short".into()))),
    )
    .await
    .unwrap_err();
    assert!(err.contains("32 bytes"), "{err}");
}

/// A JWKS served over HTTP on 127.0.0.1, counting requests.
struct JwksServer {
    url: String,
    document: Arc<Mutex<Value>>,
    hits: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn start(document: Value) -> JwksServer {
        let document = Arc::new(Mutex::new(document));
        let hits = Arc::new(AtomicUsize::new(0));
        let app = axum::Router::new().route(
            "/.well-known/jwks.json",
            axum::routing::get({
                let document = document.clone();
                let hits = hits.clone();
                move || {
                    hits.fetch_add(1, Ordering::SeqCst);
                    let body = document.lock().unwrap().clone();
                    async move { axum::Json(body) }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        JwksServer {
            url: format!("http://{address}/.well-known/jwks.json"),
            document,
            hits,
            _task: task,
        }
    }

    fn publish(&self, document: Value) {
        *self.document.lock().unwrap() = document;
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn config(&self) -> JwtConfig {
        JwtConfig::new(JwtKeys::JwksUrl(self.url.clone()))
    }
}

#[tokio::test]
async fn rotated_keys_are_fetched_on_an_unknown_kid_at_most_every_30s() {
    let old = rsa_key("2026-01");
    let server = JwksServer::start(jwks(&[&old])).await;
    let auth = Authenticator::new(vec![], Some(server.config()))
        .await
        .unwrap();
    assert_eq!(server.hits(), 1);
    assert_eq!(
        auth.authenticate(Some(&bearer(&sign(&old, &claims("acme")))))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );

    // The issuer rotates to a new key: the first token naming it triggers a reload.
    let new = ec_key("2026-02");
    server.publish(jwks(&[&old, &new]));
    assert_eq!(
        auth.authenticate(Some(&bearer(&sign(&new, &claims("globex")))))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("globex".into())
    );
    assert_eq!(server.hits(), 2);
    // Known keys need no fetch.
    auth.authenticate(Some(&bearer(&sign(&new, &claims("globex")))))
        .await
        .unwrap();
    assert_eq!(server.hits(), 2);

    // Another rotation right away is not fetched again within 30 s: unknown key ids
    // cannot be used to hammer the issuer.
    let newer = rsa_key("2026-03");
    server.publish(jwks(&[&new, &newer]));
    for _ in 0..3 {
        let err = refused(
            &auth,
            &sign(&newer, &claims("acme")),
            "invalid_credentials",
            "acme",
        )
        .await;
        assert!(err.to_string().contains("kid"), "{err}");
    }
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn the_jwks_is_reloaded_periodically_until_the_authenticator_is_dropped() {
    let old = rsa_key("old");
    let new = rsa_key("new");
    let server = JwksServer::start(jwks(&[&old])).await;
    let config = JwtConfig {
        jwks_refresh: Duration::from_secs(1),
        ..server.config()
    };
    let auth = Authenticator::new(vec![], Some(config)).await.unwrap();
    let old_token = sign(&old, &claims("acme"));
    assert!(auth.authenticate(Some(&bearer(&old_token))).await.is_ok());

    // The old key is withdrawn: after the next periodic reload it no longer verifies.
    server.publish(jwks(&[&new]));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(server.hits() >= 2, "hits: {}", server.hits());
    refused(&auth, &old_token, "invalid_credentials", "acme").await;

    // A failing reload keeps the keys there were.
    server.publish(json!({"keys": []}));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        auth.authenticate(Some(&bearer(&sign(&new, &claims("acme")))))
            .await
            .is_ok()
    );

    let clone = auth.clone();
    drop(auth);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let hits = server.hits();
    assert!(hits >= 3, "the clone keeps reloading: {hits}");
    drop(clone);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert!(server.hits() <= hits + 1, "reloads stop once dropped");
}

#[tokio::test]
async fn an_unreachable_or_broken_jwks_url_fails_startup_clearly() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    drop(listener);
    let config = JwtConfig::new(JwtKeys::JwksUrl(url.clone()));
    let err = Authenticator::new(vec![], Some(config)).await.unwrap_err();
    assert!(
        err.contains("cannot fetch the JWKS") && err.contains(&url),
        "{err}"
    );

    let server = JwksServer::start(json!({"keys": []})).await;
    let err = Authenticator::new(vec![], Some(server.config()))
        .await
        .unwrap_err();
    assert!(err.contains("no usable signing key"), "{err}");

    let missing = JwtConfig::new(JwtKeys::JwksUrl(
        server.url.replace("jwks.json", "nothing-here"),
    ));
    let err = Authenticator::new(vec![], Some(missing)).await.unwrap_err();
    assert!(err.contains("404"), "{err}");

    let no_file = JwtConfig::new(JwtKeys::JwksFile("/nonexistent/toolgate/jwks.json".into()));
    let err = Authenticator::new(vec![], Some(no_file)).await.unwrap_err();
    assert!(err.contains("cannot read the JWKS file"), "{err}");
}

#[tokio::test]
async fn a_jwks_file_is_reread_when_a_token_names_a_new_key() {
    let old = rsa_key("old");
    let path = jwks_file(&jwks(&[&old]));
    let config = JwtConfig::new(JwtKeys::JwksFile(path.clone()));
    let auth = Authenticator::new(vec![], Some(config)).await.unwrap();
    let new = ec_key("new");
    std::fs::write(&path, jwks(&[&old, &new]).to_string()).unwrap();
    assert_eq!(
        auth.authenticate(Some(&bearer(&sign(&new, &claims("acme")))))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("acme".into())
    );
    assert_eq!(
        auth.authenticate(Some(&bearer(&sign(&old, &claims("globex")))))
            .await
            .unwrap()
            .map(|i| i.tenant),
        Some("globex".into())
    );
}

/// A shared key of `tenant` (no subject), as the config gives the authenticator.
fn grant(tenant: &str, hash: impl Into<String>) -> toolgate::config::KeyGrant {
    toolgate::config::KeyGrant {
        tenant: tenant.into(),
        hash: hash.into(),
        subject: None,
    }
}
