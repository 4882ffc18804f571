//! A recording mock HTTP API: an axum server on 127.0.0.1 (a free port) that records
//! every request it receives (method, path, query, headers, body bytes) before a
//! test-supplied function answers it, so tests can assert exactly what reached the API.

use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use axum::response::Response;

/// One request as the API received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first value of header `name`, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The value of header `name`; panics when the request carried it more than once.
    pub fn single_header(&self, name: &str) -> Option<String> {
        let all: Vec<String> = self
            .headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        assert!(
            all.len() <= 1,
            "header {name} sent {} times: {all:?}",
            all.len()
        );
        all.into_iter().next()
    }

    /// Asserts the request's method and path.
    #[track_caller]
    pub fn expect(&self, method: &str, path: &str) -> &Recorded {
        assert_eq!(
            (self.method.as_str(), self.path.as_str()),
            (method, path),
            "{self:#?}"
        );
        self
    }

    /// Asserts the request's method, path and query string.
    #[track_caller]
    pub fn expect_query(&self, method: &str, path: &str, query: Option<&str>) -> &Recorded {
        assert_eq!(
            (
                self.method.as_str(),
                self.path.as_str(),
                self.query.as_deref()
            ),
            (method, path, query),
            "{self:#?}"
        );
        self
    }
}

type Log = Arc<Mutex<Vec<Recorded>>>;

/// The API: its port and what it has received. The server stops on drop.
pub struct MockApi {
    pub port: u16,
    log: Log,
    task: tokio::task::JoinHandle<()>,
}

impl MockApi {
    /// Serves every request with `respond` (after recording it).
    pub async fn start<F, Fut>(respond: F) -> MockApi
    where
        F: Fn(Recorded) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response> + Send + 'static,
    {
        Self::start_with_routes(axum::Router::new(), respond).await
    }

    /// [`MockApi::start`] with some routes of its own (answered without recording,
    /// e.g. a spec to import); every other request is recorded and answered by
    /// `respond`.
    pub async fn start_with_routes<F, Fut>(routes: axum::Router, respond: F) -> MockApi
    where
        F: Fn(Recorded) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the mock API on 127.0.0.1");
        let port = listener.local_addr().expect("mock API address").port();
        let log: Log = Arc::default();
        let recorder = log.clone();
        let app = routes.fallback(move |req: axum::extract::Request| {
            let (log, respond) = (recorder.clone(), respond.clone());
            async move {
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, 4 * 1024 * 1024)
                    .await
                    .map(|b| b.to_vec())
                    .unwrap_or_default();
                let seen = Recorded {
                    method: parts.method.as_str().to_string(),
                    path: parts.uri.path().to_string(),
                    query: parts.uri.query().map(String::from),
                    headers: parts.headers,
                    body,
                };
                log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(seen.clone());
                respond(seen).await
            }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        MockApi { port, log, task }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many requests have been received.
    pub fn count(&self) -> usize {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The requests received since `before` requests had been seen.
    pub fn since(&self, before: usize) -> Vec<Recorded> {
        let mut all = self.requests();
        all.split_off(before.min(all.len()))
    }

    /// The one request received since `before`; panics (listing them) otherwise.
    #[track_caller]
    pub fn one_since(&self, before: usize) -> Recorded {
        let seen = self.since(before);
        assert_eq!(seen.len(), 1, "one API request expected: {seen:#?}");
        seen.into_iter().next().expect("one request")
    }

    /// The last request received; panics when there is none.
    #[track_caller]
    pub fn last(&self) -> Recorded {
        self.requests()
            .last()
            .cloned()
            .expect("a request was recorded")
    }
}

impl Drop for MockApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}
