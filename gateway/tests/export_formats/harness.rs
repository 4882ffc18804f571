//! Runs exports in every format and checks each against the rules in `rules.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolgate::export::{ExportError, ExportOptions, Format, export};
use toolgate_adapters::JsonObject;

use super::rules;

/// A definition written as JSON.
pub(crate) fn definition(v: Value) -> JsonObject {
    v.as_object().cloned().expect("a definition is an object")
}

/// Checks one exported tool against its format's rules; the problems found.
pub(crate) fn check(
    definition: &JsonObject,
    format: Format,
    strict: bool,
    out: &Value,
) -> Vec<String> {
    let mut errs = Vec::new();
    let source_root = definition.get("inputSchema").cloned().unwrap_or(json!({}));
    let schema = match format {
        Format::Mcp => {
            if out != &Value::Object(definition.clone()) {
                errs.push("MCP output differs from the definition".into());
            }
            return errs;
        }
        Format::OpenAi => {
            let keys: Vec<&String> = out
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            if keys != ["type", "function"] || out["type"] != "function" {
                errs.push(format!("envelope keys {keys:?}"));
            }
            let f = &out["function"];
            rules::header(f.get("name"), f.get("description"), false, &mut errs);
            if strict != (f.get("strict") == Some(&json!(true)))
                || (!strict && f.get("strict").is_some())
            {
                errs.push("strict flag wrong".into());
            }
            f["parameters"].clone()
        }
        Format::Responses => {
            if out["type"] != "function" || out.get("function").is_some() {
                errs.push("not a Responses function tool".into());
            }
            rules::header(out.get("name"), out.get("description"), false, &mut errs);
            if strict != (out.get("strict") == Some(&json!(true))) {
                errs.push("strict flag wrong".into());
            }
            out["parameters"].clone()
        }
        Format::Anthropic => {
            let mut keys: Vec<&String> = out
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            keys.sort();
            if keys != ["description", "input_schema", "name"] {
                errs.push(format!("keys {keys:?}"));
            }
            rules::header(out.get("name"), out.get("description"), false, &mut errs);
            out["input_schema"].clone()
        }
        Format::Gemini => {
            let mut keys: Vec<&String> = out
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            keys.sort();
            let with_parameters = keys == ["description", "name", "parameters"];
            if !with_parameters && keys != ["description", "name"] {
                errs.push(format!("keys {keys:?}"));
            }
            rules::header(out.get("name"), out.get("description"), true, &mut errs);
            match out.get("parameters") {
                Some(p) => p.clone(),
                // No arguments: the declaration says nothing about them.
                None => json!({"type": "object"}),
            }
        }
    };
    match (format, strict) {
        (Format::Gemini, _) => {
            rules::gemini(&schema, &mut errs);
            if !rules::declares_closed_empty_object(&source_root) {
                rules::no_empty_objects(&schema, &mut errs);
            }
        }
        (Format::OpenAi | Format::Responses, true) => {
            rules::strict(&schema, &source_root, &mut errs);
            if !rules::declares_closed_empty_object(&source_root) {
                rules::no_empty_objects(&schema, &mut errs);
            }
        }
        _ => {
            rules::object_root(&schema, &mut errs);
            rules::refs_resolve(&schema, &mut errs);
        }
    }
    if let Err(e) = jsonschema::meta::validate(&schema) {
        errs.push(format!("not a valid JSON Schema: {e}"));
    }
    errs
}

pub(crate) const VARIANTS: [(Format, bool); 7] = [
    (Format::OpenAi, false),
    (Format::OpenAi, true),
    (Format::Responses, false),
    (Format::Responses, true),
    (Format::Anthropic, false),
    (Format::Gemini, false),
    (Format::Mcp, false),
];

pub(crate) fn label(format: Format, strict: bool) -> String {
    if strict {
        format!("{format}+strict")
    } else {
        format.to_string()
    }
}

#[derive(Default)]
pub(crate) struct Tally {
    pub ok: BTreeMap<String, usize>,
    pub export_errors: Vec<ExportError>,
    pub violations: Vec<String>,
}

pub(crate) fn run(tally: &mut Tally, definitions: &[JsonObject]) {
    for d in definitions {
        for (format, strict) in VARIANTS {
            match export(d, format, &ExportOptions { strict }) {
                Ok(out) => {
                    let errs = check(d, format, strict, &out);
                    if errs.is_empty() {
                        *tally.ok.entry(label(format, strict)).or_default() += 1;
                    } else {
                        let name = d.get("name").and_then(Value::as_str).unwrap_or("?");
                        for e in errs.into_iter().take(5) {
                            tally
                                .violations
                                .push(format!("{name} [{}]: {e}", label(format, strict)));
                        }
                    }
                }
                Err(e) => tally.export_errors.push(e),
            }
        }
    }
}

/// Whether `e` is strict mode or Gemini refusing a value only a JSON string could
/// carry where the gateway could not tell it from a plain string (the documented
/// refusal: the tool is listed under `skipped` with this reason).
pub(crate) fn json_string_refusal(e: &ExportError) -> bool {
    (e.strict || e.format == Format::Gemini)
        && e.reason.contains("cannot describe")
        && (e.reason.contains("free-form") || e.reason.contains("recursive"))
}

/// Asserts every export error is a [`json_string_refusal`] and every other export
/// passed its rules: `total` definitions per variant, less those refused in it.
pub(crate) fn assert_only_json_string_refusals(tally: &Tally, total: usize) {
    let others: Vec<&ExportError> = tally
        .export_errors
        .iter()
        .filter(|e| !json_string_refusal(e))
        .collect();
    assert!(others.is_empty(), "export errors: {others:?}");
    for (f, s) in VARIANTS {
        let refused = tally
            .export_errors
            .iter()
            .filter(|e| e.format == f && e.strict == s)
            .count();
        assert_eq!(
            tally.ok.get(&label(f, s)).copied().unwrap_or(0) + refused,
            total,
            "{}",
            label(f, s)
        );
    }
}

pub(crate) fn print(title: &str, tally: &Tally) {
    println!("{title}: exported and checked per format:");
    for (f, n) in &tally.ok {
        println!("  {f:<18} {n}");
    }
    for e in &tally.export_errors {
        println!("  ExportError: {e}");
    }
    for v in tally.violations.iter().take(40) {
        println!("  VIOLATION {v}");
    }
}

/// The spec files of the shared corpus (`$TOOLGATE_SHARED/specs`, default
/// `../shared/specs` beside the workspace), sorted. Without the corpus: a notice and
/// `None`, except under `CI=true`, where that fails.
pub(crate) fn corpus_specs() -> Option<Vec<PathBuf>> {
    let shared = match std::env::var("TOOLGATE_SHARED") {
        Ok(d) => PathBuf::from(d),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    };
    let specs = shared.join("specs");
    if !specs.is_dir() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the shared corpus is missing under {} (set TOOLGATE_SHARED)",
            specs.display()
        );
        eprintln!(
            "NOTICE: no shared corpus under {}; skipping the corpus test",
            specs.display()
        );
        return None;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&specs)
        .expect("read the specs directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml" | "yml")
            )
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no specs in {}", specs.display());
    Some(files)
}

/// An upstream name for a spec file: its stem, letters and digits kept, 20 at most.
pub(crate) fn upstream_name(path: &Path) -> String {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("spec");
    stem.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(20)
        .collect()
}
