//! Tracing of the call path across processes: W3C trace context in, the gateway's
//! spans, trace context out to the upstream, and their export over OTLP.
//!
//! - **In**: `traceparent` and `tracestate` from the HTTP request (`/v1`, `/mcp`) or from
//!   an MCP request's `params._meta` (the MCP convention for trace context; the only
//!   carrier on stdio). On `/mcp` a valid `_meta.traceparent` wins over the header: it
//!   belongs to the one message, the header to the HTTP request. Invalid values are
//!   ignored (the call starts a trace of its own).
//! - **Spans** (target [`SPAN_TARGET`]): the request at its surface
//!   (`toolgate.request`), the policy decision (`toolgate.policy`) and the upstream call
//!   (`toolgate.upstream`), with the tool, the upstream and the outcome — never
//!   argument values, results or credentials.
//! - **Out**: the upstream span's context travels in [`CallContext::trace`]: OpenAPI
//!   requests carry it as `traceparent`/`tracestate` headers, MCP `tools/call` in
//!   `_meta` (HTTP MCP upstreams get the headers too).
//! - **Correlation id**: the trace id (32 hex digits) — the caller's when it sent a
//!   trace context, a fresh random one otherwise. It is in the audit line, in the REST
//!   response header [`CORRELATION_HEADER`] and in an MCP result's `_meta`
//!   ([`CORRELATION_META`]).
//! - **Export**: with `telemetry.otlp_endpoint`, an OpenTelemetry layer (see
//!   [`crate::logging::init`]) sends these spans, and only these, in batches over
//!   OTLP/HTTP (protobuf). Without it no layer wants the spans: creating one costs a
//!   few nanoseconds, and span ids come from the same random generator the exporter
//!   would use.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    SpanContext, TraceContextExt, TraceFlags, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, IdGenerator, RandomIdGenerator, SdkTracerProvider,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolgate_adapters::{CallContext, TraceContext};
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{Filtered, Targets};
use tracing_subscriber::registry::LookupSpan;

/// The target of the call path's spans: exported, never written to the log.
pub const SPAN_TARGET: &str = "toolgate::trace";
/// The REST response header that carries a call's correlation id.
pub const CORRELATION_HEADER: &str = "toolgate-correlation-id";
/// The `_meta` key of an MCP result that carries the call's correlation id.
pub const CORRELATION_META: &str = "toolgate/correlationId";

/// The `telemetry` section of the config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// An OTLP/HTTP collector (e.g. `http://otel-collector:4318`): the call path's
    /// spans are sent to `<endpoint>/v1/traces` (protobuf); an endpoint that already
    /// ends in `/v1/traces` is used as it is. Unset: nothing is exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans.
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// How long finished spans wait before they are sent in one batch.
    #[serde(default = "default_export_interval", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub export_interval: Duration,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: default_service_name(),
            export_interval: default_export_interval(),
        }
    }
}

fn default_service_name() -> String {
    "toolgate".into()
}

fn default_export_interval() -> Duration {
    Duration::from_secs(5)
}

/// One request's trace at its surface: its span, the correlation id, and the
/// context the calls it makes continue.
#[derive(Debug, Clone)]
pub struct CallTrace {
    pub span: tracing::Span,
    pub correlation_id: String,
    context: TraceContext,
}

impl CallTrace {
    /// Starts the span of a request on `surface` (`rest`, `mcp`), continuing the
    /// caller's trace when `meta` (an MCP request's `_meta.traceparent` and
    /// `_meta.tracestate`) or `headers` carry a valid one.
    pub fn start(
        surface: &'static str,
        headers: &HeaderMap,
        meta: Option<(&str, Option<&str>)>,
    ) -> CallTrace {
        let parent = meta
            .and_then(|(traceparent, tracestate)| remote(traceparent, tracestate))
            .or_else(|| {
                let field = |key| headers.get(key).and_then(|v| v.to_str().ok());
                remote(field("traceparent")?, field("tracestate"))
            });
        let span = tracing::info_span!(
            target: SPAN_TARGET,
            parent: None,
            "toolgate.request",
            otel.kind = "server",
            surface,
        );
        let own = continue_trace(&span, parent.as_ref());
        let context = trace_context(&own);
        CallTrace {
            span,
            // The trace id, as `traceparent` writes it (`00-<32 hex>-…`).
            correlation_id: context.traceparent[3..35].to_owned(),
            context,
        }
    }

    /// Puts the correlation id in a REST answer's [`CORRELATION_HEADER`].
    pub fn tag(&self, response: &mut axum::response::Response) {
        if let Ok(value) = http::HeaderValue::from_str(&self.correlation_id) {
            response.headers_mut().insert(CORRELATION_HEADER, value);
        }
    }

    /// A call context under this trace: `timeout` to go, the correlation id, and the
    /// request's span as the parent of what the call does.
    pub fn call_context(&self, timeout: Duration) -> CallContext {
        let mut ctx = CallContext::new(timeout, self.correlation_id.clone());
        ctx.trace = Some(self.context.clone());
        ctx
    }
}

/// Middleware of the REST call routes: the request's [`CallTrace`] (an extension the
/// handler takes), its span around the handler, and the correlation id in the
/// response's [`CORRELATION_HEADER`] — on every answer, refusals included.
pub async fn rest_calls(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use tracing::Instrument;
    let trace = CallTrace::start("rest", request.headers(), None);
    request.extensions_mut().insert(trace.clone());
    let mut response = next.run(request).instrument(trace.span.clone()).await;
    trace.tag(&mut response);
    response
}

/// A fresh correlation id for a request that is not a tool call (prompts, resources):
/// the same form as a trace id.
pub fn new_correlation_id() -> String {
    RandomIdGenerator::default().new_trace_id().to_string()
}

/// Makes `span` a child of the span `ctx` carries (the request's, across tasks) and
/// answers the context for work under `span` (what the upstream receives).
pub fn child_of(span: &tracing::Span, ctx: &CallContext) -> Option<TraceContext> {
    let trace = ctx.trace.as_ref()?;
    // Nothing records the span (no export): the same trace with a span id of our own,
    // without parsing what we wrote ourselves (`00-<32>-<16>-<2>`). This is on the path
    // of every call.
    if span.is_disabled()
        && trace.traceparent.len() == TRACEPARENT_LEN
        && trace.traceparent.is_ascii()
    {
        let span_id = RandomIdGenerator::default().new_span_id();
        let mut traceparent = String::with_capacity(TRACEPARENT_LEN);
        traceparent.push_str(&trace.traceparent[..36]);
        push_hex(&mut traceparent, &span_id.to_bytes());
        traceparent.push_str(&trace.traceparent[52..]);
        return Some(TraceContext {
            traceparent,
            tracestate: trace.tracestate.clone(),
        });
    }
    let parent = remote(&trace.traceparent, trace.tracestate.as_deref())?;
    Some(trace_context(&continue_trace(span, Some(&parent))))
}

/// Makes `span` a child of the span `ctx` carries, when anything records it.
pub fn parent_on(span: &tracing::Span, ctx: &CallContext) {
    if !span.is_disabled() {
        let _ = child_of(span, ctx);
    }
}

/// A valid remote span context from W3C header values, or `None`.
fn remote(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    struct Fields<'a>(&'a str, Option<&'a str>);
    impl Extractor for Fields<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            match key {
                "traceparent" => Some(self.0),
                "tracestate" => self.1,
                _ => None,
            }
        }
        fn keys(&self) -> Vec<&str> {
            vec!["traceparent", "tracestate"]
        }
    }
    let cx = TraceContextPropagator::new().extract_with_context(
        &opentelemetry::Context::new(),
        &Fields(traceparent, tracestate),
    );
    let parent = cx.span().span_context().clone();
    (parent.is_valid() && parent.is_remote()).then_some(parent)
}

/// Parents `span` on `parent` (a new trace when `None`) and answers `span`'s own
/// context: the exported span's ids when an OpenTelemetry layer records it, ids of
/// our own otherwise (the same trace, a fresh span id).
fn continue_trace(span: &tracing::Span, parent: Option<&SpanContext>) -> SpanContext {
    if let Some(parent) = parent {
        // Fails only without an OpenTelemetry layer: then nothing records the span.
        let _ =
            span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent.clone()));
    }
    let recorded = span.context().span().span_context().clone();
    if recorded.is_valid() {
        return recorded;
    }
    let ids = RandomIdGenerator::default();
    match parent {
        Some(parent) => SpanContext::new(
            parent.trace_id(),
            ids.new_span_id(),
            parent.trace_flags(),
            false,
            parent.trace_state().clone(),
        ),
        None => SpanContext::new(
            ids.new_trace_id(),
            ids.new_span_id(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
    }
}

/// `span`'s context as upstreams receive it.
fn trace_context(span: &SpanContext) -> TraceContext {
    let state = span.trace_state().header();
    // `00-<trace id>-<span id>-<flags>`, written directly: `format!` through the ids'
    // `Display` was a few thousand instructions of every call.
    let mut traceparent = String::with_capacity(TRACEPARENT_LEN);
    traceparent.push_str("00-");
    push_hex(&mut traceparent, &span.trace_id().to_bytes());
    traceparent.push('-');
    push_hex(&mut traceparent, &span.span_id().to_bytes());
    traceparent.push('-');
    push_hex(&mut traceparent, &[span.trace_flags().to_u8()]);
    TraceContext {
        traceparent,
        tracestate: (!state.is_empty()).then_some(state),
    }
}

/// The length of a version-00 `traceparent`: `00-<32 hex>-<16 hex>-<2 hex>`.
const TRACEPARENT_LEN: usize = 55;

/// Appends `bytes` as lowercase hex.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

/// The running export: flush it before the process ends ([`Exporter::shutdown`]).
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Sends the spans still waiting (bounded in time) and stops the export.
    pub async fn shutdown(self) {
        let provider = self.provider;
        // The batch thread sends through the runtime: do not block a runtime thread
        // while it does.
        let flushed = tokio::task::spawn_blocking(move || {
            provider.shutdown_with_timeout(Duration::from_secs(5))
        });
        match tokio::time::timeout(Duration::from_secs(6), flushed).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "spans not exported at shutdown"),
            _ => tracing::warn!("exporting the last spans timed out at shutdown"),
        }
    }
}

/// The layer that exports the call path's spans (and only them), when `config` names
/// an endpoint. Must be called within the runtime that will carry the exports.
#[allow(clippy::type_complexity)]
pub fn layer<S>(
    config: &TelemetryConfig,
) -> Result<
    Option<(
        Filtered<
            tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
            Targets,
            S,
        >,
        Exporter,
    )>,
    String,
>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(endpoint) = config.otlp_endpoint.as_deref() else {
        return Ok(None);
    };
    let url = traces_url(endpoint)?;
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| "telemetry: the OTLP export needs the async runtime".to_owned())?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("telemetry: cannot build the OTLP HTTP client: {e}"))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_timeout(Duration::from_secs(10))
        .with_http_client(OnRuntime {
            client,
            runtime,
            failing: Arc::default(),
        })
        .build()
        .map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
    let batches = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_scheduled_delay(config.export_interval)
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(batches)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("toolgate"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_filter(Targets::new().with_target(SPAN_TARGET, tracing::Level::TRACE));
    Ok(Some((layer, Exporter { provider })))
}

/// `<endpoint>/v1/traces`, or the endpoint itself when it already names that path.
fn traces_url(endpoint: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(endpoint).map_err(|e| {
        format!("telemetry.otlp_endpoint '{endpoint}' is not a URL ({e}): give the collector's OTLP/HTTP address, e.g. http://otel-collector:4318")
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "telemetry.otlp_endpoint '{endpoint}' must be an http:// or https:// URL (OTLP over HTTP)"
        ));
    }
    let trimmed = endpoint.trim_end_matches('/');
    Ok(
        if url.path().trim_end_matches('/').ends_with("/v1/traces") {
            trimmed.to_owned()
        } else {
            format!("{trimmed}/v1/traces")
        },
    )
}

/// The exporter's HTTP client: the SDK exports from a thread of its own, outside the
/// runtime; each request runs on the runtime it was made in.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
    /// Set after a failed export, so a collector that is down is reported once, not
    /// every batch.
    failing: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OnRuntime {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let request = reqwest::Request::try_from(request)?;
            let response = client.execute(request).await?;
            let status = response.status();
            // The collector's answer is small (a partial-success message at most).
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        });
        let outcome = match sent.await {
            Ok(outcome) => outcome.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let failed = match &outcome {
            Ok((status, _)) if status.is_success() => None,
            Ok((status, _)) => Some(format!("the collector answered HTTP {status}")),
            Err(error) => Some(error.clone()),
        };
        match failed {
            Some(error) if !self.failing.swap(true, Ordering::Relaxed) => {
                tracing::warn!(%error, "spans could not be exported to telemetry.otlp_endpoint (reported once until an export succeeds)");
            }
            Some(error) => tracing::debug!(%error, "span export failed"),
            None => self.failing.store(false, Ordering::Relaxed),
        }
        let (status, body) = outcome?;
        Ok(http::Response::builder().status(status).body(body)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceId};

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_continued_with_a_span_of_our_own() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", PARENT.parse().unwrap());
        headers.insert("tracestate", "vendor=abc".parse().unwrap());
        let trace = CallTrace::start("rest", &headers, None);
        assert_eq!(trace.correlation_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        let ctx = trace.call_context(Duration::from_secs(1));
        let sent = ctx.trace.clone().unwrap();
        assert!(
            sent.traceparent
                .starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-")
        );
        assert!(sent.traceparent.ends_with("-01"));
        assert_ne!(sent.traceparent, PARENT, "the gateway's span is the parent");
        assert_eq!(sent.tracestate.as_deref(), Some("vendor=abc"));
        assert_eq!(ctx.correlation_id, trace.correlation_id);

        let span = tracing::info_span!(target: SPAN_TARGET, "toolgate.upstream");
        let child = child_of(&span, &ctx).unwrap();
        assert_eq!(child.traceparent[..36], sent.traceparent[..36]);
        assert_ne!(child.traceparent, sent.traceparent);
    }

    #[test]
    fn meta_wins_over_the_header_and_invalid_values_start_a_new_trace() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", PARENT.parse().unwrap());
        let meta = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
        let trace = CallTrace::start("mcp", &headers, Some((meta, None)));
        assert_eq!(trace.correlation_id, "0af7651916cd43dd8448eb211c80319c");
        let sent = trace.call_context(Duration::from_secs(1)).trace.unwrap();
        assert!(sent.traceparent.ends_with("-00"), "not sampled stays so");

        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "garbage",
            "",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert("traceparent", bad.parse().unwrap());
            let a = CallTrace::start("rest", &headers, None);
            let b = CallTrace::start("rest", &headers, None);
            assert_eq!(a.correlation_id.len(), 32, "{bad}");
            assert_ne!(a.correlation_id, b.correlation_id, "{bad}");
            assert_ne!(a.correlation_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        }
    }

    #[test]
    fn the_written_traceparent_is_what_the_ids_display() {
        for (trace_id, span_id, flags) in [
            (1u128, 1u64, TraceFlags::SAMPLED),
            (u128::MAX, u64::MAX, TraceFlags::default()),
            (
                0x0af7651916cd43dd8448eb211c80319c,
                0xb7ad6b7169203331,
                TraceFlags::SAMPLED,
            ),
        ] {
            let span = SpanContext::new(
                TraceId::from(trace_id),
                SpanId::from(span_id),
                flags,
                true,
                Default::default(),
            );
            let expected = format!(
                "00-{}-{}-{:02x}",
                span.trace_id(),
                span.span_id(),
                flags.to_u8()
            );
            assert_eq!(trace_context(&span).traceparent, expected);
            assert_eq!(expected.len(), TRACEPARENT_LEN);
        }
    }

    #[test]
    fn the_traces_url_is_derived_from_the_endpoint() {
        assert_eq!(
            traces_url("http://collector:4318").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://c.example/otlp/v1/traces").unwrap(),
            "https://c.example/otlp/v1/traces"
        );
        assert!(traces_url("collector:4317").is_err());
        assert!(traces_url("not a url").is_err());
    }
}
