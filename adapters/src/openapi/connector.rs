//! How the API call client ([`super::client`]) connects: the SSRF guard where the
//! connection is made, and TLS as reqwest set it up before.
//!
//! [`GuardedConnector`] refuses a host that is a forbidden IP literal, and resolves
//! names through [`ssrf::resolve`], handing hyper's TCP connector only the addresses
//! that passed: there is no second lookup between the check and the connect, so a name
//! that answers differently the second time (DNS rebinding) gains nothing. The request
//! URL and each redirect hop are checked before they get here too
//! ([`ssrf::check_url`]); the connector is the rule that holds whatever asks it.
//!
//! [`tls_config`] is what reqwest's default client used: rustls with the process's
//! crypto provider (aws-lc-rs unless one was installed), the platform's certificate
//! verifier, TLS 1.2 and 1.3, and ALPN offering h2 then http/1.1.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

use super::ssrf::{self, BoxError};

/// Resolves names for [`GuardedConnector`]: only vetted addresses come out.
#[derive(Clone)]
pub(super) struct VettedResolver {
    allow_private: bool,
    timeout: Duration,
    /// Fixed answers in place of the system's resolver, so tests can make a name
    /// resolve to what they need without touching the machine's DNS.
    #[cfg(test)]
    fixed: Option<Arc<Vec<(String, IpAddr)>>>,
}

impl Service<Name> for VettedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let (allow_private, timeout) = (self.allow_private, self.timeout);
        #[cfg(test)]
        if let Some(fixed) = self.fixed.clone() {
            return Box::pin(async move {
                let host = name.as_str();
                let addrs = fixed
                    .iter()
                    .filter(|(n, _)| n == host)
                    .map(|(_, ip)| SocketAddr::new(*ip, 0))
                    .collect();
                let addrs = ssrf::vet(host, addrs, allow_private)?;
                loopback_only(addrs.iter().map(SocketAddr::ip))?;
                Ok(addrs.into_iter())
            });
        }
        Box::pin(async move {
            let addrs = ssrf::resolve(name.as_str(), allow_private, timeout).await?;
            #[cfg(test)]
            loopback_only(addrs.iter().map(SocketAddr::ip))?;
            Ok(addrs.into_iter())
        })
    }
}

/// hyper's TCP connector behind the SSRF guard (see the module docs).
#[derive(Clone)]
pub(super) struct GuardedConnector {
    http: HttpConnector<VettedResolver>,
    allow_private: bool,
}

impl GuardedConnector {
    /// TCP settings as reqwest's defaults had them, `timeout` bounding resolution and
    /// connecting.
    pub(super) fn new(allow_private: bool, timeout: Duration) -> GuardedConnector {
        GuardedConnector::with_resolver(VettedResolver {
            allow_private,
            timeout,
            #[cfg(test)]
            fixed: None,
        })
    }

    /// This connector with names resolving to the `fixed` (name, address) pairs only.
    #[cfg(test)]
    pub(super) fn with_fixed_names(
        allow_private: bool,
        timeout: Duration,
        fixed: Vec<(String, IpAddr)>,
    ) -> GuardedConnector {
        GuardedConnector::with_resolver(VettedResolver {
            allow_private,
            timeout,
            fixed: Some(Arc::new(fixed)),
        })
    }

    fn with_resolver(resolver: VettedResolver) -> GuardedConnector {
        let (allow_private, timeout) = (resolver.allow_private, resolver.timeout);
        let mut http = HttpConnector::new_with_resolver(resolver);
        // https too: TLS wraps this connector (hyper-rustls).
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout));
        http.set_nodelay(true);
        http.set_keepalive(Some(Duration::from_secs(15)));
        http.set_keepalive_interval(Some(Duration::from_secs(15)));
        http.set_keepalive_retries(Some(3));
        http.set_tcp_user_timeout(Some(Duration::from_secs(30)));
        GuardedConnector {
            http,
            allow_private,
        }
    }
}

impl Service<Uri> for GuardedConnector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        // hyper's connector connects to an IP literal without asking the resolver:
        // judge it here.
        let literal = dst
            .host()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
            .and_then(|h| h.parse::<IpAddr>().ok());
        if let Some(ip) = literal
            && let Err(refused) = ssrf::check_ip(ip, self.allow_private)
        {
            return Box::pin(async move { Err(refused.into()) });
        }
        #[cfg(test)]
        if let Err(e) = loopback_only(literal) {
            return Box::pin(async move { Err(e) });
        }
        let connecting = self.http.call(dst);
        Box::pin(async move { connecting.await.map_err(Into::into) })
    }
}

/// The unit tests' safety net: whatever the guard lets through, a test connects to
/// loopback addresses only (a regression must fail a test, not reach the network).
#[cfg(test)]
fn loopback_only(ips: impl IntoIterator<Item = IpAddr>) -> Result<(), BoxError> {
    match ips.into_iter().find(|ip| !ip.to_canonical().is_loopback()) {
        Some(ip) => Err(format!("test connector: {ip} is off this machine").into()),
        None => Ok(()),
    }
}

/// The TLS settings of every API call client, built once per process: one verifier,
/// its roots loaded once, and TLS sessions resumed across upstreams.
pub(super) fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = rustls::crypto::CryptoProvider::get_default()
                .cloned()
                .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
            let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
                .map_err(|e| format!("cannot set up TLS certificate verification: {e}"))?;
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(rustls::ALL_VERSIONS)
                .map_err(|e| format!("cannot set up TLS: {e}"))?
                .dangerous()
                // The platform's verifier, as reqwest uses: not a weaker one.
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Ok(Arc::new(config))
        })
        .clone()
}
