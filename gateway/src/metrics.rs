//! Prometheus metrics: calls, errors and latency per tool and upstream, and each
//! upstream's health as a gauge. Served at `GET /metrics` in the classic Prometheus
//! text format (0.0.4) by default and as OpenMetrics 1.0 when the scraper asks for it:
//! each body matches the content type it is sent with.

use prometheus_client::encoding::{EncodeLabelSet, text::encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `tool` and `upstream` label of a call to a name the caller may not see.
pub const UNKNOWN: &str = "<unknown>";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    upstream: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// The metrics a successful call of one tool updates, looked up once: the call path
/// then counts without building label sets (nine `String`s) and hashing them four
/// times per call (bench/HISTORY.md, "Call overhead against the bare proxy", item 4).
#[derive(Clone)]
struct OkCall {
    upstream: String,
    calls: Counter,
    latency: Histogram,
    original_tokens: Counter,
    result_tokens: Counter,
}

/// Tools whose [`OkCall`] is kept; past it, calls take the plain path (the families
/// themselves keep every label set, as before).
const OK_CALLS_KEPT: usize = 4096;

/// Every metric the gateway exports.
pub struct Metrics {
    ok_calls: std::sync::RwLock<foldhash::HashMap<String, OkCall>>,
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    latency: Family<ToolLabels, Histogram>,
    health: Family<UpstreamLabels, Gauge>,
    catalog_tools: Gauge,
    original_tokens: Family<ToolLabels, Counter>,
    result_tokens: Family<ToolLabels, Counter>,
    config_reloads: Family<OutcomeLabels, Counter>,
    refusals: Family<OutcomeLabels, Counter>,
    tasks: Family<OutcomeLabels, Counter>,
    task_duration: Family<OutcomeLabels, Histogram>,
    /// Calls and errors per upstream over the last minutes (the console's sparklines),
    /// counted with `tool_calls`.
    pub recent: crate::recent::RecentCalls,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("toolgate");
        let calls = Family::<CallLabels, Counter>::default();
        // 100 µs .. ~100 s: gateway overhead is sub-millisecond, tools take seconds.
        let latency = Family::<ToolLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.0001, 4.0, 11,
            ))
        });
        let health = Family::<UpstreamLabels, Gauge>::default();
        let catalog_tools = Gauge::default();
        let original_tokens = Family::<ToolLabels, Counter>::default();
        let result_tokens = Family::<ToolLabels, Counter>::default();
        registry.register(
            "tool_result_original_tokens",
            "Tokens of tool results as the upstreams returned them",
            original_tokens.clone(),
        );
        registry.register(
            "tool_result_tokens",
            "Tokens of tool results as returned to callers (after fitting to budgets)",
            result_tokens.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls by tool, upstream and outcome (ok, tool_error, or an error code)",
            calls.clone(),
        );
        registry.register(
            "tool_call_duration_seconds",
            "Tool call latency through the gateway",
            latency.clone(),
        );
        registry.register(
            "upstream_health",
            "Upstream health: 0 starting, 1 healthy, 2 degraded, 3 down",
            health.clone(),
        );
        registry.register(
            "catalog_tools",
            "Tools in the catalog",
            catalog_tools.clone(),
        );
        let config_reloads = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "config_reloads",
            "Config file reloads by outcome: ok (applied) or rejected (invalid; the running config was kept)",
            config_reloads.clone(),
        );
        let refusals = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "refusals",
            "Requests refused before reaching a tool, by outcome: an authentication error code \
             (missing_credentials, invalid_credentials, unknown_tenant, …), rate_limited or \
             state_unavailable",
            refusals.clone(),
        );
        let tasks = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "tasks",
            "Background tasks by event: created, then one ending each: completed, failed, \
             cancelled, or lost (its replica stopped; counted by the replica that noticed)",
            tasks.clone(),
        );
        // 10 ms .. ~3 h: tasks are the calls too long for a request.
        let task_duration = Family::<OutcomeLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.01, 4.0, 11,
            ))
        });
        registry.register(
            "task_duration_seconds",
            "Background task duration, creation to ending, by how it ended",
            task_duration.clone(),
        );
        Self {
            ok_calls: Default::default(),
            recent: crate::recent::RecentCalls::default(),
            registry,
            tasks,
            task_duration,
            config_reloads,
            refusals,
            calls,
            latency,
            health,
            catalog_tools,
            original_tokens,
            result_tokens,
        }
    }

    /// Counts a task event (`created`, or how it ended).
    pub fn record_task(&self, event: &str) {
        self.tasks
            .get_or_create(&OutcomeLabels {
                outcome: event.to_owned(),
            })
            .inc();
    }

    /// Records how long a task ran, by how it ended.
    pub fn record_task_duration(&self, outcome: &str, duration: std::time::Duration) {
        self.task_duration
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .observe(duration.as_secs_f64());
    }

    /// Records a result's tokens before and after fitting it to its budget.
    pub fn record_result_tokens(
        &self,
        tool: &str,
        upstream: &str,
        original: usize,
        returned: usize,
    ) {
        let counted = self.with_ok_call(tool, upstream, |ok| {
            ok.original_tokens.inc_by(original as u64);
            ok.result_tokens.inc_by(returned as u64);
        });
        if counted {
            return;
        }
        let labels = ToolLabels {
            tool: tool.to_owned(),
            upstream: upstream.to_owned(),
        };
        self.original_tokens
            .get_or_create(&labels)
            .inc_by(original as u64);
        self.result_tokens
            .get_or_create(&labels)
            .inc_by(returned as u64);
    }

    /// Runs `update` on the kept metrics of `tool` called on `upstream`; `false` when
    /// none are kept (no successful call yet, or too many tools).
    fn with_ok_call(&self, tool: &str, upstream: &str, update: impl FnOnce(&OkCall)) -> bool {
        let kept = self.ok_calls.read().unwrap_or_else(|e| e.into_inner());
        match kept.get(tool).filter(|ok| ok.upstream == upstream) {
            Some(ok) => {
                update(ok);
                true
            }
            None => false,
        }
    }

    /// Looks up (creates) the metrics of a successful call of `tool` and keeps them,
    /// up to [`OK_CALLS_KEPT`] tools.
    fn keep_ok_call(&self, tool: &str, upstream: &str) -> OkCall {
        let labels = ToolLabels {
            tool: tool.to_owned(),
            upstream: upstream.to_owned(),
        };
        let ok = OkCall {
            upstream: upstream.to_owned(),
            calls: self
                .calls
                .get_or_create(&CallLabels {
                    tool: tool.to_owned(),
                    upstream: upstream.to_owned(),
                    outcome: "ok".to_owned(),
                })
                .clone(),
            latency: self.latency.get_or_create(&labels).clone(),
            original_tokens: self.original_tokens.get_or_create(&labels).clone(),
            result_tokens: self.result_tokens.get_or_create(&labels).clone(),
        };
        let mut kept = self.ok_calls.write().unwrap_or_else(|e| e.into_inner());
        if kept.len() < OK_CALLS_KEPT || kept.contains_key(tool) {
            kept.insert(tool.to_owned(), ok.clone());
        }
        ok
    }

    /// Records a request refused before it reached a tool (`outcome` is a code from a
    /// fixed set, never anything the caller chose).
    pub fn record_refusal(&self, outcome: &'static str) {
        self.refusals
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts a call refused before it reached its upstream (unknown or hidden tool,
    /// not selected). `tool` and `upstream` are [`UNKNOWN`] unless the caller may see
    /// the tool: labels never carry a name the tenant may not see, nor one it made up.
    pub fn record_refused_call(&self, tool: &str, upstream: &str, outcome: &str) {
        self.count_call(tool, upstream, outcome);
    }

    /// Records one finished call.
    pub fn record_call(&self, tool: &str, upstream: &str, outcome: &str, seconds: f64) {
        if outcome == "ok" {
            let count = |ok: &OkCall| {
                ok.calls.inc();
                ok.latency.observe(seconds);
            };
            if !self.with_ok_call(tool, upstream, count) {
                count(&self.keep_ok_call(tool, upstream));
            }
            self.count_recent(upstream, outcome);
            return;
        }
        self.count_call(tool, upstream, outcome);
        self.latency
            .get_or_create(&ToolLabels {
                tool: tool.to_owned(),
                upstream: upstream.to_owned(),
            })
            .observe(seconds);
    }

    /// One more call in `toolgate_tool_calls_total`, whatever became of it.
    fn count_call(&self, tool: &str, upstream: &str, outcome: &str) {
        self.count_recent(upstream, outcome);
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                upstream: upstream.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// One more call in the console's recent counts of its upstream.
    fn count_recent(&self, upstream: &str, outcome: &str) {
        if upstream != UNKNOWN {
            self.recent.record(upstream, outcome != "ok");
        }
    }

    pub fn set_health(&self, upstream: &str, value: i64) {
        self.health
            .get_or_create(&UpstreamLabels {
                upstream: upstream.to_owned(),
            })
            .set(value);
    }

    /// Records one config reload: `ok` or `rejected`.
    pub fn record_config_reload(&self, outcome: &str) {
        self.config_reloads
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    pub fn set_catalog_size(&self, tools: usize) {
        self.catalog_tools.set(tools as i64);
    }

    /// The OpenMetrics 1.0 exposition (ends with `# EOF`).
    pub fn render_openmetrics(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// The classic Prometheus text exposition (format 0.0.4).
    pub fn render(&self) -> String {
        classic_text(&self.render_openmetrics())
    }
}

/// The media type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text";

/// OpenMetrics text as the classic Prometheus format: the two differ, for what this
/// registry holds, only in that a counter's `HELP`/`TYPE` lines name its `_total`
/// sample, and that `UNIT` and the closing `# EOF` do not exist.
fn classic_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|prefix| Some((prefix, line.strip_prefix(prefix)?)));
        match descriptor {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_calls_and_health() {
        let metrics = Metrics::new();
        metrics.record_call("ev__echo", "ev", "ok", 0.002);
        metrics.set_health("ev", 1);
        let text = metrics.render();
        assert!(
            text.contains(
                r#"toolgate_tool_calls_total{tool="ev__echo",upstream="ev",outcome="ok"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"toolgate_upstream_health{upstream="ev"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("toolgate_tool_call_duration_seconds_bucket"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE toolgate_tool_calls_total counter"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        let openmetrics = metrics.render_openmetrics();
        assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
        assert!(
            openmetrics.contains("# TYPE toolgate_tool_calls counter"),
            "{openmetrics}"
        );
    }

    #[test]
    fn kept_call_metrics_count_like_the_families() {
        let metrics = Metrics::new();
        for _ in 0..3 {
            metrics.record_call("ev__echo", "ev", "ok", 0.002);
            metrics.record_result_tokens("ev__echo", "ev", 10, 7);
        }
        // The same name on another upstream label (a refused name is `<unknown>`)
        // and another outcome take their own series.
        metrics.record_call("ev__echo", UNKNOWN, "ok", 0.002);
        metrics.record_call("ev__echo", "ev", "tool_error", 0.002);
        metrics.record_result_tokens("ev__echo", "ev", 5, 5);
        let text = metrics.render();
        for line in [
            r#"toolgate_tool_calls_total{tool="ev__echo",upstream="ev",outcome="ok"} 3"#,
            r#"toolgate_tool_calls_total{tool="ev__echo",upstream="<unknown>",outcome="ok"} 1"#,
            r#"toolgate_tool_calls_total{tool="ev__echo",upstream="ev",outcome="tool_error"} 1"#,
            r#"toolgate_tool_call_duration_seconds_count{tool="ev__echo",upstream="ev"} 4"#,
            r#"toolgate_tool_result_original_tokens_total{tool="ev__echo",upstream="ev"} 35"#,
            r#"toolgate_tool_result_tokens_total{tool="ev__echo",upstream="ev"} 26"#,
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        // The console's recent counts see every call of a visible upstream.
        let recent = metrics.recent.series("ev");
        assert_eq!(recent.calls.iter().sum::<u32>(), 4);
        assert_eq!(recent.errors.iter().sum::<u32>(), 1);
    }
}
