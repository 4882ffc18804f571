//! The call client against loopback listeners: the guard in the connector (names and
//! IP literals), redirects (which hops, what each carries), and TLS trust. Every
//! connection a test could make goes to loopback (see the connector's test net).

use std::net::IpAddr;
use std::sync::Arc;

use http::header::AUTHORIZATION;
use tower_service::Service;

use super::*;
use crate::redirect::tests::{recorder, redirect_to};

const T: Duration = Duration::from_secs(5);
const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";

fn request(method: Method, url: &str) -> ApiRequest {
    ApiRequest {
        method,
        url: Url::parse(url).unwrap(),
        headers: HeaderMap::new(),
        body: Bytes::new(),
    }
}

/// Sends within 10 s; the status and body, or the error's text.
async fn send(client: &ApiClient, req: ApiRequest) -> Result<(StatusCode, String), String> {
    let sent = tokio::time::timeout(Duration::from_secs(10), client.send(req))
        .await
        .expect("answered in time");
    match sent {
        Ok(resp) => {
            let status = resp.status();
            let (body, _) = read_capped(resp, 1 << 20)
                .await
                .map_err(|e| format!("{e:?}"))?;
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        }
        Err(SendError::Failed(text) | SendError::Refused(text)) => Err(text),
        Err(SendError::Timeout) => Err("timeout".into()),
    }
}

fn client(connector: GuardedConnector, allow_private: bool) -> ApiClient {
    ApiClient::with_connector(connector, allow_private).expect("client")
}

/// A public-looking name that resolves to loopback is refused by the connector itself;
/// with the allowance it is connected to the vetted address (the system's resolver
/// knows no such name, so there is no second lookup to reach it).
#[tokio::test]
async fn names_resolving_to_private_addresses_are_refused() {
    let (port, seen) = recorder(|_| OK.to_owned()).await;
    let names = vec![("api.example.test".to_owned(), IpAddr::from([127, 0, 0, 1]))];
    let url = format!("http://api.example.test:{port}/things");
    let strict = client(
        GuardedConnector::with_fixed_names(false, T, names.clone()),
        false,
    );
    let err = send(&strict, request(Method::GET, &url))
        .await
        .expect_err("refused");
    assert!(err.contains("resolves only to private"), "{err}");
    assert!(seen.lock().unwrap().is_empty(), "the listener was reached");

    let open = client(GuardedConnector::with_fixed_names(true, T, names), true);
    let (status, body) = send(&open, request(Method::GET, &url)).await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "{heads:?}");
    let head = heads[0].to_ascii_lowercase();
    assert!(head.starts_with("get /things http/1.1"), "{head}");
    assert!(
        head.contains(&format!("host: api.example.test:{port}")),
        "{head}"
    );
}

/// The connector judges whatever it is asked to connect to, even without the URL check
/// in front: IP literals (every IPv6 form of loopback included) and names through the
/// system's resolver.
#[tokio::test]
async fn the_connector_refuses_forbidden_hosts_on_its_own() {
    let (port, seen) = recorder(|_| OK.to_owned()).await;
    let mut strict = GuardedConnector::new(false, T);
    for host in [
        "127.0.0.1",
        "localhost",
        "[::ffff:127.0.0.1]",
        "[::127.0.0.1]",
        "[::1]",
    ] {
        let uri: Uri = format!("http://{host}:{port}/").parse().unwrap();
        let err = match strict.call(uri).await {
            Ok(_) => panic!("{host} must be refused"),
            Err(e) => crate::error::error_chain(&*e),
        };
        assert!(err.contains("private"), "{host}: {err}");
    }
    assert!(seen.lock().unwrap().is_empty(), "the listener was reached");
    let mut open = GuardedConnector::new(true, T);
    let uri: Uri = format!("http://127.0.0.1:{port}/").parse().unwrap();
    assert!(open.call(uri).await.is_ok());
}

/// A call's redirect to an internal address is refused before any connection to it,
/// whatever the form. The first hop is on loopback, so the connector here allows
/// private networks and only the hop rule is judged.
#[tokio::test]
async fn redirects_to_internal_addresses_are_refused() {
    let (canary, canary_seen) = recorder(|_| OK.to_owned()).await;
    let hop_rule_only = client(GuardedConnector::new(true, T), false);
    for target in [
        format!("http://127.0.0.1:{canary}/x"),
        format!("http://[::ffff:127.0.0.1]:{canary}/x"),
        format!("http://[::127.0.0.1]:{canary}/x"),
        format!("http://localhost:{canary}/x"),
        format!("http://2130706433:{canary}/x"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ] {
        let location = target.clone();
        let (redirector, _) = recorder(move |_| redirect_to(&location)).await;
        let err = send(
            &hop_rule_only,
            request(Method::GET, &format!("http://127.0.0.1:{redirector}/start")),
        )
        .await
        .expect_err(&target);
        assert!(
            err.starts_with("error following redirect: "),
            "{target}: {err}"
        );
    }
    assert!(
        canary_seen.lock().unwrap().is_empty(),
        "the canary was reached"
    );
}

fn answer(status: &str, location: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

/// Within the origin, redirects are followed (with the allowance) as reqwest followed
/// them: the credentials stay, 303 turns a POST into a GET without its body, 307 keeps
/// both, `Referer` names the previous URL, and the sixth redirect is refused.
#[tokio::test]
async fn redirects_within_the_origin_are_followed_as_before() {
    let (api, seen) = recorder(|path| match path {
        "/see-other" => answer("303 See Other", "/final"),
        "/temporary" => answer("307 Temporary Redirect", "/final?from=307#frag"),
        p if p.starts_with("/loop/") => {
            let n: u32 = p["/loop/".len()..].parse().unwrap();
            answer("302 Found", &format!("/loop/{}", n + 1))
        }
        _ => OK.to_owned(),
    })
    .await;
    let open = client(GuardedConnector::new(true, T), true);
    let post = |path: &str| {
        let mut req = request(Method::POST, &format!("http://127.0.0.1:{api}{path}"));
        req.headers.insert(
            AUTHORIZATION,
            HeaderValue::from_static("Bearer canary-token"),
        );
        req.headers
            .insert("x-api-key", HeaderValue::from_static("canary-key"));
        req.headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        req.body = Bytes::from_static(b"{\"a\":1}");
        req
    };
    let last = || seen.lock().unwrap().last().unwrap().to_ascii_lowercase();

    let (status, _) = send(&open, post("/see-other")).await.unwrap();
    assert_eq!(status, StatusCode::OK);
    let head = last();
    assert!(head.starts_with("get /final http/1.1"), "{head}");
    assert!(
        head.contains("authorization: bearer canary-token"),
        "{head}"
    );
    assert!(head.contains("x-api-key: canary-key"), "{head}");
    assert!(head.contains(&format!("referer: http://127.0.0.1:{api}/see-other")));
    assert!(
        !head.contains("content-type") && !head.contains("{\"a\":1}"),
        "{head}"
    );

    let (status, _) = send(&open, post("/temporary")).await.unwrap();
    assert_eq!(status, StatusCode::OK);
    let head = last();
    assert!(head.starts_with("post /final?from=307 http/1.1"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(
        head.contains("authorization: bearer canary-token"),
        "{head}"
    );

    let before = seen.lock().unwrap().len();
    let err = send(
        &open,
        request(Method::GET, &format!("http://127.0.0.1:{api}/loop/0")),
    )
    .await
    .expect_err("too many redirects");
    assert!(err.contains("more than 5 redirects"), "{err}");
    // the first request and five redirects, not a sixth
    assert_eq!(seen.lock().unwrap().len() - before, 6);
}

/// A redirect to another origin is not followed at all: the call's Authorization and
/// API key never reach it.
#[tokio::test]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    let (canary, canary_seen) = recorder(|_| OK.to_owned()).await;
    let (api, _) =
        recorder(move |path| redirect_to(&format!("http://127.0.0.1:{canary}{path}"))).await;
    let open = client(GuardedConnector::new(true, T), true);
    let mut req = request(Method::GET, &format!("http://127.0.0.1:{api}/stolen"));
    req.headers.insert(
        AUTHORIZATION,
        HeaderValue::from_static("Bearer canary-token"),
    );
    req.headers
        .insert("x-api-key", HeaderValue::from_static("canary-key"));
    let err = send(&open, req).await.expect_err("refused");
    assert!(err.contains("another origin"), "{err}");
    assert!(
        canary_seen.lock().unwrap().is_empty(),
        "the other origin was contacted"
    );
}

/// Credentials in a URL go as Basic auth, never in the request line or `Host`; an
/// `Accept` is sent when the request has none.
#[tokio::test]
async fn url_credentials_become_basic_auth_and_accept_is_defaulted() {
    let (api, seen) = recorder(|_| OK.to_owned()).await;
    let open = client(GuardedConnector::new(true, T), true);
    let mut req = request(
        Method::GET,
        &format!("http://user:pa%20ss@127.0.0.1:{api}/x"),
    );
    let basic = take_credentials(&mut req.url).expect("credentials");
    assert_eq!(req.url.as_str(), format!("http://127.0.0.1:{api}/x"));
    req.headers.insert(AUTHORIZATION, basic);
    send(&open, req).await.unwrap();
    let head = seen.lock().unwrap()[0].to_ascii_lowercase();
    // base64("user:pa ss")
    assert!(
        head.contains("authorization: basic dxnlcjpwysbzcw=="),
        "{head}"
    );
    assert!(head.contains("accept: */*"), "{head}");
    assert!(!head.contains("user:"), "{head}");
    let mut plain = Url::parse("http://127.0.0.1/x").unwrap();
    assert!(take_credentials(&mut plain).is_none());
}

/// A self-signed test certificate for `localhost` and 127.0.0.1 (P-256, valid for a
/// century): no verifier that trusts only real roots accepts it.
const SELF_SIGNED_CERT: &str = "
MIIBmzCCAUGgAwIBAgIUWYBOelPL+2s7W65+mBXoAtErKvswCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNzEzNTg0OFoYDzIxMjYxMTAz
MTM1ODQ4WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQ4YbQtI16YWpnvCXh5tDWMLz5TeHRiSlyUqfjZRSGsR+Rt14FQyHuV
qGKwONa71TjIECul58UKQ4LRUr7+SiZSo28wbTAdBgNVHQ4EFgQU7sug8Wjz9WXz
kaUeNVYqaQfjVzswHwYDVR0jBBgwFoAU7sug8Wjz9WXzkaUeNVYqaQfjVzswDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwCgYIKoZI
zj0EAwIDSAAwRQIhAMW9jxWaO6pdgXodOnnkJ//5AJXnd+J0BZ5Lc+7NpH4pAiBI
/trimRoyksSDzO+xQrgPWqhuvLX5CNDdmBkLOEzlbg==";
/// Its PKCS#8 key.
const SELF_SIGNED_KEY: &str = "
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6QH9FS2Z3mGgclrj
DeucdZ3CE9Lj3Nz+AGSKpwvK/VWhRANCAAQ4YbQtI16YWpnvCXh5tDWMLz5TeHRi
SlyUqfjZRSGsR+Rt14FQyHuVqGKwONa71TjIECul58UKQ4LRUr7+SiZS";

fn der(base64_lines: &str) -> Vec<u8> {
    use base64::Engine;
    let text: String = base64_lines.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

/// An https API whose certificate no trusted root signed is refused during the
/// handshake: the request is never sent.
#[tokio::test]
async fn https_with_an_untrusted_certificate_is_refused() {
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
    use tokio::io::AsyncReadExt;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(der(SELF_SIGNED_CERT))],
            PrivatePkcs8KeyDer::from(der(SELF_SIGNED_KEY)).into(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = requests.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (acceptor, log) = (acceptor.clone(), log.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                if let Ok(Ok(n)) = tokio::time::timeout(T, tls.read(&mut buf)).await {
                    log.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
            });
        }
    });
    let open = client(GuardedConnector::new(true, T), true);
    for host in ["127.0.0.1", "localhost"] {
        let err = send(
            &open,
            request(Method::GET, &format!("https://{host}:{port}/x")),
        )
        .await
        .expect_err(host);
        assert!(
            err.starts_with("error sending request: ") && err.contains("certificate"),
            "{host}: {err}"
        );
    }
    assert!(requests.lock().unwrap().is_empty(), "a request was sent");
}

/// Calls to a plain-HTTP API share one kept-alive connection (the origin's pool), each
/// answer read to its end before the next call.
#[tokio::test]
async fn plain_http_calls_reuse_a_kept_alive_connection() {
    use std::sync::atomic::Ordering;
    // Answers "<connection>/<request on it>".
    let (endpoint, accepted) = crate::mcp::http1_pool::tests::server(Some(0), 10).await;
    let api = client(GuardedConnector::new(true, T), true);
    let url = format!("{endpoint}").replace("/mcp", "/items/1");
    for n in 1..=3 {
        let (status, body) = send(&api, request(Method::GET, &url)).await.unwrap();
        assert_eq!((status, body), (StatusCode::OK, format!("1/{n}")));
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}
