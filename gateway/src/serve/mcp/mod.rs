//! MCP sessions over streamable HTTP (protocol versions 2024-11-05 to 2025-11-25),
//! served directly on axum: `initialize` creates a session that is only a record in
//! the session store, so an idle session costs that record and nothing else, and any
//! replica serves any session. A request is read once, as raw JSON slices, and
//! answered without a per-session task or channel.
//!
//! Sessionless (2026-07-28) requests are served here too (see `sessionless`): the
//! same methods, each request carrying its own protocol signals.
//!
//! The MCP-only rooms live here: [`features`] (prompts, resources and completion),
//! [`protocol_errors`] (every `/mcp` error as a JSON-RPC error), `wire` (one message
//! read as raw JSON slices; answers and SSE frames). Error codes are
//! `toolgate_adapters::codes`, one place for both crates. stdio (`super::stdio`) is
//! served by this same implementation.
//!
//! Background calls (MCP Tasks) in both generations — `tools/call` with `task` and
//! `tasks/*` on a session, the tasks extension sessionless — are answered by
//! [`tasks`] from the gateway's task runner.
//!
//! What a session's POST may carry: a request (answered as JSON, or as an SSE stream
//! when the call sends something before its result: see [`call`]), a notification
//! (`202`; `notifications/cancelled` stops a call), or the client's answer to a request
//! the gateway sent it during a call (`202`). GET opens the session's stream
//! (`list_changed`, late log lines), DELETE ends the session.

mod call;
pub(crate) mod error;
pub mod features;
mod live;
mod methods;
pub mod protocol_errors;
mod sessionless;
mod tasks;
pub(crate) use sessionless::name_field;
pub(crate) mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http::Method;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::RpcError;

use super::auth::Admitted;
use crate::access::Caller;
use crate::app::App;
use crate::gateway::Gateway;
use error::McpError;
use live::Live;
use wire::{Envelope, Kind};

/// Every version `/mcp` speaks.
pub const SUPPORTED_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// The versions with `initialize` and sessions, served here.
const SESSION_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const NEWEST_SESSION_VERSION: &str = "2025-11-25";

/// How often an idle GET stream carries a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The session front door of `/mcp`.
pub struct McpSessions {
    /// The application: its background calls serve `tasks/*` and task-augmented calls.
    app: Arc<App>,
    gateway: Arc<Gateway>,
    live: Arc<Live>,
    /// The protocol tools' definitions, serialized and counted once.
    protocol_tools: methods::ProtocolTools,
    stop: CancellationToken,
}

impl McpSessions {
    pub fn new(app: &Arc<App>, stop: CancellationToken) -> McpSessions {
        let gateway = app.gateway.clone();
        let protocol_tools = methods::ProtocolTools::new(gateway.config().results.encoding);
        McpSessions {
            live: Live::start(&gateway),
            app: app.clone(),
            gateway,
            protocol_tools,
            stop,
        }
    }

    /// Answers one `/mcp` request of an admitted caller (over HTTP, its `Host` and
    /// `Origin` were checked by [`crate::serve::guard`]; over stdio the requests never
    /// crossed a network).
    pub async fn route_trusted(&self, request: Request, admitted: Admitted) -> Response {
        let method = request.method().clone();
        match (method, admitted.session) {
            (Method::POST, session) => self.post(request, admitted.tenant, session).await,
            (Method::GET, Some(session)) => self.open_stream(&request, &session.id),
            (Method::DELETE, Some(session)) => {
                self.end(request.headers().clone(), &session.id).await
            }
            (Method::GET | Method::DELETE, None) => session_required(),
            _ => {
                let mut refused = McpError::method_not_allowed(
                    "/mcp takes POST (messages), GET (a session's stream) and DELETE (end a session)",
                )
                .response();
                refused.headers_mut().insert(
                    http::header::ALLOW,
                    http::HeaderValue::from_static("GET, POST, DELETE"),
                );
                refused
            }
        }
    }

    async fn post(
        &self,
        request: Request,
        tenant: Arc<crate::policy::Tenant>,
        session: Option<crate::state::sessions::Session>,
    ) -> Response {
        let (parts, body) = request.into_parts();
        let limit = self.gateway.config().max_request_body_bytes;
        let bytes = match axum::body::to_bytes(body, limit).await {
            Ok(bytes) => bytes,
            Err(error) => {
                return match super::listener::body_timeout(&error) {
                    Some(late) => McpError::body_timeout(late.to_string()).response(),
                    // A body without a declared length, past the limit.
                    None => protocol_errors::body_too_large(limit, None),
                };
            }
        };
        if let Some(refused) = wire::refuse_post(&parts.headers) {
            return refused;
        }
        let envelope = match Envelope::parse(&bytes) {
            Ok(envelope) => envelope,
            Err(error) => {
                return McpError::parse_error(format!(
                    "{error}: send one JSON-RPC 2.0 request, notification or response object"
                ))
                .response();
            }
        };
        let Some(session) = session else {
            if let Some(id) = envelope.initialize_id() {
                return self
                    .initialize(&parts.headers, &envelope, id.get(), &tenant)
                    .await;
            }
            if sessionless::is_sessionless(&parts.headers, &envelope) {
                return self.sessionless(&envelope, tenant, parts.headers).await;
            }
            return session_required();
        };
        let caller = Caller {
            tenant,
            session: Some((session.id.clone(), session.expanded)),
        };
        match envelope.kind() {
            Kind::Request { id, method } => {
                self.request(
                    &envelope,
                    id.get(),
                    method,
                    caller,
                    session.id,
                    parts.headers,
                )
                .await
            }
            Kind::Notification { method } => {
                self.notification(&envelope, method, &session.id);
                wire::accepted()
            }
            Kind::Answer { id } => {
                self.live
                    .answer(&session.id, id.get(), client_answer(&envelope));
                wire::accepted()
            }
            Kind::Invalid => invalid_message(),
        }
    }

    /// A request without a session, protocol 2026-07-28 (see [`sessionless`]).
    async fn sessionless(
        &self,
        envelope: &Envelope<'_>,
        tenant: Arc<crate::policy::Tenant>,
        headers: http::HeaderMap,
    ) -> Response {
        let (id, method) = match envelope.kind() {
            Kind::Request { id, method } => (id.get(), method),
            // Closing the request's stream is how this version cancels; a
            // notification or an answer has nothing to act on.
            Kind::Notification { .. } | Kind::Answer { .. } => return wire::accepted(),
            Kind::Invalid => return invalid_message(),
        };
        let log_level = match sessionless::check(&headers, envelope, method) {
            Ok(level) => level,
            Err(refused) => return refused.answer(id),
        };
        let caller = Caller {
            tenant,
            session: None,
        };
        let message = match method {
            "tools/call" => {
                let params = match envelope.params::<call::CallParams>() {
                    Ok(params) => params,
                    Err(error) => return call_params_refused(id, &error),
                };
                if params.request_state().is_none() {
                    let declared = tasks::declares_extension(params.meta.as_ref());
                    match tasks::extension_mode(&self.gateway, &caller, id, &params.name, declared)
                    {
                        tasks::CallMode::Plain => {}
                        tasks::CallMode::Refused(refused) => return refused,
                        tasks::CallMode::Task => {
                            let arguments = params.arguments.unwrap_or_default();
                            return tasks::extension_call(
                                &self.app,
                                &caller,
                                id,
                                params.name,
                                arguments,
                                Arc::new(headers),
                            )
                            .await;
                        }
                    }
                }
                return self
                    .sessionless_call(id.to_owned(), params, log_level, caller.tenant, headers)
                    .await;
            }
            task_method if tasks::is_task_method(task_method) => {
                return tasks::extension_method(&self.app, &caller, id, task_method, envelope)
                    .await;
            }
            "tools/list" => {
                return self.list_tools(id, &caller, envelope, methods::STATELESS_LIST_FIELDS);
            }
            "server/discover" => wire::result_message(id, &methods::discover_result(&self.gateway)),
            "resources/subscribe" | "resources/unsubscribe" => wire::error_message(
                id,
                toolgate_adapters::codes::METHOD_NOT_FOUND,
                &format!(
                    "{method} needs a session: protocol {} has none (initialize with \
                     {NEWEST_SESSION_VERSION} to subscribe)",
                    sessionless::VERSION
                ),
                None,
            ),
            feature if features::is_feature(feature) => {
                methods::feature(&self.gateway, &caller, id, feature, envelope.params).await
            }
            other => method_not_found(id, other),
        };
        wire::json_response(message)
    }

    /// `tools/list` for `caller`, one page (see [`methods::list_tools`]).
    fn list_tools(
        &self,
        id: &str,
        caller: &Caller,
        envelope: &Envelope<'_>,
        extra: &str,
    ) -> Response {
        let gateway = &self.gateway;
        methods::list_tools(id, gateway, &self.protocol_tools, caller, envelope, extra)
    }

    async fn initialize(
        &self,
        headers: &http::HeaderMap,
        envelope: &Envelope<'_>,
        id: &str,
        tenant: &crate::policy::Tenant,
    ) -> Response {
        if let Some(refused) = wire::refuse_post(headers) {
            return refused;
        }
        let params = match envelope.params::<methods::InitializeParams>() {
            Ok(params) => params,
            Err(error) => {
                return wire::json_response(wire::error_message(
                    id,
                    toolgate_adapters::codes::INVALID_PARAMS,
                    &error,
                    None,
                ));
            }
        };
        let session = match self.gateway.sessions.create(&tenant.name).await {
            Ok(session) => session,
            Err(refused) => {
                return super::auth::session_refused(super::auth::Shape::JsonRpc, &refused);
            }
        };
        let result = methods::initialize_result(&self.gateway, &params);
        let mut response = wire::json_response(wire::result_message(id, &result));
        if let Ok(value) = http::HeaderValue::from_str(&session.id) {
            response.headers_mut().insert(wire::SESSION_HEADER, value);
        }
        response
    }

    async fn request(
        &self,
        envelope: &Envelope<'_>,
        id: &str,
        method: &str,
        caller: Caller,
        session: String,
        headers: http::HeaderMap,
    ) -> Response {
        let gateway = &self.gateway;
        let message = match method {
            "tools/call" => {
                let params = match envelope.params::<call::CallParams>() {
                    Ok(params) => params,
                    Err(error) => return call_params_refused(id, &error),
                };
                if params.task.is_some() {
                    let arguments = params.arguments.unwrap_or_default();
                    let message = tasks::session_call(
                        &self.app,
                        &self.live,
                        &caller,
                        id,
                        params.name,
                        arguments,
                        Arc::new(headers),
                    )
                    .await;
                    return wire::json_response(message);
                }
                return call::answer(call::CallRequest {
                    gateway: gateway.clone(),
                    live: self.live.clone(),
                    caller,
                    channel: call::Channel::Session(session),
                    id: id.to_owned(),
                    params,
                    headers: Arc::new(headers),
                })
                .await;
            }
            "tools/list" => return self.list_tools(id, &caller, envelope, ""),
            // It may stream: a task waiting for input asks the client on it.
            "tasks/result" => {
                return tasks::session_result(&self.app, &self.live, &caller, id, envelope).await;
            }
            task_method if tasks::is_task_method(task_method) => {
                tasks::session_method(&self.app, &caller, id, task_method, envelope).await
            }
            "ping" => wire::result_message(id, "{}"),
            "initialize" => wire::error_message(
                id,
                toolgate_adapters::codes::INVALID_REQUEST,
                "this session is already initialized: send initialize without an \
                 Mcp-Session-Id header to start a new one",
                None,
            ),
            "logging/setLevel" => match envelope.params::<SetLevel>() {
                Ok(SetLevel { level }) => {
                    // The session's own filter: upstream connections are shared by
                    // every caller, so the level is never forwarded to them.
                    self.live.set_log_level(&session, level);
                    wire::result_message(id, "{}")
                }
                Err(error) => wire::error_message(
                    id,
                    toolgate_adapters::codes::INVALID_PARAMS,
                    &format!(
                        "{error} (logging/setLevel needs {{\"level\": \"debug\"|\"info\"|…}})"
                    ),
                    None,
                ),
            },
            "resources/subscribe" | "resources/unsubscribe" => {
                self.subscription(envelope, id, method, &caller, &session)
                    .await
            }
            feature if features::is_feature(feature) => {
                methods::feature(gateway, &caller, id, feature, envelope.params).await
            }
            other => method_not_found(id, other),
        };
        wire::json_response(message)
    }

    /// `resources/subscribe` and `resources/unsubscribe`: the upstream is told once
    /// per resource however many sessions of this replica subscribe, and told to stop
    /// only when the last one unsubscribes (its connection is shared by them all).
    async fn subscription(
        &self,
        envelope: &Envelope<'_>,
        id: &str,
        method: &str,
        caller: &Caller,
        session: &str,
    ) -> Vec<u8> {
        #[derive(Deserialize)]
        struct Params {
            uri: String,
        }
        let gateway = &self.gateway;
        let uri = match envelope.params::<Params>() {
            Ok(params) => params.uri,
            Err(error) => {
                return wire::error_message(
                    id,
                    toolgate_adapters::codes::INVALID_PARAMS,
                    &format!("{error} ({method} needs a string `uri`)"),
                    None,
                );
            }
        };
        let target = match features::resolve_resource(gateway, caller, &uri) {
            Ok(target) => target,
            Err(error) => return wire::error_message(id, error.code, &error.message, error.data),
        };
        let forward = method == "resources/subscribe" || self.live.unsubscribe(session, &uri);
        if !forward {
            return wire::result_message(id, "{}");
        }
        let params = match envelope.params.map(|p| serde_json::from_str(p.get())) {
            Some(Ok(value)) => value,
            _ => serde_json::json!({"uri": uri}),
        };
        let ctx = toolgate_adapters::CallContext::new(
            gateway.config().call_timeout,
            crate::telemetry::new_correlation_id(),
        );
        match features::answer(gateway, caller, method, params, ctx).await {
            Ok(result) => {
                if method == "resources/subscribe" {
                    self.live.subscribe(session, &uri);
                    self.live.relay(gateway, &target.upstream);
                }
                wire::result_message(id, &result.to_string())
            }
            Err(error) => wire::error_message(id, error.code, &error.message, error.data),
        }
    }

    async fn sessionless_call(
        &self,
        id: String,
        params: call::CallParams,
        log_level: Option<sessionless::LogLevel>,
        tenant: Arc<crate::policy::Tenant>,
        headers: http::HeaderMap,
    ) -> Response {
        if params.request_state().is_some() {
            return call::resume(&self.live, &tenant.name, id, params, log_level).await;
        }
        call::answer(call::CallRequest {
            gateway: self.gateway.clone(),
            live: self.live.clone(),
            caller: Caller {
                tenant,
                session: None,
            },
            channel: call::Channel::Sessionless { log_level },
            id,
            params,
            headers: Arc::new(headers),
        })
        .await
    }

    fn notification(&self, envelope: &Envelope<'_>, method: &str, session: &str) {
        if method != "notifications/cancelled" {
            // `initialized`, `roots/list_changed`, progress: nothing to do here.
            return;
        }
        #[derive(Deserialize)]
        struct Cancelled<'a> {
            #[serde(rename = "requestId", borrow)]
            request_id: &'a RawValue,
        }
        if let Ok(cancelled) = envelope.params::<Cancelled>()
            && !self.live.cancel(session, cancelled.request_id.get())
        {
            tracing::debug!(session, "notifications/cancelled for no call in flight");
        }
    }

    /// GET: the session's stream of messages that belong to no request.
    fn open_stream(&self, request: &Request, session: &str) -> Response {
        if let Some(refused) = wire::refuse_get(request.headers()) {
            return refused;
        }
        let receiver = self.live.open_stream(session);
        let stop = self.stop.clone();
        // A first event with an id and a retry delay, as the spec's resumable
        // streams start; there is no replay, so a reconnect just opens a new stream.
        let priming = Bytes::from_static(b"id: 0\nretry: 3000\ndata: \n\n");
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let messages = futures::stream::unfold(
            (receiver, keep_alive, stop),
            |(mut receiver, mut keep_alive, stop)| async move {
                let next = tokio::select! {
                    message = receiver.recv() => message?,
                    _ = keep_alive.tick() => Bytes::from_static(b": keep-alive\n\n"),
                    _ = stop.cancelled() => return None,
                };
                Some((
                    Ok::<Bytes, std::io::Error>(next),
                    (receiver, keep_alive, stop),
                ))
            },
        );
        let stream =
            futures::StreamExt::chain(futures::stream::once(async move { Ok(priming) }), messages);
        wire::sse_response(Body::from_stream(stream))
    }

    /// DELETE: the client ends its session.
    async fn end(&self, headers: http::HeaderMap, session: &str) -> Response {
        if let Some(refused) = wire::refuse_version(&headers) {
            return refused;
        }
        self.live.end_session(session);
        if let Err(unavailable) = self.gateway.sessions.delete(session).await {
            return super::auth::state_unavailable(
                super::auth::Shape::JsonRpc,
                &unavailable.to_string(),
            );
        }
        wire::ended()
    }
}

#[derive(Deserialize)]
struct SetLevel {
    level: sessionless::LogLevel,
}

/// A request without a session that is not `initialize` and not sessionless.
fn session_required() -> Response {
    McpError::invalid_request(
        "Bad Request: Session ID is required (send initialize first, then echo its \
         Mcp-Session-Id header; or use protocol 2026-07-28, which needs none)",
    )
    .response()
}

fn invalid_message() -> Response {
    McpError::invalid_request(
        "not a JSON-RPC 2.0 request, notification or response: send \
         `\"jsonrpc\": \"2.0\"`, and for a request a `method` and a string or number `id`",
    )
    .response()
}

fn method_not_found(id: &str, method: &str) -> Vec<u8> {
    wire::error_message(
        id,
        toolgate_adapters::codes::METHOD_NOT_FOUND,
        &format!("method not found: {method}"),
        None,
    )
}

fn call_params_refused(id: &str, error: &str) -> Response {
    wire::json_response(wire::error_message(
        id,
        toolgate_adapters::codes::INVALID_PARAMS,
        &format!("{error} (tools/call needs {{\"name\": \"<tool>\", \"arguments\": {{…}}}})"),
        None,
    ))
}

/// The client's answer to a gateway request, as the adapter that asked expects it.
fn client_answer(envelope: &Envelope<'_>) -> Result<serde_json::Value, RpcError> {
    if let Some(result) = envelope.result {
        return serde_json::from_str(result.get()).map_err(|e| RpcError {
            code: toolgate_adapters::codes::PARSE_ERROR,
            message: format!("the client's answer is not JSON: {e}"),
            data: None,
        });
    }
    #[derive(Deserialize)]
    struct ErrorObject {
        code: i64,
        message: String,
        #[serde(default)]
        data: Option<serde_json::Value>,
    }
    let error = envelope
        .error
        .and_then(|e| serde_json::from_str::<ErrorObject>(e.get()).ok());
    Err(match error {
        Some(error) => RpcError {
            code: error.code,
            message: error.message,
            data: error.data,
        },
        None => RpcError {
            code: toolgate_adapters::codes::INVALID_REQUEST,
            message: "the client's error answer is malformed".into(),
            data: None,
        },
    })
}
