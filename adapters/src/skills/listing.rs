//! What a scan looks like to MCP: one prompt, one tool and one resource per file for
//! every skill, and the results of getting the prompt and calling the tool.

use serde_json::{Value, json};

use super::files;
use super::scan::{Scan, Skill};
use crate::{JsonObject, Offerings, ToolDef};

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// The tools: one per skill, named like it, without arguments.
pub(super) fn tools(scan: &Scan) -> Vec<ToolDef> {
    scan.skills
        .values()
        .map(|skill| {
            let mut raw = object(json!({
                "name": skill.name,
                "description": format!(
                    "Loads the skill '{}': {} Returns its SKILL.md instructions and links \
                     to its files (scripts, assets), which resources/read returns.",
                    skill.name,
                    sentence(&skill.description)
                ),
                "inputSchema": {"type": "object", "properties": {}},
                "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
            }));
            if let Some(title) = &skill.title {
                raw.insert("title".into(), Value::String(title.clone()));
            }
            ToolDef {
                name: skill.name.clone(),
                raw: raw.into(),
            }
        })
        .collect()
}

/// `text` ending with a full stop, so the tool description reads as prose.
fn sentence(text: &str) -> String {
    if text.ends_with(['.', '!', '?']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// Prompts (one per skill) and resources (one per file of every skill).
pub(super) fn offerings(scan: &Scan) -> Offerings {
    let prompts = scan
        .skills
        .values()
        .map(|skill| {
            let mut raw = object(json!({
                "name": skill.name,
                "description": skill.description,
                "arguments": [],
            }));
            if let Some(title) = &skill.title {
                raw.insert("title".into(), Value::String(title.clone()));
            }
            raw
        })
        .collect();
    let resources = scan
        .skills
        .values()
        .flat_map(|skill| skill.files.iter().map(move |file| (skill, file)))
        .map(|(skill, file)| {
            object(json!({
                "uri": files::uri(&skill.name, &file.rel),
                // `<skill>__<path>`: the gateway governs it as `<upstream>__<skill>__…`,
                // so a tenant pattern `<upstream>__<skill>__*` covers exactly one
                // skill's files.
                "name": format!("{}__{}", skill.name, file.rel),
                "title": format!("{}/{}", skill.name, file.rel),
                "mimeType": file.mime,
                "size": file.size,
            }))
        })
        .collect();
    Offerings {
        prompts,
        resources,
        resource_templates: Vec::new(),
        completions: false,
        subscribe: false,
    }
}

/// A `prompts/get` result: SKILL.md as one user message.
pub(super) fn prompt_result(skill: &Skill, skill_md: String) -> Value {
    json!({
        "description": skill.description,
        "messages": [{"role": "user", "content": {"type": "text", "text": skill_md}}],
    })
}

/// A tool result: SKILL.md as text, then one `resource_link` per file (the gateway
/// rewrites their URIs to the ones clients read through it).
pub(super) fn tool_result(skill: &Skill, skill_md: String) -> JsonObject {
    let mut content = vec![json!({"type": "text", "text": skill_md})];
    content.extend(skill.files.iter().map(|file| {
        json!({
            "type": "resource_link",
            "uri": files::uri(&skill.name, &file.rel),
            "name": file.rel,
            "mimeType": file.mime,
            "size": file.size,
        })
    }));
    object(json!({"content": content, "isError": false}))
}
