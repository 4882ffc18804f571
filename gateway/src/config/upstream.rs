//! One upstream in the config: its kind (a tagged enum, exactly one by construction) and
//! the settings every kind shares, plus the one rule for upstream names.
//!
//! The file keeps its flat shape (`{stdio: {...}, namespace: prefix, call_timeout: 5s}`):
//! `UpstreamFile` (private) is that shape, with `deny_unknown_fields`, and [`UpstreamConfig`]
//! converts from and into it, so an upstream with no kind or two kinds is a parse error
//! at its path (`upstreams.x`), and the JSON Schema still describes the file.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgate_adapters::mcp::{HttpConfig, McpTransport, StdioConfig};
use toolgate_adapters::openapi::OpenApiConfig;
use toolgate_adapters::skills::SkillsConfig;

use super::HealthConfig;

/// Longest upstream name: it prefixes every tool name (`<upstream>__<tool>`, at most 64
/// characters on every surface), so a long one leaves little room for the tool's own.
pub const MAX_UPSTREAM_NAME: usize = 32;

/// The one rule for upstream names, in the config file and in the admin API: 1–32
/// letters, digits, `_` or `-`, without `__` (it separates the upstream from the tool
/// in catalog names). The message says what to change.
pub fn check_upstream_name(name: &str) -> Result<(), String> {
    let legal = !name.is_empty()
        && name.len() <= MAX_UPSTREAM_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains(SEPARATOR);
    if legal {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a valid upstream name: use 1–{MAX_UPSTREAM_NAME} letters, digits, \
             '_' or '-', without '__' (it separates the upstream from the tool in catalog names)"
        ))
    }
}

/// Separator between upstream and tool in catalog names (`<upstream>__<tool>` under
/// [`Namespace::Prefix`]); an upstream name may not contain it.
pub const SEPARATOR: &str = "__";

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

/// Whether a tool may run as a background task (MCP's `execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    /// Only as a plain call.
    Forbidden,
    /// As a plain call or as a task, as the caller asks.
    Optional,
    /// Only as a task.
    Required,
}

impl TaskSupport {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }

    /// What a tool definition says (`execution.taskSupport`); MCP's default,
    /// `forbidden`, when it says nothing or something unknown.
    pub fn of(definition: &serde_json::Map<String, serde_json::Value>) -> TaskSupport {
        Self::of_execution(definition.get("execution"))
    }

    /// What a definition's `execution` field says.
    pub fn of_execution(execution: Option<&serde_json::Value>) -> TaskSupport {
        match execution
            .and_then(|e| e.get("taskSupport"))
            .and_then(serde_json::Value::as_str)
        {
            Some("optional") => TaskSupport::Optional,
            Some("required") => TaskSupport::Required,
            _ => TaskSupport::Forbidden,
        }
    }
}

/// Settings of one of an upstream's tools, by the upstream's own name for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSettings {
    /// Whether this tool may run as a background task (overrides the upstream's
    /// `background`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<TaskSupport>,
    /// Token budget of this tool's listed definition (overrides the upstream's and
    /// `catalog.definition_max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_max_tokens: Option<usize>,
}

/// One upstream: what it is and how the gateway treats it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "UpstreamFile", into = "UpstreamFile")]
pub struct UpstreamConfig {
    pub kind: UpstreamKind,
    pub settings: UpstreamSettings,
}

/// Where an upstream's capabilities come from.
// One value per configured upstream, read when it is mounted: the size of the OpenAPI
// variant costs nothing worth a `Box` at every construction and match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamKind {
    /// An MCP server run as a child process.
    Stdio(StdioConfig),
    /// A legacy HTTP+SSE MCP server (protocol 2024-11-05).
    Sse(HttpConfig),
    /// A streamable HTTP MCP server.
    StreamableHttp(HttpConfig),
    /// An HTTP API described by an OpenAPI or Swagger document.
    Openapi(OpenApiConfig),
    /// Skill packages (directories holding a `SKILL.md`).
    Skills(SkillsConfig),
}

impl UpstreamKind {
    /// The kind alone, without its settings.
    pub fn kind(&self) -> Kind {
        match self {
            UpstreamKind::Stdio(_) => Kind::Stdio,
            UpstreamKind::Sse(_) => Kind::Sse,
            UpstreamKind::StreamableHttp(_) => Kind::StreamableHttp,
            UpstreamKind::Openapi(_) => Kind::Openapi,
            UpstreamKind::Skills(_) => Kind::Skills,
        }
    }

    /// The kind's key in the file: `stdio`, `sse`, `streamable_http`, `openapi` or
    /// `skills`.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
}

/// The kind of a mounted upstream: one of the config file's kinds ([`UpstreamKind`]
/// without its settings), or an upstream mounted by code rather than configured (an
/// embedding application's or a test's own). Whatever the gateway decides by kind
/// matches on this; [`Kind::name`] is its one text, for the edges (JSON, logs, the
/// console).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Stdio,
    Sse,
    StreamableHttp,
    Openapi,
    Skills,
    /// Mounted by code (`Gateway::mount`), not from a config.
    Embedded,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Stdio,
        Kind::Sse,
        Kind::StreamableHttp,
        Kind::Openapi,
        Kind::Skills,
        Kind::Embedded,
    ];

    /// `stdio`, `sse`, `streamable_http`, `openapi`, `skills` (the config file's keys)
    /// or `embedded`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Sse => "sse",
            Kind::StreamableHttp => "streamable_http",
            Kind::Openapi => "openapi",
            Kind::Skills => "skills",
            Kind::Embedded => "embedded",
        }
    }

    /// The kind named `name` (a [`Kind::name`]), for an edge that reads one back.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so widths in a format string line the name up in a table.
        f.pad(self.name())
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// The settings every kind of upstream shares, as written (unset ones fall back to the
/// global values: see [`Config::resolve`](super::Config::resolve)).
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamSettings {
    pub namespace: Namespace,
    /// Overrides the global `call_timeout`.
    pub call_timeout: Option<Duration>,
    /// Overrides the global `health` settings.
    pub health: Option<HealthConfig>,
    pub max_concurrent_calls: usize,
    pub audit_arguments: bool,
    pub result_max_tokens: Option<usize>,
    /// Token budget of each tool definition as listed (overrides
    /// `catalog.definition_max_tokens`).
    pub definition_max_tokens: Option<usize>,
    /// Whether its tools may run as background tasks; `None`: the default for its
    /// kind (see [`crate::catalog::TaskModes`]).
    pub background: Option<TaskSupport>,
    /// Per-tool settings, by the upstream's own tool name.
    pub tools: BTreeMap<String, ToolSettings>,
    /// Whose credentials calls carry.
    pub credentials: CredentialSource,
    /// The OAuth client settings of `credentials: oauth`.
    pub oauth: Option<super::oauth::UpstreamOAuth>,
}

impl Default for UpstreamSettings {
    fn default() -> Self {
        Self {
            namespace: Namespace::default(),
            call_timeout: None,
            health: None,
            max_concurrent_calls: default_max_concurrent_calls(),
            audit_arguments: false,
            result_max_tokens: None,
            definition_max_tokens: None,
            background: None,
            tools: BTreeMap::new(),
            credentials: CredentialSource::Static,
            oauth: None,
        }
    }
}

/// An upstream's settings with the global fallbacks applied: what it runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSettings {
    pub namespace: Namespace,
    pub call_timeout: Duration,
    pub health: HealthConfig,
    pub max_concurrent_calls: usize,
    pub audit_arguments: bool,
    pub result_max_tokens: Option<usize>,
    pub definition_max_tokens: usize,
    pub background: Option<TaskSupport>,
    pub tools: BTreeMap<String, ToolSettings>,
    pub credentials: CredentialSource,
}

impl UpstreamConfig {
    /// `stdio`, `sse`, `streamable_http`, `openapi` or `skills`.
    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }

    /// The MCP transport, for the three MCP kinds.
    pub fn transport(&self) -> Option<McpTransport> {
        match &self.kind {
            UpstreamKind::Stdio(s) => Some(McpTransport::Stdio(s.clone())),
            UpstreamKind::Sse(h) => Some(McpTransport::Sse(h.clone())),
            UpstreamKind::StreamableHttp(h) => Some(McpTransport::StreamableHttp(h.clone())),
            UpstreamKind::Openapi(_) | UpstreamKind::Skills(_) => None,
        }
    }

    pub fn stdio(&self) -> Option<&StdioConfig> {
        match &self.kind {
            UpstreamKind::Stdio(stdio) => Some(stdio),
            _ => None,
        }
    }

    pub fn openapi(&self) -> Option<&OpenApiConfig> {
        match &self.kind {
            UpstreamKind::Openapi(openapi) => Some(openapi),
            _ => None,
        }
    }

    pub fn skills(&self) -> Option<&SkillsConfig> {
        match &self.kind {
            UpstreamKind::Skills(skills) => Some(skills),
            _ => None,
        }
    }
}

fn default_max_concurrent_calls() -> usize {
    64
}

/// One upstream. Set exactly one of `stdio`, `sse`, `streamable_http`, `openapi`,
/// `skills`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "UpstreamConfig")]
struct UpstreamFile {
    /// An HTTP API described by an OpenAPI (3.0, 3.1) or Swagger 2.0 document: every
    /// operation becomes a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    openapi: Option<OpenApiConfig>,
    /// An MCP server run as a child process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stdio: Option<StdioConfig>,
    /// A legacy HTTP+SSE MCP server (protocol 2024-11-05): `url` is its SSE endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sse: Option<HttpConfig>,
    /// A streamable HTTP MCP server: `url` is its MCP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    streamable_http: Option<HttpConfig>,
    /// Skill packages (directories holding a `SKILL.md`): each skill becomes a prompt,
    /// a tool, and a resource per file; the directories are watched for changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    skills: Option<SkillsConfig>,
    #[serde(default)]
    namespace: Namespace,
    /// Overrides the global `call_timeout` for this upstream's tools.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    call_timeout: Option<Duration>,
    /// Overrides the global `health` settings for this upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    health: Option<HealthConfig>,
    /// Calls running at once on this upstream; more wait up to 2 s, then fail with a
    /// RateLimited error.
    #[serde(default = "default_max_concurrent_calls")]
    max_concurrent_calls: usize,
    /// Log argument values in the audit line of each call (off: they may hold
    /// personal data or secrets).
    #[serde(default)]
    audit_arguments: bool,
    /// Token budget of this upstream's results (overrides `results.max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result_max_tokens: Option<usize>,
    /// Token budget of each of this upstream's tool definitions as listed (overrides
    /// `catalog.definition_max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    definition_max_tokens: Option<usize>,
    /// Whether this upstream's tools may run as background tasks (MCP tasks, REST
    /// `background: true`): `forbidden`, `optional` or `required`. Unset: `optional`
    /// for OpenAPI tools, each MCP tool's own `execution.taskSupport` (absent means
    /// `forbidden`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    background: Option<TaskSupport>,
    /// Settings of single tools, by the upstream's own tool name (not the catalog
    /// name): `{slow_report: {background: required}}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tools: BTreeMap<String, ToolSettings>,
    /// Whose credentials calls carry: `static` (the upstream's own `auth` or
    /// `headers`, one identity for every caller), `per_tenant` (each tenant's own,
    /// from `tenants.<name>.upstream_credentials.<upstream>`), `oauth` (each user's
    /// own), `client_credentials` (the gateway's service identity) or `token_exchange`
    /// (each user's token to the gateway, exchanged for one to the upstream).
    #[serde(default, skip_serializing_if = "CredentialSource::is_static")]
    credentials: CredentialSource,
    /// With `credentials: oauth`: a pre-registered client, default scopes, and whether
    /// the authorization server may be on a private network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    oauth: Option<super::oauth::UpstreamOAuth>,
}

/// Whose credentials an upstream is called with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CredentialSource {
    /// The upstream's own (`auth`, `headers`): one identity for every caller.
    #[default]
    Static,
    /// Each tenant's own (`tenants.<name>.upstream_credentials.<upstream>`), in place
    /// of the upstream's: a tenant without them is answered `authorization_required`.
    /// An MCP upstream takes one `bearer` token per tenant, on connections of that
    /// tenant's own (a stdio server: a process of the tenant's own, given the token in
    /// its `token_env`).
    PerTenant,
    /// Each user's own token from the upstream's authorization server (OAuth 2.1,
    /// streamable HTTP and SSE MCP upstreams): the gateway is the OAuth client, each
    /// user connects once through a link the gateway gives, and the gateway keeps and
    /// refreshes the token.
    Oauth,
    /// The gateway's own service identity at the upstream's authorization server
    /// (OAuth 2.1 client credentials, a secret or a signed assertion): one token for
    /// every caller, obtained and renewed by the gateway (streamable HTTP and SSE MCP
    /// upstreams).
    ClientCredentials,
    /// The caller's own token to the gateway (a JWT it validated), exchanged at the
    /// issuer that made it (RFC 8693) for one whose audience is the upstream: each
    /// user reaches the upstream as themselves without connecting (streamable HTTP
    /// and SSE MCP upstreams; a stdio server gets it in its `token_env`, in a process
    /// of the user's own).
    TokenExchange,
}

impl CredentialSource {
    fn is_static(&self) -> bool {
        *self == CredentialSource::Static
    }

    /// Each user reaches the upstream with a token of their own (and may be listed
    /// tools of their own): `oauth` and `token_exchange`.
    pub fn is_per_user(self) -> bool {
        matches!(
            self,
            CredentialSource::Oauth | CredentialSource::TokenExchange
        )
    }

    /// Each caller — a user, or with `per_tenant` a tenant — reaches an MCP upstream
    /// on connections of their own, which list that caller's tools.
    pub fn lists_per_caller(self) -> bool {
        self.is_per_user() || self == CredentialSource::PerTenant
    }
}

impl TryFrom<UpstreamFile> for UpstreamConfig {
    type Error = String;

    fn try_from(file: UpstreamFile) -> Result<Self, String> {
        let kind = super::one_of::exactly_one(
            [
                file.stdio.map(UpstreamKind::Stdio),
                file.sse.map(UpstreamKind::Sse),
                file.streamable_http.map(UpstreamKind::StreamableHttp),
                file.openapi.map(UpstreamKind::Openapi),
                file.skills.map(UpstreamKind::Skills),
            ],
            &["stdio", "sse", "streamable_http", "openapi", "skills"],
        )?;
        Ok(UpstreamConfig {
            kind,
            settings: UpstreamSettings {
                namespace: file.namespace,
                call_timeout: file.call_timeout,
                health: file.health,
                max_concurrent_calls: file.max_concurrent_calls,
                audit_arguments: file.audit_arguments,
                result_max_tokens: file.result_max_tokens,
                definition_max_tokens: file.definition_max_tokens,
                background: file.background,
                tools: file.tools,
                credentials: file.credentials,
                oauth: file.oauth,
            },
        })
    }
}

impl From<UpstreamConfig> for UpstreamFile {
    fn from(upstream: UpstreamConfig) -> Self {
        let UpstreamSettings {
            namespace,
            call_timeout,
            health,
            max_concurrent_calls,
            audit_arguments,
            result_max_tokens,
            definition_max_tokens,
            background,
            tools,
            credentials,
            oauth,
        } = upstream.settings;
        let mut file = UpstreamFile {
            openapi: None,
            stdio: None,
            sse: None,
            streamable_http: None,
            skills: None,
            namespace,
            call_timeout,
            health,
            max_concurrent_calls,
            audit_arguments,
            result_max_tokens,
            definition_max_tokens,
            background,
            tools,
            credentials,
            oauth,
        };
        match upstream.kind {
            UpstreamKind::Stdio(stdio) => file.stdio = Some(stdio),
            UpstreamKind::Sse(http) => file.sse = Some(http),
            UpstreamKind::StreamableHttp(http) => file.streamable_http = Some(http),
            UpstreamKind::Openapi(openapi) => file.openapi = Some(openapi),
            UpstreamKind::Skills(skills) => file.skills = Some(skills),
        }
        file
    }
}

super::one_of::schema_of_file_shape!(UpstreamConfig, UpstreamFile);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_name_rule() {
        for good in [
            "a",
            "everything",
            "my-api_2",
            &"x".repeat(MAX_UPSTREAM_NAME),
        ] {
            assert!(check_upstream_name(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_UPSTREAM_NAME + 1);
        for bad in ["", "a__b", "a.b", "a b", "é", long.as_str()] {
            let message = check_upstream_name(bad).unwrap_err();
            assert!(message.contains("1–32 letters"), "{message}");
        }
    }

    #[test]
    fn background_is_set_per_upstream_and_per_tool() {
        let text = "openapi: {spec_path: api.json}\nbackground: forbidden\ntools:\n  report: {background: required}\n";
        let upstream: UpstreamConfig = serde_norway::from_str(text).unwrap();
        assert_eq!(upstream.settings.background, Some(TaskSupport::Forbidden));
        assert_eq!(
            upstream.settings.tools["report"].background,
            Some(TaskSupport::Required)
        );
        let back: UpstreamConfig =
            serde_norway::from_str(&serde_norway::to_string(&upstream).unwrap()).unwrap();
        assert_eq!(back, upstream);
        for bad in [
            "stdio: {command: x}\nbackground: sometimes\n",
            "stdio: {command: x}\ntools: {t: {backgruond: optional}}\n",
        ] {
            let error = serde_norway::from_str::<UpstreamConfig>(bad).unwrap_err();
            assert!(
                error.to_string().contains("background")
                    || error.to_string().contains("backgruond"),
                "{error}"
            );
        }
    }

    #[test]
    fn kind_names_are_the_file_keys_and_read_back() {
        for kind in Kind::ALL {
            assert_eq!(Kind::from_name(kind.name()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
        assert_eq!(Kind::StreamableHttp.name(), "streamable_http");
        assert_eq!(format!("{:<8}|", Kind::Sse), "sse     |");
        assert_eq!(Kind::from_name("mcp"), None);
    }

    #[test]
    fn kinds_round_trip_through_the_file_shape() {
        let text = "stdio: {command: x}\nnamespace: none\ncall_timeout: 5s\n";
        let upstream: UpstreamConfig = serde_norway::from_str(text).unwrap();
        assert_eq!(upstream.kind_name(), "stdio");
        assert_eq!(upstream.kind.kind(), Kind::Stdio);
        assert_eq!(upstream.stdio().unwrap().command, "x");
        assert!(upstream.openapi().is_none() && upstream.skills().is_none());
        assert_eq!(upstream.settings.namespace, Namespace::None);
        assert_eq!(upstream.settings.call_timeout, Some(Duration::from_secs(5)));
        let back: UpstreamConfig =
            serde_norway::from_str(&serde_norway::to_string(&upstream).unwrap()).unwrap();
        assert_eq!(back, upstream);
    }
}
