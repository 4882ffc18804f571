//! The call path's second half: from an admitted tool to the upstream's answer fitted
//! to its token budget, with one record of every call — finished or refused — that
//! writes both the audit line and the metrics.

use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate_adapters::{CallContext, CallOutput, Connection, JsonObject, ToolError};
use tracing::Instrument;

use super::Admitted;
use crate::catalog::Entry;
use crate::errors::unknown_tool;
use crate::gateway::{Gateway, Mounted};
use crate::policy::Caller;

/// Results with more text than this are fitted to their budget on the blocking pool:
/// tokenizing a megabyte takes tens of milliseconds.
const LARGE_TEXT_BYTES: usize = 64 * 1024;

/// A result's size in tokens before and after fitting it to its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResultUsage {
    pub original_tokens: usize,
    pub result_tokens: usize,
    pub truncated: bool,
}

/// One call as the audit log and the metrics see it.
struct CallRecord<'a> {
    caller: &'a Caller,
    /// The name asked for (a refused one may be anything the caller sent).
    tool: &'a str,
    /// The upstream label: the tool's upstream, or `<unknown>` for a name the caller
    /// may not see.
    upstream: &'a str,
    /// `ok`, `tool_error` or the error code.
    outcome: &'a str,
    /// `None` for a call refused before it reached its upstream.
    finished: Option<Finished<'a>>,
}

/// What a call that reached its upstream adds to its record.
struct Finished<'a> {
    elapsed: Duration,
    /// `(original, returned, truncated)` when there was a result to count.
    tokens: Option<(usize, usize, bool)>,
    correlation_id: &'a str,
    /// The arguments as JSON, when the upstream's `audit_arguments` is on.
    arguments: Option<&'a str>,
}

/// The admitted call's way to its upstream: validate the arguments, take one of the
/// upstream's call slots, call it within its timeout, fit the result to its token
/// budget, and record the call (one record for audit and metrics). Also answers the
/// result's token counts (a result under its budget carries none in `_meta`: it passes
/// as the upstream sent it, but for the correlation id the MCP surface adds).
///
/// `admitted` is the policy's word and the catalog entry it was given on (see
/// [`super::authorize`]); `caller` names the tenant and session in the audit line.
pub(super) async fn invoke(
    gateway: &Gateway,
    caller: &Caller,
    admitted: Admitted,
    arguments: JsonObject,
    mut ctx: CallContext,
) -> Result<(CallOutput, ResultUsage), ToolError> {
    let Admitted { name, entry } = admitted;
    let name = name.as_str();
    let upstreams = gateway.upstreams();
    let Some(mounted) = upstreams.get(&entry.upstream) else {
        return Err(refused(gateway, caller, name, None, unknown_tool(name)));
    };
    if !ctx.background && entry.task_support() == crate::config::TaskSupport::Required {
        let refusal = crate::errors::task_required(name);
        return Err(refused(
            gateway,
            caller,
            name,
            Some(&entry.upstream),
            refusal,
        ));
    }
    let started = Instant::now();
    // The upstream call's span: the parent the upstream hears of (telemetry.rs).
    let span = tracing::info_span!(
        target: crate::telemetry::SPAN_TARGET,
        "toolgate.upstream",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        tool = name,
        upstream = %entry.upstream,
        outcome = tracing::field::Empty,
    );
    if let Some(trace) = crate::telemetry::child_of(&span, &ctx) {
        ctx.trace = Some(trace);
    }
    let correlation_id = ctx.correlation_id.clone();
    let arguments_for_audit = mounted
        .audit_arguments
        .then(|| serde_json::Value::Object(arguments.clone()).to_string());
    // Checked as a `Value` that owns the arguments (no copy of them).
    let instance = serde_json::Value::Object(arguments);
    let checked = entry
        .validator
        .check(name, entry.full("inputSchema"), &instance);
    let arguments = match instance {
        serde_json::Value::Object(arguments) => arguments,
        _ => JsonObject::new(), // never: built from an object just above
    };
    // The caller's own credentials, when the upstream takes them, are resolved once
    // the arguments are known to be right (a wrong call is told that first).
    let credentials = match checked {
        Err(error) => Err(error),
        Ok(()) => {
            super::credentials::for_call_or_connect(gateway, mounted, caller, &entry.upstream, &ctx)
                .await
        }
    };
    let permit = match credentials {
        Err(error) => Err(error),
        Ok(credentials) => {
            ctx.credentials = credentials;
            take_slot(mounted, &entry.upstream, &ctx).await
        }
    };
    let outcome = match &permit {
        Err(error) => Err(error.clone()),
        Ok(_) => {
            // A user's token its upstream refused may be replaced (refreshed) once,
            // and the call tried again with the new one.
            let again = matches!(
                mounted.credentials,
                crate::config::CredentialSource::Oauth
                    | crate::config::CredentialSource::ClientCredentials
                    | crate::config::CredentialSource::TokenExchange
            )
            .then(|| (arguments.clone(), ctx.clone()));
            let call = (name, arguments, ctx, started);
            let first = call_if_connected(gateway, mounted, &entry, call, &span).await;
            match (first, again) {
                (
                    Err(ToolError::Unauthorized {
                        status, challenge, ..
                    }),
                    Some(again),
                ) => {
                    let refusal = (status, challenge.as_deref());
                    let to_call = (gateway, caller, &**mounted, &*entry);
                    call_again(to_call, refusal, (name, again.0, again.1, started), &span).await
                }
                (first, _) => first,
            }
        }
    };
    drop(permit);
    let (outcome, tokens) = match outcome {
        Ok(output) => {
            let (output, tokens) = finish_result(gateway, name, mounted, &entry, output).await;
            (Ok(output), Some(tokens))
        }
        Err(error) => (Err(error), None),
    };
    let elapsed = started.elapsed();
    let outcome_label = match &outcome {
        Ok(output) if output.is_error() => "tool_error",
        Ok(_) => "ok",
        Err(error) => error.code(),
    };
    span.record("outcome", outcome_label);
    if outcome_label != "ok" {
        span.record("otel.status_code", "ERROR");
    }
    let (original_tokens, result_tokens, truncated) = tokens.unwrap_or((0, 0, false));
    record(
        gateway,
        CallRecord {
            caller,
            tool: name,
            upstream: &entry.upstream,
            outcome: outcome_label,
            finished: Some(Finished {
                elapsed,
                tokens,
                correlation_id: &correlation_id,
                arguments: arguments_for_audit.as_deref(),
            }),
        },
    );
    outcome.map(|output| {
        let usage = ResultUsage {
            original_tokens,
            result_tokens,
            truncated,
        };
        (output, usage)
    })
}

/// The call of `name` once more after its upstream refused the caller's token
/// (`refusal`: status and challenge), when the token service holds a new one;
/// otherwise, and when the new one is refused too, the error the service gives.
async fn call_again(
    (gateway, caller, mounted, entry): (&Gateway, &Caller, &Mounted, &Entry),
    refusal: (u16, Option<&str>),
    (name, arguments, mut ctx, started): (&str, JsonObject, CallContext, Instant),
    span: &tracing::Span,
) -> Result<CallOutput, ToolError> {
    let upstream = entry.upstream.as_str();
    super::credentials::after_refusal(gateway, caller, upstream, refusal).await?;
    ctx.credentials = super::credentials::for_call(gateway, mounted, caller, upstream).await?;
    let call = (name, arguments, ctx, started);
    match call_if_connected(gateway, mounted, entry, call, span).await {
        Err(ToolError::Unauthorized {
            status, challenge, ..
        }) => {
            // Refused again: no second retry; what the service says now is final.
            let refusal = (status, challenge.as_deref());
            match super::credentials::after_refusal(gateway, caller, upstream, refusal).await {
                Err(error) => Err(error),
                Ok(()) => Err(ToolError::Unauthorized {
                    message: format!(
                        "upstream '{upstream}' refused the caller's authorization twice in \
                         a row; try the call again later"
                    ),
                    status,
                    challenge: None,
                }),
            }
        }
        other => other,
    }
}

/// The call of `name` when the upstream is connected, within the upstream's
/// `call_timeout` (a background task's own `tasks.call_timeout`) from `started`;
/// otherwise why the upstream is unavailable.
async fn call_if_connected(
    gateway: &Gateway,
    mounted: &Mounted,
    entry: &Entry,
    (name, arguments, ctx, started): (&str, JsonObject, CallContext, Instant),
    span: &tracing::Span,
) -> Result<CallOutput, ToolError> {
    if let Some(down) = not_up(mounted, &entry.upstream) {
        return Err(down);
    }
    let configured = if ctx.background {
        gateway.config().tasks.call_timeout
    } else {
        mounted.call_timeout
    };
    let within = (started, configured);
    call_upstream(mounted, entry, name, arguments, ctx, within, span).await
}

/// Why `mounted` cannot take a call now, when it cannot: the one answer for a tool of
/// an upstream that is not up — one the catalog still lists (reconnecting), or one it
/// does not list yet because the upstream never answered (still starting).
pub(super) fn not_up(mounted: &Mounted, upstream: &str) -> Option<ToolError> {
    match mounted.upstream.connection() {
        Connection::Connected => None,
        Connection::Connecting => Some(ToolError::Unavailable(format!(
            "upstream '{upstream}' is still starting and has not answered yet; its tools \
             join the catalog as soon as it does — retry in a few seconds"
        ))),
        Connection::Reconnecting | Connection::Closed => Some(ToolError::unavailable(
            upstream,
            mounted
                .upstream
                .last_error()
                .unwrap_or_else(|| "connection lost".into()),
        )),
    }
}

/// A result as the caller gets it: links to the upstream's resources in the form
/// clients read them back (a plain result has none), fitted to the tool's token budget.
async fn finish_result(
    gateway: &Gateway,
    name: &str,
    mounted: &Mounted,
    entry: &Arc<Entry>,
    mut output: CallOutput,
) -> (CallOutput, (usize, usize, bool)) {
    if output.plain_json().is_none() {
        crate::catalog::offerings::rewrite_tool_result(
            output.object_mut(),
            mounted.namespace,
            &entry.upstream,
        );
    }
    fit_to_budget(gateway, name, mounted, output, Arc::clone(entry)).await
}

/// Calls `entry`'s connected upstream within `(started, configured)`: the call's
/// deadline is `configured` after `started`, or the caller's own if sooner. Errors name
/// the tool as the caller knows it.
async fn call_upstream(
    mounted: &Mounted,
    entry: &Entry,
    name: &str,
    arguments: JsonObject,
    mut ctx: CallContext,
    (started, configured): (Instant, Duration),
    span: &tracing::Span,
) -> Result<CallOutput, ToolError> {
    let deadline = started + configured;
    if deadline < ctx.deadline {
        ctx.deadline = deadline;
    }
    let timeout = ctx.remaining();
    // Errors say the limit as it was configured (`2s`): the setting
    // when it is the one that applies (the caller's deadline is
    // usually the same setting, measured a moment earlier).
    let limit = if timeout + Duration::from_millis(500) >= configured {
        configured
    } else {
        timeout
    };
    let cancel = ctx.cancel.clone();
    match tokio::time::timeout(
        timeout + Duration::from_millis(250),
        mounted
            .upstream
            .call(&entry.original, arguments, ctx)
            .instrument(span.clone()),
    )
    .await
    {
        // An adapter's own, shorter limit (an OpenAPI request's
        // `timeout`) says itself which limit it was.
        Ok(Err(ToolError::Timeout(message)))
            if started.elapsed() + Duration::from_millis(500) < limit =>
        {
            Err(ToolError::Timeout(message).naming(&entry.original, name))
        }
        Ok(Err(ToolError::Timeout(_))) | Err(_) => {
            // The adapter should have timed out itself; make sure the
            // upstream hears about it anyway.
            cancel.cancel();
            Err(ToolError::timeout(&entry.upstream, name, limit))
        }
        // Adapters name the upstream's own tool; the caller knows it by
        // the catalog name.
        Ok(result) => result.map_err(|e| e.naming(&entry.original, name)),
    }
}

/// Audits and counts a call refused before it reached its upstream, and answers
/// its error. `visible` is the tool's upstream when the caller may see the tool (its
/// name may then label the metric); otherwise both labels are `<unknown>`. The
/// audit line names what was asked for (cut to 128 characters).
pub(super) fn refused(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    visible: Option<&str>,
    error: ToolError,
) -> ToolError {
    let asked: String = name.chars().take(128).collect();
    let (tool, upstream) = match visible {
        Some(upstream) => (asked.as_str(), upstream),
        None => (asked.as_str(), crate::metrics::UNKNOWN),
    };
    record(
        gateway,
        CallRecord {
            caller,
            tool,
            upstream,
            outcome: error.code(),
            finished: None,
        },
    );
    error
}

/// Writes a call's audit line and counts it: the one place both happen, so the log
/// and the metrics never disagree about what was called.
fn record(gateway: &Gateway, record: CallRecord<'_>) {
    let CallRecord {
        caller,
        tool,
        upstream,
        outcome,
        finished,
    } = record;
    let session = caller.session_id().unwrap_or("-");
    let Some(finished) = finished else {
        // A refused name labels the metric only when the caller may see it: the
        // metric must not reveal which hidden names exist.
        let tool_label = if upstream == crate::metrics::UNKNOWN {
            crate::metrics::UNKNOWN
        } else {
            tool
        };
        gateway
            .metrics
            .record_refused_call(tool_label, upstream, outcome);
        tracing::info!(
            target: crate::logging::AUDIT_TARGET,
            tenant = %caller.tenant.name,
            subject = caller.subject().unwrap_or("-"),
            session,
            tool = %tool,
            upstream,
            outcome,
            "tool call refused"
        );
        return;
    };
    gateway
        .metrics
        .record_call(tool, upstream, outcome, finished.elapsed.as_secs_f64());
    if let Some((original, returned, _)) = finished.tokens {
        gateway
            .metrics
            .record_result_tokens(tool, upstream, original, returned);
    }
    let (original_tokens, result_tokens, truncated) = finished.tokens.unwrap_or((0, 0, false));
    tracing::info!(
        target: crate::logging::AUDIT_TARGET,
        tenant = %caller.tenant.name,
        subject = caller.subject().unwrap_or("-"),
        session,
        result_tokens,
        original_tokens,
        truncated,
        tool,
        upstream = %upstream,
        correlation_id = %finished.correlation_id,
        latency_us = finished.elapsed.as_micros() as u64,
        arguments = finished.arguments.unwrap_or("-"),
        outcome,
        "tool call"
    );
}

/// Fits a result to the tool's token budget. Large results are cut on the blocking
/// pool: tokenizing a megabyte takes tens of milliseconds. Returns the result and
/// `(original tokens, returned tokens, truncated)`.
async fn fit_to_budget(
    gateway: &Gateway,
    name: &str,
    mounted: &Mounted,
    output: CallOutput,
    // Its `outputSchema`, which the fitted result must still match (the entry is
    // shared, not the schema copied: a large API's output schemas are big).
    entry: Arc<crate::catalog::Entry>,
) -> (CallOutput, (usize, usize, bool)) {
    let config = gateway.config();
    let mut budget = config.results.clone();
    if let Some(max) = config
        .tool_result_max_tokens
        .get(name)
        .copied()
        .or(mounted.result_max_tokens)
    {
        budget.max_tokens = max;
    }
    if let Some(plain) = output.plain()
        && plain.json.len() <= LARGE_TEXT_BYTES
        && let Some(tokens) = crate::truncate::plain_tokens(&plain.texts, &budget)
    {
        return (output, (tokens, tokens, false));
    }
    let output = output.into_object();
    let large = output
        .get("content")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(serde_json::Value::as_str))
                .map(str::len)
                .sum::<usize>()
                > LARGE_TEXT_BYTES
        })
        || output.get("structuredContent").is_some_and(|s| {
            s.as_array().is_some_and(|a| a.len() > 256)
                || s.as_object().is_some_and(|o| {
                    o.values()
                        .any(|v| v.as_array().is_some_and(|a| a.len() > 256))
                })
        });
    let fitted = if large {
        let raw = output;
        match tokio::task::spawn_blocking(move || {
            crate::truncate::truncate_result_for(raw, &budget, entry.full("outputSchema"))
        })
        .await
        {
            Ok(fitted) => fitted,
            Err(_) => {
                let message =
                    format!("the result of '{name}' could not be fitted to its token budget");
                return (
                    CallOutput::new(crate::errors::error_result(&ToolError::Failed(message))),
                    (0, 0, true),
                );
            }
        }
    } else {
        crate::truncate::truncate_result_for(output, &budget, entry.full("outputSchema"))
    };
    if let Some(reason) = &fitted.unfit {
        // A result the client would reject (its structured part missing or not
        // matching the output schema) is worse than an error the model can act on.
        let message = format!(
            "the result of '{name}' is too large for its token budget ({} tokens) and \
             cannot be shortened: {reason}; call it again asking for less (a filter, a \
             smaller page or limit)",
            fitted.original_tokens
        );
        return (
            CallOutput::new(crate::errors::error_result(&ToolError::Failed(message))),
            (fitted.original_tokens, 0, true),
        );
    }
    (
        CallOutput::new(fitted.raw),
        (
            fitted.original_tokens,
            fitted.result_tokens,
            fitted.truncated,
        ),
    )
}
/// Waits (briefly) for one of `mounted`'s call slots; `RateLimited` when none frees up.
async fn take_slot(
    mounted: &Mounted,
    upstream: &str,
    ctx: &CallContext,
) -> Result<tokio::sync::OwnedSemaphorePermit, ToolError> {
    if let Ok(permit) = mounted.concurrency.clone().try_acquire_owned() {
        return Ok(permit);
    }
    tokio::time::timeout(
        Duration::from_secs(2).min(ctx.remaining()),
        mounted.concurrency.clone().acquire_owned(),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .ok_or_else(|| ToolError::RateLimited {
        message: format!(
            "upstream '{upstream}' is running as many calls as it is allowed to; retry in a moment"
        ),
        retry_after: Some(Duration::from_secs(1)),
    })
}
