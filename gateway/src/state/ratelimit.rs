//! Tenant rate limits shared by every replica: GCRA (the generic cell rate algorithm,
//! what `governor` does in process) in one Lua script on Redis' own clock, so replicas
//! with skewed clocks still agree and N replicas never admit N times the rate.
//!
//! Key: `ratelimit:{TENANT}` holds the tenant's theoretical arrival time (µs, Redis
//! `TIME`); it expires once the bucket is full again. A request is admitted when the
//! new arrival time minus the burst tolerance is not in the future.
//!
//! While Redis cannot be reached, `state.on_unavailable` decides: `fail_open` limits
//! in process at the tenant's rate divided by `state.replicas`; `fail_closed`
//! refuses the request (503) with a message saying why.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;

use super::conn::RedisConn;
use crate::config::FailPolicy;
use crate::policy::{Policy, Refusal, Tenant};

/// KEYS: the tenant's key. ARGV: emission interval (µs), burst tolerance (µs).
/// Returns 0 when admitted, else the µs to wait.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local emission = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]))
if (not tat) or tat < now then tat = now end
local new_tat = tat + emission
local allow_at = new_tat - tolerance
if allow_at > now then
  return string.format('%d', allow_at - now)
end
local ttl_ms = math.floor((new_tat - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', string.format('%d', ttl_ms))
return '0'
";

pub struct SharedLimiter {
    conn: Arc<RedisConn>,
    on_unavailable: FailPolicy,
    script: Script,
}

impl SharedLimiter {
    pub fn new(conn: Arc<RedisConn>, on_unavailable: FailPolicy) -> Self {
        Self {
            conn,
            on_unavailable,
            script: Script::new(GCRA),
        }
    }

    /// Counts one request of `tenant` against its shared rate.
    pub async fn admit(&self, policy: &Policy, tenant: &Tenant) -> Result<(), Refusal> {
        let Some(rate) = tenant.rate() else {
            return Ok(());
        };
        let emission_us = (rate.emission_interval().as_micros() as u64).max(1);
        let tolerance_us = emission_us.saturating_mul(u64::from(rate.burst));
        let key = self.conn.key(&format!("ratelimit:{{{}}}", tenant.name));
        let outcome = self
            .conn
            .run("rate limit", |mut c| async move {
                self.script
                    .key(key)
                    .arg(emission_us)
                    .arg(tolerance_us)
                    .invoke_async::<String>(&mut c)
                    .await
            })
            .await;
        match outcome {
            Ok(wait) => match wait.parse::<u64>() {
                Ok(0) | Err(_) => Ok(()),
                Ok(wait_us) => Err(Refusal::RateLimited {
                    retry_after: Duration::from_micros(wait_us),
                }),
            },
            Err(unavailable) => match self.on_unavailable {
                FailPolicy::FailOpen => policy.admit(tenant),
                FailPolicy::FailClosed => Err(Refusal::LimiterUnavailable {
                    message: format!(
                        "{unavailable}. This gateway refuses rate-limited requests until it \
                         answers (state.on_unavailable: fail_closed)"
                    ),
                }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::suite;

    /// Two limiters on two connections (two replicas) share one limit: 40 requests
    /// against 20 per hour admit exactly 20.
    #[tokio::test]
    async fn the_limit_is_shared_and_exact() {
        let state = suite::test_state(&suite::redis_url());
        let Some(a) = suite::redis_conn(&state).await else {
            return;
        };
        let b = RedisConn::new(&state).unwrap();
        let config = suite::limited_config(&state, "{per_hour: 20, burst: 20}", "fail_open");
        let policy = Arc::new(Policy::from_config(&config).unwrap());
        let tenant = policy.tenant("t").unwrap();
        let limiters = [
            Arc::new(SharedLimiter::new(a, FailPolicy::FailOpen)),
            Arc::new(SharedLimiter::new(b, FailPolicy::FailOpen)),
        ];
        let mut tasks = Vec::new();
        for i in 0..40 {
            let limiter = limiters[i % 2].clone();
            let (policy, tenant) = (policy.clone(), tenant.clone());
            tasks.push(tokio::spawn(async move {
                limiter.admit(&policy, &tenant).await
            }));
        }
        let mut admitted = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(()) => admitted += 1,
                Err(Refusal::RateLimited { retry_after }) => {
                    assert!(retry_after > Duration::from_secs(60), "{retry_after:?}")
                }
                Err(other) => panic!("unexpected refusal {other:?}"),
            }
        }
        assert_eq!(admitted, 20);
    }

    #[tokio::test]
    async fn the_limit_refills_at_its_rate() {
        let state = suite::test_state(&suite::redis_url());
        let Some(conn) = suite::redis_conn(&state).await else {
            return;
        };
        let config = suite::limited_config(&state, "{per_second: 10, burst: 1}", "fail_open");
        let policy = Policy::from_config(&config).unwrap();
        let tenant = policy.tenant("t").unwrap();
        let limiter = SharedLimiter::new(conn, FailPolicy::FailOpen);
        assert!(limiter.admit(&policy, &tenant).await.is_ok());
        let Err(Refusal::RateLimited { retry_after }) = limiter.admit(&policy, &tenant).await
        else {
            panic!("burst 1: the second request at once is refused");
        };
        assert!(retry_after <= Duration::from_millis(100), "{retry_after:?}");
        tokio::time::sleep(retry_after + Duration::from_millis(20)).await;
        assert!(limiter.admit(&policy, &tenant).await.is_ok(), "refilled");
    }

    #[tokio::test]
    async fn unreachable_redis_fails_open_at_a_share_or_closed() {
        let state = suite::test_state("redis://127.0.0.1:1");
        let config = suite::limited_config(&state, "{per_hour: 20, burst: 20}", "fail_open");
        let conn = RedisConn::new(&config.state).unwrap();
        let policy = Policy::from_config(&config).unwrap();
        let tenant = policy.tenant("t").unwrap();
        let open = SharedLimiter::new(conn.clone(), FailPolicy::FailOpen);
        let mut admitted = 0;
        for _ in 0..20 {
            if open.admit(&policy, &tenant).await.is_ok() {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 10, "20 per hour over 2 replicas: 10 here");
        let closed = SharedLimiter::new(conn, FailPolicy::FailClosed);
        match closed.admit(&policy, &tenant).await {
            Err(Refusal::LimiterUnavailable { message }) => {
                assert!(message.contains("fail_closed"), "{message}")
            }
            other => panic!("expected a fail-closed refusal, got {other:?}"),
        }
    }
}
