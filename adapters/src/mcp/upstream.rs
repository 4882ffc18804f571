//! [`McpUpstream`]: the handle the gateway holds, implementing [`Upstream`] on top of
//! the supervisor's shared state.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::jsonrpc::{Answer, Origin, Params, Rpc, RpcFailure, tool_call_map};
use super::supervisor::{self, Supervised, describe};
use super::{McpOptions, McpTransport};
use crate::codes::{INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::{
    CallContext, CallOutput, Connection, JsonObject, RpcError, ToolDef, ToolError, Upstream,
};

/// Starts an MCP upstream. Returns at once; a supervisor task connects in the
/// background (watch [`Upstream::connection`] / [`McpUpstream::connection_changes`]).
///
/// Must be called within a tokio runtime.
pub fn spawn(name: String, transport: McpTransport, options: McpOptions) -> Arc<McpUpstream> {
    let (tools_tx, _) = watch::channel(0);
    let (conn_tx, _) = watch::channel(Connection::Connecting);
    // Bounded: a slow receiver loses the oldest notifications (and is told so by
    // `RecvError::Lagged`) instead of growing memory.
    let (notifications, _) = broadcast::channel(256);
    let shared = Arc::new(Supervised {
        name: name.clone().into(),
        transport,
        options,
        inner: Mutex::new(Default::default()),
        tools_tx,
        conn_tx,
        notifications,
        one_tenant: Default::default(),
        refusals: Default::default(),
        shutdown: CancellationToken::new(),
    });
    let task = tokio::spawn(supervisor::run(shared.clone()));
    Arc::new(McpUpstream {
        name,
        shared,
        task: tokio::sync::Mutex::new(Some(task)),
    })
}

/// One MCP server (stdio, streamable HTTP or legacy SSE) as an [`Upstream`].
pub struct McpUpstream {
    name: String,
    shared: Arc<Supervised>,
    task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for McpUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Deliberately not the transport config: it holds header and env values.
        f.debug_struct("McpUpstream")
            .field("name", &self.name)
            .field("transport", &self.shared.transport.kind())
            .field("connection", &self.connection())
            .finish()
    }
}

impl McpUpstream {
    /// Follows the connection state (for waiting on `Connected`, or reporting).
    pub fn connection_changes(&self) -> watch::Receiver<Connection> {
        self.shared.conn_tx.subscribe()
    }

    /// The protocol version negotiated on the current (or last) connection.
    pub fn protocol_version(&self) -> Option<String> {
        self.shared.lock().protocol_version.clone()
    }

    /// The server's raw `initialize` result (`serverInfo`, `capabilities`,
    /// `instructions`, …) from the current (or last) connection.
    pub fn initialize_result(&self) -> Option<JsonObject> {
        self.shared.lock().initialize_result.clone()
    }

    /// The last 401 or 403 the upstream's HTTP endpoint answered, taken (a later
    /// refusal is noted afresh).
    pub fn take_refusal(&self) -> Option<super::http::Refusal> {
        self.shared
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The stdio child's process id while connected (for tests and diagnostics).
    #[doc(hidden)]
    pub fn child_pid(&self) -> Option<u32> {
        self.shared.lock().pid
    }

    /// Sends one raw request on the current connection and returns its raw result
    /// (for tests and diagnostics: e.g. comparing `tools/list` with [`Upstream::tools`]).
    #[doc(hidden)]
    pub async fn raw_request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ToolError> {
        let rpc = self.rpc()?;
        rpc.protocol_request(method, params, Instant::now() + timeout)
            .await
            .map_err(|e| match e {
                RpcFailure::Closed(r) => ToolError::unavailable(&self.name, r),
                RpcFailure::Timeout => ToolError::timeout(&self.name, method, timeout),
                other => ToolError::Failed(describe(&other)),
            })
    }

    fn rpc(&self) -> Result<Arc<Rpc>, ToolError> {
        let inner = self.shared.lock();
        match &inner.rpc {
            Some(rpc) => Ok(rpc.clone()),
            None => {
                let state = match *self.shared.conn_tx.borrow() {
                    Connection::Connecting => "still connecting".to_owned(),
                    Connection::Closed => "shut down".to_owned(),
                    _ => inner
                        .last_error
                        .clone()
                        .unwrap_or_else(|| "reconnecting".into()),
                };
                Err(ToolError::unavailable(&self.name, state))
            }
        }
    }
}

#[async_trait]
impl Upstream for McpUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Arc<Vec<ToolDef>> {
        self.shared.lock().tools.clone()
    }

    fn tools_changed(&self) -> watch::Receiver<u64> {
        self.shared.tools_tx.subscribe()
    }

    fn offerings(&self) -> Arc<crate::Offerings> {
        self.shared.lock().offerings.clone()
    }

    fn connection(&self) -> Connection {
        *self.shared.conn_tx.borrow()
    }

    fn last_error(&self) -> Option<String> {
        self.shared.lock().last_error.clone()
    }

    async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        ctx: CallContext,
    ) -> Result<CallOutput, ToolError> {
        let budget = ctx.remaining();
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::cancelled(tool));
        }
        let rpc = self.rpc()?;
        let deadline = Instant::from_std(ctx.deadline);
        // A background call of a tool the upstream runs as a task goes up as one.
        let relay = ctx.background && {
            let inner = self.shared.lock();
            super::task_call::relayable(
                inner.initialize_result.as_ref(),
                inner.protocol_version.as_deref(),
                &inner.tools,
                tool,
            )
        };
        let result = if relay {
            let params = tool_call_map(tool, arguments, ctx.trace.as_ref());
            super::task_call::run(&rpc, Value::Object(params), &ctx)
                .await
                .map(Answer::Value)
        } else {
            // The MCP convention for trace context is `params._meta` (the HTTP
            // transports copy it into headers too, see `http::trace_headers`).
            let params = Params::ToolCall {
                name: tool,
                arguments: &arguments,
                trace: ctx.trace.as_ref(),
            };
            rpc.request(
                "tools/call",
                params,
                deadline,
                Some(&ctx.cancel),
                ctx.progress.clone(),
                Origin::Call(ctx.client.clone()),
            )
            .await
        };
        let malformed = |kind: &str| {
            ToolError::Failed(format!(
                "tool '{tool}' on upstream '{}' returned a malformed result ({kind} \
                 where a JSON object was expected); report this to the upstream's maintainers",
                self.name,
            ))
        };
        match result {
            // Passed on as the upstream wrote it when nothing in it needs reading.
            Ok(Answer::Text(text)) => CallOutput::from_json(text).map_err(malformed),
            Ok(Answer::Value(Value::Object(raw))) => Ok(CallOutput::new(raw)),
            Ok(Answer::Value(other)) => Err(malformed(crate::error::json_kind(&other))),
            Err(RpcFailure::Error { code, message, .. }) if code == INVALID_PARAMS => {
                Err(ToolError::InvalidArgs(format!(
                    "upstream '{}' rejected the call to '{tool}': {message}{}; \
                     check the arguments against the tool's input schema",
                    self.name,
                    crate::error::rpc_code_note(code)
                )))
            }
            Err(RpcFailure::Error {
                code,
                message,
                data,
            }) if crate::error::is_rate_limit(code, &message) => {
                let retry_after = crate::error::retry_hint(data.as_ref());
                Err(ToolError::RateLimited {
                    message: format!(
                        "upstream '{}' is rate limiting calls to '{tool}': {message}; retry {}",
                        self.name,
                        match retry_after {
                            Some(after) => format!("in {}", crate::error::duration_text(after)),
                            None => "in a moment".to_owned(),
                        }
                    ),
                    retry_after,
                })
            }
            Err(RpcFailure::Error { code, message, .. }) => Err(ToolError::Failed(format!(
                "tool '{tool}' on upstream '{}' failed: {message}{}",
                self.name,
                crate::error::rpc_code_note(code)
            ))),
            Err(RpcFailure::Transport(detail)) => Err(ToolError::Failed(format!(
                "tool '{tool}' on upstream '{}' failed: {detail}",
                self.name
            ))),
            Err(RpcFailure::Closed(reason)) => Err(ToolError::unavailable(&self.name, reason)),
            Err(RpcFailure::Cancelled) => Err(ToolError::cancelled(tool)),
            Err(RpcFailure::Timeout) => Err(ToolError::timeout(&self.name, tool, budget)),
        }
    }

    async fn check(&self, timeout: Duration) -> Result<(), ToolError> {
        let rpc = self.rpc()?;
        let deadline = Instant::now() + timeout;
        let ping = rpc
            .protocol_request("ping", Value::Object(Map::new()), deadline)
            .await;
        let result = match ping {
            Err(RpcFailure::Error { code, .. }) if code == METHOD_NOT_FOUND => {
                rpc.protocol_request("tools/list", json!({}), deadline)
                    .await
            }
            other => other,
        };
        match result {
            Ok(_) => Ok(()),
            Err(RpcFailure::Closed(r)) => Err(ToolError::unavailable(&self.name, r)),
            Err(RpcFailure::Timeout) => Err(ToolError::timeout(&self.name, "ping", timeout)),
            Err(other) => Err(ToolError::Failed(format!(
                "health check of upstream '{}' failed: {}",
                self.name,
                describe(&other)
            ))),
        }
    }

    async fn forward(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: CallContext,
    ) -> Result<Result<Value, RpcError>, ToolError> {
        let budget = ctx.remaining();
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::cancelled(method));
        }
        let rpc = self.rpc()?;
        let result = rpc
            .request(
                method,
                params.unwrap_or_else(|| Value::Object(Map::new())).into(),
                Instant::from_std(ctx.deadline),
                Some(&ctx.cancel),
                ctx.progress.clone(),
                Origin::Call(ctx.client.clone()),
            )
            .await
            .map(Answer::into_value);
        match result {
            Ok(value) => Ok(Ok(value)),
            Err(RpcFailure::Error {
                code,
                message,
                data,
            }) => Ok(Err(RpcError {
                code,
                message,
                data,
            })),
            Err(RpcFailure::Transport(detail)) => Err(ToolError::Failed(format!(
                "'{method}' on upstream '{}' failed: {detail}",
                self.name
            ))),
            Err(RpcFailure::Closed(reason)) => Err(ToolError::unavailable(&self.name, reason)),
            Err(RpcFailure::Cancelled) => Err(ToolError::cancelled(method)),
            Err(RpcFailure::Timeout) => Err(ToolError::timeout(&self.name, method, budget)),
        }
    }

    fn server_info(&self) -> Option<JsonObject> {
        self.shared.lock().initialize_result.clone()
    }

    fn set_one_tenant(&self, one_tenant: bool) {
        self.shared
            .one_tenant
            .store(one_tenant, std::sync::atomic::Ordering::Relaxed);
    }

    fn notifications(&self) -> Option<broadcast::Receiver<(String, Value)>> {
        Some(self.shared.notifications.subscribe())
    }

    async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        let task = self.task.lock().await.take();
        if let Some(task) = task {
            // The supervisor's own shutdown steps are bounded; this bound is a backstop.
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for McpUpstream {
    fn drop(&mut self) {
        // Without this the supervisor would keep the connection (and a child) alive.
        self.shared.shutdown.cancel();
    }
}
