//! The one way from an upstream's config to a mounted upstream, for every kind: which
//! adapter runs it, and the per-upstream settings it is mounted with. Used at startup
//! and on reload (MCP and skills upstreams start here), by the registry's OpenAPI
//! imports and the admin API. *When* an upstream is mounted is its caller's word (the
//! lifecycle in `upstreams`; the registry, which puts a stand-in up while a spec loads
//! and mounts the import only if it is still wanted); *how* is here.

use std::sync::Arc;

use toolgate_adapters::DynUpstream;
use toolgate_adapters::mcp::{self, McpOptions};
use toolgate_adapters::openapi::{ImportReport, LoadError, OpenApiConfig, OpenApiUpstream};
use toolgate_adapters::skills::SkillsUpstream;

use super::{Gateway, Mounted};
use crate::config::{Config, CredentialSource, Kind, UpstreamKind, UpstreamSettings};

impl Mounted {
    /// Wraps `upstream` with the settings `config` gives upstream `name`: its own where
    /// it sets them, the global `call_timeout` and `health` where it does not. A
    /// runtime registration (not in the config) gets the global settings and a prefix.
    pub fn configured(config: &Config, name: &str, upstream: DynUpstream, kind: Kind) -> Mounted {
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
        // Each user's own authorization: the tools say so, for an agent to ask its user
        // to connect.
        mounted.shaping.per_user = (settings.credentials == CredentialSource::Oauth)
            .then_some(crate::catalog::PerUserList::Shared);
        mounted.credentials = settings.credentials;
        mounted
    }
}

/// Starts upstream `name` of `config` when it needs no import first: an MCP upstream
/// (its supervisor connects in the background) or a skills upstream (it scans in the
/// background); `None` for an OpenAPI upstream (see [`import_openapi`]) or a name not
/// in the config.
pub(super) fn start_local(config: &Config, name: &str) -> Option<Mounted> {
    let upstream_config = config.upstreams.get(name)?;
    let upstream: DynUpstream = match &upstream_config.kind {
        UpstreamKind::Skills(skills) => SkillsUpstream::spawn(name, skills),
        UpstreamKind::Stdio(_) | UpstreamKind::Sse(_) | UpstreamKind::StreamableHttp(_)
            if matches!(
                upstream_config.settings.credentials,
                CredentialSource::Oauth
                    | CredentialSource::ClientCredentials
                    | CredentialSource::TokenExchange
                    | CredentialSource::PerTenant
            ) =>
        {
            let per_caller = mcp::spawn_per_caller(
                name.to_owned(),
                upstream_config.transport()?,
                mcp_options(config),
            )
            .map_err(|e| tracing::error!(upstream = %name, error = %e, "not started"))
            .ok()?;
            let mut mounted = Mounted::configured(
                config,
                name,
                per_caller.clone(),
                upstream_config.kind.kind(),
            );
            mounted.per_caller = Some(per_caller);
            return Some(mounted);
        }
        UpstreamKind::Stdio(_) | UpstreamKind::Sse(_) | UpstreamKind::StreamableHttp(_) => {
            mcp_upstream(name, upstream_config.transport()?, config)
        }
        // Its spec is loaded first, and the registry decides when.
        UpstreamKind::Openapi(_) => return None,
    };
    Some(Mounted::configured(
        config,
        name,
        upstream,
        upstream_config.kind.kind(),
    ))
}

/// Loads OpenAPI upstream `name` from `openapi` (the spec fetched and converted; the
/// report says what was skipped, repaired or renamed) and wraps it with the settings
/// of the config running once the spec is in (a reload may have come meanwhile).
/// Nothing is mounted here: the registry mounts it if it is still wanted.
pub async fn import_openapi(
    gateway: &Gateway,
    name: &str,
    openapi: OpenApiConfig,
) -> Result<(Mounted, ImportReport), LoadError> {
    let (mut upstream, report) = OpenApiUpstream::load(name, openapi).await?;
    let config = gateway.config();
    let code_flow = match config.upstreams.get(name).map(|u| &u.settings) {
        Some(settings) if settings.credentials == CredentialSource::Oauth => {
            let oauth = settings.oauth.clone().unwrap_or_default();
            let flow = super::openapi_oauth::take_user_tokens(&mut upstream, &oauth).await?;
            Some(Arc::new(flow))
        }
        _ => None,
    };
    let mut mounted = Mounted::configured(&config, name, Arc::new(upstream), Kind::Openapi);
    mounted.code_flow = code_flow;
    Ok((mounted, report))
}

/// What stands in for OpenAPI upstream `name` while its spec loads, or after its
/// import failed (`stand_in` reports which): mounted as the kind it stands in for, with
/// its settings, so status surfaces list it as what it will be.
pub fn openapi_stand_in(config: &Config, name: &str, stand_in: DynUpstream) -> Mounted {
    Mounted::configured(config, name, stand_in, Kind::Openapi)
}

/// An MCP upstream's supervisor (connecting in the background; quick retries and a
/// long stdio `initialize` during `startup_timeout`, longer while the process is still
/// starting, up to `stdio_start_limit`).
fn mcp_upstream(name: &str, transport: mcp::McpTransport, config: &Config) -> DynUpstream {
    mcp::spawn(name.to_owned(), transport, mcp_options(config))
}

/// What the gateway tells every MCP upstream about itself.
fn mcp_options(config: &Config) -> McpOptions {
    // Every upstream sees the downstream client through the gateway: its sampling,
    // elicitation (form and URL) and roots requests during a call go to the caller
    // of that call (a session's stream, or 2026-07-28's input-required round trip).
    McpOptions {
        client_capabilities: serde_json::json!({
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
        }),
        startup_timeout: config.startup_timeout,
        stdio_start_limit: config.stdio_start_limit,
        ..McpOptions::default()
    }
}
