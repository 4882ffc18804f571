//! TLS to Redis: a `redis-server` with only a TLS port, its certificate signed by a
//! CA made in the test (with the `openssl` CLI). Two gateways on `rediss://` with
//! `state.tls_ca_file` share sessions; one without the CA does not trust the server
//! and says so. Skipped with a notice when `redis-server` or `openssl` is missing,
//! except under `CI=true`, where that fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_e2e::redis::unique_prefix;
use toolgate_e2e::{Gateway, Proc, TempDir, free_port, rest_get, rest_post, wait_for};

fn skip(what: &str) {
    let message = format!("{what} is missing; skipping the Redis TLS test");
    if std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1") {
        panic!("CI=true: {message}");
    }
    eprintln!("NOTICE: {message}");
}

fn find(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(bin))
        .find(|p| p.is_file())
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`) and a server certificate for 127.0.0.1 it signed (`server.pem`,
/// `server.key`), valid for two days.
fn certificates(dir: &Path) {
    let subject_ca = "/CN=toolgate e2e CA";
    openssl(
        dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", subject_ca,
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("write extensions");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
}

fn config(port: u16, prefix: &str, ca: Option<&Path>) -> Value {
    let mut state = json!({
        "backend": "redis",
        "url": format!("rediss://127.0.0.1:{port}"),
        "key_prefix": prefix,
        "connect_timeout": "2s",
    });
    if let Some(ca) = ca {
        state["tls_ca_file"] = json!(ca);
    }
    json!({"upstreams": {}, "state": state})
}

#[tokio::test]
async fn sessions_are_shared_over_tls_and_an_untrusted_server_is_refused() {
    let Some(redis_server) = find("redis-server") else {
        return skip("redis-server");
    };
    if find("openssl").is_none() {
        return skip("the openssl CLI");
    }
    let dir = TempDir::new("redis-tls");
    certificates(dir.path());
    let port = free_port();
    let mut cmd = Command::new(redis_server);
    cmd.current_dir(dir.path()).args([
        "--port",
        "0",
        "--tls-port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--tls-cert-file",
        "server.pem",
        "--tls-key-file",
        "server.key",
        "--tls-ca-cert-file",
        "ca.pem",
        "--tls-auth-clients",
        "no",
        "--save",
        "",
        "--appendonly",
        "no",
    ]);
    let _redis = Proc::spawn("redis-server-tls", &mut cmd);
    wait_for(
        "redis-server's TLS port",
        Duration::from_secs(15),
        || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(drop)
        },
    )
    .await;

    // Two replicas trusting the test CA: a session made on one is served by the other.
    let prefix = unique_prefix("tls");
    let ca = dir.path().join("ca.pem");
    let a = Gateway::start(config(port, &prefix, Some(&ca))).await;
    let b = Gateway::start(config(port, &prefix, Some(&ca))).await;
    let (status, body) = rest_post(&a, "/v1/sessions", None, json!({})).await;
    assert_eq!(status, 201, "{body}");
    let id = body["session_id"].as_str().expect("a session id");
    let (status, body) = rest_get(&b, &format!("/v1/sessions/{id}/tools"), None).await;
    assert_eq!(status, 200, "the session is shared over TLS: {body}");

    // Without the CA the server's certificate is not trusted: not ready, and a
    // session request gets 503 saying why.
    let untrusting = Gateway::spawn(config(port, &prefix, None));
    let reason = wait_for(
        "readiness failing on the certificate",
        Duration::from_secs(30),
        || async {
            let (status, body) = rest_get(&untrusting, "/readyz", None).await;
            (status == 503).then(|| body["reason"].as_str().unwrap_or_default().to_owned())
        },
    )
    .await;
    assert!(
        reason.contains("certificate") && reason.contains("tls_ca_file"),
        "{reason}"
    );
    let (status, body) = rest_post(&untrusting, "/v1/sessions", None, json!({})).await;
    assert_eq!(status, 503, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.to_lowercase().contains("certificate"), "{message}");
}
