//! A real rmcp server handler with one tool, `echo` (`{"message": …}` -> `echo: …`),
//! for the streamable HTTP transport tests.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;

#[derive(Clone)]
pub(crate) struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rmcp-echo", "1"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let schema = json!({"type": "object", "properties": {"message": {"type": "string"}}});
        let schema = match schema {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "echo",
            "Echoes the message",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let message = request
            .arguments
            .and_then(|a| a.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or_default();
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("echo: {message}"))]).into())
    }
}
