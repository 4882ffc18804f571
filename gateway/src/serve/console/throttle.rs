//! Sign-in throttling: refused console sign-ins are counted per client address and
//! per presented credential (GCRA, `governor`); past a burst, further sign-ins from
//! that address, or with that credential, are answered 429 with `Retry-After` before
//! the credential is even checked, so guessing costs time and says nothing.
//!
//! Only refusals count: a person signing in correctly is never slowed, and a throttled
//! address does not hold back sign-ins from any other. The address is the TCP peer's
//! (IPv6 by its /64, what one host usually holds): behind a reverse proxy every client
//! shares the proxy's, so one client's wrong sign-ins then throttle everyone's —
//! the limits are generous enough for people mistyping, not for guessing. The
//! credential is kept only as a hash prefix, in memory.
//!
//! Per replica, in memory: a replica restarted forgets the counts, which only gives a
//! guesser back one burst.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use sha2::{Digest, Sha256};

/// Refused sign-ins one address or credential may make at once before waiting.
const BURST: u32 = 10;
/// Then one more per this long (ten a minute).
const REFILL: Duration = Duration::from_secs(6);
/// The most keys remembered before forgetting those that are back to a full burst
/// (bounds memory under sign-ins from very many addresses).
const MAX_KEYS: usize = 10_000;

/// What a refused sign-in is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// A client address (IPv6: its /64, as connections are counted).
    Address(IpAddr),
    /// The first 16 bytes of the credential's SHA-256.
    Credential([u8; 16]),
}

/// The console's sign-in throttle.
pub(super) struct SignInThrottle {
    refusals: DefaultKeyedRateLimiter<Key>,
    /// Keys over their burst, until when: checked before a credential is.
    blocked: Mutex<HashMap<Key, Instant>>,
}

fn address_key(address: IpAddr) -> Key {
    Key::Address(crate::serve::admission::client_of(address))
}

fn credential_key(credential: &str) -> Key {
    let digest = Sha256::digest(credential.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Key::Credential(bytes)
}

/// The keys a sign-in from `address` (unknown when not served over TCP) with
/// `credential` is counted against.
fn keys(address: Option<IpAddr>, credential: &str) -> Vec<Key> {
    let mut keys: Vec<Key> = address.map(address_key).into_iter().collect();
    if !credential.is_empty() {
        keys.push(credential_key(credential));
    }
    keys
}

impl SignInThrottle {
    pub(super) fn new() -> SignInThrottle {
        let burst = NonZeroU32::new(BURST).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(REFILL)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst);
        SignInThrottle {
            refusals: DefaultKeyedRateLimiter::keyed(quota),
            blocked: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Instant>> {
        self.blocked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long a sign-in from `address` with `credential` must wait, if either is
    /// over its burst.
    pub(super) fn wait(&self, address: Option<IpAddr>, credential: &str) -> Option<Duration> {
        let now = Instant::now();
        let blocked = self.lock();
        keys(address, credential)
            .iter()
            .filter_map(|key| blocked.get(key))
            .filter(|until| **until > now)
            .map(|until| *until - now)
            .max()
    }

    /// Counts a refused sign-in against its address and credential; a key past its
    /// burst is blocked until it may try again.
    pub(super) fn refused(&self, address: Option<IpAddr>, credential: &str) {
        let clock = DefaultClock::default();
        let now = Instant::now();
        let mut blocked = self.lock();
        for key in keys(address, credential) {
            if let Err(not_until) = self.refusals.check_key(&key) {
                let wait = not_until.wait_time_from(clock.now());
                blocked.insert(key, now + wait);
            }
        }
        if blocked.len() > MAX_KEYS {
            blocked.retain(|_, until| *until > now);
        }
        if self.refusals.len() > MAX_KEYS {
            self.refusals.retain_recent();
            self.refusals.shrink_to_fit();
        }
    }
}

/// `Retry-After` for `wait`: whole seconds, rounded up, at least 1.
pub(super) fn retry_after_secs(wait: Duration) -> u64 {
    u64::try_from(wait.as_millis().div_ceil(1000))
        .unwrap_or(u64::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_past_the_burst_block_that_address_and_credential_only() {
        let throttle = SignInThrottle::new();
        let guesser: IpAddr = "192.0.2.7".parse().unwrap();
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        for n in 0..BURST {
            assert_eq!(throttle.wait(Some(guesser), &format!("guess{n}")), None);
            throttle.refused(Some(guesser), &format!("guess{n}"));
        }
        throttle.refused(Some(guesser), "one more");
        let wait = throttle
            .wait(Some(guesser), "the right one")
            .expect("blocked");
        assert!(wait <= REFILL, "{wait:?}");
        assert_eq!(throttle.wait(Some(other), "the right one"), None);

        // One credential tried from many addresses is throttled too.
        for n in 0..=BURST {
            let address = IpAddr::from([198, 51, 100, n as u8]);
            throttle.refused(Some(address), "stolen-and-revoked");
        }
        assert!(
            throttle
                .wait(Some(IpAddr::from([203, 0, 113, 1])), "stolen-and-revoked")
                .is_some()
        );
        assert_eq!(
            throttle.wait(Some(IpAddr::from([203, 0, 113, 1])), "fresh"),
            None
        );
    }

    #[test]
    fn ipv6_hosts_are_counted_by_their_64() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2::ffff".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_ne!(address_key(a), address_key(c));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(
            address_key(mapped),
            address_key("192.0.2.1".parse().unwrap())
        );
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(5_200)), 6);
        assert_eq!(retry_after_secs(Duration::from_secs(6)), 6);
    }
}
