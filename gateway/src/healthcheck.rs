//! `toolgate healthcheck`: asks a running gateway's `GET /readyz` whether it is
//! ready, for a container's health check (the distroless image has no shell and no
//! curl). Direct (no proxy from the environment: the gateway is local) and bounded.

use std::time::Duration;

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

/// `Ok` when `url` answers 200 within `timeout`; otherwise one line saying why not
/// (the status and the gateway's own reason, or why it could not be reached).
pub async fn check(url: &str, timeout: Duration) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let response = client.get(url).send().await.map_err(|error| {
        if error.is_timeout() {
            format!(
                "{url}: no answer within {}",
                humantime::format_duration(timeout)
            )
        } else {
            format!("{url}: cannot connect: {}", innermost(&error))
        }
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    // `/readyz` says why in `reason`; anything else is shown as its first line.
    let body = response.text().await.unwrap_or_default();
    let reason = serde_json::from_str::<serde_json::Value>(&body)
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
    Err(format!("{url}: not ready ({status}): {reason}"))
}

/// The deepest cause of `error` ("Connection refused (os error 111)"), which is what
/// a person needs; reqwest's own message only says the request failed.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    for _ in 0..16 {
        match cause.source() {
            Some(next) => cause = next,
            None => break,
        }
    }
    cause.to_string()
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
