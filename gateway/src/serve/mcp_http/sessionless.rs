//! Sessionless (2026-07-28) `tools/call`, served here instead of by rmcp: it is the hot
//! path of the newest clients (Python `mcp` picks this version by default), and rmcp
//! answers each such request with a factory call, spawned tasks and a typed decode.
//!
//! Only a request whose every protocol signal checks out is taken: the
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers present once each and
//! agreeing with the body, no `Mcp-Param-*` headers, the `Accept` and `Content-Type`
//! a POST needs, and the `_meta` keys the version requires. Anything else — another
//! method, a missing or contradicting signal — goes to rmcp, which stays the one place
//! that words those errors.
//!
//! What differs from a session's call (see [`super::call`]): there is no session, so
//! nothing is announced after `tool_expand_tools` and nothing outlives the call; log
//! lines (`notifications/message`, also progress without a `progressToken`) go out
//! only when the request asked for them with `io.modelcontextprotocol/logLevel`, at
//! that level or above; the version has no server-to-client requests, so an upstream's
//! sampling, elicitation or roots request is refused at once; every result carries
//! `resultType`.

use http::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::call::CallParams;
use super::wire::{self, Envelope, Kind};

pub const VERSION: &str = "2026-07-28";

const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// A sessionless `tools/call` that passed every check.
pub struct SessionlessCall {
    /// The JSON-RPC id, as raw JSON.
    pub id: String,
    pub params: CallParams,
    /// The lowest log level the client asked to receive; `None`: no log lines.
    pub log_level: Option<LogLevel>,
}

/// Syslog severities as MCP names them, least severe first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
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
    pub fn of_message(params: &Value) -> LogLevel {
        params
            .get("level")
            .and_then(|level| LogLevel::deserialize(level).ok())
            .unwrap_or(LogLevel::Info)
    }
}

/// The call, when `envelope` is a sessionless `tools/call` this module serves.
pub fn take(headers: &HeaderMap, envelope: &Envelope<'_>) -> Option<SessionlessCall> {
    let Kind::Request { id, method } = envelope.kind() else {
        return None;
    };
    if method != "tools/call"
        || single(headers, wire::VERSION_HEADER)? != VERSION
        || single(headers, METHOD_HEADER)? != method
        || headers
            .keys()
            .any(|name| name.as_str().starts_with(PARAM_HEADER_PREFIX))
        || wire::refuse_post(headers).is_some()
    {
        return None;
    }
    let params = envelope.params::<CallParams>().ok()?;
    let meta = params.meta()?;
    if meta.protocol_version.as_ref()?.as_str() != Some(VERSION)
        || !is_client_capabilities(meta.client_capabilities.as_ref()?)
        || single(headers, NAME_HEADER)? != params.name()
    {
        return None;
    }
    let log_level = match &meta.log_level {
        None => None,
        Some(level) => Some(LogLevel::deserialize(level).ok()?),
    };
    Some(SessionlessCall {
        id: id.get().to_owned(),
        params,
        log_level,
    })
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

/// What rmcp accepts as client capabilities: an object of the known shape.
fn is_client_capabilities(value: &Value) -> bool {
    value.is_object() && rmcp::model::ClientCapabilities::deserialize(value).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn taken(headers: &HeaderMap, body: &str) -> Option<SessionlessCall> {
        let envelope = Envelope::parse(body.as_bytes()).expect("valid JSON-RPC");
        take(headers, &envelope)
    }

    #[test]
    fn a_well_formed_call_is_taken_with_its_id_and_log_level() {
        let call = taken(&headers(GOOD_HEADERS), &body(GOOD_META)).expect("taken");
        assert_eq!(call.id, "7");
        assert_eq!(call.params.name(), "up__echo");
        assert_eq!(call.log_level, None);

        let with_level = GOOD_META.replace(
            r#""io.modelcontextprotocol/clientCapabilities":{}"#,
            r#""io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"warning""#,
        );
        let call = taken(&headers(GOOD_HEADERS), &body(&with_level)).expect("taken");
        assert_eq!(call.log_level, Some(LogLevel::Warning));
    }

    #[test]
    fn every_missing_or_contradicting_signal_leaves_the_request_to_rmcp() {
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
        let cases: Vec<(&str, HeaderMap, String)> = vec![
            (
                "no version header",
                without("mcp-protocol-version"),
                body(GOOD_META),
            ),
            (
                "older version",
                with("mcp-protocol-version", "2025-11-25"),
                body(GOOD_META),
            ),
            ("no Mcp-Method", without("mcp-method"), body(GOOD_META)),
            (
                "Mcp-Method contradicts",
                with("mcp-method", "tools/list"),
                body(GOOD_META),
            ),
            ("no Mcp-Name", without("mcp-name"), body(GOOD_META)),
            (
                "Mcp-Name contradicts",
                with("mcp-name", "up__other"),
                body(GOOD_META),
            ),
            ("Mcp-Name twice", twice, body(GOOD_META)),
            (
                "an Mcp-Param header",
                with("mcp-param-x", "1"),
                body(GOOD_META),
            ),
            (
                "no event-stream in Accept",
                with("accept", "application/json"),
                body(GOOD_META),
            ),
            (
                "not JSON",
                with("content-type", "text/plain"),
                body(GOOD_META),
            ),
            ("no _meta", good.clone(), body("null")),
            (
                "no protocolVersion in _meta",
                good.clone(),
                body(r#"{"io.modelcontextprotocol/clientCapabilities":{}}"#),
            ),
            (
                "another protocolVersion in _meta",
                good.clone(),
                body(&GOOD_META.replace(
                    r#"/protocolVersion":"2026-07-28""#,
                    r#"/protocolVersion":"2025-11-25""#,
                )),
            ),
            (
                "no clientCapabilities",
                good.clone(),
                body(r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#),
            ),
            (
                "clientCapabilities not an object",
                good.clone(),
                body(
                    &GOOD_META.replace(r#"/clientCapabilities":{}"#, r#"/clientCapabilities":[]"#),
                ),
            ),
            (
                "an unknown logLevel",
                good.clone(),
                body(&GOOD_META.replace(
                    r#"/clientCapabilities":{}"#,
                    r#"/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud""#,
                )),
            ),
        ];
        for (case, headers, body) in cases {
            assert!(taken(&headers, &body).is_none(), "{case}: taken");
        }
        // Other methods and notifications are rmcp's too.
        let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
        assert!(taken(&with("mcp-method", "tools/list"), list).is_none());
        let note = r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"up__echo"}}"#;
        assert!(taken(&good, note).is_none());
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
