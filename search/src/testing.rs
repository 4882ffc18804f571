//! Test fixtures: tools as an upstream lists them, and a catalog of them named as the
//! gateway names them (`<upstream>__<tool>`, other characters than `[A-Za-z0-9_-]`
//! mapped to `_`).

use serde_json::{Map, Value, json};

use crate::{Corpus, Document, Hit};

/// A tool definition as an upstream lists it (it has a string `name`).
#[derive(Clone)]
pub(crate) struct ToolDef {
    name: String,
    raw: Map<String, Value>,
}

impl ToolDef {
    pub(crate) fn from_raw(raw: Map<String, Value>) -> Option<ToolDef> {
        let name = raw.get("name")?.as_str()?.to_owned();
        Some(ToolDef { name, raw })
    }
}

/// A tool in a [`Catalog`].
pub(crate) struct Tool {
    name: String,
    upstream: String,
    def: ToolDef,
}

impl Document for Tool {
    fn name(&self) -> &str {
        &self.name
    }

    fn upstream(&self) -> &str {
        &self.upstream
    }

    fn original(&self) -> &str {
        &self.def.name
    }

    fn field(&self, key: &str) -> Option<&Value> {
        self.def.raw.get(key)
    }
}

/// Upstreams' tools, in order.
#[derive(Default)]
pub(crate) struct Catalog(Vec<Tool>);

impl Corpus for Catalog {
    type Document = Tool;

    fn documents(&self) -> impl Iterator<Item = &Tool> {
        self.0.iter()
    }
}

pub(crate) fn tool(name: &str, description: &str, params: &[&str]) -> ToolDef {
    let props: Map<String, Value> = params
        .iter()
        .map(|p| (p.to_string(), json!({"type": "string"})))
        .collect();
    let raw = json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props},
    });
    ToolDef::from_raw(raw.as_object().unwrap().clone()).unwrap()
}

/// Three Stripe operations, descriptions in HTML as the spec has them.
pub(crate) fn stripe_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "PostRefunds",
            "<p>When you create a new refund, you must specify a Charge or a PaymentIntent object on which to create it.</p>",
            &["charge", "amount"],
        ),
        tool(
            "PostCustomers",
            "<p>Creates a new customer object.</p>",
            &["email", "name"],
        ),
        tool(
            "GetCustomers",
            "<p>Returns a list of your customers.</p>",
            &["email", "limit"],
        ),
    ]
}

/// The catalog the gateway builds of these upstreams (prefixed names).
pub(crate) fn catalog(upstreams: &[(&str, Vec<ToolDef>)]) -> Catalog {
    let mut tools = Vec::new();
    for (upstream, defs) in upstreams {
        for def in defs {
            let name = format!("{upstream}__{}", def.name)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            tools.push(Tool {
                name,
                upstream: upstream.to_string(),
                def: def.clone(),
            });
        }
    }
    Catalog(tools)
}

pub(crate) fn sample() -> Catalog {
    catalog(&[
        (
            "gh",
            vec![
                tool(
                    "pulls/list",
                    "List pull requests.\n\nLists pull requests in a repository.",
                    &["owner", "repo", "state"],
                ),
                tool(
                    "pulls/create",
                    "Create a pull request.",
                    &["owner", "repo", "title", "head", "base"],
                ),
                tool(
                    "issues/add-labels",
                    "Add labels to an issue.",
                    &["owner", "repo", "issue_number", "labels"],
                ),
                tool(
                    "issues/create",
                    "Create an issue.",
                    &["owner", "repo", "title", "body"],
                ),
                tool(
                    "repos/get-content",
                    "Get repository content.\n\nGets the contents of a file or directory.",
                    &["owner", "repo", "path"],
                ),
            ],
        ),
        ("stripe", stripe_tools()),
    ])
}

pub(crate) fn names(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}
