//! The MCP surface on rmcp: a `ServerHandler` that lists the catalog and routes
//! `tools/call` onto [`Gateway::call`]. Used by `toolgate stdio` and by `/mcp` for
//! the sessionless (2026-07-28) requests other than a well-formed `tools/call`; `/mcp`
//! sessions and sessionless calls are served by [`crate::serve::mcp_http`] without
//! rmcp.
//!
//! Progress: upstream progress arrives on the call's channel in wire order; it is
//! forwarded to this caller's own `progressToken`, and the channel is drained before the
//! result is returned, so the last update can never race the response. Without a
//! `progressToken` the updates become `notifications/message` log frames.
//!
//! rmcp's typed `Tool` drops fields it does not know (`execution`, vendor keys); the
//! listing here is of typed stand-ins (names), and [`crate::serve::fidelity`] puts the
//! catalog's raw definitions on the wire in their place.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    NotificationMetaObject, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ServerConfig,
};
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResultType,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolgate_adapters::{CallContext, Progress};

#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams};

use super::bridge::{self, QueueBridge};
use super::mcp_shared::McpShared;
use super::passthrough;
use crate::access::{self, Caller, View};
use crate::errors::{self, McpFailure};
use crate::policy::Tenant;
use crate::protocol_tools;

/// One MCP session's handler (created per session, or per request on 2026-07-28).
#[derive(Clone)]
pub struct McpHandler {
    shared: Arc<McpShared>,
    /// For stdio: the one tenant and session of the process. Over HTTP the tenant
    /// comes with each request (see `serve::auth`) and the session is the transport's.
    fixed: Option<(Arc<Tenant>, String)>,
}

impl McpHandler {
    /// A handler for HTTP sessions.
    pub fn new(shared: Arc<McpShared>) -> Self {
        Self {
            shared,
            fixed: None,
        }
    }

    /// A handler for one stdio process: `tenant` and a session of its own.
    pub fn for_process(shared: Arc<McpShared>, tenant: Arc<Tenant>, session: String) -> Self {
        Self {
            shared,
            fixed: Some((tenant, session)),
        }
    }

    /// Who is calling: the request's tenant, and its session (legacy protocol
    /// versions) or none (2026-07-28, sessionless).
    async fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
        let parts = context.extensions.get::<http::request::Parts>();
        let (tenant, session_id) = match &self.fixed {
            Some((tenant, session)) => (tenant.clone(), Some(session.clone())),
            None => {
                let tenant = parts
                    .and_then(|p| p.extensions.get::<Arc<Tenant>>())
                    .cloned()
                    .ok_or_else(|| {
                        McpError::internal_error(
                            "request reached the handler unauthenticated",
                            None,
                        )
                    })?;
                let session = parts
                    .and_then(|p| p.headers.get("mcp-session-id"))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                (tenant, session)
            }
        };
        let sessionless = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        let session_id = if sessionless { None } else { session_id };
        let session = match session_id {
            None => None,
            Some(id) => {
                // The front door recorded the session at initialize and checked its
                // tenant; a session missing here has just idled out.
                let stored = self
                    .shared
                    .gateway
                    .sessions
                    .get_owned(&id, &tenant.name)
                    .await
                    .map_err(|e| {
                        McpError::internal_error(
                            e.to_string(),
                            Some(serde_json::json!({"code": "state_unavailable"})),
                        )
                    })?
                    .ok_or_else(|| {
                        McpError::invalid_request(
                            "this session has expired: initialize a new session",
                            None,
                        )
                    })?;
                Some((stored.id, stored.expanded))
            }
        };
        Ok(Caller { tenant, session })
    }
}

const SUPPORTED_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2024_11_05,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

// Logging is deprecated in the newest protocol (SEP-2577) but is how pre-2026 clients
// receive progress for calls that sent no progressToken.
#[allow(deprecated)]
impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(passthrough::capabilities(&self.shared.gateway))
            .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "toolgate: one catalog of tools from many upstreams; names are <upstream>__<tool>.",
            )
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(SUPPORTED_VERSIONS)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.add_peer(context.peer.clone());
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.forward("prompts/list", request, &context).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.forward::<GetPromptResult>("prompts/get", Some(request), &context)
            .await
            .map(GetPromptResponse::from)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.forward("resources/list", request, &context).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.forward("resources/templates/list", request, &context)
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.forward::<ReadResourceResult>("resources/read", Some(request), &context)
            .await
            .map(ReadResourceResponse::from)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.forward::<Value>("resources/subscribe", Some(request), &context)
            .await
            .map(drop)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.forward::<Value>("resources/unsubscribe", Some(request), &context)
            .await
            .map(drop)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.forward("completion/complete", Some(request), &context)
            .await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Without a passthrough upstream the level only concerns the gateway's own
        // progress log frames, which are always sent.
        if self.shared.gateway.passthrough().is_none() {
            return Ok(());
        }
        self.forward::<Value>("logging/setLevel", Some(request), &context)
            .await
            .map(drop)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = self.caller(&context).await?;
        let view = View::of(&self.shared.gateway, &caller);
        let typed = self.shared.typed(&view.catalog);
        let mut tools = self.shared.protocol_tools.clone();
        tools.extend(
            view.visible(&caller)
                .iter()
                .filter_map(|entry| typed.by_name.get(&entry.name).cloned()),
        );
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&context).await?;
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        let progress_token = context.meta.get_progress_token();
        let (sink, mut updates) = mpsc::unbounded_channel::<Progress>();
        let mut ctx = CallContext::new(
            self.shared.gateway.config().call_timeout,
            format!("mcp-{}", context.id),
        );
        ctx.cancel = context.ct.child_token();
        if let Some(parts) = context.extensions.get::<http::request::Parts>() {
            ctx.request_headers = Arc::new(parts.headers.clone());
        }
        ctx.progress = Some(sink);
        let (bridge, mut events) = QueueBridge::new();
        ctx.client = Some(Arc::new(bridge));
        let peer = context.peer.clone();
        let forwarder = Forwarder {
            peer: &peer,
            token: progress_token,
            tool: &name,
        };

        let gateway = &self.shared.gateway;
        // Boxed: rmcp moves this handler's future into a spawned task, and the whole
        // call path inlined here would make that a copy of kilobytes per call.
        let mut call = Box::pin(async {
            if !protocol_tools::is_protocol_tool(&name) {
                return access::call(gateway, &caller, &name, arguments, ctx).await;
            }
            match protocol_tools::call(gateway, &caller, &name, arguments, ctx).await {
                Some(Ok((output, changed))) => {
                    if changed {
                        // This session's list grew: tell this session only.
                        let _ = peer.notify_tool_list_changed().await;
                    }
                    Ok(output)
                }
                Some(Err(error)) => Err(error),
                None => Err(errors::unknown_tool(&name)),
            }
        });
        let upstream = self
            .shared
            .gateway
            .catalog()
            .get(&name)
            .map(|entry| entry.upstream.clone());
        if let Some(upstream) = &upstream {
            self.shared.note_passthrough_caller(upstream, &peer);
        }
        let outcome = loop {
            tokio::select! {
                biased;
                Some(update) = updates.recv() => forwarder.send(update).await,
                Some(event) = events.recv() => bridge::deliver(&peer, event).await,
                outcome = &mut call => break outcome,
            }
        };
        if let Some(upstream) = &upstream {
            // Stray log lines that trail the result belong to this call.
            self.shared.note_passthrough_caller(upstream, &peer);
        }
        // The adapter queues everything before it resolves the call: what is still
        // queued goes out before the result.
        while let Ok(update) = updates.try_recv() {
            forwarder.send(update).await;
        }
        while let Ok(event) = events.try_recv() {
            bridge::deliver(&peer, event).await;
        }

        let raw = match outcome {
            Ok(output) => output.raw,
            Err(error) => match errors::to_mcp(&error) {
                McpFailure::Protocol(error) => return Err(error),
                McpFailure::ToolResult(raw) => raw,
            },
        };
        let result = serde_json::from_value::<CallToolResult>(Value::Object(raw)).unwrap_or_else(|error| {
            tracing::warn!(tool = %name, %error, "upstream result is not a valid CallToolResult");
            CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
                "tool '{name}' returned a result that is not valid MCP ({error}); \
                 report this to the tool's owner"
            ))])
        });
        let mut result = result;
        // 2026-07-28 clients require `resultType`; rmcp strips it again for older peers.
        if result.result_type.is_none() {
            result.result_type = Some(ResultType::COMPLETE);
        }
        Ok(CallToolResponse::from(result))
    }
}

impl McpHandler {
    async fn forward<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: Option<impl serde::Serialize>,
        context: &RequestContext<RoleServer>,
    ) -> Result<T, McpError> {
        passthrough::forward(
            &self.shared.gateway,
            method,
            params,
            format!("mcp-{}", context.id),
        )
        .await
    }
}

/// Forwards one call's progress to its caller.
struct Forwarder<'a> {
    peer: &'a Peer<RoleServer>,
    token: Option<ProgressToken>,
    tool: &'a str,
}

#[allow(deprecated)]
impl Forwarder<'_> {
    async fn send(&self, update: Progress) {
        let mut meta = NotificationMetaObject::new();
        meta.insert("toolgate/tool".into(), Value::String(self.tool.to_owned()));
        let sent = match &self.token {
            Some(token) => {
                let mut param = ProgressNotificationParam::new(token.clone(), update.progress);
                param.total = update.total;
                param.message = update.message;
                param.meta = Some(meta);
                self.peer.notify_progress(param).await
            }
            None => {
                let data = json!({
                    "tool": self.tool,
                    "progress": update.progress,
                    "total": update.total,
                    "message": update.message,
                });
                let mut param = LoggingMessageNotificationParam::new(LoggingLevel::Info, data);
                param.logger = Some("toolgate/progress".into());
                param.meta = Some(meta);
                self.peer.notify_logging_message(param).await
            }
        };
        if let Err(error) = sent {
            tracing::debug!(tool = self.tool, %error, "progress not delivered (caller gone)");
        }
    }
}
