//! MCP tool definitions written here: the tools of `@modelcontextprotocol/server-everything`
//! as its zod-generated schemas describe them, plus the awkward shapes other servers send.

use serde_json::{Value, json};
use toolgate_adapters::JsonObject;

fn def(v: Value) -> JsonObject {
    v.as_object().cloned().expect("a definition is an object")
}

const DRAFT7: &str = "http://json-schema.org/draft-07/schema#";

/// server-everything's tools (names as the catalog prefixes them).
pub(crate) fn everything() -> Vec<JsonObject> {
    vec![
        def(
            json!({"name": "everything__echo", "description": "Echoes back the input",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "description": "Message to echo"}},
                "required": ["message"], "additionalProperties": false, "$schema": DRAFT7}}),
        ),
        def(
            json!({"name": "everything__get-sum", "description": "Returns the sum of two numbers",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number", "description": "First number"},
                "b": {"type": "number", "description": "Second number"}}, "required": ["a", "b"],
                "additionalProperties": false, "$schema": DRAFT7}}),
        ),
        def(json!({"name": "everything__trigger-long-running-operation",
            "description": "Demonstrates a long running operation with progress updates",
            "inputSchema": {"type": "object", "properties": {
                "duration": {"type": "number", "default": 10, "description": "Duration of the operation in seconds"},
                "steps": {"type": "number", "default": 5, "description": "Number of steps in the operation"}},
                "additionalProperties": false, "$schema": DRAFT7}})),
        def(
            json!({"name": "everything__get-env", "description": "Returns all environment variables",
            "inputSchema": {"type": "object", "properties": {}}}),
        ),
        def(
            json!({"name": "everything__trigger-sampling-request", "description": "Samples from an LLM using MCP's sampling feature",
            "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"},
                "maxTokens": {"type": "number", "default": 100, "description": "Maximum number of tokens to generate"}},
                "required": ["prompt"], "$schema": DRAFT7}}),
        ),
        def(
            json!({"name": "everything__get-tiny-image", "description": "Returns the MCP_TINY_IMAGE",
            "inputSchema": {"type": "object", "properties": {}}, "annotations": {"readOnlyHint": true}}),
        ),
        def(json!({"name": "everything__get-annotated-message",
            "description": "Demonstrates how annotations can be used to provide metadata about content",
            "inputSchema": {"type": "object", "properties": {
                "messageType": {"type": "string", "enum": ["error", "success", "debug"], "description": "Type of message to demonstrate different annotation patterns"},
                "includeImage": {"type": "boolean", "default": false, "description": "Whether to include an example image"}},
                "required": ["messageType"]}})),
        def(
            json!({"name": "everything__get-resource-reference", "description": "Returns a resource reference that can be used by MCP clients",
            "inputSchema": {"type": "object", "properties": {"resourceId": {"type": "number", "minimum": 1, "maximum": 100,
                "description": "ID of the resource to reference (1-100)"}}, "required": ["resourceId"]}}),
        ),
        def(
            json!({"name": "everything__get-structured-content", "title": "Get Structured Content",
            "description": "Returns structured content along with an output schema for client data validation",
            "inputSchema": {"type": "object", "properties": {"location": {"type": "string", "enum": ["New York", "Chicago", "Los Angeles"],
                "description": "Choose city"}}, "required": ["location"]},
            "outputSchema": {"type": "object", "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"},
                "humidity": {"type": "number"}}, "required": ["temperature", "conditions", "humidity"]}}),
        ),
        def(
            json!({"name": "everything__get-resource-links", "description": "Returns multiple resource links that reference different types of resources",
            "inputSchema": {"type": "object", "properties": {"count": {"type": "number", "minimum": 1, "maximum": 10, "default": 3,
                "description": "Number of resource links to return (1-10)"}}}}),
        ),
        def(
            json!({"name": "everything__toggle-subscriber-updates", "inputSchema": {"type": "object"},
            "annotations": {"title": "Toggle subscriber updates"}}),
        ),
        def(json!({"name": "everything__get-roots-list", "description": "   "})),
    ]
}

/// Definitions whose schemas use every construct the formats disagree on.
pub(crate) fn awkward() -> Vec<JsonObject> {
    let deep3 = nested(3);
    vec![
        def(
            json!({"name": "tree__insert", "description": "Inserts a tree (recursive $defs)",
            "inputSchema": {"type": "object", "properties": {"root": {"$ref": "#/$defs/node"}}, "required": ["root"],
                "$defs": {"node": {"type": "object", "description": "A node", "properties": {"value": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value"]}}}}),
        ),
        def(
            json!({"name": "tree__self", "description": "Refers to its own root",
            "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}, "sub": {"$ref": "#"}}}}),
        ),
        def(
            json!({"name": "refs__root", "description": "Root is a reference (draft-07 definitions)",
            "inputSchema": {"$ref": "#/definitions/Args", "definitions": {"Args": {"type": "object",
                "properties": {"q": {"type": "string", "format": "email"}, "when": {"$ref": "#/definitions/When"}}, "required": ["q"]},
                "When": {"type": "string", "format": "date-time"}}}}),
        ),
        def(
            json!({"name": "combo__root_any_of", "description": "Find a user by id or by name",
            "inputSchema": {"anyOf": [
                {"type": "object", "title": "by id", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
                {"type": "object", "title": "by name", "properties": {"name": {"type": "string"}, "exact": {"type": "boolean"}}, "required": ["name"]},
                {"type": "null"}]}}),
        ),
        def(json!({"name": "combo__root_all_of",
            "inputSchema": {"allOf": [{"$ref": "#/$defs/paging"}, {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}],
                "$defs": {"paging": {"type": "object", "properties": {"page": {"type": "integer", "minimum": 1}, "per_page": {"type": "integer", "maximum": 100}}}}}})),
        def(
            json!({"name": "combo__root_one_of_nested", "description": "oneOf at the root holding an allOf",
            "inputSchema": {"type": "object", "oneOf": [
                {"allOf": [{"properties": {"a": {"type": "string"}}}, {"required": ["a"]}]},
                {"properties": {"b": {"type": "string", "const": "fixed"}}, "required": ["b"]}]}}),
        ),
        def(
            json!({"name": "types__everything", "description": "Every keyword the formats disagree on",
            "inputSchema": {"type": "object", "required": ["id"], "properties": {
                "id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-f-]+$", "minLength": 36, "examples": ["0b0c…"]},
                "url": {"type": "string", "format": "uri"},
                "either": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "object", "properties": {"x": {"type": "number"}}}]},
                "multi": {"type": ["string", "number", "null"]},
                "legacy_nullable": {"type": "integer", "nullable": true, "exclusiveMinimum": 0},
                "constant": {"const": "v1"},
                "number_const": {"const": 3},
                "mixed_enum": {"enum": [1, "two", null]},
                "map": {"type": "object", "additionalProperties": {"type": "integer"}},
                "patterned": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
                "conditional": {"type": "object", "properties": {"kind": {"type": "string"}}, "if": {"properties": {"kind": {"const": "a"}}},
                    "then": {"required": ["kind"]}, "else": {"not": {"required": ["kind"]}}},
                "tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false},
                "old_tuple": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                "untyped_array": {"type": "array", "uniqueItems": true, "minItems": 1},
                "anything": {},
                "also_anything": true,
                "described_only": {"description": "no type at all", "default": {"a": 1}},
                "all_of_prop": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
                "nullable_enum": {"type": ["string", "null"], "enum": ["a", "b", null]},
                "deprecated": {"type": "boolean", "deprecated": true, "readOnly": true},
                "encoded": {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"},
                "numbers": {"type": "number", "multipleOf": 0.5, "minimum": 0, "maximum": 10, "format": "double"},
                "deep": deep3}}}),
        ),
        def(
            json!({"name": "9lives", "description": "A name starting with a digit",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}),
        ),
        def(
            json!({"name": "long__description", "description": "word ".repeat(1000),
            "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "description": "x".repeat(3000)}}}}),
        ),
        def(
            json!({"name": "nullable_root", "description": "Root that also allows null",
            "inputSchema": {"type": ["object", "null"], "properties": {"a": {"type": "string"}}}}),
        ),
        def(
            json!({"name": "missing_ref", "description": "A reference that points nowhere",
            "inputSchema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/nowhere"}, "b": {"$ref": "https://example.com/s.json"}}}}),
        ),
    ]
}

/// An object nested `levels` deep.
pub(crate) fn nested(levels: usize) -> Value {
    let mut deep = json!({"type": "string"});
    for i in 0..levels {
        deep = json!({"type": "object", "properties": {format!("level{i}"): deep}});
    }
    deep
}

/// Definitions over OpenAI's strict-mode size limits (every other format takes them),
/// and why.
pub(crate) fn over_strict_limits() -> Vec<(JsonObject, &'static str)> {
    let values: Vec<String> = (0..1500).map(|i| format!("v{i}")).collect();
    vec![
        (
            def(
                json!({"name": "limits__deep", "description": "Objects nested 80 levels deep",
            "inputSchema": {"type": "object", "properties": {"deep": nested(80)}}}),
            ),
            "levels of object nesting",
        ),
        (
            def(
                json!({"name": "limits__enum", "description": "An enum of 1,500 values",
            "inputSchema": {"type": "object", "properties": {"pick": {"type": "string", "enum": values}}}}),
            ),
            "at most 1000 enum values",
        ),
    ]
}

/// Definitions no format but MCP can carry, and why.
pub(crate) fn inexpressible() -> Vec<(JsonObject, &'static str)> {
    vec![
        (
            def(
                json!({"name": "scalar_root", "description": "Takes a bare string",
            "inputSchema": {"type": "string"}}),
            ),
            "rather than an object",
        ),
        (
            def(
                json!({"name": "bad.name", "description": "Dots are MCP-only",
            "inputSchema": {"type": "object"}}),
            ),
            "does not match",
        ),
        (
            def(
                json!({"name": "scalar_alternatives", "description": "Root alternatives that are all scalars",
            "inputSchema": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}),
            ),
            "is an object",
        ),
    ]
}
