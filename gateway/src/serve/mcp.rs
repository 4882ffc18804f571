//! The MCP surface: an rmcp `ServerHandler` that lists the catalog and routes
//! `tools/call` onto [`Gateway::call`]. Used by `/mcp` (streamable HTTP, every protocol
//! version rmcp speaks) and by `toolgate stdio`.
//!
//! Progress: upstream progress arrives on the call's channel in wire order; it is
//! forwarded to this caller's own `progressToken`, and the channel is drained before the
//! result is returned, so the last update can never race the response. Without a
//! `progressToken` the updates become `notifications/message` log frames.
//!
//! rmcp's typed `Tool` drops fields it does not know (`execution`, vendor keys); the
//! listing here is typed, and [`crate::serve::fidelity`] puts the catalog's raw
//! definitions back on the wire.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    NotificationMetaObject, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ServerConfig, Tool,
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
use super::passthrough;
use crate::catalog::Catalog;
use crate::errors::{self, McpFailure};
use crate::gateway::Gateway;

/// The typed tool list for a catalog snapshot, cached so `tools/list` is a clone.
struct TypedCatalog {
    source: Arc<Catalog>,
    tools: Arc<Vec<Tool>>,
}

/// Shared by every MCP session of one gateway.
pub struct McpShared {
    gateway: Arc<Gateway>,
    typed: Mutex<Option<TypedCatalog>>,
    /// Live legacy sessions, told about catalog changes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

impl McpShared {
    pub fn new(gateway: Arc<Gateway>) -> Arc<Self> {
        let shared = Arc::new(Self {
            gateway,
            typed: Mutex::new(None),
            peers: Mutex::new(Vec::new()),
        });
        tokio::spawn(announce_changes(Arc::downgrade(&shared)));
        shared
    }

    fn typed_tools(&self) -> Arc<Vec<Tool>> {
        let catalog = self.gateway.catalog();
        let mut cached = self.typed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(typed) = cached.as_ref()
            && Arc::ptr_eq(&typed.source, &catalog)
        {
            return typed.tools.clone();
        }
        let tools: Vec<Tool> = catalog
            .entries()
            .iter()
            .filter_map(|entry| {
                match serde_json::from_value::<Tool>(Value::Object(entry.definition.clone())) {
                    Ok(tool) => Some(tool),
                    Err(error) => {
                        tracing::warn!(tool = %entry.name, %error, "tool definition is not valid MCP; left out of tools/list");
                        None
                    }
                }
            })
            .collect();
        let tools = Arc::new(tools);
        *cached = Some(TypedCatalog {
            source: catalog,
            tools: tools.clone(),
        });
        tools
    }
}

/// Sends `notifications/tools/list_changed` to every live session when the catalog
/// changes; sessions whose transport is gone are dropped from the list.
async fn announce_changes(shared: std::sync::Weak<McpShared>) {
    let Some(mut changes) = shared.upgrade().map(|s| s.gateway.catalog_changes()) else {
        return;
    };
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let peers: Vec<Peer<RoleServer>> = shared
            .peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut dead = Vec::new();
        for (index, peer) in peers.iter().enumerate() {
            let sent =
                tokio::time::timeout(Duration::from_secs(5), peer.notify_tool_list_changed()).await;
            if !matches!(sent, Ok(Ok(()))) {
                dead.push(index);
            }
        }
        if !dead.is_empty() {
            let mut live = shared.peers.lock().unwrap_or_else(|e| e.into_inner());
            // Only remove peers that are still the ones we tried (the list may have grown).
            let mut index = 0;
            live.retain(|_| {
                let keep = !dead.contains(&index);
                index += 1;
                keep
            });
        }
    }
}

/// One MCP session's handler (created per session, or per request on 2026-07-28).
#[derive(Clone)]
pub struct McpHandler {
    shared: Arc<McpShared>,
}

impl McpHandler {
    pub fn new(shared: Arc<McpShared>) -> Self {
        Self { shared }
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
        self.shared
            .peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(context.peer.clone());
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.shared.typed_tools();
        Ok(ListToolsResult::with_all_items((*tools).clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        let progress_token = context.meta.get_progress_token();
        let (sink, mut updates) = mpsc::unbounded_channel::<Progress>();
        let mut ctx = CallContext::new(
            self.shared.gateway.config.call_timeout,
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

        let call = self.shared.gateway.call(&name, arguments, ctx);
        tokio::pin!(call);
        let outcome = loop {
            tokio::select! {
                biased;
                Some(update) = updates.recv() => forwarder.send(update).await,
                Some(event) = events.recv() => bridge::deliver(&peer, event).await,
                outcome = &mut call => break outcome,
            }
        };
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
