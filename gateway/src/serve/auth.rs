//! Who is calling: the HTTP surfaces' front door. Turns the `Authorization` header
//! into a [`Tenant`] (API key or JWT; the anonymous tenant when configured), counts the
//! request against the tenant's rate limit, and hands the tenant (and, on `/mcp`, its
//! session) to the handler that admitted it. Refusals are 401 (with `WWW-Authenticate`),
//! 429 (with `Retry-After`) or 503, handed back as a [`DoorRefusal`]: each surface says
//! it in its own shape (the MCP error type on `/mcp`, [`DoorRefusal::rest`] elsewhere),
//! so the door builds no surface's body.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderName, HeaderValue, StatusCode, header};
use serde_json::json;

use crate::app::App;
use crate::credentials::Authenticator;
use crate::gateway::Gateway;
use crate::policy::{Caller, Refusal};
use crate::state::sessions::Session;

/// What the front door needs, and what the surfaces behind it reach through it: the
/// application (the core and its services) and the core itself, at hand.
pub struct FrontDoor {
    pub gateway: Arc<Gateway>,
    pub app: Arc<App>,
    pub authenticator: Authenticator,
}

/// A request the front door turned away, in no surface's shape yet: the status, a
/// stable code, what to do, and the header that goes with it (`WWW-Authenticate`,
/// `Retry-After`).
#[derive(Debug, Clone, PartialEq)]
pub struct DoorRefusal {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub header: Option<(HeaderName, HeaderValue)>,
}

impl DoorRefusal {
    fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
        header: Option<(HeaderName, String)>,
    ) -> DoorRefusal {
        DoorRefusal {
            status,
            code,
            message: message.into(),
            // A value that is not a header (never, for the values made here) is left
            // out rather than failing the refusal.
            header: header
                .and_then(|(name, value)| Some((name, HeaderValue::from_str(&value).ok()?))),
        }
    }

    /// The REST surfaces' answer: `{"error": {code, message}}` with the status.
    pub fn rest(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        let mut response = Response::new(Body::from(body.to_string()));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some((name, value)) = self.header {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

impl FrontDoor {
    /// Who sends a request (its tenant, and its subject when the credential names
    /// one; no session yet), or why it is refused.
    pub async fn admit(&self, headers: &http::HeaderMap) -> Result<Caller, DoorRefusal> {
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let policy = self.gateway.policy();
        // An open gateway ignores credentials: there is nothing to check them against.
        let authenticated = if policy.is_open() {
            None
        } else {
            match self.authenticator.authenticate(authorization).await {
                // A verified token naming no configured tenant: said as such, not as
                // missing credentials (a token was sent).
                Ok(Some(identity)) if policy.tenant(&identity.tenant).is_none() => {
                    let error = crate::credentials::AuthError::UnknownTenant;
                    self.audit_refusal(error.code());
                    return Err(DoorRefusal::new(
                        StatusCode::UNAUTHORIZED,
                        error.code(),
                        error.to_string(),
                        Some((
                            header::WWW_AUTHENTICATE,
                            with_resource_metadata(
                                error.www_authenticate(),
                                &self.gateway,
                                headers,
                            ),
                        )),
                    ));
                }
                Ok(tenant) => tenant,
                Err(error) => {
                    self.audit_refusal(error.code());
                    let challenge =
                        with_resource_metadata(error.www_authenticate(), &self.gateway, headers);
                    return Err(DoorRefusal::new(
                        StatusCode::UNAUTHORIZED,
                        error.code(),
                        error.to_string(),
                        Some((header::WWW_AUTHENTICATE, challenge)),
                    ));
                }
            }
        };
        let (tenant, subject, assertion) = match authenticated {
            Some(identity) => (Some(identity.tenant), identity.subject, identity.assertion),
            None => (None, None, None),
        };
        let tenant = policy
            .resolve(tenant.as_deref())
            .map_err(|r| self.refuse(r, headers))?;
        self.gateway
            .count_request(&tenant)
            .await
            .map_err(|r| self.refuse(r, headers))?;
        Ok(Caller::new(tenant, subject.map(Arc::from)).with_assertion(assertion))
    }

    /// Counts and audits a request refused at the door (`code` from a fixed set).
    fn audit_refusal(&self, code: &'static str) {
        self.gateway.metrics.record_refusal(code);
        tracing::info!(
            target: crate::logging::AUDIT_TARGET,
            outcome = code,
            "request refused"
        );
    }

    fn refuse(&self, refusal_reason: Refusal, headers: &http::HeaderMap) -> DoorRefusal {
        self.audit_refusal(match &refusal_reason {
            Refusal::Unauthenticated => "missing_credentials",
            Refusal::RateLimited { .. } => "rate_limited",
            Refusal::LimiterUnavailable { .. } => "state_unavailable",
        });
        match refusal_reason {
            Refusal::Unauthenticated => DoorRefusal::new(
                StatusCode::UNAUTHORIZED,
                "missing_credentials",
                "credentials required: send `Authorization: Bearer <API key or JWT>`",
                Some((
                    header::WWW_AUTHENTICATE,
                    with_resource_metadata(
                        "Bearer realm=\"toolgate\"".to_owned(),
                        &self.gateway,
                        headers,
                    ),
                )),
            ),
            Refusal::RateLimited { retry_after } => {
                let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
                DoorRefusal::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    format!("too many requests for this tenant: retry after {seconds} s"),
                    Some((header::RETRY_AFTER, seconds.to_string())),
                )
            }
            Refusal::LimiterUnavailable { message } => state_unavailable(&message),
        }
    }
}

/// The gateway's resource identifier (RFC 9728 / RFC 8707): `public_url` when
/// configured, else `http://<Host>` (the guard admitted that Host).
pub fn resource_url(config: &crate::config::Config, headers: &http::HeaderMap) -> Option<String> {
    if let Some(url) = &config.public_url {
        return Some(url.trim_end_matches('/').to_owned());
    }
    let host = headers.get(header::HOST)?.to_str().ok()?.trim();
    (!host.is_empty()).then(|| format!("http://{host}"))
}

/// A 401 challenge that also says where to find the authorization server
/// (`resource_metadata`, RFC 9728 §5.1), when the gateway names one (`jwt.issuer`).
fn with_resource_metadata(
    challenge: String,
    gateway: &Gateway,
    headers: &http::HeaderMap,
) -> String {
    let config = gateway.config();
    let has_issuer = config.jwt.as_ref().is_some_and(|j| j.issuer.is_some());
    match resource_url(&config, headers) {
        Some(resource) if has_issuer => format!(
            "{challenge}, resource_metadata=\"{resource}/.well-known/oauth-protected-resource\""
        ),
        _ => challenge,
    }
}

/// Whether the request's bearer token is one of `secrets` (absent ones match
/// nothing), each compared in constant time ([`Secret::matches`]).
///
/// [`Secret::matches`]: toolgate_adapters::Secret::matches
pub fn bearer_is_one_of(
    headers: &http::HeaderMap,
    secrets: &[Option<&toolgate_adapters::Secret>],
) -> bool {
    let Some(presented) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
    else {
        return false;
    };
    // Every secret is compared, whichever matches: the time says nothing about which.
    secrets
        .iter()
        .flatten()
        .fold(false, |found, secret| found | secret.matches(presented))
}

/// 503 for a shared state store that cannot be reached: retry shortly.
pub fn state_unavailable(message: &str) -> DoorRefusal {
    DoorRefusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "state_unavailable",
        message,
        Some((header::RETRY_AFTER, "1".to_owned())),
    )
}

/// A new session refused: the store is unreachable (as [`state_unavailable`]) or the
/// table or the tenant's quota is full (503, `Retry-After` until a session idles out).
pub fn session_refused(refused: &crate::state::sessions::Refused) -> DoorRefusal {
    match refused {
        crate::state::sessions::Refused::Unavailable(unavailable) => {
            state_unavailable(&format!("the session could not be recorded: {unavailable}"))
        }
        crate::state::sessions::Refused::Full {
            message,
            retry_after,
        } => DoorRefusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "sessions_full",
            message.clone(),
            Some((
                header::RETRY_AFTER,
                retry_after.as_secs().max(1).to_string(),
            )),
        ),
    }
}

/// The MCP transport's session header.
const SESSION_HEADER: &str = "mcp-session-id";

/// An `/mcp` request let in: its tenant, and the session it names (checked to exist
/// and to belong to that tenant), if any.
///
/// A transport session belongs to the tenant that initialized it, and every later
/// request on it (POST, the GET stream, DELETE) must come from that tenant. A session
/// this gateway does not know (never seen, or idled out) is refused like a missing
/// one, so it can never be taken over. With a shared state backend the owner is read
/// from the shared store, so a session goes on through any replica.
pub struct Admitted {
    /// Who sends it (no session in it yet: see `session`).
    pub caller: Caller,
    pub session: Option<Session>,
}

/// Admits an `/mcp` request (its tenant and session) or refuses it.
pub async fn admit_mcp(
    door: &FrontDoor,
    headers: &http::HeaderMap,
) -> Result<Admitted, DoorRefusal> {
    let caller = door.admit(headers).await?;
    let session_id = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let session = match &session_id {
        None => None,
        Some(id) => match door
            .gateway
            .sessions
            .get_owned(id, &caller.tenant.name, caller.subject())
            .await
        {
            Ok(Some(session)) => Some(session),
            Ok(None) => {
                return Err(DoorRefusal::new(
                    StatusCode::NOT_FOUND,
                    "session_not_found",
                    "session not found: it expired or belongs to other credentials; initialize a new session",
                    None,
                ));
            }
            Err(unavailable) => return Err(state_unavailable(&unavailable.to_string())),
        },
    };
    Ok(Admitted { caller, session })
}
