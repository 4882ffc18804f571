//! Prompts, resources and resource templates of every upstream, under catalog names
//! and URIs, the way tools are: one snapshot per catalog build, so listing, reading
//! and the policy always look at the same items.
//!
//! - **Prompts** are named like tools (`<upstream>__<prompt>`, or the bare name for
//!   `namespace: none`), by the same function, collisions included.
//! - **Resources and templates** are addressed by URI. A namespaced upstream's URI
//!   `X` is served as `toolgate://<upstream>/X` (the template `T` as
//!   `toolgate://<upstream>/T`, so a client expanding it gets the mapped form of the
//!   URI the upstream would have given): the mapping is a prefix, so it is exact both
//!   ways, and a URI can only ever reach the upstream named in it. `namespace: none`
//!   upstreams keep their URIs as they are; a URI without the prefix goes to the
//!   passthrough upstream that lists it (or whose template matches it), else to the
//!   first one by name.
//! - **Policy names**: a resource or template is governed by `<upstream>__<name>`
//!   (its listed `name`, mapped like a tool name). A URI that is neither listed nor
//!   matched by a listed template (a link a tool made a moment ago) is governed by
//!   the literal name `<upstream>__*`: readable by a tenant allowed the whole upstream.
//! - URIs inside results (`resource_link` and embedded `resource` blocks of tool and
//!   prompt results, `contents` of reads, `notifications/resources/updated`) are
//!   rewritten to the client's form, so a client can read back what it was given.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use toolgate_adapters::{JsonObject, ToolDef};

use super::{Catalog, Source, item_name};
use crate::config::Namespace;

/// The scheme and prefix of a namespaced upstream's URIs.
pub const URI_PREFIX: &str = "toolgate://";

/// One upstream's contribution to a build.
pub struct OfferingSource<'a> {
    pub upstream: &'a str,
    pub namespace: Namespace,
    pub offerings: &'a toolgate_adapters::Offerings,
}

/// One resource or template as the catalog serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The policy name (`<upstream>__<name>`).
    pub name: String,
    pub upstream: String,
    /// The upstream's own URI (or URI template).
    pub original: String,
    /// The URI (or template) clients see.
    pub uri: String,
    /// The listed definition clients see.
    pub definition: JsonObject,
}

/// Where a client's URI goes.
#[derive(Debug, Clone, PartialEq)]
pub struct UriTarget {
    pub upstream: String,
    /// The URI as the upstream knows it.
    pub original: String,
    /// The policy name that governs it.
    pub name: String,
}

/// What every upstream offers besides tools, in one snapshot.
#[derive(Debug, Default)]
pub struct Offerings {
    /// Prompts, named like tools (each entry's `original` is the upstream's name).
    pub prompts: Catalog,
    /// Sorted by client URI.
    pub resources: Vec<Arc<Item>>,
    /// Sorted by client URI template.
    pub templates: Vec<Arc<Item>>,
    /// The namespace of every upstream in the snapshot.
    namespaces: HashMap<String, Namespace>,
    /// `namespace: none` upstreams, sorted by name.
    passthrough: Vec<String>,
    /// Client URI -> index into `resources`.
    by_uri: HashMap<String, usize>,
    /// Upstreams that answer `completion/complete`, and `resources/subscribe`.
    completions: Vec<String>,
    subscribe: Vec<String>,
}

impl PartialEq for Offerings {
    fn eq(&self, other: &Self) -> bool {
        self.prompts.entries() == other.prompts.entries()
            && self.resources == other.resources
            && self.templates == other.templates
    }
}

impl Offerings {
    /// Builds the snapshot from every upstream's offerings (upstreams without any
    /// still count for URI routing).
    pub fn build(sources: &[OfferingSource<'_>]) -> Offerings {
        let prompt_defs: Vec<Vec<ToolDef>> = sources
            .iter()
            .map(|s| {
                s.offerings
                    .prompts
                    .iter()
                    .filter_map(|raw| ToolDef::from_raw(raw.clone()))
                    .collect()
            })
            .collect();
        let prompt_sources: Vec<Source<'_>> = sources
            .iter()
            .zip(&prompt_defs)
            .map(|(s, defs)| Source {
                upstream: s.upstream,
                namespace: s.namespace,
                tools: defs,
                shaping: None,
            })
            .collect();
        let (prompts, collisions) = Catalog::build_named(&prompt_sources, "toolgate/prompt");
        for collision in collisions {
            tracing::debug!(name = %collision.name, claimants = ?collision.claimants, "prompt name collision resolved with a hash suffix");
        }
        let mut resources = Vec::new();
        let mut templates = Vec::new();
        for source in sources {
            for raw in &source.offerings.resources {
                if let Some(item) = item(source, raw, "uri") {
                    resources.push(Arc::new(item));
                }
            }
            for raw in &source.offerings.resource_templates {
                if let Some(item) = item(source, raw, "uriTemplate") {
                    templates.push(Arc::new(item));
                }
            }
        }
        resources.sort_by(|a, b| a.uri.cmp(&b.uri));
        // Two passthrough upstreams listing one URI: the first by name serves it.
        resources.dedup_by(|later, first| later.uri == first.uri);
        templates.sort_by(|a, b| a.uri.cmp(&b.uri));
        let by_uri = resources
            .iter()
            .enumerate()
            .map(|(i, r)| (r.uri.clone(), i))
            .collect();
        let mut passthrough: Vec<String> = sources
            .iter()
            .filter(|s| s.namespace == Namespace::None)
            .map(|s| s.upstream.to_owned())
            .collect();
        passthrough.sort();
        let names_where = |flag: fn(&toolgate_adapters::Offerings) -> bool| {
            sources
                .iter()
                .filter(|s| flag(s.offerings))
                .map(|s| s.upstream.to_owned())
                .collect()
        };
        Offerings {
            prompts,
            resources,
            templates,
            namespaces: sources
                .iter()
                .map(|s| (s.upstream.to_owned(), s.namespace))
                .collect(),
            passthrough,
            by_uri,
            completions: names_where(|o| o.completions),
            subscribe: names_where(|o| o.subscribe),
        }
    }

    /// Whether any upstream answers `completion/complete`.
    pub fn any_completions(&self) -> bool {
        !self.completions.is_empty()
    }

    /// Whether any upstream answers `resources/subscribe`.
    pub fn any_subscribe(&self) -> bool {
        !self.subscribe.is_empty()
    }

    /// Whether `upstream` answers `completion/complete`.
    pub fn completes(&self, upstream: &str) -> bool {
        self.completions.iter().any(|u| u == upstream)
    }

    /// Whether `upstream` answers `resources/subscribe`.
    pub fn subscribable(&self, upstream: &str) -> bool {
        self.subscribe.iter().any(|u| u == upstream)
    }

    /// The listed resource at a client URI.
    pub fn resource(&self, uri: &str) -> Option<&Arc<Item>> {
        self.by_uri.get(uri).map(|&i| &self.resources[i])
    }

    /// The template (client form) with this exact URI template.
    pub fn template(&self, uri_template: &str) -> Option<&Arc<Item>> {
        self.templates.iter().find(|t| t.uri == uri_template)
    }

    /// Where a client's URI goes, and which policy name governs it; `None` when no
    /// upstream of this snapshot could serve it.
    pub fn resolve_uri(&self, uri: &str) -> Option<UriTarget> {
        if let Some(item) = self.resource(uri) {
            return Some(UriTarget {
                upstream: item.upstream.clone(),
                original: item.original.clone(),
                name: item.name.clone(),
            });
        }
        let (upstream, original) = match uri.strip_prefix(URI_PREFIX) {
            Some(rest) => {
                let (upstream, original) = rest.split_once('/')?;
                (self.namespaces.get(upstream) == Some(&Namespace::Prefix))
                    .then(|| (upstream.to_owned(), original.to_owned()))?
            }
            None => {
                let upstream = self
                    .passthrough
                    .iter()
                    .find(|p| {
                        self.templates
                            .iter()
                            .any(|t| &t.upstream == *p && template_matches(&t.original, uri))
                    })
                    .or_else(|| self.passthrough.first())?;
                (upstream.clone(), uri.to_owned())
            }
        };
        let name = self
            .templates
            .iter()
            .find(|t| t.upstream == upstream && template_matches(&t.original, &original))
            .map(|t| t.name.clone())
            .unwrap_or_else(|| whole_upstream_name(&upstream));
        Some(UriTarget {
            upstream,
            original,
            name,
        })
    }

    /// The client's form of `upstream`'s URI `original`.
    pub fn client_uri(&self, upstream: &str, original: &str) -> String {
        client_uri(self.namespace(upstream), upstream, original)
    }

    /// Every upstream of the snapshot.
    pub fn upstreams(&self) -> impl Iterator<Item = &str> {
        self.namespaces.keys().map(String::as_str)
    }

    pub fn namespace(&self, upstream: &str) -> Namespace {
        self.namespaces
            .get(upstream)
            .copied()
            .unwrap_or(Namespace::Prefix)
    }
}

/// The policy name of a URI no listed resource or template covers.
pub fn whole_upstream_name(upstream: &str) -> String {
    format!("{upstream}{}*", crate::catalog::SEPARATOR)
}

/// `original` as clients see it.
pub fn client_uri(namespace: Namespace, upstream: &str, original: &str) -> String {
    match namespace {
        Namespace::Prefix => format!("{URI_PREFIX}{upstream}/{original}"),
        Namespace::None => original.to_owned(),
    }
}

fn item(source: &OfferingSource<'_>, raw: &JsonObject, uri_field: &str) -> Option<Item> {
    let original = raw.get(uri_field)?.as_str()?.to_owned();
    let listed_name = raw
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(&original)
        .to_owned();
    let name = item_name(source.upstream, source.namespace, &listed_name);
    let uri = client_uri(source.namespace, source.upstream, &original);
    let mut definition = raw.clone();
    definition.insert(uri_field.into(), Value::String(uri.clone()));
    definition.insert("name".into(), Value::String(name.clone()));
    if let Value::Object(meta) = definition
        .entry("_meta")
        .or_insert_with(|| Value::Object(JsonObject::new()))
    {
        meta.insert(
            "toolgate/upstream".into(),
            Value::String(source.upstream.to_owned()),
        );
        meta.insert("toolgate/name".into(), Value::String(listed_name));
    }
    Some(Item {
        name,
        upstream: source.upstream.to_owned(),
        original,
        uri,
        definition,
    })
}

/// Whether `uri` is an expansion of the RFC 6570 `template`: its literal parts in
/// order, each expression standing for any text. Looser than the RFC (an expression
/// may take a `/` it would have encoded), which only matters for choosing the policy
/// name, never for where a URI goes.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        literals.push(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => rest = &rest[open + close + 1..],
            None => return false,
        }
    }
    let tail = rest;
    if literals.is_empty() {
        return template == uri;
    }
    let Some(mut remaining) = uri.strip_prefix(literals[0]) else {
        return false;
    };
    for literal in &literals[1..] {
        match remaining.find(literal) {
            Some(at) => remaining = &remaining[at + literal.len()..],
            None => return false,
        }
    }
    remaining.ends_with(tail)
}

/// Rewrites the URIs of `upstream`'s content blocks (`resource_link`, embedded
/// `resource`) in `blocks` to the client's form.
pub fn rewrite_content_blocks(blocks: &mut [Value], namespace: Namespace, upstream: &str) {
    if namespace == Namespace::None {
        return;
    }
    for block in blocks {
        rewrite_block(block, namespace, upstream);
    }
}

fn rewrite_block(block: &mut Value, namespace: Namespace, upstream: &str) {
    let Some(object) = block.as_object_mut() else {
        return;
    };
    let target = match object.get("type").and_then(Value::as_str) {
        Some("resource_link") => Some(object),
        Some("resource") => object.get_mut("resource").and_then(Value::as_object_mut),
        _ => None,
    };
    if let Some(target) = target {
        rewrite_uri_field(target, namespace, upstream);
    }
}

fn rewrite_uri_field(object: &mut JsonObject, namespace: Namespace, upstream: &str) {
    if let Some(Value::String(uri)) = object.get_mut("uri") {
        *uri = client_uri(namespace, upstream, uri);
    }
}

/// Rewrites a tool result's content blocks (see [`rewrite_content_blocks`]).
pub fn rewrite_tool_result(result: &mut JsonObject, namespace: Namespace, upstream: &str) {
    if let Some(Value::Array(blocks)) = result.get_mut("content") {
        rewrite_content_blocks(blocks, namespace, upstream);
    }
}

/// Rewrites a `prompts/get` result's message contents.
pub fn rewrite_prompt_result(result: &mut Value, namespace: Namespace, upstream: &str) {
    if namespace == Namespace::None {
        return;
    }
    if let Some(Value::Array(messages)) = result.get_mut("messages") {
        for message in messages {
            match message.get_mut("content") {
                Some(Value::Array(blocks)) => rewrite_content_blocks(blocks, namespace, upstream),
                Some(block) => rewrite_block(block, namespace, upstream),
                None => {}
            }
        }
    }
}

/// Rewrites a `resources/read` result's `contents[].uri`.
pub fn rewrite_read_result(result: &mut Value, namespace: Namespace, upstream: &str) {
    if namespace == Namespace::None {
        return;
    }
    if let Some(Value::Array(contents)) = result.get_mut("contents") {
        for content in contents.iter_mut().filter_map(Value::as_object_mut) {
            rewrite_uri_field(content, namespace, upstream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn offerings(
        prompts: &[&str],
        resources: &[(&str, &str)],
        templates: &[(&str, &str)],
    ) -> toolgate_adapters::Offerings {
        let obj = |v: Value| v.as_object().unwrap().clone();
        toolgate_adapters::Offerings {
            prompts: prompts
                .iter()
                .map(|n| obj(json!({"name": n, "x-extra": 1})))
                .collect(),
            resources: resources
                .iter()
                .map(|(uri, name)| obj(json!({"uri": uri, "name": name})))
                .collect(),
            resource_templates: templates
                .iter()
                .map(|(t, name)| obj(json!({"uriTemplate": t, "name": name})))
                .collect(),
            completions: true,
            subscribe: false,
        }
    }

    fn snapshot() -> Offerings {
        let a = offerings(
            &["simple", "with.args"],
            &[("demo://static/1", "Static 1"), ("demo://static/2", "two")],
            &[("demo://dynamic/{id}", "Dynamic")],
        );
        let b = offerings(&["simple"], &[("demo://static/1", "Static 1")], &[]);
        let p = offerings(
            &["own"],
            &[("file:///x.txt", "x")],
            &[("file:///{path}", "files")],
        );
        Offerings::build(&[
            OfferingSource {
                upstream: "a",
                namespace: Namespace::Prefix,
                offerings: &a,
            },
            OfferingSource {
                upstream: "b",
                namespace: Namespace::Prefix,
                offerings: &b,
            },
            OfferingSource {
                upstream: "p",
                namespace: Namespace::None,
                offerings: &p,
            },
        ])
    }

    #[test]
    fn prompts_are_named_like_tools_and_keep_every_field() {
        let snapshot = snapshot();
        let names: Vec<&str> = snapshot
            .prompts
            .entries()
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(names, ["a__simple", "a__with_args", "b__simple", "own"]);
        let entry = snapshot.prompts.get("a__with_args").unwrap();
        assert_eq!(entry.original, "with.args");
        assert_eq!(entry.definition()["x-extra"], 1);
        assert_eq!(entry.definition()["_meta"]["toolgate/prompt"], "with.args");
    }

    #[test]
    fn uris_map_both_ways_and_never_cross_upstreams() {
        let snapshot = snapshot();
        let listed = snapshot.resource("toolgate://a/demo://static/1").unwrap();
        assert_eq!(listed.name, "a__Static_1");
        assert_eq!(listed.definition["uri"], "toolgate://a/demo://static/1");
        // The same upstream URI under two upstreams: two resources, each its own.
        let target = snapshot
            .resolve_uri("toolgate://b/demo://static/1")
            .unwrap();
        assert_eq!(
            (target.upstream.as_str(), target.original.as_str()),
            ("b", "demo://static/1")
        );
        // A template expansion is governed by the template's name.
        let target = snapshot
            .resolve_uri("toolgate://a/demo://dynamic/42")
            .unwrap();
        assert_eq!(target.original, "demo://dynamic/42");
        assert_eq!(target.name, "a__Dynamic");
        // Unlisted and unmatched: the whole-upstream name.
        let target = snapshot.resolve_uri("toolgate://a/other://thing").unwrap();
        assert_eq!(target.name, "a__*");
        // Unknown or passthrough upstreams cannot be named in the prefix form.
        assert_eq!(
            snapshot.resolve_uri("toolgate://nobody/demo://static/1"),
            None
        );
        assert_eq!(snapshot.resolve_uri("toolgate://p/file:///x.txt"), None);
        // Unprefixed URIs go to the passthrough upstream, unchanged.
        let target = snapshot.resolve_uri("file:///x.txt").unwrap();
        assert_eq!((target.upstream.as_str(), target.name.as_str()), ("p", "x"));
        let target = snapshot.resolve_uri("file:///etc/y").unwrap();
        assert_eq!(
            (target.upstream.as_str(), target.name.as_str()),
            ("p", "files")
        );
        // Templates in client form, expanded, land on the upstream's own expansion.
        let template = snapshot
            .template("toolgate://a/demo://dynamic/{id}")
            .unwrap();
        assert_eq!(template.original, "demo://dynamic/{id}");
    }

    #[test]
    fn template_matching_follows_the_literals() {
        assert!(template_matches("demo://r/{id}", "demo://r/7"));
        assert!(template_matches("demo://r/{id}/x{?q}", "demo://r/7/x?q=1"));
        assert!(!template_matches("demo://r/{id}/x", "demo://r/7/y"));
        assert!(!template_matches("demo://r/{id", "demo://r/7"));
        assert!(template_matches("plain://a", "plain://a"));
        assert!(!template_matches("plain://a", "plain://b"));
    }

    #[test]
    fn results_carry_client_uris() {
        let mut tool = json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "resource_link", "uri": "demo://dynamic/1", "name": "one"},
            {"type": "resource", "resource": {"uri": "demo://static/1", "text": "t"}},
        ]});
        rewrite_tool_result(tool.as_object_mut().unwrap(), Namespace::Prefix, "a");
        assert_eq!(tool["content"][1]["uri"], "toolgate://a/demo://dynamic/1");
        assert_eq!(
            tool["content"][2]["resource"]["uri"],
            "toolgate://a/demo://static/1"
        );
        let mut prompt = json!({"messages": [{"role": "user", "content": {"type": "resource", "resource": {"uri": "demo://x"}}}]});
        rewrite_prompt_result(&mut prompt, Namespace::Prefix, "a");
        assert_eq!(
            prompt["messages"][0]["content"]["resource"]["uri"],
            "toolgate://a/demo://x"
        );
        let mut read = json!({"contents": [{"uri": "demo://x", "text": "t"}]});
        rewrite_read_result(&mut read, Namespace::None, "p");
        assert_eq!(read["contents"][0]["uri"], "demo://x");
        rewrite_read_result(&mut read, Namespace::Prefix, "a");
        assert_eq!(read["contents"][0]["uri"], "toolgate://a/demo://x");
    }
}
