//! Listing what a server offers besides tools: prompts, resources and resource
//! templates, every page (bounded), each entry kept exactly as sent. A server that
//! does not declare a capability is not asked; a list that fails is logged and left
//! empty, so one broken list never takes the upstream's tools down with it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::jsonrpc::Rpc;
use super::supervisor::describe;
use crate::{JsonObject, Offerings};

/// A server with more pages than this is cut off (and the cut is logged).
const MAX_LIST_PAGES: usize = 100;

/// Lists everything `capabilities` (the server's, from `initialize`) declares.
pub(crate) async fn list_offerings(
    upstream: &str,
    rpc: &Arc<Rpc>,
    capabilities: Option<&Value>,
    timeout: Duration,
) -> Offerings {
    let declares = |key: &str| capabilities.and_then(|c| c.get(key)).is_some();
    let mut offerings = Offerings {
        completions: declares("completions"),
        subscribe: capabilities
            .and_then(|c| c.get("resources"))
            .and_then(|r| r.get("subscribe"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ..Offerings::default()
    };
    if declares("prompts") {
        offerings.prompts =
            list_all(upstream, rpc, "prompts/list", "prompts", "name", timeout).await;
    }
    if declares("resources") {
        offerings.resources =
            list_all(upstream, rpc, "resources/list", "resources", "uri", timeout).await;
        offerings.resource_templates = list_all(
            upstream,
            rpc,
            "resources/templates/list",
            "resourceTemplates",
            "uriTemplate",
            timeout,
        )
        .await;
    }
    offerings
}

/// Every page of `method`'s `key` array; entries without a string `id_field` are
/// skipped (they could not be addressed), and so are repeats of one id.
async fn list_all(
    upstream: &str,
    rpc: &Arc<Rpc>,
    method: &str,
    key: &str,
    id_field: &str,
    timeout: Duration,
) -> Vec<JsonObject> {
    let mut entries = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let result = match rpc
            .protocol_request(method, params, Instant::now() + timeout)
            .await
        {
            Ok(result) => result,
            Err(failure) => {
                tracing::warn!(upstream, method, error = %describe(&failure), "listing failed; the list stays empty until the next change");
                return entries;
            }
        };
        let Some(list) = result.get(key).and_then(Value::as_array) else {
            tracing::warn!(upstream, method, "the answer has no '{key}' array");
            return entries;
        };
        for entry in list {
            match entry {
                Value::Object(raw) => match raw.get(id_field).and_then(Value::as_str) {
                    Some(id) if seen.insert(id.to_owned()) => entries.push(raw.clone()),
                    Some(id) => tracing::warn!(upstream, method, id, "skipping a repeated entry"),
                    None => tracing::warn!(
                        upstream,
                        method,
                        "skipping an entry without a string '{id_field}'"
                    ),
                },
                _ => tracing::warn!(upstream, method, "skipping an entry that is not an object"),
            }
        }
        match result.get("nextCursor") {
            Some(c @ Value::String(s)) if !s.is_empty() => cursor = Some(c.clone()),
            _ => return entries,
        }
    }
    tracing::warn!(
        upstream,
        method,
        pages = MAX_LIST_PAGES,
        "the list still had more pages; the rest is ignored"
    );
    entries
}
