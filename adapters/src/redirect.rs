//! The one redirect policy for every HTTP client that carries configured headers or
//! credentials (OpenAPI calls and token requests, MCP HTTP upstreams).
//!
//! reqwest strips only `Authorization`, `Cookie` and `Proxy-Authorization` when a
//! redirect leaves the host; an API key in `X-Api-Key` or any header an operator
//! configured would follow the redirect to whoever the server names. So a redirect is
//! followed only within the origin (scheme, host, port) of the request the headers were
//! put on; one to another origin fails with an error that says why. Every hop also
//! passes `check`, the caller's own URL rule (the SSRF guard for OpenAPI upstreams).
//!
//! [`judge`] is the rule itself; [`policy`] hands it to reqwest, and the OpenAPI call
//! client (`openapi/client.rs`), which follows redirects itself, asks it on every hop.

use reqwest::redirect::{Attempt, Policy};
use url::Url;

/// Whether a redirect to `next` may be followed, `previous` being every URL requested
/// so far in this chain (the first request's included): at most `max` redirects, each
/// within the first request's origin unless `cross_origin` (for requests that carry
/// nothing of the operator's), and each passing `check`. The error says why not.
pub fn judge(
    max: usize,
    cross_origin: bool,
    previous: &[Url],
    next: &Url,
    check: impl Fn(&Url) -> Result<(), String>,
) -> Result<(), String> {
    if previous.len() > max {
        return Err(format!("more than {max} redirects"));
    }
    if !cross_origin
        && let Some(first) = previous.first()
        && first.origin() != next.origin()
    {
        let to = next.origin().ascii_serialization();
        return Err(format!(
            "redirect to another origin ({to}) not followed: the upstream's configured \
             headers and credentials are only sent to its own origin"
        ));
    }
    check(next).map_err(|e| format!("redirect refused: {e}"))
}

/// [`judge`] as a reqwest redirect policy.
pub fn policy<F>(max: usize, cross_origin: bool, check: F) -> Policy
where
    F: Fn(&Url) -> Result<(), String> + Send + Sync + 'static,
{
    Policy::custom(move |attempt: Attempt| {
        match judge(max, cross_origin, attempt.previous(), attempt.url(), &check) {
            Ok(()) => attempt.follow(),
            Err(e) => attempt.error(e),
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback listener answering every request with `reply(path)`, recording each
    /// request's head. Serves for as long as the test runs.
    pub(crate) async fn recorder(
        reply: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> (u16, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (log, reply) = (seen.clone(), Arc::new(reply));
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (log, reply) = (log.clone(), reply.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let read = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf));
                    let Ok(Ok(n)) = read.await else { return };
                    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                    log.lock().unwrap().push(head);
                    let _ = sock.write_all(reply(&path).as_bytes()).await;
                });
            }
        });
        (port, seen)
    }

    pub(crate) fn redirect_to(location: &str) -> String {
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
    }

    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";

    #[tokio::test]
    async fn configured_headers_never_follow_a_redirect_to_another_origin() {
        let (canary, canary_seen) = recorder(|_| OK.to_owned()).await;
        let (api, api_seen) = recorder(move |path| {
            if path == "/same" {
                redirect_to("/final")
            } else if path == "/final" {
                OK.to_owned()
            } else {
                redirect_to(&format!("http://127.0.0.1:{canary}/stolen"))
            }
        })
        .await;
        let client = reqwest::Client::builder()
            .redirect(policy(5, false, |_| Ok(())))
            .no_proxy()
            .build()
            .unwrap();
        let send = |path: &str| {
            client
                .get(format!("http://127.0.0.1:{api}{path}"))
                .header("x-api-key", "canary-secret")
                .timeout(Duration::from_secs(10))
                .send()
        };
        let err = send("/cross").await.expect_err("cross-origin redirect");
        let text = format!("{:?}", err);
        assert!(text.contains("another origin"), "{text}");
        assert!(
            canary_seen.lock().unwrap().is_empty(),
            "the canary was reached"
        );
        // within the origin, the redirect is followed with the header
        let resp = send("/same").await.expect("same-origin redirect");
        assert_eq!(resp.status(), 200);
        let heads = api_seen.lock().unwrap().clone();
        let last = heads.last().expect("requests");
        assert!(last.starts_with("GET /final"), "{last}");
        assert!(
            last.to_ascii_lowercase()
                .contains("x-api-key: canary-secret")
        );
        assert!(canary_seen.lock().unwrap().is_empty());
    }
}
