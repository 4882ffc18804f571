use std::collections::BTreeSet;

use serde_json::json;
use toolgate_adapters::ToolDef;

use super::*;
use crate::catalog::{Catalog, DefinitionBudgets, Entry, Shaping, Source};
use crate::config::Namespace;

const BUDGET: usize = 400;

fn build(raw: Value, budget: usize) -> Arc<Entry> {
    let tools = [ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap()];
    let shaping = Shaping {
        definitions: DefinitionBudgets::uniform(budget),
        ..Shaping::default()
    };
    let (catalog, _) = Catalog::build(&[Source {
        upstream: "up",
        namespace: Namespace::Prefix,
        tools: &tools,
        shaping: Some(&shaping),
    }]);
    Arc::clone(&catalog.entries()[0])
}

use std::sync::Arc;

fn tokens(text: &str) -> usize {
    crate::truncate::count(text, Encoding::O200kBase)
}

/// Every `tool_schema` path an abbreviated definition names.
fn stub_paths(listed: &Value) -> BTreeSet<String> {
    let text = listed.to_string();
    let mut paths = BTreeSet::new();
    for piece in text.split("path \\\"").skip(1) {
        if let Some(end) = piece.find("\\\"") {
            paths.insert(piece[..end].to_owned());
        }
    }
    paths
}

/// A schema nested `levels` deep, `width` properties per level, each described.
fn nested(levels: usize, width: usize) -> Value {
    if levels == 0 {
        return json!({"type": "string", "description": "a leaf value of the nested record"});
    }
    let properties: Map<String, Value> = (0..width)
        .map(|i| (format!("field_{i}"), nested(levels - 1, width)))
        .collect();
    json!({"type": "object", "description": format!("level {levels}"), "properties": properties})
}

fn listed(entry: &Entry) -> Value {
    serde_json::from_str(&entry.definition_json).unwrap()
}

#[test]
fn a_definition_within_budget_is_listed_whole_with_its_cost() {
    let entry = build(
        json!({"name": "t", "description": "small", "inputSchema": nested(2, 2)}),
        BUDGET,
    );
    assert!(!entry.abbreviated());
    assert_eq!(entry.get("inputSchema"), entry.full("inputSchema"));
    assert_eq!(entry.definition_tokens, tokens(&entry.definition_json));
    assert_eq!(entry.full_tokens, entry.definition_tokens);
    assert_eq!(
        listed(&entry)["_meta"]["toolgate/definitionTokens"],
        entry.definition_tokens
    );
    assert!(
        listed(&entry)["_meta"]
            .get("toolgate/fullDefinitionTokens")
            .is_none()
    );
}

#[test]
fn a_deep_schema_keeps_its_top_levels_and_names_the_paths_of_the_rest() {
    let input = json!({"type": "object", "properties": {
        "id": {"type": "string", "description": "the record id"},
        "record": nested(4, 4),
        "tags": {"type": "array", "items": nested(2, 3)}
    }, "required": ["id"]});
    let output = json!({"type": "object", "properties": {"result": nested(3, 3)}});
    let entry = build(
        json!({"name": "t", "description": "Stores a record.", "inputSchema": input,
            "outputSchema": output}),
        BUDGET,
    );
    assert!(entry.abbreviated());
    let shown = listed(&entry);
    assert!(tokens(&entry.definition_json) <= BUDGET);
    assert_eq!(entry.definition_tokens, tokens(&entry.definition_json));
    assert!(entry.full_tokens > BUDGET, "{}", entry.full_tokens);
    assert_eq!(
        shown["_meta"]["toolgate/fullDefinitionTokens"],
        entry.full_tokens
    );
    // Top-level parameters and `required` stay; the output is an open object.
    let properties = shown["inputSchema"]["properties"].as_object().unwrap();
    assert_eq!(properties.len(), 3);
    assert_eq!(shown["inputSchema"]["required"], json!(["id"]));
    assert_eq!(
        shown["inputSchema"]["properties"]["id"],
        input["properties"]["id"]
    );
    assert_eq!(shown["outputSchema"]["type"], "object");
    assert!(shown["outputSchema"].get("properties").is_none());
    assert!(
        shown["description"]
            .as_str()
            .unwrap()
            .starts_with("Stores a record.")
    );
    assert!(
        shown["description"]
            .as_str()
            .unwrap()
            .contains("tool_schema")
    );
    // Every named path is the whole sub-schema there.
    let full = Value::Object(entry.full_definition());
    let paths = stub_paths(&shown);
    assert!(paths.contains("/outputSchema"), "{paths:?}");
    assert!(paths.len() >= 3, "{paths:?}");
    for path in &paths {
        let answered =
            schema_at(&entry.full_definition(), path).unwrap_or_else(|| panic!("{path} not found"));
        assert_eq!(Some(&answered), full.pointer(path), "{path}");
    }
    // The whole listing validates what the full schema does (stubs are open).
    let listed_schema = jsonschema::validator_for(&shown["inputSchema"]).unwrap();
    let full_schema = jsonschema::validator_for(&input).unwrap();
    let good = json!({"id": "1", "record": {"field_0": {"field_1": {}}}});
    assert!(full_schema.is_valid(&good) && listed_schema.is_valid(&good));
}

#[test]
fn many_parameters_and_long_texts_still_fit() {
    let properties: Map<String, Value> = (0..300)
        .map(|i| {
            (
                format!("parameter_number_{i}"),
                json!({"type": "string", "description": "A parameter with a long description. ".repeat(8),
                    "enum": (0..40).map(|v| format!("value{v}")).collect::<Vec<_>>()}),
            )
        })
        .collect();
    for description in ["short", &"A very long tool description. ".repeat(2_000)] {
        let entry = build(
            json!({"name": "t", "description": description,
                "inputSchema": {"type": "object", "properties": properties}}),
            BUDGET,
        );
        assert!(entry.abbreviated());
        assert!(
            tokens(&entry.definition_json) <= BUDGET,
            "{} tokens: {}",
            tokens(&entry.definition_json),
            &entry.definition_json[..400]
        );
        let shown = listed(&entry);
        assert_eq!(shown["inputSchema"]["type"], "object");
        for path in stub_paths(&shown) {
            assert!(
                schema_at(&entry.full_definition(), &path).is_some(),
                "{path}"
            );
        }
    }
}

#[test]
fn references_become_stubs_and_come_back_with_their_definitions() {
    let item = json!({"type": "object", "properties": {"name": {"type": "string"},
        "child": {"$ref": "#/$defs/Item"}, "blob": nested(3, 4)}});
    let input = json!({"type": "object", "$defs": {"Item": item},
        "properties": {"item": {"$ref": "#/$defs/Item"}, "odd/key~": nested(3, 4)}});
    let entry = build(json!({"name": "t", "inputSchema": input}), BUDGET);
    assert!(entry.abbreviated());
    let shown = listed(&entry);
    assert!(!entry.definition_json.contains("$ref"), "{shown}");
    assert!(shown["inputSchema"].get("$defs").is_none());
    let paths = stub_paths(&shown);
    assert!(paths.contains("/inputSchema/properties/item"), "{paths:?}");
    // An escaped key's path finds it.
    assert!(
        paths
            .iter()
            .any(|p| p.starts_with("/inputSchema/properties/odd~1key~0")),
        "{paths:?}"
    );
    let answered = schema_at(&entry.full_definition(), "/inputSchema/properties/item").unwrap();
    assert_eq!(answered["$ref"], "#/$defs/Item");
    assert_eq!(answered["$defs"]["Item"], item);
    // It stands alone: a validator resolves its reference (recursion included).
    let validator = jsonschema::validator_for(&answered).unwrap();
    assert!(validator.is_valid(&json!({"name": "a", "child": {"name": "b"}})));
    assert!(!validator.is_valid(&json!({"name": 1})));
    assert_eq!(
        schema_at(&entry.full_definition(), "/inputSchema/nothing"),
        None
    );
    assert_eq!(schema_at(&entry.full_definition(), "inputSchema"), None);
}

#[test]
fn abbreviate_schema_fits_any_limit_it_is_given() {
    let schema = nested(5, 4);
    let Value::Object(schema) = schema else {
        unreachable!()
    };
    for limit in [50, 200, 1_000] {
        let cut = abbreviate_schema(
            &schema,
            "/inputSchema/properties/x",
            limit,
            Encoding::O200kBase,
        );
        let text = to_text(&cut);
        assert!(tokens(&text) <= limit.max(60), "{limit}: {}", tokens(&text));
        // Deeper parts are named when there is room; the node itself at least.
        let named = if limit >= 200 {
            "/inputSchema/properties/x/properties/"
        } else {
            "/inputSchema/properties/x"
        };
        assert!(text.contains(named), "{text}");
    }
}

#[test]
fn any_path_is_answered_or_refused_without_panic() {
    let entry = build(
        json!({"name": "t", "description": "d", "inputSchema": {"type": "object",
            "properties": {"a/b": {"type": "string"}, "~": {"type": "integer"}, "é": nested(1, 1)}}}),
        BUDGET,
    );
    let full = entry.full_definition();
    for path in [
        "/~2",
        "/~",
        "//",
        "///",
        "/inputSchema/~2",
        "/inputSchema/properties/a~1b",
        "/inputSchema/properties/~0",
        "/inputSchema/properties/é/properties",
        "/é",
        "/\u{0}",
        "/description/0",
        "/inputSchema/required/99",
        "no-slash",
        "~1",
        "/inputSchema/",
    ] {
        let _ = schema_at(&full, path);
    }
    assert_eq!(
        schema_at(&full, "/inputSchema/properties/a~1b"),
        Some(json!({"type": "string"}))
    );
    assert_eq!(
        schema_at(&full, "/inputSchema/properties/~0"),
        Some(json!({"type": "integer"}))
    );
    assert_eq!(schema_at(&full, "/description"), Some(json!("d")));
}
