//! Tool export formats checked against each consumer's rules, on every tool the shared
//! OpenAPI corpus imports and on MCP definitions written here (server-everything's
//! tools plus the awkward shapes real servers send).
//!
//! The checks are written from the rules (see `toolgate::export`'s table), not from the
//! converter: each output is walked and every schema node inspected for forbidden or
//! unknown keywords, root shape, closed and fully required objects in strict mode,
//! names, `nullable` handling and `$ref`s. Every output schema is also meta-validated
//! as JSON Schema with the `jsonschema` crate.
//!
//! The corpus lives in `$TOOLGATE_SHARED/specs` (default `../shared/specs` beside the
//! workspace root); without it the corpus test prints a notice and passes, except under
//! `CI=true`.

use std::time::Instant;

use serde_json::{Value, json};
use toolgate::export::{ExportOptions, Format, MAX_DESCRIPTION, export, strip_strict_nulls};
use toolgate_adapters::openapi::{OpenApiConfig, OpenApiUpstream};
use toolgate_adapters::{JsonObject, Upstream};

#[path = "export_formats/definitions.rs"]
mod definitions;
#[path = "export_formats/harness.rs"]
mod harness;

#[path = "export_formats/random.rs"]
mod random;
#[path = "export_formats/rules.rs"]
mod rules;

use harness::{Tally, VARIANTS, print, run};

#[tokio::test]
async fn every_corpus_tool_exports_within_each_formats_rules() {
    let Some(files) = harness::corpus_specs() else {
        return;
    };
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut total = 0;
    for path in &files {
        let name = harness::upstream_name(path);
        let (upstream, _) =
            OpenApiUpstream::load(&name, OpenApiConfig::from_path(path.to_string_lossy()))
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let defs: Vec<JsonObject> = upstream.tools().iter().map(|t| (*t.raw).clone()).collect();
        println!("{}: {} tools", path.display(), defs.len());
        total += defs.len();
        run(&mut tally, &defs);
    }
    print(
        &format!("corpus ({total} tools, {:?})", started.elapsed()),
        &tally,
    );
    assert!(total > 1000, "only {total} tools imported");
    assert!(
        tally.violations.is_empty(),
        "{} rule violations",
        tally.violations.len()
    );
    // A value only a JSON string could carry, where an alternative also takes any
    // string (GitHub's deployment `payload`), is refused with its reason; nothing else.
    harness::assert_only_json_string_refusals(&tally, total);
    assert!(
        tally.export_errors.len() <= 3 * 3,
        "{} refusals",
        tally.export_errors.len()
    );
}

#[test]
fn mcp_definitions_export_within_each_formats_rules() {
    let mut defs = definitions::everything();
    defs.extend(definitions::awkward());
    let mut tally = Tally::default();
    let started = Instant::now();
    run(&mut tally, &defs);
    print(
        &format!(
            "inline MCP definitions ({} tools, {:?})",
            defs.len(),
            started.elapsed()
        ),
        &tally,
    );
    assert!(
        tally.violations.is_empty(),
        "{} rule violations",
        tally.violations.len()
    );
    assert!(
        tally.export_errors.is_empty(),
        "export errors: {:?}",
        tally.export_errors
    );
}

#[test]
fn inexpressible_tools_are_reported_with_a_reason() {
    let cases = definitions::inexpressible();
    let mut tally = Tally::default();
    let defs: Vec<JsonObject> = cases.iter().map(|(d, _)| d.clone()).collect();
    run(&mut tally, &defs);
    print("inexpressible definitions", &tally);
    assert!(tally.violations.is_empty(), "{:?}", tally.violations);
    // Every format but MCP refuses each of them, naming the tool, the format and why.
    let mut expected = Vec::new();
    for (d, why) in &cases {
        for (format, strict) in VARIANTS.iter().filter(|(f, _)| *f != Format::Mcp) {
            expected.push((
                d["name"].as_str().unwrap().to_owned(),
                *format,
                *strict,
                *why,
            ));
        }
    }
    assert_eq!(
        tally.export_errors.len(),
        expected.len(),
        "{:?}",
        tally.export_errors
    );
    for (e, (tool, format, strict, why)) in tally.export_errors.iter().zip(&expected) {
        assert_eq!((&e.tool, e.format, e.strict), (tool, *format, *strict));
        assert!(e.reason.contains(why), "{e}");
        assert!(e.to_string().contains(tool.as_str()), "{e}");
    }
    assert_eq!(tally.ok.get("mcp"), Some(&cases.len()));
}

fn find<'a>(s: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(s, |v, k| &v[*k])
}

#[test]
fn recursion_is_cut_and_marked() {
    let defs = definitions::awkward();
    let tree = &defs[0];
    let gemini = export(tree, Format::Gemini, &ExportOptions::default()).unwrap();
    let strict = export(tree, Format::OpenAi, &ExportOptions { strict: true }).unwrap();
    for (label, root) in [
        ("gemini", &gemini["parameters"]),
        ("strict", &strict["function"]["parameters"]),
    ] {
        let node = find(root, &["properties", "root"]);
        let child = find(node, &["properties", "children", "items"]);
        let props = child.get("properties").and_then(Value::as_object);
        assert!(
            props.is_none_or(|p| p.is_empty()),
            "{label}: expanded twice: {child}"
        );
        assert!(
            !child.to_string().contains("x-toolgate"),
            "{label}: marker leaked: {child}"
        );
        let text = child["description"]
            .as_str()
            .unwrap_or_else(|| child["anyOf"][0]["description"].as_str().unwrap());
        assert!(text.contains("recursive"), "{label}: {child}");
        assert!(
            child.to_string().contains("object"),
            "{label}: the cut keeps the type: {child}"
        );
    }
    // Non-strict OpenAI and Anthropic keep the reference (they accept $ref).
    let anthropic = export(tree, Format::Anthropic, &ExportOptions::default()).unwrap();
    assert_eq!(
        anthropic["input_schema"]["properties"]["root"]["$ref"],
        "#/$defs/node"
    );
}

#[test]
fn root_alternatives_are_merged_and_described() {
    let defs = definitions::awkward();
    let any_of = defs
        .iter()
        .find(|d| d["name"] == "combo__root_any_of")
        .unwrap();
    let out = export(any_of, Format::Anthropic, &ExportOptions::default()).unwrap();
    let schema = &out["input_schema"];
    assert_eq!(schema["type"], "object");
    let props: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(props, ["id", "name", "exact"]);
    assert!(
        schema.get("required").is_none(),
        "only what every alternative requires"
    );
    let d = out["description"].as_str().unwrap();
    assert!(
        d.contains("Accepts one of 2 argument shapes") && d.contains("by id: id"),
        "{d}"
    );
}

#[test]
fn names_descriptions_and_formats() {
    let defs = definitions::awkward();
    let digit = defs.iter().find(|d| d["name"] == "9lives").unwrap();
    let g = export(digit, Format::Gemini, &ExportOptions::default()).unwrap();
    assert_eq!(g["name"], "_9lives");
    let o = export(digit, Format::OpenAi, &ExportOptions::default()).unwrap();
    assert_eq!(o["function"]["name"], "9lives");

    let long = defs
        .iter()
        .find(|d| d["name"] == "long__description")
        .unwrap();
    let a = export(long, Format::Anthropic, &ExportOptions::default()).unwrap();
    let d = a["description"].as_str().unwrap();
    assert!(
        d.chars().count() <= MAX_DESCRIPTION && d.chars().count() > MAX_DESCRIPTION - 8,
        "{}",
        d.len()
    );
    assert!(d.ends_with("word…"), "cut, trimmed, then an ellipsis");

    let everything = definitions::everything();
    let untitled = everything
        .iter()
        .find(|d| d["name"] == "everything__get-roots-list")
        .unwrap();
    let r = export(untitled, Format::Responses, &ExportOptions::default()).unwrap();
    assert_eq!(
        r["description"],
        "Calls the tool 'get-roots-list' of 'everything'."
    );
    assert_eq!(r["parameters"], json!({"type": "object", "properties": {}}));
    let titled = everything
        .iter()
        .find(|d| d["name"] == "everything__toggle-subscriber-updates")
        .unwrap();
    let r = export(titled, Format::Responses, &ExportOptions { strict: true }).unwrap();
    assert_eq!(r["description"], "Toggle subscriber updates");
    assert_eq!(r["strict"], true);

    for f in ["openai", "Responses", "anthropic", "gemini", "mcp"] {
        let parsed: Format = f.parse().unwrap();
        assert!(parsed.as_str().eq_ignore_ascii_case(f));
    }
    assert!("claude".parse::<Format>().is_err());
}

#[test]
fn strict_nulls_for_optional_arguments_are_stripped() {
    let everything = definitions::everything();
    let sampling = everything
        .iter()
        .find(|d| d["name"] == "everything__trigger-sampling-request")
        .unwrap();
    let out = export(sampling, Format::OpenAi, &ExportOptions { strict: true }).unwrap();
    let params = &out["function"]["parameters"];
    assert_eq!(params["required"], json!(["prompt", "maxTokens"]));
    assert_eq!(
        params["properties"]["maxTokens"]["type"],
        json!(["number", "null"])
    );
    assert!(
        params["properties"]["maxTokens"]["description"]
            .as_str()
            .unwrap()
            .contains("default: 100")
    );
    let mut args = json!({"prompt": "hi", "maxTokens": null})
        .as_object()
        .cloned()
        .unwrap();
    strip_strict_nulls(sampling.get("inputSchema"), &mut args);
    assert_eq!(Value::Object(args), json!({"prompt": "hi"}));

    // Nested objects and array items too; a null the source allows stays.
    let awkward = definitions::awkward();
    let tree = awkward
        .iter()
        .find(|d| d["name"] == "tree__insert")
        .unwrap();
    let mut args = json!({"root": {"value": "a", "children": null}})
        .as_object()
        .cloned()
        .unwrap();
    strip_strict_nulls(tree.get("inputSchema"), &mut args);
    assert_eq!(Value::Object(args), json!({"root": {"value": "a"}}));
    let types = awkward
        .iter()
        .find(|d| d["name"] == "types__everything")
        .unwrap();
    let mut args =
        json!({"id": "x", "multi": null, "url": null, "all_of_prop": {"a": null, "b": "y"}})
            .as_object()
            .cloned()
            .unwrap();
    strip_strict_nulls(types.get("inputSchema"), &mut args);
    assert_eq!(
        Value::Object(args),
        json!({"id": "x", "multi": null, "all_of_prop": {"b": "y"}})
    );
}

#[test]
fn strict_size_limits_are_reported_and_other_formats_still_export() {
    let cases = definitions::over_strict_limits();
    let defs: Vec<JsonObject> = cases.iter().map(|(d, _)| d.clone()).collect();
    let mut tally = Tally::default();
    run(&mut tally, &defs);
    print("definitions over strict-mode limits", &tally);
    assert!(tally.violations.is_empty(), "{:?}", tally.violations);
    let got: Vec<(String, Format, bool)> = tally
        .export_errors
        .iter()
        .map(|e| (e.tool.clone(), e.format, e.strict))
        .collect();
    let mut expected = Vec::new();
    for (d, why) in &cases {
        let name = d["name"].as_str().unwrap().to_owned();
        expected.push((name.clone(), Format::OpenAi, true));
        expected.push((name, Format::Responses, true));
        let e = export(d, Format::OpenAi, &ExportOptions { strict: true }).unwrap_err();
        assert!(e.reason.contains(why), "{e}");
        assert!(e.to_string().contains("as openai (strict):"), "{e}");
    }
    assert_eq!(got, expected);
    for f in ["openai", "responses", "anthropic", "gemini", "mcp"] {
        assert_eq!(tally.ok.get(f), Some(&cases.len()), "{f}");
    }
}

#[test]
fn random_schemas_export_within_each_formats_rules() {
    let defs = random::definitions(600, 0x7001_6a7e);
    let mut tally = Tally::default();
    let started = Instant::now();
    run(&mut tally, &defs);
    print(
        &format!(
            "random definitions ({} tools, {:?})",
            defs.len(),
            started.elapsed()
        ),
        &tally,
    );
    assert!(
        tally.violations.is_empty(),
        "{} rule violations",
        tally.violations.len()
    );
    harness::assert_only_json_string_refusals(&tally, defs.len());
}

/// The three shapes strict mode and Gemini cannot describe — a free-form map, the
/// `tool_invoke` protocol tool's `arguments`, a recursive value whose expansion is cut
/// — each exported as a JSON string that says so (never an object that accepts
/// nothing), valid for the consumer's rules, and decoded back into the object on the
/// call path; a value that could not be told from a plain string is refused with a
/// reason instead.
#[test]
fn values_strict_and_gemini_cannot_describe_travel_as_json_strings() {
    let metadata = harness::definition(json!({
        "name": "crm__update",
        "description": "Updates a record",
        "inputSchema": {"type": "object", "properties": {
            "id": {"type": "string"},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "Labels to set"},
            "tags": {"anyOf": [{"type": "object", "additionalProperties": true}, {"type": "null"}]}
        }, "required": ["id", "metadata"]}
    }));
    let invoke = toolgate::catalog::protocol_tools::definition("tool_invoke").unwrap();
    let tree = definitions::awkward().remove(0);
    let cases: [(&JsonObject, &[&str], Value, Value); 3] = [
        (
            &metadata,
            &["metadata"],
            json!({"id": "1", "metadata": "{\"team\": \"a\"}", "tags": null}),
            json!({"id": "1", "metadata": {"team": "a"}, "tags": null}),
        ),
        (
            &invoke,
            &["arguments"],
            json!({"name": "crm__update", "arguments": "{\"id\": \"1\"}"}),
            json!({"name": "crm__update", "arguments": {"id": "1"}}),
        ),
        (
            &tree,
            &["root", "properties", "children", "items"],
            json!({"root": {"value": "a", "children": ["{\"value\": \"b\", \"children\": []}"]}}),
            json!({"root": {"value": "a", "children": [{"value": "b", "children": []}]}}),
        ),
    ];
    for (definition, path, sent, decoded) in cases {
        let name = definition["name"].as_str().unwrap();
        for (format, strict) in [
            (Format::OpenAi, true),
            (Format::Responses, true),
            (Format::Gemini, false),
        ] {
            let out = export(definition, format, &ExportOptions { strict })
                .unwrap_or_else(|e| panic!("{name} {format}: {e}"));
            let errs = harness::check(definition, format, strict, &out);
            assert!(errs.is_empty(), "{name} {format}: {errs:?}");
            let parameters = match format {
                Format::OpenAi => &out["function"]["parameters"],
                Format::Responses => &out["parameters"],
                _ => &out["parameters"],
            };
            let mut node = &parameters["properties"];
            for (i, k) in path.iter().enumerate() {
                node = &node[*k];
                if i + 1 < path.len() && node.get("anyOf").is_some() {
                    node = &node["anyOf"][0];
                }
            }
            let types = node["type"].to_string();
            assert!(types.contains("string"), "{name} {format}: {node}");
            let text = node["description"].as_str().unwrap_or("");
            assert!(text.contains("JSON-encoded"), "{name} {format}: {node}");
            assert!(text.contains("decoded before the call"), "{name} {format}");
        }
        let mut arguments = sent.as_object().cloned().unwrap();
        toolgate::export::prepare_call_arguments(definition.get("inputSchema"), &mut arguments);
        assert_eq!(Value::Object(arguments), decoded, "{name}");
    }
    // Non-strict formats keep the map as the source has it.
    let plain = export(&metadata, Format::OpenAi, &ExportOptions::default()).unwrap();
    assert_eq!(
        plain["function"]["parameters"]["properties"]["metadata"]["type"],
        "object"
    );

    // GitHub's deployment `payload` shape: an object or any string. A string there
    // could mean either, so strict mode and Gemini refuse the tool and say why.
    let ambiguous = harness::definition(json!({
        "name": "gh__deploy",
        "inputSchema": {"type": "object", "properties": {"payload": {"oneOf": [
            {"type": "object", "additionalProperties": true}, {"type": "string"}
        ]}}}
    }));
    for (format, strict) in [(Format::OpenAi, true), (Format::Gemini, false)] {
        let e = export(&ambiguous, format, &ExportOptions { strict }).unwrap_err();
        assert!(
            e.reason.contains("/payload") && e.reason.contains("free-form"),
            "{e}"
        );
        assert!(harness::json_string_refusal(&e), "{e}");
    }
    assert!(export(&ambiguous, Format::Anthropic, &ExportOptions::default()).is_ok());
}

/// Schemas that recurse through 2019-09 `$recursiveRef` and 2020-12 `$dynamicRef`
/// (`adapters/tests/data/recursive-refs-api.yaml`) export within every format's rules.
#[tokio::test]
async fn dynamic_reference_tools_export_within_each_formats_rules() {
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../adapters/tests/data/recursive-refs-api.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    let path = std::env::temp_dir().join(format!(
        "toolgate-export-{}-recursive-refs-api.yaml",
        std::process::id()
    ));
    std::fs::write(&path, text.replace("PORT", "9")).unwrap();
    let loaded =
        OpenApiUpstream::load("rec", OpenApiConfig::from_path(path.to_string_lossy())).await;
    let _ = std::fs::remove_file(&path);
    let (upstream, report) = loaded.unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let defs: Vec<JsonObject> = upstream.tools().iter().map(|t| (*t.raw).clone()).collect();
    assert_eq!(defs.len(), 5);
    let mut tally = Tally::default();
    run(&mut tally, &defs);
    print("dynamic references", &tally);
    assert!(tally.violations.is_empty(), "{:?}", tally.violations);
    assert!(tally.export_errors.is_empty(), "{:?}", tally.export_errors);
}
