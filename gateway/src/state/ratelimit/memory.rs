//! A tenant's rate limit in this process: `governor`'s GCRA, no I/O. The whole limit
//! of a single gateway, or one replica's share of a shared limit while the shared
//! limiter cannot be reached (see [`super::redis`]).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};

use super::{Rate, Verdict};

type Governor = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    DefaultClock,
    governor::middleware::NoOpMiddleware,
>;

/// One tenant's in-process limiter.
pub struct LocalLimiter {
    governor: Governor,
}

impl LocalLimiter {
    /// A limiter allowing `rate` (already divided into this process's share, when
    /// replicas share the limit: see [`Rate::divided`]).
    pub fn new(rate: Rate) -> LocalLimiter {
        let burst = NonZeroU32::new(rate.burst).unwrap_or(NonZeroU32::MIN);
        // A zero period is not a quota governor takes: the shortest one stands in.
        let quota = Quota::with_period(rate.emission_interval().max(Duration::from_nanos(1)))
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst);
        LocalLimiter {
            governor: RateLimiter::direct(quota),
        }
    }

    /// Counts one request.
    pub fn check(&self) -> Verdict {
        match self.governor.check() {
            Ok(()) => Verdict::Admitted,
            Err(not_until) => {
                Verdict::Wait(not_until.wait_time_from(DefaultClock::default().now()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(count: u32, window: Duration, burst: u32) -> Rate {
        Rate {
            count,
            window,
            burst,
        }
    }

    #[test]
    fn a_burst_then_a_wait_of_one_emission() {
        let limiter = LocalLimiter::new(rate(1, Duration::from_secs(1), 2));
        assert_eq!(limiter.check(), Verdict::Admitted);
        assert_eq!(limiter.check(), Verdict::Admitted);
        match limiter.check() {
            Verdict::Wait(wait) => assert!(wait <= Duration::from_secs(1), "{wait:?}"),
            other => panic!("expected a wait, got {other:?}"),
        }
    }

    #[test]
    fn a_share_admits_its_part() {
        let whole = rate(20, Duration::from_secs(60), 20);
        let limiter = LocalLimiter::new(whole.divided(4));
        let admitted = (0..20).filter(|_| limiter.check().is_admitted()).count();
        assert_eq!(admitted, 5);
    }
}
