//! Tenant rate limits: how many requests a tenant may make, at its [`Rate`] with a
//! burst. Two limiters keep the same contract — given one request, answer a
//! [`Verdict`]:
//!
//! - [`memory::LocalLimiter`]: in this process (`governor`'s GCRA). The whole rate
//!   with `state.backend: memory`; with a shared backend, the tenant's share of it
//!   (the rate divided by `state.replicas`), used only while Redis cannot be reached.
//! - [`redis::SharedLimiter`]: shared by every replica (GCRA in a Lua script on Redis'
//!   clock), so N replicas never admit N times the rate. While Redis cannot be
//!   reached, `state.on_unavailable` decides: `fail_open` falls back to the local
//!   limiter at the tenant's share, `fail_closed` answers [`Verdict::Unavailable`].
//!
//! Who is limited and at what rate is the policy's word (each tenant holds its local
//! limiter); what a refusal looks like to a caller is the surfaces'. This room only
//! counts.

pub mod memory;
pub mod redis;

use std::time::Duration;

pub use crate::config::Rate;
pub use memory::LocalLimiter;
pub use redis::SharedLimiter;

/// What a limiter answers for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Counted against the rate: go ahead.
    Admitted,
    /// Over the rate: a request is admitted again after this long.
    Wait(Duration),
    /// The shared limiter cannot be reached and is set to refuse meanwhile
    /// (`state.on_unavailable: fail_closed`); the message says why and what to do.
    Unavailable(String),
}

impl Verdict {
    pub fn is_admitted(&self) -> bool {
        matches!(self, Verdict::Admitted)
    }
}
