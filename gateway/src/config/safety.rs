//! Settings that load and work but leave the gateway open to others: the one rule for
//! bearer tokens the config holds (`admin.token`, `metrics.token`), and the warning for
//! open mode on an address other machines can reach.

use super::Config;

/// Shortest token accepted: 16 characters of `openssl rand -hex 32` is 64 bits.
const MIN_TOKEN_CHARS: usize = 16;

/// Tokens written in examples (this repository's and the usual placeholders): a
/// deployment that copied one is as open as one without a token, since the value is
/// public. Compared case-insensitively.
const KNOWN_EXAMPLE_TOKENS: &[&str] = &[
    "change-me-to-a-long-random-token",
    "change-me",
    "changeme",
    "replace-me",
    "your-admin-token",
    "your-token-here",
    "secret-admin-token",
];

/// Words only a placeholder contains: a token holding one was never generated.
const PLACEHOLDER_WORDS: &[&str] = &["change-me", "changeme", "change_me", "replace-me"];

/// Why `token` must not guard anything, or `None` when it may: too short, or a known
/// example anyone can read. The message says how to make a good one.
pub(crate) fn token_problem(token: &str) -> Option<String> {
    const HOW: &str = "generate one with `openssl rand -hex 32` and pass it through the \
                       environment (e.g. `token: ${TOOLGATE_ADMIN_TOKEN}`)";
    let lower = token.to_ascii_lowercase();
    if KNOWN_EXAMPLE_TOKENS.contains(&lower.as_str())
        || PLACEHOLDER_WORDS.iter().any(|word| lower.contains(word))
    {
        return Some(format!(
            "this is an example token, public in documentation and example configs: {HOW}"
        ));
    }
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Some(format!(
            "use a token of at least {MIN_TOKEN_CHARS} characters: {HOW}"
        ));
    }
    None
}

impl Config {
    /// The warning for open mode (no tenants, no JWT: every caller may list and call
    /// every tool without a credential) when `address` is not a loopback address;
    /// `None` otherwise. Logged by `serve` and printed by `check`: open mode is right
    /// for one user on one machine, and a surprise anywhere else.
    pub fn open_mode_warning(&self, address: &str) -> Option<String> {
        let open = self.tenants.is_empty() && self.jwt.is_none();
        if !open || is_loopback(address) {
            return None;
        }
        Some(format!(
            "open mode on {address}, which other machines can reach: no `tenants` and no \
             `jwt` are configured, so anyone who reaches this address may list and call \
             every tool without a credential. Configure `tenants` (API keys) or `jwt`, or \
             listen on 127.0.0.1"
        ))
    }
}

/// Whether `address` (`host:port`, `[v6]:port`) names this machine's loopback
/// interface only. A name other than `localhost` counts as reachable: it may resolve
/// to any interface.
fn is_loopback(address: &str) -> bool {
    let host = match super::front_door::split_authority(address) {
        Some((host, _)) => host,
        None => return false,
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_and_short_tokens_are_refused_with_how_to_make_one() {
        for token in [
            "change-me-to-a-long-random-token",
            "CHANGE-ME-TO-A-LONG-RANDOM-TOKEN",
            "please-changeme-0123456789",
            "short",
        ] {
            let problem = token_problem(token).unwrap_or_else(|| panic!("{token} accepted"));
            assert!(problem.contains("openssl rand -hex 32"), "{problem}");
        }
        assert!(token_problem("0123456789abcdef").is_none());
        assert!(token_problem(&"a1".repeat(32)).is_none());
    }

    #[test]
    fn open_mode_warns_only_off_loopback() {
        let open = Config::parse("upstreams: {}\n", &|_| None).unwrap();
        for address in [
            "0.0.0.0:8080",
            "[::]:8080",
            "192.0.2.1:80",
            "gateway.example:80",
        ] {
            let warning = open
                .open_mode_warning(address)
                .unwrap_or_else(|| panic!("no warning on {address}"));
            assert!(warning.contains(address), "{warning}");
        }
        for address in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "localhost:8080",
            "127.0.0.2:1",
        ] {
            assert_eq!(open.open_mode_warning(address), None, "{address}");
        }
        let hash = format!("sha256:{}", "0".repeat(64));
        let with_tenants = Config::parse(
            &format!("tenants: {{a: {{api_keys: ['{hash}'], allow: ['*']}}}}\n"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(with_tenants.open_mode_warning("0.0.0.0:8080"), None);
    }
}
