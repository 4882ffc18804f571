//! Sessionless requests (protocol 2026-07-28): no `initialize`, no session; every
//! request carries its version and the client's capabilities in `_meta`, and mirrors
//! its method (and name) in headers. Python `mcp` picks this version by default.
//!
//! [`check`] is the version's admission ladder, in the order the spec and the SDKs
//! apply it, each rung with its own error:
//! 1. `params._meta` carries `io.modelcontextprotocol/protocolVersion` and
//!    `io.modelcontextprotocol/clientCapabilities` (an object) — else `-32602`;
//! 2. the `MCP-Protocol-Version` header equals that version, `Mcp-Method` the body's
//!    method and, for `tools/call`, `prompts/get` and `resources/read`, `Mcp-Name`
//!    the body's name or URI (for `tasks/get|update|cancel` its `taskId`), each header
//!    present once — else `-32020`;
//! 3. the version is one this server speaks sessionless — else `-32022` with
//!    `data: {supported, requested}`.
//!
//! What differs from a session's call (see [`super::call`]): nothing is announced
//! after `tool_expand_tools` and nothing outlives the call; log lines
//! (`notifications/message`, also progress without a `progressToken`) go out only
//! when the request asked for them with `io.modelcontextprotocol/logLevel`, at that
//! level or above; the version has no server-to-client requests, so an upstream's
//! sampling, elicitation or roots request makes the call answer `input_required` and
//! wait (parked, see [`super::call::resume`]) for the client's retry; every result
//! carries `resultType`, lists also `ttlMs` and `cacheScope`.

use http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::call::CallMeta;
use super::error::McpError;
use super::wire::{self, Envelope};

pub(super) const VERSION: &str = "2026-07-28";
/// The versions served without a session.
pub(super) const SESSIONLESS_VERSIONS: &[&str] = &[VERSION];

const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// A rung of the ladder the request did not pass: an [`McpError`] saying what to fix.
pub(super) type Refused = McpError;

/// Syslog severities as MCP names them, least severe first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    /// The level of a `notifications/message`'s params; unknown levels count as
    /// `info` (the level the gateway's own progress lines use).
    pub(super) fn of_message(params: &Value) -> LogLevel {
        params
            .get("level")
            .and_then(|level| LogLevel::deserialize(level).ok())
            .unwrap_or(LogLevel::Info)
    }
}

/// Whether a request without a session is meant as a sessionless one: it says
/// so in the version header or in its `_meta` (the ladder then tells it what is
/// missing); otherwise it is a session request that forgot its session.
pub(super) fn is_sessionless(headers: Option<&HeaderMap>, envelope: &Envelope<'_>) -> bool {
    if let Some(version) = headers.and_then(|h| h.get(wire::VERSION_HEADER)) {
        return version
            .to_str()
            .is_ok_and(|v| !super::SESSION_VERSIONS.contains(&v.trim()));
    }
    envelope
        .params
        .is_some_and(|params| params.get().contains(PROTOCOL_VERSION_KEY))
}

/// What the ladder reads of a request's params.
#[derive(Deserialize)]
struct LadderParams {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    uri: Option<Value>,
    #[serde(default, rename = "taskId")]
    task_id: Option<Value>,
    #[serde(default, rename = "_meta")]
    meta: Option<CallMeta>,
}

/// The ladder for request `method` (see the module docs): the log level the
/// request asked for, or the rung it failed. A transport without headers (stdio)
/// skips rung 2: it carries nothing that could disagree with the body.
pub(super) fn check(
    headers: Option<&HeaderMap>,
    envelope: &Envelope<'_>,
    method: &str,
) -> Result<Option<LogLevel>, Refused> {
    let invalid = McpError::invalid_params;
    let params = envelope.params::<LadderParams>().map_err(invalid)?;
    let meta = params.meta.as_ref();
    let version = meta.and_then(|m| m.protocol_version.as_ref());
    let capabilities = meta.and_then(|m| m.client_capabilities.as_ref());
    let (Some(version), Some(capabilities)) = (version, capabilities) else {
        return Err(invalid(format!(
            "params._meta must carry '{PROTOCOL_VERSION_KEY}' and \
             'io.modelcontextprotocol/clientCapabilities' (protocol {VERSION} has no \
             initialize: every request says its version and capabilities)"
        )));
    };
    if !capabilities.is_object() {
        return Err(invalid(
            "'io.modelcontextprotocol/clientCapabilities' must be an object".into(),
        ));
    }
    if let Some(headers) = headers {
        check_mirrors(headers, &params, version, method)?;
    }
    let Some(requested) = version.as_str() else {
        return Err(invalid(format!(
            "'{PROTOCOL_VERSION_KEY}' must be a string"
        )));
    };
    if !SESSIONLESS_VERSIONS.contains(&requested) {
        return Err(McpError::unsupported_protocol_version(
            format!(
                "protocol version '{requested}' is not served without a session here: use \
                 {VERSION}, or initialize a session with one of {}",
                super::SESSION_VERSIONS.join(", ")
            ),
            json!({"supported": SESSIONLESS_VERSIONS, "requested": requested}),
        ));
    }
    match meta.and_then(|m| m.log_level.as_ref()) {
        None => Ok(None),
        Some(level) => LogLevel::deserialize(level).map(Some).map_err(|_| {
            invalid(format!(
                "'io.modelcontextprotocol/logLevel' {level} is not a log level (debug, info, \
                 notice, warning, error, critical, alert, emergency)"
            ))
        }),
    }
}

/// Rung 2 of the ladder: the headers HTTP mirrors from the body say what it says.
fn check_mirrors(
    headers: &HeaderMap,
    params: &LadderParams,
    version: &Value,
    method: &str,
) -> Result<(), Refused> {
    let mismatch = McpError::header_mismatch;
    if single(headers, wire::VERSION_HEADER) != version.as_str() {
        return Err(mismatch(format!(
            "the MCP-Protocol-Version header must be sent once and equal \
             _meta's '{PROTOCOL_VERSION_KEY}'"
        )));
    }
    if single(headers, METHOD_HEADER) != Some(method) {
        return Err(mismatch(
            "the Mcp-Method header must be sent once and equal the body's method".into(),
        ));
    }
    let named = name_field(method).map(|field| {
        let value = match field {
            "name" => params.name.as_ref(),
            "uri" => params.uri.as_ref(),
            _ => params.task_id.as_ref(),
        };
        (field, value)
    });
    if let Some((field, Some(value))) = named
        && single(headers, NAME_HEADER) != value.as_str()
    {
        return Err(mismatch(format!(
            "the Mcp-Name header must be sent once and equal the body's `{field}`"
        )));
    }
    Ok(())
}

/// The params field `Mcp-Name` mirrors for `method`, if any: a tool's or prompt's
/// name, a resource's URI, or (the tasks extension, so that a balancer can route to
/// the replica that holds the task) a task's id.
pub(crate) fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// The header's one value; `None` when it is missing, repeated or not text.
fn single<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok().map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;
    use toolgate_adapters::codes::{HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    const GOOD_HEADERS: &[(&str, &str)] = &[
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "up__echo"),
    ];

    fn body(meta: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"up__echo","arguments":{{"m":1}},"_meta":{meta}}}}}"#
        )
    }

    const GOOD_META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}"#;

    fn checked(headers: &HeaderMap, body: &str) -> Result<Option<LogLevel>, Refused> {
        let envelope = Envelope::parse(body.as_bytes()).expect("valid JSON-RPC");
        check(Some(headers), &envelope, "tools/call")
    }

    #[test]
    fn a_well_formed_request_passes_with_its_log_level() {
        assert_eq!(
            checked(&headers(GOOD_HEADERS), &body(GOOD_META)).unwrap(),
            None
        );
        let with_level = GOOD_META.replace(
            r#""io.modelcontextprotocol/clientCapabilities":{}"#,
            r#""io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"warning""#,
        );
        assert_eq!(
            checked(&headers(GOOD_HEADERS), &body(&with_level)).unwrap(),
            Some(LogLevel::Warning)
        );
    }

    #[test]
    fn every_missing_or_contradicting_signal_is_refused_on_its_rung() {
        let good = headers(GOOD_HEADERS);
        let without = |name: &str| {
            let mut h = good.clone();
            h.remove(name);
            h
        };
        let with = |name: &str, value: &str| {
            let mut h = good.clone();
            h.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
            h
        };
        let mut twice = good.clone();
        twice.append("mcp-name", "up__echo".parse().unwrap());
        let cases: Vec<(&str, HeaderMap, String, i64)> = vec![
            (
                "no version header",
                without("mcp-protocol-version"),
                body(GOOD_META),
                HEADER_MISMATCH,
            ),
            (
                "older version header",
                with("mcp-protocol-version", "2025-11-25"),
                body(GOOD_META),
                HEADER_MISMATCH,
            ),
            (
                "no Mcp-Method",
                without("mcp-method"),
                body(GOOD_META),
                HEADER_MISMATCH,
            ),
            (
                "Mcp-Method contradicts",
                with("mcp-method", "tools/list"),
                body(GOOD_META),
                HEADER_MISMATCH,
            ),
            (
                "no Mcp-Name",
                without("mcp-name"),
                body(GOOD_META),
                HEADER_MISMATCH,
            ),
            (
                "Mcp-Name contradicts",
                with("mcp-name", "up__other"),
                body(GOOD_META),
                HEADER_MISMATCH,
            ),
            ("Mcp-Name twice", twice, body(GOOD_META), HEADER_MISMATCH),
            (
                "no _meta",
                good.clone(),
                body("null"),
                toolgate_adapters::codes::INVALID_PARAMS,
            ),
            (
                "no protocolVersion in _meta",
                good.clone(),
                body(r#"{"io.modelcontextprotocol/clientCapabilities":{}}"#),
                toolgate_adapters::codes::INVALID_PARAMS,
            ),
            (
                "no clientCapabilities",
                good.clone(),
                body(r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#),
                toolgate_adapters::codes::INVALID_PARAMS,
            ),
            (
                "clientCapabilities not an object",
                good.clone(),
                body(
                    &GOOD_META.replace(r#"/clientCapabilities":{}"#, r#"/clientCapabilities":[]"#),
                ),
                toolgate_adapters::codes::INVALID_PARAMS,
            ),
            (
                "another version in both places",
                with("mcp-protocol-version", "2027-01-01"),
                body(&GOOD_META.replace(
                    r#"/protocolVersion":"2026-07-28""#,
                    r#"/protocolVersion":"2027-01-01""#,
                )),
                UNSUPPORTED_PROTOCOL_VERSION,
            ),
            (
                "an unknown logLevel",
                good.clone(),
                body(&GOOD_META.replace(
                    r#"/clientCapabilities":{}"#,
                    r#"/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud""#,
                )),
                toolgate_adapters::codes::INVALID_PARAMS,
            ),
        ];
        for (case, headers, body, code) in cases {
            let refused = checked(&headers, &body).expect_err(case);
            assert_eq!(refused.code, code, "{case}: {refused:?}");
            assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{case}");
        }
    }

    #[test]
    fn only_requests_that_say_so_are_sessionless() {
        let envelope = |b: &'static str| Envelope::parse(b.as_bytes()).unwrap();
        let plain = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
        assert!(!is_sessionless(Some(&HeaderMap::new()), &envelope(plain)));
        assert!(!is_sessionless(None, &envelope(plain)));
        assert!(!is_sessionless(
            Some(&headers(&[("mcp-protocol-version", "2025-11-25")])),
            &envelope(plain)
        ));
        assert!(is_sessionless(
            Some(&headers(&[("mcp-protocol-version", "2026-07-28")])),
            &envelope(plain)
        ));
        let with_meta = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(is_sessionless(
            Some(&HeaderMap::new()),
            &envelope(with_meta)
        ));
        assert!(is_sessionless(None, &envelope(with_meta)));
    }

    /// A transport without headers (stdio) has nothing to mirror: the body alone is
    /// checked, and its other rungs still apply.
    #[test]
    fn without_headers_only_the_body_is_checked() {
        let text = body(GOOD_META);
        let parsed = Envelope::parse(text.as_bytes()).unwrap();
        assert_eq!(check(None, &parsed, "tools/call").unwrap(), None);
        let old = GOOD_META.replace("2026-07-28", "2025-11-25");
        let text = body(&old);
        let parsed = Envelope::parse(text.as_bytes()).unwrap();
        let refused = check(None, &parsed, "tools/call").unwrap_err();
        assert_eq!(refused.code, UNSUPPORTED_PROTOCOL_VERSION);
    }

    #[test]
    fn log_levels_order_by_severity_and_unknown_levels_count_as_info() {
        assert!(LogLevel::Debug < LogLevel::Info && LogLevel::Warning < LogLevel::Emergency);
        let level = |v: Value| LogLevel::of_message(&serde_json::json!({"level": v}));
        assert_eq!(level("error".into()), LogLevel::Error);
        assert_eq!(level("shouting".into()), LogLevel::Info);
        assert_eq!(LogLevel::of_message(&serde_json::json!({})), LogLevel::Info);
    }
}
