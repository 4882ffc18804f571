//! The SSRF guard: a spec and its servers are untrusted input, so neither fetching a
//! spec nor calling an API may reach loopback, private, link-local or otherwise
//! internal addresses unless the upstream sets `allow_private_networks: true`.
//!
//! Every URL fetched because a spec (or a registration) says so — the spec, its `$ref`
//! documents, the API's `servers`, OAuth2 `tokenUrl`s and every redirect of each — goes
//! through `super::guard::Guard`, the only way the adapter gets an HTTP client (and the
//! way the OAuth client, `crate::oauth`, fetches what servers name). The check runs
//! on IP literals in the URL ([`check_url`]; no client resolves them) and on resolved
//! addresses ([`resolve`]: a public name pointing at 10.0.0.1 is refused too, and only
//! the addresses it returns are connected to); both ask [`is_forbidden`]. IPv6
//! addresses that carry an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) are
//! judged by that IPv4.
//!
//! Two clients apply it: API calls go through [`super::client::ApiClient`] (hyper, the
//! guard in its connector and on every redirect hop, see [`super::connector`]);
//! specs, `$ref` documents, token requests and health checks through reqwest, with
//! [`resolve`] as its DNS resolver and [`crate::redirect`] as its redirect policy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// An error as resolvers and connectors pass them on.
pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Whether `ip` is an address an untrusted URL must not reach.
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v6(v6: Ipv6Addr) -> bool {
    let seg = v6.segments();
    if v6.is_loopback() || v6.is_unspecified() || v6.is_multicast() {
        return true;
    }
    if let Some(v4) = embedded_v4(v6) {
        return v4.iter().any(|v4| forbidden_v4(*v4));
    }
    (seg[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (seg[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (seg[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
        || (seg[0] == 0x64 && seg[1] == 0xff9b && seg[2] == 1) // local-use NAT64 64:ff9b:1::/48
        || (seg[0] == 0x100 && seg[1..4] == [0, 0, 0]) // discard-only 100::/64
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation 2001:db8::/32
        || (seg[0] & 0xfff0) == 0x3ff0 // documentation 3fff::/20
        || (seg[0] == 0x2001 && seg[1] == 0x0002 && seg[2] == 0) // benchmarking 2001:2::/48
        || (seg[0] == 0x2001 && (seg[1] & 0xfff0) == 0x0010) // ORCHID 2001:10::/28
}

/// The IPv4 addresses an IPv6 address carries and routes to: mapped `::ffff:a.b.c.d`,
/// compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`, and
/// Teredo `2001:0:SSSS:SSSS:…:CCCC:CCCC` (server, and client XORed with 0xffffffff).
fn embedded_v4(v6: Ipv6Addr) -> Option<Vec<Ipv4Addr>> {
    let seg = v6.segments();
    let o = v6.octets();
    let last = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(vec![v4]);
    }
    if seg[..6] == [0; 6] {
        return Some(vec![last]); // IPv4-compatible (deprecated, still routed by some stacks)
    }
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(vec![last]); // NAT64 well-known prefix 64:ff9b::/96
    }
    if seg[0] == 0x2002 {
        return Some(vec![Ipv4Addr::new(o[2], o[3], o[4], o[5])]); // 6to4
    }
    if seg[0] == 0x2001 && seg[1] == 0 {
        let server = Ipv4Addr::new(o[4], o[5], o[6], o[7]);
        let client = Ipv4Addr::from(!u32::from(last));
        return Some(vec![server, client]); // Teredo 2001::/32
    }
    None
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
        || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 6to4 relay anycast (deprecated)
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking
        || o[0] >= 240 // reserved
}

/// Refuses a URL whose scheme is not http(s) or whose host is a forbidden IP literal.
/// Names are checked later, when they resolve.
pub(super) fn check_url(url: &url::Url, allow_private: bool) -> Result<(), String> {
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
    check_ip(ip, allow_private)
}

/// Refuses a forbidden address unless private networks are allowed: the rule for an
/// IP literal, in a URL or in the host a connection is asked for.
pub(super) fn check_ip(ip: IpAddr, allow_private: bool) -> Result<(), String> {
    if !allow_private && is_forbidden(ip) {
        return Err(format!(
            "{ip} is a private, loopback or link-local address; set \
             allow_private_networks: true to allow it"
        ));
    }
    Ok(())
}

/// The addresses `host` resolves to (the system's resolver, bounded by `timeout`).
pub(super) async fn lookup(host: &str, timeout: Duration) -> Result<Vec<SocketAddr>, BoxError> {
    let lookup = tokio::net::lookup_host((host, 0));
    Ok(tokio::time::timeout(timeout, lookup)
        .await
        .map_err(|_| format!("resolving '{host}' timed out"))??
        .collect())
}

/// Keeps those of `host`'s resolved `addrs` that may be reached; fails when none is
/// left. A client connects only to what this returns: no second resolution between the
/// check and the connection.
pub(super) fn vet(
    host: &str,
    addrs: Vec<SocketAddr>,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, BoxError> {
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
    Ok(allowed)
}

/// [`lookup`], then [`vet`].
pub(super) async fn resolve(
    host: &str,
    allow_private: bool,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, BoxError> {
    vet(host, lookup(host, timeout).await?, allow_private)
}

/// A resolver that drops forbidden addresses and fails when none is left.
#[derive(Debug, Clone)]
pub(super) struct GuardedResolver {
    pub(super) allow_private: bool,
    pub(super) timeout: Duration,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let timeout = self.timeout;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Addrs = Box::new(resolve(&host, allow_private, timeout).await?.into_iter());
            Ok(addrs)
        })
    }
}

/// Redirects followed at most.
pub(super) const MAX_REDIRECTS: usize = 5;

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

    /// Every IPv6 form that carries an IPv4 address is judged by that address, with a
    /// public counterpart of each form still allowed.
    #[test]
    fn ipv6_forms_embedding_ipv4_are_judged_by_it() {
        let refused = [
            ("compatible loopback", "::127.0.0.1"),
            ("compatible metadata", "::169.254.169.254"),
            ("compatible private", "::10.0.0.1"),
            ("mapped loopback", "::ffff:127.0.0.1"),
            ("mapped metadata", "::ffff:169.254.169.254"),
            ("NAT64 loopback", "64:ff9b::127.0.0.1"),
            ("NAT64 private", "64:ff9b::192.168.0.1"),
            ("local-use NAT64", "64:ff9b:1::808:808"),
            ("6to4 loopback", "2002:7f00:1::"),
            ("6to4 metadata", "2002:a9fe:a9fe::"),
            ("6to4 private", "2002:0a00:0001::1"),
            // Teredo: server 65.54.227.120, client 127.0.0.1 (0x7f000001 ^ 0xffffffff)
            (
                "Teredo client loopback",
                "2001:0:4136:e378:8000:63bf:80ff:fffe",
            ),
            // Teredo: server 10.0.0.1, client 8.8.8.8
            ("Teredo server private", "2001:0:a00:1:8000:63bf:f7f7:f7f7"),
            ("unique local", "fd12:3456::1"),
            ("unique local fc", "fc00::1"),
            ("link-local", "fe80::1"),
            ("site-local", "fec0::1"),
            ("multicast", "ff02::1"),
            ("unspecified", "::"),
            ("loopback", "::1"),
            ("documentation", "2001:db8::1"),
            ("documentation 3fff", "3fff::1"),
            ("discard-only", "100::1"),
        ];
        for (what, ip) in refused {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(is_forbidden(ip), "{what}: {ip} must be refused");
            let url = url::Url::parse(&format!("http://[{ip}]:8080/x")).unwrap();
            assert!(check_url(&url, false).is_err(), "{what}: {url}");
            assert!(
                check_url(&url, true).is_ok(),
                "{what}: {url} with the allowance"
            );
        }
        let allowed = [
            ("compatible public", "::8.8.8.8"),
            ("mapped public", "::ffff:8.8.8.8"),
            ("NAT64 public", "64:ff9b::8.8.8.8"),
            ("6to4 public", "2002:808:808::1"),
            // Teredo: server 65.54.227.120, client 8.8.8.8
            ("Teredo public", "2001:0:4136:e378:8000:63bf:f7f7:f7f7"),
            ("global", "2606:4700:4700::1111"),
        ];
        for (what, ip) in allowed {
            assert!(!is_forbidden(ip.parse().unwrap()), "{what}: {ip} is public");
        }
    }

    /// A redirect to a loopback or private form is refused before any connection,
    /// whatever the form; the guard's redirect policy is what stops it.
    #[tokio::test]
    async fn redirects_to_internal_addresses_are_refused() {
        use crate::redirect::tests::{recorder, redirect_to};
        let (canary, canary_seen) =
            recorder(|_| "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_owned()).await;
        let targets = [
            format!("http://127.0.0.1:{canary}/token"),
            format!("http://[::ffff:127.0.0.1]:{canary}/token"),
            format!("http://[::127.0.0.1]:{canary}/token"),
            format!("http://[::ffff:7f00:1]:{canary}/token"),
            format!("http://localhost:{canary}/token"),
            format!("http://2130706433:{canary}/token"),
        ];
        for target in targets {
            let location = target.clone();
            let (redirector, _) = recorder(move |_| redirect_to(&location)).await;
            // The redirector itself is on loopback: reached without the resolver, as a
            // public first hop would be; the policy alone judges the hop.
            let client = reqwest::Client::builder()
                .redirect(crate::redirect::policy(MAX_REDIRECTS, true, |u| {
                    check_url(u, false)
                }))
                .no_proxy()
                .build()
                .unwrap();
            let err = client
                .post(format!("http://127.0.0.1:{redirector}/token"))
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .expect_err(&target);
            let text = format!("{err:?}");
            assert!(text.contains("redirect refused"), "{target}: {text}");
        }
        assert!(
            canary_seen.lock().unwrap().is_empty(),
            "the canary was reached"
        );
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
