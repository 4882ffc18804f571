//! Hostile specs and registrations through the admin API, against the real binary:
//! OAuth2 token URLs and `servers` on internal addresses (every IPv6 form that carries
//! an IPv4), local files named by a registration or a `$ref`, specs built to take the
//! gateway's memory, schema keywords the validator cannot use, and configured headers
//! on a redirect to another origin. Every attack asserts the refusal and that nothing
//! reached the loopback canary listening where the attack pointed.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate_e2e::{Gateway, TempDir, heavy_lock, http, rest_get, rest_post, wait_for};

const ADMIN_TOKEN: &str = "admin-token-for-hostile-spec-tests-0123";

/// A loopback listener recording the head of every request it gets (a connection
/// that sends nothing is recorded too) and answering each with `reply(path)`.
struct Canary {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Canary {
    async fn start(reply: impl Fn(&str) -> String + Send + Sync + 'static) -> Canary {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (log, reply) = (seen.clone(), Arc::new(reply));
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (log, reply) = (log.clone(), reply.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    let read = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf));
                    let n = match read.await {
                        Ok(Ok(n)) => n,
                        _ => 0,
                    };
                    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                    log.lock().unwrap().push(head);
                    let _ = sock.write_all(reply(&path).as_bytes()).await;
                });
            }
        });
        Canary { port, seen }
    }

    /// A canary answering 500 to everything.
    async fn refusing() -> Canary {
        Canary::start(|_| {
            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                .to_owned()
        })
        .await
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn redirect_to(location: &str) -> String {
    format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

async fn admin(
    gw: &Gateway,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = http()
        .request(method.clone(), gw.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .timeout(Duration::from_secs(120));
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn register(gw: &Gateway, name: &str, openapi: Value) -> (u16, Value) {
    admin(
        gw,
        reqwest::Method::POST,
        "/admin/upstreams",
        Some(json!({"name": name, "openapi": openapi})),
    )
    .await
}

/// The error text of a REST call's answer, whatever its status.
fn message_of(body: &Value) -> String {
    body.to_string()
}

/// A 3.0 spec with one `GET /things` operation (`list`) on `server`, optionally
/// requiring OAuth2 client credentials from `token_url`.
fn one_operation_spec(server: &str, token_url: Option<&str>) -> Value {
    let mut spec = json!({
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": server}],
        "paths": {"/things": {"get": {
            "operationId": "list",
            "responses": {"200": {"description": "ok"}}
        }}}
    });
    if let Some(token_url) = token_url {
        spec["components"] = json!({"securitySchemes": {"oauth": {
            "type": "oauth2",
            "flows": {"clientCredentials": {"tokenUrl": token_url, "scopes": {}}}
        }}});
        spec["paths"]["/things"]["get"]["security"] = json!([{"oauth": []}]);
    }
    spec
}

fn write_json(dir: &Path, name: &str, v: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(v).unwrap()).expect("write spec");
    path.display().to_string()
}

/// A name (not `localhost`, which the guard refuses by name) that `/etc/hosts` maps to
/// a loopback address: an API server the guard only judges when it resolves, so a call
/// gets as far as fetching its OAuth2 token, yet no lookup leaves the machine.
fn loopback_name_from_hosts() -> Option<String> {
    let hosts = std::fs::read_to_string("/etc/hosts").ok()?;
    hosts.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let ip: std::net::IpAddr = fields.next()?.parse().ok()?;
        if !ip.is_loopback() {
            return None;
        }
        fields
            .find(|n| {
                let n = n.to_ascii_lowercase();
                n != "localhost" && !n.ends_with(".localhost") && !n.contains(':')
            })
            .map(str::to_owned)
    })
}

fn base_config(data: &Path, spec_dir: &Path) -> Value {
    json!({
        "admin": {"token": ADMIN_TOKEN, "spec_dir": spec_dir},
        "data_dir": data,
        "call_timeout": "30s",
        "upstreams": {}
    })
}

// ---------------------------------------------------------------------------------
// A2: OAuth2 token URLs go through the guard

#[tokio::test]
async fn oauth_token_urls_on_internal_addresses_are_refused() {
    let Some(api_host) = loopback_name_from_hosts() else {
        let why = "/etc/hosts maps no name besides localhost to loopback";
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true: {why} (add one, e.g. `127.0.0.1 vm`)"
        );
        eprintln!("NOTICE: {why}; skipped");
        return;
    };
    let _heavy = heavy_lock().await;
    let canary = Canary::refusing().await;
    let c = canary.port;
    let (data, specs) = (TempDir::new("hs-tok-data"), TempDir::new("hs-tok-specs"));
    let gw = Gateway::start(base_config(data.path(), specs.path())).await;
    let token_urls = [
        format!("http://127.0.0.1:{c}/token"),
        format!("http://[::ffff:127.0.0.1]:{c}/token"),
        format!("http://[::127.0.0.1]:{c}/token"),
        format!("http://[::ffff:7f00:1]:{c}/token"),
        format!("http://2130706433:{c}/token"),
        // a name: refused where it resolves
        format!("http://{api_host}:{c}/token"),
    ];
    for (i, token_url) in token_urls.iter().enumerate() {
        // The API's own server is never reached: the token comes first, and the
        // resolver refuses the name when it is looked up.
        let spec = one_operation_spec(&format!("http://{api_host}:{c}/"), Some(token_url));
        write_json(specs.path(), &format!("t{i}.json"), &spec);
        let name = format!("tok{i}");
        let (st, body) = register(
            &gw,
            &name,
            json!({"spec_path": format!("t{i}.json"), "auth": {"oauth": {
                "type": "oauth2_client_credentials",
                "client_id": "gateway",
                "client_secret": "canary-client-secret"
            }}}),
        )
        .await;
        assert_eq!(st, 201, "{token_url}: {body:#}");
        let (st, body) = rest_post(
            &gw,
            &format!("/v1/tools/{name}__list/call"),
            None,
            json!({"arguments": {}}),
        )
        .await;
        let text = message_of(&body);
        assert!(
            st != 200 || body["is_error"] == true,
            "{token_url}: the call succeeded: {body:#}"
        );
        assert!(
            text.contains("OAuth2") && text.contains("allow_private_networks"),
            "{token_url}: the error should say the token URL was refused: {text}"
        );
        assert!(!text.contains("canary-client-secret"), "{text}");
    }
    assert_eq!(
        canary.seen(),
        Vec::<String>::new(),
        "the loopback canary was contacted"
    );
}

// ---------------------------------------------------------------------------------
// A3: servers on IPv6 forms carrying a private IPv4

#[tokio::test]
async fn servers_on_ipv6_forms_of_internal_addresses_are_refused() {
    let _heavy = heavy_lock().await;
    let canary = Canary::refusing().await;
    let c = canary.port;
    let (data, specs) = (TempDir::new("hs-v6-data"), TempDir::new("hs-v6-specs"));
    let mut config = base_config(data.path(), specs.path());
    // no health probe while the test runs: the call is the attempt under test
    config["health"] = json!({"interval": "1h"});
    let gw = Gateway::start(config).await;
    let forms = [
        ("compatible", "::127.0.0.1"),
        ("mapped", "::ffff:127.0.0.1"),
        ("nat64", "64:ff9b::7f00:1"),
        ("nat64-local", "64:ff9b:1::7f00:1"),
        ("sixtofour", "2002:7f00:1::"),
        ("sixtofour-meta", "2002:a9fe:a9fe::"),
        ("teredo", "2001:0:4136:e378:8000:63bf:80ff:fffe"),
        ("ula", "fd00::1"),
        ("linklocal", "fe80::1"),
        ("sitelocal", "fec0::1"),
    ];
    for (family, ip) in forms {
        let spec = one_operation_spec(&format!("http://[{ip}]:{c}/"), None);
        write_json(specs.path(), &format!("{family}.json"), &spec);
        let (st, body) =
            register(&gw, family, json!({"spec_path": format!("{family}.json")})).await;
        assert_eq!(st, 201, "{family}: {body:#}");
        let (st, body) = rest_post(
            &gw,
            &format!("/v1/tools/{family}__list/call"),
            None,
            json!({"arguments": {}}),
        )
        .await;
        let text = message_of(&body);
        assert!(st != 200 || body["is_error"] == true, "{family}: {body:#}");
        assert!(
            text.contains("refused") && text.contains("allow_private_networks"),
            "{family} ({ip}): {text}"
        );
    }
    assert_eq!(
        canary.seen(),
        Vec::<String>::new(),
        "the canary was contacted"
    );
}

// ---------------------------------------------------------------------------------
// A7: the admin API reads no local files

#[tokio::test]
async fn runtime_registrations_read_no_local_files() {
    let _heavy = heavy_lock().await;
    let secret_word = "CANARY-local-file-7f3a9";
    let outside = TempDir::new("hs-outside");
    let (data, specs) = (
        TempDir::new("hs-files-data"),
        TempDir::new("hs-files-specs"),
    );
    // A file outside spec_dir that would import fine, its secret in a description.
    let mut secret_spec = one_operation_spec("http://127.0.0.1:9/", None);
    secret_spec["paths"]["/things"]["get"]["description"] = json!(secret_word);
    secret_spec["components"] =
        json!({"schemas": {"S": {"type": "string", "description": secret_word}}});
    let secret = write_json(outside.path(), "secret.json", &secret_spec);
    let missing = outside.path().join("nope.json").display().to_string();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&secret, specs.path().join("link.json")).expect("symlink");

    let gw = Gateway::start(base_config(data.path(), specs.path())).await;
    let refused = |case: &str, st: u16, body: &Value| -> String {
        assert_eq!(st, 400, "{case}: {body:#}");
        assert_eq!(
            body["error"]["code"], "spec_path_refused",
            "{case}: {body:#}"
        );
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let (st, body) = register(&gw, "a", json!({"spec_path": secret})).await;
    let existing = refused("existing file", st, &body).replace(&secret, "<path>");
    let (st, body) = register(&gw, "b", json!({"spec_path": missing})).await;
    let nonexistent = refused("missing file", st, &body).replace(&missing, "<path>");
    assert_eq!(
        existing, nonexistent,
        "the answer tells whether the file exists"
    );
    for (case, path) in [
        (
            "dot-dot",
            format!(
                "../{}/secret.json",
                outside.path().file_name().unwrap().to_string_lossy()
            ),
        ),
        ("symlink out", "link.json".to_owned()),
        ("etc", "/etc/hostname".to_owned()),
    ] {
        let (st, body) = register(&gw, "c", json!({"spec_path": path})).await;
        refused(case, st, &body);
    }

    // $refs of a local spec stay inside its directory, with one answer for files that
    // exist and files that do not.
    let ref_spec = |target: &str| {
        json!({
            "openapi": "3.0.3", "info": {"title": "r", "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9/"}],
            "paths": {"/x": {"get": {"operationId": "x",
                "parameters": [{"name": "q", "in": "query", "schema": {"$ref": target}}],
                "responses": {"200": {"description": "ok"}}}}}
        })
    };
    let mut messages = Vec::new();
    for (case, target, shown) in [
        (
            "file url",
            format!("file://{secret}#/components/schemas/S"),
            secret.clone(),
        ),
        (
            "missing file url",
            format!("file://{missing}#/components/schemas/S"),
            missing.clone(),
        ),
        (
            "relative",
            format!(
                "../{}/secret.json#/components/schemas/S",
                outside.path().file_name().unwrap().to_string_lossy()
            ),
            secret.clone(),
        ),
    ] {
        write_json(specs.path(), "refs.json", &ref_spec(&target));
        let (st, body) = register(&gw, "refs", json!({"spec_path": "refs.json"})).await;
        assert_eq!(st, 422, "{case}: {body:#}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("spec's own directory"),
            "{case}: {message}"
        );
        messages.push(message.replace(&format!("file://{shown}"), "<ref>"));
    }
    assert_eq!(
        messages[0], messages[1],
        "a $ref's answer tells whether the file exists"
    );

    // A spec inside spec_dir imports; nothing of the secret reached any tool list.
    write_json(
        specs.path(),
        "fine.json",
        &one_operation_spec("http://127.0.0.1:9/", None),
    );
    let (st, body) = register(&gw, "fine", json!({"spec_path": "fine.json"})).await;
    assert_eq!(st, 201, "{body:#}");
    let (st, tools) = rest_get(&gw, "/v1/tools", None).await;
    assert_eq!(st, 200);
    assert!(tools.to_string().contains("fine__list"), "{tools}");
    let (_, listed) = admin(&gw, reqwest::Method::GET, "/admin/upstreams", None).await;
    for shown in [tools.to_string(), listed.to_string()] {
        assert!(
            !shown.contains(secret_word),
            "the local file's content leaked: {shown}"
        );
    }

    // An import over one of its bounds is a 422 naming the bound: here the second
    // document of a split spec takes it over max_total_bytes. Within it, it imports.
    let split = specs.path().join("split");
    std::fs::create_dir_all(split.join("parts")).unwrap();
    write_json(
        &split.join("parts"),
        "q.json",
        &json!({"Q": {"type": "string"}}),
    );
    let root = write_json(&split, "root.json", &ref_spec("parts/q.json#/Q"));
    let bound = std::fs::metadata(&root).unwrap().len() + 5;
    let (st, body) = register(
        &gw,
        "split",
        json!({"spec_path": "split/root.json", "max_total_bytes": bound}),
    )
    .await;
    assert_eq!(st, 422, "{body:#}");
    let message = message_of(&body);
    assert!(
        message.contains(&format!("max_total_bytes ({bound})")) && message.contains("q.json"),
        "{message}"
    );
    let (st, body) = register(&gw, "split", json!({"spec_path": "split/root.json"})).await;
    assert_eq!(st, 201, "{body:#}");

    // Without admin.spec_dir, runtime registrations take URLs only.
    drop(gw);
    let data2 = TempDir::new("hs-files-data2");
    let gw = Gateway::start(json!({
        "admin": {"token": ADMIN_TOKEN}, "data_dir": data2.path(), "upstreams": {}
    }))
    .await;
    let (st, body) = register(
        &gw,
        "d",
        json!({"spec_path": specs.path().join("fine.json")}),
    )
    .await;
    let message = refused("no spec_dir", st, &body);
    assert!(message.contains("spec_url"), "{message}");
}

// ---------------------------------------------------------------------------------
// A8: what one import may use is bounded

/// Peak resident memory of a process in kB (`VmHWM`), Linux only.
fn peak_rss_kb(pid: u32) -> Option<u64> {
    proc_status_kb(pid, "VmHWM:")
}

/// Resident memory of a process in kB (`VmRSS`), Linux only.
fn rss_kb(pid: u32) -> Option<u64> {
    proc_status_kb(pid, "VmRSS:")
}

fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[tokio::test]
async fn hostile_imports_are_refused_within_bounded_memory() {
    let _heavy = heavy_lock().await;
    let (data, specs) = (TempDir::new("hs-mem-data"), TempDir::new("hs-mem-specs"));
    let gw = Gateway::start(base_config(data.path(), specs.path())).await;
    let pid = gw.proc.pid();
    let baseline = rss_kb(pid);

    // 1M-entry enum (about 11 MB of JSON), used by every one of 50 operations.
    let values: Vec<String> = (0..1_000_000).map(|i| format!("v{i:07}")).collect();
    let mut spec = one_operation_spec("http://127.0.0.1:9/", None);
    spec["components"] = json!({"schemas": {"Big": {"type": "string", "enum": values}}});
    for i in 0..50 {
        spec["paths"][format!("/op{i}")] = json!({"get": {"operationId": format!("op{i}"),
            "parameters": [{"name": "v", "in": "query", "schema": {"$ref": "#/components/schemas/Big"}}],
            "responses": {"200": {"description": "ok"}}}});
    }
    write_json(specs.path(), "enum.json", &spec);
    drop(spec);
    // Many small nodes: 1.5M array elements.
    let nodes = json!({
        "openapi": "3.0.3", "info": {"title": "n", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9/"}],
        "paths": {"/n": {"get": {"operationId": "n",
            "parameters": [{"name": "q", "in": "query", "schema": {"type": "array", "items": {}, "default": vec![0; 1_500_000]}}],
            "responses": {"200": {"description": "ok"}}}}}
    });
    write_json(specs.path(), "nodes.json", &nodes);
    drop(nodes);
    // Small to load, large once converted: one 20,000-node schema used by 100
    // operations is copied into every tool.
    let mut amplify = one_operation_spec("http://127.0.0.1:9/", None);
    amplify["components"] =
        json!({"schemas": {"Wide": {"type": "array", "items": {}, "default": vec![0; 20_000]}}});
    for i in 0..100 {
        amplify["paths"][format!("/a{i}")] = json!({"get": {"operationId": format!("a{i}"),
            "parameters": [{"name": "v", "in": "query", "schema": {"$ref": "#/components/schemas/Wide"}}],
            "responses": {"200": {"description": "ok"}}}});
    }
    write_json(specs.path(), "amplify.json", &amplify);
    drop(amplify);
    write_json(
        specs.path(),
        "tiny.json",
        &one_operation_spec("http://127.0.0.1:9/", None),
    );

    for (file, limit) in [
        ("enum.json", "max_enum_values"),
        ("nodes.json", "max_schema_nodes"),
        ("amplify.json", "max_schema_nodes"),
    ] {
        // /healthz keeps answering while the import runs.
        let probing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let health = {
            let (probing, answered, url) = (probing.clone(), answered.clone(), gw.url("/healthz"));
            tokio::spawn(async move {
                let client = http();
                let started = Instant::now();
                while probing.load(std::sync::atomic::Ordering::Relaxed)
                    && started.elapsed() < Duration::from_secs(120)
                {
                    let r = client
                        .get(&url)
                        .timeout(Duration::from_secs(10))
                        .send()
                        .await;
                    if r.is_ok_and(|r| r.status() == 200) {
                        answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let (st, body) = register(&gw, "hostile", json!({"spec_path": file})).await;
        probing.store(false, std::sync::atomic::Ordering::Relaxed);
        let _ = health.await;
        assert_eq!(st, 422, "{file}: {body:#}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(limit),
            "{file}: the error should name {limit}: {message}"
        );
        assert!(
            answered.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "{file}: /healthz never answered during the import"
        );
    }
    let (st, _) = rest_get(&gw, "/healthz", None).await;
    assert_eq!(st, 200);
    // What the refused imports took is given back.
    if let Some(baseline) = baseline {
        wait_for(
            "memory given back after the refused imports",
            Duration::from_secs(20),
            || async { rss_kb(pid).filter(|kb| *kb < baseline + 48 * 1024) },
        )
        .await;
    }
    // A real large spec (GitHub's, from the shared corpus) imported and deleted gives
    // its memory back too.
    let github = std::env::var_os("TOOLGATE_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| toolgate_e2e::workspace_root().join("../shared"))
        .join("specs/github-api.github.com.json");
    if github.is_file() {
        // First a tiny import: what the first import loads for good (the tokenizer
        // counting the tool list's tokens) belongs to the baseline.
        let (st, body) = register(&gw, "tiny", json!({"spec_path": "tiny.json"})).await;
        assert_eq!(st, 201, "{body:#}");
    }
    if let (Some(baseline), true) = (rss_kb(pid), github.is_file()) {
        std::fs::copy(&github, specs.path().join("github.json")).expect("copy");
        // Imported and deleted twice, each time back within 48 MB of the one baseline:
        // an upstream held after its DELETE (GitHub's tools are hundreds of MB while
        // loaded) would not fit, once or twice.
        let mut after = Vec::new();
        for cycle in 0..2 {
            // its servers name api.github.com: a loopback base URL keeps the health
            // probe (and any lookup) on this machine
            let (st, body) = register(
                &gw,
                "gh",
                json!({"spec_path": "github.json", "base_url": "http://127.0.0.1:9/",
                       "allow_private_networks": true}),
            )
            .await;
            let head: String = body.to_string().chars().take(500).collect();
            assert_eq!(st, 201, "{head}");
            let loaded = rss_kb(pid).unwrap_or(0);
            let (st, _) = admin(&gw, reqwest::Method::DELETE, "/admin/upstreams/gh", None).await;
            assert_eq!(st, 204);
            let back = wait_for(
                "memory given back after DELETE",
                Duration::from_secs(30),
                || async { rss_kb(pid).filter(|kb| *kb < baseline + 48 * 1024) },
            )
            .await;
            eprintln!(
                "cycle {cycle}: gateway RSS {} MB before, {} MB with GitHub's tools, {} MB after DELETE",
                baseline / 1024,
                loaded / 1024,
                back / 1024
            );
            after.push(back);
        }
        // Each cycle must come back within 48 MB of the first baseline, so what two
        // imports together keep stays under that too; closer comparisons between the
        // cycles measure the allocator's fragmentation (tens of MB either way), not a
        // leak.
        eprintln!("after each DELETE: {after:?} kB");
    }
    if let Some(kb) = peak_rss_kb(pid) {
        // Each refused document parsed whole (about 150 MB of JSON values at most), the
        // tools made before max_schema_nodes stopped the amplifying spec (about
        // 120 bytes a node), GitHub's tools: far from a copy of the enum per operation
        // (1.2 GB before the limits).
        assert!(kb < 400 * 1024, "peak RSS {} MB", kb / 1024);
        eprintln!("gateway peak RSS: {} MB", kb / 1024);
    }
}

// ---------------------------------------------------------------------------------
// A11: schema keywords the validator cannot use; headers across origins

#[tokio::test]
async fn unusable_schema_keywords_are_dropped_and_reported() {
    let _heavy = heavy_lock().await;
    let api = Canary::start(|_| {
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"ok\":true}"
            .to_owned()
    })
    .await;
    let (data, specs) = (TempDir::new("hs-kw-data"), TempDir::new("hs-kw-specs"));
    let mut spec = one_operation_spec(&format!("http://127.0.0.1:{}/", api.port), None);
    spec["paths"]["/things"]["get"]["parameters"] = json!([
        {"name": "q", "in": "query", "schema": {"type": "string", "pattern": "(?<!x"}},
        {"name": "n", "in": "query", "schema": {"type": "string", "minLength": "three"}}
    ]);
    write_json(specs.path(), "kw.json", &spec);
    let gw = Gateway::start(base_config(data.path(), specs.path())).await;
    let (st, body) = register(
        &gw,
        "kw",
        json!({"spec_path": "kw.json", "allow_private_networks": true}),
    )
    .await;
    assert_eq!(st, 201, "{body:#}");
    let repaired = body["report"]["repaired"].to_string();
    assert!(
        repaired.contains("pattern") && repaired.contains("minLength"),
        "{body:#}"
    );
    let (st, body) = rest_post(
        &gw,
        "/v1/tools/kw__list/call",
        None,
        json!({"arguments": {"q": "abc", "n": "xy"}}),
    )
    .await;
    assert_eq!(st, 200, "{body:#}");
    assert_eq!(body["is_error"], false, "{body:#}");
    // (the health probe's bare TCP connection shows as an empty head)
    let seen: Vec<String> = api.seen().into_iter().filter(|h| !h.is_empty()).collect();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(seen[0].starts_with("GET /things?"), "{}", seen[0]);
}

#[tokio::test]
async fn configured_headers_never_follow_a_redirect_to_another_origin() {
    let _heavy = heavy_lock().await;
    let canary = Canary::start(|_| {
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
            .to_owned()
    })
    .await;
    let c = canary.port;
    let redirector =
        Canary::start(move |path| redirect_to(&format!("http://127.0.0.1:{c}{path}"))).await;
    let (data, specs) = (TempDir::new("hs-hdr-data"), TempDir::new("hs-hdr-specs"));
    let mut spec = one_operation_spec(&format!("http://127.0.0.1:{}/", redirector.port), None);
    spec["components"] = json!({"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}});
    spec["security"] = json!([{"key": []}]);
    write_json(specs.path(), "hdr.json", &spec);
    let mut config = base_config(data.path(), specs.path());
    // An MCP upstream (legacy SSE, carried by reqwest) with a configured header.
    config["upstreams"] = json!({"legacy": {"sse": {
        "url": format!("http://127.0.0.1:{}/sse", redirector.port),
        "headers": {"X-Upstream-Secret": "canary-header-value"},
        "timeout": "5s"
    }}});
    let gw = Gateway::spawn(config);
    gw.wait_ok(&["/healthz"], Duration::from_secs(60)).await;
    let (st, body) = register(
        &gw,
        "hdr",
        json!({"spec_path": "hdr.json", "allow_private_networks": true,
               "auth": {"key": {"type": "api_key", "value": "canary-api-key"}}}),
    )
    .await;
    assert_eq!(st, 201, "{body:#}");
    let (_, body) = rest_post(
        &gw,
        "/v1/tools/hdr__list/call",
        None,
        json!({"arguments": {}}),
    )
    .await;
    let text = message_of(&body);
    assert!(text.contains("another origin"), "{text}");
    // the MCP upstream tried (the redirector saw its GET) and got no further
    wait_for(
        "the SSE upstream's first attempt",
        Duration::from_secs(30),
        || async {
            redirector
                .seen()
                .iter()
                .any(|h| h.starts_with("GET /sse"))
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let leaked: Vec<String> = canary
        .seen()
        .into_iter()
        .filter(|h| {
            let h = h.to_ascii_lowercase();
            h.contains("canary-api-key") || h.contains("canary-header-value")
        })
        .collect();
    assert_eq!(
        leaked,
        Vec::<String>::new(),
        "configured headers reached another origin"
    );
    assert_eq!(
        canary.seen(),
        Vec::<String>::new(),
        "the other origin was contacted"
    );
}
