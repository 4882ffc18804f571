//! The checks serde cannot make (names, cross-references, lengths, URLs), run after a
//! successful parse. Every problem is collected with its path, so one round of edits
//! can fix them all.

use std::fmt;

use super::{Config, UpstreamKind, check_upstream_name};

/// One problem in a config file: where, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The path inside the document (`upstreams.x.stdio`, `(document)`).
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config error at {}: {}", self.path, self.message)
    }
}

/// Every problem found, in document order of the checks; displayed one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, problem) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

impl Config {
    /// Every semantic problem of this (parsed) config; empty when it is valid.
    pub fn problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut invalid = |path: String, message: String| problems.push(Problem { path, message });
        self.upstream_problems(&mut invalid);
        self.access_problems(&mut invalid);
        self.limit_problems(&mut invalid);
        problems
    }

    /// The upstreams': names, URLs, skills directories, credential sources.
    fn upstream_problems(&self, invalid: &mut impl FnMut(String, String)) {
        for (name, upstream) in &self.upstreams {
            let path = format!("upstreams.{name}");
            if let Err(message) = check_upstream_name(name) {
                invalid(path.clone(), message);
            }
            if upstream.settings.credentials == crate::config::CredentialSource::PerTenant
                && !matches!(
                    upstream.kind.kind(),
                    crate::config::Kind::Openapi
                        | crate::config::Kind::StreamableHttp
                        | crate::config::Kind::Sse
                        | crate::config::Kind::Stdio
                )
            {
                invalid(
                    format!("{path}.credentials"),
                    format!(
                        "`per_tenant` is taken by openapi, streamable_http, sse and stdio \
                         upstreams, not by a {} upstream",
                        upstream.kind.name()
                    ),
                );
            }
            stdio_token_problems(&path, upstream, invalid);
            self.oauth_problems(&path, upstream, invalid);
            match &upstream.kind {
                UpstreamKind::Skills(skills) => {
                    for (field, message) in skills.problems() {
                        invalid(format!("{path}.skills.{field}"), message);
                    }
                }
                UpstreamKind::Sse(http) | UpstreamKind::StreamableHttp(http)
                    if !(http.url.starts_with("http://") || http.url.starts_with("https://")) =>
                {
                    invalid(
                        format!("{path}.{}.url", upstream.kind_name()),
                        format!("'{}' is not an http:// or https:// URL", http.url),
                    );
                }
                _ => {}
            }
        }
    }

    /// `credentials: oauth` and its settings: an HTTP MCP upstream, a public URL to
    /// send users back to, keys that outlive the process where tokens do.
    fn oauth_problems(
        &self,
        path: &str,
        upstream: &crate::config::UpstreamConfig,
        invalid: &mut impl FnMut(String, String),
    ) {
        use crate::config::{CredentialSource, Kind};
        let exchange_only = upstream.settings.oauth.as_ref().and_then(|o| {
            [
                ("issuer", o.issuer.is_some()),
                ("audience", o.audience.is_some()),
                ("subject_token_type", o.subject_token_type.is_some()),
            ]
            .into_iter()
            .find(|(_, set)| *set)
        });
        if upstream.settings.credentials != CredentialSource::TokenExchange
            && let Some((field, _)) = exchange_only
        {
            invalid(
                format!("{path}.oauth.{field}"),
                "used only with `credentials: token_exchange`".into(),
            );
        }
        if upstream.settings.credentials == CredentialSource::ClientCredentials {
            self.client_credentials_problems(path, upstream, invalid);
            return;
        }
        if upstream.settings.credentials == CredentialSource::TokenExchange {
            self.token_exchange_problems(path, upstream, invalid);
            return;
        }
        let oauth = upstream.settings.credentials == CredentialSource::Oauth;
        if !oauth {
            if upstream.settings.oauth.is_some() {
                invalid(
                    format!("{path}.oauth"),
                    "these settings are used only with `credentials: oauth`".into(),
                );
            }
            return;
        }
        let openapi = upstream.kind.kind() == Kind::Openapi;
        if !(openapi || matches!(upstream.kind.kind(), Kind::StreamableHttp | Kind::Sse)) {
            invalid(
                format!("{path}.credentials"),
                format!(
                    "`oauth` is taken by streamable_http, sse and openapi upstreams; a {} \
                     upstream is called with its own credentials (`static`), each tenant's \
                     (`per_tenant`) or each user's exchanged token (`token_exchange`)",
                    upstream.kind.name()
                ),
            );
        }
        if !openapi
            && let Some(scheme) = upstream
                .settings
                .oauth
                .as_ref()
                .and_then(|o| o.scheme.as_ref())
        {
            invalid(
                format!("{path}.oauth.scheme"),
                format!(
                    "'{scheme}': a security scheme is chosen only for an openapi upstream (an \
                     MCP server names its authorization server in its 401 answer)"
                ),
            );
        }
        if self.public_url.is_none() {
            invalid(
                format!("{path}.credentials"),
                "`oauth` needs `public_url`: users come back to it from the upstream's \
                 authorization server (`<public_url>/oauth/callback`)"
                    .into(),
            );
        }
        if self.state.backend == crate::config::StateBackend::Redis
            && self.oauth.token_keys.is_empty()
        {
            invalid(
                "oauth.token_keys".into(),
                "with `state.backend: redis` stored tokens outlive this process: give the \
                 key that seals them (`openssl rand -base64 32`) in `oauth.token_keys`"
                    .into(),
            );
        }
        if let Some(settings) = &upstream.settings.oauth
            && settings.client_secret.is_some()
            && settings.client_id.is_none()
        {
            invalid(
                format!("{path}.oauth.client_secret"),
                "a client secret needs its `client_id`".into(),
            );
        }
    }

    /// `credentials: client_credentials`: an HTTP MCP upstream, and a client that can
    /// authenticate (a secret or a private key).
    fn client_credentials_problems(
        &self,
        path: &str,
        upstream: &crate::config::UpstreamConfig,
        invalid: &mut impl FnMut(String, String),
    ) {
        service_client_problems("client_credentials", path, upstream, invalid);
    }

    /// `credentials: token_exchange`: an HTTP MCP upstream, callers who bring JWTs the
    /// gateway verifies, the issuer to exchange them at and a client to do it as.
    fn token_exchange_problems(
        &self,
        path: &str,
        upstream: &crate::config::UpstreamConfig,
        invalid: &mut impl FnMut(String, String),
    ) {
        service_client_problems("token_exchange", path, upstream, invalid);
        if self.jwt.is_none() {
            invalid(
                format!("{path}.credentials"),
                "`token_exchange` exchanges the JWT each caller authenticated with: configure \
                 `jwt` (the identity provider whose tokens callers bring)"
                    .into(),
            );
        }
        let issuer = upstream
            .settings
            .oauth
            .as_ref()
            .and_then(|o| o.issuer.as_ref());
        if issuer.is_none() {
            invalid(
                format!("{path}.oauth.issuer"),
                "`token_exchange` needs the issuer to exchange callers' tokens at (its \
                 metadata names the token endpoint)"
                    .into(),
            );
        }
    }

    /// Who may call: the admin token, tenants and their keys and credentials, JWT
    /// settings, the front door, the policy's patterns.
    fn access_problems(&self, invalid: &mut impl FnMut(String, String)) {
        if let Some(admin) = &self.admin
            && let Some(message) = super::safety::token_problem(admin.token.expose())
        {
            invalid("admin.token".into(), message);
        }
        if let Some(anonymous) = &self.anonymous_tenant
            && !self.tenants.contains_key(anonymous)
        {
            invalid(
                "anonymous_tenant".into(),
                format!("'{anonymous}' is not one of the tenants"),
            );
        }
        for (name, tenant) in &self.tenants {
            for upstream in tenant.upstream_credentials.keys() {
                let per_tenant = self.upstreams.get(upstream).is_some_and(|u| {
                    u.settings.credentials == crate::config::CredentialSource::PerTenant
                });
                let mcp = self.upstreams.get(upstream).is_some_and(|u| {
                    matches!(
                        u.kind.kind(),
                        crate::config::Kind::StreamableHttp
                            | crate::config::Kind::Sse
                            | crate::config::Kind::Stdio
                    )
                });
                let credentials = &tenant.upstream_credentials[upstream];
                if per_tenant && mcp && crate::config::mcp_bearer(credentials).is_none() {
                    invalid(
                        format!("tenants.{name}.upstream_credentials.{upstream}"),
                        "an MCP upstream takes one `bearer` token per tenant (sent as \
                         `Authorization: Bearer`, or to a stdio server in its `token_env`): \
                         give exactly one credential, of type `bearer`"
                            .into(),
                    );
                }
                if !per_tenant {
                    invalid(
                        format!("tenants.{name}.upstream_credentials.{upstream}"),
                        format!(
                            "no upstream '{upstream}' is configured with `credentials: \
                             per_tenant`: these credentials would never be used"
                        ),
                    );
                }
            }
            for (index, key) in tenant.api_keys.iter().enumerate() {
                if let Some(subject) = key.subject()
                    && let Err(why) = crate::config::subject::check(subject)
                {
                    invalid(format!("tenants.{name}.api_keys[{index}].subject"), why);
                }
                let hex = key.hash().strip_prefix("sha256:").unwrap_or("");
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    invalid(
                        format!("tenants.{name}.api_keys[{index}]"),
                        "expected `sha256:` and 64 hex digits (print one with `toolgate hash-key KEY`)".into(),
                    );
                }
            }
        }
        if let Some(jwt) = &self.jwt
            && let Err(message) = jwt.validate()
        {
            invalid("jwt".into(), message);
        }
        for (path, message) in super::front_door::problems(self) {
            invalid(path, message);
        }
        if self.jwt.is_some() && self.tenants.is_empty() {
            invalid(
                "jwt".into(),
                "JWTs name tenants: configure `tenants` too".into(),
            );
        }
        for (path, message) in super::patterns::pattern_problems(self) {
            invalid(path, message);
        }
    }

    /// The bounds: state, tasks, sessions, definition budgets, health checks.
    fn limit_problems(&self, invalid: &mut impl FnMut(String, String)) {
        for (field, message) in self.state.problems() {
            invalid(format!("state.{field}"), message);
        }
        for (field, message) in self.tasks.validate() {
            invalid(format!("tasks.{field}"), message.into());
        }
        if self.sessions.max_sessions == 0 || self.sessions.max_per_tenant == Some(0) {
            invalid(
                "sessions".into(),
                "`max_sessions` and `max_per_tenant` must be at least 1".into(),
            );
        }
        if self.sessions.list_page_size == 0 {
            invalid(
                "sessions.list_page_size".into(),
                "must be at least 1 (a list answer holds at least one item)".into(),
            );
        }
        let min = super::MIN_DEFINITION_MAX_TOKENS;
        let too_small = |tokens: Option<usize>| tokens.is_some_and(|t| t < min);
        let message = || format!("must be at least {min} tokens");
        if too_small(Some(self.catalog.definition_max_tokens)) {
            invalid("catalog.definition_max_tokens".into(), message());
        }
        for (name, upstream) in &self.upstreams {
            let settings = &upstream.settings;
            if too_small(settings.definition_max_tokens) {
                invalid(format!("upstreams.{name}.definition_max_tokens"), message());
            }
            for (tool, tool_settings) in &settings.tools {
                if too_small(tool_settings.definition_max_tokens) {
                    invalid(
                        format!("upstreams.{name}.tools.{tool}.definition_max_tokens"),
                        message(),
                    );
                }
            }
        }
        if self.health.interval.is_zero() {
            invalid("health.interval".into(), "must be greater than zero".into());
        }
    }
}

/// What an upstream whose tokens the gateway obtains as a client of its own
/// (`credentials` named `source`) needs: to be an HTTP MCP server, and a client that can
/// authenticate (`oauth.client_id` with a secret or a private key).
fn service_client_problems(
    source: &str,
    path: &str,
    upstream: &crate::config::UpstreamConfig,
    invalid: &mut impl FnMut(String, String),
) {
    use crate::config::Kind;
    let settings = upstream.settings.oauth.clone().unwrap_or_default();
    // A stdio server's tokens come from `oauth.issuer`, named in the config: it has
    // no 401 answer to name its authorization server, which `client_credentials`
    // learns from.
    let stdio_ok = source == "token_exchange";
    match upstream.kind.kind() {
        Kind::StreamableHttp | Kind::Sse => {}
        Kind::Stdio if stdio_ok => {
            if settings.audience.is_none() {
                invalid(
                    format!("{path}.oauth.audience"),
                    "a stdio server has no URL to name it at the issuer: set `oauth.audience` \
                     to the audience its tokens must carry"
                        .into(),
                );
            }
        }
        _ => invalid(
            format!("{path}.credentials"),
            format!(
                "`{source}` is taken by streamable_http and sse upstreams{}, not by a {} \
                 upstream",
                if stdio_ok { " (and stdio)" } else { "" },
                upstream.kind.name()
            ),
        ),
    }
    if settings.client_id.is_none()
        || (settings.client_secret.is_none() && settings.private_key.is_none())
    {
        invalid(
            format!("{path}.oauth"),
            format!(
                "`{source}` needs the client the gateway obtains tokens as: \
                 `oauth.client_id` and `oauth.client_secret` (or `oauth.private_key`)"
            ),
        );
    }
}

/// A stdio upstream called with each caller's own token gets it in the environment
/// variable `token_env` names: needed with `per_tenant` and `token_exchange`, and
/// meaningless otherwise.
fn stdio_token_problems(
    path: &str,
    upstream: &crate::config::UpstreamConfig,
    invalid: &mut impl FnMut(String, String),
) {
    use crate::config::CredentialSource;
    let UpstreamKind::Stdio(stdio) = &upstream.kind else {
        return;
    };
    let per_caller = matches!(
        upstream.settings.credentials,
        CredentialSource::PerTenant | CredentialSource::TokenExchange
    );
    match &stdio.token_env {
        None if per_caller => invalid(
            format!("{path}.stdio.token_env"),
            "a stdio server is given each caller's token in an environment variable: name \
             it (`token_env: GITHUB_PERSONAL_ACCESS_TOKEN`)"
                .into(),
        ),
        Some(_) if !per_caller => invalid(
            format!("{path}.stdio.token_env"),
            "used only with `credentials: per_tenant` or `token_exchange`".into(),
        ),
        Some(name) if !is_env_name(name) => invalid(
            format!("{path}.stdio.token_env"),
            format!("'{name}' is not an environment variable name (letters, digits, `_`)"),
        ),
        Some(name) if stdio.env.contains_key(name) => invalid(
            format!("{path}.stdio.token_env"),
            format!("'{name}' is also set in `env`: each caller's token takes its place"),
        ),
        _ => {}
    }
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::super::ConfigError;
    use super::*;

    #[test]
    fn every_problem_is_reported_with_its_path() {
        let text = "upstreams:\n  a__b: {stdio: {command: x}}\n  \
                    web: {sse: {url: 'ftp://x'}}\n\
                    anonymous_tenant: nobody\n\
                    health: {interval: 0s}\n";
        let err = Config::parse(text, &|_| None).unwrap_err();
        let ConfigError::Invalid(problems) = &err else {
            panic!("not a validation error: {err}");
        };
        let paths: Vec<&str> = problems.0.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "upstreams.a__b",
                "upstreams.web.sse.url",
                "anonymous_tenant",
                "health.interval"
            ]
        );
        let lines: Vec<String> = err.to_string().lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), 4, "{err}");
        assert!(
            lines[2].starts_with("config error at anonymous_tenant: 'nobody'"),
            "{err}"
        );
    }

    #[test]
    fn a_list_page_holds_at_least_one_item() {
        let err = Config::parse("sessions: {list_page_size: 0}\n", &|_| None).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("config error at sessions.list_page_size: must be at least 1"),
            "{err}"
        );
        let config = Config::parse("sessions: {list_page_size: 1}\n", &|_| None).unwrap();
        assert_eq!(config.sessions.list_page_size, 1);
    }

    #[test]
    fn every_problem_inside_one_section_is_reported_too() {
        let text = "state: {replicas: 0, key_prefix: ''}\n\
                    upstreams:\n  s: {skills: {paths: ['', ' ']}}\n";
        let err = Config::parse(text, &|_| None).unwrap_err();
        let ConfigError::Invalid(problems) = &err else {
            panic!("not a validation error: {err}");
        };
        let paths: Vec<&str> = problems.0.iter().map(|p| p.path.as_str()).collect();
        for expected in [
            "upstreams.s.skills.paths[0]",
            "upstreams.s.skills.paths[1]",
            "state.replicas",
            "state.key_prefix",
        ] {
            assert!(
                paths.contains(&expected),
                "{expected} missing from {paths:?}"
            );
        }
    }

    #[test]
    fn every_bad_tenant_pattern_is_reported() {
        let text = "tenants:\n  a:\n    allow: ['ok__*', 'a[', '!b[']\n    deny: ['c{']\n";
        let err = Config::parse(text, &|_| None).unwrap_err();
        let ConfigError::Invalid(problems) = &err else {
            panic!("not a validation error: {err}");
        };
        let paths: Vec<&str> = problems.0.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "tenants.a.allow[1]",
                "tenants.a.allow[2]",
                "tenants.a.deny[0]"
            ],
            "{err}"
        );
    }

    #[test]
    fn bad_upstream_names_are_rejected() {
        let long = "x".repeat(33);
        for name in ["a__b", "a.b", "a b", long.as_str()] {
            let text = format!("upstreams:\n  '{name}':\n    stdio: {{command: x}}\n");
            let err = Config::parse(&text, &|_| None).unwrap_err().to_string();
            assert!(err.contains(&format!("upstreams.{name}")), "{err}");
        }
    }
}
