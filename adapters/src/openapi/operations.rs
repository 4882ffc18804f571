//! The model built from the normalized (3.x-shaped) root document: every operation
//! with its parameters, body, output schema, servers and security, and the security
//! schemes. A problem confined to one operation skips that operation with a reason; a
//! problem with the document as a whole is a [`LoadError`] with its JSON pointer.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::lenient;
use super::load::{Documents, LoadError};
use super::media::{output_schema, request_body};
use super::model::*;
use super::pathkey::{self, PathKey};
use super::refs::{Direction, Inliner, Refs};

/// Reference depth and size budget of input schemas (they must stay complete).
const INPUT_REF_DEPTH: usize = 8;
const INPUT_BUDGET: usize = 1_000;
/// Output schemas are informative only: kept shallow and small.
const OUTPUT_REF_DEPTH: usize = 2;
const OUTPUT_BUDGET: usize = 400;

fn str_of(m: &Map<String, Value>, k: &str) -> Option<String> {
    m.get(k).and_then(Value::as_str).map(str::to_owned)
}

fn escape(seg: &str) -> String {
    seg.replace('~', "~0").replace('/', "~1")
}

/// Builds the model from the (normalized) root document.
pub(super) fn build(docs: &Documents) -> Result<Api, LoadError> {
    let refs = Refs { docs };
    let root = docs.docs[0]
        .root
        .as_object()
        .ok_or_else(|| LoadError::invalid("", "not an object"))?;
    let root_servers = servers(root.get("servers"), "/servers")?;
    let mut api = Api {
        servers: root_servers.clone(),
        ..Api::default()
    };
    let root_security = security(root.get("security"), "/security")?;
    if let Some(Value::Object(schemes)) = root
        .get("components")
        .and_then(|c| c.get("securitySchemes"))
    {
        for (name, s) in schemes {
            let (_, s) = refs.deref(0, s).map_err(|e| {
                LoadError::invalid(&format!("/components/securitySchemes/{}", escape(name)), e)
            })?;
            api.security_schemes.insert(name.clone(), scheme(s));
        }
    }
    let mut input = Inliner::new(docs, Direction::Input, INPUT_REF_DEPTH, INPUT_BUDGET);
    let mut output = Inliner::new(docs, Direction::Output, OUTPUT_REF_DEPTH, OUTPUT_BUDGET);
    let Some(paths) = root.get("paths") else {
        return Ok(api);
    };
    let paths = paths
        .as_object()
        .ok_or_else(|| LoadError::invalid("/paths", "must be an object"))?;
    for (path, item) in paths {
        let item_ptr = format!("/paths/{}", escape(path));
        let (idoc, item) = refs
            .deref(0, item)
            .map_err(|e| LoadError::invalid(&item_ptr, e))?;
        let item = item
            .as_object()
            .ok_or_else(|| LoadError::invalid(&item_ptr, "a path item must be an object"))?;
        let item_servers = servers(item.get("servers"), &format!("{item_ptr}/servers"))?;
        for (method, op, ptr) in operations_of(item, &item_ptr) {
            let method = method.as_str();
            let op = match op {
                Ok(op) => op,
                Err(reason) => {
                    let label = format!("{} {path}", method.to_uppercase());
                    api.skipped.push((label, format!("{ptr}: {reason}")));
                    continue;
                }
            };
            let op = op
                .as_object()
                .ok_or_else(|| LoadError::invalid(&ptr, "an operation must be an object"))?;
            let label = str_of(op, "operationId")
                .unwrap_or_else(|| format!("{} {path}", method.to_uppercase()));
            let mut srv = servers(op.get("servers"), &format!("{ptr}/servers"))?;
            if srv.is_empty() {
                srv = item_servers.clone();
            }
            if srv.is_empty() {
                srv = root_servers.clone();
            }
            let sec = security(op.get("security"), &format!("{ptr}/security"))?
                .or_else(|| root_security.clone());
            let ctx = OpCtx {
                refs: &refs,
                doc: idoc,
                ptr: &ptr,
                input: &mut input,
                output: &mut output,
            };
            match operation(ctx, method, path, item, op) {
                Ok(mut o) => {
                    o.servers = srv;
                    o.scopes = sec.as_ref().map(Security::scopes).unwrap_or_default();
                    o.security = sec.map(Security::names);
                    api.operations.push(o);
                }
                Err(reason) => api.skipped.push((label, reason)),
            }
        }
    }
    api.cuts = input.cuts + output.cuts;
    Ok(api)
}

fn scheme(s: &Value) -> SecurityScheme {
    let get = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match get("type").as_str() {
        "apiKey" => {
            let location = match get("in").as_str() {
                "query" => Location::Query,
                "cookie" => Location::Cookie,
                _ => Location::Header,
            };
            SecurityScheme::ApiKey {
                name: get("name"),
                location,
            }
        }
        "http" => SecurityScheme::Http {
            scheme: get("scheme").to_ascii_lowercase(),
        },
        "oauth2" => {
            let url = |pointer: &str| {
                s.pointer(pointer)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            // A flow without both of its URLs cannot be followed: as if it were absent.
            let authorization_code = match (
                url("/flows/authorizationCode/authorizationUrl"),
                url("/flows/authorizationCode/tokenUrl"),
            ) {
                (Some(authorization_url), Some(token_url)) => Some(CodeFlowUrls {
                    authorization_url,
                    token_url,
                    refresh_url: url("/flows/authorizationCode/refreshUrl"),
                }),
                _ => None,
            };
            SecurityScheme::OAuth2 {
                token_url: url("/flows/clientCredentials/tokenUrl"),
                authorization_code,
            }
        }
        other => SecurityScheme::Other(other.to_owned()),
    }
}

fn servers(v: Option<&Value>, ptr: &str) -> Result<Vec<String>, LoadError> {
    let Some(v) = v else { return Ok(vec![]) };
    let list = v
        .as_array()
        .ok_or_else(|| LoadError::invalid(ptr, "must be an array"))?;
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let Some(url) = s.get("url").and_then(Value::as_str) else {
            return Err(LoadError::invalid(
                &format!("{ptr}/{i}/url"),
                "a server needs a string url",
            ));
        };
        let mut url = url.to_owned();
        if let Some(Value::Object(vars)) = s.get("variables") {
            for (name, var) in vars {
                let default = match var.get("default") {
                    Some(Value::String(d)) => d.clone(),
                    Some(other) => other.to_string(),
                    None => continue,
                };
                url = url.replace(&format!("{{{name}}}"), &default);
            }
        }
        out.push(url);
    }
    Ok(out)
}

/// Security requirements as declared: alternatives, each of schemes with the scopes
/// it names for them.
#[derive(Clone)]
struct Security(Vec<Vec<(String, Vec<String>)>>);

impl Security {
    /// The alternatives' scheme names.
    fn names(self) -> Vec<Vec<String>> {
        self.0
            .into_iter()
            .map(|alt| alt.into_iter().map(|(name, _)| name).collect())
            .collect()
    }

    /// Per scheme, the scopes of every alternative together.
    fn scopes(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, scopes) in self.0.iter().flatten() {
            out.entry(name.clone())
                .or_default()
                .extend(scopes.iter().cloned());
        }
        out
    }
}

fn security(v: Option<&Value>, ptr: &str) -> Result<Option<Security>, LoadError> {
    let Some(v) = v else { return Ok(None) };
    let list = v
        .as_array()
        .ok_or_else(|| LoadError::invalid(ptr, "must be an array"))?;
    let mut out = Vec::new();
    for (i, req) in list.iter().enumerate() {
        let req = req
            .as_object()
            .ok_or_else(|| LoadError::invalid(&format!("{ptr}/{i}"), "must be an object"))?;
        // Scopes are informative (what to ask a user's consent for): a malformed
        // list is read as none rather than refusing the spec.
        out.push(
            req.iter()
                .map(|(name, scopes)| {
                    let scopes = scopes
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .filter(|s| !s.is_empty())
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default();
                    (name.clone(), scopes)
                })
                .collect(),
        );
    }
    Ok(Some(Security(out)))
}

struct OpCtx<'r, 'a> {
    refs: &'r Refs<'a>,
    doc: usize,
    ptr: &'r str,
    input: &'r mut Inliner<'a>,
    output: &'r mut Inliner<'a>,
}

/// One operation of the model, from its path item and its own object (servers and
/// security are set by the caller); `Err` skips it with the reason.
fn operation<'a>(
    ctx: OpCtx<'_, 'a>,
    method: &str,
    path: &str,
    item: &'a Map<String, Value>,
    op: &'a Map<String, Value>,
) -> Result<Operation, String> {
    let OpCtx {
        refs,
        doc,
        ptr,
        input,
        output,
    } = ctx;
    // notes of an operation skipped part-way are not this one's
    input.notes.clear();
    let mut parameters = Vec::new();
    for (pdoc, p, pptr) in declared_parameters(refs, doc, ptr, item, op)? {
        if let Some(parameter) = parameter(input, pdoc, p, &pptr)? {
            parameters.push(parameter);
        }
    }
    let mut target = pathkey::split(path);
    complete_from_target(&mut target, &mut parameters);
    let mut body = match op.get("requestBody") {
        Some(b) => {
            request_body(refs, doc, b, input).map_err(|e| format!("{ptr}/requestBody: {e}"))?
        }
        None => None,
    };
    let repairs = relax_inputs(input, &mut parameters, &mut body);
    let output_schema = match op.get("responses") {
        Some(r) => output_schema(refs, doc, r, output),
        None => None,
    };
    Ok(Operation {
        method: method.to_uppercase(),
        path: path.to_owned(),
        target,
        operation_id: str_of(op, "operationId"),
        summary: str_of(op, "summary"),
        description: str_of(op, "description"),
        tags: op
            .get("tags")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        deprecated: op.get("deprecated").and_then(Value::as_bool) == Some(true),
        parameters,
        body,
        output_schema,
        servers: Vec::new(),
        security: None,
        scopes: Default::default(),
        repairs,
    })
}

/// A parameter object (dereferenced) with the document it is in and its JSON pointer.
type Declared<'a> = (usize, &'a Map<String, Value>, String);

/// An operation's parameter objects (dereferenced, with their document and pointer):
/// the path item's first, overridden by the operation's own of the same (name, in).
fn declared_parameters<'a>(
    refs: &Refs<'a>,
    doc: usize,
    ptr: &str,
    item: &'a Map<String, Value>,
    op: &'a Map<String, Value>,
) -> Result<Vec<Declared<'a>>, String> {
    let mut raw: Vec<Declared<'a>> = Vec::new();
    for (list, lptr) in [
        (
            item.get("parameters"),
            ptr.rsplit_once('/').map(|x| x.0).unwrap_or(ptr).to_owned() + "/parameters",
        ),
        (op.get("parameters"), format!("{ptr}/parameters")),
    ] {
        let Some(list) = list else { continue };
        let list = list
            .as_array()
            .ok_or_else(|| format!("{lptr} must be an array"))?;
        for (i, p) in list.iter().enumerate() {
            let (pdoc, p) = refs.deref(doc, p).map_err(|e| format!("{lptr}/{i}: {e}"))?;
            let p = p
                .as_object()
                .ok_or_else(|| format!("{lptr}/{i} must be an object"))?;
            let key = (str_of(p, "name"), str_of(p, "in"));
            raw.retain(|(_, q, _)| (str_of(q, "name"), str_of(q, "in")) != key);
            raw.push((pdoc, p, format!("{lptr}/{i}")));
        }
    }
    Ok(raw)
}

/// One parameter of the model from its object `p` (at `pptr` in document `pdoc`), its
/// schema inlined; `None` for a header the caller may not set.
fn parameter<'a>(
    input: &mut Inliner<'a>,
    pdoc: usize,
    p: &'a Map<String, Value>,
    pptr: &str,
) -> Result<Option<Parameter>, String> {
    let name = str_of(p, "name").ok_or_else(|| format!("{pptr}: parameter without a name"))?;
    let whole_query = p.get("in").and_then(Value::as_str) == Some("querystring");
    let location = parameter_location(p, pptr, &name)?;
    if location == Location::Header && !caller_may_set_header(&name) {
        return Ok(None);
    }
    let (schema_src, json_content) = match (p.get("schema"), p.get("content")) {
        (Some(s), _) => (Some(s), false),
        (None, Some(Value::Object(c))) => match c.iter().next() {
            Some((mt, m)) => (m.get("schema"), mt.contains("json") && !whole_query),
            None => (None, false),
        },
        _ => (None, false),
    };
    let mut schema = match schema_src {
        Some(s) => input.schema(pdoc, s).map_err(|e| format!("{pptr}: {e}"))?,
        None => serde_json::json!({"type": "string"}),
    };
    let description = str_of(p, "description").filter(|d| !d.trim().is_empty());
    if let (Some(d), Value::Object(m)) = (&description, &mut schema)
        && !m.contains_key("description")
    {
        m.insert("description".into(), Value::String(d.trim().to_owned()));
    }
    let default_style = match location {
        Location::Path | Location::Header => Style::Simple,
        Location::Query | Location::Cookie => Style::Form,
    };
    let style = p
        .get("style")
        .and_then(Value::as_str)
        .and_then(Style::parse)
        .filter(|_| !whole_query)
        .unwrap_or(default_style);
    let explode = whole_query
        || p.get("explode")
            .and_then(Value::as_bool)
            .unwrap_or(style == Style::Form);
    Ok(Some(Parameter {
        required: location == Location::Path
            || p.get("required").and_then(Value::as_bool) == Some(true),
        name,
        location,
        schema,
        style,
        explode,
        allow_reserved: p.get("allowReserved").and_then(Value::as_bool) == Some(true),
        json_content,
    }))
}

/// Where parameter `name` (object `p`, at `pptr`) is sent, or why it cannot be.
fn parameter_location(p: &Map<String, Value>, pptr: &str, name: &str) -> Result<Location, String> {
    match p.get("in").and_then(Value::as_str) {
        Some("path") => Ok(Location::Path),
        Some("query") => Ok(Location::Query),
        Some("header") => Ok(Location::Header),
        Some("cookie") => Ok(Location::Cookie),
        // OpenAPI 3.2: the whole query string as one parameter. In its form media
        // type it is an object whose members are the query's pairs: a form-style,
        // exploded query parameter sends exactly that.
        Some("querystring") => {
            let form = p
                .get("content")
                .and_then(Value::as_object)
                .and_then(|c| c.keys().next())
                .is_none_or(|mt| mt == "application/x-www-form-urlencoded");
            if !form {
                return Err(format!(
                    "{pptr}: parameter '{name}' sends the query string in a media type \
                     other than application/x-www-form-urlencoded, which is not supported"
                ));
            }
            Ok(Location::Query)
        }
        other => Err(format!(
            "{pptr}: parameter '{name}' has unsupported location {other:?}"
        )),
    }
}

/// Brings the parameters in line with the path key `target`: its extended templates
/// made plain (their values keep their slashes), its query templates made query
/// parameters, and a string path parameter for each template variable none declares.
fn complete_from_target(target: &mut PathKey, parameters: &mut Vec<Parameter>) {
    let multi_segment = plain_path_templates(target);
    query_templates_become_parameters(target, parameters);
    // path template variables without a declared parameter still need a value
    for var in template_vars(&target.path) {
        if !parameters
            .iter()
            .any(|p| p.location == Location::Path && p.name == var)
        {
            parameters.push(Parameter {
                name: var.to_owned(),
                location: Location::Path,
                required: true,
                schema: serde_json::json!({"type": "string"}),
                style: Style::Simple,
                explode: false,
                allow_reserved: false,
                json_content: false,
            });
        }
    }
    for p in parameters {
        if p.location == Location::Path && multi_segment.contains(&p.name) {
            p.allow_reserved = true;
        }
    }
}

/// Relaxes the input schemas (parameters', then the body's) where the validator would
/// refuse what the spec evidently means; the repairs made, after the notes of
/// dynamic references cut or unresolved while inlining them.
fn relax_inputs(
    input: &mut Inliner<'_>,
    parameters: &mut [Parameter],
    body: &mut Option<Body>,
) -> Vec<String> {
    // dynamic references cut or unresolved while inlining this operation's inputs
    let mut repairs = std::mem::take(&mut input.notes);
    for p in parameters {
        let at = format!("parameter '{}'", p.name);
        lenient::relax(&mut p.schema, &at, &mut repairs);
    }
    if let Some(b) = body {
        repairs.append(&mut b.repairs);
        lenient::relax(&mut b.schema, "request body", &mut repairs);
    }
    repairs
}

/// Whether a header parameter is the caller's to set. OpenAPI says `Accept`,
/// `Content-Type` and `Authorization` parameters are ignored (content negotiation and
/// auth set them); the gateway also keeps for itself the headers that route and frame
/// the request (`Host` would steer it to another virtual host behind the same
/// address, the length and transfer headers would reframe it) and the hop-by-hop ones.
fn caller_may_set_header(name: &str) -> bool {
    const GATEWAY_OWNED: [&str; 14] = [
        "accept",
        "content-type",
        "authorization",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
    ];
    !GATEWAY_OWNED.contains(&name.to_ascii_lowercase().as_str())
}

/// A path item's operations with their JSON pointers: the fixed methods (OpenAPI 3.2
/// adds `query`, HTTP's QUERY: a safe GET with a body) and 3.2's `additionalOperations`,
/// any other method by its name as sent (`COPY`, `LOCK`). A name that is not an HTTP
/// method token, and `CONNECT`, are left out with an error entry, never sent.
fn operations_of<'a>(
    item: &'a Map<String, Value>,
    item_ptr: &str,
) -> Vec<(String, Result<&'a Value, String>, String)> {
    let mut out: Vec<(String, Result<&'a Value, String>, String)> = METHODS
        .iter()
        .filter_map(|m| Some((m.to_string(), Ok(item.get(*m)?), format!("{item_ptr}/{m}"))))
        .collect();
    if let Some(Value::Object(more)) = item.get("additionalOperations") {
        for (method, op) in more {
            let ptr = format!("{item_ptr}/additionalOperations/{}", escape(method));
            let known = METHODS.contains(&method.to_ascii_lowercase().as_str());
            let token = http::Method::from_bytes(method.as_bytes()).is_ok();
            let op = match (known, token) {
                // A tunnel to somewhere the request names: not an operation of the
                // API, and not a request the gateway relays.
                _ if method.eq_ignore_ascii_case("connect") => Err(format!(
                    "'{method}' opens a tunnel rather than calling the API; it is not offered"
                )),
                (false, true) => Ok(op),
                (true, _) => Err(format!(
                    "'{method}' belongs in the path item itself, not in additionalOperations"
                )),
                (false, false) => Err(format!("'{method}' is not an HTTP method name")),
            };
            out.push((method.to_ascii_lowercase(), op, ptr));
        }
    }
    out
}

/// Path templates beyond OpenAPI's plain `{name}`, as specs converted from other API
/// descriptions carry them: RFC 6570's reserved expansion `{+name}` and Google's
/// `{name=projects/*/locations/*}` both stand for a value that spans segments, slashes
/// sent as they are. Each becomes `{name}`; the names returned are those whose values
/// keep their slashes (a `.` or `..` segment in them is still refused when sent).
fn plain_path_templates(target: &mut PathKey) -> Vec<String> {
    let mut multi_segment = Vec::new();
    let vars: Vec<String> = template_vars(&target.path)
        .into_iter()
        .map(str::to_owned)
        .collect();
    for var in vars {
        let name = var.strip_prefix('+').unwrap_or(&var);
        let name = name.split_once('=').map_or(name, |(name, _)| name);
        if name == var || name.is_empty() {
            continue;
        }
        target.path = target
            .path
            .replace(&format!("{{{var}}}"), &format!("{{{name}}}"));
        multi_segment.push(name.to_owned());
    }
    multi_segment
}

/// A path key's query value that is a whole template (`/search?q={q}`,
/// `/things/{id}?api-version={api-version}`) names an argument, not a constant: sent
/// as it stands, the API would get the braces. Each becomes a query parameter under
/// the key's name, required since the key always sends it: the one declared under the
/// template's name (specs often declare it `in: path`, having seen it in the key) or,
/// when none is, a string. A template that is also in the path proper stays a constant.
fn query_templates_become_parameters(target: &mut PathKey, parameters: &mut Vec<Parameter>) {
    let in_path: Vec<String> = template_vars(&target.path)
        .into_iter()
        .map(str::to_owned)
        .collect();
    target.query.retain(|(key, value)| {
        let Some(var) = value
            .as_deref()
            .and_then(|v| v.strip_prefix('{'))
            .and_then(|v| v.strip_suffix('}'))
            .filter(|v| !v.is_empty() && !v.contains(['{', '}']))
        else {
            return true;
        };
        if in_path.iter().any(|p| p == var) {
            return true;
        }
        let declared = parameters
            .iter()
            .position(|p| p.name == var && matches!(p.location, Location::Path | Location::Query));
        match declared {
            Some(at) => {
                let p = &mut parameters[at];
                if p.location == Location::Path {
                    p.style = Style::Form;
                    p.explode = true;
                }
                p.name = key.clone();
                p.location = Location::Query;
                p.required = true;
            }
            None if parameters
                .iter()
                .any(|p| p.name == *key && p.location == Location::Query) => {}
            None => parameters.push(Parameter {
                name: key.clone(),
                location: Location::Query,
                required: true,
                schema: serde_json::json!({"type": "string"}),
                style: Style::Form,
                explode: true,
                allow_reserved: false,
                json_content: false,
            }),
        }
        false
    });
}
