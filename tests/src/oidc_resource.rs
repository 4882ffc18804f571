//! An MCP server protected by a real OpenID provider (`tests/node/oidc_provider.mjs`),
//! on 127.0.0.1: a resource server as the MCP authorization spec describes one.
//!
//! - It publishes RFC 9728 protected-resource metadata naming the provider as its
//!   authorization server, with the scope `whoami`.
//! - Its MCP endpoint (`/mcp`, JSON answers, no sessions) takes only a JWT access token
//!   signed by one of the provider's keys (its JWKS, found through its OpenID
//!   discovery document), issued by it, for this resource (`aud`), not expired (no
//!   leeway). Anything else is answered 401 with `WWW-Authenticate: Bearer
//!   resource_metadata="…"` — what a client discovers the provider from.
//! - Its one tool, `whoami`, answers the token's `sub`.
//!
//! It records every call it served: the token's subject, the token itself, and who the
//! gateway's caller said it was (the call's `expect` argument), so a test can check
//! that each call arrived with that caller's own token.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

/// One `whoami` call as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenCall {
    /// The access token's `sub`.
    pub sub: String,
    /// The access token the call carried.
    pub token: String,
    /// Who the gateway's caller said it was (`expect`).
    pub caller: String,
}

/// See the module docs.
pub struct OidcResource {
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OidcResource {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    base: String,
    issuer: String,
    /// The provider's signing keys, by key id.
    keys: Vec<(Option<String>, DecodingKey)>,
    records: Mutex<Records>,
}

#[derive(Default)]
struct Records {
    calls: Vec<SeenCall>,
    /// Requests answered 401, with why.
    refused: Vec<String>,
}

impl OidcResource {
    /// Starts it for the provider at `issuer`, whose keys it fetches first (its OpenID
    /// discovery document names its JWKS).
    pub async fn start(issuer: &str) -> OidcResource {
        let keys = provider_keys(issuer).await;
        assert!(!keys.is_empty(), "the provider publishes no signing key");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let base = format!(
            "http://127.0.0.1:{}",
            listener.local_addr().expect("addr").port()
        );
        let shared = Arc::new(Shared {
            base: base.clone(),
            issuer: issuer.to_owned(),
            keys,
            records: Mutex::default(),
        });
        let app = Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(metadata))
            .route(
                "/mcp",
                post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        OidcResource { base, shared, task }
    }

    /// The MCP endpoint: the resource (and the tokens' audience).
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn records(&self) -> std::sync::MutexGuard<'_, Records> {
        self.shared
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Every `whoami` call served, in order.
    pub fn calls(&self) -> Vec<SeenCall> {
        self.records().calls.clone()
    }

    /// Why each refused request was refused, in order.
    pub fn refused(&self) -> Vec<String> {
        self.records().refused.clone()
    }

    /// The subject `token` would be served as now (the server's own check), or why not.
    pub fn verify(&self, token: &str) -> Result<String, String> {
        verify(&self.shared, token)
    }
}

/// The provider's signing keys: its discovery document, then its `jwks_uri`.
async fn provider_keys(issuer: &str) -> Vec<(Option<String>, DecodingKey)> {
    let client = crate::http();
    let get = |url: String| {
        let client = client.clone();
        async move {
            client
                .get(&url)
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .unwrap_or_else(|e| panic!("GET {url}: {e}"))
                .json::<Value>()
                .await
                .unwrap_or_else(|e| panic!("GET {url}: not JSON: {e}"))
        }
    };
    let discovery = get(format!("{issuer}/.well-known/openid-configuration")).await;
    let jwks_uri = discovery["jwks_uri"]
        .as_str()
        .expect("the discovery document names jwks_uri")
        .to_owned();
    let set: JwkSet = serde_json::from_value(get(jwks_uri).await).expect("a JWK set");
    set.keys
        .iter()
        .filter_map(|jwk| {
            let key = DecodingKey::from_jwk(jwk).ok()?;
            Some((jwk.common.key_id.clone(), key))
        })
        .collect()
}

/// The token's `sub` when it is a valid access token for this resource; else why not.
fn verify(s: &Shared, token: &str) -> Result<String, String> {
    let header = jsonwebtoken::decode_header(token).map_err(|e| format!("not a JWT: {e}"))?;
    if header.alg != Algorithm::RS256 {
        return Err(format!("unexpected algorithm {:?}", header.alg));
    }
    let key = s
        .keys
        .iter()
        .find(|(kid, _)| header.kid.is_none() || *kid == header.kid)
        .map(|(_, key)| key)
        .ok_or("signed with a key the provider does not publish")?;
    let mut validation = Validation::new(Algorithm::RS256);
    // Expired is expired: the tests wait past a short lifetime and expect a refusal.
    validation.leeway = 0;
    validation.set_audience(&[format!("{}/mcp", s.base)]);
    validation.set_issuer(&[&s.issuer]);
    validation.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
    let claims = jsonwebtoken::decode::<Value>(token, key, &validation)
        .map_err(|e| format!("refused: {e}"))?
        .claims;
    claims["sub"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "no sub".to_owned())
}

async fn metadata(State(s): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "resource": format!("{}/mcp", s.base),
        "authorization_servers": [s.issuer],
        "scopes_supported": ["whoami"],
        "bearer_methods_supported": ["header"],
    }))
    .into_response()
}

/// 401 with the RFC 9728 challenge (`error="invalid_token"` when a token was sent).
fn challenge(s: &Shared, why: String, had_token: bool) -> Response {
    s.records
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .refused
        .push(why);
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", s.base);
    let value = if had_token {
        format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\"")
    } else {
        format!("Bearer resource_metadata=\"{metadata}\"")
    };
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, value)],
        axum::Json(json!({"error": "invalid_token"})),
    )
        .into_response()
}

async fn mcp(State(s): State<Arc<Shared>>, headers: HeaderMap, body: String) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let Some(token) = token else {
        return challenge(&s, "no token".into(), false);
    };
    let sub = match verify(&s, &token) {
        Ok(sub) => sub,
        Err(why) => return challenge(&s, why, true),
    };
    let Ok(message) = serde_json::from_str::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match message["method"].as_str().unwrap_or("") {
        "initialize" => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "oidc-whoami", "version": "1"},
        }),
        "ping" => json!({}),
        "tools/list" => json!({"tools": [{
            "name": "whoami",
            "description": "The subject of the access token this call carried",
            "inputSchema": {"type": "object", "properties": {"expect": {"type": "string"}}},
        }]}),
        "tools/call" => {
            let caller = message["params"]["arguments"]["expect"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            s.records
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .calls
                .push(SeenCall {
                    sub: sub.clone(),
                    token,
                    caller,
                });
            json!({"content": [{"type": "text", "text": sub}]})
        }
        _ => {
            return axum::Json(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}))
            .into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}
