//! The MCP server features besides tools, answered from every upstream for one
//! caller, by every MCP surface alike: `prompts/list`, `prompts/get`,
//! `resources/list`, `resources/templates/list`, `resources/read`,
//! `resources/subscribe`, `resources/unsubscribe` and `completion/complete`.
//!
//! Lists come from the catalog snapshot (see [`crate::catalog::offerings`]), filtered by the
//! caller's allowed set and paginated with our own cursors across upstreams. A
//! request about one item is resolved to its upstream and the upstream's own name or
//! URI, checked against the policy, and forwarded; URIs in the answer are rewritten
//! back to the client's form. A prompt or resource the tenant may not use gets exactly
//! the answer of one that does not exist.

use serde_json::{Map, Value, json};
use toolgate_adapters::{CallContext, RpcError};

use crate::access::{Caller, View};
use crate::catalog::offerings;
use crate::errors::{self, McpFailure};
use crate::gateway::Gateway;
use crate::policy::{Item, Method};

use toolgate_adapters::codes::INVALID_PARAMS;
use toolgate_adapters::codes::METHOD_NOT_FOUND;
use toolgate_adapters::codes::RESOURCE_NOT_FOUND;

/// The methods answered here.
pub fn is_feature(method: &str) -> bool {
    matches!(
        method,
        "prompts/list"
            | "prompts/get"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "completion/complete"
    )
}

/// The list methods (their 2026-07-28 results carry cache hints).
pub fn is_list(method: &str) -> bool {
    matches!(
        method,
        "prompts/list" | "resources/list" | "resources/templates/list"
    )
}

/// Answers `method` for `caller`: the raw result, or the JSON-RPC error.
pub async fn answer(
    gateway: &Gateway,
    caller: &Caller,
    method: &str,
    params: Value,
    ctx: CallContext,
) -> Result<Value, RpcError> {
    let Value::Object(params) = params else {
        return Err(invalid(format!("{method}: params must be an object")));
    };
    let view = View::of(gateway, caller);
    let snapshot = view.catalog.offerings();
    let page_size = gateway.config().sessions.list_page_size;
    match method {
        "prompts/list" => {
            let items = snapshot
                .prompts
                .entries()
                .iter()
                .filter(|e| view.permits(caller, Item::Prompt(&e.name), Method::List))
                .map(|e| e.exposed());
            list(items, &params, "prompts", page_size)
        }
        "resources/list" => {
            let items = snapshot
                .resources
                .iter()
                .filter(|r| view.permits(caller, Item::Resource(&r.name), Method::List))
                .map(|r| &r.definition);
            list(items, &params, "resources", page_size)
        }
        "resources/templates/list" => {
            let items = snapshot
                .templates
                .iter()
                .filter(|t| view.permits(caller, Item::Template(&t.name), Method::List))
                .map(|t| &t.definition);
            list(items, &params, "resourceTemplates", page_size)
        }
        "prompts/get" => {
            let name = string_param(&params, "name", method)?;
            let entry = snapshot
                .prompts
                .get(name)
                .filter(|e| view.permits(caller, Item::Prompt(&e.name), Method::Use))
                .ok_or_else(|| unknown_prompt(name))?;
            let (upstream, original) = (entry.upstream.clone(), entry.original.clone());
            let mut forwarded = params;
            forwarded.insert("name".into(), Value::String(original));
            let mut result = forward(gateway, &upstream, method, forwarded, ctx).await?;
            offerings::rewrite_prompt_result(&mut result, snapshot.namespace(&upstream), &upstream);
            Ok(result)
        }
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            let uri = string_param(&params, "uri", method)?;
            let wanted = match method {
                "resources/read" => Method::Use,
                _ => Method::Subscribe,
            };
            let target = snapshot
                .resolve_uri(uri)
                .filter(|t| view.permits(caller, Item::Resource(&t.name), wanted))
                .ok_or_else(|| unknown_resource(uri))?;
            if method != "resources/read" && !snapshot.subscribable(&target.upstream) {
                return Err(RpcError {
                    code: METHOD_NOT_FOUND,
                    message: format!(
                        "{method}: the server of '{uri}' does not offer subscriptions"
                    ),
                    data: None,
                });
            }
            let mut forwarded = params;
            forwarded.insert("uri".into(), Value::String(target.original));
            let mut result = forward(gateway, &target.upstream, method, forwarded, ctx).await?;
            if method == "resources/read" {
                offerings::rewrite_read_result(
                    &mut result,
                    snapshot.namespace(&target.upstream),
                    &target.upstream,
                );
            }
            Ok(result)
        }
        "completion/complete" => complete(gateway, caller, &view, params, ctx).await,
        other => Err(RpcError {
            code: METHOD_NOT_FOUND,
            message: format!("method not found: {other}"),
            data: None,
        }),
    }
}

/// The upstream and policy name behind a client's resource URI, when `caller` may
/// read it; otherwise the answer for a resource that does not exist.
pub fn resolve_resource(
    gateway: &Gateway,
    caller: &Caller,
    uri: &str,
) -> Result<offerings::UriTarget, RpcError> {
    let view = View::of(gateway, caller);
    view.catalog
        .offerings()
        .resolve_uri(uri)
        .filter(|t| view.permits(caller, Item::Resource(&t.name), Method::Use))
        .ok_or_else(|| unknown_resource(uri))
}

/// `completion/complete`: the reference (a prompt by name, a template by its URI
/// template) resolved like the item itself.
async fn complete(
    gateway: &Gateway,
    caller: &Caller,
    view: &View,
    mut params: Map<String, Value>,
    ctx: CallContext,
) -> Result<Value, RpcError> {
    let snapshot = view.catalog.offerings();
    let reference = params
        .get_mut("ref")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| invalid("completion/complete needs a `ref` object".into()))?;
    let kind = reference.get("type").and_then(Value::as_str).unwrap_or("");
    let upstream = match kind {
        "ref/prompt" => {
            let name = string_param(reference, "name", "completion/complete")?;
            let entry = snapshot
                .prompts
                .get(name)
                .filter(|e| view.permits(caller, Item::Prompt(&e.name), Method::Complete))
                .ok_or_else(|| unknown_prompt(name))?;
            let upstream = entry.upstream.clone();
            reference.insert("name".into(), Value::String(entry.original.clone()));
            upstream
        }
        "ref/resource" => {
            let uri = string_param(reference, "uri", "completion/complete")?;
            let (upstream, original) = match snapshot.template(uri) {
                Some(template)
                    if view.permits(caller, Item::Template(&template.name), Method::Complete) =>
                {
                    (template.upstream.clone(), template.original.clone())
                }
                Some(_) => return Err(unknown_resource(uri)),
                None => {
                    let target = snapshot
                        .resolve_uri(uri)
                        .filter(|t| view.permits(caller, Item::Resource(&t.name), Method::Complete))
                        .ok_or_else(|| unknown_resource(uri))?;
                    (target.upstream, target.original)
                }
            };
            reference.insert("uri".into(), Value::String(original));
            upstream
        }
        other => {
            return Err(invalid(format!(
                "completion/complete: unknown ref type '{other}' (use ref/prompt or ref/resource)"
            )));
        }
    };
    if !snapshot.completes(&upstream) {
        // What the server itself would answer: no completions to offer.
        return Ok(json!({"completion": {"values": [], "hasMore": false}}));
    }
    forward(gateway, &upstream, "completion/complete", params, ctx).await
}

async fn forward(
    gateway: &Gateway,
    upstream: &str,
    method: &str,
    params: Map<String, Value>,
    ctx: CallContext,
) -> Result<Value, RpcError> {
    match gateway
        .forward_to(upstream, method, Value::Object(params), ctx)
        .await
    {
        Ok(answer) => answer,
        Err(error) => Err(match errors::to_mcp(&error) {
            McpFailure::Protocol(error) => RpcError {
                code: i64::from(error.code.0),
                message: error.message.to_string(),
                data: error.data,
            },
            McpFailure::ToolResult(_) => RpcError {
                code: toolgate_adapters::codes::INTERNAL_ERROR,
                message: error.to_string(),
                data: Some(json!({"code": error.code()})),
            },
        }),
    }
}

/// Where the page a list request asks for starts: after the items its `cursor` (a
/// `nextCursor` this server gave: an offset) says were listed; 0 without one. Every
/// paginated list (`tools/list` too) reads its cursor here.
pub fn page_start(cursor: Option<&Value>) -> Result<usize, RpcError> {
    match cursor {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(cursor)) => cursor
            .strip_prefix("o")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| {
                invalid(format!(
                    "invalid cursor '{cursor}': send a nextCursor this server gave"
                ))
            }),
        Some(_) => Err(invalid("the cursor must be a string".into())),
    }
}

/// The `nextCursor` of a page that started at `start` and held `size` items.
fn next_cursor(start: usize, size: usize) -> String {
    format!("o{}", start + size)
}

/// The page of at most `page_size` (at least 1) of `items` that starts at `start`, and
/// the `nextCursor` when more follow.
pub fn page<T>(
    items: impl Iterator<Item = T>,
    start: usize,
    page_size: usize,
) -> (Vec<T>, Option<String>) {
    let page_size = page_size.max(1);
    let mut page: Vec<T> = items.skip(start).take(page_size + 1).collect();
    let more = page.len() > page_size;
    page.truncate(page_size);
    (page, more.then(|| next_cursor(start, page_size)))
}

/// One page of at most `page_size` of `items`, after the request's cursor.
fn list<T: serde::Serialize>(
    items: impl Iterator<Item = T>,
    params: &Map<String, Value>,
    key: &str,
    page_size: usize,
) -> Result<Value, RpcError> {
    let (page, next) = page(items, page_start(params.get("cursor"))?, page_size);
    let mut result = json!({ key: page });
    if let Some(next) = next {
        result["nextCursor"] = Value::String(next);
    }
    Ok(result)
}

/// The gateway's capabilities: tools, and every feature above from however many
/// upstreams (an empty list is a fine answer; upstreams can join later). `logging`:
/// a client's level filters the log lines the gateway sends it.
pub fn capabilities(gateway: &Gateway) -> Value {
    let catalog = gateway.catalog();
    let snapshot = catalog.offerings();
    json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": snapshot.any_subscribe()},
        "completions": {},
        "logging": {},
    })
}

/// Adds what 2026-07-28 requires of a result: `resultType` always, and on lists and
/// reads the cache hints (private: what a tenant sees depends on its credentials;
/// no freshness promised, since upstreams change their lists at will).
pub fn decorate_for_stateless(method: &str, result: &mut Value) {
    let Some(object) = result.as_object_mut() else {
        return;
    };
    object
        .entry("resultType")
        .or_insert_with(|| Value::String("complete".into()));
    if is_list(method) || method == "resources/read" {
        object.entry("ttlMs").or_insert_with(|| Value::from(0u64));
        object
            .entry("cacheScope")
            .or_insert_with(|| Value::String("private".into()));
    }
}

fn string_param<'a>(
    params: &'a Map<String, Value>,
    key: &str,
    method: &str,
) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("{method} needs a string `{key}`")))
}

fn invalid(message: String) -> RpcError {
    RpcError {
        code: INVALID_PARAMS,
        message,
        data: None,
    }
}

/// The answer for a prompt that does not exist — or that the caller may not use.
fn unknown_prompt(name: &str) -> RpcError {
    invalid(format!(
        "prompt '{name}' not found: call prompts/list for the prompts you can use"
    ))
}

/// The answer for a resource that does not exist — or that the caller may not read.
fn unknown_resource(uri: &str) -> RpcError {
    RpcError {
        code: RESOURCE_NOT_FOUND,
        message: format!(
            "resource '{uri}' not found: call resources/list or resources/templates/list \
             for the resources you can read"
        ),
        data: Some(json!({"uri": uri})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_page_with_our_own_cursors() {
        const PAGE_SIZE: usize = 7;
        let items: Vec<Map<String, Value>> = (0..(PAGE_SIZE + 3))
            .map(|i| {
                json!({"name": format!("p{i}")})
                    .as_object()
                    .unwrap()
                    .clone()
            })
            .collect();
        let first = list(items.iter(), &Map::new(), "prompts", PAGE_SIZE).unwrap();
        assert_eq!(first["prompts"].as_array().unwrap().len(), PAGE_SIZE);
        let cursor = first["nextCursor"].clone();
        let mut params = Map::new();
        params.insert("cursor".into(), cursor);
        let second = list(items.iter(), &params, "prompts", PAGE_SIZE).unwrap();
        assert_eq!(second["prompts"].as_array().unwrap().len(), 3);
        assert!(second.get("nextCursor").is_none());
        params.insert("cursor".into(), json!("nonsense"));
        assert_eq!(
            list(items.iter(), &params, "prompts", PAGE_SIZE)
                .unwrap_err()
                .code,
            INVALID_PARAMS
        );
    }

    #[test]
    fn stateless_results_carry_the_version_s_fields() {
        let mut listed = json!({"prompts": []});
        decorate_for_stateless("prompts/list", &mut listed);
        assert_eq!(
            listed,
            json!({"prompts": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        );
        let mut got = json!({"messages": []});
        decorate_for_stateless("prompts/get", &mut got);
        assert_eq!(got, json!({"messages": [], "resultType": "complete"}));
    }
}
