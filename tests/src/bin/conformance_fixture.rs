//! Conformance fixture: an MCP server (rmcp, streamable HTTP at `/mcp`) that implements
//! the tools, prompts and resources the official conformance suite's active server
//! scenarios call (`test_simple_text`, `test_tool_with_progress`, `test_simple_prompt`,
//! `test://static-text`, ...).
//!
//! The end-to-end tests run the suite against the gateway in passthrough mode in front
//! of this server, so every scenario exercises the gateway's forwarding of results,
//! notifications and server-to-client requests.
//!
//! Usage: `conformance_fixture --listen 127.0.0.1:PORT`

// Logging and sampling are deprecated by SEP-2577, but the 2025-11-25 scenarios test them.
#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
        CompleteResult, CreateMessageRequestParams, ElicitRequestParams, GetPromptRequestParams,
        GetPromptResponse, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, LoggingMessageNotificationParam,
        PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
        ReadResourceResponse, ReadResourceResult, ServerConfig, SetLevelRequestParams,
        SubscribeRequestParams, UnsubscribeRequestParams,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};

/// A 1x1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// An 8-sample, 8 kHz mono 8-bit WAV.
const WAV_BASE64: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// Deserialize an rmcp model type from JSON: the model types are `#[non_exhaustive]`,
/// and the wire shape is what the suite checks anyway.
fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v).map_err(|e| McpError::internal_error(e.to_string(), None))
}

fn no_args_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

fn tools() -> Value {
    json!([
        {"name": "test_simple_text", "description": "Returns simple text content", "inputSchema": no_args_schema()},
        {"name": "test_image_content", "description": "Returns image content", "inputSchema": no_args_schema()},
        {"name": "test_audio_content", "description": "Returns audio content", "inputSchema": no_args_schema()},
        {"name": "test_embedded_resource", "description": "Returns an embedded resource", "inputSchema": no_args_schema()},
        {"name": "test_multiple_content_types", "description": "Returns text, image and resource content", "inputSchema": no_args_schema()},
        {"name": "test_tool_with_logging", "description": "Sends three log notifications while running", "inputSchema": no_args_schema()},
        {"name": "test_error_handling", "description": "Always returns an error result", "inputSchema": no_args_schema()},
        {"name": "test_tool_with_progress", "description": "Reports progress 0, 50, 100 of 100", "inputSchema": no_args_schema()},
        {"name": "test_sampling", "description": "Asks the client for an LLM completion",
         "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}}, "required": ["prompt"]}},
        {"name": "test_elicitation", "description": "Asks the client for user input",
         "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "description": "The message to show the user"}}, "required": ["message"]}},
        {"name": "test_elicitation_sep1034_defaults", "description": "Elicitation with defaults for every primitive type", "inputSchema": no_args_schema()},
        {"name": "test_elicitation_sep1330_enums", "description": "Elicitation with all five enum schema variants", "inputSchema": no_args_schema()},
        {"name": "json_schema_2020_12_tool", "description": "Tool with JSON Schema 2020-12 features",
         "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": false
         }}
    ])
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        },
        "required": []
    })
}

fn sep1330_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Untitled single-select", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Titled single-select", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "description": "Legacy titled enum", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Untitled multi-select",
                              "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Titled multi-select", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        },
        "required": []
    })
}

fn elicit_params(message: &str, schema: Value) -> Result<ElicitRequestParams, McpError> {
    from_json(json!({"mode": "form", "message": message, "requestedSchema": schema}))
}

#[derive(Clone, Default)]
struct Fixture;

impl Fixture {
    async fn log(&self, cx: &RequestContext<RoleServer>, text: &str) -> Result<(), McpError> {
        let param: LoggingMessageNotificationParam =
            from_json(json!({"level": "info", "logger": "conformance_fixture", "data": text}))?;
        cx.peer
            .notify_logging_message(param)
            .await
            .map_err(|e| McpError::internal_error(format!("log notification: {e}"), None))
    }

    async fn run_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let args = request.arguments.clone().unwrap_or_default();
        Ok(match request.name.as_ref() {
            "test_simple_text" => text_result("This is a simple text response for testing."),
            "test_image_content" => {
                json!({"content": [{"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}]})
            }
            "test_audio_content" => {
                json!({"content": [{"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}]})
            }
            "test_embedded_resource" => json!({"content": [{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain",
                "text": "This is an embedded resource content."}}]}),
            "test_multiple_content_types" => json!({"content": [
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                    "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}
            ]}),
            "test_tool_with_logging" => {
                self.log(&cx, "Tool execution started").await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                self.log(&cx, "Tool processing data").await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                self.log(&cx, "Tool execution completed").await?;
                // rmcp sends these lines on the session's own stream, not the call's:
                // the gateway gives such a line to the call in flight, and one written
                // the instant before the result can arrive after it, when no call is in
                // flight any more (two streams, no order between them). The pause keeps
                // the scenario about passing log lines through, not about that race.
                tokio::time::sleep(Duration::from_millis(50)).await;
                text_result("Tool with logging executed successfully")
            }
            "test_error_handling" => json!({"isError": true, "content": [{"type": "text",
                "text": "This tool intentionally returns an error for testing"}]}),
            "test_tool_with_progress" => {
                let token = request
                    .meta
                    .as_ref()
                    .and_then(|m| m.get_progress_token())
                    .or_else(|| cx.meta.get_progress_token());
                for (i, progress) in [0, 50, 100].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if let Some(token) = &token {
                        let param: ProgressNotificationParam = from_json(
                            json!({"progressToken": token, "progress": progress, "total": 100}),
                        )?;
                        cx.peer.notify_progress(param).await.map_err(|e| {
                            McpError::internal_error(format!("progress notification: {e}"), None)
                        })?;
                    }
                }
                text_result("Tool with progress executed successfully")
            }
            "test_sampling" => {
                let prompt = args.get("prompt").and_then(Value::as_str).ok_or_else(|| {
                    McpError::invalid_params("missing string argument 'prompt'", None)
                })?;
                let params: CreateMessageRequestParams = from_json(json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 100
                }))?;
                match cx.peer.create_message(params).await {
                    Ok(result) => {
                        let v = serde_json::to_value(&result).unwrap_or(Value::Null);
                        let text = v
                            .pointer("/content/text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        text_result(&format!("LLM response: {text}"))
                    }
                    Err(e) => json!({"isError": true, "content": [{"type": "text",
                        "text": format!("Sampling request failed: {e}")}]}),
                }
            }
            "test_elicitation" => {
                let message = args.get("message").and_then(Value::as_str).ok_or_else(|| {
                    McpError::invalid_params("missing string argument 'message'", None)
                })?;
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"}
                    },
                    "required": ["username", "email"]
                });
                self.elicit(&cx, message, schema, "User response").await?
            }
            "test_elicitation_sep1034_defaults" => {
                self.elicit(
                    &cx,
                    "Test client default value handling - please accept with defaults",
                    sep1034_schema(),
                    "Elicitation completed",
                )
                .await?
            }
            "test_elicitation_sep1330_enums" => {
                self.elicit(
                    &cx,
                    "Test enum schema variants - please choose options",
                    sep1330_schema(),
                    "Elicitation completed",
                )
                .await?
            }
            "json_schema_2020_12_tool" => {
                text_result(&format!("Received: {}", Value::Object(args)))
            }
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown tool '{other}'"),
                    None,
                ));
            }
        })
    }

    async fn elicit(
        &self,
        cx: &RequestContext<RoleServer>,
        message: &str,
        schema: Value,
        prefix: &str,
    ) -> Result<Value, McpError> {
        let params = elicit_params(message, schema)?;
        Ok(match cx.peer.create_elicitation(params).await {
            Ok(result) => {
                let v = serde_json::to_value(&result).unwrap_or(Value::Null);
                let action = v.get("action").cloned().unwrap_or(Value::Null);
                let content = v.get("content").cloned().unwrap_or(Value::Null);
                text_result(&format!("{prefix}: action={action}, content={content}"))
            }
            Err(e) => json!({"isError": true, "content": [{"type": "text",
                "text": format!("Elicitation request failed: {e}")}]}),
        })
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let mut config: ServerConfig = serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "tools": {"listChanged": false},
                "prompts": {"listChanged": false},
                "resources": {"subscribe": true, "listChanged": false},
                "logging": {},
                "completions": {}
            },
            "serverInfo": {"name": "toolgate-conformance-fixture", "version": env!("CARGO_PKG_VERSION")}
        }))
        .expect("static server config is valid");
        config.instructions = Some("Fixture for the MCP conformance suite.".into());
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        from_json(json!({"tools": tools()}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let value = self.run_tool(request, cx).await?;
        let result: CallToolResult = from_json(value)?;
        Ok(result.into())
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let v = serde_json::to_value(&request).unwrap_or(Value::Null);
        let prefix = v
            .pointer("/argument/value")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let values: Vec<&str> = ["paris", "park", "party", "test", "testing"]
            .into_iter()
            .filter(|c| c.starts_with(&prefix))
            .collect();
        from_json(
            json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}),
        )
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        from_json(json!({"prompts": [
            {"name": "test_simple_prompt", "description": "A simple prompt without arguments"},
            {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments", "arguments": [
                {"name": "arg1", "description": "First test argument", "required": true},
                {"name": "arg2", "description": "Second test argument", "required": true}
            ]},
            {"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource", "arguments": [
                {"name": "resourceUri", "description": "URI of the resource to embed", "required": true}
            ]},
            {"name": "test_prompt_with_image", "description": "A prompt with image content"}
        ]}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let v = serde_json::to_value(&request).unwrap_or(Value::Null);
        let arg = |k: &str| -> String {
            v.pointer(&format!("/arguments/{k}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        let result = match name {
            "test_simple_prompt" => json!({"messages": [
                {"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}
            ]}),
            "test_prompt_with_arguments" => json!({"messages": [
                {"role": "user", "content": {"type": "text",
                    "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}}
            ]}),
            "test_prompt_with_embedded_resource" => json!({"messages": [
                {"role": "user", "content": {"type": "resource", "resource": {
                    "uri": arg("resourceUri"), "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."}}},
                {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}
            ]}),
            "test_prompt_with_image" => json!({"messages": [
                {"role": "user", "content": {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}},
                {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}
            ]}),
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown prompt '{other}'"),
                    None,
                ));
            }
        };
        let result: GetPromptResult = from_json(result)?;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        from_json(json!({"resources": [
            {"uri": "test://static-text", "name": "static-text", "description": "A static text resource", "mimeType": "text/plain"},
            {"uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource", "mimeType": "image/png"},
            {"uri": "test://watched-resource", "name": "watched-resource", "description": "A resource that can be subscribed to", "mimeType": "text/plain"}
        ]}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        from_json(json!({"resourceTemplates": [
            {"uriTemplate": "test://template/{id}/data", "name": "template-data",
             "description": "Data for an id", "mimeType": "application/json"}
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let v = serde_json::to_value(&request).unwrap_or(Value::Null);
        let uri = v
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let content = match uri.as_str() {
            "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "This is the content of the static text resource."}),
            "test://static-binary" => {
                json!({"uri": uri, "mimeType": "image/png", "blob": PNG_BASE64})
            }
            "test://watched-resource" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "Watched resource content."}),
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
            {
                Some(id) if !id.is_empty() && !id.contains('/') => {
                    let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                    json!({"uri": uri, "mimeType": "application/json", "text": body.to_string()})
                }
                _ => {
                    return Err(McpError::resource_not_found(
                        format!("unknown resource '{uri}'"),
                        None,
                    ));
                }
            },
        };
        let result: ReadResourceResult = from_json(json!({"contents": [content]}))?;
        Ok(result.into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }
}

fn parse_listen() -> anyhow::Result<std::net::SocketAddr> {
    let mut args = std::env::args().skip(1);
    let mut listen = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => listen = args.next(),
            other => anyhow::bail!(
                "unknown argument '{other}'; usage: conformance_fixture --listen 127.0.0.1:PORT"
            ),
        }
    }
    let listen = listen.ok_or_else(|| anyhow::anyhow!("--listen 127.0.0.1:PORT is required"))?;
    Ok(listen.parse()?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = parse_listen()?;
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "the fixture only listens on loopback"
    );
    // Validate the elicitation schemas round-trip through rmcp's typed model untouched:
    // the SEP-1034/1330 scenarios check fields a lossy model would drop.
    for schema in [sep1034_schema(), sep1330_schema()] {
        let params =
            elicit_params("check", schema.clone()).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let back = serde_json::to_value(&params)?;
        let props = |v: &Value| v.pointer("/properties").cloned();
        anyhow::ensure!(
            props(&back["requestedSchema"]) == props(&schema),
            "rmcp changed the elicitation schema: {back}"
        );
    }
    let service: StreamableHttpService<Fixture, LocalSessionManager> = StreamableHttpService::new(
        || Ok(Fixture),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!(
        "conformance_fixture listening on http://{}/mcp",
        listener.local_addr()?
    );
    axum::serve(listener, router).await?;
    Ok(())
}
