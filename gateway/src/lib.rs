//! toolgate: one MCP and HTTP endpoint over many tool upstreams.
//!
//! The one call path runs `surface → access → gateway → upstream`: a surface in
//! [`serve`] admits the caller, [`access`] applies the tenant's policy, [`gateway`]
//! resolves, validates, calls and records. The binary (`main.rs`) is only the command
//! line; [`app::App`] is how it (and in-process tests) start toolgate.
//!
//! Modules, one line each:
//! - [`access`]: who is asking (tenant, session) and what they may list and call.
//! - [`app`]: toolgate assembled from a config: core, registration store, router.
//! - [`catalog`]: the namespaced catalog, every upstream's tools under one set of names
//!   (and as `tool_search`, the `toolgate-search` crate, reads it).
//! - [`coalesce`]: progress output coalesced for the tool-call event stream.
//! - [`config`]: the config file model, its validation and its diffs.
//! - [`credentials`]: API keys and JWTs: how an `Authorization` header becomes a tenant.
//! - [`errors`]: the one place a `ToolError` becomes what a surface sends.
//! - [`export`]: tool definitions as OpenAI, Anthropic and Gemini function schemas.
//! - [`gateway`]: the core: upstream lifecycle, catalog rebuild, the call path.
//! - [`health`]: periodic upstream checks and the state every status surface reports.
//! - [`logging`]: log output, with the audit line of every call written directly.
//! - [`metrics`]: Prometheus metrics of calls, refusals, results and health.
//! - [`offerings`]: prompts, resources and templates under catalog names and URIs.
//! - [`policy`]: tenants and the one decision function.
//! - [`protocol_tools`]: the gateway's own tools (`tool_search`, `tool_expand_tools`, …).
//! - [`registry`]: OpenAPI imports and runtime registrations, and where they are kept.
//! - [`recent`]: calls and errors per upstream over the last minutes (sparklines).
//! - [`reload`]: config hot reload without a restart or dropped sessions.
//! - [`serve`]: the thin surfaces: `/mcp`, stdio, REST, ops and admin endpoints, the console.
//! - [`session`]: sessions and the tools each has expanded.
//! - [`state`]: what replicas share through Redis (sessions, limits, registrations).
//! - [`summary`]: one-line human summaries of a call's start and end.
//! - [`tasks`]: durable records of background calls: state, progress, result, leases.
//! - [`telemetry`]: W3C trace context in and out, spans exported over OTLP.
//! - [`truncate`]: token budgets for tool results.
//! - [`validate`]: arguments checked against each tool's `inputSchema`.

pub mod access;
pub mod app;
pub mod catalog;
pub mod coalesce;
pub mod config;
pub mod credentials;
pub mod errors;
pub mod export;
pub mod gateway;
pub mod health;
pub mod logging;
pub mod metrics;
pub mod offerings;
pub mod policy;
pub mod protocol_tools;
pub mod recent;
pub mod registry;
pub mod reload;
pub mod serve;
pub mod session;
pub mod state;
pub mod summary;
pub mod tasks;
pub mod telemetry;
pub mod truncate;
pub mod validate;
