//! Kept-alive HTTP/1 connections to one plain-HTTP origin: the MCP HTTP transports'
//! direct path (`super::http`) and OpenAPI calls to `http://` APIs
//! (`crate::openapi::client`, through its SSRF-guarded connector). Public for the
//! bench's bare proxy, which forwards the same way so that its floor stays the
//! cheapest hop.
//!
//! hyper_util's pooled client spawns a task for every request whose answer has a
//! body, only to put the connection back once that body has been read: one task
//! started, woken and dropped per tool call. Here whoever reads the answer puts the
//! connection back when its body ends ([`Lease`]), so a call costs no task of its own;
//! each connection keeps the one task that drives it.
//!
//! Rules the pooled client had, kept: connections are reused most recently used
//! first; one idle longer than its pool's [`Limits::idle_timeout`] is closed instead
//! of used (and swept, oldest first, whenever a connection comes back: there is no
//! timer); at most [`Limits::max_idle`] idle connections are kept (the oldest goes); a
//! request that a reused connection closed before sending is sent again on another
//! (it never reached the server, so this repeats nothing). New here: an answer
//! dropped before its body ended takes its connection with it (its unread rest would
//! otherwise be read as the next answer's start).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Body as _;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower_service::Service;

/// Why a request got no answer.
#[derive(Debug)]
pub struct SendError {
    /// The server could not be reached at all (connection refused, DNS, connect
    /// timeout): the connection is gone rather than this one request.
    pub is_connect: bool,
    /// A wait ran out on the way (connecting, or the connector's own resolving).
    pub is_timeout: bool,
    /// The error and its causes, without the URL.
    pub detail: String,
}

/// How long a pool keeps idle connections, and how many.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub idle_timeout: Duration,
    pub max_idle: usize,
}

/// The MCP transports' limits (the idle timeout their pooled client was set to).
pub const MCP_LIMITS: Limits = Limits {
    idle_timeout: Duration::from_secs(90),
    max_idle: 64,
};
/// Reused connections tried for one request before a new one is opened: each may
/// have been closed by the server while it idled.
const MAX_REUSED_TRIES: usize = 3;

/// The connections to one origin, made by `C` (which is where a guard on the address
/// connected to lives).
pub struct Pool<C = HttpConnector> {
    connector: C,
    /// The endpoint, which the connector dials.
    endpoint: http::Uri,
    idle: Arc<IdleList>,
}

/// Idle connections, oldest first, and the pool's limits.
struct IdleList {
    connections: Mutex<VecDeque<Idle>>,
    limits: Limits,
}

struct Idle {
    sender: SendRequest<Full<Bytes>>,
    since: Instant,
}

/// A connection lent to one request; [`Lease::release`] gives it back.
struct Lease {
    sender: SendRequest<Full<Bytes>>,
    idle: Weak<IdleList>,
}

impl Lease {
    /// Gives the connection back for the next request, once its answer has been read
    /// to the end. It may not take a request at this very moment (its task has still
    /// to notice the answer's end); the next request waits for that.
    fn release(self) {
        let Some(list) = self.idle.upgrade() else {
            return;
        };
        if self.sender.is_closed() {
            return;
        }
        let limits = list.limits;
        let mut idle = lock(&list);
        while idle
            .front()
            .is_some_and(|oldest| oldest.since.elapsed() >= limits.idle_timeout)
            || idle.len() >= limits.max_idle.max(1)
        {
            idle.pop_front();
        }
        if limits.max_idle > 0 {
            idle.push_back(Idle {
                sender: self.sender,
                since: Instant::now(),
            });
        }
    }
}

fn lock(idle: &IdleList) -> std::sync::MutexGuard<'_, VecDeque<Idle>> {
    // A panic elsewhere leaves a list of connections that is still a list.
    idle.connections.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `Host` header for `uri`: its host, and its port when that is not 80.
pub fn host_header(uri: &http::Uri) -> Option<http::HeaderValue> {
    let host = uri.host()?;
    let value = match uri.port_u16() {
        Some(port) if port != 80 => format!("{host}:{port}"),
        _ => host.to_owned(),
    };
    http::HeaderValue::from_str(&value).ok()
}

/// The request target for `uri` on a direct connection: its path and query.
pub fn origin_form(uri: &http::Uri) -> http::Uri {
    uri.path_and_query()
        .map_or_else(|| http::Uri::from_static("/"), |p| p.clone().into())
}

impl<C> Pool<C>
where
    C: Service<http::Uri, Response = TokioIo<TcpStream>> + Clone + Send + Sync + 'static,
    C::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    C::Future: Send,
{
    pub fn new(connector: C, endpoint: http::Uri, limits: Limits) -> Arc<Pool<C>> {
        Arc::new(Pool {
            connector,
            endpoint,
            idle: Arc::new(IdleList {
                connections: Mutex::new(VecDeque::new()),
                limits,
            }),
        })
    }

    /// The most recently used idle connection that is still open and fresh.
    fn checkout(&self) -> Option<SendRequest<Full<Bytes>>> {
        let idle_timeout = self.idle.limits.idle_timeout;
        let mut idle = lock(&self.idle);
        while let Some(entry) = idle.pop_back() {
            if !entry.sender.is_closed() && entry.since.elapsed() < idle_timeout {
                return Some(entry.sender);
            }
        }
        None
    }

    /// Sends `request` (origin-form target, `Host` set) on a kept-alive connection, or
    /// a new one. Not bounded here: callers put their own deadline on the answer.
    pub async fn send(
        self: &Arc<Self>,
        mut request: http::Request<Full<Bytes>>,
    ) -> Result<Leased, SendError> {
        for _ in 0..MAX_REUSED_TRIES {
            let Some(mut sender) = self.checkout() else {
                break;
            };
            if sender.ready().await.is_err() {
                // Closed while idle.
                continue;
            }
            match sender.try_send_request(request).await {
                Ok(response) => return Ok(self.lease(response, sender)),
                Err(mut error) => match error.take_message() {
                    // Closed before the request went out: try another connection.
                    Some(unsent) => request = unsent,
                    None => return Err(failure(false, &error.into_error())),
                },
            }
        }
        let mut sender = self.connect().await?;
        match sender.send_request(request).await {
            Ok(response) => Ok(self.lease(response, sender)),
            Err(error) => Err(failure(false, &error)),
        }
    }

    fn lease(
        &self,
        response: http::Response<Incoming>,
        sender: SendRequest<Full<Bytes>>,
    ) -> Leased {
        Leased {
            response,
            lease: Some(Lease {
                sender,
                idle: Arc::downgrade(&self.idle),
            }),
        }
    }

    /// A new connection, its task started.
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, SendError> {
        let io = self
            .connector
            .clone()
            .call(self.endpoint.clone())
            .await
            .map_err(|e| {
                let error: Box<dyn std::error::Error + Send + Sync> = e.into();
                failure(true, error.as_ref())
            })?;
        let (sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| failure(true, &e))?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(error = %crate::error::error_chain(&error), "upstream connection ended");
            }
        });
        Ok(sender)
    }
}

fn failure(is_connect: bool, error: &(dyn std::error::Error + 'static)) -> SendError {
    SendError {
        is_connect,
        is_timeout: crate::error::is_timeout(error),
        detail: crate::error::error_chain(error),
    }
}

/// An answer and the connection it came on: the connection goes back to the pool
/// when the body has been read to its end, or when the answer is dropped with nothing
/// left to read; dropped with bytes unread, it is closed.
pub struct Leased {
    pub response: http::Response<Incoming>,
    lease: Option<Lease>,
}

impl Leased {
    /// An answer that came on a connection of another client (nothing to give back).
    pub fn unpooled(response: http::Response<Incoming>) -> Leased {
        Leased {
            response,
            lease: None,
        }
    }

    /// The body has ended: the connection may serve the next request.
    pub fn ended(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.release();
        }
    }
}

impl std::ops::Deref for Leased {
    type Target = http::Response<Incoming>;

    fn deref(&self) -> &Self::Target {
        &self.response
    }
}

impl std::ops::DerefMut for Leased {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.response
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        if self.response.body().is_end_stream() {
            self.ended();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const WAIT: Duration = Duration::from_secs(10);

    /// A loopback HTTP/1 server: every request on a connection is answered with the
    /// connection's number and the request's number on it, in a body of `body_len`
    /// bytes (at least that text; `None`: an empty body); after `close_after` requests
    /// the server closes the connection. Counts the connections it accepted.
    pub(crate) async fn server(
        body_len: Option<usize>,
        close_after: usize,
    ) -> (http::Uri, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let connection = count.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    for request in 1..=close_after {
                        // One request: headers up to the blank line, no body.
                        while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                            let mut chunk = [0u8; 1024];
                            match stream.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                        buffer.drain(..end + 4);
                        let mut body = String::new();
                        if let Some(len) = body_len {
                            body = format!("{connection}/{request}");
                            while body.len() < len {
                                body.push('.');
                            }
                        }
                        let head =
                            format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                        if stream.write_all(head.as_bytes()).await.is_err()
                            || stream.write_all(body.as_bytes()).await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        let uri: http::Uri = format!("http://{address}/mcp").parse().unwrap();
        (uri, accepted)
    }

    fn pool(endpoint: &http::Uri) -> Arc<Pool> {
        Pool::new(HttpConnector::new(), endpoint.clone(), MCP_LIMITS)
    }

    fn request(endpoint: &http::Uri) -> http::Request<Full<Bytes>> {
        let mut request = http::Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = http::Uri::from_static("/mcp");
        let host = endpoint.authority().unwrap().as_str().parse().unwrap();
        request.headers_mut().insert(http::header::HOST, host);
        request
    }

    /// One request; the body's text, read to its end.
    async fn text(pool: &Arc<Pool>, endpoint: &http::Uri) -> String {
        let mut leased = tokio::time::timeout(WAIT, pool.send(request(endpoint)))
            .await
            .expect("answered in time")
            .unwrap_or_else(|e| panic!("sent: {}", e.detail));
        let mut body = Vec::new();
        while let Some(frame) = tokio::time::timeout(WAIT, leased.response.body_mut().frame())
            .await
            .expect("body in time")
        {
            if let Ok(data) = frame.unwrap().into_data() {
                body.extend_from_slice(&data);
            }
        }
        leased.ended();
        String::from_utf8(body)
            .unwrap()
            .trim_end_matches('.')
            .to_owned()
    }

    #[tokio::test]
    async fn answers_read_to_the_end_give_their_connection_to_the_next_request() {
        let (endpoint, accepted) = server(Some(0), 100).await;
        let pool = pool(&endpoint);
        for n in 1..=5 {
            assert_eq!(text(&pool, &endpoint).await, format!("1/{n}"));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert_eq!(
            lock(&pool.idle).len(),
            1,
            "the connection is idle in the pool"
        );
    }

    #[tokio::test]
    async fn an_answer_dropped_with_its_body_unread_takes_its_connection_along() {
        // A body large enough not to arrive with the head.
        let (endpoint, accepted) = server(Some(256 * 1024), 100).await;
        let pool = pool(&endpoint);
        drop(pool.send(request(&endpoint)).await.ok().unwrap());
        assert!(lock(&pool.idle).is_empty());
        // The next request gets its own answer, on a new connection.
        assert_eq!(text(&pool, &endpoint).await, "2/1");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_empty_answer_dropped_unread_gives_its_connection_back() {
        let (endpoint, accepted) = server(None, 100).await;
        let pool = pool(&endpoint);
        // A zero-length body (such as a 202 to a notification) needs no reading.
        for _ in 0..3 {
            drop(pool.send(request(&endpoint)).await.ok().unwrap());
        }
        assert_eq!(text(&pool, &endpoint).await, "");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_replaced() {
        // The server closes every connection after one answer.
        let (endpoint, accepted) = server(Some(0), 1).await;
        let pool = pool(&endpoint);
        assert_eq!(text(&pool, &endpoint).await, "1/1");
        // Whether the close was seen before the next request or not, the request is
        // answered on a new connection.
        assert_eq!(text(&pool, &endpoint).await, "2/1");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn idle_connections_are_kept_up_to_the_bound() {
        let (endpoint, accepted) = server(None, 100).await;
        let pool = pool(&endpoint);
        let mut leases = Vec::new();
        for _ in 0..MCP_LIMITS.max_idle + 3 {
            leases.push(pool.send(request(&endpoint)).await.ok().unwrap());
        }
        assert_eq!(accepted.load(Ordering::SeqCst), MCP_LIMITS.max_idle + 3);
        drop(leases);
        assert_eq!(lock(&pool.idle).len(), MCP_LIMITS.max_idle);
    }

    #[tokio::test]
    async fn connections_idle_past_the_timeout_are_swept_when_one_comes_back() {
        let (endpoint, accepted) = server(None, 100).await;
        let limits = Limits {
            idle_timeout: Duration::from_millis(50),
            max_idle: 64,
        };
        let pool = Pool::new(HttpConnector::new(), endpoint.clone(), limits);
        let first = pool.send(request(&endpoint)).await.ok().unwrap();
        let second = pool.send(request(&endpoint)).await.ok().unwrap();
        drop(first);
        drop(second);
        assert_eq!(lock(&pool.idle).len(), 2);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A third, fresh connection comes back: the two stale ones go.
        let third = pool.send(request(&endpoint)).await.ok().unwrap();
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            3,
            "stale ones are not reused"
        );
        drop(third);
        assert_eq!(lock(&pool.idle).len(), 1);
    }

    #[tokio::test]
    async fn an_unreachable_endpoint_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint: http::Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        drop(listener);
        let error = pool(&endpoint)
            .send(request(&endpoint))
            .await
            .err()
            .expect("nothing listens");
        assert!(error.is_connect, "{}", error.detail);
    }
}
