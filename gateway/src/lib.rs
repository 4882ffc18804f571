//! toolgate: one MCP and HTTP endpoint over many tool upstreams.
//!
//! The one call path runs `surface → call → upstream`: a surface in [`serve`] admits
//! the caller and decodes its request, [`call::call`] decides with the [`policy`] on one
//! catalog snapshot, validates, calls and records. The core ([`gateway`], [`catalog`],
//! [`policy`], [`config`], the state backends) knows none of the services built on it
//! ([`registry`], [`tasks`], [`reload`]): [`app::App`] holds them side by side. The binary (`main.rs`) is only the command
//! line; [`app::App`] is how it (and in-process tests) start toolgate.
//!
//! Modules, one line each:
//! - [`access`]: who is asking (tenant, session) and the view of the catalog they get.
//! - [`app`]: toolgate assembled from a config: the core and the services built on it.
//! - [`call`]: the one call path: protocol tool or catalog tool, authorization on one
//!   catalog snapshot, validation, call slot, upstream, budget, one audit record.
//! - [`catalog`]: the namespaced catalog, every upstream's tools, prompts, resources and
//!   templates under one set of names and URIs (`tool_search`, the `toolgate-search`
//!   crate, reads it through `catalog::search`).
//! - [`coalesce`]: progress output coalesced for the tool-call event stream.
//! - [`config`]: the config file model, its validation and its diffs.
//! - [`credentials`]: API keys and JWTs: how an `Authorization` header becomes a tenant.
//! - [`errors`]: the one place a `ToolError` becomes what a surface sends.
//! - [`export`]: tool definitions as OpenAI, Anthropic and Gemini function schemas.
//! - [`gateway`]: the core: upstream lifecycle, catalog rebuild, forwarded requests.
//! - [`health`]: periodic upstream checks and the state every status surface reports.
//! - [`healthcheck`]: `toolgate healthcheck`: a running gateway's `/readyz`, as an exit status.
//! - [`logging`]: log output, with the audit line of every call written directly.
//! - [`metrics`]: Prometheus metrics of calls, refusals, results and health.
//! - [`policy`]: tenants and the one decision function.
//! - [`preflight`]: what `toolgate check` verifies of the state the config needs (Redis,
//!   `data_dir`).
//! - [`registry`]: OpenAPI imports and runtime registrations, and where they are kept.
//! - [`recent`]: calls and errors per upstream over the last minutes (sparklines).
//! - [`reload`]: config hot reload without a restart or dropped sessions.
//! - [`serve`]: the thin surfaces: `/mcp`, stdio, REST, ops and admin endpoints, the console.
//! - [`state`]: state backends by concern, in memory or in Redis: sessions, rate
//!   limits, registrations, tasks.
//! - [`summary`]: one-line human summaries of a call's start and end.
//! - [`tasks`]: background calls run as tasks: leases, the reaper, the owner's input
//!   (their durable records are [`state::tasks`]).
//! - [`telemetry`]: W3C trace context in and out, spans exported over OTLP.
//! - [`truncate`]: token budgets for tool results.
//! - [`validate`]: arguments checked against each tool's `inputSchema`.

pub mod access;
pub mod app;
pub mod call;
pub mod catalog;
pub mod coalesce;
pub mod config;
pub mod credentials;
pub mod errors;
pub mod export;
pub mod gateway;
pub mod health;
pub mod healthcheck;
pub mod logging;
pub mod metrics;
pub mod policy;
pub mod preflight;
pub mod recent;
pub mod registry;
pub mod reload;
pub mod serve;
pub mod state;
pub mod summary;
pub mod tasks;
pub mod telemetry;
pub mod truncate;
pub mod upstream_auth;
pub mod validate;
