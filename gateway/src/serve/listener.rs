//! The HTTP listener: accepts TCP connections and serves each with hyper's HTTP/1
//! under limits that keep slow, idle or too many clients from holding the gateway.
//!
//! - **Header timeout**: a request's headers must have arrived within `header_timeout`
//!   of the connection's opening (or, on a kept-alive connection, of the next
//!   request's first byte). A client trickling header bytes (slow loris) or opening a
//!   connection and sending nothing is dropped.
//! - **Body timeout**: a request's whole body must arrive within `body_timeout` of its
//!   headers; reading it past that fails, the handler answers, the connection closes.
//! - **Idle timeout**: a kept-alive connection with no request in flight is closed
//!   after `idle_timeout`. A request in flight (a long call, an SSE stream) is never
//!   idle: its own deadlines bound it.
//! - **Connection cap**: at most `max_connections` connections are served at once;
//!   more wait in the kernel's accept queue until one ends. One client address gets
//!   at most `max_connections_per_address` of them (`admission`): its further
//!   connections are closed as soon as accepted, so a client holding thousands of
//!   idle sockets leaves places, and a moving accept queue, for everyone else.
//! - **Accept errors** (e.g. `EMFILE`, out of file descriptors) are logged and retried
//!   after a growing pause: the listener never stops.
//!
//! - **Unread bodies**: an answer sent before its request's body was read (a refusal
//!   such as a 401) says `Connection: close`. hyper drains only the body bytes that
//!   have already arrived and otherwise closes the connection after the answer; a
//!   client told nothing would reuse the connection and find it closed under its
//!   next request.
//!
//! Connections are watched by their own task: one timer tick a connection, no shared
//! structure, and nothing touched per byte beyond an uncontended lock.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http_body::Frame;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use crate::config::front_door::{MAX_CONNECTIONS, ServerConfig};

/// The shortest and longest pause after a failed `accept`.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What the listener serves: the router, or [`super::Front`] around it (any
/// always-ready, infallible service of axum requests).
pub trait HttpApp: Clone + Send + 'static {
    type Answer: Future<Output = Result<axum::response::Response, Infallible>> + Send;

    fn answer(&mut self, request: axum::extract::Request) -> Self::Answer;
}

impl<T> HttpApp for T
where
    T: Service<axum::extract::Request, Response = axum::response::Response, Error = Infallible>
        + Clone
        + Send
        + 'static,
    T::Future: Send,
{
    type Answer = T::Future;

    fn answer(&mut self, request: axum::extract::Request) -> Self::Answer {
        self.call(request)
    }
}

/// Serves `app` on `listener` until `stop`, then lets the open connections finish
/// (the caller bounds how long it waits).
pub async fn serve(
    listener: TcpListener,
    app: impl HttpApp,
    limits: ServerConfig,
    stop: CancellationToken,
) {
    let cap = limits.max_connections.clamp(1, MAX_CONNECTIONS);
    let permits = Arc::new(Semaphore::new(cap));
    let per_address = super::admission::PerAddress::new(limits.connections_per_address());
    let limits = Arc::new(limits);
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let permit = tokio::select! {
            _ = stop.cancelled() => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, admitted) = match accepted {
            Ok((stream, peer)) => {
                backoff = ACCEPT_BACKOFF_MIN;
                let Some(admitted) = per_address.admit(peer.ip()) else {
                    // Over its client's share: closed at once, so the accept queue
                    // keeps moving for everyone else.
                    tracing::debug!(client = %peer.ip(), "closing a connection over its address's share (server.max_connections_per_address)");
                    drop(stream);
                    drop(permit);
                    continue;
                };
                (stream, admitted)
            }
            Err(error) => {
                // Out of file descriptors (or a connection reset before it was
                // accepted): the pending ones stay queued; open connections time out
                // and free descriptors, so pause and try again.
                tracing::warn!(%error, pause = ?backoff, "accepting a connection failed; retrying");
                drop(permit);
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let (app, limits, stop) = (app.clone(), limits.clone(), stop.clone());
        tokio::spawn(async move {
            connection(stream, app, &limits, stop).await;
            drop(admitted);
            drop(permit);
        });
    }
    // Every connection was told to finish (graceful shutdown): wait for them.
    let _ = permits.acquire_many(cap as u32).await;
}

/// Serves one connection until it ends, times out or the gateway stops.
async fn connection(
    stream: TcpStream,
    app: impl HttpApp,
    limits: &ServerConfig,
    stop: CancellationToken,
) {
    // Small SSE frames must not wait for Nagle's algorithm (a 40 ms stall per call
    // against clients that delay their ACKs).
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set on a connection");
    }
    // The client's address, for what is counted per client (console sign-ins).
    let peer = stream.peer_addr().ok();
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let body_timeout = limits.body_timeout;
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let in_flight = activity.request_started();
            let activity = activity.clone();
            let mut request =
                request.map(|body| Body::new(TimedBody::new(body, body_timeout, activity.clone())));
            if let Some(peer) = peer {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
            }
            let mut app = app.clone();
            async move {
                let mut response = match app.answer(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                if activity.body_unread() {
                    response.headers_mut().insert(
                        http::header::CONNECTION,
                        http::HeaderValue::from_static("close"),
                    );
                }
                Ok::<_, Infallible>(response.map(|body| Tracked {
                    body,
                    _in_flight: in_flight,
                }))
            }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        // Our own header timeout counts from the connection's opening; hyper's would
        // need its timer and also cut kept-alive connections at the header timeout.
        .header_read_timeout(None)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let tick = (limits.header_timeout.min(limits.idle_timeout) / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopping = false;
    loop {
        tokio::select! {
            outcome = conn.as_mut() => {
                if let Err(error) = outcome {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            _ = stop.cancelled(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = ticker.tick() => {
                if let Some(limit) = activity.expired(limits, Instant::now()) {
                    tracing::debug!(limit, "closing a connection that passed its limit");
                    return;
                }
            }
        }
    }
}

/// What a connection is doing, for its watchdog.
struct Activity {
    state: Mutex<State>,
    /// The current request's body has bytes the handler has not read. HTTP/1 serves
    /// one request at a time, so one flag a connection is enough.
    body_unread: AtomicBool,
}

struct State {
    /// Requests whose response has not been fully sent.
    in_flight: usize,
    /// Last byte read or written, or last response finished.
    last: Instant,
    /// When the request being read began (the connection's opening for the first):
    /// its headers are due `header_timeout` later. `None` between requests.
    head_since: Option<Instant>,
}

impl Activity {
    fn new() -> Activity {
        let now = Instant::now();
        Activity {
            state: Mutex::new(State {
                in_flight: 0,
                last: now,
                head_since: Some(now),
            }),
            body_unread: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let now = Instant::now();
        let mut state = self.lock();
        state.last = now;
        if state.in_flight == 0 && state.head_since.is_none() {
            state.head_since = Some(now);
        }
    }

    fn wrote(&self) {
        self.lock().last = Instant::now();
    }

    fn set_body_unread(&self, unread: bool) {
        self.body_unread.store(unread, Ordering::Relaxed);
    }

    /// Whether the current request's body was left (partly) unread.
    fn body_unread(&self) -> bool {
        self.body_unread.load(Ordering::Relaxed)
    }

    fn request_started(self: &Arc<Self>) -> InFlight {
        let mut state = self.lock();
        state.in_flight += 1;
        state.head_since = None;
        InFlight(self.clone())
    }

    /// The limit this connection has passed, if any.
    fn expired(&self, limits: &ServerConfig, now: Instant) -> Option<&'static str> {
        let state = self.lock();
        if state.in_flight > 0 {
            return None;
        }
        match state.head_since {
            Some(since) if now.duration_since(since) >= limits.header_timeout => {
                Some("header_timeout")
            }
            None if now.duration_since(state.last) >= limits.idle_timeout => Some("idle_timeout"),
            _ => None,
        }
    }
}

/// One request in flight: ends when its response body is done (or dropped).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        state.last = Instant::now();
    }
}

/// The connection's socket, reporting reads and writes to its [`Activity`].
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let outcome = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = outcome {
            self.activity.read(buf.filled().len() - before);
        }
        outcome
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = outcome
            && written > 0
        {
            self.activity.wrote();
        }
        outcome
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(written)) = outcome
            && written > 0
        {
            self.activity.wrote();
        }
        outcome
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request body that must be complete by its deadline, and tells its connection
/// whether it was read to the end.
struct TimedBody {
    inner: Incoming,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    activity: Arc<Activity>,
}

impl TimedBody {
    fn new(inner: Incoming, timeout: Duration, activity: Arc<Activity>) -> TimedBody {
        activity.set_body_unread(!http_body::Body::is_end_stream(&inner));
        TimedBody {
            inner,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            activity,
        }
    }
}

/// The error a body read past `body_timeout` ends with.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body did not arrive within {} (server.body_timeout in the gateway config)",
    humantime::format_duration(*.0)
)]
pub struct BodyTimeout(Duration);

/// The [`BodyTimeout`] behind a body read error, if that is what ended the read.
pub fn body_timeout(error: &axum::Error) -> Option<&BodyTimeout> {
    cause::<BodyTimeout>(error)
}

/// Why a JSON API refuses a body it could not read within `limit` bytes: `(status,
/// code, message)` — 408 `body_timeout`, 413 `body_too_large` (naming `limit_setting`,
/// where the limit is configured), or 400 `invalid_body`. The REST and admin APIs
/// answer them in their error shape.
pub fn body_refusal(
    failed: &axum::Error,
    limit: usize,
    limit_setting: &str,
) -> (http::StatusCode, &'static str, String) {
    use http::StatusCode;
    if let Some(late) = body_timeout(failed) {
        return (
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            late.to_string(),
        );
    }
    if cause::<http_body_util::LengthLimitError>(failed).is_some() {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than {limit} bytes ({limit_setting}): send less"),
        );
    }
    (
        StatusCode::BAD_REQUEST,
        "invalid_body",
        format!("the request body could not be read: {failed}"),
    )
}

/// The first error of type `T` in `error`'s chain of causes (a body read error wraps
/// what ended the read: a timeout, a length limit).
pub fn cause<T: std::error::Error + 'static>(error: &axum::Error) -> Option<&T> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(found) = current.downcast_ref::<T>() {
            return Some(found);
        }
        source = current.source();
    }
    None
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            if frame.is_none() || self.inner.is_end_stream() {
                self.activity.set_body_unread(false);
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout(self.timeout)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that holds its request's [`InFlight`] until it is done.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ServerConfig {
        ServerConfig {
            header_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(5),
            ..ServerConfig::default()
        }
    }

    #[test]
    fn a_new_connection_owes_its_headers_then_idles_between_requests() {
        let activity = Arc::new(Activity::new());
        let start = Instant::now();
        assert_eq!(activity.expired(&limits(), start), None);
        assert_eq!(
            activity.expired(&limits(), start + Duration::from_secs(1)),
            Some("header_timeout")
        );
        let request = activity.request_started();
        // A request in flight is never cut by the connection's watchdog.
        assert_eq!(
            activity.expired(&limits(), start + Duration::from_secs(60)),
            None
        );
        drop(request);
        let done = Instant::now();
        assert_eq!(
            activity.expired(&limits(), done + Duration::from_secs(4)),
            None
        );
        assert_eq!(
            activity.expired(&limits(), done + Duration::from_secs(5)),
            Some("idle_timeout")
        );
        // The next request's first byte starts its header clock.
        activity.read(1);
        let first_byte = Instant::now();
        assert_eq!(
            activity.expired(&limits(), first_byte + Duration::from_secs(1)),
            Some("header_timeout")
        );
    }

    /// How many more descriptors this process may open (its soft limit minus what is
    /// open), from `/proc` (`None` elsewhere).
    fn spare_descriptors() -> Option<usize> {
        let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
        let soft: usize = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))?
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()?;
        let open = std::fs::read_dir("/proc/self/fd").ok()?.count();
        Some(soft.saturating_sub(open))
    }

    /// One client (127.0.0.1) holds 2,000 idle sockets against a gateway serving 500
    /// connections: it gets its share (100), the rest are closed as accepted, and a
    /// call from another address (127.0.0.2) is answered at once. Without the share,
    /// the held sockets take all 500 places and the call waits for a header timeout
    /// (30 s here) to free one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_client_holding_many_sockets_leaves_room_for_others() {
        const HELD: usize = 2_000;
        if spare_descriptors().is_some_and(|spare| spare < HELD * 2 + 100) {
            eprintln!(
                "NOTICE: skipping: fewer than {} file descriptors to spare",
                HELD * 2 + 100
            );
            return;
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let limits = ServerConfig {
            header_timeout: Duration::from_secs(30),
            max_connections: 500,
            max_connections_per_address: Some(100),
            ..ServerConfig::default()
        };
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(listener, app, limits, stop.clone()));
        let mut held = Vec::with_capacity(HELD);
        let opening = tokio::time::timeout(Duration::from_secs(30), async {
            for _ in 0..HELD {
                match TcpStream::connect(address).await {
                    Ok(stream) => held.push(stream),
                    Err(error) => panic!("opening a held socket: {error}"),
                }
            }
        });
        opening.await.expect("2,000 sockets opened within 30 s");

        let started = std::time::Instant::now();
        let call = tokio::time::timeout(Duration::from_secs(5), async {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket
                .bind("127.0.0.2:0".parse().unwrap())
                .expect("bind 127.0.0.2");
            let mut stream = socket.connect(address).await.expect("connect");
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            stream
                .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await.unwrap();
            String::from_utf8_lossy(&answer).into_owned()
        })
        .await
        .expect("the call from 127.0.0.2 was answered within 5 s");
        assert!(call.starts_with("HTTP/1.1 200"), "{call}");
        assert!(call.ends_with("ok"), "{call}");
        eprintln!(
            "a call from another address with {HELD} sockets held: answered in {:?}",
            started.elapsed()
        );
        drop(held);
        stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
    }

    #[test]
    fn shares_default_to_a_quarter_and_are_checked() {
        let config = ServerConfig::default();
        assert_eq!(config.connections_per_address(), 1024);
        let small = ServerConfig {
            max_connections: 2,
            ..ServerConfig::default()
        };
        assert_eq!(small.connections_per_address(), 1, "never zero");
        for bad in [0, 4097] {
            let config = ServerConfig {
                max_connections_per_address: Some(bad),
                ..ServerConfig::default()
            };
            assert_eq!(
                config.validate().unwrap_err().0,
                "max_connections_per_address"
            );
        }
    }

    #[test]
    fn zero_limits_are_refused() {
        let mut config = ServerConfig::default();
        assert!(config.validate().is_ok());
        config.max_connections = 0;
        assert_eq!(config.validate().unwrap_err().0, "max_connections");
        config = ServerConfig {
            body_timeout: Duration::ZERO,
            ..ServerConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().0, "body_timeout");
    }
}
