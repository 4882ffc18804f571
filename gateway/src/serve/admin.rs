//! The admin API: register OpenAPI upstreams at run time.
//!
//! - `POST /admin/upstreams` `{name, openapi: {spec_url | spec_path, base_url?, auth?,
//!   filters?, …}}` imports the API, adds its tools live (MCP sessions get
//!   `tools/list_changed`) and answers 201 with the import report;
//! - `GET /admin/upstreams` lists every upstream with its status and origin;
//! - `DELETE /admin/upstreams/{name}` removes a registration;
//! - `POST /admin/upstreams/{name}/refresh` re-fetches the spec.
//!
//! A registration reads local files only under `admin.spec_dir` (a `spec_path`
//! elsewhere, or without it, is a 400 `spec_path_refused`, the same whether the file
//! exists or not): whoever holds the admin token is not the operator, and a spec's
//! text ends up in every tenant's tool list.
//!
//! Every request needs `Authorization: Bearer <admin.token>`. A bad spec is a 422
//! naming the error and where in the document it is, and changes nothing. Errors are
//! JSON: `{"error": {"code", "message"}}`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::gateway::Gateway;
use crate::registry::{self, Registration, RegistrationStore, Registry};

/// Shared by the admin handlers and the console: one set of operations, one lock.
pub struct Admin {
    gateway: Arc<Gateway>,
    registry: Arc<Registry>,
    store: Arc<dyn RegistrationStore>,
    token: Option<toolgate_adapters::Secret>,
    /// One change at a time: the stored set is read, changed and written whole.
    changes: Mutex<()>,
}

/// An admin operation's answer: its status and JSON body (`Null` for 204).
pub type Answer = (StatusCode, Value);

impl Admin {
    pub fn new(registry: Arc<Registry>) -> Arc<Admin> {
        let gateway = registry.gateway.clone();
        let token = gateway.config().admin.as_ref().map(|a| a.token.clone());
        Arc::new(Admin {
            gateway,
            store: registry.store().clone(),
            registry,
            token,
            changes: Mutex::new(()),
        })
    }

    /// The admin token, when the admin API is enabled.
    pub fn token(&self) -> Option<&toolgate_adapters::Secret> {
        self.token.as_ref()
    }

    /// Every upstream's status with its origin (`config` or `admin`).
    pub async fn upstreams(&self) -> Result<Vec<Value>, Answer> {
        let stored: Vec<String> = match self.store.load().await {
            Ok(stored) => stored.into_iter().map(|r| r.name).collect(),
            Err(e) => return Err(store_unavailable(&e.to_string())),
        };
        Ok(self
            .gateway
            .statuses()
            .into_iter()
            .map(|status| {
                let origin = if stored.contains(&status.name) {
                    "admin"
                } else {
                    "config"
                };
                let mut value = serde_json::to_value(&status).unwrap_or_default();
                value["origin"] = json!(origin);
                value
            })
            .collect())
    }

    /// `POST /admin/upstreams`: imports a registration given as JSON.
    pub async fn register(&self, body: &[u8]) -> Answer {
        let registration = match parse_registration(body) {
            Ok(registration) => registration,
            Err(answer) => return answer,
        };
        let _serial = self.changes.lock().await;
        if self.gateway.upstreams().contains_key(&registration.name) {
            return error(
                StatusCode::CONFLICT,
                "exists",
                format!(
                    "an upstream named '{}' exists; DELETE it first or use …/refresh",
                    registration.name
                ),
            );
        }
        self.apply(registration, StatusCode::CREATED).await
    }

    /// What [`Admin::register`] would import, changing nothing: `{name, tools,
    /// report}` of a dry run with the same checks (name, spec path, the spec itself).
    pub async fn preview(&self, body: &[u8]) -> Answer {
        let mut registration = match parse_registration(body) {
            Ok(registration) => registration,
            Err(answer) => return answer,
        };
        let config = self.gateway.config();
        let spec_dir = config.admin.as_ref().and_then(|a| a.spec_dir.as_deref());
        if let Err(refused) = registry::confine_spec_path(spec_dir, &mut registration.openapi).await
        {
            return error(StatusCode::BAD_REQUEST, "spec_path_refused", refused);
        }
        let name = registration.name;
        match registry::preview(&name, registration.openapi).await {
            Ok((tools, report)) => (
                StatusCode::OK,
                json!({"name": name, "tools": tools, "report": report}),
            ),
            Err(e) => error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_spec",
                format!("the spec of '{name}' could not be imported: {e}"),
            ),
        }
    }

    /// `POST /admin/upstreams/{name}/refresh`: re-fetches an OpenAPI upstream's spec.
    pub async fn refresh(&self, name: String) -> Answer {
        let _serial = self.changes.lock().await;
        let stored = match self.store.load().await {
            Ok(stored) => stored,
            Err(e) => return store_unavailable(&e.to_string()),
        };
        let config = stored
            .into_iter()
            .find(|r| r.name == name)
            .map(|r| r.openapi)
            .or_else(|| {
                self.gateway
                    .config()
                    .upstreams
                    .get(&name)
                    .and_then(|u| u.openapi().cloned())
            });
        let Some(openapi) = config else {
            return error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no OpenAPI upstream named '{name}'"),
            );
        };
        self.apply(Registration { name, openapi }, StatusCode::OK)
            .await
    }

    /// Imports (replacing any upstream of that name only on success) and stores it
    /// when it is a runtime registration.
    async fn apply(&self, mut registration: Registration, status: StatusCode) -> Answer {
        let name = registration.name.clone();
        let config = self.gateway.config();
        if !config.upstreams.contains_key(&name) {
            let spec_dir = config.admin.as_ref().and_then(|a| a.spec_dir.as_deref());
            if let Err(refused) =
                registry::confine_spec_path(spec_dir, &mut registration.openapi).await
            {
                return error(StatusCode::BAD_REQUEST, "spec_path_refused", refused);
            }
        }
        let imported = registry::import(
            &self.registry,
            &name,
            registration.openapi.clone(),
            registry::Origin::Request,
        )
        .await;
        let report = match imported {
            Ok(report) => report,
            // The only change that makes a request's import obsolete: a reload meanwhile.
            Err(registry::ImportError::Obsolete(_)) => {
                return error(
                    StatusCode::CONFLICT,
                    "defined_in_config",
                    format!(
                        "'{name}' was defined in the config file while its spec was imported; \
                         change it there"
                    ),
                );
            }
            Err(e) => {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_spec",
                    format!("the spec of '{name}' could not be imported: {e}"),
                );
            }
        };
        if !self.gateway.config().upstreams.contains_key(&name) {
            self.registry
                .note_mounted(&name, registration.openapi.clone());
            let stored = match self.store.put(&registration).await {
                Ok(()) if status == StatusCode::OK => self.store.announce_refresh(&name).await,
                other => other,
            };
            if let Err(e) = stored {
                tracing::error!(upstream = %name, error = %e, "registration not persisted");
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "not_persisted",
                    format!(
                        "'{name}' is live but could not be stored ({e}); it will be gone after a restart"
                    ),
                );
            }
        }
        let catalog = self.gateway.catalog();
        let entries: Vec<_> = catalog
            .entries()
            .iter()
            .filter(|e| e.upstream == name)
            .collect();
        let tools: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
        // What these tools cost in a model's context as listed (each definition within
        // its budget), what they would cost whole, and which were abbreviated.
        let costs = crate::catalog::DefinitionCosts::of(entries.iter().map(|e| &***e));
        (
            status,
            json!({
                "name": name,
                "tools": tools,
                "catalog_tokens": costs.listed_tokens,
                "definition_costs": costs,
                "report": report,
            }),
        )
    }

    /// `DELETE /admin/upstreams/{name}`: removes a runtime registration.
    pub async fn remove(&self, name: &str) -> Answer {
        if self.gateway.config().upstreams.contains_key(name) {
            return error(
                StatusCode::CONFLICT,
                "defined_in_config",
                format!("'{name}' is defined in the config file; remove it there"),
            );
        }
        let _serial = self.changes.lock().await;
        // Stored first: if the store cannot be changed, nothing changes here either.
        let was_stored = match self.store.remove(name).await {
            Ok(was_stored) => was_stored,
            Err(e) => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not_persisted",
                    format!("'{name}' was not removed: the change could not be stored ({e})"),
                );
            }
        };
        let was_mounted = registry::unmount_registration(&self.registry, name).await;
        if !was_stored && !was_mounted {
            return error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no upstream named '{name}'"),
            );
        }
        (StatusCode::NO_CONTENT, Value::Null)
    }
}

pub fn router(admin: Arc<Admin>) -> Router {
    Router::new()
        .route("/admin/upstreams", get(list).post(register))
        .route("/admin/upstreams/{name}", axum::routing::delete(remove))
        .route("/admin/upstreams/{name}/refresh", post(refresh))
        .with_state(admin)
}

/// The largest registration body read (a registration names its spec, never holds it).
const BODY_LIMIT: usize = 1024 * 1024;

/// A registration from a request body, its name checked.
fn parse_registration(body: &[u8]) -> Result<Registration, Answer> {
    let registration: Registration = serde_json::from_slice(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            format!(
                "expected {{\"name\": …, \"openapi\": {{\"spec_url\" or \"spec_path\": …}}}}: {e}"
            ),
        )
    })?;
    crate::config::check_upstream_name(&registration.name)
        .map_err(|message| error(StatusCode::BAD_REQUEST, "invalid_name", message))?;
    Ok(registration)
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Answer {
    (
        status,
        json!({"error": {"code": code, "message": message.into()}}),
    )
}

fn respond((status, body): Answer) -> Response {
    if body.is_null() {
        return status.into_response();
    }
    let unavailable = body["error"]["code"] == "state_unavailable";
    let mut response = (status, Json(body)).into_response();
    if unavailable {
        // The one rule for an unreachable state store: retry shortly.
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// Checks the bearer token (in constant time, as every credential is).
/// `Some(response)` when the request must be refused.
fn refuse(admin: &Admin, headers: &HeaderMap) -> Option<Response> {
    let Some(expected) = &admin.token else {
        return Some(respond(error(
            StatusCode::NOT_FOUND,
            "admin_disabled",
            "the admin API is disabled: set `admin.token` in the gateway config",
        )));
    };
    (!super::auth::bearer_is_one_of(headers, &[Some(expected)])).then(|| {
        respond(error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send `Authorization: Bearer <admin token>`",
        ))
    })
}

async fn list(State(admin): State<Arc<Admin>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = refuse(&admin, &headers) {
        return refusal;
    }
    match admin.upstreams().await {
        Ok(upstreams) => Json(json!({"upstreams": upstreams})).into_response(),
        Err(answer) => respond(answer),
    }
}

async fn register(
    State(admin): State<Arc<Admin>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    if let Some(refusal) = refuse(&admin, &headers) {
        return refusal;
    }
    // Read only once the token is checked, and refused in the admin API's JSON.
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(body) => body,
        Err(failed) => {
            let (status, code, message) =
                super::listener::body_refusal(&failed, BODY_LIMIT, "the admin API's limit");
            return respond(error(status, code, message));
        }
    };
    respond(admin.register(&body).await)
}

async fn refresh(
    State(admin): State<Arc<Admin>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    if let Some(refusal) = refuse(&admin, &headers) {
        return refusal;
    }
    respond(admin.refresh(name).await)
}

async fn remove(
    State(admin): State<Arc<Admin>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    if let Some(refusal) = refuse(&admin, &headers) {
        return refusal;
    }
    respond(admin.remove(&name).await)
}

/// An unreachable state store: 503 (answered with `Retry-After`, see `respond`).
fn store_unavailable(detail: &str) -> Answer {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "state_unavailable",
        format!("the registrations could not be read: {detail}"),
    )
}
