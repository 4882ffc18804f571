//! The `state:` section of the config file: which engine holds what replicas share
//! (see [`crate::state`]). Re-exported from [`crate::config`].

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which engine holds shared state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StateBackend {
    /// In this process only: right for one gateway process.
    #[default]
    Memory,
    /// A Redis server shared by every replica (`state.url`).
    Redis,
}

/// What a shared rate limit does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailPolicy {
    /// Keep serving, each replica limiting on its own at the tenant's rate divided by
    /// `state.replicas`.
    #[default]
    FailOpen,
    /// Refuse rate-limited tenants' requests (503) until Redis answers again.
    FailClosed,
}

/// Where shared state lives. Sessions (and their expanded tools), MCP transport
/// sessions, tenant rate limits and runtime registrations are kept here; with
/// `backend: redis` every replica sees the same ones, so no sticky routing is needed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    #[serde(default)]
    pub backend: StateBackend,
    /// `redis://[user:password@]host:port[/db]`, `rediss://…` for TLS (or
    /// `redis+unix:///path`), required for `backend: redis`. It may carry a password:
    /// write `url: ${REDIS_URL}`; it is never logged (only host and port are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<toolgate_adapters::Secret>,
    /// For `rediss://`: a PEM file of the CA certificates that sign the server's
    /// certificate (a managed Redis's CA, a private CA), trusted instead of the
    /// system's roots. Without it the system's trust store decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Prefix of every Redis key and channel (several gateways can share one Redis
    /// under different prefixes).
    #[serde(default = "default_key_prefix")]
    pub key_prefix: String,
    /// How many replicas share the tenants' rate limits: with `fail_open`, each limits
    /// on its own at the rate divided by this while Redis is unreachable.
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    /// Rate limits while Redis is unreachable: `fail_open` (default) or `fail_closed`.
    #[serde(default)]
    pub on_unavailable: FailPolicy,
    /// Bound for connecting to Redis.
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub connect_timeout: Duration,
    /// Bound for one Redis command; a slower answer counts as Redis being unavailable.
    #[serde(default = "default_command_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub command_timeout: Duration,
}

fn default_key_prefix() -> String {
    "toolgate:".to_owned()
}

fn default_replicas() -> u32 {
    1
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(2)
}

fn default_command_timeout() -> Duration {
    Duration::from_secs(1)
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            backend: StateBackend::Memory,
            url: None,
            tls_ca_file: None,
            key_prefix: default_key_prefix(),
            replicas: default_replicas(),
            on_unavailable: FailPolicy::FailOpen,
            connect_timeout: default_connect_timeout(),
            command_timeout: default_command_timeout(),
        }
    }
}

impl StateConfig {
    /// Every problem of the fields, each naming its field (relative to `state`).
    pub(crate) fn problems(&self) -> Vec<(String, String)> {
        let mut problems: Vec<(String, String)> = Vec::new();
        if self.replicas == 0 {
            problems.push(("replicas".into(), "must be at least 1".into()));
        }
        if self.connect_timeout.is_zero() || self.command_timeout.is_zero() {
            problems.push((
                "command_timeout".into(),
                "`connect_timeout` and `command_timeout` must be greater than zero".into(),
            ));
        }
        if self.key_prefix.is_empty() || self.key_prefix.len() > 64 {
            problems.push(("key_prefix".into(), "use 1 to 64 characters".into()));
        }
        match (self.backend, &self.url) {
            (StateBackend::Memory, _) => {}
            (StateBackend::Redis, None) => problems.push((
                "url".into(),
                "`backend: redis` needs `url` (e.g. `url: ${REDIS_URL}`)".into(),
            )),
            (StateBackend::Redis, Some(url)) => {
                let url = url.expose();
                if self.tls_ca_file.is_some() && !url.starts_with("rediss://") {
                    problems.push((
                        "tls_ca_file".into(),
                        "a CA file is for TLS: use a `rediss://` URL with it".into(),
                    ));
                }
                // The parser's own message may echo the URL (and its password).
                if redis::Client::open(url).is_err() {
                    problems.push((
                        "url".into(),
                        "not a valid Redis URL: expected `redis://[user:password@]host:port[/db]`, \
                         `rediss://…` (TLS) or `redis+unix:///path/to/socket`"
                            .into(),
                    ));
                }
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn state_backend_is_checked_and_the_url_never_printed() {
        let memory = Config::parse("{}", &no_env).unwrap();
        assert_eq!(memory.state.backend, StateBackend::Memory);
        assert_eq!(memory.state.key_prefix, "toolgate:");
        let env = |name: &str| {
            (name == "REDIS_URL").then(|| "redis://:pw-secret@10.0.0.5:6380/2".to_owned())
        };
        let redis = Config::parse(
            "state: {backend: redis, url: '${REDIS_URL}', replicas: 3, on_unavailable: fail_closed}\n",
            &env,
        )
        .unwrap();
        assert_eq!(redis.state.replicas, 3);
        assert_eq!(redis.state.on_unavailable, FailPolicy::FailClosed);
        assert!(!format!("{:?}", redis.state).contains("pw-secret"));
        for (text, field) in [
            ("state: {backend: redis}\n", "state.url"),
            ("state: {backend: redis, url: 'http://x'}\n", "state.url"),
            (
                "state: {backend: redis, url: 'redis://h', replicas: 0}\n",
                "state.replicas",
            ),
            (
                "state: {backend: redis, url: 'redis://h', tls_ca_file: ca.pem}\n",
                "state.tls_ca_file",
            ),
            ("state: {backend: memcached}\n", "state.backend"),
            (
                "state: {backend: redis, url: 'redis://h', pool: 3}\n",
                "state",
            ),
        ] {
            let err = Config::parse(text, &no_env).unwrap_err().to_string();
            assert!(err.contains(field), "{text}: {err}");
        }
        let bad = Config::parse(
            "state: {backend: redis, url: 'nope://:pw-secret@h'}\n",
            &no_env,
        )
        .unwrap_err()
        .to_string();
        assert!(!bad.contains("pw-secret"), "{bad}");
    }
}
