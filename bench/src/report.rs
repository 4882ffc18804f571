//! The markdown report: the machine, the call-overhead table, the scale and truncation
//! table, and the targets with met/missed.

use std::fmt::Write;
use std::time::Duration;

use crate::Settings;
use crate::load::{Round, median_duration, median_f64};

/// Medians over the rounds of one path.
#[derive(Clone, Debug)]
pub(crate) struct Summary {
    pub throughput: f64,
    pub p50: Duration,
    pub p99: Duration,
    /// CPU time per call (median over rounds) of what is in the middle: the gateway,
    /// the bare proxy, or a peer.
    pub gateway_cpu: Option<Duration>,
}

impl Summary {
    pub(crate) fn of(rounds: &[Round]) -> Summary {
        let mut throughput: Vec<f64> = rounds.iter().map(|r| r.throughput).collect();
        let mut p50: Vec<Duration> = rounds.iter().map(|r| r.p50).collect();
        let mut p99: Vec<Duration> = rounds.iter().map(|r| r.p99).collect();
        let mut cpu: Vec<Duration> = rounds.iter().filter_map(|r| r.gateway_cpu).collect();
        Summary {
            throughput: median_f64(&mut throughput),
            p50: median_duration(&mut p50),
            p99: median_duration(&mut p99),
            gateway_cpu: (!cpu.is_empty()).then(|| median_duration(&mut cpu)),
        }
    }
}

/// The bare proxy's row: the floor the other MCP rows are also read against.
pub(crate) const FLOOR_ROW: &str = "MCP via a bare proxy (floor)";

pub(crate) struct OverheadRow {
    pub path: String,
    pub concurrency: usize,
    pub direct: Option<Summary>,
    pub gateway: Summary,
}

impl OverheadRow {
    pub(crate) fn ratio(&self) -> Option<f64> {
        let direct = self.direct.as_ref()?;
        (direct.throughput > 0.0).then(|| self.gateway.throughput / direct.throughput)
    }

    pub(crate) fn added_p50(&self) -> Option<f64> {
        let direct = self.direct.as_ref()?;
        Some(micros(self.gateway.p50) - micros(direct.p50))
    }
}

pub(crate) struct Row {
    pub name: String,
    pub value: String,
}

pub(crate) struct Target {
    pub what: String,
    pub target: String,
    pub measured: String,
    pub met: bool,
}

pub(crate) struct Report {
    pub header: String,
    pub overhead: Vec<OverheadRow>,
    /// Lines under the call-overhead table (a peer skipped, and why).
    pub notes: Vec<String>,
    pub rows: Vec<Row>,
    pub targets: Vec<Target>,
}

pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Two decimals, or two significant digits below 0.1 (a peer's ratio is a few
/// thousandths, which `0.00` would hide).
fn fmt_ratio(r: f64) -> String {
    if r >= 0.1 || r == 0.0 {
        format!("{r:.2}")
    } else {
        let decimals = (1.0 - r.log10().floor()) as usize;
        format!("{r:.decimals$}")
    }
}

fn fmt_us(d: Duration) -> String {
    format!("{:.0}", micros(d))
}

/// What the machine is: cores, CPU model, memory.
pub(crate) fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim())
        })
        .unwrap_or("unknown CPU");
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gb = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    // Other work on the machine skews every timing: say how busy it was at the start.
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    format!("{cores} cores, {model}, {mem_gb:.0} GB RAM, load average {load} at start")
}

impl Report {
    pub(crate) fn new(settings: &Settings) -> Report {
        let mode = if settings.smoke {
            "smoke (tiny sizes: proves the bench runs; the numbers mean nothing)".to_owned()
        } else {
            format!(
                "{} rounds per path, direct and gateway alternating, {:.1} s measured after {:.1} s warm-up; medians",
                settings.rounds,
                settings.measure.as_secs_f64(),
                settings.warmup.as_secs_f64()
            )
        };
        Report {
            header: format!("Machine: {}. Mode: {mode}.", machine()),
            overhead: Vec::new(),
            notes: Vec::new(),
            rows: Vec::new(),
            targets: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.rows.push(Row {
            name: name.into(),
            value: value.into(),
        });
    }

    pub(crate) fn note(&mut self, line: impl Into<String>) {
        self.notes.push(line.into());
    }

    /// Throughput of an MCP row over the bare proxy's at the same concurrency.
    fn over_floor(&self, row: &OverheadRow) -> Option<f64> {
        if !row.path.starts_with("MCP") || row.path == FLOOR_ROW {
            return None;
        }
        let floor = self
            .overhead
            .iter()
            .find(|r| r.path == FLOOR_ROW && r.concurrency == row.concurrency)?;
        (floor.gateway.throughput > 0.0).then(|| row.gateway.throughput / floor.gateway.throughput)
    }

    pub(crate) fn target(&mut self, what: &str, target: &str, measured: String, met: bool) {
        self.targets.push(Target {
            what: what.to_owned(),
            target: target.to_owned(),
            measured,
            met,
        });
    }

    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# toolgate bench\n\n{}\n", self.header);
        if !self.overhead.is_empty() {
            let _ = writeln!(out, "## Call overhead\n");
            let _ = writeln!(
                out,
                "| path | c | direct calls/s | gateway calls/s | gateway/direct | gateway/bare proxy | direct p50 µs | gateway p50 µs | added p50 µs | direct p99 µs | gateway p99 µs | CPU µs/call in the middle |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
            for row in &self.overhead {
                let dash = || "—".to_owned();
                let direct = row.direct.as_ref();
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    row.path,
                    row.concurrency,
                    direct.map_or_else(dash, |d| format!("{:.0}", d.throughput)),
                    row.gateway.throughput,
                    row.ratio().map_or_else(dash, fmt_ratio),
                    self.over_floor(row).map_or_else(dash, fmt_ratio),
                    direct.map_or_else(dash, |d| fmt_us(d.p50)),
                    fmt_us(row.gateway.p50),
                    row.added_p50().map_or_else(dash, |a| format!("{a:+.0}")),
                    direct.map_or_else(dash, |d| fmt_us(d.p99)),
                    fmt_us(row.gateway.p99),
                    row.gateway.gateway_cpu.map_or_else(dash, fmt_us),
                );
            }
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "Note: {note}\n");
        }
        if !self.rows.is_empty() {
            let _ = writeln!(out, "## Catalog scale, truncation and background calls\n");
            let _ = writeln!(out, "| measurement | result |");
            let _ = writeln!(out, "|---|---|");
            for row in &self.rows {
                let _ = writeln!(out, "| {} | {} |", row.name, row.value);
            }
            out.push('\n');
        }
        if !self.targets.is_empty() {
            let _ = writeln!(out, "## Targets\n");
            let _ = writeln!(out, "| target | goal | measured | met |");
            let _ = writeln!(out, "|---|---|---|---|");
            for t in &self.targets {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    t.what,
                    t.target,
                    t.measured,
                    if t.met { "yes" } else { "**no**" }
                );
            }
            out.push('\n');
        }
        out
    }
}
