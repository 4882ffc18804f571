//! The small typed model the rest of the adapter works on: operations with their
//! parameters, body, output schema, servers and security, plus the security schemes.
//!
//! Built from the normalized (3.x-shaped) root document by [`super::operations`].
//! Schemas in the model are already self-contained and in JSON Schema 2020-12 form.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::pathkey::PathKey;

/// Methods an OpenAPI path item may hold, in a fixed order.
pub(super) const METHODS: [&str; 9] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace", "query",
];

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Location {
    Path,
    Query,
    Header,
    Cookie,
}

impl Location {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Location::Path => "path",
            Location::Query => "query",
            Location::Header => "header",
            Location::Cookie => "cookie",
        }
    }
}

/// Serialization styles (OpenAPI `style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    Simple,
    Label,
    Matrix,
    Form,
    SpaceDelimited,
    PipeDelimited,
    DeepObject,
}

impl Style {
    pub(super) fn parse(s: &str) -> Option<Style> {
        Some(match s {
            "simple" => Style::Simple,
            "label" => Style::Label,
            "matrix" => Style::Matrix,
            "form" => Style::Form,
            "spaceDelimited" => Style::SpaceDelimited,
            "pipeDelimited" => Style::PipeDelimited,
            "deepObject" => Style::DeepObject,
            _ => return None,
        })
    }
}

/// One parameter of an operation.
#[derive(Debug, Clone)]
pub(super) struct Parameter {
    pub name: String,
    pub location: Location,
    pub required: bool,
    pub schema: Value,
    pub style: Style,
    pub explode: bool,
    pub allow_reserved: bool,
    /// Declared with `content: application/json`: the value is sent as JSON text.
    pub json_content: bool,
}

/// How a request body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyKind {
    Json,
    Form,
    Multipart,
    Text,
    Binary,
}

/// Per-property encoding of form and multipart bodies.
#[derive(Debug, Clone, Default)]
pub(super) struct PropEncoding {
    pub content_type: Option<String>,
    pub style: Option<Style>,
    pub explode: Option<bool>,
}

/// The request body chosen for an operation.
#[derive(Debug, Clone)]
pub(super) struct Body {
    pub media_type: String,
    pub kind: BodyKind,
    pub required: bool,
    pub description: Option<String>,
    pub schema: Value,
    pub encoding: BTreeMap<String, PropEncoding>,
    /// The JSON media types the caller may choose between, when the operation offers
    /// several that mean different things (JSON Patch, merge patch, ...); empty otherwise.
    pub choices: Vec<MediaChoice>,
    /// Repairs made while reading the body (for the operation's list).
    pub repairs: Vec<String>,
}

/// One JSON media type a body may be sent as, and the shape it takes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct MediaChoice {
    pub media_type: String,
    /// An array (JSON Patch) rather than an object.
    pub takes_array: bool,
}

/// One operation (path + method).
#[derive(Debug, Clone)]
pub(super) struct Operation {
    pub method: String,
    /// The spec's path key, as written (it names and describes the operation).
    pub path: String,
    /// What of the key is sent: the URL path and any constant query parameters.
    pub target: PathKey,
    pub operation_id: Option<String>,
    pub summary: Option<String>,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub deprecated: bool,
    pub parameters: Vec<Parameter>,
    pub body: Option<Body>,
    pub output_schema: Option<Value>,
    /// Server URLs (variables filled with defaults), operation- or path-level first.
    pub servers: Vec<String>,
    /// Alternatives of required scheme names (`[]` inside = no auth needed).
    /// `None` when neither the operation nor the document declares any.
    pub security: Option<Vec<Vec<String>>>,
    /// Per scheme, the scopes the operation's security requirements name for it (every
    /// alternative together): what a user's token must grant to call it.
    pub scopes: BTreeMap<String, BTreeSet<String>>,
    /// Where the spec is evidently wrong and the import repaired it, what was done.
    pub repairs: Vec<String>,
}

impl Operation {
    /// Drops the schemas a call does not read, once the tool definition holds them:
    /// an operation keeps only how to send a request. A spec whose large definitions
    /// are shared by hundreds of operations would otherwise hold every inlined schema
    /// twice (here and in the tool). Multipart bodies keep, per property, the keywords
    /// that tell a file part from a text part.
    pub(super) fn keep_what_calls_need(&mut self) {
        for p in &mut self.parameters {
            p.schema = Value::Null;
        }
        self.output_schema = None;
        if let Some(body) = &mut self.body {
            body.schema = match body.kind {
                BodyKind::Multipart => part_kinds(&body.schema),
                _ => Value::Null,
            };
        }
    }
}

/// `{"properties": {name: {format, contentEncoding, contentMediaType, items: {…}}}}`
/// of a multipart body schema: what [`super::files`] reads to frame each part.
fn part_kinds(schema: &Value) -> Value {
    fn kind(s: &Value) -> Value {
        let mut out = Map::new();
        for key in ["format", "contentEncoding", "contentMediaType"] {
            if let Some(v) = s.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
        if let Some(items) = s.get("items") {
            out.insert("items".into(), kind(items));
        }
        Value::Object(out)
    }
    let properties: Map<String, Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.iter().map(|(k, s)| (k.clone(), kind(s))).collect())
        .unwrap_or_default();
    json!({ "properties": properties })
}

/// A security scheme.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum SecurityScheme {
    ApiKey {
        name: String,
        location: Location,
    },
    Http {
        scheme: String,
    },
    OAuth2 {
        /// The `clientCredentials` flow's `tokenUrl`.
        token_url: Option<String>,
        /// The `authorizationCode` flow (Swagger 2.0 `accessCode`), when it has one.
        authorization_code: Option<CodeFlowUrls>,
    },
    Other(String),
}

/// The URLs of an `authorizationCode` flow as the spec writes them (maybe relative).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CodeFlowUrls {
    pub authorization_url: String,
    pub token_url: String,
    pub refresh_url: Option<String>,
}

/// The operations of an API and what the skipped ones lacked.
#[derive(Debug, Default)]
pub(super) struct Api {
    /// Root-level server URLs (variables filled with defaults).
    pub servers: Vec<String>,
    pub operations: Vec<Operation>,
    pub skipped: Vec<(String, String)>,
    pub security_schemes: BTreeMap<String, SecurityScheme>,
    /// References cut while inlining (cycles, depth, size).
    pub cuts: usize,
}

pub(super) fn template_vars(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        out.push(&rest[start + 1..start + len]);
        rest = &rest[start + len + 1..];
    }
    out
}
