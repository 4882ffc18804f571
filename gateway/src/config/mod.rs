//! The config file model.
//!
//! YAML, with `${VAR}` / `${VAR:-default}` substituted from the environment before
//! parsing; every struct rejects unknown fields; errors name the exact path
//! (`upstreams.everything.stdio.comand: unknown field …`). The JSON Schema printed by
//! `toolgate config-schema` is generated from these types, so the two cannot drift.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgate_adapters::mcp::{HttpConfig, McpTransport, StdioConfig};
use toolgate_adapters::openapi::OpenApiConfig;
use toolgate_adapters::skills::SkillsConfig;

pub use crate::state::settings::{FailPolicy, StateBackend, StateConfig};

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
    pub server: crate::serve::listener::ServerConfig,
    /// Cross-origin access from browsers: off unless origins are listed.
    #[serde(default)]
    pub cors: crate::serve::guard::CorsConfig,
    /// Who may scrape `GET /metrics`, and where it is served.
    #[serde(default)]
    pub metrics: crate::serve::ops::MetricsConfig,
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
    #[serde(default = "default_startup_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub startup_timeout: Duration,
    /// Default health checks for every upstream.
    #[serde(default)]
    pub health: HealthConfig,
    /// Largest accepted request body on `/mcp`, in bytes.
    #[serde(default = "default_max_body")]
    pub max_request_body_bytes: usize,
    /// Every tool result is fitted to this budget, counted with a real BPE tokenizer
    /// (default 12,000 tokens, o200k_base): under it a result passes unchanged; over it,
    /// text is cut (JSON stays valid JSON) and the result says so.
    #[serde(default)]
    pub results: crate::truncate::Budget,
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
    pub jwt: Option<crate::credentials::JwtConfig>,
    /// Per-session state: the visible tool set that `tool_expand_tools` grows.
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// Where shared state lives (sessions, rate limits, runtime registrations):
    /// `memory` for one process (default), `redis` when several replicas serve together.
    #[serde(default)]
    pub state: StateConfig,
    /// Traces of the call path: W3C trace context is always accepted and passed to
    /// upstreams; spans are exported over OTLP/HTTP when `otlp_endpoint` is set.
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// The upstreams, by name. A name becomes the prefix of its tools
    /// (`<name>__<tool>`): letters, digits, `_` and `-`.
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamConfig>,
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
    /// characters. Held as a [`Secret`](toolgate_adapters::Secret): never printed.
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

fn default_max_body() -> usize {
    4 * 1024 * 1024
}

/// One tenant: its credentials and its allowed tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// API keys as `sha256:<hex>` hashes (`toolgate hash-key KEY` prints one); clients
    /// send the key as `Authorization: Bearer KEY`.
    #[serde(default)]
    pub api_keys: Vec<String>,
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

/// A token bucket per tenant: set exactly one of `per_second`, `per_minute` or
/// `per_hour` (the sustained rate), and optionally `burst` (requests accepted at once;
/// default: the rate's count). `{per_hour: 20, burst: 20}` is "20 per hour".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_minute: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_hour: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

/// A validated rate: `count` requests per `window`, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub window: Duration,
    pub burst: u32,
}

impl Rate {
    /// Time between two requests at the sustained rate (one token's refill).
    pub fn emission_interval(&self) -> Duration {
        self.window / self.count.max(1)
    }

    /// This rate shared out over `replicas` processes (each gets its share of the count
    /// and of the burst, at least 1).
    pub fn divided(&self, replicas: u32) -> Rate {
        let replicas = replicas.max(1);
        Rate {
            count: self.count.div_ceil(replicas).max(1),
            window: self.window,
            burst: self.burst.div_ceil(replicas).max(1),
        }
    }
}

impl RateLimitConfig {
    /// The rate, or a message saying what is wrong (relative to `rate_limit`).
    pub fn rate(&self) -> Result<Rate, String> {
        let set: Vec<(u32, Duration, &str)> = [
            (self.per_second, Duration::from_secs(1), "per_second"),
            (self.per_minute, Duration::from_secs(60), "per_minute"),
            (self.per_hour, Duration::from_secs(3600), "per_hour"),
        ]
        .into_iter()
        .filter_map(|(count, window, field)| count.map(|c| (c, window, field)))
        .collect();
        let [(count, window, field)] = set[..] else {
            return Err(format!(
                "set exactly one of `per_second`, `per_minute`, `per_hour` (found {})",
                set.len()
            ));
        };
        if count == 0 {
            return Err(format!("`{field}` must be at least 1"));
        }
        let burst = self.burst.unwrap_or(count);
        if burst == 0 {
            return Err("`burst` must be at least 1".into());
        }
        Ok(Rate {
            count,
            window,
            burst,
        })
    }
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
    /// Longest `available_expandable_tools` list in a `tool_expand_tools` result.
    #[serde(default = "default_expandable_cap")]
    pub expandable_list_cap: usize,
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

fn default_expandable_cap() -> usize {
    50
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            idle_ttl: default_idle_ttl(),
            max_sessions: default_max_sessions(),
            max_per_tenant: None,
            initial_max_tools: default_initial_max_tools(),
            expandable_list_cap: default_expandable_cap(),
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

/// How the upstream's tools are named in the catalog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Namespace {
    /// `<upstream>__<tool>` (default).
    #[default]
    Prefix,
    /// The upstream's own tool names, unprefixed: for a single-upstream passthrough.
    /// A name that collides with another tool is a startup error.
    None,
}

/// One upstream. Set exactly one of `stdio`, `sse`, `streamable_http`, `openapi`,
/// `skills`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// An HTTP API described by an OpenAPI (3.0, 3.1) or Swagger 2.0 document: every
    /// operation becomes a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openapi: Option<OpenApiConfig>,
    /// An MCP server run as a child process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdio: Option<StdioConfig>,
    /// A legacy HTTP+SSE MCP server (protocol 2024-11-05): `url` is its SSE endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse: Option<HttpConfig>,
    /// A streamable HTTP MCP server: `url` is its MCP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamable_http: Option<HttpConfig>,
    /// Skill packages (directories holding a `SKILL.md`): each skill becomes a prompt,
    /// a tool, and a resource per file; the directories are watched for changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<SkillsConfig>,
    #[serde(default)]
    pub namespace: Namespace,
    /// Overrides the global `call_timeout` for this upstream's tools.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub call_timeout: Option<Duration>,
    /// Overrides the global `health` settings for this upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthConfig>,
    /// Calls running at once on this upstream; more wait up to 2 s, then fail with a
    /// RateLimited error.
    #[serde(default = "default_max_concurrent_calls")]
    pub max_concurrent_calls: usize,
    /// Log argument values in the audit line of each call (off: they may hold
    /// personal data or secrets).
    #[serde(default)]
    pub audit_arguments: bool,
    /// Token budget of this upstream's results (overrides `results.max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_max_tokens: Option<usize>,
}

fn default_max_concurrent_calls() -> usize {
    64
}

impl UpstreamConfig {
    /// The transport, once validation has made sure exactly one is set.
    pub fn transport(&self) -> Option<McpTransport> {
        match (&self.stdio, &self.sse, &self.streamable_http) {
            (Some(s), None, None) => Some(McpTransport::Stdio(s.clone())),
            (None, Some(h), None) => Some(McpTransport::Sse(h.clone())),
            (None, None, Some(h)) => Some(McpTransport::StreamableHttp(h.clone())),
            _ => None,
        }
    }
}

/// How the upstreams of two configs differ, by name (each list sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamChanges {
    /// In the new config only.
    pub added: Vec<String>,
    /// In the old config only.
    pub removed: Vec<String>,
    /// In both, with different effective settings ([`Config::effective_upstream`]).
    pub changed: Vec<String>,
}

impl UpstreamChanges {
    pub fn between(old: &Config, new: &Config) -> UpstreamChanges {
        let mut changes = UpstreamChanges::default();
        for name in new.upstreams.keys() {
            match old.effective_upstream(name) {
                None => changes.added.push(name.clone()),
                before if before != new.effective_upstream(name) => {
                    changes.changed.push(name.clone())
                }
                Some(_) => {}
            }
        }
        changes.removed = old
            .upstreams
            .keys()
            .filter(|name| !new.upstreams.contains_key(*name))
            .cloned()
            .collect();
        changes
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Tenants added, removed or changed between two configs (names only: their
/// settings hold key hashes).
pub fn changed_tenants(old: &Config, new: &Config) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = old
        .tenants
        .keys()
        .chain(new.tenants.keys())
        .filter(|name| old.tenants.get(*name) != new.tenants.get(*name))
        .collect();
    names.into_iter().cloned().collect()
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
    #[error("config error at {path}: {message}")]
    Invalid { path: String, message: String },
}

impl Config {
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
        if let Some(spec_dir) = self.admin.as_mut().and_then(|a| a.spec_dir.as_mut())
            && spec_dir.is_relative()
        {
            *spec_dir = dir.join(&*spec_dir);
        }
        for upstream in self.upstreams.values_mut() {
            if let Some(openapi) = &mut upstream.openapi
                && let Some(spec_path) = &openapi.spec_path
                && Path::new(spec_path).is_relative()
            {
                openapi.spec_path = Some(dir.join(spec_path).display().to_string());
            }
            if let Some(skills) = &mut upstream.skills {
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
        let text = substitute_env(text, env)?;
        let deserializer = serde_norway::Deserializer::from_str(&text);
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let path = err.path().to_string();
            ConfigError::Invalid {
                path: if path == "." {
                    "(document)".into()
                } else {
                    path
                },
                message: err.into_inner().to_string(),
            }
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |path: String, message: String| ConfigError::Invalid { path, message };
        for (name, upstream) in &self.upstreams {
            let path = format!("upstreams.{name}");
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(invalid(
                    path,
                    "an upstream name may contain only letters, digits, '_' and '-'".into(),
                ));
            }
            if name.contains("__") {
                return Err(invalid(
                    path,
                    "an upstream name may not contain '__' (it separates the upstream from \
                     the tool in catalog names)"
                        .into(),
                ));
            }
            let set = [
                upstream.stdio.is_some(),
                upstream.sse.is_some(),
                upstream.streamable_http.is_some(),
                upstream.openapi.is_some(),
                upstream.skills.is_some(),
            ]
            .iter()
            .filter(|set| **set)
            .count();
            if set != 1 {
                return Err(invalid(
                    path,
                    format!(
                        "set exactly one of `stdio`, `sse`, `streamable_http`, `openapi`, \
                         `skills` (found {set})"
                    ),
                ));
            }
            if let Some(skills) = &upstream.skills
                && let Err((field, message)) = skills.validate()
            {
                return Err(invalid(format!("{path}.skills.{field}"), message));
            }
            for (field, http) in [
                ("sse", &upstream.sse),
                ("streamable_http", &upstream.streamable_http),
            ] {
                if let Some(http) = http
                    && !(http.url.starts_with("http://") || http.url.starts_with("https://"))
                {
                    return Err(invalid(
                        format!("{path}.{field}.url"),
                        format!("'{}' is not an http:// or https:// URL", http.url),
                    ));
                }
            }
        }
        if let Some(admin) = &self.admin
            && admin.token.expose().len() < 16
        {
            return Err(invalid(
                "admin.token".into(),
                "use a token of at least 16 characters (e.g. `openssl rand -hex 32`)".into(),
            ));
        }
        if let Some(anonymous) = &self.anonymous_tenant
            && !self.tenants.contains_key(anonymous)
        {
            return Err(invalid(
                "anonymous_tenant".into(),
                format!("'{anonymous}' is not one of the tenants"),
            ));
        }
        for (name, tenant) in &self.tenants {
            for (index, key) in tenant.api_keys.iter().enumerate() {
                let hex = key.strip_prefix("sha256:").unwrap_or("");
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(invalid(
                        format!("tenants.{name}.api_keys[{index}]"),
                        "expected `sha256:` and 64 hex digits (print one with `toolgate hash-key KEY`)".into(),
                    ));
                }
            }
            if let Some(limit) = &tenant.rate_limit
                && let Err(message) = limit.rate()
            {
                return Err(invalid(format!("tenants.{name}.rate_limit"), message));
            }
        }
        if let Some(jwt) = &self.jwt
            && let Err(message) = jwt.validate()
        {
            return Err(invalid("jwt".into(), message));
        }
        crate::serve::front_door_settings_valid(self)
            .map_err(|(path, message)| invalid(path, message))?;
        if self.jwt.is_some() && self.tenants.is_empty() {
            return Err(invalid(
                "jwt".into(),
                "JWTs name tenants: configure `tenants` too".into(),
            ));
        }
        if let Err(message) = crate::policy::Policy::from_config(self) {
            return Err(invalid("tenants".into(), message));
        }
        if let Err((field, message)) = self.state.validate() {
            return Err(invalid(format!("state.{field}"), message));
        }
        if self.sessions.max_sessions == 0 || self.sessions.max_per_tenant == Some(0) {
            return Err(invalid(
                "sessions".into(),
                "`max_sessions` and `max_per_tenant` must be at least 1".into(),
            ));
        }
        if self.health.interval.is_zero() {
            return Err(invalid(
                "health.interval".into(),
                "must be greater than zero".into(),
            ));
        }
        Ok(())
    }

    /// The settings a running `serve` reads once, at startup, that differ between
    /// `running` and `self` (a reloaded file): changing them needs a restart.
    pub fn restart_only_changes(&self, running: &Config) -> Vec<&'static str> {
        let mut changed = Vec::new();
        let mut check = |name, differs: bool| {
            if differs {
                changed.push(name);
            }
        };
        check("listen", self.listen != running.listen);
        check("allowed_hosts", self.allowed_hosts != running.allowed_hosts);
        check("server", self.server != running.server);
        check(
            "metrics.listen",
            self.metrics.listen != running.metrics.listen,
        );
        check(
            "max_request_body_bytes",
            self.max_request_body_bytes != running.max_request_body_bytes,
        );
        check("data_dir", self.data_dir != running.data_dir);
        check("admin", self.admin != running.admin);
        check(
            "sessions.idle_ttl",
            self.sessions.idle_ttl != running.sessions.idle_ttl,
        );
        check(
            "sessions.max_sessions",
            self.sessions.max_sessions != running.sessions.max_sessions,
        );
        check(
            "sessions.max_per_tenant",
            self.sessions.max_per_tenant != running.sessions.max_per_tenant,
        );
        check("state", self.state != running.state);
        check("telemetry", self.telemetry != running.telemetry);
        changed
    }

    /// Keeps the running values of the restart-only settings (see
    /// [`Config::restart_only_changes`]), so the swapped-in config describes what runs.
    pub fn keep_restart_only(&mut self, running: &Config) {
        self.listen.clone_from(&running.listen);
        self.allowed_hosts.clone_from(&running.allowed_hosts);
        self.server.clone_from(&running.server);
        self.metrics.listen.clone_from(&running.metrics.listen);
        self.max_request_body_bytes = running.max_request_body_bytes;
        self.data_dir.clone_from(&running.data_dir);
        self.admin.clone_from(&running.admin);
        self.sessions.idle_ttl = running.sessions.idle_ttl;
        self.sessions.max_sessions = running.sessions.max_sessions;
        self.sessions.max_per_tenant = running.sessions.max_per_tenant;
        self.state.clone_from(&running.state);
        self.telemetry.clone_from(&running.telemetry);
    }

    /// Upstream `name` as it is mounted: its settings with the global `call_timeout`
    /// and `health` filled in where it has none, so a changed global default counts as
    /// a change of every upstream that uses it.
    pub fn effective_upstream(&self, name: &str) -> Option<UpstreamConfig> {
        let mut upstream = self.upstreams.get(name)?.clone();
        upstream.call_timeout = Some(upstream.call_timeout.unwrap_or(self.call_timeout));
        upstream.health = Some(upstream.health.unwrap_or_else(|| self.health.clone()));
        Some(upstream)
    }

    /// The JSON Schema of the config file.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(Config)).unwrap_or_default()
    }
}

/// Replaces `${VAR}` and `${VAR:-default}`; `$$` escapes a dollar sign. A variable that
/// is unset and has no default is an error naming it and its line.
fn substitute_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                return Err(ConfigError::Env(format!(
                    "config line {}: '${{' without a closing '}}'",
                    line_of(text, rest, pos)
                )));
            };
            let expr = &body[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (expr, None),
            };
            if !is_variable_name(name) {
                // Not a substitution (e.g. prose in a comment): keep it as written.
                out.push_str("${");
                rest = body;
                continue;
            }
            match (env(name), default) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(ConfigError::Env(format!(
                        "config line {}: environment variable '{name}' is not set (set it, \
                         or write ${{{name}:-default}})",
                        line_of(text, rest, pos)
                    )));
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn line_of(text: &str, rest: &str, pos: usize) -> usize {
    let offset = text.len() - rest.len() + pos;
    text[..offset].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn env_substitution_with_defaults_and_escapes() {
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
        let text = "a: ${TOKEN}\nb: ${MISSING:-x}\nc: $$HOME\nd: $5\n# ${...}";
        assert_eq!(
            substitute_env(text, &env).unwrap(),
            "a: s3cret\nb: x\nc: $HOME\nd: $5\n# ${...}"
        );
        let err = substitute_env("x: 1\ny: ${NOPE}", &env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2") && err.contains("NOPE"), "{err}");
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_path() {
        let text = "upstreams:\n  ev:\n    stdio:\n      comand: node\n";
        let err = Config::parse(text, &no_env).unwrap_err().to_string();
        assert!(err.contains("upstreams.ev.stdio"), "{err}");
        assert!(err.contains("comand"), "{err}");
    }

    #[test]
    fn exactly_one_transport() {
        let text = "upstreams:\n  ev:\n    namespace: none\n";
        let err = Config::parse(text, &no_env).unwrap_err().to_string();
        assert!(
            err.contains("upstreams.ev") && err.contains("exactly one"),
            "{err}"
        );
        let two = "upstreams:\n  ev:\n    stdio: {command: x}\n    sse: {url: 'http://a'}\n";
        assert!(Config::parse(two, &no_env).is_err());
    }

    #[test]
    fn skills_upstreams_are_checked_and_resolved() {
        let err = |text: &str| Config::parse(text, &no_env).unwrap_err().to_string();
        let empty = err("upstreams:\n  sk:\n    skills: {paths: []}\n");
        assert!(
            empty.contains("upstreams.sk.skills.paths") && empty.contains("at least one"),
            "{empty}"
        );
        let blank = err("upstreams:\n  sk:\n    skills: {paths: [' ']}\n");
        assert!(blank.contains("upstreams.sk.skills.paths[0]"), "{blank}");
        let typo = err("upstreams:\n  sk:\n    skills: {path: [a]}\n");
        assert!(
            typo.contains("upstreams.sk.skills") && typo.contains("path"),
            "{typo}"
        );
        let both = err("upstreams:\n  sk:\n    skills: {paths: [a]}\n    stdio: {command: x}\n");
        assert!(both.contains("`skills` (found 2)"), "{both}");
        let dir = std::env::temp_dir().join("toolgate-config-skills-test");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("toolgate.yaml");
        let text = "upstreams:\n  sk:\n    skills: {paths: [skills, /abs/skills]}\n";
        let config = Config::load_text(&file, text).unwrap();
        let paths = &config.upstreams["sk"].skills.as_ref().unwrap().paths;
        assert_eq!(
            paths,
            &[
                dir.join("skills").display().to_string(),
                "/abs/skills".into()
            ]
        );
    }

    #[test]
    fn bad_upstream_names_are_rejected() {
        for name in ["a__b", "a.b", "a b"] {
            let text = format!("upstreams:\n  '{name}':\n    stdio: {{command: x}}\n");
            assert!(Config::parse(&text, &no_env).is_err(), "{name}");
        }
    }

    #[test]
    fn defaults_fill_in() {
        let config = Config::parse("{}", &no_env).unwrap();
        assert_eq!(config.listen, "127.0.0.1:8080");
        assert_eq!(config.call_timeout, Duration::from_secs(120));
        assert!(config.allowed_hosts.contains(&"localhost".to_owned()));
    }

    #[test]
    fn durations_are_human() {
        let text = "call_timeout: 2m\nhealth: {interval: 500ms}\n";
        let config = Config::parse(text, &no_env).unwrap();
        assert_eq!(config.call_timeout, Duration::from_secs(120));
        assert_eq!(config.health.interval, Duration::from_millis(500));
    }

    #[test]
    fn upstream_changes_use_effective_settings() {
        let old = Config::parse(
            "upstreams:\n  a: {stdio: {command: x}}\n  b: {stdio: {command: y}}\n  \
             c: {stdio: {command: z}, call_timeout: 5s}\n",
            &no_env,
        )
        .unwrap();
        // `a` keeps its settings but the global call timeout it uses changes; `b` goes;
        // `c` has its own timeout, so the global one does not touch it; `d` is new.
        let new = Config::parse(
            "call_timeout: 10s\nupstreams:\n  a: {stdio: {command: x}}\n  \
             c: {stdio: {command: z}, call_timeout: 5s}\n  d: {stdio: {command: w}}\n",
            &no_env,
        )
        .unwrap();
        let changes = UpstreamChanges::between(&old, &new);
        assert_eq!(changes.added, ["d"]);
        assert_eq!(changes.removed, ["b"]);
        assert_eq!(changes.changed, ["a"]);
        assert!(UpstreamChanges::between(&new, &new).is_empty());
    }

    #[test]
    fn restart_only_settings_are_named_and_kept() {
        let running = Config::parse("{}", &no_env).unwrap();
        let mut next = Config::parse(
            "listen: 0.0.0.0:9000\nmax_request_body_bytes: 10\nsessions: {idle_ttl: 1m}\n\
             call_timeout: 3s\n",
            &no_env,
        )
        .unwrap();
        assert_eq!(
            next.restart_only_changes(&running),
            ["listen", "max_request_body_bytes", "sessions.idle_ttl"]
        );
        next.keep_restart_only(&running);
        assert!(next.restart_only_changes(&running).is_empty());
        // What may change at run time is left as the file says.
        assert_eq!(next.call_timeout, Duration::from_secs(3));
    }

    #[test]
    fn changed_tenants_by_name() {
        let old = Config::parse(
            "tenants:\n  a: {allow: ['x__*']}\n  b: {}\n  c: {}\n",
            &no_env,
        )
        .unwrap();
        let new = Config::parse(
            "tenants:\n  a: {allow: ['y__*']}\n  c: {}\n  d: {}\n",
            &no_env,
        )
        .unwrap();
        assert_eq!(changed_tenants(&old, &new), ["a", "b", "d"]);
    }

    #[test]
    fn rate_limits_take_one_window() {
        let rate = |limit: &str| {
            Config::parse(
                &format!("tenants:\n  t:\n    rate_limit: {limit}\n"),
                &no_env,
            )
            .map(|c| c.tenants["t"].rate_limit.as_ref().unwrap().rate().unwrap())
            .map_err(|e| e.to_string())
        };
        let old = rate("{per_second: 10, burst: 20}").unwrap();
        assert_eq!(
            (old.count, old.window, old.burst),
            (10, Duration::from_secs(1), 20)
        );
        let hourly = rate("{per_hour: 20}").unwrap();
        assert_eq!(hourly.emission_interval(), Duration::from_secs(180));
        assert_eq!(hourly.burst, 20);
        assert_eq!(hourly.divided(3).burst, 7);
        assert_eq!(
            rate("{per_minute: 6}").unwrap().window,
            Duration::from_secs(60)
        );
        let both = rate("{per_second: 1, per_minute: 2}").unwrap_err();
        assert!(
            both.contains("tenants.t.rate_limit") && both.contains("exactly one"),
            "{both}"
        );
        assert!(rate("{burst: 2}").unwrap_err().contains("exactly one"));
        assert!(rate("{per_second: 0}").unwrap_err().contains("at least 1"));
    }

    #[test]
    fn schema_is_generated() {
        let schema = Config::json_schema();
        assert!(schema["properties"]["upstreams"].is_object(), "{schema}");
    }
}
