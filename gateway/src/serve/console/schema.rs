//! A tool's input schema as the console shows it: a tree of its properties (types,
//! required, descriptions, allowed values) and a form with one field per top-level
//! argument. Both are bounded in depth and size whatever the schema holds.

use std::fmt::Write;

use serde_json::Value;

use super::html::esc;

/// The deepest level the tree shows.
const MAX_DEPTH: usize = 8;
/// The most properties the tree shows in all.
const MAX_NODES: usize = 400;

/// The schema's properties as nested lists.
pub(super) fn tree(schema: &Value) -> String {
    let mut out = String::new();
    let mut budget = MAX_NODES;
    object_tree(schema, 0, &mut budget, &mut out);
    if out.is_empty() {
        return "<p>No arguments.</p>".to_owned();
    }
    if budget == 0 {
        out.push_str("<p class=\"hint\">(more properties not shown: see the schema below)</p>");
    }
    out
}

fn type_of(schema: &Value) -> String {
    match &schema["type"] {
        Value::String(t) => t.clone(),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ if schema.get("properties").is_some() => "object".to_owned(),
        _ if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() => {
            "one of several".to_owned()
        }
        _ => "any".to_owned(),
    }
}

fn object_tree(schema: &Value, depth: usize, budget: &mut usize, out: &mut String) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    if depth >= MAX_DEPTH || properties.is_empty() {
        return;
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    out.push_str("<ul class=\"tree\">");
    for (name, property) in properties {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let _ = write!(
            out,
            "<li><code>{}</code> <span class=\"type\">{}</span>",
            esc(name),
            esc(&type_of(property))
        );
        if required.contains(&name.as_str()) {
            out.push_str(" <span class=\"req\">required</span>");
        }
        if let Some(description) = property["description"].as_str() {
            let _ = write!(out, " <span class=\"desc\">{}</span>", esc(description));
        }
        if let Some(values) = property["enum"].as_array() {
            let listed: Vec<String> = values.iter().take(20).map(Value::to_string).collect();
            let _ = write!(
                out,
                " <span class=\"enum\">one of {}</span>",
                esc(&listed.join(", "))
            );
        }
        object_tree(property, depth + 1, budget, out);
        if let Some(items) = property.get("items") {
            let _ = write!(
                out,
                "<div class=\"items\">items: <span class=\"type\">{}</span></div>",
                esc(&type_of(items))
            );
            object_tree(items, depth + 1, budget, out);
        }
        out.push_str("</li>");
    }
    out.push_str("</ul>");
}

/// One labelled field per top-level argument, typed for the script to read back
/// (`data-arg`, `data-type`), plus a JSON box that, when filled, is sent instead.
pub(super) fn form_fields(schema: &Value) -> String {
    let mut out = String::new();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (index, (name, property)) in properties.iter().take(100).enumerate() {
        let id = format!("arg-{index}");
        let is_required = required.contains(&name.as_str());
        let kind = type_of(property);
        let default = property
            .get("default")
            .map(|d| match d {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default();
        let req_attr = if is_required {
            " required aria-required=\"true\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<div class=\"field\"><label for=\"{id}\"><code>{n}</code> <span class=\"type\">{k}</span>{r}</label>",
            n = esc(name),
            k = esc(&kind),
            r = if is_required {
                " <span class=\"req\">required</span>"
            } else {
                ""
            },
        );
        let data = format!("data-arg=\"{}\"", esc(name));
        match (kind.as_str(), property["enum"].as_array()) {
            (_, Some(values)) => {
                let _ = write!(
                    out,
                    "<select id=\"{id}\" {data} data-type=\"json\"{req_attr}>"
                );
                if !is_required {
                    out.push_str("<option value=\"\">(not set)</option>");
                }
                for value in values.iter().take(200) {
                    let _ = write!(
                        out,
                        "<option value=\"{v}\">{v}</option>",
                        v = esc(&value.to_string())
                    );
                }
                out.push_str("</select>");
            }
            ("string", None) => {
                let _ = write!(
                    out,
                    "<input id=\"{id}\" type=\"text\" {data} data-type=\"string\" value=\"{}\"{req_attr}>",
                    esc(&default)
                );
            }
            ("integer" | "number", None) => {
                let step = if kind == "integer" { "1" } else { "any" };
                let _ = write!(
                    out,
                    "<input id=\"{id}\" type=\"number\" step=\"{step}\" {data} data-type=\"number\" value=\"{}\"{req_attr}>",
                    esc(&default)
                );
            }
            ("boolean", None) => {
                let _ = write!(
                    out,
                    "<select id=\"{id}\" {data} data-type=\"json\"{req_attr}>\
                     <option value=\"\">(not set)</option><option value=\"true\">true</option>\
                     <option value=\"false\">false</option></select>"
                );
            }
            _ => {
                let _ = write!(
                    out,
                    "<textarea id=\"{id}\" rows=\"3\" {data} data-type=\"json\" placeholder=\"JSON\"{req_attr}>{}</textarea>",
                    esc(&default)
                );
            }
        }
        if let Some(description) = property["description"].as_str() {
            let _ = write!(out, "<p class=\"hint\">{}</p>", esc(description));
        }
        out.push_str("</div>");
    }
    out.push_str(
        "<details><summary>Arguments as JSON</summary>\
         <label for=\"args-json\">A JSON object; when filled it is sent instead of the fields above</label>\
         <textarea id=\"args-json\" rows=\"4\" placeholder=\"{}\"></textarea></details>",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deep_and_wide_schemas_are_bounded() {
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let shown = tree(&deep);
        assert_eq!(shown.matches("<ul").count(), MAX_DEPTH);
        let wide: serde_json::Map<String, Value> = (0..1000)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let shown = tree(&json!({"type": "object", "properties": wide}));
        assert_eq!(shown.matches("<li>").count(), MAX_NODES);
        let form = form_fields(&json!({
            "type": "object",
            "required": ["n"],
            "properties": {
                "n": {"type": "integer", "description": "<b>count</b>"},
                "mode": {"enum": ["a", "b"]},
                "flag": {"type": "boolean"},
            }
        }));
        assert!(form.contains("data-type=\"number\""), "{form}");
        assert!(form.contains("&lt;b&gt;count"), "{form}");
        assert!(form.contains("<option value=\"&quot;a&quot;\">"), "{form}");
    }
}
