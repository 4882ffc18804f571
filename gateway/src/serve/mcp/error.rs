//! The one MCP error type of `/mcp` (and stdio, which frames the same answers): what
//! went wrong names its constructor, and the constructor alone chooses the JSON-RPC
//! code (from `toolgate_adapters::codes`) and the HTTP status that go with it. A
//! refusal anywhere in the MCP rooms is one of these, and so are the refusals of the
//! layers in front of `/mcp` (the front door's [`DoorRefusal`], the guard's): the answer
//! is one JSON-RPC error object with that status.

use axum::response::Response;
use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::{Value, json};
use toolgate_adapters::codes;

use super::wire;
use crate::serve::auth::DoorRefusal;

/// A JSON-RPC error answered with its HTTP status.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct McpError {
    pub status: StatusCode,
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
    /// A header the HTTP answer carries with it (`Retry-After`, `WWW-Authenticate`);
    /// a transport without headers drops it.
    /// Boxed: it is rare, and the error travels in every `Result` of the MCP rooms.
    pub header: Option<Box<(HeaderName, HeaderValue)>>,
}

impl McpError {
    fn new(status: StatusCode, code: i64, message: impl Into<String>) -> McpError {
        McpError {
            status,
            code,
            message: message.into(),
            data: None,
            header: None,
        }
    }

    /// The front door turned the request away (401, 404 for an unknown session, 429,
    /// 503): `REFUSED`, the door's stable code in `data.code`, its header kept.
    pub(crate) fn turned_away(refusal: DoorRefusal) -> McpError {
        McpError {
            data: Some(json!({"code": refusal.code})),
            header: refusal.header.map(Box::new),
            ..McpError::new(refusal.status, codes::REFUSED, refusal.message)
        }
    }

    /// The guard in front of every surface refused the request (a Host, an Origin, a
    /// media type): the status kept, the guard's stable code in `data.code`.
    pub(crate) fn guarded(status: StatusCode, code: &str, message: impl Into<String>) -> McpError {
        McpError {
            data: Some(json!({"code": code})),
            ..McpError::new(status, codes::INVALID_REQUEST, message)
        }
    }

    /// The body is not JSON (400).
    pub(crate) fn parse_error(message: impl Into<String>) -> McpError {
        McpError::new(StatusCode::BAD_REQUEST, codes::PARSE_ERROR, message)
    }

    /// Not a message this transport takes, or a header it cannot serve (400).
    pub(crate) fn invalid_request(message: impl Into<String>) -> McpError {
        McpError::new(StatusCode::BAD_REQUEST, codes::INVALID_REQUEST, message)
    }

    /// A request's params that the transport must read are wrong (400).
    pub(crate) fn invalid_params(message: impl Into<String>) -> McpError {
        McpError::new(StatusCode::BAD_REQUEST, codes::INVALID_PARAMS, message)
    }

    /// An HTTP method `/mcp` does not take (405).
    pub(crate) fn method_not_allowed(message: impl Into<String>) -> McpError {
        McpError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            codes::INVALID_REQUEST,
            message,
        )
    }

    /// The client does not accept the answer's media types (406).
    pub(crate) fn not_acceptable(message: impl Into<String>) -> McpError {
        McpError::new(StatusCode::NOT_ACCEPTABLE, codes::INVALID_REQUEST, message)
    }

    /// The body did not arrive in time (408).
    pub(crate) fn body_timeout(message: impl Into<String>) -> McpError {
        McpError::new(StatusCode::REQUEST_TIMEOUT, codes::INVALID_REQUEST, message)
    }

    /// The body is over `max_request_body_bytes` (413).
    pub(crate) fn body_too_large(message: impl Into<String>) -> McpError {
        McpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            codes::INVALID_REQUEST,
            message,
        )
    }

    /// The body is not sent as JSON (415).
    pub(crate) fn unsupported_media_type(message: impl Into<String>) -> McpError {
        McpError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            codes::INVALID_REQUEST,
            message,
        )
    }

    /// 2026-07-28: a header disagrees with the message it carries (400).
    pub(crate) fn header_mismatch(message: impl Into<String>) -> McpError {
        McpError::new(StatusCode::BAD_REQUEST, codes::HEADER_MISMATCH, message)
    }

    /// 2026-07-28: a protocol version this server does not serve (400), with the
    /// versions it does and the one asked for in `data`.
    pub(crate) fn unsupported_protocol_version(
        message: impl Into<String>,
        data: Value,
    ) -> McpError {
        McpError {
            data: Some(data),
            ..McpError::new(
                StatusCode::BAD_REQUEST,
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                message,
            )
        }
    }

    /// 2026-07-28: the request needs a capability the client did not declare (400),
    /// named in `data`.
    pub(crate) fn missing_capability(message: impl Into<String>, data: Value) -> McpError {
        McpError {
            data: Some(data),
            ..McpError::new(StatusCode::BAD_REQUEST, codes::MISSING_CAPABILITY, message)
        }
    }

    /// An error another layer answered with `status`, rewrapped as JSON-RPC: the
    /// status is kept (session expiry's 404, a refused host's 403).
    pub(crate) fn kept_status(status: StatusCode, message: impl Into<String>) -> McpError {
        McpError::new(status, codes::INVALID_REQUEST, message)
    }

    /// The answer to the request `id` (JSON text; `null` when it could not be read).
    pub(crate) fn answer(self, id: &str) -> Response {
        let status = self.status;
        let header = self.header.clone();
        let mut response = wire::json_with_status(status, self.into_message(id));
        if let Some(header) = header {
            let (name, value) = *header;
            response.headers_mut().insert(name, value);
        }
        response
    }

    /// The JSON-RPC error message alone, for a transport without statuses (stdio).
    pub(crate) fn into_message(self, id: &str) -> Vec<u8> {
        wire::error_message(id, self.code, &self.message, self.data)
    }

    /// The answer when no request id could be read.
    pub(crate) fn response(self) -> Response {
        self.answer("null")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of refusal has its own code and status, and says so on the wire.
    #[tokio::test]
    async fn each_refusal_carries_its_code_and_status() {
        let cases = [
            (McpError::parse_error("x"), 400, codes::PARSE_ERROR),
            (McpError::invalid_request("x"), 400, codes::INVALID_REQUEST),
            (McpError::invalid_params("x"), 400, codes::INVALID_PARAMS),
            (
                McpError::method_not_allowed("x"),
                405,
                codes::INVALID_REQUEST,
            ),
            (McpError::not_acceptable("x"), 406, codes::INVALID_REQUEST),
            (McpError::body_timeout("x"), 408, codes::INVALID_REQUEST),
            (McpError::body_too_large("x"), 413, codes::INVALID_REQUEST),
            (
                McpError::unsupported_media_type("x"),
                415,
                codes::INVALID_REQUEST,
            ),
            (McpError::header_mismatch("x"), 400, codes::HEADER_MISMATCH),
            (
                McpError::unsupported_protocol_version("x", serde_json::json!({})),
                400,
                codes::UNSUPPORTED_PROTOCOL_VERSION,
            ),
            (
                McpError::missing_capability("x", serde_json::json!({})),
                400,
                codes::MISSING_CAPABILITY,
            ),
        ];
        for (error, status, code) in cases {
            let response = error.answer("7");
            assert_eq!(response.status().as_u16(), status);
            let body = axum::body::to_bytes(response.into_body(), 1 << 16)
                .await
                .expect("a body");
            let body: Value = serde_json::from_slice(&body).expect("JSON");
            assert_eq!(body["id"], 7, "{body}");
            assert_eq!(body["error"]["code"], code, "{body}");
            assert_eq!(body["error"]["message"], "x", "{body}");
        }
    }

    /// The front door's refusal keeps its status, its stable code and its header on
    /// `/mcp`; the JSON-RPC code says "refused".
    #[tokio::test]
    async fn a_door_refusal_keeps_its_status_code_and_header() {
        let refusal = crate::serve::auth::state_unavailable("the store is down");
        let response = McpError::turned_away(refusal).response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "1");
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("a body");
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(body["id"], Value::Null, "{body}");
        assert_eq!(body["error"]["code"], codes::REFUSED, "{body}");
        assert_eq!(body["error"]["data"]["code"], "state_unavailable", "{body}");
        assert_eq!(body["error"]["message"], "the store is down", "{body}");
    }
}
