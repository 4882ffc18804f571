//! Calls and errors per upstream over the last few minutes, in fixed time buckets:
//! what the console draws as a sparkline. Counted where the Prometheus counters are
//! (one `record` per call, in [`crate::metrics::Metrics`]), so both always agree, and
//! bounded: [`BUCKETS`] buckets per upstream, at most [`MAX_UPSTREAMS`] upstreams
//! (the least recently counted one makes room).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use foldhash::HashMap;
use serde::Serialize;

/// The width of one bucket.
pub const BUCKET: Duration = Duration::from_secs(10);
/// How many buckets are kept: [`BUCKET`] × `BUCKETS` of history (six minutes).
pub const BUCKETS: usize = 36;
/// The most upstreams tracked at once.
const MAX_UPSTREAMS: usize = 1024;

/// One upstream's ring of buckets.
#[derive(Debug, Clone)]
struct Ring {
    /// The bucket number (time since `start` / [`BUCKET`]) each slot holds.
    stamps: [u64; BUCKETS],
    calls: [u32; BUCKETS],
    errors: [u32; BUCKETS],
    last: u64,
}

impl Ring {
    fn new() -> Ring {
        Ring {
            stamps: [u64::MAX; BUCKETS],
            calls: [0; BUCKETS],
            errors: [0; BUCKETS],
            last: 0,
        }
    }

    fn add(&mut self, bucket: u64, error: bool) {
        let slot = (bucket % BUCKETS as u64) as usize;
        if self.stamps[slot] != bucket {
            // A slot from an earlier lap: its counts are older than the window.
            self.stamps[slot] = bucket;
            self.calls[slot] = 0;
            self.errors[slot] = 0;
        }
        self.calls[slot] = self.calls[slot].saturating_add(1);
        if error {
            self.errors[slot] = self.errors[slot].saturating_add(1);
        }
        self.last = bucket;
    }
}

/// Recent calls of every upstream.
#[derive(Debug)]
pub struct RecentCalls {
    start: Instant,
    rings: Mutex<HashMap<String, Ring>>,
}

/// One upstream's last [`BUCKETS`] buckets, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Series {
    pub bucket_seconds: u64,
    pub calls: Vec<u32>,
    pub errors: Vec<u32>,
}

impl Default for RecentCalls {
    fn default() -> Self {
        RecentCalls {
            start: Instant::now(),
            rings: Mutex::new(HashMap::default()),
        }
    }
}

impl RecentCalls {
    fn bucket_at(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.start).as_secs() / BUCKET.as_secs()
    }

    /// Counts one call of `upstream` (an error when `error`).
    pub fn record(&self, upstream: &str, error: bool) {
        self.record_at(upstream, error, Instant::now());
    }

    fn record_at(&self, upstream: &str, error: bool, at: Instant) {
        let bucket = self.bucket_at(at);
        let mut rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        // On the path of every call: no allocation once the upstream has its ring.
        if let Some(ring) = rings.get_mut(upstream) {
            ring.add(bucket, error);
            return;
        }
        if rings.len() >= MAX_UPSTREAMS {
            let stalest = rings
                .iter()
                .min_by_key(|(_, ring)| ring.last)
                .map(|(name, _)| name.clone());
            if let Some(name) = stalest {
                rings.remove(&name);
            }
        }
        rings
            .entry(upstream.to_owned())
            .or_insert_with(Ring::new)
            .add(bucket, error);
    }

    /// `upstream`'s last [`BUCKETS`] buckets up to now, oldest first (zeros when it
    /// had no calls).
    pub fn series(&self, upstream: &str) -> Series {
        self.series_at(upstream, Instant::now())
    }

    fn series_at(&self, upstream: &str, at: Instant) -> Series {
        let now = self.bucket_at(at);
        let rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        let ring = rings.get(upstream);
        let mut series = Series {
            bucket_seconds: BUCKET.as_secs(),
            calls: Vec::with_capacity(BUCKETS),
            errors: Vec::with_capacity(BUCKETS),
        };
        for back in (0..BUCKETS as u64).rev() {
            let (calls, errors) = match (ring, now.checked_sub(back)) {
                (Some(ring), Some(bucket)) => {
                    let slot = (bucket % BUCKETS as u64) as usize;
                    if ring.stamps[slot] == bucket {
                        (ring.calls[slot], ring.errors[slot])
                    } else {
                        (0, 0)
                    }
                }
                _ => (0, 0),
            };
            series.calls.push(calls);
            series.errors.push(errors);
        }
        series
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fill_and_age_out() {
        let recent = RecentCalls::default();
        let t0 = recent.start;
        recent.record_at("ev", false, t0);
        recent.record_at("ev", true, t0 + Duration::from_secs(1));
        recent.record_at("ev", false, t0 + BUCKET * 2);
        let series = recent.series_at("ev", t0 + BUCKET * 2);
        assert_eq!(series.calls.len(), BUCKETS);
        assert_eq!(series.calls[BUCKETS - 1], 1);
        assert_eq!(series.calls[BUCKETS - 3], 2);
        assert_eq!(series.errors[BUCKETS - 3], 1);
        // A whole window later the old counts are gone, even where a slot is reused.
        let later = t0 + BUCKET * (BUCKETS as u32 + 2);
        recent.record_at("ev", false, later);
        let series = recent.series_at("ev", later);
        assert_eq!(series.calls.iter().sum::<u32>(), 1);
        assert_eq!(recent.series("nothing").calls, vec![0; BUCKETS]);
    }

    #[test]
    fn the_number_of_upstreams_is_bounded() {
        let recent = RecentCalls::default();
        for i in 0..MAX_UPSTREAMS + 10 {
            recent.record(&format!("u{i}"), false);
        }
        assert_eq!(recent.rings.lock().unwrap().len(), MAX_UPSTREAMS);
    }
}
