//! The upstream lifecycle in process: an OpenAPI import that a reload or a removal made
//! obsolete while its spec was loading must not bring its upstream back; a reload that
//! leaves an upstream running still applies what changed around it (the encoding its
//! definitions are counted in).
//!
//! The spec is served from 127.0.0.1 by a server that holds every answer until the test
//! releases it, so "the change happened while the import ran" is a fact, not a race.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use serde_json::json;
use tokio::sync::watch;
use toolgate::app::App;
use toolgate::config::Config;
use toolgate::policy::Policy;
use toolgate::registry::{self, ImportError, Origin};
use toolgate_adapters::openapi::OpenApiConfig;

/// A spec server whose answers wait for [`HeldSpec::release`].
struct HeldSpec {
    url: String,
    requests: Arc<AtomicUsize>,
    release: watch::Sender<bool>,
}

impl HeldSpec {
    async fn start() -> HeldSpec {
        let requests = Arc::new(AtomicUsize::new(0));
        let (release, released) = watch::channel(false);
        let counter = requests.clone();
        let app = Router::new().route(
            "/openapi.json",
            get(move || {
                let counter = counter.clone();
                let mut released = released.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    // Bounded: a test that never releases still ends.
                    let _ = tokio::time::timeout(
                        Duration::from_secs(20),
                        released.wait_for(|released| *released),
                    )
                    .await;
                    axum::Json(spec())
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let url = format!(
            "http://{}/openapi.json",
            listener.local_addr().expect("address")
        );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        HeldSpec {
            url,
            requests,
            release,
        }
    }

    /// Waits (bounded) until `n` requests for the spec have arrived.
    async fn wait_for_requests(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.requests.load(Ordering::SeqCst) < n {
            assert!(
                Instant::now() < deadline,
                "{n} spec requests did not arrive within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn release(&self) {
        let _ = self.release.send(true);
    }

    fn openapi(&self) -> OpenApiConfig {
        let mut openapi = OpenApiConfig::from_url(&self.url);
        openapi.allow_private_networks = true;
        openapi
    }
}

fn spec() -> serde_json::Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "held", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}}
    })
}

fn config(yaml: &str) -> Config {
    let mut config = Config::parse(yaml, &|_| None).expect("the test config parses");
    config.data_dir = std::env::temp_dir().join(format!(
        "toolgate-lifecycle-test-{}-{}",
        std::process::id(),
        toolgate::state::sessions::new_session_id()
    ));
    config
}

/// Asserts for a while that `name` is not mounted (an obsolete import finishing late
/// would mount it within moments of its spec arriving).
async fn assert_stays_unmounted(app: &App, name: &str) {
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        assert!(
            !app.gateway.upstreams().contains_key(name),
            "'{name}' was mounted by an import that a later change made obsolete"
        );
        assert!(
            app.gateway
                .catalog()
                .entries()
                .iter()
                .all(|e| e.upstream != name),
            "'{name}''s tools are in the catalog"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_reload_that_removes_an_upstream_wins_over_its_first_import() {
    let held = HeldSpec::start().await;
    let with = format!(
        "upstreams:\n  held:\n    openapi:\n      spec_url: '{}'\n      allow_private_networks: true\n",
        held.url
    );
    let app = App::start(config(&with)).await.expect("toolgate starts");
    // The startup import is underway (its placeholder stands in), and a second import
    // of the same settings, whose answer the test reads, waits beside it.
    held.wait_for_requests(1).await;
    assert!(app.gateway.upstreams().contains_key("held"), "placeholder");
    let registry = app.registry.clone();
    let openapi = held.openapi();
    let direct =
        tokio::spawn(
            async move { registry::import(&registry, "held", openapi, Origin::Config).await },
        );
    held.wait_for_requests(2).await;

    let without = config("upstreams: {}\n");
    let policy = Policy::from_config(&without).expect("policy");
    let changes = app.gateway.apply_config(without, policy).await;
    assert_eq!(changes.removed, ["held"]);
    assert!(!app.gateway.upstreams().contains_key("held"));

    held.release();
    let outcome = tokio::time::timeout(Duration::from_secs(10), direct)
        .await
        .expect("the import ends within 10 s")
        .expect("join");
    assert!(
        matches!(outcome, Err(ImportError::Obsolete(ref name)) if name == "held"),
        "an import of an upstream the reload removed must be dropped: {outcome:?}"
    );
    assert_stays_unmounted(&app, "held").await;
    app.shutdown().await;
}

#[tokio::test]
async fn a_registration_removed_while_it_imports_stays_removed() {
    let held = HeldSpec::start().await;
    let app = App::start(config("upstreams: {}\n"))
        .await
        .expect("toolgate starts");
    let registration = registry::Registration {
        name: "reg".into(),
        openapi: held.openapi(),
    };
    // As a replica does when another one announces a registration.
    registry::import_registration(&app.registry, registration.clone()).await;
    let registry = app.registry.clone();
    let openapi = registration.openapi.clone();
    let direct =
        tokio::spawn(
            async move { registry::import(&registry, "reg", openapi, Origin::Stored).await },
        );
    held.wait_for_requests(2).await;

    assert!(registry::unmount_registration(&app.registry, "reg").await);
    held.release();
    let outcome = tokio::time::timeout(Duration::from_secs(10), direct)
        .await
        .expect("the import ends within 10 s")
        .expect("join");
    assert!(
        matches!(outcome, Err(ImportError::Obsolete(ref name)) if name == "reg"),
        "an import of a removed registration must be dropped: {outcome:?}"
    );
    assert_stays_unmounted(&app, "reg").await;
    app.shutdown().await;
}

#[tokio::test]
async fn an_import_still_wanted_is_mounted() {
    let held = HeldSpec::start().await;
    let with = format!(
        "upstreams:\n  held:\n    openapi:\n      spec_url: '{}'\n      allow_private_networks: true\n",
        held.url
    );
    let app = App::start(config(&with)).await.expect("toolgate starts");
    held.wait_for_requests(1).await;
    held.release();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if app.gateway.catalog().get("held__ping").is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the import was not mounted within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.shutdown().await;
}

/// What a tool's listed definition says it costs (`_meta.toolgate/definitionTokens`).
fn definition_tokens(app: &App, name: &str) -> u64 {
    let catalog = app.gateway.catalog();
    let entry = catalog.get(name).expect("the tool is in the catalog");
    entry.get("_meta").expect("the definition has _meta")["toolgate/definitionTokens"]
        .as_u64()
        .expect("definitionTokens is a count")
}

#[tokio::test]
async fn a_reload_that_changes_the_encoding_recounts_upstreams_left_running() {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-lifecycle-encoding-{}-{}",
        std::process::id(),
        toolgate::state::sessions::new_session_id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let spec_path = dir.join("spec.json");
    // Chinese, which o200k_base encodes in far fewer tokens than cl100k_base.
    let mut spec = spec();
    spec["paths"]["/ping"]["get"]["description"] =
        json!("检查服务是否可用，并返回当前的运行状态。".repeat(8));
    std::fs::write(&spec_path, spec.to_string()).expect("write the spec");
    let yaml = |encoding: &str| {
        format!(
            "results: {{encoding: {encoding}}}\nupstreams:\n  kept:\n    openapi:\n      spec_path: '{}'\n",
            spec_path.display()
        )
    };
    let app = App::start(config(&yaml("o200k_base")))
        .await
        .expect("toolgate starts");
    app.finish_startup().await.expect("the spec is imported");
    let before = definition_tokens(&app, "kept__ping");

    let next = config(&yaml("cl100k_base"));
    let policy = Policy::from_config(&next).expect("policy");
    let changes = app.gateway.apply_config(next, policy).await;
    assert!(
        changes.is_empty(),
        "the upstream itself is unchanged: {changes:?}"
    );
    let after = definition_tokens(&app, "kept__ping");
    let listed = serde_json::to_string(
        &app.gateway
            .catalog()
            .get("kept__ping")
            .unwrap()
            .definition(),
    )
    .expect("the definition serializes");
    assert_ne!(
        before, after,
        "the definition was not recounted in cl100k_base"
    );
    // Exact in the new encoding, as the count of the listed text (which includes the
    // count itself, so it is within a token or two).
    let counted =
        toolgate::truncate::count(&listed, toolgate::truncate::Encoding::Cl100kBase) as u64;
    assert!(
        counted.abs_diff(after) <= 2,
        "listed {after} tokens, cl100k_base counts {counted}"
    );
    app.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
