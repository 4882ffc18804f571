//! The one way from an upstream's config to a mounted upstream, used at startup, on
//! reload and by the admin API: which adapter runs it, and the per-upstream settings
//! it is mounted with.

use std::sync::Arc;
use std::time::Duration;

use toolgate_adapters::DynUpstream;
use toolgate_adapters::mcp::{self, McpOptions};
use toolgate_adapters::skills::SkillsUpstream;

use super::Mounted;
use crate::config::{Config, UpstreamSettings};

impl Mounted {
    /// Wraps `upstream` with the settings `config` gives upstream `name`: its own where
    /// it sets them, the global `call_timeout` and `health` where it does not. A
    /// runtime registration (not in the config) gets the global settings and a prefix.
    pub fn configured(
        config: &Config,
        name: &str,
        upstream: DynUpstream,
        kind: &'static str,
    ) -> Mounted {
        // A registration not in the config: the global settings, nothing of its own.
        let settings = config
            .upstream_settings(name)
            .unwrap_or_else(|| config.resolve(&UpstreamSettings::default()));
        let shaping =
            crate::catalog::Shaping::from_settings(kind, &settings, config.results.encoding);
        let mut mounted = Mounted::new(
            upstream,
            kind,
            settings.namespace,
            settings.call_timeout,
            settings.health,
        );
        mounted.concurrency = Arc::new(tokio::sync::Semaphore::new(
            settings.max_concurrent_calls.max(1),
        ));
        mounted.audit_arguments = settings.audit_arguments;
        mounted.result_max_tokens = settings.result_max_tokens;
        mounted.shaping = shaping;
        mounted
    }
}

/// Starts upstream `name` of `config` when it needs no import first: an MCP upstream
/// (its supervisor connects in the background) or a skills upstream (it scans in the
/// background); `None` for an OpenAPI upstream (see `registry::import`) or a name not
/// in the config.
pub(super) fn start_local(config: &Config, name: &str) -> Option<Mounted> {
    let upstream_config = config.upstreams.get(name)?;
    let (upstream, kind): (DynUpstream, &'static str) =
        match (upstream_config.skills(), upstream_config.transport()) {
            (Some(skills), _) => (SkillsUpstream::spawn(name, skills), "skills"),
            (None, Some(transport)) => {
                let kind = transport.kind();
                (mcp_upstream(name, transport, config.startup_timeout), kind)
            }
            (None, None) => return None,
        };
    Some(Mounted::configured(config, name, upstream, kind))
}

/// An MCP upstream's supervisor (connecting in the background; quick retries and a
/// long stdio `initialize` during `startup_timeout`).
fn mcp_upstream(
    name: &str,
    transport: mcp::McpTransport,
    startup_timeout: Duration,
) -> DynUpstream {
    // Every upstream sees the downstream client through the gateway: its sampling,
    // elicitation (form and URL) and roots requests during a call go to the caller
    // of that call (a session's stream, or 2026-07-28's input-required round trip).
    let options = McpOptions {
        client_capabilities: serde_json::json!({
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
        }),
        startup_timeout,
        ..McpOptions::default()
    };
    mcp::spawn(name.to_owned(), transport, options)
}
