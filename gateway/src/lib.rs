//! toolgate: one MCP endpoint over many tool upstreams.
//!
//! Rooms: [`config`] (the file model), [`catalog`] (names), [`gateway`] (the core and
//! the one call path), [`errors`] (the one error mapping), [`health`], [`metrics`],
//! [`reload`] (config hot reload), [`state`] (what replicas share: Redis) and [`serve`]
//! (the thin surfaces); [`telemetry`] traces the call path across processes. The binary (`main.rs`) is only the command line.

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
pub mod registry;
pub mod reload;
pub mod search;
pub mod serve;
pub mod session;
pub mod state;
pub mod summary;
pub mod telemetry;
pub mod truncate;
pub mod validate;
