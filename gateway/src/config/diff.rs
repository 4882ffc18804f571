//! What differs between two configs: the one list of restart-only settings (read once
//! at startup, kept at their running values by a reload), and which upstreams and
//! tenants changed.

use std::collections::BTreeSet;

use super::Config;

/// A setting a running `serve` reads once, at startup: a reload that changes it keeps
/// the running value and warns that it needs a restart.
pub struct RestartOnly {
    /// Its path in the file (`listen`, `sessions.idle_ttl`).
    pub name: &'static str,
    differs: fn(&Config, &Config) -> bool,
    keep: fn(&mut Config, &Config),
}

/// Declares [`RESTART_ONLY`]: each entry's name is its field path, and both its
/// comparison and its copy are derived from that path, so the three cannot disagree.
macro_rules! restart_only {
    ($($first:ident $(. $rest:ident)*),* $(,)?) => {
        /// Every restart-only setting, in the order reloads report them.
        pub const RESTART_ONLY: &[RestartOnly] = &[$(
            RestartOnly {
                name: concat!(stringify!($first) $(, ".", stringify!($rest))*),
                differs: |new, running| new.$first $(.$rest)* != running.$first $(.$rest)*,
                keep: |new, running| new.$first $(.$rest)*.clone_from(&running.$first $(.$rest)*),
            }
        ),*];
    };
}

restart_only!(
    listen,
    allowed_hosts,
    server,
    metrics.listen,
    max_request_body_bytes,
    data_dir,
    admin,
    sessions.idle_ttl,
    sessions.max_sessions,
    sessions.max_per_tenant,
    state,
    tasks,
    telemetry,
    search,
    oauth.token_keys,
);

impl Config {
    /// The restart-only settings ([`RESTART_ONLY`]) that differ between `running` and
    /// `self` (a reloaded file).
    pub fn restart_only_changes(&self, running: &Config) -> Vec<&'static str> {
        RESTART_ONLY
            .iter()
            .filter(|setting| (setting.differs)(self, running))
            .map(|setting| setting.name)
            .collect()
    }

    /// Keeps the running values of the restart-only settings, so the swapped-in config
    /// describes what runs.
    pub fn keep_restart_only(&mut self, running: &Config) {
        for setting in RESTART_ONLY {
            (setting.keep)(self, running);
        }
    }
}

/// How the upstreams of two configs differ, by name (each list sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamChanges {
    /// In the new config only.
    pub added: Vec<String>,
    /// In the old config only.
    pub removed: Vec<String>,
    /// In both, with a different kind or different resolved settings
    /// ([`Config::upstream_settings`]): a changed global default counts as a change of
    /// every upstream that uses it.
    pub changed: Vec<String>,
}

impl UpstreamChanges {
    pub fn between(old: &Config, new: &Config) -> UpstreamChanges {
        let mounted = |config: &Config, name: &str| {
            let upstream = config.upstreams.get(name)?;
            // An OpenAPI upstream's OAuth scheme is chosen when its spec is imported.
            let scheme = upstream.settings.oauth.as_ref().map(|o| o.scheme.clone());
            Some((
                upstream.kind.clone(),
                config.resolve(&upstream.settings),
                scheme,
            ))
        };
        let mut changes = UpstreamChanges::default();
        for name in new.upstreams.keys() {
            match mounted(old, name) {
                None => changes.added.push(name.clone()),
                before if before != mounted(new, name) => changes.changed.push(name.clone()),
                Some(_) => {}
            }
        }
        changes.removed = old
            .upstreams
            .keys()
            .filter(|name| !new.upstreams.contains_key(*name))
            .cloned()
            .collect();
        changes
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Tenants added, removed or changed between two configs (names only: their
/// settings hold key hashes).
pub fn changed_tenants(old: &Config, new: &Config) -> Vec<String> {
    let names: BTreeSet<&String> = old
        .tenants
        .keys()
        .chain(new.tenants.keys())
        .filter(|name| old.tenants.get(*name) != new.tenants.get(*name))
        .collect();
    names.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(text, &|_| None).unwrap()
    }

    #[test]
    fn upstream_changes_use_effective_settings() {
        let old = parse(
            "upstreams:\n  a: {stdio: {command: x}}\n  b: {stdio: {command: y}}\n  \
             c: {stdio: {command: z}, call_timeout: 5s}\n",
        );
        // `a` keeps its settings but the global call timeout it uses changes; `b` goes;
        // `c` has its own timeout, so the global one does not touch it; `d` is new.
        let new = parse(
            "call_timeout: 10s\nupstreams:\n  a: {stdio: {command: x}}\n  \
             c: {stdio: {command: z}, call_timeout: 5s}\n  d: {stdio: {command: w}}\n",
        );
        let changes = UpstreamChanges::between(&old, &new);
        assert_eq!(changes.added, ["d"]);
        assert_eq!(changes.removed, ["b"]);
        assert_eq!(changes.changed, ["a"]);
        assert!(UpstreamChanges::between(&new, &new).is_empty());
        // The scheme an OpenAPI upstream's users connect through is read at import.
        let api = |scheme: &str| {
            parse(&format!(
                "public_url: https://t.example.com\nupstreams:\n  api: {{openapi: \
                 {{spec_url: 'https://a.example.com/o.json'}}, credentials: oauth, oauth: \
                 {{scheme: {scheme}}}}}\n"
            ))
        };
        assert_eq!(
            UpstreamChanges::between(&api("a"), &api("b")).changed,
            ["api"]
        );
    }

    #[test]
    fn restart_only_settings_are_named_and_kept() {
        let running = parse("{}");
        let mut next = parse(
            "listen: 0.0.0.0:9000\nmax_request_body_bytes: 10\nsessions: {idle_ttl: 1m}\n\
             call_timeout: 3s\n",
        );
        assert_eq!(
            next.restart_only_changes(&running),
            ["listen", "max_request_body_bytes", "sessions.idle_ttl"]
        );
        next.keep_restart_only(&running);
        assert!(next.restart_only_changes(&running).is_empty());
        // What may change at run time is left as the file says.
        assert_eq!(next.call_timeout, Duration::from_secs(3));
    }

    #[test]
    fn every_restart_only_setting_is_noticed_and_kept() {
        let running = parse("{}");
        let mut next = parse(
            "listen: 0.0.0.0:9000\nallowed_hosts: [a]\nserver: {max_connections: 7}\n\
             metrics: {listen: 127.0.0.1:9999}\nmax_request_body_bytes: 10\ndata_dir: elsewhere\n\
             admin: {token: 0123456789abcdef}\n\
             sessions: {idle_ttl: 1m, max_sessions: 5, max_per_tenant: 2}\n\
             state: {key_prefix: other}\ntasks: {ttl: 2h}\ntelemetry: {service_name: other}\n\
             search: {embedding_model: /models/minilm}\n\
             oauth: {token_keys: [MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=]}\n",
        );
        let all: Vec<&str> = RESTART_ONLY.iter().map(|s| s.name).collect();
        assert_eq!(next.restart_only_changes(&running), all);
        next.keep_restart_only(&running);
        assert_eq!(next, running);
    }

    /// The "What needs a restart" bullet of docs/config.md (Hot reload) names exactly
    /// the settings of [`RESTART_ONLY`], so the docs cannot drift from what a reload does.
    #[test]
    fn the_readme_lists_the_restart_only_settings() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/config.md"))
                .expect("docs/config.md is readable");
        let start = readme
            .find("- **What needs a restart.**")
            .expect("docs/config.md has a \"What needs a restart\" bullet");
        let bullet = &readme[start..];
        // The bullet runs to the next bullet or paragraph.
        let rest = &bullet[2..];
        let end = [rest.find("\n- "), rest.find("\n\n")]
            .into_iter()
            .flatten()
            .min()
            .map_or(bullet.len(), |end| end + 2);
        let listed: BTreeSet<&str> = bullet[..end].split('`').skip(1).step_by(2).collect();
        let table: BTreeSet<&str> = RESTART_ONLY.iter().map(|s| s.name).collect();
        assert_eq!(listed, table, "docs/config.md vs RESTART_ONLY");
    }

    #[test]
    fn changed_tenants_by_name() {
        let old = parse("tenants:\n  a: {allow: ['x__*']}\n  b: {}\n  c: {}\n");
        let new = parse("tenants:\n  a: {allow: ['y__*']}\n  c: {}\n  d: {}\n");
        assert_eq!(changed_tenants(&old, &new), ["a", "b", "d"]);
    }
}
