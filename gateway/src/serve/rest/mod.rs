//! The plain-HTTP surface (`/v1`), for agent loops that do not speak MCP. Same front
//! door (tenants, rate limits), same policy, same call path as `/mcp`.
//!
//! - `GET /v1/tools?format=openai|responses|anthropic|gemini|mcp[&session=ID][&strict=true]`
//!   — the caller's visible tools in that format (tools a format cannot express are
//!   left out and listed under `skipped` with the reason);
//! - `POST /v1/sessions` → `{session_id, tools}`; `GET /v1/sessions/{id}/tools`;
//!   `POST /v1/sessions/{id}/tools/expand` — `tool_expand_tools` over HTTP (same body
//!   and result as the protocol tool); `DELETE /v1/sessions/{id}` ends one (204);
//! - `POST /v1/tools/{name}/call` `{arguments, session?, background?}` — one call; the
//!   answer is `{content, structured_content?, is_error, usage: {result_tokens,
//!   original_tokens, truncated}}`; with `background: true`, `202` and the task's URLs;
//! - `GET /v1/tasks/{id}`, `GET /v1/tasks/{id}/events`, `DELETE /v1/tasks/{id}` — the
//!   background calls (`tasks.rs`, `task_events.rs`).
//!
//! Errors are JSON `{"error": {"code", "message"}}` with the status of the error kind.
//! A query parameter a route does not read is refused (`query.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::from_fn;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_adapters::{JsonObject, ToolError};

use self::types::{ErrorBody, ErrorDetail, Member};
use super::auth::{DoorRefusal, FrontDoor};
use crate::access::{Caller, View};
use crate::call::protocol_tools;
use crate::catalog::DefinitionCosts;
use crate::errors::http_status;
use crate::export::{self, ExportOptions, Format};
use crate::telemetry::{CallTrace, rest_calls};

mod batch;
mod call;
pub(crate) mod connections;
mod openapi;
mod query;
pub(crate) mod stream;
mod task_events;
mod tasks;
mod types;

/// One call's route, as the router and `/openapi.json` write it.
const CALL_ROUTE: &str = "/v1/tools/{name}/call";

pub fn router(door: Arc<FrontDoor>) -> Router {
    let body_limit = door.gateway.config().max_request_body_bytes;
    Router::new()
        .route("/v1/tools", get(list_tools))
        .route("/v1/tools/{name}/schema", get(tool_schema))
        .route(CALL_ROUTE, post(call_route))
        .route("/v1/connections", get(connections::list))
        .route(
            "/v1/connections/{upstream}",
            post(connections::connect).delete(connections::disconnect),
        )
        .route("/v1/sessions", post(create_session))
        .route("/v1/sessions/{id}", delete(end_session))
        .route("/v1/sessions/{id}/tools", get(session_tools))
        .route("/v1/sessions/{id}/tools/expand", post(expand_session))
        .route(
            "/v1/tool_calls",
            post(batch::openai).layer(from_fn(rest_calls)),
        )
        .route(
            "/v1/tool_use",
            post(batch::anthropic).layer(from_fn(rest_calls)),
        )
        .route(
            "/v1/tasks/{id}",
            get(tasks::get_task).delete(tasks::cancel_task),
        )
        .route("/v1/tasks/{id}/events", get(task_events::task_events))
        .route("/v1/tasks/{id}/input", post(tasks::answer_input))
        .route("/openapi.json", get(openapi::document))
        .route_layer(from_fn(query::known_only))
        // Every body is read by [`admit_then_read`]; this is the limit of anything else.
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .with_state(door)
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (
        status,
        Json(ErrorBody::from(ErrorDetail::new(code, message))),
    )
        .into_response()
}

/// A path no route serves: the API's JSON error, as for everything else under it.
pub(super) async fn no_such_endpoint(method: http::Method, uri: http::Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no endpoint answers {method} {}: the REST API is described at /openapi.json",
            crate::summary::cut(uri.path(), 200)
        ),
    )
}

/// A path served, but not with this method; axum adds the `Allow` header to any 405.
pub(super) async fn method_not_allowed(method: http::Method, uri: http::Uri) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} does not take {method}: the Allow header lists the methods it takes",
            crate::summary::cut(uri.path(), 200)
        ),
    )
}

fn tool_error(error: &ToolError) -> Response {
    let mut response = error_response(error);
    if let ToolError::RateLimited {
        retry_after: Some(after),
        ..
    } = error
        && let Ok(value) = http::HeaderValue::from_str(&after.as_secs().max(1).to_string())
    {
        response.headers_mut().insert("retry-after", value);
    }
    response
}

fn error_response(error: &ToolError) -> Response {
    (
        http_status(error),
        Json(ErrorBody::from(ErrorDetail::of(error))),
    )
        .into_response()
}

/// The caller of a REST request: the tenant from the front door and, when a session id
/// is given, that session (which must be the tenant's).
async fn caller(
    door: &FrontDoor,
    headers: &HeaderMap,
    session: Option<&str>,
) -> Result<Caller, Response> {
    let caller = door.admit(headers).await.map_err(DoorRefusal::rest)?;
    caller_of(door, caller, session).await
}

/// The caller of a request the front door already admitted, on the session it names
/// (which must be the caller's own: its tenant's and its subject's).
async fn caller_of(
    door: &FrontDoor,
    caller: Caller,
    session: Option<&str>,
) -> Result<Caller, Response> {
    Ok(match session {
        None => caller,
        Some(id) => {
            let stored = door
                .gateway
                .sessions
                .get_owned(id, &caller.tenant.name, caller.subject())
                .await
                .map_err(|e| super::auth::state_unavailable(&e.to_string()).rest())?
                .ok_or_else(|| {
                    error(
                        StatusCode::NOT_FOUND,
                        "session_not_found",
                        "session not found: it expired or belongs to other credentials",
                    )
                })?;
            caller.in_session(stored.id, stored.expanded)
        }
    })
}

/// `GET /v1/tools`.
#[derive(Serialize, JsonSchema)]
struct ToolList {
    format: &'static str,
    /// The tools in the requested format.
    // Each as its format's JSON, which `export` builds.
    #[schemars(with = "Vec<JsonObject>")]
    tools: Vec<Value>,
    /// Tools the format cannot express, with the reason.
    skipped: Vec<Skipped>,
    definition_costs: DefinitionCosts,
}

#[derive(Serialize, JsonSchema)]
struct Skipped {
    name: String,
    reason: String,
}

async fn list_tools(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let format: Format = match query
        .get("format")
        .map(String::as_str)
        .unwrap_or("openai")
        .parse()
    {
        Ok(format) => format,
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_format",
                "format must be one of openai, responses, anthropic, gemini, mcp",
            );
        }
    };
    let strict = match query.get("strict").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_strict",
                "strict must be true or false",
            );
        }
    };
    if strict && !matches!(format, Format::OpenAi | Format::Responses) {
        // Said, not ignored: a caller asking for strict schemas must not get loose ones.
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_strict",
            format!(
                "strict=true applies to format=openai and format=responses (OpenAI strict \
                 mode); it is not offered for format={}: leave strict out",
                format.as_str()
            ),
        );
    }
    let options = ExportOptions { strict };
    let caller = match caller(&door, &headers, query.get("session").map(String::as_str)).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let view = View::of(&door.gateway, &caller);
    let visible = view.visible(&caller);
    let definitions = protocol_tools::definitions()
        .into_iter()
        .chain(visible.iter().map(|entry| entry.definition()));
    let mut tools = Vec::new();
    let mut skipped = Vec::new();
    for definition in definitions {
        match export::export(&definition, format, &options) {
            Ok(tool) => tools.push(tool),
            Err(e) => skipped.push(Skipped {
                name: e.tool,
                reason: e.reason,
            }),
        }
    }
    Json(ToolList {
        format: format.as_str(),
        tools,
        skipped,
        definition_costs: DefinitionCosts::of(visible.iter().map(|e| &**e)),
    })
    .into_response()
}

/// `GET /v1/tools/{name}/schema?path=…`: what `tool_schema` answers.
async fn tool_schema(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let caller = match caller(&door, &headers, query.get("session").map(String::as_str)).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let path = query.get("path").map(String::as_str);
    match protocol_tools::schema_answer(&door.gateway, &caller, &name, path, None) {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => tool_error(&e),
    }
}

/// The tool name in a `POST /v1/tools/{name}/call` path, percent-decoded as the
/// router's `Path` would: what lets the listener's fast path ([`super::Front`]) serve
/// a call without the router. `None` for any other path, and for a name that does not
/// decode to UTF-8 (the router answers that one).
pub(crate) fn call_path_name(path: &str) -> Option<String> {
    let segment = path.strip_prefix("/v1/tools/")?.strip_suffix("/call")?;
    if segment.is_empty() || segment.contains('/') {
        return None;
    }
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(|name| name.into_owned())
}

/// `POST /v1/tools/{name}/call` as a route of the router.
async fn call_route(
    State(door): State<Arc<FrontDoor>>,
    Path(name): Path<String>,
    request: axum::extract::Request,
) -> Response {
    serve_call(door, name, request).await
}

/// `POST /v1/tools/{name}/call`, whichever way it came ([`call_route`] or the
/// listener's fast path): the request's trace and span, the call, and the correlation
/// id on every answer, refusals included.
pub(crate) async fn serve_call(
    door: Arc<FrontDoor>,
    name: String,
    request: axum::extract::Request,
) -> Response {
    use tracing::Instrument;
    let trace = CallTrace::start("rest", request.headers(), None);
    let span = trace.span.clone();
    let mut response = call_tool(door, &trace, name, request)
        .instrument(span)
        .await;
    trace.tag(&mut response);
    response
}

/// A REST request's admitted caller (no session yet) and its body, as
/// [`admit_then_read`] gives them.
pub(super) struct RestBody {
    pub caller: Caller,
    pub body: axum::body::Bytes,
}

impl axum::extract::FromRequest<Arc<FrontDoor>> for RestBody {
    type Rejection = Response;

    async fn from_request(
        request: axum::extract::Request,
        door: &Arc<FrontDoor>,
    ) -> Result<Self, Response> {
        let (parts, body) = request.into_parts();
        let (caller, body) = admit_then_read(door, &parts.headers, body).await?;
        Ok(RestBody { caller, body })
    }
}

/// The one rule of every REST route that reads a body: the front door answers first,
/// so nobody without credentials gets a body read (as on `/mcp` and the admin API);
/// then the body is read, at most `max_request_body_bytes` (the limit `/mcp` has
/// too) within the listener's body timeout, a larger, slow or broken one refused in
/// JSON.
async fn admit_then_read(
    door: &FrontDoor,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<(Caller, axum::body::Bytes), Response> {
    let caller = door.admit(headers).await.map_err(DoorRefusal::rest)?;
    let limit = door.gateway.config().max_request_body_bytes;
    let body = axum::body::to_bytes(body, limit).await.map_err(|failed| {
        let setting = "max_request_body_bytes in the gateway config";
        let (status, code, message) = super::listener::body_refusal(&failed, limit, setting);
        error(status, code, message)
    })?;
    Ok((caller, body))
}

/// `POST /v1/tools/{name}/call`.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
struct CallRequest {
    /// The tool's arguments (its input schema).
    // Read as any JSON and checked by the handler: arguments that are no object are
    // `invalid_args` (an argument problem, as the tool's own schema check says),
    // where the body's other problems are `invalid_body`.
    #[schemars(with = "Option<JsonObject>")]
    arguments: Option<Value>,
    /// A session whose visible set applies.
    #[serde(default)]
    session: Member<Option<String>>,
    /// Run the call in the background: `202` with the task's URLs instead of the
    /// result (a tool that may not run as a task: 400 `execution_mode`).
    #[serde(default)]
    background: Member<Option<bool>>,
    /// The members the call does not take, refused by name: a misspelt member would
    /// otherwise look like a call without arguments.
    #[serde(flatten)]
    #[schemars(skip)]
    unknown: JsonObject,
}

/// What a call's body that is not one says: the shape it must have, and why not.
fn not_a_call_body(problem: impl std::fmt::Display) -> ErrorDetail {
    ErrorDetail::new(
        "invalid_body",
        format!(
            "expected {{\"arguments\": {{…}}, \"session\"?: \"…\", \"background\"?: true}}: \
             {problem}"
        ),
    )
}

/// What a call's body asks for, its members checked.
struct CallBody {
    arguments: JsonObject,
    session: Option<String>,
    background: bool,
}

/// Reads a call's body (empty: no arguments). A body that is not one is a `400` with
/// the first problem, in the order the members are checked: unknown members,
/// `arguments`, `session`, `background`.
fn read_call(body: &[u8]) -> Result<CallBody, ErrorDetail> {
    // Read as an object first: a struct would take an array too, and refuse a
    // member given twice (the last one counts).
    let request: JsonObject = if body.is_empty() {
        JsonObject::new()
    } else {
        serde_json::from_slice(body).map_err(not_a_call_body)?
    };
    let request: CallRequest = types::fields_of(Value::Object(request)).map_err(not_a_call_body)?;
    if let Some(unknown) = request.unknown.keys().next() {
        return Err(ErrorDetail::new(
            "invalid_body",
            format!(
                "unknown member {:?} in the call's body: it takes `arguments` (the tool's \
                 arguments), `session` and `background`",
                crate::summary::cut(unknown, 200)
            ),
        ));
    }
    let arguments = match request.arguments {
        None => JsonObject::new(),
        Some(Value::Object(arguments)) => arguments,
        Some(_) => {
            return Err(ErrorDetail::new(
                "invalid_args",
                "`arguments` must be a JSON object",
            ));
        }
    };
    let session = request
        .session
        .optional()
        .map_err(|()| ErrorDetail::new("invalid_body", "`session` must be a string"))?;
    let background = types::background(request.background)
        .map_err(|message| ErrorDetail::new("invalid_body", message))?;
    Ok(CallBody {
        arguments,
        session,
        background,
    })
}

async fn call_tool(
    door: Arc<FrontDoor>,
    trace: &CallTrace,
    name: String,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    // The listener's fast path passes no router: the route layer's rule, here.
    if let Some(refused) = query::refuse_unknown(&parts.method, CALL_ROUTE, &parts.uri) {
        return refused;
    }
    let headers = parts.headers;
    let (tenant, body) = match admit_then_read(&door, &headers, body).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let CallBody {
        arguments,
        session,
        background,
    } = match read_call(&body) {
        Ok(call) => call,
        Err(refused) => return error(StatusCode::BAD_REQUEST, &refused.code, refused.message),
    };
    let caller = match caller_of(&door, tenant, session.as_deref()).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    if background {
        let started =
            tasks::start(&door, &caller, &name, arguments, Arc::new(headers), trace).await;
        return match started {
            Ok(record) => tasks::accepted(&record),
            Err(refusal) => tool_error(&refusal),
        };
    }
    let gateway = &door.gateway;
    let mut ctx = trace.call_context(gateway.config().call_timeout);
    if let Some(format) = stream::wanted(&headers) {
        ctx.request_headers = Arc::new(headers);
        return stream::respond(door.clone(), caller, name, arguments, ctx, format);
    }
    ctx.request_headers = Arc::new(headers);
    let finished = call::execute_cancellable(gateway.clone(), caller, name, arguments, ctx).await;
    match (finished.answer(), &finished.outcome) {
        (Some(answer), _) => Json(answer).into_response(),
        (None, Err(e)) => tool_error(e),
        (None, Ok(_)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "failed",
            "the call finished without a result",
        ),
    }
}

/// The MCP definitions a caller sees: the protocol tools, then its visible tools.
fn visible_definitions(door: &FrontDoor, caller: &Caller) -> Vec<JsonObject> {
    let view = View::of(&door.gateway, caller);
    protocol_tools::definitions()
        .into_iter()
        .chain(
            view.visible(caller)
                .into_iter()
                .map(|entry| entry.definition()),
        )
        .collect()
}

/// `POST /v1/sessions`.
#[derive(Serialize, JsonSchema)]
struct SessionCreated {
    session_id: String,
    /// MCP tool definitions the session sees.
    tools: Vec<JsonObject>,
}

/// `GET /v1/sessions/{id}/tools`.
#[derive(Serialize, JsonSchema)]
struct SessionTools {
    tools: Vec<JsonObject>,
}

async fn create_session(State(door): State<Arc<FrontDoor>>, headers: HeaderMap) -> Response {
    let caller = match door.admit(&headers).await {
        Ok(caller) => caller,
        Err(refused) => return refused.rest(),
    };
    let sessions = &door.gateway.sessions;
    let session = match sessions.create(&caller.tenant.name, caller.subject()).await {
        Ok(session) => session,
        Err(refused) => return super::auth::session_refused(&refused).rest(),
    };
    let caller = caller.in_session(session.id.clone(), session.expanded);
    let tools = visible_definitions(&door, &caller);
    let created = SessionCreated {
        session_id: session.id,
        tools,
    };
    (StatusCode::CREATED, Json(created)).into_response()
}

/// Ends a session of the caller's tenant (as an MCP client's `DELETE /mcp` does): its
/// expanded set is gone, and its id is answered 404 from then on.
async fn end_session(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    // Another tenant's session, or none: 404 alike.
    if let Err(response) = caller(&door, &headers, Some(&id)).await {
        return response;
    }
    match door.gateway.sessions.delete(&id).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(unavailable) => super::auth::state_unavailable(&unavailable.to_string()).rest(),
    }
}

async fn session_tools(
    State(door): State<Arc<FrontDoor>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    match caller(&door, &headers, Some(&id)).await {
        Ok(caller) => Json(SessionTools {
            tools: visible_definitions(&door, &caller),
        })
        .into_response(),
        Err(response) => response,
    }
}

/// `tool_expand_tools` arguments.
#[derive(Deserialize, JsonSchema)]
struct ExpandRequest {
    /// Exact tool names to add.
    // Anything but a list of strings is for `tool_expand_tools` to refuse, with the
    // message the MCP tool gives.
    #[serde(default)]
    #[schemars(!default, length(min = 1))]
    tool_names: Member<Vec<String>>,
}

async fn expand_session(
    State(door): State<Arc<FrontDoor>>,
    Path(id): Path<String>,
    RestBody {
        caller: admitted,
        body,
    }: RestBody,
) -> Response {
    let caller = match caller_of(&door, admitted, Some(&id)).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    // Read as an object first, as the call's body is.
    let request: ExpandRequest = match serde_json::from_slice::<JsonObject>(&body)
        .and_then(|object| types::fields_of(Value::Object(object)))
    {
        Ok(request) => request,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_body",
                format!("expected {{\"tool_names\": [\"exact_name\", …]}}: {e}"),
            );
        }
    };
    let requested = request.tool_names.given();
    match protocol_tools::expand_requested(&door.gateway, &caller, requested).await {
        Ok(expansion) => Json(expansion).into_response(),
        Err(e) => tool_error(&e),
    }
}
