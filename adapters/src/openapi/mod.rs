//! OpenAPI upstreams: any HTTP API registered by its OpenAPI 3.0/3.1 or Swagger 2.0
//! description becomes a set of tools behind the [`Upstream`](crate::Upstream) contract.
//!
//! The pipeline, one room each:
//!
//! ```text
//! config  -> load (fetch/read, JSON/YAML, referenced documents; ssrf guard)
//!         -> normalize (2.0 -> 3.x, schema idioms -> JSON Schema 2020-12)
//!         -> refs (every $ref checked; schemas inlined, cycle-safe)
//!         -> model (operations, parameters, bodies, servers, security)
//!         -> naming + convert (operation -> MCP tool definition, filters)
//! call    -> invoke + encode (request exactly as the spec says) + auth -> response
//! ```
//!
//! [`OpenApiUpstream::load`] runs it and returns an [`ImportReport`] listing every
//! operation left out and why.

mod auth;
pub mod config;
mod convert;
mod encode;
mod invoke;
mod load;
mod media;
mod model;
mod naming;
mod normalize;
mod refs;
mod ssrf;
mod upstream;

pub use config::{Credential, FilterSet, Filters, HealthConfig, OpenApiConfig, Secret};
pub use load::LoadError;
pub use ssrf::is_forbidden;
pub use upstream::{ImportReport, OpenApiUpstream, SkippedOperation};
