//! `toolgate healthcheck`: asks a running gateway's `GET /readyz` whether it is
//! ready, for a container's health check (the distroless image has no shell and no
//! curl). One plain HTTP/1.1 request over TCP, bounded in time and size: no proxy from
//! the environment (the gateway is local) and no TLS stack, whose set-up needs the
//! system's CA certificates — which a minimal image may not have.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most of the answer read: the status line and `/readyz`'s small JSON body.
const MAX_ANSWER: u64 = 64 * 1024;

/// The `/readyz` URL of a gateway listening on `listen` (`host:port`), reached from
/// the same machine: an unspecified address (`0.0.0.0`, `[::]`) is reached at the
/// matching loopback address.
pub fn readyz_url(listen: &str) -> String {
    let authority = match crate::config::front_door::split_authority(listen) {
        Some(("0.0.0.0", Some(port))) => format!("127.0.0.1:{port}"),
        Some(("::", Some(port))) => format!("[::1]:{port}"),
        _ => listen.trim().to_owned(),
    };
    format!("http://{authority}/readyz")
}

/// `Ok` when `url` (`http://host:port/path`) answers 200 within `timeout`; otherwise
/// one line saying why not (the status and the gateway's own reason, or why it could
/// not be reached).
pub async fn check(url: &str, timeout: Duration) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url}: not a URL: {e}"))?;
    if parsed.scheme() != "http" {
        return Err(format!(
            "{url}: only http:// is asked (the gateway's own listener, from this machine)"
        ));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("{url}: no host"))?
        .to_owned();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let path = match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_owned(),
    };
    let answer = tokio::time::timeout(timeout, get(&host, port, &path))
        .await
        .map_err(|_| {
            format!(
                "{url}: no answer within {}",
                humantime::format_duration(timeout)
            )
        })?
        .map_err(|e| format!("{url}: {e}"))?;
    let (status, body) =
        parse_answer(&answer).ok_or_else(|| format!("{url}: not an HTTP answer"))?;
    if (200..300).contains(&status) {
        return Ok(());
    }
    // `/readyz` says why in `reason`; anything else is shown as its first line.
    let reason = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_owned))
        .unwrap_or_else(|| {
            body.lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect()
        });
    let status_text = http::StatusCode::from_u16(status)
        .map(|s| s.to_string())
        .unwrap_or_else(|_| status.to_string());
    Err(format!("{url}: not ready ({status_text}): {reason}"))
}

/// Sends `GET path` to `host:port` and reads the whole answer (the connection is
/// closed by the server after it: `Connection: close`).
async fn get(host: &str, port: u16, path: &str) -> Result<String, String> {
    // `Url` keeps an IPv6 host in brackets; connecting wants it bare.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let mut stream = tokio::net::TcpStream::connect((bare, port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: toolgate-healthcheck\r\n\
         Accept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .await
        .map_err(|e| format!("cannot read the answer: {e}"))?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// The status code and the body of an HTTP/1.1 answer (a chunked body would keep
/// its chunk sizes, harmless in a one-line reason; `/readyz` sends a length).
fn parse_answer(answer: &str) -> Option<(u16, &str)> {
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status_line = head.lines().next()?;
    let mut words = status_line.split_whitespace();
    if !words.next()?.starts_with("HTTP/") {
        return None;
    }
    let status = words.next()?.parse().ok()?;
    Some((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_addresses_are_reached_on_loopback() {
        assert_eq!(readyz_url("0.0.0.0:8080"), "http://127.0.0.1:8080/readyz");
        assert_eq!(readyz_url("[::]:9000"), "http://[::1]:9000/readyz");
        assert_eq!(readyz_url("127.0.0.1:8080"), "http://127.0.0.1:8080/readyz");
        assert_eq!(readyz_url("localhost:1"), "http://localhost:1/readyz");
    }

    #[test]
    fn an_answer_is_its_status_and_body() {
        let answer = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_answer(answer), Some((503, "{}")));
        assert_eq!(parse_answer("SSH-2.0-OpenSSH\r\n\r\n"), None);
        assert_eq!(parse_answer("HTTP/1.1 200 OK"), None, "no end of head");
    }

    #[tokio::test]
    async fn a_closed_port_is_one_line_naming_the_cause() {
        // Bound then dropped: nothing listens there now.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/readyz");
        let error = check(&url, Duration::from_secs(2)).await.unwrap_err();
        assert!(error.starts_with(&url), "{error}");
        assert!(error.contains("refused"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }
}
