//! The clients of one OpenAPI upstream, each behind the SSRF guard ([`super::ssrf`]):
//! API calls, token requests and health checks, spec and `$ref` documents. The OAuth
//! client ([`crate::oauth`]) fetches through the same guard: metadata as documents,
//! registration and token endpoints as token requests.

use std::sync::Arc;
use std::time::Duration;

use super::client::{ApiClient, ApiRequest, ApiResponse, SendError};
use super::ssrf::{GuardedResolver, MAX_REDIRECTS, check_url};

/// The only way to fetch what a spec names: every request URL and every redirect hop
/// is checked, names resolve through [`resolve`], no proxies (a proxy would resolve
/// names where the guard cannot see them), and timeouts.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// For API calls, which carry credentials and configured headers: redirects stay
    /// within the origin (see [`crate::redirect`]).
    api: ApiClient,
    /// For token requests and health checks: the same redirect rule as `api`.
    calls: reqwest::Client,
    /// For spec and `$ref` documents, fetched without credentials: redirects may
    /// change origin (specs are often served through one).
    documents: reqwest::Client,
    allow_private: bool,
}

impl Guard {
    /// The clients of one upstream; the error says what could not be set up.
    pub(crate) fn new(allow_private: bool, timeout: Duration) -> Result<Guard, String> {
        let build = |cross_origin: bool| {
            reqwest::Client::builder()
                .dns_resolver(Arc::new(GuardedResolver {
                    allow_private,
                    timeout,
                }))
                .redirect(crate::redirect::policy(
                    MAX_REDIRECTS,
                    cross_origin,
                    move |url| check_url(url, allow_private),
                ))
                .no_proxy()
                .connect_timeout(timeout)
                .timeout(timeout)
                .pool_idle_timeout(Duration::from_secs(60))
                .build()
                .map_err(|e| crate::error::error_chain(&e))
        };
        Ok(Guard {
            api: ApiClient::new(allow_private, timeout)?,
            calls: build(false)?,
            documents: build(true)?,
            allow_private,
        })
    }

    /// Checks `url` as [`check_url`] does with this upstream's allowance.
    pub(crate) fn check(&self, url: &url::Url) -> Result<(), String> {
        check_url(url, self.allow_private)
    }

    /// Sends a call to an API, once its URL passed the guard (the connector and the
    /// redirects see to the rest).
    pub(super) async fn call(&self, request: ApiRequest) -> Result<ApiResponse, SendError> {
        self.check(&request.url).map_err(SendError::Refused)?;
        self.api.send(request).await
    }

    /// A request to an API's token endpoint or health path, once `url` passed the guard.
    pub(crate) fn request(
        &self,
        method: reqwest::Method,
        url: url::Url,
    ) -> Result<reqwest::RequestBuilder, String> {
        self.check(&url)?;
        Ok(self.calls.request(method, url))
    }

    /// A GET for a spec or referenced document, once `url` passed the guard.
    pub(crate) fn document(&self, url: url::Url) -> Result<reqwest::RequestBuilder, String> {
        self.check(&url)?;
        Ok(self.documents.get(url))
    }
}
