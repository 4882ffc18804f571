//! Tenants and THE one decision function.
//!
//! Every surface asks [`decide`] — listing, calling, expanding, searching, exporting —
//! so a list path and a call path can never disagree (the most common security bug in
//! peer gateways). A tenant's *allowed* set is its allow patterns minus its deny
//! patterns, evaluated against the live catalog (an upstream registered later is
//! covered). A session's *visible* set is the tenant's initial set plus what it
//! expanded, always within the allowed set.
//!
//! A tool outside the allowed set is indistinguishable from a tool that does not
//! exist: same answer, same error, on every path.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::HashMap;
use globset::{Glob, GlobSet, GlobSetBuilder};

mod decision;

pub use decision::{Access, Allowed, Decision, Item, Method, Scope, decide};

use crate::catalog::Catalog;
use crate::config::patterns::glob;
use crate::config::{Config, Rate, StateBackend, TenantConfig};
use crate::state::ratelimit::LocalLimiter;
use toolgate_adapters::CallerCredentials;

/// The tenant of requests when no tenants are configured (an open gateway).
pub const OPEN_TENANT: &str = "default";

/// Who is calling, in which scope.
#[derive(Debug, Clone)]
pub struct Caller {
    pub tenant: Arc<Tenant>,
    /// The person calling within the tenant, when the credential names one (a JWT's
    /// `sub`, a personal API key's subject); `None`: the tenant as a whole. The policy
    /// decides by tenant; sessions, tasks, audit lines and per-user upstream
    /// credentials are the subject's own.
    pub subject: Option<Arc<str>>,
    /// The session id and its expanded tools; `None` when sessionless (2026-07-28).
    pub session: Option<(String, Arc<BTreeSet<String>>)>,
    /// The JWT the caller authenticated with (verified by the gateway), for the one
    /// use it has: an exchange at its issuer for an upstream's token
    /// (`credentials: token_exchange`). Never sent anywhere else.
    pub assertion: Option<Assertion>,
}

/// A JWT a caller authenticated with, as the gateway verified it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    pub token: toolgate_adapters::Secret,
    /// Its `exp` (seconds since the epoch), when it has one: nothing made from it may
    /// outlive it.
    pub expires_at: Option<u64>,
}

impl Caller {
    /// `tenant` (as `subject`, when named), before any session.
    pub fn new(tenant: Arc<Tenant>, subject: Option<Arc<str>>) -> Caller {
        Caller {
            tenant,
            subject,
            session: None,
            assertion: None,
        }
    }

    /// The same caller, who authenticated with the JWT `assertion`.
    pub fn with_assertion(self, assertion: Option<Assertion>) -> Caller {
        Caller { assertion, ..self }
    }

    /// The same caller on the session `id` with its expanded tools.
    pub fn in_session(self, id: String, expanded: Arc<BTreeSet<String>>) -> Caller {
        Caller {
            session: Some((id, expanded)),
            ..self
        }
    }

    /// The subject, as text (`None`: the tenant as a whole).
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// Whose what this caller makes is (a parked call, a task).
    pub fn principal(&self) -> Principal {
        Principal {
            tenant: self.tenant.name.clone(),
            subject: self.subject.as_deref().map(str::to_owned),
        }
    }

    pub fn scope(&self) -> Scope<'_> {
        match &self.session {
            Some((_, expanded)) => Scope::Session(expanded.as_ref()),
            None => Scope::Stateless,
        }
    }

    pub fn session_id(&self) -> Option<&str> {
        self.session.as_ref().map(|(id, _)| id.as_str())
    }
}

/// Whose something is: a tenant, and the person within it when a credential named
/// one. What one principal made, another never reaches (another tenant's or another
/// person's is answered as missing).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub tenant: String,
    pub subject: Option<String>,
}

impl Principal {
    /// Who holds a token at an upstream reached with each user's own, as the
    /// per-caller upstream keys its connections: the tenant and the subject, separated
    /// by a byte neither may contain.
    pub fn holder(&self) -> Arc<str> {
        format!(
            "{}\u{1f}{}",
            self.tenant,
            self.subject.as_deref().unwrap_or("")
        )
        .into()
    }

    /// Who holds the credentials of an upstream with `source`: the tenant as a whole
    /// for `per_tenant` (every person of the tenant shares its connections), else
    /// the principal.
    pub fn holder_for(&self, source: crate::config::CredentialSource) -> Arc<str> {
        match source {
            crate::config::CredentialSource::PerTenant => Principal {
                tenant: self.tenant.clone(),
                subject: None,
            }
            .holder(),
            _ => self.holder(),
        }
    }
}

/// One tenant, compiled.
pub struct Tenant {
    pub name: String,
    allow: GlobSet,
    deny: GlobSet,
    initial: Option<GlobSet>,
    /// The patterns of `allow`, `deny` and `initial` as written, in the order they were
    /// added to their sets (a set's match index is a position here): what
    /// [`Tenant::explain`] names.
    allow_patterns: Vec<String>,
    deny_patterns: Vec<String>,
    initial_patterns: Vec<String>,
    /// Every pattern as written, for "matches nothing" warnings.
    patterns: Vec<String>,
    /// The tenant's request rate, when limited.
    rate: Option<Rate>,
    /// The in-process limiter: the whole rate with `state.backend: memory`; with a
    /// shared backend, the rate divided by `state.replicas`, used only while the shared
    /// limiter cannot be reached (fail-open).
    limiter: Option<LocalLimiter>,
    /// The tenant's own credentials for upstreams called with them, by upstream.
    upstream_credentials: BTreeMap<String, CallerCredentials>,
}

impl Tenant {
    /// The tenant's own credentials for `upstream`, when the config gives some.
    pub fn upstream_credentials(&self, upstream: &str) -> Option<&CallerCredentials> {
        self.upstream_credentials.get(upstream)
    }
}

impl std::fmt::Debug for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenant").field("name", &self.name).finish()
    }
}

/// The tools of `initial` whose definitions fit in `tokens` together, taken in name
/// order, each one that still fits (a large one is left out, smaller ones after it
/// may still come in): the first `tools/list` is bounded whatever the patterns or the
/// catalog; the rest stay reachable through `tool_search` and `tool_expand_tools`.
fn within_tokens(initial: BTreeSet<String>, catalog: &Catalog, tokens: usize) -> BTreeSet<String> {
    let cost = |name: &String| catalog.get(name).map_or(0, |e| e.definition_tokens);
    if initial.iter().map(cost).sum::<usize>() <= tokens {
        return initial;
    }
    let mut left = tokens;
    initial
        .into_iter()
        .filter(|name| {
            let fits = cost(name) <= left;
            if fits {
                left -= cost(name);
            }
            fits
        })
        .collect()
}

/// An allowed set and the catalog snapshot it was computed for.
type CachedAllowed = (std::sync::Weak<Catalog>, Arc<Allowed>);

/// Why a request was refused before it reached a tool.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// No credentials and no anonymous tenant.
    Unauthenticated,
    /// Over the tenant's request rate.
    RateLimited { retry_after: Duration },
    /// The shared rate limiter cannot be reached and `state.on_unavailable` is
    /// `fail_closed`.
    LimiterUnavailable { message: String },
}

/// All tenants, compiled once per config.
pub struct Policy {
    tenants: HashMap<String, Arc<Tenant>>,
    open: bool,
    anonymous: Option<String>,
    initial_max_tools: usize,
    /// Tokens the catalog tools of a first `tools/list` may cost (the protocol tools'
    /// own cost already taken off).
    initial_tool_tokens: usize,
    /// Allowed sets per tenant for the newest catalog snapshot.
    cache: Mutex<HashMap<String, CachedAllowed>>,
}

impl Policy {
    /// Compiles the config's tenants; an invalid pattern is an error naming it.
    pub fn from_config(config: &Config) -> Result<Policy, String> {
        let mut tenants = HashMap::default();
        let open = config.tenants.is_empty();
        if open {
            // No tenants: one endpoint, every tool listed — whatever the catalog's size.
            let everything = TenantConfig {
                api_keys: Vec::new(),
                upstream_credentials: BTreeMap::new(),
                allow: vec!["*".into()],
                deny: Vec::new(),
                initial: Some(vec!["*".into()]),
                rate_limit: None,
            };
            tenants.insert(
                OPEN_TENANT.to_owned(),
                Arc::new(compile(OPEN_TENANT, &everything, 1)?),
            );
        }
        // With a shared limiter the local one is only the fail-open fallback: each
        // replica then takes its share of the rate.
        let share = match config.state.backend {
            StateBackend::Memory => 1,
            StateBackend::Redis => config.state.replicas,
        };
        for (name, tenant) in &config.tenants {
            tenants.insert(name.clone(), Arc::new(compile(name, tenant, share)?));
        }
        Ok(Policy {
            tenants,
            open,
            anonymous: config.anonymous_tenant.clone(),
            initial_max_tools: config.sessions.initial_max_tools,
            initial_tool_tokens: config.sessions.initial_max_tokens.saturating_sub(
                crate::catalog::protocol_tools::listed_tokens(config.results.encoding),
            ),
            cache: Mutex::new(HashMap::default()),
        })
    }

    /// True when no tenants are configured: no credentials needed.
    pub fn is_open(&self) -> bool {
        self.open
    }

    pub fn tenant(&self, name: &str) -> Option<Arc<Tenant>> {
        self.tenants.get(name).cloned()
    }

    /// The tenant for a request whose credentials resolved to `authenticated` (None:
    /// no credentials presented).
    pub fn resolve(&self, authenticated: Option<&str>) -> Result<Arc<Tenant>, Refusal> {
        let name = match authenticated {
            Some(name) => name,
            None if self.open => OPEN_TENANT,
            None => self.anonymous.as_deref().ok_or(Refusal::Unauthenticated)?,
        };
        self.tenant(name).ok_or(Refusal::Unauthenticated)
    }

    /// What `tenant` may use in `catalog` (cached per catalog snapshot).
    pub fn allowed(&self, tenant: &Tenant, catalog: &Arc<Catalog>) -> Arc<Allowed> {
        // A request admitted just before a config reload brings the previous policy's
        // tenant: it is answered by its own rules and kept out of this cache, which
        // would otherwise serve the old rules under the tenant's name until the
        // catalog changes.
        let own = self
            .tenants
            .get(&tenant.name)
            .is_some_and(|t| std::ptr::eq(Arc::as_ptr(t), tenant));
        if own
            && let Some((source, allowed)) = self
                .cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&tenant.name)
            && source.upgrade().is_some_and(|c| Arc::ptr_eq(&c, catalog))
        {
            return allowed.clone();
        }
        let allowed = self.allowed_in(tenant, catalog);
        if own {
            self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(
                tenant.name.clone(),
                (Arc::downgrade(catalog), allowed.clone()),
            );
        }
        allowed
    }

    /// What `tenant` may use in `catalog`, worked out now (a user's own catalog keeps
    /// its answer itself: see [`crate::gateway::Gateway::catalog_for`]).
    pub fn allowed_in(&self, tenant: &Tenant, catalog: &Catalog) -> Arc<Allowed> {
        let names: BTreeSet<String> = catalog
            .entries()
            .iter()
            .filter(|e| tenant.allows(&e.name))
            .map(|e| e.name.clone())
            .collect();
        let initial = match &tenant.initial {
            Some(_) => names
                .iter()
                .filter(|n| tenant.initial_match(n).is_some())
                .cloned()
                .collect(),
            None if names.len() <= self.initial_max_tools => names.clone(),
            None => BTreeSet::new(),
        };
        let initial = within_tokens(initial, catalog, self.initial_tool_tokens);
        let offerings = catalog.offerings();
        let offering_names: BTreeSet<String> = offerings
            .prompts
            .entries()
            .iter()
            .map(|e| &e.name)
            .chain(offerings.resources.iter().map(|r| &r.name))
            .chain(offerings.templates.iter().map(|t| &t.name))
            .filter(|name| tenant.allows(name))
            .cloned()
            .collect();
        let whole_upstreams = offerings
            .upstreams()
            .filter(|upstream| {
                tenant.allows(&crate::catalog::offerings::whole_upstream_name(upstream))
            })
            .map(str::to_owned)
            .collect();
        Arc::new(Allowed {
            names,
            initial,
            offerings: offering_names,
            whole_upstreams,
        })
    }

    /// The tenants' names, sorted.
    pub fn tenant_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tenants.keys().cloned().collect();
        names.sort();
        names
    }

    /// Why `name` is or is not visible to `tenant` in `catalog`: the pattern that
    /// allowed or denied it and why a new session lists it or not. Built from the same
    /// functions [`Policy::allowed`] and [`decide`] use, so it cannot say anything
    /// else than what they decide.
    pub fn explain<'t>(
        &self,
        tenant: &'t Tenant,
        catalog: &Arc<Catalog>,
        name: &str,
    ) -> Explanation<'t> {
        let allowed = self.allowed(tenant, catalog);
        let exists = catalog.get(name).is_some();
        let rule = tenant.explain(name);
        let access = allowed.tool_access(Scope::Session(&BTreeSet::new()), name);
        let first_list = if !exists || !rule.is_allowed() {
            FirstList::NotAllowed
        } else if allowed.initial.contains(name) {
            match tenant.initial_match(name) {
                Some(pattern) => FirstList::ByPattern { pattern },
                None => FirstList::WholeSetFits {
                    allowed: allowed.names.len(),
                    max: self.initial_max_tools,
                },
            }
        } else {
            match (&tenant.initial, tenant.initial_match(name)) {
                (Some(_), Some(pattern)) => FirstList::OverTokenBudget { pattern },
                (Some(_), None) => FirstList::NoInitialPattern,
                (None, _) if allowed.names.len() <= self.initial_max_tools => {
                    FirstList::OverTokenBudget { pattern: "" }
                }
                (None, _) => FirstList::WholeSetTooLarge {
                    allowed: allowed.names.len(),
                    max: self.initial_max_tools,
                },
            }
        };
        Explanation {
            exists,
            rule,
            first_list,
            access,
        }
    }

    /// Whether at most one tenant may use anything `upstream` serves in `catalog`
    /// (tools, prompts, resources, its unlisted URIs): only then may a message from it
    /// that names no call go to the one call in flight (see
    /// `Upstream::set_one_tenant`).
    pub fn one_tenant_reaches(&self, catalog: &Catalog, upstream: &str) -> bool {
        let offerings = catalog.offerings();
        let unlisted = format!("{upstream}__*");
        let names: Vec<&str> = catalog
            .entries()
            .iter()
            .filter(|e| e.upstream == upstream)
            .map(|e| e.name.as_str())
            .chain(
                offerings
                    .prompts
                    .entries()
                    .iter()
                    .filter(|e| e.upstream == upstream)
                    .map(|e| e.name.as_str()),
            )
            .chain(
                offerings
                    .resources
                    .iter()
                    .chain(offerings.templates.iter())
                    .filter(|i| i.upstream == upstream)
                    .map(|i| i.name.as_str()),
            )
            .chain(std::iter::once(unlisted.as_str()))
            .collect();
        self.tenants
            .values()
            .filter(|t| names.iter().any(|n| t.allows(n)))
            .take(2)
            .count()
            <= 1
    }

    /// Patterns that match no tool, prompt or resource in `catalog`, as
    /// `(tenant, pattern)`: catalog drift made visible (a warning, never an error).
    pub fn unmatched_patterns(&self, catalog: &Catalog) -> Vec<(String, String)> {
        let mut unmatched = Vec::new();
        let mut tenants: Vec<&Arc<Tenant>> = self.tenants.values().collect();
        tenants.sort_by(|a, b| a.name.cmp(&b.name));
        for tenant in tenants {
            for pattern in &tenant.patterns {
                let bare = pattern.trim_start_matches('!');
                let Ok(glob) = Glob::new(bare) else { continue };
                let matcher = glob.compile_matcher();
                // Patterns govern prompts and resources too (e.g. a skill's files,
                // `<upstream>__<skill>__*`): a pattern matching only those is in use.
                let offerings = catalog.offerings();
                let mut names = catalog
                    .entries()
                    .iter()
                    .chain(offerings.prompts.entries())
                    .map(|e| e.name.as_str())
                    .chain(offerings.resources.iter().map(|r| r.name.as_str()))
                    .chain(offerings.templates.iter().map(|t| t.name.as_str()));
                if !names.any(|name| matcher.is_match(name)) {
                    unmatched.push((tenant.name.clone(), pattern.clone()));
                }
            }
        }
        unmatched
    }
}

impl Tenant {
    /// The tenant's request rate, when limited.
    pub fn rate(&self) -> Option<Rate> {
        self.rate
    }

    /// The tenant's in-process limiter, when limited (see the field's docs; the
    /// gateway counts requests with it: [`crate::gateway::Gateway::count_request`]).
    pub fn local_limiter(&self) -> Option<&LocalLimiter> {
        self.limiter.as_ref()
    }

    /// Allow patterns match and no deny pattern does: [`Tenant::explain`]'s verdict,
    /// the one rule.
    pub fn allows(&self, name: &str) -> bool {
        self.explain(name).is_allowed()
    }

    /// Which pattern decides whether `name` is allowed: the first allow pattern that
    /// matches and the first deny pattern that matches (deny wins).
    pub fn explain(&self, name: &str) -> Rule<'_> {
        // `is_match` first: most names of a large catalog match nothing, and it does
        // not allocate.
        let first = |set: &GlobSet, patterns: &'_ [String]| -> Option<usize> {
            if !set.is_match(name) {
                return None;
            }
            set.matches(name)
                .first()
                .copied()
                .filter(|&i| i < patterns.len())
        };
        let allowed_by = first(&self.allow, &self.allow_patterns).map(|i| &*self.allow_patterns[i]);
        let denied_by = first(&self.deny, &self.deny_patterns).map(|i| &*self.deny_patterns[i]);
        match (allowed_by, denied_by) {
            (Some(by), None) => Rule::Allowed { by },
            (Some(allowed_by), Some(by)) => Rule::Denied { by, allowed_by },
            (None, denied_by) => Rule::NotAllowed { denied_by },
        }
    }

    /// The `initial` pattern that puts `name` in a new session's first list, if any.
    fn initial_match(&self, name: &str) -> Option<&str> {
        let set = self.initial.as_ref()?;
        if !set.is_match(name) {
            return None;
        }
        let index = *set.matches(name).first()?;
        self.initial_patterns.get(index).map(String::as_str)
    }
}

/// Which of a tenant's patterns decided a name (see [`Tenant::explain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Rule<'a> {
    /// An allow pattern matched and no deny pattern did.
    Allowed { by: &'a str },
    /// An allow pattern matched, and so did a deny pattern: deny wins.
    Denied { by: &'a str, allowed_by: &'a str },
    /// No allow pattern matched (a deny pattern may have, too).
    NotAllowed { denied_by: Option<&'a str> },
}

impl Rule<'_> {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Rule::Allowed { .. })
    }
}

/// Why an allowed tool is or is not in a new session's first `tools/list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum FirstList<'a> {
    /// Not in the catalog or not allowed: nothing to list.
    NotAllowed,
    /// Listed: an `initial` pattern matches it.
    ByPattern { pattern: &'a str },
    /// Listed: no `initial` patterns, and the allowed set is small enough to list whole.
    WholeSetFits { allowed: usize, max: usize },
    /// Not listed: no `initial` pattern matches it.
    NoInitialPattern,
    /// Not listed: no `initial` patterns, and the allowed set is larger than
    /// `sessions.initial_max_tools`.
    WholeSetTooLarge { allowed: usize, max: usize },
    /// Not listed: it would be (by `pattern`, or as part of the whole set when empty),
    /// but the first list's token budget (`sessions.initial_max_tokens`) was spent.
    OverTokenBudget { pattern: &'a str },
}

/// The policy's explanation of one name for one tenant (see [`Policy::explain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Explanation<'a> {
    /// Whether the catalog has a tool of that name.
    pub exists: bool,
    /// The allow/deny verdict of the tenant's patterns.
    pub rule: Rule<'a>,
    /// Whether a new session lists it, and why.
    pub first_list: FirstList<'a>,
    /// What [`decide`] answers for a new session.
    #[serde(serialize_with = "access_name")]
    pub access: Access,
}

fn access_name<S: serde::Serializer>(access: &Access, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(access.as_str())
}

/// A tenant pattern compiled: the one parser of patterns, for the policy and for the
/// config's check alike.
fn compile(name: &str, config: &TenantConfig, share: u32) -> Result<Tenant, String> {
    let mut allow = GlobSetBuilder::new();
    let mut deny = GlobSetBuilder::new();
    let mut patterns = Vec::new();
    let mut allow_patterns = Vec::new();
    let mut deny_patterns = Vec::new();
    let mut initial_patterns = Vec::new();
    let add = |builder: &mut GlobSetBuilder, pattern: &str, field: &str| {
        let glob = glob(pattern).map_err(|e| format!("tenants.{name}.{field}: {e}"))?;
        builder.add(glob);
        Ok::<(), String>(())
    };
    for pattern in &config.allow {
        match pattern.strip_prefix('!') {
            Some(denied) => {
                add(&mut deny, denied, "allow")?;
                deny_patterns.push(pattern.clone());
            }
            None => {
                add(&mut allow, pattern, "allow")?;
                allow_patterns.push(pattern.clone());
            }
        }
        patterns.push(pattern.clone());
    }
    for pattern in &config.deny {
        add(&mut deny, pattern.trim_start_matches('!'), "deny")?;
        let written = format!("!{}", pattern.trim_start_matches('!'));
        deny_patterns.push(written.clone());
        patterns.push(written);
    }
    let initial = match &config.initial {
        Some(list) => {
            let mut builder = GlobSetBuilder::new();
            for pattern in list {
                add(&mut builder, pattern, "initial")?;
                initial_patterns.push(pattern.clone());
            }
            Some(builder.build().map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let rate = config.rate_limit.as_ref().map(|limit| limit.rate());
    let limiter = rate.map(|rate| LocalLimiter::new(rate.divided(share)));
    Ok(Tenant {
        name: name.to_owned(),
        allow: allow.build().map_err(|e| e.to_string())?,
        deny: deny.build().map_err(|e| e.to_string())?,
        initial,
        allow_patterns,
        deny_patterns,
        initial_patterns,
        patterns,
        rate,
        limiter,
        upstream_credentials: config
            .upstream_credentials
            .iter()
            .map(|(upstream, schemes)| {
                let credentials = CallerCredentials::OpenApi(Arc::new(schemes.clone()));
                (upstream.clone(), credentials)
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests;
