//! The gateway's own tools (`tool_expand_tools`, `tool_search`, `tool_invoke`,
//! `tool_schema`): their names and definitions, which every catalog listing carries and
//! the policy budgets for. What they do is [`crate::call::protocol_tools`].

use serde_json::{Value, json};
use toolgate_adapters::JsonObject;

pub const EXPAND: &str = "tool_expand_tools";
pub const SEARCH: &str = "tool_search";
pub const INVOKE: &str = "tool_invoke";
pub const SCHEMA: &str = "tool_schema";
/// Most names one `tool_expand_tools` call may carry.
pub const MAX_NAMES_PER_EXPAND: usize = 128;

pub fn is_protocol_tool(name: &str) -> bool {
    matches!(name, EXPAND | SEARCH | INVOKE | SCHEMA)
}

/// The protocol tools' MCP definitions.
pub fn definitions() -> Vec<JsonObject> {
    let defs = [
        json!({
            "name": EXPAND,
            "title": "Expand available tools",
            "description": "Make more tools available in this session. Pass the exact names of tools to add (use tool_search to find them). Returns which were added, which were already selected, which names are invalid, the tools you could still add, and the full definitions of the added tools.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "tool_names": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "maxItems": MAX_NAMES_PER_EXPAND,
                        "description": "Exact tool names to add"
                    }
                },
                "required": ["tool_names"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": SEARCH,
            "title": "Search tools",
            "description": "Find tools by what they do. Returns the best matches (name, one-line description, upstream) among the tools you may use; add one with tool_expand_tools, or call it directly if it is already listed.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in a few words"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}
                },
                "required": ["query"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": INVOKE,
            "title": "Invoke a tool by name",
            "description": "Call any tool you may use by its exact name, with its arguments. For clients that can only call tools they listed.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The exact tool name"},
                    "arguments": {"type": "object", "description": "The tool's arguments"}
                },
                "required": ["name"],
                "additionalProperties": false
            }
        }),
        json!({
            "name": SCHEMA,
            "title": "Read a tool's full schema",
            "description": "Return a tool's whole definition, or the part at a JSON pointer path such as /inputSchema/properties/body. Large tool definitions are listed abbreviated; their descriptions name the paths to read here.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The exact tool name"},
                    "path": {"type": "string", "description": "A JSON pointer into the definition (e.g. /inputSchema/properties/body); leave out for the whole definition"}
                },
                "required": ["name"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
    ];
    defs.into_iter()
        .filter_map(|d| d.as_object().cloned())
        .collect()
}

/// What the protocol tools' definitions cost in a `tools/list` (counted once per
/// vocabulary).
pub fn listed_tokens(encoding: crate::truncate::Encoding) -> usize {
    use crate::truncate::Encoding;
    static O200K: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    static CL100K: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let counted = match encoding {
        Encoding::O200kBase => &O200K,
        Encoding::Cl100kBase => &CL100K,
    };
    *counted.get_or_init(|| {
        definitions()
            .iter()
            .filter_map(|d| serde_json::to_string(d).ok())
            .map(|text| crate::truncate::count(&text, encoding))
            .sum()
    })
}

/// The MCP definition of the protocol tool `name`, if it is one.
pub fn definition(name: &str) -> Option<JsonObject> {
    if !is_protocol_tool(name) {
        return None;
    }
    definitions()
        .into_iter()
        .find(|d| d.get("name").and_then(Value::as_str) == Some(name))
}
