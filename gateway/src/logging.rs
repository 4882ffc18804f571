//! The process's log output: `tracing-subscriber`'s plain format, with the audit line
//! of every tool call written by a formatter of its own.
//!
//! The audit line is on the call path of every call. The generic formatter writes each
//! field through `fmt::write`, wraps names in (disabled) styling and formats the
//! timestamp field by field: a visible share of a whole MCP call through the gateway
//! (bench/README.md, "Audit line and HTTP transport"). [`LineFormat`] writes the same bytes directly
//! when it can vouch for them — an event on [`AUDIT_TARGET`], no colours, no span
//! around it — and hands every other event to the generic formatter. A unit test
//! checks the two agree byte for byte.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The target of the per-call audit line.
pub const AUDIT_TARGET: &str = "toolgate::audit";

/// What [`init`] answers: held for the life of the process, then [`Logging::finish`]ed.
pub struct Logging {
    /// The trace export, when `telemetry.otlp_endpoint` is set.
    exporter: Option<crate::telemetry::Exporter>,
    /// Dropping it writes the lines still queued (waiting up to a second).
    _flush: tracing_appender::non_blocking::WorkerGuard,
}

impl Logging {
    /// Sends the spans still waiting, then writes the log lines still queued.
    pub async fn finish(self) {
        if let Some(exporter) = self.exporter {
            exporter.shutdown().await;
        }
    }
}

/// Lines queued for the writer thread before a caller waits for room: bounded memory,
/// and no line dropped (a full queue slows the callers down instead).
const QUEUED_LINES: usize = 16_384;

/// Logs to stderr at `TOOLGATE_LOG` (default `info`, with rmcp and notify at `warn`)
/// and, when `telemetry.otlp_endpoint` is set, exports the call path's spans (see
/// [`crate::telemetry`]).
///
/// Lines are written by a thread of their own, in batches (one `write` for every line
/// queued meanwhile): a locked, unbuffered write to stderr for every audit line, on
/// the thread answering the call, was 13 % of the gateway's CPU per call at c=16
/// (bench/HISTORY.md, "Call overhead against the bare proxy", item 1). The queue is
/// bounded and lossless.
///
/// Each output filters on its own: the log never shows the call path's spans (an
/// audit line inside one keeps the direct path), the export takes nothing else.
/// Without an export no layer wants those spans, so they are never created: an
/// absent layer must not be added as `None`, which `tracing-subscriber` counts as
/// interested in everything.
pub fn init(telemetry: &crate::telemetry::TelemetryConfig) -> Result<Logging, String> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    // rmcp logs every notification at INFO, notify its watch bookkeeping; keep them at
    // warn unless asked.
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn,notify=warn"))
        .add_directive(
            format!("{}=off", crate::telemetry::SPAN_TARGET)
                .parse()
                .map_err(|e| format!("log filter: {e}"))?,
        );
    let (writer, flush) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(QUEUED_LINES)
        .thread_name("toolgate-log")
        .finish(std::io::BufWriter::new(std::io::stderr()));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        // Colour codes only for a person at a terminal, not in collected logs.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .event_format(LineFormat::new(AuditClock))
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(log);
    let exporter = match crate::telemetry::layer(telemetry)? {
        Some((layer, exporter)) => registry.with(layer).try_init().map(|()| Some(exporter)),
        None => registry.try_init().map(|()| None),
    }
    .map_err(|e| format!("logging: {e}"))?;
    Ok(Logging {
        exporter,
        _flush: flush,
    })
}

/// The generic full format, with a direct path for audit lines.
pub struct LineFormat<T> {
    generic: Format<Full, T>,
    clock: T,
}

impl<T: FormatTime + Clone> LineFormat<T> {
    pub fn new(clock: T) -> Self {
        LineFormat {
            generic: Format::default().with_timer(clock.clone()),
            clock,
        }
    }
}

impl<S, N, T> FormatEvent<S, N> for LineFormat<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        if meta.target() != AUDIT_TARGET
            || *meta.level() != Level::INFO
            || writer.has_ansi_escapes()
            || ctx.event_scope().is_some()
        {
            return self.generic.format_event(ctx, writer, event);
        }
        // What the generic format writes for an INFO event without spans.
        self.clock.format_time(&mut writer)?;
        writer.write_str("  INFO ")?;
        writer.write_str(AUDIT_TARGET)?;
        writer.write_str(": ")?;
        let mut fields = PlainFields {
            writer: &mut writer,
            first: true,
            result: Ok(()),
        };
        event.record(&mut fields);
        fields.result?;
        writer.write_char('\n')
    }
}

/// The timestamp of the generic format (`SystemTime`: RFC 3339, microseconds, UTC),
/// written in one piece.
#[derive(Clone, Copy, Default)]
pub struct AuditClock;

impl FormatTime for AuditClock {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let now = std::time::SystemTime::now();
        // Beyond year 9999 the generic format adds a sign; humantime cannot say it.
        if now
            .duration_since(std::time::UNIX_EPOCH)
            .is_ok_and(|d| d.as_secs() < 253_402_300_800)
        {
            write!(w, "{}", humantime::format_rfc3339_micros(now))
        } else {
            SystemTime.format_time(w)
        }
    }
}

/// The fields as the generic format writes them without colours: the message first
/// as text, then `name=value` separated by spaces, values in their `Debug` form.
struct PlainFields<'a, 'w> {
    writer: &'a mut Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl PlainFields<'_, '_> {
    /// The separator and `name=`, or the message's place.
    fn start(&mut self, field: &Field) -> bool {
        if self.result.is_err() {
            return false;
        }
        if !std::mem::take(&mut self.first) {
            self.result = self.writer.write_char(' ');
        }
        let name = field.name();
        if name != "message" {
            let name = name.strip_prefix("r#").unwrap_or(name);
            self.result = self
                .result
                .and_then(|()| self.writer.write_str(name))
                .and_then(|()| self.writer.write_char('='));
        }
        self.result.is_ok()
    }
}

impl Visit for PlainFields<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.start(field) {
            return;
        }
        self.result = if field.name() == "message" {
            self.writer.write_str(value)
        } else if value
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
        {
            // Printable ASCII without quotes or backslashes: `Debug` adds only quotes.
            self.writer
                .write_char('"')
                .and_then(|()| self.writer.write_str(value))
                .and_then(|()| self.writer.write_char('"'))
        } else {
            write!(self.writer, "{value:?}")
        };
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if self.start(field) {
            self.result = self.writer.write_str(itoa::Buffer::new().format(value));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if self.start(field) {
            self.result = self.writer.write_str(itoa::Buffer::new().format(value));
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if self.start(field) {
            self.result = self.writer.write_str(if value { "true" } else { "false" });
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.start(field) {
            self.result = write!(self.writer, "{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// A clock that always says the same, so two formatters' lines compare equal.
    #[derive(Clone)]
    struct Fixed;

    impl FormatTime for Fixed {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            w.write_str("2026-11-21T13:23:16.123456Z")
        }
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// Audit-shaped events with awkward values, and events the direct path leaves alone.
    fn emit_events() {
        let tenant = "team \"a\"";
        for session in ["-", "9f3c2a", "tab\there", "naïve ☃", "back\\slash", ""] {
            tracing::info!(
                target: "toolgate::audit",
                tenant = %tenant,
                session,
                result_tokens = 12_000u64,
                original_tokens = 0u64,
                truncated = true,
                delta = -5i64,
                ratio = 0.5f64,
                tool = "up__tool.name",
                arguments = "{\"q\":\"x\"}",
                outcome = "ok",
                "tool call"
            );
        }
        tracing::info!(target: "toolgate::audit", r#type = "raw", "tool call");
        tracing::warn!(target: "toolgate::audit", outcome = "odd", "not info");
        tracing::info!(target: "toolgate::other", tool = "x", "another target");
        let span = tracing::info_span!("request", id = 7);
        let _inside = span.enter();
        tracing::info!(target: "toolgate::audit", tool = "in a span", "tool call");
    }

    #[test]
    fn audit_lines_match_the_generic_format_byte_for_byte() {
        let generic = Captured::default();
        let direct = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(generic.clone())
            .with_ansi(false)
            .event_format(Format::default().with_timer(Fixed))
            .finish();
        tracing::subscriber::with_default(subscriber, emit_events);
        let subscriber = tracing_subscriber::fmt()
            .with_writer(direct.clone())
            .with_ansi(false)
            .event_format(LineFormat::new(Fixed))
            .finish();
        tracing::subscriber::with_default(subscriber, emit_events);

        let (generic, direct) = (generic.text(), direct.text());
        assert_eq!(generic.lines().count(), 10, "{generic}");
        for (g, d) in generic.lines().zip(direct.lines()) {
            assert_eq!(d, g);
        }
        assert_eq!(direct, generic);
    }

    #[test]
    fn the_call_paths_spans_never_reach_the_log() {
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;

        let plain = Captured::default();
        let traced = Captured::default();
        let audit = || {
            tracing::info!(target: "toolgate::audit", tool = "t", outcome = "ok", "tool call");
        };
        for (out, in_span) in [(&plain, false), (&traced, true)] {
            let filter = tracing_subscriber::EnvFilter::new("info").add_directive(
                format!("{}=off", crate::telemetry::SPAN_TARGET)
                    .parse()
                    .unwrap(),
            );
            let layer = tracing_subscriber::fmt::layer()
                .with_writer(out.clone())
                .with_ansi(false)
                .event_format(LineFormat::new(Fixed))
                .with_filter(filter);
            let subscriber = tracing_subscriber::registry().with(layer);
            tracing::subscriber::with_default(subscriber, || {
                if in_span {
                    let span = tracing::info_span!(target: "toolgate::trace", "toolgate.request", surface = "rest");
                    let _inside = span.enter();
                    audit();
                } else {
                    audit();
                }
            });
        }
        assert_eq!(plain.text().lines().count(), 1);
        assert_eq!(
            traced.text(),
            plain.text(),
            "no span prefix, the direct path"
        );
    }

    #[test]
    fn the_audit_clock_writes_what_the_generic_clock_writes() {
        let mut ours = String::new();
        let mut theirs = String::new();
        AuditClock.format_time(&mut Writer::new(&mut ours)).unwrap();
        SystemTime
            .format_time(&mut Writer::new(&mut theirs))
            .unwrap();
        // Read a moment apart: the same shape, and the same second unless one was
        // read on either side of a second's end.
        assert_eq!(ours.len(), theirs.len(), "{ours} vs {theirs}");
        let shape = |s: &str| {
            s.bytes()
                .map(|b| if b.is_ascii_digit() { b'0' } else { b })
                .collect::<Vec<u8>>()
        };
        assert_eq!(shape(&ours), shape(&theirs), "{ours} vs {theirs}");
        assert_eq!(shape(&ours), b"0000-00-00T00:00:00.000000Z".to_vec());
        let second = |s: &str| {
            let t = humantime::parse_rfc3339(s).unwrap();
            t.duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        };
        assert!(
            (second(&ours) - second(&theirs)).abs() < 1.0,
            "{ours} vs {theirs}"
        );
    }
}
