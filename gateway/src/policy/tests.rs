//! The policy's tests: tenants compiled from config, allowed sets, explanations.

use super::*;
use crate::catalog::Source;
use crate::config::Namespace;
use crate::state::ratelimit::Verdict;
use serde_json::json;
use toolgate_adapters::ToolDef;

fn catalog(names: &[&str]) -> Arc<Catalog> {
    let tools: Vec<ToolDef> = names
        .iter()
        .map(|n| {
            ToolDef::from_raw(
                json!({"name": n, "inputSchema": {"type": "object"}})
                    .as_object()
                    .unwrap()
                    .clone(),
            )
            .unwrap()
        })
        .collect();
    Arc::new(
        Catalog::build(&[Source {
            upstream: "gh",
            namespace: Namespace::Prefix,
            tools: &tools,
            shaping: None,
        }])
        .0,
    )
}

fn policy(yaml: &str) -> Policy {
    let config = Config::parse(yaml, &|_| None).unwrap();
    Policy::from_config(&config).unwrap()
}

#[test]
fn a_tenant_from_before_a_reload_does_not_poison_the_new_cache() {
    let catalog = catalog(&["get_repo", "delete_repo"]);
    let old = policy("tenants:\n  a:\n    allow: ['gh__get_*']\n");
    let new = policy("tenants:\n  a:\n    allow: ['gh__*']\n");
    // A request admitted under the old policy reaches the new one.
    let straddling = new.allowed(&old.tenant("a").unwrap(), &catalog);
    assert!(!straddling.names.contains("gh__delete_repo"));
    let current = new.allowed(&new.tenant("a").unwrap(), &catalog);
    assert!(current.names.contains("gh__delete_repo"));
}

#[test]
fn deny_wins_and_hidden_equals_missing() {
    let policy = policy(
        "tenants:\n  a:\n    allow: ['gh__*', '!gh__delete_*']\n  b:\n    allow: ['gh__get_*']\n    deny: ['gh__get_secret']\n",
    );
    let catalog = catalog(&["get_repo", "delete_repo", "get_secret"]);
    let a = policy.allowed(&policy.tenant("a").unwrap(), &catalog);
    let b = policy.allowed(&policy.tenant("b").unwrap(), &catalog);
    assert_eq!(
        a.tool_access(Scope::Stateless, "gh__get_repo"),
        Access::Visible
    );
    assert_eq!(
        a.tool_access(Scope::Stateless, "gh__delete_repo"),
        Access::Hidden
    );
    assert_eq!(
        b.tool_access(Scope::Stateless, "gh__get_secret"),
        Access::Hidden
    );
    assert_eq!(
        b.tool_access(Scope::Stateless, "gh__no_such_tool"),
        Access::Hidden
    );
}

#[test]
fn the_explanation_names_the_deciding_pattern() {
    let policy = policy(
        "sessions: {initial_max_tools: 1}\ntenants:\n  a:\n    allow: ['gh__get_*', 'gh__*', '!gh__delete_*']\n    initial: ['gh__get_repo']\n  b:\n    allow: ['gh__get_*']\n",
    );
    let catalog = catalog(&["get_repo", "get_user", "delete_repo"]);
    let a = policy.tenant("a").unwrap();
    let repo = policy.explain(&a, &catalog, "gh__get_repo");
    assert_eq!(repo.rule, Rule::Allowed { by: "gh__get_*" });
    assert_eq!(
        repo.first_list,
        FirstList::ByPattern {
            pattern: "gh__get_repo"
        }
    );
    assert_eq!(repo.access, Access::Visible);
    let user = policy.explain(&a, &catalog, "gh__get_user");
    assert_eq!(user.first_list, FirstList::NoInitialPattern);
    assert_eq!(user.access, Access::Selectable);
    let delete = policy.explain(&a, &catalog, "gh__delete_repo");
    assert_eq!(
        delete.rule,
        Rule::Denied {
            by: "!gh__delete_*",
            allowed_by: "gh__*"
        }
    );
    assert_eq!(delete.access, Access::Hidden);
    let b = policy.tenant("b").unwrap();
    let other = policy.explain(&b, &catalog, "gh__delete_repo");
    assert_eq!(other.rule, Rule::NotAllowed { denied_by: None });
    let big = policy.explain(&b, &catalog, "gh__get_user");
    assert_eq!(
        big.first_list,
        FirstList::WholeSetTooLarge { allowed: 2, max: 1 }
    );
    // The explanation and the decision agree on every name.
    for name in [
        "gh__get_repo",
        "gh__get_user",
        "gh__delete_repo",
        "gh__nothing",
    ] {
        let allowed = policy.allowed(&a, &catalog);
        assert_eq!(
            allowed.names.contains(name),
            a.explain(name).is_allowed() && catalog.get(name).is_some()
        );
    }
}

#[test]
fn initial_set_and_expansion() {
    let policy = policy(
        "sessions: {initial_max_tools: 2}\ntenants:\n  small:\n    allow: ['gh__get_*']\n  big:\n    allow: ['*']\n  picked:\n    allow: ['*']\n    initial: ['gh__get_repo']\n",
    );
    let catalog = catalog(&["get_repo", "get_user", "delete_repo"]);
    let small = policy.allowed(&policy.tenant("small").unwrap(), &catalog);
    assert_eq!(
        small.initial.len(),
        2,
        "small allowed sets start fully visible"
    );
    let big = policy.allowed(&policy.tenant("big").unwrap(), &catalog);
    assert!(big.initial.is_empty(), "large allowed sets start empty");
    let picked = policy.allowed(&policy.tenant("picked").unwrap(), &catalog);
    assert_eq!(picked.initial.iter().collect::<Vec<_>>(), ["gh__get_repo"]);

    let mut expanded = BTreeSet::new();
    let access = big.tool_access(Scope::Session(&expanded), "gh__delete_repo");
    assert_eq!(access, Access::Selectable);
    let callable = |scope| big.permits(scope, Item::Tool("gh__delete_repo"), Method::Use);
    assert!(!callable(Scope::Session(&expanded)));
    assert!(callable(Scope::Stateless));
    expanded.insert("gh__delete_repo".to_owned());
    assert_eq!(
        big.tool_access(Scope::Session(&expanded), "gh__delete_repo"),
        Access::Visible
    );
    // Expanding a name never makes a hidden tool visible.
    expanded.insert("gh__other".to_owned());
    assert_eq!(
        big.tool_access(Scope::Session(&expanded), "gh__other"),
        Access::Hidden
    );
}

#[test]
fn open_gateway_and_anonymous() {
    let open = policy("{}");
    assert!(open.is_open());
    assert_eq!(open.resolve(None).unwrap().name, OPEN_TENANT);
    let closed = policy("tenants:\n  a: {}\n");
    assert_eq!(closed.resolve(None).unwrap_err(), Refusal::Unauthenticated);
    let anon = policy("anonymous_tenant: pub\ntenants:\n  pub: {}\n");
    assert_eq!(anon.resolve(None).unwrap().name, "pub");
}

#[test]
fn rate_limits_and_unmatched_patterns() {
    let policy = policy(
        "tenants:\n  a:\n    allow: ['gh__*', 'nothing__*']\n    rate_limit: {per_second: 1, burst: 2}\n",
    );
    let tenant = policy.tenant("a").unwrap();
    let limiter = tenant.local_limiter().unwrap();
    assert!(limiter.check().is_admitted());
    assert!(limiter.check().is_admitted());
    assert!(matches!(limiter.check(), Verdict::Wait(_)));
    let hourly = self::policy("tenants:\n  h:\n    rate_limit: {per_hour: 3}\n");
    let tenant = hourly.tenant("h").unwrap();
    let limiter = tenant.local_limiter().unwrap();
    for _ in 0..3 {
        assert!(limiter.check().is_admitted());
    }
    match limiter.check() {
        Verdict::Wait(retry_after) => {
            assert!(retry_after > Duration::from_secs(1000), "{retry_after:?}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A shared backend keeps a local share of the rate for fail-open.
    let shared = self::policy(
        "state: {backend: redis, url: 'redis://127.0.0.1:1', replicas: 4}\ntenants:\n  s:\n    rate_limit: {per_minute: 20, burst: 20}\n",
    );
    let tenant = shared.tenant("s").unwrap();
    let limiter = tenant.local_limiter().unwrap();
    let admitted = (0..20).filter(|_| limiter.check().is_admitted()).count();
    assert_eq!(admitted, 5, "20 divided over 4 replicas");
    let catalog = catalog(&["get_repo"]);
    assert_eq!(
        policy.unmatched_patterns(&catalog),
        vec![("a".to_owned(), "nothing__*".to_owned())]
    );
}
