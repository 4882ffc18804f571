//! An OAuth-protected MCP server of the tests, with its own authorization server, on
//! 127.0.0.1: what a remote MCP server such as GitHub's looks like to the gateway.
//!
//! - The authorization server publishes RFC 8414 metadata, registers clients (RFC
//!   7591), authorizes the user its `user` cookie names (what a browser signed in at
//!   it carries), checks PKCE S256 and `resource`, issues access tokens that expire
//!   after the configured lifetime with rotating refresh tokens, and revokes (RFC
//!   7009).
//! - The MCP endpoint (`/mcp`, JSON answers, no sessions) answers 401 with an RFC 9728
//!   challenge to a request without a valid token, and serves one tool, `whoami`,
//!   which answers the user the token was issued to.
//! - Started as an HTTP API ([`OAuthUpstream::start_api`]), it serves the same
//!   `whoami` as `GET /api/whoami` (which also wants the application's key,
//!   `X-App-Key: app-key`), described by `/openapi.json`: an OpenAPI 3 spec whose
//!   `authorizationCode` flow names this authorization server by relative URLs. Its
//!   authorizations then take no `resource` (the spec declares none).
//!
//! It records what the tests assert: which user each call reached it as, refreshes,
//! revocations and refused tokens.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// See the module docs.
pub struct OAuthUpstream {
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OAuthUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the resource behind the authorization server is.
#[derive(PartialEq)]
enum Serves {
    Mcp,
    Api,
}

#[derive(Default)]
struct Shared {
    base: String,
    token_lifetime: Duration,
    /// The `resource` every authorization and code exchange must carry (`None`: none).
    resource: Option<String>,
    state: Mutex<Records>,
}

#[derive(Default)]
struct Records {
    counter: u64,
    clients: HashMap<String, String>,
    /// code → (user, code_challenge, resource)
    codes: HashMap<String, (String, String, Option<String>)>,
    /// The `scope` of each authorization request (`None`: not sent).
    scopes: Vec<Option<String>>,
    /// access token → (user, expires)
    access: HashMap<String, (String, Instant)>,
    /// refresh token → user
    refresh: HashMap<String, String>,
    revoked: HashSet<String>,
    refreshes: u64,
    authorizations: u64,
    /// The user each `whoami` call reached the server as, with the token's owner as
    /// the gateway's caller claimed it (the call's `expect` argument).
    calls: Vec<(String, String)>,
    refused: u64,
}

impl OAuthUpstream {
    /// Starts it as an MCP server; tokens live `token_lifetime`.
    pub async fn start(token_lifetime: Duration) -> OAuthUpstream {
        Self::start_as(token_lifetime, Serves::Mcp).await
    }

    /// Starts it as an HTTP API described by `/openapi.json`; tokens live
    /// `token_lifetime`.
    pub async fn start_api(token_lifetime: Duration) -> OAuthUpstream {
        Self::start_as(token_lifetime, Serves::Api).await
    }

    async fn start_as(token_lifetime: Duration, serves: Serves) -> OAuthUpstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let base = format!(
            "http://127.0.0.1:{}",
            listener.local_addr().expect("addr").port()
        );
        let shared = Arc::new(Shared {
            base: base.clone(),
            token_lifetime,
            resource: (serves == Serves::Mcp).then(|| format!("{base}/mcp")),
            state: Mutex::default(),
        });
        let app = Router::new()
            .route("/.well-known/oauth-authorization-server", get(as_metadata))
            .route("/.well-known/oauth-protected-resource/mcp", get(prm))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/revoke", post(revoke))
            .route("/openapi.json", get(openapi_spec))
            .route("/api/whoami", get(api_whoami))
            .route(
                "/mcp",
                post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        OAuthUpstream { base, shared, task }
    }

    /// The MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn records(&self) -> std::sync::MutexGuard<'_, Records> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `(user the token belonged to, user the caller said it is)` of every call.
    pub fn calls(&self) -> Vec<(String, String)> {
        self.records().calls.clone()
    }

    pub fn refreshes(&self) -> u64 {
        self.records().refreshes
    }

    pub fn authorizations(&self) -> u64 {
        self.records().authorizations
    }

    /// A token of `user` issued outside any flow (an account's personal access
    /// token), valid for an hour.
    pub fn issue_token(&self, user: &str) -> String {
        let mut records = self.records();
        let token = fresh(&mut records, "pat");
        records.access.insert(
            token.clone(),
            (user.to_owned(), Instant::now() + Duration::from_secs(3600)),
        );
        token
    }

    /// Tokens revoked so far.
    pub fn revoked(&self) -> usize {
        self.records().revoked.len()
    }

    /// Requests refused for a missing, expired or revoked token.
    pub fn refused(&self) -> u64 {
        self.records().refused
    }

    /// The `scope` of each authorization request so far.
    pub fn scopes_asked(&self) -> Vec<Option<String>> {
        self.records().scopes.clone()
    }

    /// The spec of the API ([`OAuthUpstream::start_api`]).
    pub fn spec_url(&self) -> String {
        format!("{}/openapi.json", self.base)
    }

    /// Registers a client beforehand (what an operator does at a provider's console).
    pub fn add_client(&self, id: &str, secret: &str) {
        self.records().clients.insert(id.into(), secret.into());
    }

    /// Makes every access token issued so far invalid (refresh tokens stay good), as
    /// a server that revoked them or restarted would: the next call with one is
    /// refused with 401.
    pub fn invalidate_access_tokens(&self) {
        let now = Instant::now();
        for (_, expires) in self.records().access.values_mut() {
            *expires = now;
        }
    }
}

fn fresh(records: &mut Records, what: &str) -> String {
    records.counter += 1;
    format!(
        "{what}-{}-{:x}",
        records.counter,
        rand_part(records.counter)
    )
}

/// Not guessable across runs is not needed here; distinct is.
fn rand_part(n: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

async fn as_metadata(State(s): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "issuer": s.base,
        "authorization_endpoint": format!("{}/authorize", s.base),
        "token_endpoint": format!("{}/token", s.base),
        "registration_endpoint": format!("{}/register", s.base),
        "revocation_endpoint": format!("{}/revoke", s.base),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "authorization_response_iss_parameter_supported": true,
        "scopes_supported": ["whoami"],
    }))
    .into_response()
}

async fn prm(State(s): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "resource": format!("{}/mcp", s.base),
        "authorization_servers": [s.base],
        "scopes_supported": ["whoami"],
    }))
    .into_response()
}

async fn register(State(s): State<Arc<Shared>>, axum::Json(body): axum::Json<Value>) -> Response {
    let mut records = s.state.lock().unwrap_or_else(|e| e.into_inner());
    let id = fresh(&mut records, "client");
    let secret = fresh(&mut records, "secret");
    records.clients.insert(id.clone(), secret.clone());
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": id,
            "client_secret": secret,
            "redirect_uris": body["redirect_uris"],
            "token_endpoint_auth_method": "client_secret_basic",
        })),
    )
        .into_response()
}

/// The signed-in user: the `user` cookie a browser carries at this server.
fn signed_in(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix("user=").map(str::to_owned))
}

async fn authorize(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(user) = signed_in(&headers) else {
        return (StatusCode::UNAUTHORIZED, "sign in first").into_response();
    };
    let (Some(redirect), Some(challenge), Some(client)) = (
        q.get("redirect_uri"),
        q.get("code_challenge"),
        q.get("client_id"),
    ) else {
        return (
            StatusCode::BAD_REQUEST,
            "redirect_uri, code_challenge, client_id",
        )
            .into_response();
    };
    if q.get("code_challenge_method").map(String::as_str) != Some("S256")
        || q.get("resource") != s.resource.as_ref()
    {
        return (
            StatusCode::BAD_REQUEST,
            "S256 and the resource are required",
        )
            .into_response();
    }
    let mut records = s.state.lock().unwrap_or_else(|e| e.into_inner());
    if !records.clients.contains_key(client) {
        return (StatusCode::BAD_REQUEST, "unknown client").into_response();
    }
    records.authorizations += 1;
    records.scopes.push(q.get("scope").cloned());
    let code = fresh(&mut records, "code");
    let resource = q.get("resource").cloned();
    records
        .codes
        .insert(code.clone(), (user, challenge.clone(), resource));
    let mut to = url::Url::parse(redirect).expect("redirect_uri is a URL");
    to.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", q.get("state").map(String::as_str).unwrap_or(""))
        .append_pair("iss", &s.base);
    (StatusCode::FOUND, [(header::LOCATION, to.to_string())]).into_response()
}

fn s256(verifier: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()))
}

/// The client a token request authenticated as (Basic or form), when its secret is right.
fn client_of(
    records: &Records,
    headers: &HeaderMap,
    form: &HashMap<String, String>,
) -> Option<String> {
    use base64::Engine as _;
    let (id, secret) = match headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
    {
        Some(basic) => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(basic)
                .ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (id, secret) = text.split_once(':')?;
            (id.to_owned(), secret.to_owned())
        }
        None => (
            form.get("client_id")?.clone(),
            form.get("client_secret")?.clone(),
        ),
    };
    (records.clients.get(&id) == Some(&secret)).then_some(id)
}

async fn token(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut records = s.state.lock().unwrap_or_else(|e| e.into_inner());
    let refuse = |error: &str| {
        (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error}))).into_response()
    };
    if client_of(&records, &headers, &form).is_none() {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let user = match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let Some((user, challenge, resource)) =
                form.get("code").and_then(|c| records.codes.remove(c))
            else {
                return refuse("invalid_grant");
            };
            let verifier = form.get("code_verifier").map(String::as_str).unwrap_or("");
            if s256(verifier) != challenge || form.get("resource") != resource.as_ref() {
                return refuse("invalid_grant");
            }
            user
        }
        Some("refresh_token") => {
            let Some(user) = form
                .get("refresh_token")
                .and_then(|r| records.refresh.remove(r))
            else {
                return refuse("invalid_grant");
            };
            records.refreshes += 1;
            user
        }
        _ => return refuse("unsupported_grant_type"),
    };
    let access = fresh(&mut records, &format!("at-{user}"));
    let refresh = fresh(&mut records, &format!("rt-{user}"));
    records.access.insert(
        access.clone(),
        (user.clone(), Instant::now() + s.token_lifetime),
    );
    records.refresh.insert(refresh.clone(), user);
    axum::Json(json!({
        "access_token": access,
        "refresh_token": refresh,
        "token_type": "Bearer",
        "expires_in": s.token_lifetime.as_secs(),
        "scope": "whoami",
    }))
    .into_response()
}

async fn revoke(
    State(s): State<Arc<Shared>>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut records = s.state.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(token) = form.get("token") {
        records.access.remove(token);
        records.refresh.remove(token);
        records.revoked.insert(token.clone());
    }
    StatusCode::OK.into_response()
}

/// The user of the request's valid token.
fn user_of(s: &Shared, headers: &HeaderMap) -> Option<String> {
    let token = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?;
    let records = s.state.lock().unwrap_or_else(|e| e.into_inner());
    let (user, expires) = records.access.get(token)?;
    (*expires > Instant::now()).then(|| user.clone())
}

async fn mcp(State(s): State<Arc<Shared>>, headers: HeaderMap, body: String) -> Response {
    let Some(user) = user_of(&s, &headers) else {
        s.state.lock().unwrap_or_else(|e| e.into_inner()).refused += 1;
        let challenge = format!(
            "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            s.base
        );
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
            axum::Json(json!({"error": "invalid_token"})),
        )
            .into_response();
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
            "serverInfo": {"name": "oauth-whoami", "version": "1"},
        }),
        "ping" => json!({}),
        // Each user's list has a tool of that user's own beside the common one.
        "tools/list" => json!({"tools": [{
            "name": "whoami",
            "description": "The user this server sees the call as",
            "inputSchema": {"type": "object", "properties": {"expect": {"type": "string"}}},
        }, {
            "name": format!("{user}_notes"),
            "description": format!("Reads the private notes of {user}"),
            "inputSchema": {"type": "object", "properties": {"expect": {"type": "string"}}},
        }]}),
        "tools/call" => {
            let expected = message["params"]["arguments"]["expect"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            s.state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .calls
                .push((user.clone(), expected));
            json!({"content": [{"type": "text", "text": user}]})
        }
        _ => {
            return axum::Json(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}}))
            .into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

/// The API's description: `whoami` wants the user's token (scope `whoami`) and the
/// application's key together; the flow's URLs are relative to the spec's.
async fn openapi_spec(State(s): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "openapi": "3.0.3",
        "info": {"title": "whoami", "version": "1"},
        "servers": [{"url": format!("{}/api", s.base)}],
        "components": {"securitySchemes": {
            "user": {"type": "oauth2", "flows": {"authorizationCode": {
                "authorizationUrl": "/authorize",
                "tokenUrl": "/token",
                "scopes": {"whoami": "who you are", "unused": "never required"},
            }}},
            "app": {"type": "apiKey", "in": "header", "name": "X-App-Key"},
        }},
        "paths": {"/whoami": {"get": {
            "operationId": "whoami",
            "security": [{"user": ["whoami"], "app": []}],
            "parameters": [{"name": "expect", "in": "query", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "the user",
                "content": {"application/json": {"schema": {"type": "object"}}}}},
        }}},
    }))
    .into_response()
}

/// `GET /api/whoami`: the user of the request's token, recorded with the `expect`
/// the caller named.
async fn api_whoami(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(user) = user_of(&s, &headers) else {
        s.state.lock().unwrap_or_else(|e| e.into_inner()).refused += 1;
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"")],
            axum::Json(json!({"error": "invalid_token"})),
        )
            .into_response();
    };
    if headers.get("x-app-key").and_then(|v| v.to_str().ok()) != Some("app-key") {
        return (StatusCode::BAD_REQUEST, "the application's key is missing").into_response();
    }
    let expected = q.get("expect").cloned().unwrap_or_default();
    s.state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .calls
        .push((user.clone(), expected));
    axum::Json(json!({"user": user})).into_response()
}

/// What a browser signed in at the upstream's authorization server as `user` does
/// with a connect link: load its page, press its button, follow each redirect (the
/// authorization server, then the gateway's callback). `Ok` when the gateway says the
/// account is connected; otherwise what went wrong.
pub async fn connect_as(link: &str, user: &str) -> Result<(), String> {
    let browser = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let page = browser.get(link).send().await.map_err(|e| e.to_string())?;
    if page.status() != StatusCode::OK {
        return Err(format!("connect page: HTTP {}", page.status()));
    }
    let mut next = browser.post(link).send().await.map_err(|e| e.to_string())?;
    // At most the authorization server and the callback: bounded.
    for _ in 0..4 {
        let status = next.status();
        if !status.is_redirection() {
            let text = next.text().await.unwrap_or_default();
            return if status == StatusCode::OK && text.contains("is connected") {
                Ok(())
            } else {
                Err(format!("HTTP {status}: {text}"))
            };
        }
        let to = next
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or("a redirect without Location")?
            .to_owned();
        next = browser
            .get(&to)
            .header(header::COOKIE, format!("user={user}"))
            .send()
            .await
            .map_err(|e| e.to_string())?;
    }
    Err("too many redirects".into())
}

/// `count` calls of `callers` (API key, user) in turn, 16 at a time, each answered by
/// `call` as (HTTP status, the user the upstream says it was reached as). Panics
/// unless every call answered 200 as its own caller; returns how many were made.
pub async fn assert_each_calls_as_itself<F, Fut>(
    count: usize,
    callers: &[(&'static str, &'static str)],
    call: F,
) -> usize
where
    F: Fn(&'static str, &'static str) -> Fut,
    Fut: std::future::Future<Output = (u16, String)>,
{
    use futures::StreamExt;
    let answers: Vec<(&str, u16, String)> = futures::stream::iter(0..count)
        .map(|i| {
            let (key, user) = callers[i % callers.len()];
            let answer = call(key, user);
            async move {
                let (status, seen) = answer.await;
                (user, status, seen)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let wrong: Vec<_> = answers
        .iter()
        .filter(|(user, status, seen)| *status != 200 || seen != user)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {count} calls answered wrong: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    answers.len()
}
