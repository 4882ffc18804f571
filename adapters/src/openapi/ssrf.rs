//! The SSRF guard: a spec and its servers are untrusted input, so neither fetching a
//! spec nor calling an API may reach loopback, private, link-local or otherwise
//! internal addresses unless the upstream sets `allow_private_networks: true`.
//!
//! The check runs on resolved IP addresses (a DNS resolver plugged into reqwest drops
//! forbidden ones, so a public name pointing at 10.0.0.1 is refused too) and on IP
//! literals in URLs (which reqwest never resolves), including every redirect hop.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether `ip` is an address an untrusted URL must not reach.
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden_v4(v4);
            }
            let seg = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg[0] & 0xfe00) == 0xfc00 // unique local
                || (seg[0] & 0xffc0) == 0xfe80 // link-local
                || (seg[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (seg[0] == 0x64 && seg[1] == 0xff9b) // NAT64 onto v4
                || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        }
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0 // "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // carrier-grade NAT
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking
        || o[0] >= 240 // reserved
}

/// Refuses a URL whose scheme is not http(s) or whose host is a forbidden IP literal.
/// Names are checked later, when they resolve.
pub fn check_url(url: &url::Url, allow_private: bool) -> Result<(), String> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(format!(
                "scheme '{other}' is not allowed (only http and https)"
            ));
        }
    }
    if allow_private {
        return Ok(());
    }
    let ip = match url.host() {
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
        Some(url::Host::Domain(d)) => {
            if d.eq_ignore_ascii_case("localhost") || d.ends_with(".localhost") {
                return Err(format!(
                    "'{d}' is a loopback name; set allow_private_networks: true to allow it"
                ));
            }
            return Ok(());
        }
        None => return Err("the URL has no host".into()),
    };
    if is_forbidden(ip) {
        return Err(format!(
            "{ip} is a private, loopback or link-local address; set \
             allow_private_networks: true to allow it"
        ));
    }
    Ok(())
}

/// A resolver that drops forbidden addresses and fails when none is left.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    allow_private: bool,
    timeout: Duration,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let timeout = self.timeout;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let lookup = tokio::net::lookup_host((host.as_str(), 0));
            let addrs: Vec<SocketAddr> = tokio::time::timeout(timeout, lookup)
                .await
                .map_err(|_| format!("resolving '{host}' timed out"))??
                .collect();
            let total = addrs.len();
            let allowed: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| allow_private || !is_forbidden(a.ip()))
                .collect();
            if allowed.is_empty() {
                let msg = if total == 0 {
                    format!("'{host}' did not resolve to any address")
                } else {
                    format!(
                        "'{host}' resolves only to private, loopback or link-local \
                         addresses; set allow_private_networks: true to allow it"
                    )
                };
                return Err(msg.into());
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 5;

/// A reqwest client with the guard in place: resolver, redirect check, no proxies
/// (a proxy would resolve names where the guard cannot see them) and timeouts.
pub fn guarded_client(allow_private: bool, timeout: Duration) -> reqwest::Result<reqwest::Client> {
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        match check_url(attempt.url(), allow_private) {
            Ok(()) => attempt.follow(),
            Err(e) => attempt.error(format!("redirect refused: {e}")),
        }
    });
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver {
            allow_private,
            timeout,
        }))
        .redirect(policy)
        .no_proxy()
        .connect_timeout(timeout)
        .timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(60))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ranges_are_forbidden() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_forbidden(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1", "8.8.8.8"] {
            assert!(!is_forbidden(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn literal_urls_are_checked() {
        let u = url::Url::parse("http://169.254.169.254/latest").unwrap();
        assert!(check_url(&u, false).is_err());
        assert!(check_url(&u, true).is_ok());
        let u = url::Url::parse("file:///etc/passwd").unwrap();
        assert!(check_url(&u, true).is_err());
        let u = url::Url::parse("http://[::1]:8080/").unwrap();
        assert!(check_url(&u, false).is_err());
    }

    #[tokio::test]
    async fn names_are_checked_on_their_resolved_addresses() {
        use std::str::FromStr;
        let guarded = GuardedResolver {
            allow_private: false,
            timeout: Duration::from_secs(5),
        };
        let err = match guarded.resolve(Name::from_str("localhost").unwrap()).await {
            Ok(_) => panic!("localhost must be refused"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("private"), "{err}");
        let open = GuardedResolver {
            allow_private: true,
            timeout: Duration::from_secs(5),
        };
        let addrs: Vec<SocketAddr> = open
            .resolve(Name::from_str("localhost").unwrap())
            .await
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()));
    }
}
