//! Noticing changes under the skills paths: a native recursive watcher where the
//! platform has one, else a rescan every [`POLL_EVERY`]. Either way the caller gets
//! wake-ups on a channel of capacity 1 (one pending wake-up stands for any number of
//! events) and rescans; a rescan that finds nothing new changes nothing.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;

/// Rescan period when the native watcher cannot watch every path (e.g. a path that
/// does not exist yet: it is picked up once it appears).
pub const POLL_EVERY: Duration = Duration::from_secs(2);

/// A native watcher over every path, or why there is none.
pub fn native(
    paths: &[PathBuf],
    wake: mpsc::Sender<()>,
) -> Result<notify::RecommendedWatcher, String> {
    use notify::event::{AccessKind, AccessMode};
    use notify::{EventKind, RecursiveMode, Watcher};
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let relevant = match event {
            // Reads (the gateway's own, when it serves a file) change nothing; a write
            // that finished does. Without this every read would trigger a rescan.
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
    })
    .map_err(|e| e.to_string())?;
    for path in paths {
        watcher
            .watch(path, RecursiveMode::Recursive)
            .map_err(|e| format!("cannot watch {}: {e}", path.display()))?;
    }
    Ok(watcher)
}
