//! [`OpenApiUpstream`]: an OpenAPI description behind the same [`Upstream`] contract as
//! an MCP server. Loading runs the whole pipeline once (fetch, then normalize, check
//! refs, model, convert in [`super::import`] on a blocking thread); calls build the
//! request from arguments the gateway already checked against the tool's input schema,
//! apply auth and map the response. One pooled client per upstream (hyper for the
//! calls, reqwest for documents, tokens and health checks), guarded against SSRF.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use url::Url;

use super::auth::{Applied, Auth};
use super::client::{self, ApiRequest, SendError};
use super::config::OpenApiConfig;
use super::import::{Built, Endpoint, build};
use super::invoke;
use super::load::{self, LoadError};
use super::oauth_flows::{self, CodeFlow};
use super::{guard, ssrf};
use crate::error::error_chain;
use crate::{CallContext, CallOutput, Connection, JsonObject, ToolDef, ToolError, Upstream};

/// An OpenAPI upstream.
pub struct OpenApiUpstream {
    name: String,
    config: OpenApiConfig,
    tools: Arc<Vec<ToolDef>>,
    entries: HashMap<String, Endpoint>,
    /// Every request this upstream sends goes through it (SSRF guard, redirects).
    guard: guard::Guard,
    auth: Auth,
    health_base: Option<Url>,
    /// The spec's authorization code flows, until users' tokens are taken (see
    /// [`OpenApiUpstream::take_user_tokens`]).
    flows: oauth_flows::Flows,
    tools_tx: watch::Sender<u64>,
    last_error: Mutex<Option<String>>,
    closed: std::sync::atomic::AtomicBool,
    /// Last, so it drops after everything else: then gives the memory back.
    _release: ReleaseOnDrop,
}

/// Hands freed memory back to the system when dropped (see [`super::release_memory`]).
struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        // Trimming walks the allocator's arenas: not on an async worker thread.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(super::release_memory)),
            Err(_) => super::release_memory(),
        }
    }
}

impl std::fmt::Debug for OpenApiUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenApiUpstream")
            .field("name", &self.name)
            .field("tools", &self.tools.len())
            .finish()
    }
}

impl OpenApiUpstream {
    /// Loads the spec and builds the tools. The report lists what was left out and why.
    pub async fn load(
        name: &str,
        config: OpenApiConfig,
    ) -> Result<(OpenApiUpstream, super::ImportReport), LoadError> {
        if let Some(b) = &config.base_url {
            let url = Url::parse(b)
                .map_err(|e| LoadError::Config(format!("base_url '{b}' is not a URL: {e}")))?;
            ssrf::check_url(&url, config.allow_private_networks)
                .map_err(|e| LoadError::Config(format!("base_url '{b}': {e}")))?;
        }
        for h in &config.forward_headers {
            http::HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
                LoadError::Config(format!("forward_headers: '{h}' is not a header name"))
            })?;
        }
        let guard = guard::Guard::new(config.allow_private_networks, config.timeout)
            .map_err(|e| LoadError::Config(format!("cannot build the HTTP client: {e}")))?;
        // One bound on the whole import, however many documents it reads.
        let deadline = std::time::Instant::now() + config.import_timeout;
        let loaded =
            tokio::time::timeout(config.import_timeout, load::load_documents(&config, &guard))
                .await
                .unwrap_or_else(|_| Err(load::over_time(&config)));
        let docs = match loaded {
            Ok(docs) => docs,
            Err(e) => {
                // a refused document may have been parsed whole before its limits hit
                tokio::task::spawn_blocking(super::release_memory);
                return Err(e);
            }
        };
        // Normalizing, modelling and converting a large spec is CPU work: off the
        // async runtime, so health checks and calls keep being served meanwhile.
        let built = {
            let (name, config) = (name.to_owned(), config.clone());
            let built = tokio::task::spawn_blocking(move || {
                let built = build(&name, &config, docs, deadline);
                // the documents and every intermediate form are gone by now
                super::release_memory();
                built
            })
            .await
            .map_err(|e| LoadError::Config(format!("the import stopped: {e}")))?;
            built?
        };
        let Built {
            tools,
            entries,
            auth,
            health_base,
            flows,
            report,
        } = built;
        let (tools_tx, _) = watch::channel(1);
        tracing::info!(
            upstream = name,
            imported = report.imported,
            skipped = report.skipped.len(),
            renamed = report.renamed.len(),
            approx_tokens = report.approx_tokens,
            "OpenAPI upstream loaded"
        );
        Ok((
            OpenApiUpstream {
                name: name.to_owned(),
                config,
                tools: Arc::new(tools),
                entries,
                guard,
                auth,
                health_base,
                flows,
                tools_tx,
                last_error: Mutex::new(None),
                closed: std::sync::atomic::AtomicBool::new(false),
                _release: ReleaseOnDrop,
            },
            report,
        ))
    }

    /// Sets this API up to be called with each user's own OAuth token (`credentials:
    /// oauth`): the spec's authorization code flow of scheme `named` (or the one its
    /// operations use, see [`super::oauth_flows`]) is the one users connect through,
    /// and a call's [`crate::CallerCredentials::Bearer`] is sent as that scheme's
    /// credential. Answers the flow; the error says why the spec offers none.
    pub fn take_user_tokens(&mut self, named: Option<&str>) -> Result<CodeFlow, LoadError> {
        let flow = self
            .flows
            .choose(named)
            .map_err(|e| LoadError::Config(format!("credentials: oauth: {e}")))?;
        self.auth.take_user_tokens_as(flow.scheme.clone());
        Ok(flow)
    }

    /// Like [`Upstream::call`], also forwarding those of `incoming` headers that the
    /// config lists in `forward_headers`.
    pub async fn call_with_headers(
        &self,
        tool: &str,
        arguments: JsonObject,
        ctx: CallContext,
        incoming: &http::HeaderMap,
    ) -> Result<CallOutput, ToolError> {
        if self.closed.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(ToolError::unavailable(&self.name, "it was shut down"));
        }
        let entry = self.entries.get(tool).ok_or_else(|| {
            ToolError::NotFound(format!("upstream '{}' has no tool '{tool}'", self.name))
        })?;
        // The gateway checked the arguments against the advertised input schema
        // (`toolgate::validate`) before the call reached this adapter.
        let arguments = &arguments;
        let base = entry
            .base
            .as_ref()
            .map_err(|e| ToolError::Failed(e.clone()))?;
        let prepared = invoke::build(&entry.op, &entry.conv, arguments, base)?;
        self.guard
            .check(&prepared.url)
            .map_err(|e| ToolError::Failed(format!("refused to call {}: {e}", prepared.url)))?;
        // `timeout` bounds one request of a plain call; a background call is bounded
        // only by its task's own timeout (already in the deadline).
        let limit = if ctx.background {
            ctx.remaining()
        } else {
            ctx.remaining().min(self.config.timeout)
        };
        let what = format!("{} {}", entry.op.method, entry.op.path);
        let creds = self
            .auth
            .credentials_for(ctx.credentials.as_ref())
            .map_err(ToolError::Failed)?;
        let user_scheme = self.auth.user_scheme_of(ctx.credentials.as_ref());
        let schemes = Auth::choose(&creds, entry.op.security.as_deref(), user_scheme);
        // Whether the user's own token goes with this request: a refusal of it is the
        // token service's to act on (refresh, or connect again), not a result.
        let user_token_sent = user_scheme.is_some_and(|u| schemes.iter().any(|s| s == u));
        let work = async {
            let mut retried = false;
            loop {
                let mut applied = Applied::default();
                if !schemes.is_empty() {
                    self.auth
                        .apply(&self.guard, &creds, &schemes, &mut applied, limit)
                        .await
                        .map_err(ToolError::Failed)?;
                }
                let mut request = self
                    .request(&prepared, &applied, incoming)
                    .map_err(|e| self.send_error(tool, e, limit, &what))?;
                invoke::put_trace(&mut request.headers, ctx.trace.as_ref());
                let resp = self
                    .guard
                    .call(request)
                    .await
                    .map_err(|e| self.send_error(tool, e, limit, &what))?;
                if resp.status() == http::StatusCode::UNAUTHORIZED
                    && !applied.used_oauth.is_empty()
                    && !retried
                {
                    for s in &applied.used_oauth {
                        self.auth.invalidate(s).await;
                    }
                    retried = true;
                    continue;
                }
                let status = resp.status();
                if user_token_sent
                    && matches!(
                        status,
                        http::StatusCode::UNAUTHORIZED | http::StatusCode::FORBIDDEN
                    )
                {
                    return Err(user_token_refused(resp.headers(), status, tool, &what));
                }
                if status == http::StatusCode::TOO_MANY_REQUESTS {
                    return Err(rate_limited(resp.headers(), tool, &what));
                }
                let ct = resp
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let (body, cut) = client::read_capped(resp, self.config.max_response_bytes)
                    .await
                    .map_err(|e| self.send_error(tool, e, limit, &what))?;
                let bytes = body.len();
                let mut output = invoke::map_response(status, ct.as_deref(), body, cut, &what);
                // What was sent and what came back, for one-line summaries (`GET
                // /pets/42 → 200 (1.2 KB)`). The path only: a query may carry a key.
                output.object_mut().insert(
                    "_meta".into(),
                    serde_json::json!({"toolgate/http": {
                        "method": prepared.method.as_str(),
                        "path": prepared.url.path(),
                        "status": status.as_u16(),
                        "bytes": bytes,
                        "cut": cut,
                    }}),
                );
                return Ok(output);
            }
        };
        tokio::select! {
            r = tokio::time::timeout(limit, work) => match r {
                Ok(r) => r,
                Err(_) => Err(ToolError::timeout(&self.name, tool, limit)),
            },
            _ = ctx.cancel.cancelled() => Err(ToolError::cancelled(tool)),
        }
    }

    /// The request for one try of a call: the prepared one with `applied` credentials
    /// and the forwarded headers, appended in the order reqwest appended them.
    fn request(
        &self,
        p: &invoke::Prepared,
        applied: &Applied,
        incoming: &http::HeaderMap,
    ) -> Result<ApiRequest, SendError> {
        use http::header::{CONTENT_TYPE, COOKIE, HeaderName, HeaderValue};
        let invalid = |e: &dyn std::fmt::Display| SendError::Failed(format!("builder error: {e}"));
        let mut url = p.url.clone();
        if !applied.query.is_empty() {
            let q = match url.query() {
                Some(q) if !q.is_empty() => format!("{q}&{}", applied.query.join("&")),
                _ => applied.query.join("&"),
            };
            url.set_query(Some(&q));
        }
        let mut headers = http::HeaderMap::new();
        if let Some(basic) = client::take_credentials(&mut url) {
            headers.append(http::header::AUTHORIZATION, basic);
        }
        for h in &self.config.forward_headers {
            let name = HeaderName::from_bytes(h.as_bytes()).map_err(|e| invalid(&e))?;
            for v in incoming.get_all(&name) {
                headers.append(name.clone(), v.clone());
            }
        }
        for (k, v) in p.headers.iter().chain(&applied.headers) {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| invalid(&e))?;
            let value = HeaderValue::from_str(v).map_err(|e| invalid(&e))?;
            headers.append(name, value);
        }
        let cookies: Vec<&str> = p
            .cookies
            .iter()
            .chain(&applied.cookies)
            .map(String::as_str)
            .collect();
        if !cookies.is_empty() {
            let value = HeaderValue::from_str(&cookies.join("; ")).map_err(|e| invalid(&e))?;
            headers.append(COOKIE, value);
        }
        let body = match &p.body {
            Some((ct, bytes)) => {
                let value = HeaderValue::from_str(ct).map_err(|e| invalid(&e))?;
                headers.append(CONTENT_TYPE, value);
                bytes.clone()
            }
            None => bytes::Bytes::new(),
        };
        Ok(ApiRequest {
            method: p.method.clone(),
            url,
            headers,
            body,
        })
    }

    /// The error a failed send is to the caller: refused by the guard, the call's
    /// timeout, or the upstream unavailable (and its last error).
    fn send_error(&self, tool: &str, e: SendError, limit: Duration, what: &str) -> ToolError {
        match e {
            SendError::Refused(e) => ToolError::Failed(format!("refused to call {what}: {e}")),
            SendError::Timeout => ToolError::timeout(&self.name, tool, limit),
            SendError::Failed(detail) => {
                *self.last_error.lock().expect("not poisoned") = Some(detail.clone());
                ToolError::unavailable(&self.name, detail)
            }
        }
    }
}

#[async_trait]
impl Upstream for OpenApiUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Arc<Vec<ToolDef>> {
        self.tools.clone()
    }

    fn tools_changed(&self) -> watch::Receiver<u64> {
        self.tools_tx.subscribe()
    }

    fn connection(&self) -> Connection {
        if self.closed.load(std::sync::atomic::Ordering::Relaxed) {
            Connection::Closed
        } else {
            Connection::Connected
        }
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.lock().expect("not poisoned").clone()
    }

    async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        ctx: CallContext,
    ) -> Result<CallOutput, ToolError> {
        let headers = ctx.request_headers.clone();
        self.call_with_headers(tool, arguments, ctx, &headers).await
    }

    async fn check(&self, timeout: Duration) -> Result<(), ToolError> {
        let result = self.probe(timeout).await;
        *self.last_error.lock().expect("not poisoned") =
            result.as_ref().err().map(|e| e.to_string());
        result
    }

    async fn shutdown(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl OpenApiUpstream {
    async fn probe(&self, timeout: Duration) -> Result<(), ToolError> {
        let base = self
            .health_base
            .as_ref()
            .ok_or_else(|| ToolError::unavailable(&self.name, "no base URL to probe"))?;
        if let Some(h) = &self.config.health {
            let mut url = base.clone();
            url.set_path(&format!(
                "{}/{}",
                base.path().trim_end_matches('/'),
                h.path.trim_start_matches('/')
            ));
            let req = self
                .guard
                .request(reqwest::Method::GET, url)
                .map_err(|e| ToolError::unavailable(&self.name, e))?;
            let resp = tokio::time::timeout(timeout, req.send())
                .await
                .map_err(|_| {
                    ToolError::unavailable(
                        &self.name,
                        format!("health check timed out after {timeout:?}"),
                    )
                })?
                .map_err(|e| ToolError::unavailable(&self.name, error_chain(&e)))?;
            if !resp.status().is_success() {
                return Err(ToolError::unavailable(
                    &self.name,
                    format!("health check answered {}", resp.status()),
                ));
            }
            return Ok(());
        }
        let host = base
            .host_str()
            .ok_or_else(|| ToolError::unavailable(&self.name, "base URL has no host"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = base.port_or_known_default().unwrap_or(443);
        let allow = self.config.allow_private_networks;
        let connect = async {
            let addrs = tokio::net::lookup_host((host.as_str(), port)).await?;
            let mut last = std::io::Error::other("no usable address");
            for a in addrs {
                if !allow && ssrf::is_forbidden(a.ip()) {
                    last =
                        std::io::Error::other("address is private (allow_private_networks is off)");
                    continue;
                }
                match tokio::net::TcpStream::connect(a).await {
                    Ok(_) => return Ok(()),
                    Err(e) => last = e,
                }
            }
            Err(last)
        };
        tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| {
                ToolError::unavailable(
                    &self.name,
                    format!("TCP connect timed out after {timeout:?}"),
                )
            })?
            .map_err(|e| {
                ToolError::unavailable(
                    &self.name,
                    format!("TCP connect to {host}:{port} failed: {e}"),
                )
            })
    }
}

/// The API refused the user's token (HTTP 401 or 403): [`ToolError::Unauthorized`]
/// with its `WWW-Authenticate` challenge, so the gateway refreshes the token and tries
/// once more, or asks the user to connect again (or for more scope).
fn user_token_refused(
    headers: &http::HeaderMap,
    status: http::StatusCode,
    tool: &str,
    what: &str,
) -> ToolError {
    let challenge = headers
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    ToolError::Unauthorized {
        message: format!(
            "the API behind '{tool}' refused the user's authorization ({what} answered HTTP {})",
            status.as_u16()
        ),
        status: status.as_u16(),
        challenge,
    }
}

/// The API answered 429: the caller can act on this (wait, then retry), so it is a
/// kind of its own, with the API's hint, not an HTTP error result.
fn rate_limited(headers: &http::HeaderMap, tool: &str, what: &str) -> ToolError {
    let retry_after = headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::error::retry_after_header);
    ToolError::RateLimited {
        message: format!(
            "the API behind '{tool}' is rate limiting calls ({what} answered HTTP 429); retry {}",
            match retry_after {
                Some(after) => format!("in {}", crate::error::duration_text(after)),
                None => "in a moment".to_owned(),
            }
        ),
        retry_after,
    }
}
