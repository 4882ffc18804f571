//! Where tools come from.
//!
//! This crate holds the one contract every tool source implements — [`Upstream`] — and
//! the adapters that implement it: MCP servers ([`mcp`]: stdio, legacy HTTP+SSE,
//! streamable HTTP), HTTP APIs described by OpenAPI ([`openapi`]) and skill packages
//! ([`skills`]). The gateway treats every upstream alike through this contract: it
//! never knows which transport or protocol sits behind a tool, and an upstream never
//! knows which surface (MCP, REST, stdio) called it.
//!
//! Tool definitions and call results travel as raw JSON objects on purpose: the MCP
//! schema grows every few months, and a gateway that parsed them into typed structs
//! would silently drop every field it does not know yet (see the field notes on rmcp's
//! typed `Tool` losing `execution`).
//!
//! Modules, one line each:
//! - [`error`]: the one error taxonomy of a tool call, and the error helpers.
//! - [`mcp`]: MCP servers over stdio, streamable HTTP and legacy HTTP+SSE.
//! - [`oauth`]: the gateway as an OAuth 2.1 client of its upstreams (discovery,
//!   registration, PKCE, tokens), without state.
//! - [`openapi`]: HTTP APIs described by OpenAPI 3.x or Swagger 2.0, one tool per operation.
//! - [`redirect`]: the one redirect policy of clients that carry credentials.
//! - [`secret`]: [`Secret`], the one type every credential is held in.
//! - [`skills`]: skill packages (`SKILL.md` directories) as prompts, tools and resources.
//! - `sys`: the two libc calls (process-group signals, heap release); the crate's only `unsafe`.

pub mod codes;
pub mod error;
pub mod mcp;
pub mod oauth;
pub mod openapi;
mod output;
pub mod redirect;
pub mod secret;
pub mod skills;
mod sys;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use error::ToolError;
pub use output::{CallOutput, Plain};
pub use secret::Secret;

/// A JSON object as it travels on the wire.
pub type JsonObject = Map<String, Value>;

/// One tool as its upstream defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// The name the upstream knows the tool by (used for routing calls back to it).
    pub name: String,
    /// The complete definition exactly as the upstream sent it (`name`, `title`,
    /// `description`, `inputSchema`, `outputSchema`, `annotations`, `icons`, `_meta`,
    /// `execution` and anything newer). Never trimmed. Shared, never copied: the
    /// catalog's entry for the tool points at this same object (a large OpenAPI
    /// import holds its schemas once).
    pub raw: Arc<JsonObject>,
}

impl ToolDef {
    /// Builds a definition from a raw `tools/list` entry; `None` when it has no string
    /// `name` (such an entry cannot be routed and is reported by the caller).
    pub fn from_raw(raw: JsonObject) -> Option<Self> {
        let name = raw.get("name")?.as_str()?.to_owned();
        Some(Self {
            name,
            raw: Arc::new(raw),
        })
    }
}

/// What an upstream offers besides tools, as its own lists say: prompts, resources and
/// resource templates, each entry the raw object the upstream sent (never trimmed),
/// and which of the optional request families it answers. The gateway names and
/// filters these like tools (see the gateway's `offerings` module); requests about
/// them (`prompts/get`, `resources/read`, `completion/complete`,
/// `resources/subscribe`, `resources/unsubscribe`) go through [`Upstream::forward`]
/// with the upstream's own names and URIs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offerings {
    /// `prompts/list` entries (each has a string `name`).
    pub prompts: Vec<JsonObject>,
    /// `resources/list` entries (each has a string `uri` and `name`).
    pub resources: Vec<JsonObject>,
    /// `resources/templates/list` entries (each has a string `uriTemplate` and `name`).
    pub resource_templates: Vec<JsonObject>,
    /// Answers `completion/complete`.
    pub completions: bool,
    /// Answers `resources/subscribe` and sends `notifications/resources/updated`.
    pub subscribe: bool,
}

impl Offerings {
    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty() && self.resources.is_empty() && self.resource_templates.is_empty()
    }
}

/// One progress update from a running call, in the order the upstream sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where an upstream delivers progress for one call. Sending never blocks; the surface
/// drains the receiver before it sends the final result, so updates keep wire order
/// and none is lost to a race with the response. Bounded ([`PROGRESS_QUEUE`]): an
/// upstream that floods a slow caller loses updates (`try_send`), never memory.
pub type ProgressSink = mpsc::Sender<Progress>;

/// How many progress updates may wait for one caller.
pub const PROGRESS_QUEUE: usize = 1024;

/// A progress sink and the receiver the surface drains.
pub fn progress_channel() -> (ProgressSink, mpsc::Receiver<Progress>) {
    mpsc::channel(PROGRESS_QUEUE)
}

/// A JSON-RPC error as a client or server sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

/// The downstream client behind a call, reachable while the call runs: an upstream's
/// server->client requests made during a call (`sampling/createMessage`,
/// `elicitation/create`, `roots/list`) are answered by it, and notifications about the
/// call (`notifications/message`) reach it. Implemented by the surface that took the
/// call; absent when the surface has no client to ask (REST).
#[async_trait]
pub trait ClientBridge: Send + Sync {
    /// Sends a request to the downstream client and waits for its answer (raw result).
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError>;
    /// Queues a notification for the downstream client, in order with the call's
    /// progress; never blocks.
    fn notify(&self, method: &str, params: Value);
    /// How long one request may wait for its answer, when the client says (a
    /// background call's owner may answer much later than someone at a live
    /// connection); `None`: the adapter's own bound.
    fn answer_within(&self) -> Option<Duration> {
        None
    }
    /// Whether the client takes URL-mode elicitations (`elicitation.url` among its
    /// capabilities, MCP 2025-11-25): it can be asked to send its user to a page.
    fn elicits_urls(&self) -> bool {
        false
    }
}

/// A W3C trace context (<https://www.w3.org/TR/trace-context/>) as upstreams receive
/// it: the HTTP headers `traceparent` and `tracestate`, or the same keys in an MCP
/// request's `_meta` (the MCP convention for trace context). Built and validated by
/// the gateway; adapters only copy it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// `00-<trace id>-<parent span id>-<flags>`.
    pub traceparent: String,
    /// Vendor entries passed along as the caller sent them (never empty when present).
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The header (and `_meta` key) names with their values.
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, &str)> {
        std::iter::once(("traceparent", self.traceparent.as_str())).chain(
            self.tracestate
                .as_deref()
                .map(|state| ("tracestate", state)),
        )
    }
}

/// Everything a call carries besides its arguments.
#[derive(Clone)]
pub struct CallContext {
    /// Cancelled when the downstream caller gives up; the upstream call must stop.
    pub cancel: CancellationToken,
    /// Present when the caller wants progress.
    pub progress: Option<ProgressSink>,
    /// The call fails with [`ToolError::Timeout`] when it is not done by then.
    pub deadline: Instant,
    /// Ties the call's log lines together across the gateway and the upstream: the
    /// trace id of [`CallContext::trace`] when the gateway traces the call.
    pub correlation_id: String,
    /// The W3C trace context upstream work continues (the gateway's own span as the
    /// parent): OpenAPI requests carry it as headers, MCP `tools/call` in `_meta`.
    pub trace: Option<TraceContext>,
    /// The downstream client, when the surface has one (see [`ClientBridge`]).
    pub client: Option<Arc<dyn ClientBridge>>,
    /// The headers of the downstream HTTP request that started the call (empty on
    /// stdio). Upstreams forward only the ones their config names (`forward_headers`).
    pub request_headers: Arc<http::HeaderMap>,
    /// The call runs as a background task: its own, longer timeout (already in
    /// `deadline`) replaces the upstream's `call_timeout`.
    pub background: bool,
    /// The caller's own credentials for this upstream, when the gateway resolved
    /// some (an upstream configured with per-caller credentials): they replace the
    /// upstream's shared credentials for this call, never add to them.
    pub credentials: Option<CallerCredentials>,
}

/// A caller's own credentials for one upstream, in the form its kind takes them.
#[derive(Clone)]
pub enum CallerCredentials {
    /// An OpenAPI upstream's: credentials by security scheme name, as its `auth`.
    OpenApi(Arc<std::collections::BTreeMap<String, openapi::Credential>>),
    /// An HTTP MCP upstream's: the bearer token obtained for this caller (OAuth), and
    /// who holds it. Each holder is served on connections of its own, never another's.
    Bearer { holder: Arc<str>, token: Secret },
}

impl CallerCredentials {
    /// The credentials by security scheme, when they are an OpenAPI upstream's.
    pub fn openapi(&self) -> Option<&std::collections::BTreeMap<String, openapi::Credential>> {
        match self {
            CallerCredentials::OpenApi(creds) => Some(creds),
            CallerCredentials::Bearer { .. } => None,
        }
    }
}

impl std::fmt::Debug for CallerCredentials {
    /// The scheme names only: the values are secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallerCredentials::OpenApi(creds) => f
                .debug_tuple("OpenApi")
                .field(&creds.keys().collect::<Vec<_>>())
                .finish(),
            CallerCredentials::Bearer { .. } => f.write_str("Bearer"),
        }
    }
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("cancelled", &self.cancel.is_cancelled())
            .field("progress", &self.progress.is_some())
            .field("deadline", &self.deadline)
            .field("correlation_id", &self.correlation_id)
            .field("trace", &self.trace)
            .field("client", &self.client.is_some())
            .field("background", &self.background)
            .field("credentials", &self.credentials)
            .finish()
    }
}

impl CallContext {
    /// A context with a fresh cancellation token, no progress sink and `timeout` to go.
    pub fn new(timeout: Duration, correlation_id: impl Into<String>) -> Self {
        Self {
            cancel: CancellationToken::new(),
            progress: None,
            deadline: Instant::now() + timeout,
            correlation_id: correlation_id.into(),
            trace: None,
            client: None,
            request_headers: Arc::default(),
            background: false,
            credentials: None,
        }
    }

    /// Time left until the deadline (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// What an upstream can say about its own connection (the gateway's health loop adds
/// the results of its periodic checks on top).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Connecting for the first time.
    Connecting,
    /// Connected and initialized; calls go through.
    Connected,
    /// Lost; the adapter is reconnecting (with backoff). Calls fail fast with
    /// [`ToolError::Unavailable`].
    Reconnecting,
    /// Shut down for good.
    Closed,
}

/// One tool source. Implementations must be cheap to query (`tools`, `connection`) and
/// must never block the runtime.
#[async_trait]
pub trait Upstream: Send + Sync + 'static {
    /// The upstream's configured name (the catalog prefix).
    fn name(&self) -> &str;

    /// The current tool list (empty until the first successful listing).
    fn tools(&self) -> Arc<Vec<ToolDef>>;

    /// Bumped every time `tools()` or `offerings()` changes (listing after
    /// (re)connect, an upstream's `notifications/{tools,prompts,resources}/list_changed`);
    /// the gateway rebuilds its catalog on change.
    fn tools_changed(&self) -> watch::Receiver<u64>;

    /// Prompts, resources and resource templates (empty until listed; upstreams that
    /// have none keep the default).
    fn offerings(&self) -> Arc<Offerings> {
        Arc::default()
    }

    /// The connection as the adapter sees it.
    fn connection(&self) -> Connection;

    /// The last connection or protocol error, if any (never contains secrets).
    fn last_error(&self) -> Option<String>;

    /// Calls `tool` (the upstream's own name for it).
    async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        ctx: CallContext,
    ) -> Result<CallOutput, ToolError>;

    /// A cheap liveness probe (MCP `ping`, or `tools/list` where `ping` is not
    /// supported), bounded by `timeout`. Used by the health loop.
    async fn check(&self, timeout: Duration) -> Result<(), ToolError>;

    /// Stops the upstream (kills a child process, closes sessions). Idempotent.
    async fn shutdown(&self);

    /// Sends any other MCP request (`prompts/get`, `resources/read`,
    /// `completion/complete`, `resources/subscribe`, `resources/unsubscribe`) with the
    /// upstream's own names and URIs in `params`. The outer error is the gateway's
    /// (unavailable, timeout, cancelled); the inner result is the upstream's own
    /// answer, a raw result or its JSON-RPC error, passed on as it came. Upstreams
    /// without [`Upstream::offerings`] keep the default.
    async fn forward(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: CallContext,
    ) -> Result<Result<Value, RpcError>, ToolError> {
        let _ = (params, ctx);
        Err(ToolError::NotFound(format!(
            "upstream '{}' does not serve '{method}'",
            self.name()
        )))
    }

    /// The upstream's `initialize` result (capabilities, serverInfo), when it has one.
    fn server_info(&self) -> Option<JsonObject> {
        None
    }

    /// Notifications the upstream sends outside any call (e.g.
    /// `notifications/resources/updated`), as `(method, params)`; the gateway relays
    /// them to the sessions they concern (subscribers of that resource).
    fn notifications(&self) -> Option<tokio::sync::broadcast::Receiver<(String, Value)>> {
        None
    }

    /// Tells the upstream whether every caller it can have is one tenant (the
    /// gateway's policy decides, and says again after each reload or catalog change).
    /// Only then may a server request or log line that names no call be passed to the
    /// one call in flight; between tenants nothing is guessed. Default: ignored.
    fn set_one_tenant(&self, _one_tenant: bool) {}
}

/// A shared handle to any upstream.
pub type DynUpstream = Arc<dyn Upstream>;
