//! Normalization: Swagger 2.0 documents are rewritten into OpenAPI 3.x shape by our own
//! code, and schemas in 3.0 idioms (`nullable`, boolean `exclusiveMinimum`, `type: file`,
//! tuple `items`) are rewritten into JSON Schema 2020-12, which 3.1 already uses (type
//! arrays, `const`, `$defs` pass through unchanged).
//!
//! The 2.0 rewrite leaves `definitions`, `parameters` and `responses` where they are, so
//! `$ref`s keep pointing at the same JSON pointers.

use serde_json::{Map, Value, json};

use super::load::LoadError;

/// Which version family a document belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    Swagger2,
    V30,
    V31,
}

/// Detects the version and rewrites a 2.0 document into 3.0 shape in place.
pub(super) fn normalize_document(
    root: &mut Value,
    spec_url: Option<&url::Url>,
) -> Result<Version, LoadError> {
    let obj = root
        .as_object()
        .ok_or_else(|| LoadError::invalid("", "the document is not an object"))?;
    let version = if let Some(v) = obj.get("openapi") {
        let v = v
            .as_str()
            .ok_or_else(|| LoadError::invalid("/openapi", "must be a string like \"3.0.3\""))?;
        if v.starts_with("3.0") {
            Version::V30
        } else if v.starts_with("3.") {
            Version::V31
        } else {
            return Err(LoadError::invalid(
                "/openapi",
                format!("unsupported OpenAPI version '{v}' (2.0, 3.0 and 3.1 are)"),
            ));
        }
    } else if let Some(v) = obj.get("swagger") {
        if v.as_str() != Some("2.0") {
            return Err(LoadError::invalid(
                "/swagger",
                "only Swagger \"2.0\" is supported",
            ));
        }
        Version::Swagger2
    } else {
        return Err(LoadError::invalid(
            "",
            "neither an 'openapi' nor a 'swagger' version field: not an OpenAPI document",
        ));
    };
    for key in ["paths", "components", "webhooks"] {
        if let Some(v) = obj.get(key)
            && !v.is_object()
        {
            return Err(LoadError::invalid(&format!("/{key}"), "must be an object"));
        }
    }
    if version == Version::Swagger2 {
        swagger2_to_3(root, spec_url)?;
    }
    Ok(version)
}

fn swagger2_to_3(root: &mut Value, spec_url: Option<&url::Url>) -> Result<(), LoadError> {
    let doc = root.as_object_mut().expect("checked above");
    // servers from host, basePath and schemes
    let base_path = doc.get("basePath").and_then(Value::as_str).unwrap_or("");
    let servers: Vec<Value> = match doc.get("host").and_then(Value::as_str) {
        Some(host) => {
            let mut schemes: Vec<String> = doc
                .get("schemes")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if schemes.is_empty() {
                let s = spec_url
                    .map(|u| u.scheme())
                    .filter(|s| *s == "http" || *s == "https")
                    .unwrap_or("https");
                schemes.push(s.to_owned());
            }
            // prefer https when offered
            schemes.sort_by_key(|s| s != "https");
            schemes
                .iter()
                .map(|s| json!({"url": format!("{s}://{host}{base_path}")}))
                .collect()
        }
        None if !base_path.is_empty() => vec![json!({"url": base_path})],
        None => vec![],
    };
    doc.insert("servers".into(), Value::Array(servers));
    let consumes = string_list(doc.get("consumes"));
    let produces = string_list(doc.get("produces"));
    let global_params = doc.get("parameters").cloned().unwrap_or(Value::Null);

    // security schemes
    if let Some(Value::Object(defs)) = doc.get("securityDefinitions") {
        let mut schemes = Map::new();
        for (name, d) in defs {
            schemes.insert(name.clone(), convert_security(d));
        }
        let comps = doc
            .entry("components")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| LoadError::invalid("/components", "must be an object"))?;
        comps.insert("securitySchemes".into(), Value::Object(schemes));
    }

    let global_produces = produces.clone();
    if let Some(Value::Object(responses)) = doc.get_mut("responses") {
        convert_responses(responses, global_produces.as_ref());
    }
    if let Some(Value::Object(paths)) = doc.get_mut("paths") {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            let path_params = item.remove("parameters");
            for (method, op) in item.iter_mut() {
                if !super::model::METHODS.contains(&method.as_str()) {
                    continue;
                }
                let ptr = format!("/paths/{}/{method}", escape(path));
                let Some(op) = op.as_object_mut() else {
                    return Err(LoadError::invalid(&ptr, "an operation must be an object"));
                };
                let op_consumes = string_list(op.get("consumes")).or_else(|| consumes.clone());
                let op_produces = string_list(op.get("produces")).or_else(|| produces.clone());
                // merge path-level then operation-level parameters (operation wins)
                let mut params: Vec<Value> = Vec::new();
                for list in [path_params.as_ref(), op.get("parameters")] {
                    if let Some(Value::Array(a)) = list {
                        for p in a {
                            let p = deref_local(p, &global_params);
                            let key = (p.get("name").cloned(), p.get("in").cloned());
                            params
                                .retain(|q| (q.get("name").cloned(), q.get("in").cloned()) != key);
                            params.push(p);
                        }
                    }
                }
                convert_operation(op, params, op_consumes, op_produces, &ptr)?;
            }
        }
    }
    doc.insert("openapi".into(), json!("3.0.0"));
    doc.remove("swagger");
    Ok(())
}

fn escape(seg: &str) -> String {
    seg.replace('~', "~0").replace('/', "~1")
}

fn string_list(v: Option<&Value>) -> Option<Vec<String>> {
    let a = v?.as_array()?;
    let l: Vec<String> = a
        .iter()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    (!l.is_empty()).then_some(l)
}

/// Follows a `#/parameters/X` reference of a 2.0 document.
fn deref_local(p: &Value, global: &Value) -> Value {
    if let Some(r) = p.get("$ref").and_then(Value::as_str)
        && let Some(name) = r.strip_prefix("#/parameters/")
        && let Some(t) = global.get(name.replace("~1", "/").replace("~0", "~"))
    {
        return t.clone();
    }
    p.clone()
}

fn convert_security(d: &Value) -> Value {
    match d.get("type").and_then(Value::as_str) {
        Some("basic") => json!({"type": "http", "scheme": "basic"}),
        Some("apiKey") => json!({"type": "apiKey", "name": d.get("name"), "in": d.get("in")}),
        Some("oauth2") => {
            let scopes = d.get("scopes").cloned().unwrap_or_else(|| json!({}));
            let (flow, body) = match d.get("flow").and_then(Value::as_str) {
                Some("application") => (
                    "clientCredentials",
                    json!({"tokenUrl": d.get("tokenUrl"), "scopes": scopes}),
                ),
                Some("password") => (
                    "password",
                    json!({"tokenUrl": d.get("tokenUrl"), "scopes": scopes}),
                ),
                Some("accessCode") => (
                    "authorizationCode",
                    json!({"authorizationUrl": d.get("authorizationUrl"),
                           "tokenUrl": d.get("tokenUrl"), "scopes": scopes}),
                ),
                _ => (
                    "implicit",
                    json!({"authorizationUrl": d.get("authorizationUrl"), "scopes": scopes}),
                ),
            };
            json!({"type": "oauth2", "flows": {flow: body}})
        }
        _ => d.clone(),
    }
}

/// The schema part of a 2.0 non-body parameter (type, format, items, enum, limits).
fn param_schema(p: &Map<String, Value>) -> Value {
    let mut s = Map::new();
    for (k, v) in p {
        match k.as_str() {
            "name" | "in" | "description" | "required" | "collectionFormat" | "allowEmptyValue" => {
            }
            "type" if v == "file" => {
                s.insert("type".into(), json!("string"));
                s.insert("format".into(), json!("binary"));
            }
            _ if k.starts_with("x-") && k != "x-nullable" => {}
            _ => {
                s.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(s)
}

fn convert_operation(
    op: &mut Map<String, Value>,
    params: Vec<Value>,
    consumes: Option<Vec<String>>,
    produces: Option<Vec<String>>,
    ptr: &str,
) -> Result<(), LoadError> {
    let mut out_params = Vec::new();
    let mut body: Option<Value> = None;
    let mut form_props = Map::new();
    let mut form_required = Vec::new();
    let mut has_file = false;
    let consumes = consumes.unwrap_or_else(|| vec!["application/json".into()]);
    for (i, p) in params.into_iter().enumerate() {
        let Value::Object(p) = p else {
            return Err(LoadError::invalid(
                &format!("{ptr}/parameters/{i}"),
                "a parameter must be an object",
            ));
        };
        if p.contains_key("$ref") {
            // a reference we could not follow here (another document): the model will
            out_params.push(Value::Object(p));
            continue;
        }
        let location = p.get("in").and_then(Value::as_str).unwrap_or("");
        match location {
            "body" => {
                let schema = p.get("schema").cloned().unwrap_or_else(|| json!({}));
                let content: Map<String, Value> = consumes
                    .iter()
                    .map(|ct| (ct.clone(), json!({"schema": schema.clone()})))
                    .collect();
                let mut b = json!({"content": content,
                                   "required": p.get("required").cloned().unwrap_or(json!(false))});
                if let Some(d) = p.get("description") {
                    b["description"] = d.clone();
                }
                body = Some(b);
            }
            "formData" => {
                let name = p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                if p.get("type").and_then(Value::as_str) == Some("file") {
                    has_file = true;
                }
                let mut s = param_schema(&p);
                if let Some(d) = p.get("description") {
                    s["description"] = d.clone();
                }
                if p.get("required").and_then(Value::as_bool) == Some(true) {
                    form_required.push(json!(name));
                }
                form_props.insert(name, s);
            }
            _ => {
                let mut q = Map::new();
                for k in ["name", "in", "description", "required"] {
                    if let Some(v) = p.get(k) {
                        q.insert(k.into(), v.clone());
                    }
                }
                if let Some(cf) = p.get("collectionFormat").and_then(Value::as_str) {
                    let (style, explode) = match cf {
                        "multi" => ("form", true),
                        "ssv" => ("spaceDelimited", false),
                        "pipes" => ("pipeDelimited", false),
                        _ if location == "query" || location == "formData" => ("form", false),
                        _ => ("simple", false),
                    };
                    q.insert("style".into(), json!(style));
                    q.insert("explode".into(), json!(explode));
                } else if p.get("type").and_then(Value::as_str) == Some("array")
                    && location == "query"
                {
                    // 2.0's default collectionFormat is csv
                    q.insert("style".into(), json!("form"));
                    q.insert("explode".into(), json!(false));
                }
                q.insert("schema".into(), param_schema(&p));
                out_params.push(Value::Object(q));
            }
        }
    }
    if !form_props.is_empty() {
        let ct = if has_file || consumes.iter().any(|c| c.starts_with("multipart/")) {
            "multipart/form-data"
        } else {
            "application/x-www-form-urlencoded"
        };
        let mut schema = json!({"type": "object", "properties": form_props});
        if !form_required.is_empty() {
            schema["required"] = Value::Array(form_required);
        }
        let required = schema.get("required").is_some();
        body = Some(json!({"content": {ct: {"schema": schema}}, "required": required}));
    }
    op.insert("parameters".into(), Value::Array(out_params));
    if let Some(b) = body {
        op.insert("requestBody".into(), b);
    }
    if let Some(Value::Object(responses)) = op.get_mut("responses") {
        convert_responses(responses, produces.as_ref());
    }
    op.remove("consumes");
    op.remove("produces");
    Ok(())
}

/// 2.0 responses carry `schema` directly; 3.x puts it under a media type.
fn convert_responses(responses: &mut Map<String, Value>, produces: Option<&Vec<String>>) {
    let ct = produces
        .and_then(|p| p.iter().find(|c| c.contains("json")).or(p.first()))
        .cloned()
        .unwrap_or_else(|| "application/json".into());
    for (_code, r) in responses.iter_mut() {
        if let Some(r) = r.as_object_mut()
            && let Some(schema) = r.remove("schema")
        {
            r.insert("content".into(), json!({ct.clone(): {"schema": schema}}));
        }
    }
}

/// Valid JSON Schema type names.
const TYPES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// Rewrites one schema node's own keywords (not its children) into 2020-12 form.
/// `input` marks schemas of tool arguments: binary strings become base64 text.
pub(super) fn normalize_schema_node(m: &mut Map<String, Value>, input: bool) {
    // type: file (2.0) and invalid type names
    match m.get("type") {
        Some(Value::String(t)) if t == "file" => {
            m.insert("type".into(), json!("string"));
            m.insert("format".into(), json!("binary"));
        }
        Some(Value::String(t)) if !TYPES.contains(&t.as_str()) => {
            m.remove("type");
        }
        Some(Value::Array(a)) => {
            let mut kept: Vec<Value> = Vec::with_capacity(a.len());
            for t in a {
                if t.as_str().is_some_and(|t| TYPES.contains(&t)) && !kept.contains(t) {
                    kept.push(t.clone());
                }
            }
            if kept.is_empty() {
                m.remove("type");
            } else {
                m.insert("type".into(), Value::Array(kept));
            }
        }
        Some(Value::String(_)) | None => {}
        Some(_) => {
            m.remove("type");
        }
    }
    let nullable = m
        .remove("nullable")
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
        | m.remove("x-nullable")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
    if nullable {
        match m.get_mut("type") {
            Some(Value::String(t)) => {
                let t = t.clone();
                m.insert("type".into(), json!([t, "null"]));
            }
            Some(Value::Array(a)) if !a.iter().any(|t| t == "null") => a.push(json!("null")),
            _ => {}
        }
        if let Some(Value::Array(e)) = m.get_mut("enum")
            && !e.contains(&Value::Null)
        {
            e.push(Value::Null);
        }
    }
    for (ex, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(Value::Bool(b)) = m.get(ex).cloned() {
            m.remove(ex);
            if b && let Some(v) = m.remove(bound) {
                m.insert(ex.into(), v);
            }
        }
    }
    if let Some(Value::Array(items)) = m.get("items").cloned() {
        m.remove("items");
        m.insert("prefixItems".into(), Value::Array(items));
    }
    match m.get_mut("required") {
        Some(Value::Array(r)) => {
            // 2020-12 wants unique strings
            let mut seen = Vec::with_capacity(r.len());
            r.retain(|x| {
                x.is_string() && !seen.contains(x) && {
                    seen.push(x.clone());
                    true
                }
            });
        }
        Some(_) => {
            m.remove("required");
        }
        None => {}
    }
    if m.get("enum").is_some_and(|e| !e.is_array()) {
        m.remove("enum");
    }
    if m.get("properties").is_some_and(|p| !p.is_object()) {
        m.remove("properties");
    }
    // keywords that cost tokens and carry nothing for a caller
    m.retain(|k, _| {
        !(k.starts_with("x-")
            || matches!(
                k.as_str(),
                "xml"
                    | "externalDocs"
                    | "discriminator"
                    | "$defs"
                    | "definitions"
                    | "$id"
                    | "$schema"
                    | "$anchor"
                    | "$dynamicAnchor"
                    | "$dynamicRef"
                    | "$recursiveAnchor"
                    | "$recursiveRef"
            ))
    });
    if input
        && m.get("format").and_then(Value::as_str) == Some("binary")
        && m.get("type").is_none_or(|t| t == "string")
    {
        m.insert("type".into(), json!("string"));
        m.insert("contentEncoding".into(), json!("base64"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_and_exclusive_bounds() {
        let mut m = json!({"type": "integer", "nullable": true, "minimum": 3,
                           "exclusiveMinimum": true, "enum": [1, 2]})
        .as_object()
        .unwrap()
        .clone();
        normalize_schema_node(&mut m, false);
        assert_eq!(
            Value::Object(m),
            json!({"type": ["integer", "null"], "exclusiveMinimum": 3, "enum": [1, 2, null]})
        );
    }
}
