//! The in-process refresh gates: one `tokio::sync::Mutex` per token name, so the
//! callers of one process that find a token due wait for one refresh.
//!
//! Bounded: a gate nobody holds or waits for (the map's is its only reference) is
//! dropped when the map has grown past its high-water mark, which then doubles from
//! what is left (at least [`MIN_HIGH_WATER`]); so the map holds the gates in use
//! plus at most that many idle ones, and a sweep costs amortized O(1) per call.

use std::sync::{Arc, Mutex};

use foldhash::HashMap;

/// Idle gates kept before a sweep.
const MIN_HIGH_WATER: usize = 1024;

pub(super) struct Gates {
    map: Mutex<Map>,
}

struct Map {
    gates: HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    high_water: usize,
}

impl Default for Gates {
    fn default() -> Self {
        Gates {
            map: Mutex::new(Map {
                gates: HashMap::default(),
                high_water: MIN_HIGH_WATER,
            }),
        }
    }
}

impl Gates {
    /// The gate of `name` (made if there is none). The caller locks it outside the map's lock.
    pub(super) fn gate(&self, name: String) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.gates.len() >= map.high_water {
            map.gates.retain(|_, gate| Arc::strong_count(gate) > 1);
            map.high_water = (map.gates.len() * 2).max(MIN_HIGH_WATER);
        }
        map.gates.entry(name).or_default().clone()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .gates
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_gates_are_dropped_and_held_ones_kept() {
        let gates = Gates::default();
        let held = gates.gate("held".to_owned()).lock_owned().await;
        for i in 0..5 * MIN_HIGH_WATER {
            let _guard = gates.gate(format!("k{i}")).lock_owned().await;
            assert!(gates.len() <= MIN_HIGH_WATER + 1, "{} gates", gates.len());
        }
        // The held gate survived every sweep: a new caller waits on the same one.
        let again = gates.gate("held".to_owned());
        assert!(
            again.try_lock().is_err(),
            "the held gate is still the one in the map"
        );
        drop(held);
        assert!(again.try_lock().is_ok());
    }
}
