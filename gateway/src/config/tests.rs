//! Parsing the file: paths in errors, the typed "exactly one of" groups, defaults, and
//! the settings fallback.

use std::time::Duration;

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn unknown_fields_are_rejected_with_their_path() {
    let text = "upstreams:\n  ev:\n    stdio:\n      comand: node\n";
    let err = Config::parse(text, &no_env).unwrap_err().to_string();
    assert!(err.contains("upstreams.ev.stdio"), "{err}");
    assert!(err.contains("comand"), "{err}");
    let beside = "upstreams:\n  ev:\n    stdio: {command: x}\n    namespce: none\n";
    let err = Config::parse(beside, &no_env).unwrap_err().to_string();
    assert!(
        err.contains("upstreams.ev") && err.contains("namespce"),
        "{err}"
    );
}

/// `credentials: per_tenant` is taken by OpenAPI and MCP upstreams only, a tenant's
/// own credentials must name such an upstream, and a personal key's subject is
/// checked.
#[test]
fn per_tenant_credentials_and_subjects_are_checked() {
    let err = |text: &str| Config::parse(text, &no_env).unwrap_err().to_string();
    let skills = "upstreams:\n  ev:\n    skills: {paths: [x]}\n    credentials: per_tenant\n";
    assert!(
        err(skills).contains("upstreams.ev.credentials"),
        "{}",
        err(skills)
    );
    let key = format!("sha256:{}", "a".repeat(64));
    let stray = format!(
        "upstreams:\n  ev:\n    stdio: {{command: x}}\ntenants:\n  acme:\n    api_keys: ['{key}']\n    upstream_credentials:\n      ev: {{k: {{type: bearer, token: t}}}}\n"
    );
    assert!(
        err(&stray).contains("tenants.acme.upstream_credentials.ev"),
        "{}",
        err(&stray)
    );
    let subject = format!("tenants:\n  acme:\n    api_keys: [{{hash: '{key}', subject: ''}}]\n");
    assert!(
        err(&subject).contains("tenants.acme.api_keys[0].subject"),
        "{}",
        err(&subject)
    );
    let fine = format!(
        "upstreams:\n  api:\n    openapi: {{spec_path: api.json}}\n    credentials: per_tenant\ntenants:\n  acme:\n    api_keys: [{{hash: '{key}', subject: alice}}]\n    upstream_credentials:\n      api: {{k: {{type: bearer, token: t}}}}\n"
    );
    let config = Config::parse(&fine, &no_env).expect("valid");
    assert_eq!(
        config.upstreams["api"].settings.credentials,
        CredentialSource::PerTenant
    );
    assert_eq!(config.api_keys()[0].subject.as_deref(), Some("alice"));
}

/// A page of the repository's documentation (`docs/config.md`, `README.md`).
fn page(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{path} is readable: {e}"))
}

/// The first YAML example of `docs` that `wanted` picks.
fn yaml_block(docs: &str, wanted: impl Fn(&str) -> bool) -> Option<&str> {
    docs.split("```yaml\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|block| wanted(block))
}

/// The token exchange example of docs/config.md parses and is valid; the settings it
/// needs are asked for, and its own are refused on other upstreams.
#[test]
fn token_exchange_is_configured_as_the_docs_say() {
    let docs = page("docs/config.md");
    let block = yaml_block(&docs, |block| block.contains("credentials: token_exchange"))
        .expect("docs/config.md has the token_exchange example");
    let env = |name: &str| (name == "TOOLGATE_EXCHANGE_SECRET").then(|| "s3cret".to_owned());
    let config = Config::parse(block, &env).expect("the example parses");
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let tickets = &config.upstreams["tickets"].settings;
    assert_eq!(tickets.credentials, CredentialSource::TokenExchange);
    assert!(tickets.credentials.is_per_user());
    // Every problem, with its path, as the error says it.
    let problems = |text: &str| -> Vec<String> {
        match Config::parse(text, &|_| None) {
            Ok(config) => config
                .problems()
                .iter()
                .map(|p| format!("{}: {}", p.path, p.message))
                .collect(),
            Err(e) => vec![format!("{e:?}")],
        }
    };
    let bare = "upstreams:\n  t:\n    streamable_http: {url: https://t.example.com/mcp}\n    credentials: token_exchange\n";
    let found = problems(bare);
    for wanted in ["needs the issuer", "configure `jwt`", "`oauth.client_id`"] {
        assert!(
            found.iter().any(|p| p.contains(wanted)),
            "{wanted}: {found:?}"
        );
    }
    let stdio = "jwt: {hs256_secret: 0123456789abcdef0123456789abcdef}\ntenants: {a: {}}\nupstreams:\n  t:\n    stdio: {command: x}\n    credentials: token_exchange\n    oauth: {issuer: https://i.example.com, client_id: x, client_secret: y}\n";
    // A stdio server takes it with the variable to give the token in and the
    // audience to ask for (it has no URL); a skills directory does not take it.
    assert_eq!(
        problem_paths(stdio),
        ["upstreams.t.stdio.token_env", "upstreams.t.oauth.audience"]
    );
    let skills = stdio.replace("stdio: {command: x}", "skills: {paths: [x]}");
    assert!(
        problems(&skills)
            .iter()
            .any(|p| p.contains("streamable_http and sse")),
        "{:?}",
        problems(&skills)
    );
    let stray = "public_url: https://t.example.com\nupstreams:\n  t:\n    streamable_http: {url: https://t.example.com/mcp}\n    credentials: oauth\n    oauth: {issuer: https://i.example.com}\n";
    assert!(
        problems(stray)
            .iter()
            .any(|p| p.contains("upstreams.t.oauth.issuer")),
        "{:?}",
        problems(stray)
    );
}

/// Where `text` (no variables set) is invalid: the path of each problem, whether
/// parsing found them or [`Config::problems`] did; a parse error of another kind as
/// itself.
fn problem_paths(text: &str) -> Vec<String> {
    match Config::parse(text, &|_| None) {
        Ok(config) => config.problems().iter().map(|p| p.path.clone()).collect(),
        Err(crate::config::ConfigError::Invalid(problems)) => {
            problems.0.iter().map(|p| p.path.clone()).collect()
        }
        Err(e) => vec![format!("{e:?}")],
    }
}

/// `per_tenant` on an HTTP MCP upstream: the docs example is valid; a tenant's
/// credentials there must be one bearer token; a stdio server must name the variable
/// its token goes in.
#[test]
fn per_tenant_mcp_upstreams_take_one_bearer_token() {
    let docs = page("docs/config.md");
    let block = yaml_block(&docs, |block| {
        block.contains("credentials: per_tenant") && block.contains("streamable_http")
    })
    .expect("docs/config.md has the per_tenant MCP example");
    let env = |name: &str| (name == "ACME_GITHUB_TOKEN").then(|| "ghp_example".to_owned());
    let config = Config::parse(block, &env).expect("the example parses");
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let token = crate::config::mcp_bearer(&config.tenants["acme"].upstream_credentials["github"]);
    assert_eq!(token.map(|t| t.expose()), Some("ghp_example"));
    let refused = problem_paths;
    let key = "upstreams:\n  g:\n    streamable_http: {url: https://g.example.com/mcp}\n    credentials: per_tenant\ntenants:\n  a:\n    upstream_credentials:\n      g: {k: {type: api_key, value: v}}\n";
    assert!(
        refused(key)
            .iter()
            .any(|p| p.contains("tenants.a.upstream_credentials.g")),
        "{:?}",
        refused(key)
    );
    let stdio = "upstreams:\n  s:\n    stdio: {command: x}\n    credentials: per_tenant\n";
    assert_eq!(refused(stdio), ["upstreams.s.stdio.token_env"]);
}

/// A stdio server takes each caller's token in the variable `token_env` names: the
/// docs example is valid; the variable is needed with `per_tenant` and
/// `token_exchange`, refused elsewhere, a real variable name, and not also in `env`;
/// an exchange for a stdio server names its audience; `oauth` and
/// `client_credentials`, which learn the authorization server from an HTTP answer,
/// are refused.
#[test]
fn stdio_servers_take_each_callers_token_in_token_env() {
    let docs = page("docs/config.md");
    let block = yaml_block(&docs, |block| {
        block.contains("credentials: per_tenant") && block.contains("token_env")
    })
    .expect("docs/config.md has the per_tenant stdio example");
    let env = |name: &str| (name == "ACME_GITHUB_TOKEN").then(|| "ghp_example".to_owned());
    let config = Config::parse(block, &env).expect("the example parses");
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let paths = problem_paths;
    let stdio = |extra: &str, credentials: &str| {
        format!(
            "upstreams:\n  s:\n    stdio: {{command: x{extra}}}\n    credentials: {credentials}\n"
        )
    };
    assert_eq!(
        paths(&stdio(", token_env: T", "static")),
        ["upstreams.s.stdio.token_env"]
    );
    assert_eq!(
        paths(&stdio(", token_env: '1X'", "per_tenant")),
        ["upstreams.s.stdio.token_env"]
    );
    assert_eq!(
        paths(&stdio(", token_env: T, env: {T: x}", "per_tenant")),
        ["upstreams.s.stdio.token_env"]
    );
    assert!(paths(&stdio(", token_env: GH_TOKEN", "per_tenant")).is_empty());
    for source in ["oauth", "client_credentials"] {
        assert!(
            paths(&stdio(", token_env: T", source)).contains(&"upstreams.s.credentials".into()),
            "{source}: {:?}",
            paths(&stdio(", token_env: T", source))
        );
    }
    let exchange = "upstreams:\n  s:\n    stdio: {command: x, token_env: T}\n    credentials: token_exchange\n    oauth: {client_id: c, client_secret: s, issuer: 'https://idp.example.com'}\njwt: {issuer: 'https://idp.example.com', audience: gw, jwks_url: 'https://idp.example.com/jwks'}\n";
    let audience = "upstreams.s.oauth.audience".to_owned();
    assert!(paths(exchange).contains(&audience), "{:?}", paths(exchange));
    let with_audience = exchange.replace(
        "issuer: 'https://idp.example.com'}",
        "issuer: 'https://idp.example.com', audience: github}",
    );
    assert!(
        !paths(&with_audience)
            .iter()
            .any(|p| p.starts_with("upstreams.")),
        "{:?}",
        paths(&with_audience)
    );
}

/// The per-tenant credentials example of docs/config.md parses as it says.
#[test]
fn the_per_tenant_credentials_example_parses() {
    let docs = page("docs/config.md");
    let block = yaml_block(&docs, |block| {
        block.contains("credentials: per_tenant") && block.contains("openapi:")
    })
    .expect("docs/config.md has the per_tenant example");
    let env = |name: &str| (name == "ACME_BILLING_KEY").then(|| "acme-secret".to_owned());
    let config = Config::parse(block, &env).expect("the example parses");
    assert_eq!(
        config.upstreams["billing"].settings.credentials,
        CredentialSource::PerTenant
    );
    let own = &config.tenants["acme"].upstream_credentials["billing"]["api_key"];
    let toolgate_adapters::openapi::Credential::ApiKey { value } = own else {
        panic!("an api_key credential: {own:?}");
    };
    assert_eq!(value.expose(), "acme-secret");
}

/// The OAuth examples of docs/config.md and the README parse and are valid as they
/// say.
#[test]
fn the_oauth_examples_parse() {
    for name in ["docs/config.md", "README.md"] {
        check_oauth_example(&page(name));
    }
}

fn check_oauth_example(docs: &str) {
    let block = yaml_block(docs, |block| block.contains("credentials: oauth"))
        .expect("the page has an oauth example");
    let env = |name: &str| match name {
        "TOOLGATE_TOKEN_KEY" => Some("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=".to_owned()),
        "GITHUB_OAUTH_CLIENT_ID" => Some("Iv1.example".to_owned()),
        "GITHUB_OAUTH_CLIENT_SECRET" => Some("client-secret".to_owned()),
        _ => None,
    };
    let config = Config::parse(block, &env).expect("the example parses");
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let github = &config.upstreams["github"].settings;
    assert_eq!(github.credentials, CredentialSource::Oauth);
    let oauth = github.oauth.as_ref().expect("oauth settings");
    assert_eq!(oauth.client_id.as_deref(), Some("Iv1.example"));
    assert_eq!(config.oauth.token_keys.len(), 1);
}

/// The client credentials example of docs/config.md parses and is valid.
#[test]
fn the_client_credentials_example_parses() {
    let docs = page("docs/config.md");
    let block = yaml_block(&docs, |block| {
        block.contains("credentials: client_credentials")
    })
    .expect("docs/config.md has the client_credentials example");
    let env = |name: &str| {
        (name == "REPORTS_CLIENT_KEY").then(|| "-----BEGIN PRIVATE KEY-----".to_owned())
    };
    let config = Config::parse(block, &env).expect("the example parses");
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let reports = &config.upstreams["reports"].settings;
    assert_eq!(reports.credentials, CredentialSource::ClientCredentials);
    let oauth = reports.oauth.as_ref().expect("oauth settings");
    assert_eq!(
        oauth.signing_algorithm,
        Some(crate::config::oauth::SigningAlgorithm::ES256)
    );
    assert!(oauth.private_key.is_some());
}

/// `credentials: oauth` is refused where it cannot work: on a kind without
/// per-request credentials, without `public_url`, with Redis and no keys; and an
/// `oauth` block without it is pointed out.
#[test]
fn oauth_settings_are_checked() {
    let problems = |text: &str| -> Vec<String> {
        match Config::parse(text, &no_env) {
            Ok(config) => config.problems().iter().map(|p| p.path.clone()).collect(),
            Err(e) => vec![e.to_string()],
        }
    };
    let stdio = "public_url: https://t.example.com\nupstreams:\n  s:\n    stdio: {command: x}\n    credentials: oauth\n";
    assert!(
        problems(stdio)
            .iter()
            .any(|p| p.contains("upstreams.s.credentials")),
        "{:?}",
        problems(stdio)
    );
    let no_url = "upstreams:\n  h:\n    streamable_http: {url: https://h.example.com/mcp}\n    credentials: oauth\n";
    assert!(
        problems(no_url)
            .iter()
            .any(|p| p.contains("upstreams.h.credentials")),
        "{:?}",
        problems(no_url)
    );
    let redis = "public_url: https://t.example.com\nstate: {backend: redis, url: redis://127.0.0.1:6379}\nupstreams:\n  h:\n    streamable_http: {url: https://h.example.com/mcp}\n    credentials: oauth\n";
    assert!(
        problems(redis)
            .iter()
            .any(|p| p.contains("oauth.token_keys")),
        "{:?}",
        problems(redis)
    );
    let unused = "upstreams:\n  h:\n    streamable_http: {url: https://h.example.com/mcp}\n    oauth: {client_id: x}\n";
    assert!(
        problems(unused)
            .iter()
            .any(|p| p.contains("upstreams.h.oauth")),
        "{:?}",
        problems(unused)
    );
    let service = "upstreams:\n  h:\n    streamable_http: {url: https://h.example.com/mcp}\n    credentials: client_credentials\n    oauth: {client_id: x}\n";
    assert!(
        problems(service)
            .iter()
            .any(|p| p.contains("upstreams.h.oauth")),
        "{:?}",
        problems(service)
    );
    let service = "upstreams:\n  h:\n    streamable_http: {url: https://h.example.com/mcp}\n    credentials: client_credentials\n    oauth: {client_id: x, client_secret: y}\n";
    assert!(problems(service).is_empty(), "{:?}", problems(service));
    let fine = "public_url: https://t.example.com\nupstreams:\n  h:\n    streamable_http: {url: https://h.example.com/mcp}\n    credentials: oauth\n";
    assert!(problems(fine).is_empty(), "{:?}", problems(fine));
    // An OpenAPI upstream takes it, and may name its spec's scheme; an MCP one may not.
    let openapi = "public_url: https://t.example.com\nupstreams:\n  a:\n    openapi: {spec_url: https://a.example.com/o.json}\n    credentials: oauth\n    oauth: {scheme: user, client_id: x}\n";
    assert!(problems(openapi).is_empty(), "{:?}", problems(openapi));
    let scheme = "public_url: https://t.example.com\nupstreams:\n  h:\n    streamable_http: {url: https://h.example.com/mcp}\n    credentials: oauth\n    oauth: {scheme: user}\n";
    assert!(
        problems(scheme)
            .iter()
            .any(|p| p.contains("upstreams.h.oauth.scheme")),
        "{:?}",
        problems(scheme)
    );
}

/// The OpenAPI OAuth example of docs/config.md parses and is valid as it says.
#[test]
fn the_openapi_oauth_example_parses() {
    let docs = page("docs/config.md");
    let block = yaml_block(&docs, |block| {
        block.contains("credentials: oauth") && block.contains("openapi:")
    })
    .expect("docs/config.md has the openapi oauth example");
    let env = |name: &str| match name {
        "TOOLGATE_TOKEN_KEY" => Some("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=".to_owned()),
        "CRM_CLIENT_ID" => Some("crm-client".to_owned()),
        "CRM_CLIENT_SECRET" => Some("crm-secret".to_owned()),
        _ => None,
    };
    let config = Config::parse(block, &env).expect("the example parses");
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let crm = &config.upstreams["crm"].settings;
    assert_eq!(crm.credentials, CredentialSource::Oauth);
    let oauth = crm.oauth.as_ref().expect("oauth settings");
    assert_eq!(oauth.scheme.as_deref(), Some("userAuth"));
    assert_eq!(oauth.client_id.as_deref(), Some("crm-client"));
}

#[test]
fn exactly_one_transport() {
    let text = "upstreams:\n  ev:\n    namespace: none\n";
    let err = Config::parse(text, &no_env).unwrap_err().to_string();
    assert!(
        err.contains("upstreams.ev") && err.contains("exactly one"),
        "{err}"
    );
    let two = "upstreams:\n  ev:\n    stdio: {command: x}\n    sse: {url: 'http://a'}\n";
    assert!(Config::parse(two, &no_env).is_err());
}

#[test]
fn skills_upstreams_are_checked_and_resolved() {
    let err = |text: &str| Config::parse(text, &no_env).unwrap_err().to_string();
    let empty = err("upstreams:\n  sk:\n    skills: {paths: []}\n");
    assert!(
        empty.contains("upstreams.sk.skills.paths") && empty.contains("at least one"),
        "{empty}"
    );
    let blank = err("upstreams:\n  sk:\n    skills: {paths: [' ']}\n");
    assert!(blank.contains("upstreams.sk.skills.paths[0]"), "{blank}");
    let typo = err("upstreams:\n  sk:\n    skills: {path: [a]}\n");
    assert!(
        typo.contains("upstreams.sk.skills") && typo.contains("path"),
        "{typo}"
    );
    let both = err("upstreams:\n  sk:\n    skills: {paths: [a]}\n    stdio: {command: x}\n");
    assert!(both.contains("`skills` (found 2)"), "{both}");
    let dir = std::env::temp_dir().join("toolgate-config-skills-test");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("toolgate.yaml");
    let text = "upstreams:\n  sk:\n    skills: {paths: [skills, /abs/skills]}\n";
    let config = Config::load_text(&file, text).unwrap();
    let paths = &config.upstreams["sk"].skills().unwrap().paths;
    assert_eq!(
        paths,
        &[
            dir.join("skills").display().to_string(),
            "/abs/skills".into()
        ]
    );
}

#[test]
fn defaults_fill_in() {
    let config = Config::parse("{}", &no_env).unwrap();
    assert_eq!(config.listen, "127.0.0.1:8080");
    assert_eq!(config.call_timeout, Duration::from_secs(120));
    assert!(config.allowed_hosts.contains(&"localhost".to_owned()));
}

#[test]
fn durations_are_human() {
    let text = "call_timeout: 2m\nhealth: {interval: 500ms}\n";
    let config = Config::parse(text, &no_env).unwrap();
    assert_eq!(config.call_timeout, Duration::from_secs(120));
    assert_eq!(config.health.interval, Duration::from_millis(500));
}

#[test]
fn upstream_settings_fall_back_to_the_global_ones() {
    let config = Config::parse(
        "call_timeout: 7s\nhealth: {interval: 1s}\nupstreams:\n  \
         a: {stdio: {command: x}}\n  \
         b: {openapi: {spec_url: 'http://127.0.0.1:1/o.json'}, call_timeout: 2s, \
         health: {interval: 3s}, max_concurrent_calls: 4, audit_arguments: true, \
         result_max_tokens: 100, namespace: none}\n",
        &no_env,
    )
    .unwrap();
    let a = config.upstream_settings("a").unwrap();
    assert_eq!(a.call_timeout, Duration::from_secs(7));
    assert_eq!(a.health.interval, Duration::from_secs(1));
    assert_eq!(a.max_concurrent_calls, 64);
    assert!(!a.audit_arguments);
    let b = config.upstream_settings("b").unwrap();
    assert_eq!(b.call_timeout, Duration::from_secs(2));
    assert_eq!(b.health.interval, Duration::from_secs(3));
    assert_eq!(
        (
            b.max_concurrent_calls,
            b.audit_arguments,
            b.result_max_tokens
        ),
        (4, true, Some(100))
    );
    assert_eq!(b.namespace, Namespace::None);
    assert_eq!(config.upstreams["b"].kind_name(), "openapi");
    assert!(config.upstream_settings("c").is_none());
    assert_eq!(
        config.resolve(&UpstreamSettings::default()),
        config.upstream_settings("a").unwrap()
    );
}

#[test]
fn rate_limits_take_one_window() {
    let rate = |limit: &str| {
        Config::parse(
            &format!("tenants:\n  t:\n    rate_limit: {limit}\n"),
            &no_env,
        )
        .map(|c| c.tenants["t"].rate_limit.as_ref().unwrap().rate())
        .map_err(|e| e.to_string())
    };
    let old = rate("{per_second: 10, burst: 20}").unwrap();
    assert_eq!(
        (old.count, old.window, old.burst),
        (10, Duration::from_secs(1), 20)
    );
    let hourly = rate("{per_hour: 20}").unwrap();
    assert_eq!(hourly.emission_interval(), Duration::from_secs(180));
    assert_eq!(hourly.burst, 20);
    assert_eq!(hourly.divided(3).burst, 7);
    assert_eq!(
        rate("{per_minute: 6}").unwrap().window,
        Duration::from_secs(60)
    );
    let both = rate("{per_second: 1, per_minute: 2}").unwrap_err();
    assert!(
        both.contains("tenants.t.rate_limit") && both.contains("exactly one"),
        "{both}"
    );
    assert!(rate("{burst: 2}").unwrap_err().contains("exactly one"));
    assert!(rate("{per_second: 0}").unwrap_err().contains("at least 1"));
    assert!(
        rate("{per_second: 1, burst: 0}")
            .unwrap_err()
            .contains("`burst` must be at least 1")
    );
    let typo = rate("{per_secnd: 1}").unwrap_err();
    assert!(
        typo.contains("tenants.t.rate_limit") && typo.contains("per_secnd"),
        "{typo}"
    );
}

#[test]
fn schema_is_generated() {
    let schema = Config::json_schema();
    assert!(schema["properties"]["upstreams"].is_object(), "{schema}");
    // The typed groups are described in the file's shape.
    let upstream = &schema["$defs"]["UpstreamConfig"];
    assert!(upstream["properties"]["stdio"].is_object(), "{upstream}");
    assert!(
        upstream["properties"]["namespace"].is_object(),
        "{upstream}"
    );
    assert_eq!(upstream["additionalProperties"], false, "{upstream}");
    let limit = &schema["$defs"]["RateLimitConfig"];
    assert!(limit["properties"]["per_hour"].is_object(), "{limit}");
}
