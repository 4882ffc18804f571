//! The front door's settings: the listener's limits (`server:`), cross-origin access
//! (`cors:`) and who may scrape `/metrics` (`metrics:`), with the checks serde cannot
//! make. The code that applies them is in `crate::serve` (listener, guard, ops).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The listener's limits (`server:` in the config; read at startup).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// A request's headers must have arrived this long after the connection opened
    /// (or after the first byte of a later request on the same connection).
    #[serde(default = "default_header_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub header_timeout: Duration,
    /// A request's whole body must have arrived this long after its headers.
    #[serde(default = "default_body_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub body_timeout: Duration,
    /// A kept-alive connection with no request in flight is closed after this.
    #[serde(default = "default_idle_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub idle_timeout: Duration,
    /// Most connections served at once; further ones wait to be accepted.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Most connections of one client address (IPv6: one /64) served at once; more
    /// are closed as soon as accepted, so one client holding many idle sockets cannot
    /// take every place under `max_connections`. Absent, a quarter of
    /// `max_connections` (at least 1). Behind a proxy every client has the proxy's
    /// address: set it to what the proxy opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections_per_address: Option<usize>,
}

fn default_header_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_body_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_idle_timeout() -> Duration {
    Duration::from_secs(120)
}

fn default_max_connections() -> usize {
    4096
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            header_timeout: default_header_timeout(),
            body_timeout: default_body_timeout(),
            idle_timeout: default_idle_timeout(),
            max_connections: default_max_connections(),
            max_connections_per_address: None,
        }
    }
}

impl ServerConfig {
    /// The most connections one client address is served at once.
    pub fn connections_per_address(&self) -> usize {
        self.max_connections_per_address
            .unwrap_or(self.max_connections / 4)
            .clamp(1, self.max_connections.max(1))
    }

    /// `(field, message)` for a setting that cannot work.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (field, value) in [
            ("header_timeout", self.header_timeout),
            ("body_timeout", self.body_timeout),
            ("idle_timeout", self.idle_timeout),
        ] {
            if value.is_zero() {
                return Err((field, "must be longer than 0s".into()));
            }
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err((
                "max_connections",
                format!("must be between 1 and {MAX_CONNECTIONS}"),
            ));
        }
        if let Some(share) = self.max_connections_per_address
            && !(1..=self.max_connections).contains(&share)
        {
            return Err((
                "max_connections_per_address",
                format!(
                    "must be between 1 and `server.max_connections` ({})",
                    self.max_connections
                ),
            ));
        }
        Ok(())
    }
}

/// The largest `max_connections` (far beyond any process's file descriptors).
pub(crate) const MAX_CONNECTIONS: usize = 1 << 20;

/// Cross-origin access from browsers (`cors:` in the config).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorsConfig {
    /// Origins (`https://app.example.com`: scheme, host and port, no path) whose web
    /// pages may call the gateway: their `Origin` header is accepted on `/mcp`, `/v1`
    /// and `/admin`, preflights are answered, and answers carry CORS headers. Default:
    /// none — browsers may use the gateway only from its own origin.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
}

impl CorsConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (index, origin) in self.allowed_origins.iter().enumerate() {
            if parse_origin(origin).is_none() {
                return Err((
                    format!("cors.allowed_origins[{index}]"),
                    format!(
                        "'{origin}' is not an origin: write scheme://host[:port] \
                         (e.g. https://app.example.com), without a path"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Who may scrape `/metrics`, and where (`metrics:` in the config).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// A bearer token for scrapers (`Authorization: Bearer <token>`), besides the admin
    /// token; put it in the environment: `token: ${TOOLGATE_METRICS_TOKEN}`. At least
    /// 16 characters and not an example value (`openssl rand -hex 32` makes one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<toolgate_adapters::Secret>,
    /// Serve `/metrics` on this address instead of the main listener (e.g.
    /// `0.0.0.0:9090` for a Prometheus that scrapes pods); there it needs no token and
    /// no allowed `Host`, so keep the address off public networks. Read at startup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
}

impl MetricsConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        if let Some(token) = &self.token
            && let Some(message) = super::safety::token_problem(token.expose())
        {
            return Err(("metrics.token".into(), message));
        }
        Ok(())
    }
}

/// Checks the front door's settings (`server`, `cors`, `metrics`, `public_url`), each
/// on its own: `(path, message)` for every one that cannot work.
pub(crate) fn problems(config: &super::Config) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    if let Err((field, message)) = config.server.validate() {
        problems.push((format!("server.{field}"), message));
    }
    problems.extend(config.cors.validate().err());
    problems.extend(config.metrics.validate().err());
    if let Some(url) = &config.public_url {
        let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
        let bare = url
            .split_once("://")
            .map(|(_, rest)| rest.trim_end_matches('/'))
            .is_some_and(|rest| !rest.is_empty() && !rest.contains(['?', '#']));
        if !(scheme_ok && bare) {
            problems.push((
                "public_url".into(),
                format!(
                    "'{url}' is not a base URL: write http(s)://host[:port][/path] \
                     (e.g. https://tools.example.com), without query or fragment"
                ),
            ));
        }
    }
    problems
}

/// `host[:port]`, an IPv6 host in brackets or bare (then without a port), read in
/// place: this runs on every request.
pub(crate) fn split_authority(text: &str) -> Option<(&str, Option<u16>)> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok()?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match text.split_once(':') {
        Some((host, port)) if !port.contains(':') && !host.is_empty() => {
            Some((host, Some(port.parse().ok()?)))
        }
        // A bare IPv6 address.
        Some(_) => Some((text, None)),
        None if text.is_empty() => None,
        None => Some((text, None)),
    }
}

/// `(scheme, host, port)` of an origin (`scheme://host[:port]`), the port defaulted
/// from the scheme; `None` for `null` and anything else.
pub(crate) fn parse_origin(origin: &str) -> Option<(&str, &str, u16)> {
    let (scheme, rest) = origin.trim().split_once("://")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let (host, port) = split_authority(rest)?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    Some((scheme, host, port.unwrap_or(default)))
}
