//! Noticing changes under the skills paths. After every scan the watcher is pointed at
//! exactly the directories the scan looked into (each one non-recursively), so what is
//! watched is bounded by the same caps as what is served, and changes in hidden
//! directories (`.git`) or past the caps wake nothing. A directory that cannot be
//! watched (a path that does not exist yet) or a platform without a native watcher
//! falls back to a rescan every [`POLL_EVERY`].
//!
//! Wake-ups arrive on a channel of capacity 1: one pending wake-up stands for any
//! number of events, and the caller rescans; a rescan that finds nothing new changes
//! nothing.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use notify::Watcher;
use tokio::sync::mpsc;

/// Rescan period when some directory cannot be watched.
pub(super) const POLL_EVERY: Duration = Duration::from_secs(2);

/// The directories being watched.
pub(super) struct Watch {
    watcher: Option<notify::RecommendedWatcher>,
    watched: BTreeSet<PathBuf>,
    /// Some wanted directory is not watched: rescan every [`POLL_EVERY`].
    pub poll: bool,
}

impl Watch {
    /// A watcher that wakes `wake` on changes (none, and polling, where the platform
    /// has no native watcher).
    pub(super) fn new(upstream: &str, wake: mpsc::Sender<()>) -> Watch {
        use notify::EventKind;
        use notify::event::{AccessKind, AccessMode};
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let relevant = match event {
                // Reads (the gateway's own, when it serves a file) change nothing; a
                // write that finished does. Without this every read would rescan.
                Ok(event) => match event.kind {
                    EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
                    EventKind::Access(_) => false,
                    _ => true,
                },
                // Dropped events (queue overflow): rescan to be sure.
                Err(_) => true,
            };
            if relevant {
                let _ = wake.try_send(());
            }
        });
        match watcher {
            Ok(watcher) => Watch {
                watcher: Some(watcher),
                watched: BTreeSet::new(),
                poll: false,
            },
            Err(error) => {
                tracing::info!(%upstream, %error, every = ?POLL_EVERY, "no file watcher; skills rescanned periodically");
                Watch {
                    watcher: None,
                    watched: BTreeSet::new(),
                    poll: true,
                }
            }
        }
    }

    /// Watches exactly `dirs`. Returns whether a directory was added (the caller
    /// rescans once more: files written into a new directory before its watch began
    /// would otherwise wait for the next event).
    pub(super) fn set(&mut self, dirs: &[PathBuf]) -> bool {
        let Some(watcher) = &mut self.watcher else {
            return false;
        };
        let wanted: BTreeSet<PathBuf> = dirs.iter().cloned().collect();
        for gone in self.watched.difference(&wanted) {
            // Fails when the directory is gone already, which ends its watch anyway.
            let _ = watcher.unwatch(gone);
        }
        self.watched.retain(|dir| wanted.contains(dir));
        let mut added = false;
        let mut poll = false;
        for dir in wanted {
            if self.watched.contains(&dir) {
                continue;
            }
            match watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.watched.insert(dir);
                    added = true;
                }
                Err(error) => {
                    tracing::debug!(dir = %dir.display(), %error, "not watched; rescanning periodically");
                    poll = true;
                }
            }
        }
        self.poll = poll;
        added
    }
}
