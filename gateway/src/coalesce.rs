//! Coalescing of progress output for the tool-call event stream.
//!
//! A chatty tool can emit hundreds of updates a second; one event each would swamp a
//! client. Updates are merged per stream (`stdout`, `stderr`, `info`, `log`): the first
//! update opens a window of `window`; everything emitted before it closes goes out as
//! one event. Once `max_bytes` of text are buffered the stream flushes at once.
//! Completion flushes everything, then marks every stream that emitted as closed.
//! A zero `window` or zero `max_bytes` disables coalescing: every update is its own
//! event.
//!
//! Pure logic with the clock passed in, so it is tested without sleeping; the event
//! stream (`serve/rest/stream.rs`) drives it with a timer at [`Coalescer::next_deadline`].

use std::time::{Duration, Instant};

/// Where a progress update came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
    Info,
    /// The upstream's log lines (MCP `notifications/message`) during the call.
    Log,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Info => "info",
            Stream::Log => "log",
        }
    }

    const ALL: [Stream; 4] = [Stream::Stdout, Stream::Stderr, Stream::Info, Stream::Log];

    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
            Stream::Info => 2,
            Stream::Log => 3,
        }
    }
}

/// One update as a tool emitted it.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub stream: Stream,
    pub text: String,
    pub progress: Option<f64>,
    pub total: Option<f64>,
}

/// One `tool_progress` event: the merged text of a window, the latest progress
/// figures, and whether the stream is closed.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    pub stream: Stream,
    pub text: String,
    pub progress: Option<f64>,
    pub total: Option<f64>,
    pub closed: bool,
    /// How many updates this event merges (0 for the closing event).
    pub merged: usize,
}

#[derive(Debug, Default)]
struct Pending {
    text: String,
    progress: Option<f64>,
    total: Option<f64>,
    updates: usize,
    window_ends: Option<Instant>,
    /// True once anything was emitted on this stream (it gets a closing event).
    used: bool,
}

/// Coalescing thresholds; see the module docs.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub window: Duration,
    pub max_bytes: usize,
}

impl Settings {
    fn disabled(&self) -> bool {
        self.window.is_zero() || self.max_bytes == 0
    }
}

#[derive(Debug)]
pub struct Coalescer {
    settings: Settings,
    pending: [Pending; 4],
}

impl Coalescer {
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            pending: Default::default(),
        }
    }

    /// Takes one update at `now`; returns the events due at once (the update itself
    /// when coalescing is off, or the stream's buffer when it reached `max_bytes`).
    pub fn push(&mut self, update: Update, now: Instant) -> Vec<Emitted> {
        let disabled = self.settings.disabled();
        let window = self.settings.window;
        let pending = &mut self.pending[update.stream.index()];
        pending.used = true;
        pending.text.push_str(&update.text);
        pending.progress = update.progress.or(pending.progress);
        pending.total = update.total.or(pending.total);
        pending.updates += 1;
        if pending.window_ends.is_none() {
            pending.window_ends = Some(now + window);
        }
        if disabled || pending.text.len() >= self.settings.max_bytes {
            return self.flush_stream(update.stream).into_iter().collect();
        }
        Vec::new()
    }

    /// When the earliest open window closes, if any is open.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.iter().filter_map(|p| p.window_ends).min()
    }

    /// The events whose windows have closed by `now`.
    pub fn due(&mut self, now: Instant) -> Vec<Emitted> {
        let closed: Vec<Stream> = Stream::ALL
            .into_iter()
            .filter(|s| {
                self.pending[s.index()]
                    .window_ends
                    .is_some_and(|t| t <= now)
            })
            .collect();
        closed
            .into_iter()
            .filter_map(|s| self.flush_stream(s))
            .collect()
    }

    /// Completion: everything buffered, then one `closed` event per stream used.
    pub fn finish(&mut self) -> Vec<Emitted> {
        let mut events: Vec<Emitted> = Stream::ALL
            .into_iter()
            .filter_map(|s| self.flush_stream(s))
            .collect();
        for stream in Stream::ALL {
            let pending = &mut self.pending[stream.index()];
            if std::mem::take(&mut pending.used) {
                events.push(Emitted {
                    stream,
                    text: String::new(),
                    progress: pending.progress,
                    total: pending.total,
                    closed: true,
                    merged: 0,
                });
            }
        }
        events
    }

    fn flush_stream(&mut self, stream: Stream) -> Option<Emitted> {
        let pending = &mut self.pending[stream.index()];
        pending.window_ends = None;
        if pending.updates == 0 {
            return None;
        }
        let merged = std::mem::take(&mut pending.updates);
        Some(Emitted {
            stream,
            text: std::mem::take(&mut pending.text),
            progress: pending.progress,
            total: pending.total,
            closed: false,
            merged,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(stream: Stream, text: &str, progress: Option<f64>) -> Update {
        Update {
            stream,
            text: text.into(),
            progress,
            total: Some(10.0),
        }
    }

    fn settings(window_ms: u64, max_bytes: usize) -> Settings {
        Settings {
            window: Duration::from_millis(window_ms),
            max_bytes,
        }
    }

    #[test]
    fn updates_within_a_window_merge_into_one_event() {
        let mut c = Coalescer::new(settings(50, 16 * 1024));
        let t0 = Instant::now();
        assert!(c.push(update(Stream::Info, "a", Some(1.0)), t0).is_empty());
        assert!(
            c.push(
                update(Stream::Info, "b", Some(2.0)),
                t0 + Duration::from_millis(20)
            )
            .is_empty()
        );
        assert_eq!(c.next_deadline(), Some(t0 + Duration::from_millis(50)));
        assert!(c.due(t0 + Duration::from_millis(49)).is_empty());
        let events = c.due(t0 + Duration::from_millis(50));
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].text, "ab");
        assert_eq!(events[0].progress, Some(2.0));
        assert_eq!(events[0].merged, 2);
        assert!(!events[0].closed);
        assert_eq!(c.next_deadline(), None);
    }

    #[test]
    fn streams_coalesce_separately() {
        let mut c = Coalescer::new(settings(50, 1024));
        let t0 = Instant::now();
        c.push(update(Stream::Stdout, "out", None), t0);
        c.push(
            update(Stream::Stderr, "err", None),
            t0 + Duration::from_millis(30),
        );
        let first = c.due(t0 + Duration::from_millis(55));
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].stream, Stream::Stdout);
        let second = c.due(t0 + Duration::from_millis(80));
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].stream, Stream::Stderr);
    }

    #[test]
    fn a_full_buffer_flushes_at_once() {
        let mut c = Coalescer::new(settings(50, 8));
        let t0 = Instant::now();
        assert!(c.push(update(Stream::Stdout, "1234", None), t0).is_empty());
        let events = c.push(update(Stream::Stdout, "5678", None), t0);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].text, "12345678");
        assert_eq!(c.next_deadline(), None, "the window closes with the flush");
    }

    #[test]
    fn finish_flushes_then_closes_each_used_stream() {
        let mut c = Coalescer::new(settings(50, 1024));
        let t0 = Instant::now();
        c.push(update(Stream::Info, "x", Some(3.0)), t0);
        let events = c.finish();
        assert_eq!(events.len(), 2);
        assert_eq!((events[0].text.as_str(), events[0].closed), ("x", false));
        assert_eq!((events[1].text.as_str(), events[1].closed), ("", true));
        assert_eq!(events[1].progress, Some(3.0));
        assert!(c.finish().is_empty(), "closed once");
    }

    #[test]
    fn zero_disables_coalescing() {
        for s in [settings(0, 1024), settings(50, 0)] {
            let mut c = Coalescer::new(s);
            let t0 = Instant::now();
            assert_eq!(c.push(update(Stream::Info, "a", None), t0).len(), 1);
            assert_eq!(c.push(update(Stream::Info, "b", None), t0).len(), 1);
        }
    }
}
