//! The one error taxonomy of a tool call.
//!
//! Every failure on the call path is one of these kinds. The gateway maps them to MCP
//! `isError` results, JSON-RPC errors and HTTP statuses in exactly one place
//! (`toolgate::errors`). Messages are written for an LLM or a human to act on: what
//! failed, and what to do next.

use std::time::Duration;

/// Why a call did not produce a tool result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// No tool of that name (or not one the caller may see: the two are indistinguishable
    /// on purpose).
    #[error("{0}")]
    NotFound(String),
    /// The arguments do not fit the tool's input schema; each violation listed.
    #[error("{0}")]
    InvalidArgs(String),
    /// The upstream ran the call and it failed (protocol error, upstream JSON-RPC error).
    #[error("{0}")]
    Failed(String),
    /// The caller cancelled the call.
    #[error("{0}")]
    Cancelled(String),
    /// The upstream is down or reconnecting; calls fail fast until it is back.
    #[error("{0}")]
    Unavailable(String),
    /// The call did not finish before its deadline.
    #[error("{0}")]
    Timeout(String),
    /// Too many calls; retry after the given time.
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
    },
    /// The tool is allowed but not in the session's visible set yet.
    #[error("{0}")]
    NotSelected(String),
    /// The tool runs only as a background task and was called plainly, or may not
    /// run as one and was asked to (its `execution.taskSupport`).
    #[error("{0}")]
    ExecutionMode(String),
    /// The upstream is reached with each caller's own credentials, and the gateway
    /// holds none for this caller: the message says who can provide them and how;
    /// `connect_url`, when the user can connect themselves, is where.
    #[error("{message}")]
    AuthorizationRequired {
        message: String,
        connect_url: Option<String>,
    },
    /// The upstream refused the credentials the call carried (HTTP 401 or 403).
    /// `challenge` is its `WWW-Authenticate` header as sent: what an OAuth client of
    /// the upstream needs to (re-)authorize, or to ask for more scope.
    #[error("{message}")]
    Unauthorized {
        message: String,
        status: u16,
        challenge: Option<String>,
    },
}

impl ToolError {
    /// A short stable code for logs, metrics and REST error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::NotFound(_) => "not_found",
            ToolError::InvalidArgs(_) => "invalid_args",
            ToolError::Failed(_) => "failed",
            ToolError::Cancelled(_) => "cancelled",
            ToolError::Unavailable(_) => "unavailable",
            ToolError::Timeout(_) => "timeout",
            ToolError::RateLimited { .. } => "rate_limited",
            ToolError::NotSelected(_) => "not_selected",
            ToolError::ExecutionMode(_) => "execution_mode",
            ToolError::AuthorizationRequired { .. } => "authorization_required",
            ToolError::Unauthorized { .. } => "upstream_unauthorized",
        }
    }

    /// The standard "upstream is down" error, naming it.
    pub fn unavailable(upstream: &str, detail: impl std::fmt::Display) -> Self {
        ToolError::Unavailable(format!(
            "upstream '{upstream}' is unavailable ({detail}); it is being reconnected \
             automatically — retry in a few seconds or use another tool"
        ))
    }

    /// The standard timeout error. `after` is written as durations are configured
    /// (`2s`, `1m 30s`, `250ms`).
    pub fn timeout(upstream: &str, tool: &str, after: Duration) -> Self {
        ToolError::Timeout(format!(
            "tool '{tool}' on upstream '{upstream}' did not answer within {}; \
             retry, or ask for less work in one call",
            duration_text(after)
        ))
    }

    /// This error with every quoted mention of the upstream's own tool name
    /// (`'hang'`) replaced by the name the caller used (`'h__hang'`): a model can only
    /// act on names it can call.
    pub fn naming(self, original: &str, called: &str) -> Self {
        if original == called {
            return self;
        }
        let from = format!("'{original}'");
        let to = format!("'{called}'");
        let rename = |message: String| message.replace(&from, &to);
        match self {
            ToolError::NotFound(m) => ToolError::NotFound(rename(m)),
            ToolError::InvalidArgs(m) => ToolError::InvalidArgs(rename(m)),
            ToolError::Failed(m) => ToolError::Failed(rename(m)),
            ToolError::Cancelled(m) => ToolError::Cancelled(rename(m)),
            ToolError::Unavailable(m) => ToolError::Unavailable(rename(m)),
            ToolError::Timeout(m) => ToolError::Timeout(rename(m)),
            ToolError::RateLimited {
                message,
                retry_after,
            } => ToolError::RateLimited {
                message: rename(message),
                retry_after,
            },
            ToolError::NotSelected(m) => ToolError::NotSelected(rename(m)),
            ToolError::ExecutionMode(m) => ToolError::ExecutionMode(rename(m)),
            ToolError::AuthorizationRequired {
                message,
                connect_url,
            } => ToolError::AuthorizationRequired {
                message: rename(message),
                connect_url,
            },
            ToolError::Unauthorized {
                message,
                status,
                challenge,
            } => ToolError::Unauthorized {
                message: rename(message),
                status,
                challenge,
            },
        }
    }

    /// An `AuthorizationRequired` without a link (an operator must act).
    pub fn authorization_required(message: impl Into<String>) -> Self {
        ToolError::AuthorizationRequired {
            message: message.into(),
            connect_url: None,
        }
    }

    /// Where the user connects, for an `AuthorizationRequired` that has such a link.
    pub fn connect_url(&self) -> Option<&str> {
        match self {
            ToolError::AuthorizationRequired { connect_url, .. } => connect_url.as_deref(),
            _ => None,
        }
    }

    /// The standard cancellation error.
    pub fn cancelled(tool: &str) -> Self {
        ToolError::Cancelled(format!("call to '{tool}' was cancelled by the caller"))
    }
}

/// A duration as configs write it: `2s`, `1m 30s`, `250ms` (whole milliseconds; the
/// microseconds a deadline measured at run time carries are noise to a reader).
pub fn duration_text(duration: Duration) -> String {
    let millis = Duration::from_millis(duration.as_millis().min(u64::MAX as u128) as u64);
    if millis.is_zero() {
        return "0s".to_owned();
    }
    humantime_serde::re::humantime::format_duration(millis).to_string()
}

/// A JSON-RPC error code as a suffix for a message: ` (code -32001)`, or nothing for
/// `0`, which servers send when they have no code to give.
pub fn rpc_code_note(code: i64) -> String {
    if code == 0 {
        String::new()
    } else {
        format!(" (code {code})")
    }
}

/// Whether a JSON-RPC error from an upstream says "rate limited": the code some servers
/// use for it (HTTP's 429, or -32029) or a message that says so.
pub fn is_rate_limit(code: i64, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    code == 429
        || code == crate::codes::RATE_LIMITED
        || message.contains("rate limit")
        || message.contains("rate-limit")
        || message.contains("too many requests")
}

/// The retry hint of a JSON-RPC error's `data` (`retryAfter`, `retry_after` or
/// `retryAfterMs`; seconds unless the name says milliseconds).
pub fn retry_hint(data: Option<&serde_json::Value>) -> Option<Duration> {
    let data = data?;
    let seconds = |key: &str| data.get(key).and_then(serde_json::Value::as_f64);
    let hint = match seconds("retryAfterMs") {
        Some(ms) => ms / 1000.0,
        None => seconds("retryAfter").or_else(|| seconds("retry_after"))?,
    };
    (hint.is_finite() && hint >= 0.0).then(|| Duration::from_secs_f64(hint.min(86_400.0)))
}

/// The retry hint of an HTTP `Retry-After` value: delay-seconds or an HTTP date.
pub fn retry_after_header(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds.min(86_400)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default()
            .min(Duration::from_secs(86_400)),
    )
}

/// An error and its sources in one line, each once ("error sending request: client
/// error (Connect): tcp connect error: Connection refused"): reqwest and hyper keep the
/// useful part in the sources. Strip URLs first where they may carry credentials.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Whether a wait ran out somewhere in `error`'s causes (reqwest's rule).
pub fn is_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return true;
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>()
            && hyper.is_timeout()
        {
            return true;
        }
        source = e.source();
    }
    false
}

/// What kind of JSON value this is, for messages ("expected an object, got an array").
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_configured() {
        assert_eq!(duration_text(Duration::from_secs(2)), "2s");
        assert_eq!(duration_text(Duration::from_millis(250)), "250ms");
        assert_eq!(duration_text(Duration::from_secs(90)), "1m 30s");
        assert_eq!(duration_text(Duration::from_micros(1_999_400)), "1s 999ms");
    }

    #[test]
    fn errors_name_what_was_called() {
        let error =
            ToolError::timeout("h", "hang", Duration::from_secs(2)).naming("hang", "h__hang");
        let text = error.to_string();
        assert!(
            text.contains("'h__hang'") && text.contains("within 2s"),
            "{text}"
        );
        assert!(!text.contains("'hang'"), "{text}");
    }

    #[test]
    fn rate_limits_and_their_hints() {
        assert!(is_rate_limit(-32029, "slow down"));
        assert!(is_rate_limit(-32000, "Rate limit exceeded"));
        assert!(!is_rate_limit(-32000, "boom"));
        assert_eq!(
            retry_hint(Some(&serde_json::json!({"retryAfter": 3}))),
            Some(Duration::from_secs(3))
        );
        assert_eq!(retry_after_header("7"), Some(Duration::from_secs(7)));
        assert_eq!(rpc_code_note(0), "");
        assert_eq!(rpc_code_note(-32001), " (code -32001)");
    }
}
