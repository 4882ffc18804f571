//! The configuration of one OpenAPI upstream, as it appears in the gateway's file.
//!
//! Every type rejects unknown fields and derives a JSON Schema (schemars), so a typo in
//! a config file is an error with a path rather than a silently ignored setting.
//! Credentials are wrapped in [`Secret`], whose `Debug` output never shows the value.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One OpenAPI (or Swagger 2.0) API registered as an upstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenApiConfig {
    /// Where the spec is fetched from (JSON or YAML). Exactly one of `spec_url` and
    /// `spec_path` must be set.
    #[serde(default)]
    pub spec_url: Option<String>,
    /// A local spec file (JSON or YAML); relative `$ref`s to other files are resolved
    /// next to it.
    #[serde(default)]
    pub spec_path: Option<String>,
    /// Overrides the servers of the spec: every request goes to this base URL.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Allows the spec URL, remote `$ref`s and API calls to reach loopback, private and
    /// link-local addresses. Off by default: a spec is untrusted input (SSRF).
    #[serde(default)]
    pub allow_private_networks: bool,
    /// Allows `$ref`s to other http(s) documents (off by default).
    #[serde(default)]
    pub allow_remote_refs: bool,
    /// Credentials per security scheme name (as named in `components.securitySchemes`).
    #[serde(default)]
    pub auth: BTreeMap<String, Credential>,
    /// Which operations become tools.
    #[serde(default)]
    pub filters: Filters,
    /// Headers of the incoming request forwarded to the API (names, case-insensitive).
    #[serde(default)]
    pub forward_headers: Vec<String>,
    /// Timeout of one API request and of fetching the spec.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
    /// Largest spec document accepted, in bytes.
    #[serde(default = "default_max_spec_bytes")]
    pub max_spec_bytes: u64,
    /// Most JSON nodes (objects, arrays, strings, numbers…) all documents of one spec
    /// may hold together, and all the tools made from them (a schema is copied into
    /// every tool using it); past it the import is refused. The largest real spec
    /// tried (Stripe) has about 100,000 of each.
    #[serde(default = "default_max_schema_nodes")]
    pub max_schema_nodes: usize,
    /// Most values one `enum` may list; a longer one refuses the import (every tool
    /// using the schema would carry a copy). The longest real one tried has 598.
    #[serde(default = "default_max_enum_values")]
    pub max_enum_values: usize,
    /// Most bytes all documents of one spec may hold together (a spec split over
    /// thousands of files is read whole); past it the import is refused.
    #[serde(default = "default_max_total_bytes")]
    pub max_total_bytes: u64,
    /// Longest one import may take: fetching or reading every document, parsing and
    /// converting; past it the import is refused.
    #[serde(default = "default_import_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub import_timeout: Duration,
    /// Largest API response read, in bytes (a longer body is cut and marked).
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
    /// The health probe; without it, `check` opens a TCP connection to the API.
    #[serde(default)]
    pub health: Option<HealthConfig>,
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_max_spec_bytes() -> u64 {
    32 * 1024 * 1024
}

fn default_max_schema_nodes() -> usize {
    1_000_000
}

fn default_max_enum_values() -> usize {
    10_000
}

fn default_max_total_bytes() -> u64 {
    256 * 1024 * 1024
}

fn default_import_timeout() -> Duration {
    Duration::from_secs(300)
}

fn default_max_response_bytes() -> u64 {
    8 * 1024 * 1024
}

impl OpenApiConfig {
    /// A config reading the spec from `path`, everything else at its default.
    pub fn from_path(path: impl Into<String>) -> Self {
        Self {
            spec_url: None,
            spec_path: Some(path.into()),
            base_url: None,
            allow_private_networks: false,
            allow_remote_refs: false,
            auth: BTreeMap::new(),
            filters: Filters::default(),
            forward_headers: Vec::new(),
            timeout: default_timeout(),
            max_spec_bytes: default_max_spec_bytes(),
            max_schema_nodes: default_max_schema_nodes(),
            max_enum_values: default_max_enum_values(),
            max_total_bytes: default_max_total_bytes(),
            import_timeout: default_import_timeout(),
            max_response_bytes: default_max_response_bytes(),
            health: None,
        }
    }

    /// A config fetching the spec from `url`, everything else at its default.
    pub fn from_url(url: impl Into<String>) -> Self {
        Self {
            spec_url: Some(url.into()),
            spec_path: None,
            ..Self::from_path("")
        }
    }
}

/// Include and exclude rules. An operation is imported when it matches every non-empty
/// `include` list (any entry of a list) and no entry of any `exclude` list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Filters {
    #[serde(default)]
    pub include: FilterSet,
    #[serde(default)]
    pub exclude: FilterSet,
}

/// One set of operation matchers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilterSet {
    /// Globs over the operationId (`*` any run of characters, `?` one character).
    #[serde(default)]
    pub operation_ids: Vec<String>,
    /// Tags (exact, case-sensitive).
    #[serde(default)]
    pub tags: Vec<String>,
    /// HTTP methods (case-insensitive).
    #[serde(default)]
    pub methods: Vec<String>,
    /// Path prefixes as written in the spec (`/repos`).
    #[serde(default)]
    pub path_prefixes: Vec<String>,
}

impl FilterSet {
    pub fn is_empty(&self) -> bool {
        self.operation_ids.is_empty()
            && self.tags.is_empty()
            && self.methods.is_empty()
            && self.path_prefixes.is_empty()
    }
}

/// The health probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// Path (relative to the API base URL) answered with a 2xx status by GET.
    pub path: String,
}

/// Credentials for one security scheme, tagged by `type`
/// (`{type: bearer, token: ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Credential {
    /// For `type: apiKey` (header, query or cookie, as the scheme says).
    ApiKey { value: Secret },
    /// For `type: http, scheme: bearer`.
    Bearer { token: Secret },
    /// For `type: http, scheme: basic`.
    Basic { username: String, password: Secret },
    /// For `type: oauth2` with a `clientCredentials` flow. The token is fetched from
    /// the flow's `tokenUrl` (or `token_url` here), cached and refreshed before expiry.
    Oauth2ClientCredentials {
        client_id: String,
        client_secret: Secret,
        #[serde(default)]
        scopes: Vec<String>,
        #[serde(default)]
        token_url: Option<String>,
    },
}

/// Credentials are held in the one [`Secret`] type (see `crate::secret`).
pub use crate::secret::Secret;
