//! Makes every error `/mcp` answers a JSON-RPC error object.
//!
//! Whatever answers before a message is read — an oversized body, a refusal the HTTP
//! layers write as plain text, a parse failure (415 from a body extractor) — is
//! rewrapped as `{"jsonrpc":"2.0","id":null,"error":{code,message}}`: clients and
//! models act better on a JSON-RPC error. The status is kept (a parse failure becomes
//! 400), so session-expiry semantics (404) are unchanged.

use super::error::McpError;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

/// Refuses a body whose declared length is over the limit at once, with 413 and a
/// JSON-RPC error, before reading any of it (reading megabytes only to refuse them
/// would hand out free work). Bodies without a declared length are limited by the
/// transport itself.
pub fn refuse_oversized(headers: &http::HeaderMap, limit: usize) -> Option<Response> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let length = declared.filter(|&length| length > limit)?;
    Some(body_too_large(limit, Some(length)))
}

/// 413 with a JSON-RPC error naming the limit (and the body's length when declared).
pub fn body_too_large(limit: usize, length: Option<usize>) -> Response {
    let size = length.map_or_else(String::new, |length| format!(" of {length} bytes"));
    McpError::body_too_large(format!(
        "request body{size} exceeds the limit of {limit} bytes \
         (max_request_body_bytes in the gateway config)"
    ))
    .response()
}

/// Rewraps an error answer that is not JSON as a JSON-RPC error (same status; a
/// parse failure becomes 400). Other answers pass untouched.
pub async fn as_jsonrpc_error(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // rmcp's error bodies are one short line; cap what we read anyway.
    let text = match axum::body::to_bytes(body, 64 * 1024).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    // The other layer's headers stay (an `Allow`, a `WWW-Authenticate`); the body and
    // the status are the error's.
    let (answer, body) = classify(status, &text).response().into_parts();
    parts.status = answer.status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, body)
}

fn classify(status: StatusCode, text: &str) -> McpError {
    let detail = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text.to_owned()
    };
    if text.starts_with("fail to deserialize") {
        let message =
            format!("{detail}: send one JSON-RPC 2.0 request, notification or response object");
        return if text.contains("unrecognized JSON-RPC message") {
            McpError::invalid_request(message)
        } else {
            McpError::parse_error(message)
        };
    }
    let hint = match status {
        StatusCode::PAYLOAD_TOO_LARGE => {
            " (the limit is max_request_body_bytes in the gateway config)"
        }
        StatusCode::NOT_FOUND => " (the session expired or never existed: initialize again)",
        StatusCode::BAD_REQUEST if text.contains("Session ID") => {
            " (send initialize first, then echo its Mcp-Session-Id header)"
        }
        StatusCode::FORBIDDEN => " (add this host to allowed_hosts in the gateway config)",
        _ => "",
    };
    McpError::kept_status(status, format!("{detail}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_adapters::codes::{INVALID_REQUEST, PARSE_ERROR};

    #[test]
    fn parse_failures_become_400_parse_errors() {
        let McpError {
            status,
            code,
            message,
            ..
        } = classify(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "fail to deserialize request body key must be a string at line 1 column 2",
        );
        assert_eq!((status, code), (StatusCode::BAD_REQUEST, PARSE_ERROR));
        assert!(message.contains("line 1 column 2"));
    }

    #[test]
    fn statuses_are_kept_with_a_hint() {
        let McpError {
            status,
            code,
            message,
            ..
        } = classify(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Payload Too Large: request body exceeds 5 bytes",
        );
        assert_eq!(
            (status, code),
            (StatusCode::PAYLOAD_TOO_LARGE, INVALID_REQUEST)
        );
        assert!(message.contains("max_request_body_bytes"));
        assert_eq!(
            classify(StatusCode::NOT_FOUND, "").status,
            StatusCode::NOT_FOUND
        );
    }
}
