//! Every request of the OAuth client, through the OpenAPI adapter's SSRF guard
//! ([`Guard`]): metadata GETs, registration POSTs, and the form POSTs the `oauth2` crate
//! builds (token, refresh, client credentials, revocation). Each is bounded in time
//! and its answer in size; no error text carries a body, a header or a query string.

use std::time::Duration;

use http::header::{AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;
use url::Url;

use crate::error::error_chain;
use crate::openapi::guard::Guard;

/// The most any answer may weigh: metadata, registration and token answers are small.
pub(super) const MAX_BODY: usize = 256 * 1024;

/// A URL as an error message shows it: scheme, host, port and path only (a query or a
/// fragment may carry a code or a token; user info a password).
pub(super) fn shown(url: &Url) -> String {
    let mut out = format!("{}://", url.scheme());
    if let Some(host) = url.host_str() {
        out.push_str(host);
    }
    if let Some(port) = url.port() {
        out.push_str(&format!(":{port}"));
    }
    out.push_str(url.path());
    out
}

/// [`shown`] for a URL still in text.
pub(super) fn shown_str(url: &str) -> String {
    match Url::parse(url) {
        Ok(u) => shown(&u),
        Err(_) => {
            let cut = url.find(['?', '#']).unwrap_or(url.len());
            url[..cut].chars().take(200).collect()
        }
    }
}

/// Why a request got no usable answer.
#[derive(Debug)]
pub(super) enum FetchError {
    /// The server answered with this status (and this JSON body, when it sent one).
    Status { status: u16, body: Option<Value> },
    /// The server answered, but not with what was asked: oversized, not a JSON object.
    Invalid(String),
    /// Not sent: the SSRF guard refused the URL.
    Refused(String),
    /// No answer: connection failure or timeout (perhaps passing: try again later).
    Unreachable(String),
}

impl FetchError {
    /// The error as one line, after `what` (e.g. "GET https://as.example/.well-known/...").
    pub(super) fn describe(&self) -> String {
        match self {
            FetchError::Status { status, body } => {
                let error = body
                    .as_ref()
                    .and_then(|b| b.get("error"))
                    .and_then(Value::as_str);
                match error {
                    Some(e) => format!("HTTP {status} ({})", short(e)),
                    None => format!("HTTP {status}"),
                }
            }
            FetchError::Invalid(e) | FetchError::Unreachable(e) => e.clone(),
            FetchError::Refused(e) => format!("refused: {e}"),
        }
    }
}

/// At most 200 characters of a server's text, on one line.
pub(super) fn short(s: &str) -> String {
    s.chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Reads a whole body, refusing one larger than [`MAX_BODY`].
async fn read_limited(mut resp: reqwest::Response) -> Result<Vec<u8>, FetchError> {
    let too_large =
        || FetchError::Invalid(format!("the answer is larger than {} KiB", MAX_BODY / 1024));
    if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| FetchError::Unreachable(error_chain(&e)))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Sends `request` and reads its answer within `timeout`: status, headers and body.
async fn exchange(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<(http::StatusCode, http::HeaderMap, Vec<u8>), FetchError> {
    let send = async {
        let resp = request
            .send()
            .await
            .map_err(|e| FetchError::Unreachable(error_chain(&e)))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = read_limited(resp).await?;
        Ok((status, headers, body))
    };
    tokio::time::timeout(timeout, send).await.map_err(|_| {
        FetchError::Unreachable(format!(
            "no answer within {}",
            crate::error::duration_text(timeout)
        ))
    })?
}

/// A JSON object fetched with GET: a metadata document.
pub(super) async fn get_json(
    guard: &Guard,
    url: &Url,
    timeout: Duration,
) -> Result<Value, FetchError> {
    let request = guard
        .document(url.clone())
        .map_err(FetchError::Refused)?
        .header(http::header::ACCEPT, "application/json");
    let (status, _, body) = exchange(request, timeout).await?;
    if !status.is_success() {
        return Err(FetchError::Status {
            status: status.as_u16(),
            body: serde_json::from_slice(&body).ok(),
        });
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|_| FetchError::Invalid("the answer is not JSON".into()))?;
    if !value.is_object() {
        return Err(FetchError::Invalid(
            "the answer is not a JSON object".into(),
        ));
    }
    Ok(value)
}

/// A JSON object POSTed, its JSON answer read: a dynamic client registration.
pub(super) async fn post_json(
    guard: &Guard,
    url: &Url,
    body: &Value,
    timeout: Duration,
) -> Result<Value, FetchError> {
    let request = guard
        .request(reqwest::Method::POST, url.clone())
        .map_err(FetchError::Refused)?
        .header(http::header::ACCEPT, "application/json")
        .json(body);
    let (status, _, answer) = exchange(request, timeout).await?;
    let value: Option<Value> = serde_json::from_slice(&answer).ok();
    if !status.is_success() {
        return Err(FetchError::Status {
            status: status.as_u16(),
            body: value,
        });
    }
    match value {
        Some(v) if v.is_object() => Ok(v),
        _ => Err(FetchError::Invalid(
            "the answer is not a JSON object".into(),
        )),
    }
}

/// Why the `oauth2` crate's request failed before the server said anything usable.
/// Carries only texts built here: a URL as [`shown`] and the reason.
#[derive(Debug)]
pub(super) struct HttpError(pub(super) String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

/// Sends a request the `oauth2` crate built (a form POST to a token or revocation
/// endpoint) through the guard. `authorization`, when given, replaces the crate's own
/// `Authorization` header (see `token::basic_credentials` for why). An error answer
/// that is not JSON becomes an [`HttpError`] naming the status, so that the crate never
/// holds (and never quotes) a body it cannot read.
pub(super) async fn send_form(
    guard: &Guard,
    request: oauth2::HttpRequest,
    authorization: Option<http::HeaderValue>,
    timeout: Duration,
) -> Result<oauth2::HttpResponse, HttpError> {
    let url = Url::parse(&request.uri().to_string())
        .map_err(|_| HttpError("the endpoint URL is not valid".into()))?;
    let fail = |e: String| HttpError(format!("{} {}: {e}", request.method(), shown(&url)));
    let mut builder = guard
        .request(request.method().clone(), url.clone())
        .map_err(|e| fail(format!("refused: {e}")))?;
    for (name, value) in request.headers() {
        if name == AUTHORIZATION && authorization.is_some() {
            continue;
        }
        builder = builder.header(name, value);
    }
    if let Some(mut value) = authorization {
        value.set_sensitive(true);
        builder = builder.header(AUTHORIZATION, value);
    }
    let method = request.method().clone();
    let (status, headers, body) = exchange(builder.body(request.into_body()), timeout)
        .await
        .map_err(|e| HttpError(format!("{method} {}: {}", shown(&url), e.describe())))?;
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("application/json"));
    if status != http::StatusCode::OK && (!json || serde_json::from_slice::<Value>(&body).is_err())
    {
        return Err(HttpError(format!(
            "{method} {} answered HTTP {}",
            shown(&url),
            status.as_u16()
        )));
    }
    let mut response = http::Response::builder().status(status);
    if let Some(ct) = headers.get(CONTENT_TYPE) {
        response = response.header(CONTENT_TYPE, ct);
    }
    response
        .body(body)
        .map_err(|e| HttpError(format!("{method} {}: {e}", shown(&url))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_query_fragment_or_user_info() {
        let u = Url::parse("https://user:pw@as.example.com:8443/cb?code=secret#frag").unwrap();
        assert_eq!(shown(&u), "https://as.example.com:8443/cb");
        assert_eq!(
            shown_str("https://as.example.com/x?code=1"),
            "https://as.example.com/x"
        );
        assert_eq!(shown_str("not a url?code=1"), "not a url");
    }
}
