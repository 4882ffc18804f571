//! Shared state: what several gateway replicas must agree on, grouped by concern. Each
//! concern is a folder: its `mod.rs` is the contract (what the store or limiter
//! answers, and the records it keeps), and each backend is a file beside it.
//!
//! With `state: {backend: memory}` (the default) sessions, rate limits, runtime
//! registrations and tasks live in the process, which is right for one gateway. With
//! `backend: redis` they live in one Redis server that every replica uses, so any
//! replica can serve any request (no sticky routing):
//!
//! - sessions and their expanded tools ([`sessions`]); an MCP session is nothing more
//!   than that record (see [`crate::serve::mcp`]), so any replica serves it;
//! - tenant rate limits ([`ratelimit`]: GCRA in process, or in a Lua script on Redis'
//!   clock), with a configured fail-open or fail-closed policy while Redis is
//!   unreachable;
//! - runtime registrations ([`registrations`]: a file, or a hash plus a pub/sub
//!   channel every replica follows);
//! - background calls' task records ([`tasks`]: leases, progress, results, input).
//! - the tokens the gateway holds as an OAuth client of its upstreams, per caller
//!   ([`tokens`]: sealed with configured keys; memory, a file, or Redis), with their
//!   single-use pending authorizations and the refresh lock.
//!
//! [`conn::RedisConn`] is the one connection (reconnecting, every command bounded by
//! `command_timeout`); its errors are [`conn::Unavailable`], which surfaces answer with
//! 503 and a message saying what to do, never "not found".

pub mod conn;
pub mod ratelimit;
pub mod registrations;
pub mod sessions;
#[cfg(test)]
pub(crate) mod suite;
pub mod tasks;
pub mod tokens;

use std::sync::Arc;

use crate::config::{Config, StateBackend};

/// The Redis-backed parts of the gateway core (absent with `backend: memory`): the
/// connection, sessions and rate limits. The services beside the core keep their own
/// records on the same connection (registrations, tasks).
pub struct RedisState {
    pub conn: Arc<conn::RedisConn>,
    pub sessions: Arc<sessions::redis::RedisSessionStore>,
    pub limiter: ratelimit::SharedLimiter,
}

impl RedisState {
    /// Connects lazily (nothing is awaited here: a gateway starts while Redis is down
    /// and reports not ready until it answers). `None` for the memory backend.
    pub fn from_config(config: &Config) -> Result<Option<Arc<RedisState>>, String> {
        if config.state.backend != StateBackend::Redis {
            return Ok(None);
        }
        let conn = conn::RedisConn::new(&config.state)?;
        tracing::info!(redis = %conn.address(), prefix = %config.state.key_prefix, "shared state in Redis");
        let sessions = Arc::new(sessions::redis::RedisSessionStore::new(
            conn.clone(),
            config.sessions.idle_ttl,
            sessions::Limits::from_config(&config.sessions),
        ));
        let limiter = ratelimit::SharedLimiter::new(conn.clone(), config.state.on_unavailable);
        Ok(Some(Arc::new(RedisState {
            conn,
            sessions,
            limiter,
        })))
    }
}
