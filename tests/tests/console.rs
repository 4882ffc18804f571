//! The web console at `/console`, from outside.
//!
//! 1. Plain HTTP: a wrong credential is refused with one answer whatever was wrong,
//!    the session cookie carries its flags, a cross-site POST is refused, every answer
//!    sends a Content-Security-Policy and may not be framed, a tenant's session is
//!    read-only and never sees the credential echoed back, a rejected config reload
//!    shows in the reload history with its reason. One principal signing in over and
//!    over signs nobody else out; wrong sign-ins are throttled per address.
//!    With the state in Redis a console session signed in on one replica works on
//!    another, and ends on both when signed out on either.
//! 2. A real browser (Debian's `chromium`, driven by npm `playwright-core` from
//!    `tests/node/console_browser.mjs`) against a gateway with two upstreams — an MCP
//!    server (npm server-everything over streamable HTTP) and an OpenAPI API served
//!    here on 127.0.0.1: sign in, see both healthy, search the catalog, open a tool,
//!    run it and watch its progress events arrive (and another's result marked
//!    truncated), preview then register the petstore spec by URL and read the reports,
//!    refresh it, check a tenant's denied tool is absent and explained, then
//!    kill the MCP server and watch its row turn down, delete the registered API. Every
//!    form control on the pages visited has a label. Screenshots of every page go to
//!    `<target dir>/console-screenshots/`.
//!
//! 3. The connections page with an OAuth-protected MCP server (`credentials: oauth`,
//!    `toolgate_e2e::oauth_upstream`): over plain HTTP, each user sees only what their
//!    tenant may use, connects and disconnects; in the browser
//!    (`tests/node/console_connections_browser.mjs`), a user connects through the
//!    upstream's authorization server and back, and disconnects (the token revoked).
//!
//! Without chromium, `playwright-core` or the shared spec corpus the browser tests
//! print a notice and skip; under `CI=true` that is a failure.

use std::path::PathBuf;
use std::time::Duration;

use axum::Json;
use axum::routing::get;
use serde_json::{Value, json};
use toolgate_e2e::browser::{chromium, has_playwright, run_script, screenshot_dir};
use toolgate_e2e::oauth_upstream::{OAuthUpstream, connect_as};
use toolgate_e2e::{
    Everything, Gateway, NodeDeps, hash_key, heavy_lock, require, run_bounded, specs_dir, wait_for,
    workspace_root,
};

const ADMIN_TOKEN: &str = "console-admin-token-0123456789";
const OPS_KEY: &str = "console-ops-key-0123456789";
const VIEWER_KEY: &str = "console-viewer-key-0123456789";

/// A client that shows redirects instead of following them.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("reqwest client")
}

fn tenants() -> Value {
    json!({
        "ops": {"api_keys": [hash_key(OPS_KEY)], "allow": ["*"]},
        "viewer": {
            "api_keys": [hash_key(VIEWER_KEY)],
            "allow": ["ev__*", "notes__*", "!ev__echo"]
        }
    })
}

/// Signs in with `token`: the session cookie (`name=value`) and the page's CSRF token.
async fn sign_in(gateway: &Gateway, token: &str) -> (String, String) {
    let client = client();
    let response = client
        .post(gateway.url("/console/login"))
        .form(&[("token", token)])
        .send()
        .await
        .expect("POST /console/login");
    assert_eq!(response.status(), 303, "sign-in with a valid credential");
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a session cookie")
        .split(';')
        .next()
        .unwrap_or_default()
        .to_owned();
    let page = client
        .get(gateway.url("/console"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("GET /console")
        .text()
        .await
        .expect("the page");
    let csrf = page
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page's CSRF token")
        .to_owned();
    (cookie, csrf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_refuses_wrong_tokens_and_cross_site_requests() {
    let gateway = Gateway::start(json!({
        "admin": {"token": ADMIN_TOKEN},
        "tenants": tenants(),
    }))
    .await;
    let client = client();

    // Every answer: a strict CSP, no framing; no session: to the sign-in page.
    let response = client
        .get(gateway.url("/console"))
        .send()
        .await
        .expect("GET /console");
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/console/login");
    let login = client
        .get(gateway.url("/console/login"))
        .send()
        .await
        .expect("GET /console/login");
    let headers = login.headers().clone();
    let csp = headers["content-security-policy"].to_str().expect("CSP");
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(headers["x-frame-options"], "DENY");
    let page = login.text().await.expect("sign-in page");
    assert!(
        !page.contains("<script>") && !page.contains(" style="),
        "no inline script or style: {page}"
    );

    // A wrong credential: 401, no cookie, the same page whatever was wrong.
    let mut refusals = Vec::new();
    for wrong in [
        "wrong",
        "",
        &format!("{ADMIN_TOKEN}x"),
        "eyJhbGciOiJIUzI1NiJ9.e30.x",
    ] {
        let response = client
            .post(gateway.url("/console/login"))
            .form(&[("token", wrong)])
            .send()
            .await
            .expect("POST /console/login");
        assert_eq!(response.status(), 401, "{wrong:?}");
        assert!(response.headers().get("set-cookie").is_none());
        let body = response.text().await.expect("body");
        if !wrong.is_empty() {
            assert!(!body.contains(wrong), "the credential is not echoed back");
        }
        refusals.push(body);
    }
    assert!(
        refusals.windows(2).all(|w| w[0] == w[1]),
        "one answer for every wrong credential"
    );

    // DNS rebinding: a page under a foreign name reaches neither the console nor its
    // sign-in, even with the right token.
    let rebound = client
        .get(gateway.url("/console"))
        .header("host", "evil.example")
        .send()
        .await
        .expect("GET /console with a foreign Host");
    assert_eq!(rebound.status(), 403);
    let rebound = client
        .post(gateway.url("/console/login"))
        .header("host", "evil.example")
        .form(&[("token", ADMIN_TOKEN)])
        .send()
        .await
        .expect("POST /console/login with a foreign Host");
    assert_eq!(rebound.status(), 403);
    assert!(rebound.headers().get("set-cookie").is_none());

    // The session cookie's flags; Secure when the request came over TLS.
    let response = client
        .post(gateway.url("/console/login"))
        .form(&[("token", ADMIN_TOKEN)])
        .send()
        .await
        .expect("sign in");
    assert_eq!(response.status(), 303);
    let cookie = response.headers()["set-cookie"].to_str().expect("cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let response = client
        .post(gateway.url("/console/login"))
        .header("x-forwarded-proto", "https")
        .form(&[("token", ADMIN_TOKEN)])
        .send()
        .await
        .expect("sign in over TLS");
    let cookie = response.headers()["set-cookie"].to_str().expect("cookie");
    assert!(cookie.contains("; Secure"), "{cookie}");

    // Cross-site POSTs are refused: a foreign Origin, a cross-site fetch, a missing
    // CSRF token; the sign-in form from another site too.
    let (cookie, csrf) = sign_in(&gateway, ADMIN_TOKEN).await;
    let own_origin = gateway.base.clone();
    let register = |origin: Option<&str>, site: Option<&str>, token: &str| {
        let mut request = client
            .post(gateway.url("/console/register"))
            .header("cookie", &cookie)
            .form(&[
                ("csrf", token),
                ("name", "evil"),
                ("spec_url", "http://127.0.0.1:1/x.json"),
            ]);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        if let Some(site) = site {
            request = request.header("sec-fetch-site", site);
        }
        request.send()
    };
    let foreign = register(Some("http://evil.example"), None, &csrf)
        .await
        .expect("POST");
    assert_eq!(foreign.status(), 403, "foreign Origin");
    let cross = register(None, Some("cross-site"), &csrf)
        .await
        .expect("POST");
    assert_eq!(cross.status(), 403, "Sec-Fetch-Site: cross-site");
    let tokenless = register(Some(&own_origin), None, "").await.expect("POST");
    assert_eq!(tokenless.status(), 403, "no CSRF token");
    let login_from_elsewhere = client
        .post(gateway.url("/console/login"))
        .header("origin", "http://evil.example")
        .form(&[("token", ADMIN_TOKEN)])
        .send()
        .await
        .expect("POST");
    assert_eq!(login_from_elsewhere.status(), 403);
    // The same form from the console's own page goes through (and fails only on the
    // unreachable spec).
    let own = register(Some(&own_origin), Some("same-origin"), &csrf)
        .await
        .expect("POST");
    assert_eq!(
        own.status(),
        422,
        "same-origin with the token reaches the import"
    );
    let call = client
        .post(gateway.url("/console/tools/x/call"))
        .header("cookie", &cookie)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("POST call");
    assert_eq!(call.status(), 403, "a call without X-CSRF-Token");

    // A tenant's session: read-only, its key never written back into a page.
    let (tenant_cookie, tenant_csrf) = sign_in(&gateway, VIEWER_KEY).await;
    for path in ["/console", "/console/catalog", "/console/tenants"] {
        let response = client
            .get(gateway.url(path))
            .header("cookie", &tenant_cookie)
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), 200, "{path}");
        let page = response.text().await.expect("page");
        assert!(page.contains("tenant viewer (read-only)"), "{path}");
        assert!(!page.contains(VIEWER_KEY) && !page.contains(ADMIN_TOKEN));
    }
    for path in ["/console/register", "/console/health"] {
        let response = client
            .get(gateway.url(path))
            .header("cookie", &tenant_cookie)
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), 404, "{path} is the admin's");
    }
    let response = client
        .post(gateway.url("/console/register"))
        .header("cookie", &tenant_cookie)
        .form(&[
            ("csrf", tenant_csrf.as_str()),
            ("name", "x"),
            ("spec_url", "http://127.0.0.1:1/"),
        ])
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status(), 404, "a tenant cannot register");

    // The health page: ready, and a rejected reload in the history with its reason.
    let health = |cookie: String| {
        let client = client.clone();
        let url = gateway.url("/console/health");
        async move {
            let response = client.get(url).header("cookie", cookie).send().await.ok()?;
            response.text().await.ok()
        }
    };
    let page = health(cookie.clone()).await.expect("GET /console/health");
    assert!(page.contains("id=\"readiness\">ready<"), "{page}");
    assert!(
        page.contains("No reload since the gateway started"),
        "{page}"
    );
    std::fs::write(&gateway.config_path, "tenants: [not, a, map]\n").expect("write config");
    let page = wait_for(
        "a rejected reload on /console/health",
        Duration::from_secs(30),
        || {
            let page = health(cookie.clone());
            async move { page.await.filter(|p| p.contains(">rejected<")) }
        },
    )
    .await;
    assert!(
        page.contains("tenants"),
        "the reason names what is wrong: {page}"
    );

    // Signing out ends the session.
    let response = client
        .post(gateway.url("/console/logout"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("sign out");
    assert_eq!(response.status(), 303);
    let response = client
        .get(gateway.url("/console"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("GET");
    assert_eq!(response.headers()["location"], "/console/login");
}

/// A small OpenAPI API ("notes") and the petstore spec file, served on 127.0.0.1.
async fn serve_api(petstore: PathBuf) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the test API");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let spec = json!({
        "openapi": "3.0.3",
        "info": {"title": "Notes", "version": "1.0.0"},
        "servers": [{"url": base}],
        "paths": {
            "/notes": {
                "get": {
                    "operationId": "listNotes",
                    "summary": "List the notes",
                    "responses": {"200": {"description": "the notes"}}
                },
                "post": {
                    "operationId": "addNote",
                    "summary": "Add a note",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {
                        "type": "object",
                        "required": ["text"],
                        "properties": {"text": {"type": "string", "description": "the note"}}
                    }}}},
                    "responses": {"201": {"description": "added"}}
                }
            }
        }
    });
    let router = axum::Router::new()
        .route("/openapi.json", get(move || async move { Json(spec) }))
        .route(
            "/notes",
            // Far over the upstream's result budget: the console marks the cut.
            get(|| async {
                let notes: Vec<Value> = (0..200)
                    .map(|i| json!({"id": i, "text": format!("note number {i} about the weather")}))
                    .collect();
                Json(Value::Array(notes))
            })
            .post(|| async { Json(json!({"ok": true})) }),
        )
        .route(
            "/petstore.yaml",
            get(move || async move { std::fs::read_to_string(&petstore).unwrap_or_default() }),
        );
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (base, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    let deps = require!(NodeDeps::everything());
    let chromium = require!(chromium());
    if !has_playwright(&deps) {
        return;
    }
    let specs = require!(specs_dir(&["oai-v3.0-petstore.yaml"]));
    let _serial = heavy_lock().await;
    let (api, _api_task) = serve_api(specs.join("oai-v3.0-petstore.yaml")).await;
    let ev = Everything::start(&deps, "streamableHttp").await;
    let gateway = Gateway::start(json!({
        "admin": {"token": ADMIN_TOKEN},
        "health": {"interval": "1s", "timeout": "2s", "failures_before_down": 2},
        "tenants": tenants(),
        "upstreams": {
            "ev": {"streamable_http": {"url": ev.url, "headers": {}}},
            "notes": {
                "openapi": {
                    "spec_url": format!("{api}/openapi.json"),
                    "allow_private_networks": true
                },
                "result_max_tokens": 200
            }
        }
    }))
    .await;
    let shots = screenshot_dir("console-screenshots");
    let mut cmd = std::process::Command::new(deps.node());
    cmd.arg(workspace_root().join("tests/node/console_browser.mjs"))
        .current_dir(workspace_root())
        .env("NODE_MODULES", &deps.node_modules)
        .env("GATEWAY_URL", &gateway.base)
        .env("ADMIN_TOKEN", ADMIN_TOKEN)
        .env("TENANT_KEY", VIEWER_KEY)
        .env("TENANT", "viewer")
        .env("CALL_TENANT", "ops")
        .env("PETSTORE_URL", format!("{api}/petstore.yaml"))
        .env("PETSTORE_BASE", format!("{api}/petstore"))
        .env("EV_PID", ev.proc.pid().to_string())
        .env("CHROMIUM", &chromium)
        .env("SCREENSHOT_DIR", &shots);
    let log = shots.with_extension("log");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = std::fs::File::create(&log).expect("browser log");
    cmd.stdout(out.try_clone().expect("log")).stderr(out);
    let status = run_bounded(&mut cmd, Duration::from_secs(300))
        .unwrap_or_else(|e| panic!("the browser scenario: {e}"));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.success(),
        "the browser scenario failed ({status}):\n{text}\n{}",
        gateway.proc.logs()
    );
    let summary: Value = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no summary line:\n{text}"));
    assert_eq!(summary["ok"], true, "{text}");
    for step in [
        "login",
        "upstreams",
        "search",
        "detail",
        "try",
        "truncated",
        "register",
        "refresh",
        "tenants",
        "health",
        "tenant-view",
        "down",
        "delete",
    ] {
        assert!(text.contains(&format!("step {step} ok")), "{step}:\n{text}");
    }
    for shot in [
        "01-login",
        "02-upstreams",
        "03-catalog-search",
        "04-tool-detail",
        "05-try-tool",
        "05-try-truncated",
        "06-register-preview",
        "07-register",
        "08-tenants",
        "09-health",
        "10-tenant-catalog",
        "11-upstream-down",
    ] {
        assert!(shots.join(format!("{shot}.png")).is_file(), "{shot}.png");
    }
    eprintln!("console screenshots: {}", shots.display());
}

/// The Console example of docs/console.md, run as written: its config block starts the
/// gateway (the token from the environment) and its `curl` line signs in, printing the
/// cookie the page shows (only the gateway's address differs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_console_example_runs_as_written() {
    let readme =
        std::fs::read_to_string(workspace_root().join("docs/console.md")).expect("docs/console.md");
    let section = &readme[readme.find("# Console").expect("the Console section")..];
    let block = |fence: &str| {
        let start = section.find(fence).expect("a code block") + fence.len();
        section[start..start + section[start..].find("```").expect("its end")].to_owned()
    };
    let config: Value = serde_norway::from_str(&block("```yaml\n")).expect("the YAML block");
    let token = "readme-console-token-0123456789";
    let gateway = Gateway::start_with_env(config, &[("TOOLGATE_ADMIN_TOKEN", token)]).await;
    let shell = block("```sh\n");
    let mut lines = shell.lines();
    let command = lines.next().expect("the curl line");
    let shown = lines
        .next()
        .and_then(|l| l.strip_prefix("# "))
        .expect("the output the README shows");
    let command = command.replace("http://127.0.0.1:8080", &gateway.base);
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("timeout 30 {command}"))
            .env("TOOLGATE_ADMIN_TOKEN", token)
            .output()
            .expect("bash")
    })
    .await
    .expect("the example");
    let printed = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let (before, after) = shown.split_once('…').expect("the README elides the id");
    assert!(
        printed.starts_with(before) && printed.ends_with(after),
        "the README shows `{shown}`, the example printed `{printed}`"
    );
}

/// Sign-ins in a loop: a tenant's key signing in 70 times signs nobody else out (the
/// admin's session still works), and 300 wrong sign-ins from one address are
/// throttled (429 with `Retry-After`, the same for the right token from there) while
/// the right token from another address (127.0.0.2) still signs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ins_in_a_loop_sign_nobody_out_and_are_throttled_per_address() {
    let gateway = Gateway::start(json!({
        "admin": {"token": ADMIN_TOKEN},
        "tenants": tenants(),
    }))
    .await;
    let client = client();
    let post = |client: &reqwest::Client, token: &str| {
        client
            .post(gateway.url("/console/login"))
            .form(&[("token", token.to_owned())])
            .send()
    };
    let (admin_cookie, _) = sign_in(&gateway, ADMIN_TOKEN).await;
    for n in 0..70 {
        let response = post(&client, VIEWER_KEY).await.expect("sign in");
        assert_eq!(response.status(), 303, "sign-in {n} of the tenant's key");
    }
    let admin_page = client
        .get(gateway.url("/console"))
        .header("cookie", &admin_cookie)
        .send()
        .await
        .expect("GET /console as the admin");
    assert_eq!(
        admin_page.status(),
        200,
        "the admin is still signed in after 70 sign-ins of a tenant's key"
    );

    let started = std::time::Instant::now();
    let (mut refused, mut throttled) = (0, 0);
    let mut retry_after = Vec::new();
    for n in 0..300 {
        let response = post(&client, &format!("wrong-guess-{n}"))
            .await
            .expect("a wrong sign-in");
        match response.status().as_u16() {
            401 => refused += 1,
            429 => {
                throttled += 1;
                retry_after.push(
                    response.headers()["retry-after"]
                        .to_str()
                        .ok()
                        .and_then(|v| v.parse::<u64>().ok())
                        .expect("a numeric Retry-After"),
                );
            }
            other => panic!("wrong sign-in {n}: unexpected {other}"),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "answered promptly"
    );
    assert!(refused <= 12, "a burst, then throttled: {refused} refused");
    assert!(throttled >= 288, "{throttled} throttled");
    assert!(
        retry_after.iter().all(|s| (1..=10).contains(s)),
        "{retry_after:?}"
    );
    let same_address = post(&client, ADMIN_TOKEN).await.expect("sign in");
    assert_eq!(
        same_address.status(),
        429,
        "a throttled address is throttled before its credential is checked"
    );
    let elsewhere = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(Some(std::net::IpAddr::from([127, 0, 0, 2])))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a client on 127.0.0.2");
    let response = post(&elsewhere, ADMIN_TOKEN)
        .await
        .expect("sign in from 127.0.0.2");
    assert_eq!(
        response.status(),
        303,
        "another address signs in while the guesser's is throttled"
    );
}

/// With `state.backend: redis` a console session signed in on one replica goes on on
/// another (no sticky routing needed), and signing out on either ends it on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_sessions_are_shared_between_replicas() {
    let url = require!(toolgate_e2e::redis::shared_redis().await);
    let prefix = toolgate_e2e::redis::unique_prefix("console");
    let config = json!({
        "state": {"backend": "redis", "url": url, "key_prefix": prefix, "replicas": 2},
        "admin": {"token": ADMIN_TOKEN},
        "tenants": tenants(),
    });
    let (a, b) = tokio::join!(Gateway::start(config.clone()), Gateway::start(config));
    let client = client();
    let (cookie, csrf) = sign_in(&a, VIEWER_KEY).await;
    let on_b = client
        .get(b.url("/console/tenants"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("GET on B");
    assert_eq!(on_b.status(), 200, "the session signed in on A works on B");
    let page = on_b.text().await.expect("page");
    assert!(page.contains("tenant viewer (read-only)"), "{page}");
    assert!(
        page.contains(&csrf),
        "the same session, the same CSRF token"
    );
    let out = client
        .post(b.url("/console/logout"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("sign out on B");
    assert_eq!(out.status(), 303);
    let on_a = client
        .get(a.url("/console"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("GET on A");
    assert_eq!(on_a.status(), 303, "signed out on B is signed out on A");
    assert_eq!(on_a.headers()["location"], "/console/login");
    toolgate_e2e::redis::delete_prefix(&url, &prefix).await;
}

const ALICE_KEY: &str = "console-alice-key-0123456789";
const OLGA_KEY: &str = "console-olga-key-0123456789";
const ACME_KEY: &str = "console-acme-key-0123456789";

/// A gateway in front of the OAuth-protected MCP server `gh` (`credentials: oauth`):
/// alice's own key in tenant acme (which may use gh), a key of acme naming no user,
/// and olga's in tenant outsiders (which may not).
async fn oauth_gateway(upstream: &OAuthUpstream) -> Gateway {
    let key = |key: &str, subject: &str| json!({"hash": hash_key(key), "subject": subject});
    Gateway::start(json!({
        "public_url": "@GATEWAY_BASE@",
        "admin": {"token": ADMIN_TOKEN},
        "upstreams": {"gh": {
            "streamable_http": {"url": upstream.mcp_url()},
            "credentials": "oauth",
            "oauth": {"allow_private_networks": true},
        }},
        "tenants": {
            "acme": {"api_keys": [key(ALICE_KEY, "alice"), hash_key(ACME_KEY)]},
            "outsiders": {"api_keys": [key(OLGA_KEY, "olga")], "allow": ["other__*"]},
        }
    }))
    .await
}

/// The console's connections page as the session `cookie` sees it.
async fn connections_page(gateway: &Gateway, cookie: &str) -> (u16, String) {
    console_page(gateway, cookie, "/console/connections").await
}

/// A console page at `path` as the session of `cookie` sees it.
async fn console_page(gateway: &Gateway, cookie: &str, path: &str) -> (u16, String) {
    let response = client()
        .get(gateway.url(path))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = response.status().as_u16();
    (status, response.text().await.expect("the page"))
}

/// A connections form's POST (`action`: `connect` or `disconnect`) from the console's
/// own page.
async fn connections_post(
    gateway: &Gateway,
    (cookie, csrf): (&str, &str),
    upstream: &str,
    action: &str,
) -> reqwest::Response {
    client()
        .post(gateway.url(&format!("/console/connections/{upstream}/{action}")))
        .header("cookie", cookie)
        .header("origin", &gateway.base)
        .header("sec-fetch-site", "same-origin")
        .form(&[("csrf", csrf)])
        .send()
        .await
        .expect("POST a connections form")
}

/// The connections page over plain HTTP: a user sees the OAuth upstreams their tenant
/// may use with their own state, connects through the link the Connect button sends
/// them to and disconnects (the token revoked at the upstream); a user of a tenant
/// that may not use the upstream never sees it and addressing it is answered as for an
/// upstream that does not exist; a key naming no user is told its connections are the
/// tenant's; the admin is told connections are users' and connects nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connections_page_shows_each_user_their_own() {
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let gateway = oauth_gateway(&upstream).await;

    // Alice: gh, not connected, with a Connect button.
    let (alice_cookie, alice_csrf) = sign_in(&gateway, ALICE_KEY).await;
    let alice = (alice_cookie.as_str(), alice_csrf.as_str());
    let (status, page) = connections_page(&gateway, alice.0).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("alice of tenant acme"), "{page}");
    assert!(
        page.contains("data-connection=\"gh\" data-connected=\"false\""),
        "{page}"
    );
    assert!(page.contains("aria-label=\"Connect gh\""), "{page}");
    assert!(
        page.contains("href=\"/console/connections\""),
        "the nav links it"
    );
    assert!(!page.contains(ALICE_KEY), "the key is not written back");

    // Without the page's CSRF token: refused.
    let tokenless = connections_post(&gateway, (alice.0, ""), "gh", "connect").await;
    assert_eq!(tokenless.status(), 403, "no CSRF token");

    // The tenant's shared account connects first (over REST): with two accounts'
    // lists known, what one of them alone has is no one else's to see.
    let (status, body) = toolgate_e2e::rest_post(
        &gateway,
        "/v1/connections/gh",
        Some(ACME_KEY),
        serde_json::json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    connect_as(
        body["connect_url"].as_str().expect("connect_url"),
        "acme-team",
    )
    .await
    .expect("the tenant's account connects");

    // Connect: to the user's own connect link on the gateway, through it to the
    // upstream's authorization server and back; the page shows it connected.
    let connect = connections_post(&gateway, alice, "gh", "connect").await;
    assert_eq!(connect.status(), 303, "Connect sends the browser on");
    let link = connect.headers()["location"]
        .to_str()
        .expect("Location")
        .to_owned();
    assert!(
        link.starts_with(&format!("{}/oauth/connect/", gateway.base)),
        "{link}"
    );
    connect_as(&link, "alice").await.expect("alice connects");
    // Her catalog and its search are her own now: the tool her account alone has.
    let mut catalog = String::new();
    for _ in 0..100 {
        catalog = console_page(&gateway, alice.0, "/console/catalog").await.1;
        if catalog.contains("gh__alice_notes") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(catalog.contains("gh__alice_notes"), "{catalog}");
    let (_, found) = console_page(&gateway, alice.0, "/console/catalog?q=private+notes").await;
    assert!(found.contains("gh__alice_notes"), "{found}");
    // (The tenant's account goes again: what follows is about Alice's alone.)
    let gone = client()
        .delete(gateway.url("/v1/connections/gh"))
        .bearer_auth(ACME_KEY)
        .send()
        .await
        .expect("disconnect the tenant's account");
    assert_eq!(gone.status(), 204);
    let (_, page) = connections_page(&gateway, alice.0).await;
    assert!(
        page.contains("data-connection=\"gh\" data-connected=\"true\""),
        "{page}"
    );
    assert!(
        page.contains("<code>whoami</code>"),
        "the granted scope: {page}"
    );
    assert!(page.contains("aria-label=\"Disconnect gh\""), "{page}");

    // Olga's tenant may not use gh: not listed, and addressing it is answered as
    // addressing an upstream that does not exist.
    let (olga_cookie, olga_csrf) = sign_in(&gateway, OLGA_KEY).await;
    let olga = (olga_cookie.as_str(), olga_csrf.as_str());
    let (status, page) = connections_page(&gateway, olga.0).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        !page.contains("data-connection") && !page.contains(">gh<") && !page.contains("/gh/"),
        "olga's page never names gh: {page}"
    );
    assert!(page.contains("No upstream you may use"), "{page}");
    for action in ["connect", "disconnect"] {
        let hidden = connections_post(&gateway, olga, "gh", action).await;
        assert_eq!(hidden.status(), 404, "{action} gh as olga");
        let hidden = hidden.text().await.expect("body");
        let missing = connections_post(&gateway, olga, "nope", action).await;
        assert_eq!(
            missing.status(),
            404,
            "{action} an upstream that does not exist"
        );
        assert_eq!(
            hidden,
            missing.text().await.expect("body"),
            "one answer for both"
        );
    }
    assert_eq!(
        upstream.authorizations(),
        2,
        "only alice and the tenant's own account went to consent"
    );

    // A key naming no user: the tenant's own connections, said as such.
    let (acme_cookie, _) = sign_in(&gateway, ACME_KEY).await;
    let (_, page) = connections_page(&gateway, &acme_cookie).await;
    assert!(page.contains("names no user"), "{page}");
    assert!(
        page.contains("data-connection=\"gh\" data-connected=\"false\""),
        "alice's connection is hers, not the tenant's: {page}"
    );

    // The admin: told whose connections are, shown which upstreams take them, and
    // connecting nothing.
    let (admin_cookie, admin_csrf) = sign_in(&gateway, ADMIN_TOKEN).await;
    let (status, page) = connections_page(&gateway, &admin_cookie).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Connections belong to users"), "{page}");
    assert!(
        page.contains("id=\"oauth-upstreams\"><li><a href=\"/console/catalog?upstream=gh\">gh</a>"),
        "{page}"
    );
    let refused = connections_post(&gateway, (&admin_cookie, &admin_csrf), "gh", "connect").await;
    assert_eq!(refused.status(), 404, "the admin connects no account");

    // Disconnect: forgotten, revoked at the upstream, and said so.
    let revoked = upstream.revoked();
    let disconnect = connections_post(&gateway, alice, "gh", "disconnect").await;
    assert_eq!(disconnect.status(), 200);
    let page = disconnect.text().await.expect("the page");
    assert!(page.contains("Disconnected from gh"), "{page}");
    assert!(
        page.contains("data-connection=\"gh\" data-connected=\"false\""),
        "{page}"
    );
    assert!(
        upstream.revoked() > revoked,
        "the token was revoked at the upstream"
    );
}

/// The connections page in a real browser (`tests/node/console_connections_browser.mjs`):
/// alice signs in with her own key, sees gh not connected, presses Connect, confirms
/// on the gateway's connect page, is signed in at the upstream's authorization server
/// (its `user` cookie) and comes back to the gateway's connected page; the page shows
/// gh connected with its scope; Disconnect turns it back, and the upstream counts the
/// revocation. Screenshots go to `<target dir>/console-screenshots/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_connect_and_disconnect_in_the_console_in_a_real_browser() {
    let deps = require!(NodeDeps::everything());
    let chromium = require!(chromium());
    if !has_playwright(&deps) {
        return;
    }
    let _serial = heavy_lock().await;
    let upstream = OAuthUpstream::start(Duration::from_secs(3600)).await;
    let gateway = oauth_gateway(&upstream).await;
    let shots = screenshot_dir("console-screenshots");
    let log = shots.join("connections.log");
    let env = [
        ("GATEWAY_URL", gateway.base.clone()),
        ("USER_KEY", ALICE_KEY.to_owned()),
        ("USER", "alice".to_owned()),
        ("TENANT", "acme".to_owned()),
        ("UPSTREAM", "gh".to_owned()),
        ("AUTH_SERVER", upstream.base.clone()),
        ("SCREENSHOT_DIR", shots.display().to_string()),
    ];
    let outcome = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        run_script(
            &deps,
            &chromium,
            "console_connections_browser.mjs",
            &env,
            &log,
            Duration::from_secs(180),
        )
    })
    .await
    .expect("the browser run");
    let summary = outcome.unwrap_or_else(|output| {
        panic!(
            "the connections scenario failed:\n{output}\n{}",
            gateway.proc.logs()
        )
    });
    assert_eq!(summary["ok"], true, "{summary}");
    assert_eq!(upstream.authorizations(), 1, "alice consented once");
    assert!(
        upstream.revoked() >= 1,
        "Disconnect revoked the token at the upstream"
    );
    for shot in [
        "20-connections",
        "21-connect-link",
        "22-connected",
        "23-connections-connected",
        "24-disconnected",
    ] {
        assert!(shots.join(format!("{shot}.png")).is_file(), "{shot}.png");
    }
}
