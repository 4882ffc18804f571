//! OpenAPI upstreams: any HTTP API registered by its OpenAPI 3.0/3.1 or Swagger 2.0
//! description becomes a set of tools behind the [`Upstream`](crate::Upstream) contract.
//!
//! The pipeline, one room each:
//!
//! ```text
//! config  -> load (fetch/read, JSON/YAML, referenced documents; through the guard)
//!         -> normalize (2.0 -> 3.x, schema idioms -> JSON Schema 2020-12)
//!         -> refs (every $ref checked; schemas inlined, cycle-safe; refs/dynamic:
//!            $recursiveRef and $dynamicRef)
//!         -> operations (builds the model: operations, parameters, bodies, servers,
//!            security; media and variants read bodies and responses)
//!         -> naming + convert (operation -> MCP tool definition, filters)
//!         -> import (all of the above for one upstream) -> upstream
//! call    -> invoke + encode (request exactly as the spec says) + auth
//!         -> guard -> client (hyper; the ssrf rules in its connector and on every
//!            redirect) -> response
//! ```
//!
//! Each room imports only rooms before it in this picture (`model` holds the types
//! every later room shares, `ssrf` the address rules); a test in the workspace
//! (`tests/tests/architecture.rs`) fails on any import cycle among them.
//!
//! [`OpenApiUpstream::load`] runs it and returns an [`ImportReport`] listing every
//! operation left out and why.
//!
//! A configuration, as the gateway's file holds it (see [`OpenApiConfig`]):
//!
//! ```yaml
//! spec_url: https://raw.githubusercontent.com/example/api/main/openapi.yaml
//! base_url: https://api.example.com/v2        # optional: overrides the spec's servers
//! timeout: 30s
//! auth:                                       # keyed by securitySchemes name
//!   bearerAuth: {type: bearer, token: "${EXAMPLE_TOKEN}"}
//!   oauth: {type: oauth2_client_credentials, client_id: app, client_secret: "${SECRET}"}
//! filters:
//!   include: {tags: [pets]}
//!   exclude: {methods: [delete], operation_ids: ["admin*"]}
//! forward_headers: [X-Request-Id]
//! health: {path: /healthz}
//! ```
//!
//! What a tool looks like:
//!
//! - **name**: the operationId sanitized to `[A-Za-z0-9_-]` (`repos/get-content` ->
//!   `repos_get-content`), or `method_path` without one; cut with an 8-hex hash suffix
//!   to fit `64 - len("<upstream>__")`; operations sharing an operationId are told apart
//!   by what differs (API group and version in the path, other path segments, method,
//!   tag: `createClusterRole_rbac_v1alpha1`), by a hash of method and path only when no
//!   readable name fits; their descriptions start with the method and path, and each
//!   rename is in the report's `renamed`.
//! - **inputSchema**: one flat object: path, query, header and cookie parameters and the
//!   body's properties (a non-object body goes under `body`; binary content is base64
//!   text). A parameter whose name a body property also uses becomes `<name>__<in>`.
//!   `$ref`s are inlined; cycles and very deep or large nests are cut to permissive
//!   schemas marked with `$comment`. Required properties of an optional body are
//!   required once any body property is sent (`dependentRequired`). A multipart file
//!   takes base64 text or `{data | data_base64, filename, content_type}` (see `files`);
//!   a body offered in JSON media types that mean different things adds a
//!   `content_type` argument (see `variants`). Where the spec is evidently wrong the
//!   schema is read as the API means it (see `lenient`), each repair reported.
//! - **request**: a path key's fragment is dropped and its query sent as query
//!   parameters (see `pathkey`).
//! - **outputSchema**: the shape of the first 2xx JSON response when it is an object.
//! - **annotations**: `readOnlyHint` for GET/HEAD/QUERY, `destructiveHint` for DELETE,
//!   `idempotentHint` for PUT/DELETE, `openWorldHint` always.

mod auth;
mod client;
pub mod config;
mod connector;
mod convert;
mod encode;
mod files;
pub(crate) mod guard;
mod import;
mod invoke;
mod lenient;
mod load;
mod media;
mod model;
mod naming;
mod normalize;
mod oauth_flows;
mod operations;
mod pathkey;
mod refs;
mod ssrf;
mod upstream;
mod variants;

pub use config::{Credential, FilterSet, Filters, HealthConfig, OpenApiConfig, Secret};
pub use import::{ImportReport, RenamedOperation, SkippedOperation};
pub use load::LoadError;
pub use oauth_flows::CodeFlow;
pub use ssrf::is_forbidden;
pub use upstream::OpenApiUpstream;

pub use crate::sys::release_memory;
