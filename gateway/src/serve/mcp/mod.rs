//! MCP as messages: one handler ([`McpSessions::handle`]) takes a message, its
//! caller and session and answers a [`Reply`] — one message, a stream of messages,
//! nothing, or a refusal — whatever carries it. `/mcp` ([`streamable_http`])
//! and stdio (`super::stdio`) are transports around it: they frame, the handler
//! answers, so the two can never disagree.
//!
//! Sessions (protocol versions 2024-11-05 to 2025-11-25): `initialize` creates a
//! session that is only a record in the session store, so an idle session costs that
//! record and nothing else, and any replica serves any session. A message is read
//! once, as raw JSON slices, and answered without a per-session task or channel.
//! Sessionless (2026-07-28) requests are served here too (see `sessionless`): the
//! same methods, each request carrying its own protocol signals.
//!
//! The MCP-only rooms live here: [`features`] (prompts, resources and completion),
//! [`error`] (the one MCP error type: its JSON-RPC code and HTTP status),
//! [`protocol_errors`] (errors of the layers before `/mcp` reads a message), `wire`
//! (one message read as raw JSON slices; answers and SSE frames). Error codes are
//! `toolgate_adapters::codes`, one place for both crates.
//!
//! Background calls (MCP Tasks) in both generations — `tools/call` with `task` and
//! `tasks/*` on a session, the tasks extension sessionless — are answered by
//! [`tasks`] from the gateway's task runner.
//!
//! What a message may be: a request (answered with one message, or with a stream
//! when the call sends something before its result: see [`call`]), a notification
//! (nothing back; `notifications/cancelled` stops a call), or the client's answer to a
//! request the gateway sent it during a call (nothing back). A session also has its
//! own stream of messages that belong to no request ([`McpSessions::session_messages`]:
//! `list_changed`, late log lines) and ends with [`McpSessions::end`].

mod call;
pub(crate) mod error;
pub mod features;
mod live;
mod methods;
pub mod protocol_errors;
pub(crate) mod reply;
mod sessionless;
mod streamable_http;
mod tasks;
pub(crate) mod wire;

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolgate_adapters::RpcError;

use crate::access::Caller;
use crate::app::App;
use crate::gateway::Gateway;
use crate::state::sessions::Session;
use error::McpError;
use live::Live;
pub(crate) use reply::Reply;
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

/// The MCP handler, with what it keeps between messages (the calls in flight, the
/// sessions' streams).
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

    /// Answers one message of `caller` (its tenant and subject), on `session` when it
    /// names one (the front door checked it is the caller's). `headers` are
    /// the HTTP request's (what 2026-07-28 mirrors from the body, the trace context,
    /// what `forward_headers` passes on); a transport without headers sends none,
    /// and has nothing a body could disagree with.
    pub(crate) async fn handle(
        &self,
        message: &[u8],
        caller: Caller,
        session: Option<Session>,
        headers: Option<HeaderMap>,
    ) -> Reply {
        let envelope = match Envelope::parse(message) {
            Ok(envelope) => envelope,
            Err(error) => {
                return McpError::parse_error(format!(
                    "{error}: send one JSON-RPC 2.0 request, notification or response object"
                ))
                .into();
            }
        };
        let Some(session) = session else {
            if let Some(id) = envelope.initialize_id() {
                return self.initialize(&envelope, id.get(), &caller).await;
            }
            if sessionless::is_sessionless(headers.as_ref(), &envelope) {
                return self.sessionless(&envelope, caller, headers).await;
            }
            return session_required();
        };
        let caller = caller.in_session(session.id.clone(), session.expanded);
        match envelope.kind() {
            Kind::Request { id, method } => {
                let headers = headers.unwrap_or_default();
                self.request(&envelope, id.get(), method, caller, session.id, headers)
                    .await
            }
            Kind::Notification { method } => {
                self.notification(&envelope, method, &session.id);
                Reply::Taken
            }
            Kind::Answer { id } => {
                self.live
                    .answer(&session.id, id.get(), client_answer(&envelope));
                Reply::Taken
            }
            Kind::Invalid => invalid_message(),
        }
    }

    /// A request without a session, protocol 2026-07-28 (see [`sessionless`]).
    async fn sessionless(
        &self,
        envelope: &Envelope<'_>,
        caller: Caller,
        headers: Option<HeaderMap>,
    ) -> Reply {
        let (id, method) = match envelope.kind() {
            Kind::Request { id, method } => (id.get(), method),
            // Closing the request's stream is how this version cancels; a
            // notification or an answer has nothing to act on.
            Kind::Notification { .. } | Kind::Answer { .. } => return Reply::Taken,
            Kind::Invalid => return invalid_message(),
        };
        let log_level = match sessionless::check(headers.as_ref(), envelope, method) {
            Ok(level) => level,
            Err(refused) => return Reply::refused(refused, id),
        };
        let headers = headers.unwrap_or_default();
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
                        tasks::CallMode::Refused(refused) => return *refused,
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
                    .sessionless_call(id.to_owned(), params, log_level, caller, headers)
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
        Reply::Message(message)
    }

    /// `tools/list` for `caller`, one page (see [`methods::list_tools`]).
    fn list_tools(&self, id: &str, caller: &Caller, envelope: &Envelope<'_>, extra: &str) -> Reply {
        let gateway = &self.gateway;
        methods::list_tools(id, gateway, &self.protocol_tools, caller, envelope, extra)
    }

    async fn initialize(&self, envelope: &Envelope<'_>, id: &str, caller: &Caller) -> Reply {
        let params = match envelope.params::<methods::InitializeParams>() {
            Ok(params) => params,
            Err(error) => {
                return Reply::Message(wire::error_message(
                    id,
                    toolgate_adapters::codes::INVALID_PARAMS,
                    &error,
                    None,
                ));
            }
        };
        let sessions = &self.gateway.sessions;
        let session = match sessions.create(&caller.tenant.name, caller.subject()).await {
            Ok(session) => session,
            Err(refused) => {
                let refusal = super::auth::session_refused(&refused);
                return McpError::turned_away(refusal).into();
            }
        };
        let version = methods::negotiated_version(&params);
        let result = methods::initialize_result(&self.gateway, version);
        if crate::serve::bridge::elicits_urls(params.capabilities.as_ref()) {
            self.live.elicits_urls(&session.id);
        }
        Reply::Initialized {
            session: session.id,
            message: wire::result_message(id, &result),
        }
    }

    async fn request(
        &self,
        envelope: &Envelope<'_>,
        id: &str,
        method: &str,
        caller: Caller,
        session: String,
        headers: HeaderMap,
    ) -> Reply {
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
                    return Reply::Message(message);
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
        Reply::Message(message)
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
        caller: Caller,
        headers: HeaderMap,
    ) -> Reply {
        if params.request_state().is_some() {
            return call::resume(&self.live, &caller, id, params, log_level).await;
        }
        call::answer(call::CallRequest {
            gateway: self.gateway.clone(),
            live: self.live.clone(),
            caller,
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

    /// The session's own stream: messages that belong to no request (`list_changed`,
    /// resource updates, late log lines), as they come, until the session ends.
    pub(crate) fn session_messages(
        &self,
        session: &str,
        caller: &crate::access::Caller,
    ) -> mpsc::Receiver<Bytes> {
        self.live.open_stream(session, caller.principal().holder())
    }

    /// The client ends its session.
    pub(crate) async fn end(&self, session: &str) -> Result<(), crate::state::conn::Unavailable> {
        self.live.end_session(session);
        self.gateway.sessions.delete(session).await
    }
}

#[derive(Deserialize)]
struct SetLevel {
    level: sessionless::LogLevel,
}

/// A request without a session that is not `initialize` and not sessionless.
fn session_required() -> Reply {
    session_required_error().into()
}

fn session_required_error() -> McpError {
    McpError::invalid_request(
        "Bad Request: Session ID is required (send initialize first, then echo its \
         Mcp-Session-Id header; or use protocol 2026-07-28, which needs none)",
    )
}

fn invalid_message() -> Reply {
    McpError::invalid_request(
        "not a JSON-RPC 2.0 request, notification or response: send \
         `\"jsonrpc\": \"2.0\"`, and for a request a `method` and a string or number `id`",
    )
    .into()
}

fn method_not_found(id: &str, method: &str) -> Vec<u8> {
    wire::error_message(
        id,
        toolgate_adapters::codes::METHOD_NOT_FOUND,
        &format!("method not found: {method}"),
        None,
    )
}

fn call_params_refused(id: &str, error: &str) -> Reply {
    Reply::Message(wire::error_message(
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
