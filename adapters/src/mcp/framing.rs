//! Byte-stream framing for the transports: newline-delimited lines (stdio) and
//! Server-Sent Events (streamable HTTP, legacy SSE), both bounded in size.
//!
//! Both decoders take chunks as they arrive and never hold more than one bounded frame:
//! a broken or hostile peer that never sends a newline cannot make us buffer without
//! limit. An oversized frame is skipped (reported as [`Line::TooLong`]) and reading goes
//! on at the next newline — or, for stdio, the reader sees the overflow at once
//! ([`LineSplitter::overflowing`]) and treats it as a framing error.

/// Largest SSE event (or HTTP body) we accept (a tool result can legitimately be
/// large: images, files as base64). stdio lines have their own, configurable bound.
pub(crate) const MAX_FRAME: usize = 64 * 1024 * 1024;

/// One complete line, or the size of a line we skipped because it was too long.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    Line(Vec<u8>),
    TooLong(usize),
}

/// Splits a byte stream into `\n`-terminated lines (a trailing `\r` is dropped).
#[derive(Debug)]
pub(crate) struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    /// Bytes skipped of the current overlong line; `Some` while skipping.
    skipping: Option<usize>,
}

impl LineSplitter {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            max,
            skipping: None,
        }
    }

    /// Feeds one chunk; calls `out` for every line it completes.
    pub(crate) fn push(&mut self, mut chunk: &[u8], out: &mut impl FnMut(Line)) {
        while !chunk.is_empty() {
            let nl = chunk.iter().position(|&b| b == b'\n');
            let seg = &chunk[..nl.unwrap_or(chunk.len())];
            if let Some(skipped) = self.skipping.as_mut() {
                *skipped += seg.len();
            } else if self.buf.len() + seg.len() > self.max {
                self.skipping = Some(self.buf.len() + seg.len());
                self.buf = Vec::new();
            } else {
                self.buf.extend_from_slice(seg);
            }
            match nl {
                Some(i) => {
                    out(self.take_line());
                    chunk = &chunk[i + 1..];
                }
                None => break,
            }
        }
    }

    /// Whether the current line has already passed the bound (it is being skipped,
    /// and [`Line::TooLong`] follows at its newline). A reader that cannot skip (stdio,
    /// where a lost line is a lost response) stops here rather than waiting for a
    /// newline that may never come.
    pub(crate) fn overflowing(&self) -> Option<usize> {
        self.skipping
    }

    /// At end of stream: the last line if it had no newline.
    pub(crate) fn finish(&mut self) -> Option<Line> {
        if self.skipping.is_none() && self.buf.is_empty() {
            return None;
        }
        Some(self.take_line())
    }

    fn take_line(&mut self) -> Line {
        if let Some(skipped) = self.skipping.take() {
            return Line::TooLong(skipped);
        }
        let mut line = std::mem::take(&mut self.buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Line::Line(line)
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    /// The `event:` field, `message` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field, if the event had one.
    pub id: Option<String>,
}

/// What the SSE decoder yields.
#[derive(Debug, PartialEq)]
pub(crate) enum SseItem {
    Event(SseEvent),
    /// An event (or one of its lines) exceeded the size bound and was dropped.
    TooLong(usize),
}

/// Decodes an SSE stream (per the WHATWG event-stream format; bare `\r` line endings
/// are not supported, no MCP server is known to send them).
#[derive(Debug)]
pub(crate) struct SseDecoder {
    lines: LineSplitter,
    max: usize,
    event: String,
    data: String,
    id: Option<String>,
    has_data: bool,
    /// The current event grew too large: drop it at the next blank line.
    oversized: Option<usize>,
}

impl SseDecoder {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            lines: LineSplitter::new(max),
            max,
            event: String::new(),
            data: String::new(),
            id: None,
            has_data: false,
            oversized: None,
        }
    }

    /// Feeds one chunk; calls `out` for every event it completes.
    pub(crate) fn push(&mut self, chunk: &[u8], out: &mut impl FnMut(SseItem)) {
        let mut lines = Vec::new();
        self.lines.push(chunk, &mut |l| lines.push(l));
        for line in lines {
            self.line(line, out);
        }
    }

    fn line(&mut self, line: Line, out: &mut impl FnMut(SseItem)) {
        let line = match line {
            Line::Line(l) => l,
            Line::TooLong(n) => {
                self.oversized = Some(self.oversized.unwrap_or(0) + n);
                return;
            }
        };
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // comment / keep-alive
        }
        let line = String::from_utf8_lossy(&line);
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.oversized.is_some() {
                    return;
                }
                if self.data.len() + value.len() + 1 > self.max {
                    self.oversized = Some(self.data.len() + value.len());
                    self.data = String::new();
                    return;
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // An id containing NUL must be ignored, says the format.
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {} // `retry` and unknown fields
        }
    }

    fn dispatch(&mut self, out: &mut impl FnMut(SseItem)) {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        let has_data = std::mem::replace(&mut self.has_data, false);
        if let Some(n) = self.oversized.take() {
            out(SseItem::TooLong(n));
            return;
        }
        if !has_data {
            return;
        }
        out(SseItem::Event(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
            id: self.id.clone(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(max: usize, chunks: &[&[u8]]) -> Vec<Line> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut |l| out.push(l));
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn splits_lines_across_chunks() {
        let out = lines(100, &[b"ab", b"c\r\nde\n", b"", b"f"]);
        assert_eq!(
            out,
            vec![
                Line::Line(b"abc".to_vec()),
                Line::Line(b"de".to_vec()),
                Line::Line(b"f".to_vec())
            ]
        );
    }

    #[test]
    fn reports_an_overflow_before_its_newline() {
        let mut s = LineSplitter::new(4);
        let mut out = Vec::new();
        s.push(b"ok\n123", &mut |l| out.push(l));
        assert_eq!(s.overflowing(), None);
        s.push(b"45", &mut |l| out.push(l));
        assert_eq!(s.overflowing(), Some(5));
        assert_eq!(out, vec![Line::Line(b"ok".to_vec())]);
    }

    #[test]
    fn skips_overlong_lines_and_recovers() {
        let out = lines(4, &[b"12", b"3456", b"78\nok\n"]);
        assert_eq!(out, vec![Line::TooLong(8), Line::Line(b"ok".to_vec())]);
    }

    fn events(max: usize, input: &[&[u8]]) -> Vec<SseItem> {
        let mut d = SseDecoder::new(max);
        let mut out = Vec::new();
        for c in input {
            d.push(c, &mut |e| out.push(e));
        }
        out
    }

    #[test]
    fn decodes_events() {
        let out = events(
            1000,
            &[
                b": ping\n\nevent: endpoint\ndata: /m?x=1\n\n",
                b"id: 7\ndata:a\ndata: b\n",
                b"\n",
            ],
        );
        assert_eq!(
            out,
            vec![
                SseItem::Event(SseEvent {
                    event: "endpoint".into(),
                    data: "/m?x=1".into(),
                    id: None
                }),
                SseItem::Event(SseEvent {
                    event: "message".into(),
                    data: "a\nb".into(),
                    id: Some("7".into())
                }),
            ]
        );
    }

    #[test]
    fn drops_oversized_events() {
        let out = events(8, &[b"data: 12345\ndata: 67890\n\ndata: ok\n\n"]);
        assert_eq!(out.len(), 2);
        assert!(matches!(out[0], SseItem::TooLong(_)));
        assert!(matches!(&out[1], SseItem::Event(e) if e.data == "ok"));
    }
}
