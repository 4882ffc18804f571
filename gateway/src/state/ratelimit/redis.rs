//! Tenant rate limits shared by every replica: GCRA (the generic cell rate algorithm,
//! what `governor` does in process) in one Lua script on Redis' own clock, so replicas
//! with skewed clocks still agree and N replicas never admit N times the rate.
//!
//! Key: `ratelimit:{TENANT}` holds the tenant's theoretical arrival time (µs, Redis
//! `TIME`); it expires once the bucket is full again. A request is admitted when the
//! new arrival time minus the burst tolerance is not in the future.
//!
//! While Redis cannot be reached, `state.on_unavailable` decides: `fail_open` limits
//! in process with the tenant's [`LocalLimiter`] (its rate divided by
//! `state.replicas`); `fail_closed` answers [`Verdict::Unavailable`] with a message
//! saying why (surfaces answer 503).

use std::sync::Arc;
use std::time::Duration;

use redis::Script;

use super::{LocalLimiter, Rate, Verdict};
use crate::config::FailPolicy;
use crate::state::conn::RedisConn;

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

    /// Counts one request of tenant `tenant` against its shared `rate`; `local` is the
    /// tenant's share, counted instead while Redis cannot be reached and
    /// `state.on_unavailable` is `fail_open`.
    pub async fn check(&self, tenant: &str, rate: Rate, local: &LocalLimiter) -> Verdict {
        let emission_us = (rate.emission_interval().as_micros() as u64).max(1);
        let tolerance_us = emission_us.saturating_mul(u64::from(rate.burst));
        let key = self.conn.key(&format!("ratelimit:{{{tenant}}}"));
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
                Ok(0) | Err(_) => Verdict::Admitted,
                Ok(wait_us) => Verdict::Wait(Duration::from_micros(wait_us)),
            },
            Err(unavailable) => match self.on_unavailable {
                FailPolicy::FailOpen => local.check(),
                FailPolicy::FailClosed => Verdict::Unavailable(format!(
                    "{unavailable}. This gateway refuses rate-limited requests until it \
                     answers (state.on_unavailable: fail_closed)"
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::state::suite;

    /// Tenant `t`'s rate in `config`, and its local limiter at this replica's share.
    fn limits(config: &Config) -> (Rate, LocalLimiter) {
        let rate = config.tenants["t"].rate_limit.as_ref().unwrap().rate();
        (rate, LocalLimiter::new(rate.divided(config.state.replicas)))
    }

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
        let (rate, local) = limits(&config);
        let local = Arc::new(local);
        let limiters = [
            Arc::new(SharedLimiter::new(a, FailPolicy::FailOpen)),
            Arc::new(SharedLimiter::new(b, FailPolicy::FailOpen)),
        ];
        let mut tasks = Vec::new();
        for i in 0..40 {
            let limiter = limiters[i % 2].clone();
            let local = local.clone();
            tasks.push(tokio::spawn(async move {
                limiter.check("t", rate, &local).await
            }));
        }
        let mut admitted = 0;
        for task in tasks {
            match task.await.unwrap() {
                Verdict::Admitted => admitted += 1,
                Verdict::Wait(retry_after) => {
                    assert!(retry_after > Duration::from_secs(60), "{retry_after:?}")
                }
                other => panic!("unexpected verdict {other:?}"),
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
        let (rate, local) = limits(&config);
        let limiter = SharedLimiter::new(conn, FailPolicy::FailOpen);
        assert!(limiter.check("t", rate, &local).await.is_admitted());
        let Verdict::Wait(retry_after) = limiter.check("t", rate, &local).await else {
            panic!("burst 1: the second request at once is refused");
        };
        assert!(retry_after <= Duration::from_millis(100), "{retry_after:?}");
        tokio::time::sleep(retry_after + Duration::from_millis(20)).await;
        assert!(
            limiter.check("t", rate, &local).await.is_admitted(),
            "refilled"
        );
    }

    #[tokio::test]
    async fn unreachable_redis_fails_open_at_a_share_or_closed() {
        let state = suite::test_state("redis://127.0.0.1:1");
        let config = suite::limited_config(&state, "{per_hour: 20, burst: 20}", "fail_open");
        let conn = RedisConn::new(&config.state).unwrap();
        let (rate, local) = limits(&config);
        let open = SharedLimiter::new(conn.clone(), FailPolicy::FailOpen);
        let mut admitted = 0;
        for _ in 0..20 {
            if open.check("t", rate, &local).await.is_admitted() {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 10, "20 per hour over 2 replicas: 10 here");
        let closed = SharedLimiter::new(conn, FailPolicy::FailClosed);
        match closed.check("t", rate, &local).await {
            Verdict::Unavailable(message) => {
                assert!(message.contains("fail_closed"), "{message}")
            }
            other => panic!("expected a fail-closed refusal, got {other:?}"),
        }
    }
}
