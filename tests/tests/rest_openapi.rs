//! `/openapi.json` against the running gateway: schemathesis (PyPI) generates valid and
//! invalid requests from the document for every operation, with a tenant's key, and
//! runs all its checks — no server errors, every status and content type documented,
//! response bodies matching their schemas, invalid input rejected, valid input
//! accepted, auth not ignored.

use std::time::Duration;

use serde_json::json;
use toolgate_e2e::{
    Gateway, NodeDeps, TempDir, everything_stdio_upstream, hash_key, heavy_lock, python, require,
    rest_get, unique_marker,
};

const KEY: &str = "openapi-doc-tenant-key-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_the_running_rest_api_true_to_its_document() {
    let deps = require!(NodeDeps::find());
    let python = require!(python());
    let schemathesis = python.with_file_name("schemathesis");
    assert!(
        schemathesis.is_file(),
        "schemathesis is missing from the test venv ({}): run scripts/test",
        schemathesis.display()
    );
    let _serial = heavy_lock().await;
    // Its tools may run plainly or in the background (`"background": true` is in the
    // call's schema), so both answers are reached.
    let mut everything = everything_stdio_upstream(&deps, &unique_marker("rest-openapi"));
    everything["background"] = json!("optional");
    let mut gateway = Gateway::start(json!({
        "upstreams": {"everything": everything},
        "tenants": {"t": {
            "api_keys": [hash_key(KEY)],
            "allow": ["everything__echo", "everything__get-sum", "everything__get-tiny-image"],
            "initial": ["everything__echo"]
        }}
    }))
    .await;

    let (status, document) = rest_get(&gateway, "/openapi.json", None).await;
    assert_eq!(status, 200, "the document needs no credentials");
    assert_eq!(document["openapi"], "3.1.0");
    let mut paths: Vec<&str> = document["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .map(String::as_str)
        .collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "/v1/connections",
            "/v1/connections/{upstream}",
            "/v1/sessions",
            "/v1/sessions/{id}",
            "/v1/sessions/{id}/tools",
            "/v1/sessions/{id}/tools/expand",
            "/v1/tasks/{id}",
            "/v1/tasks/{id}/events",
            "/v1/tasks/{id}/input",
            "/v1/tool_calls",
            "/v1/tool_use",
            "/v1/tools",
            "/v1/tools/{name}/call",
            "/v1/tools/{name}/schema",
        ]
    );

    // A real tool name for `{name}`, so calls reach the upstream instead of 404: one
    // whose input schema takes any object, as the document's generic `arguments` does
    // (a call's arguments are checked against its own tool's schema, which one
    // document for every tool cannot state). Likewise `strict` goes with the formats
    // that offer it (openai, responses; others answer 400), a rule across two query
    // parameters that OpenAPI cannot state: generated with `strict` off.
    let dir = TempDir::new("schemathesis");
    let config = dir.path().join("schemathesis.toml");
    std::fs::write(
        &config,
        "[parameters]\n\"path.name\" = \"everything__get-tiny-image\"\n\n\
         [[operations]]\ninclude-name = \"GET /v1/tools\"\n\
         parameters = { \"query.strict\" = \"false\" }\n",
    )
    .expect("write the schemathesis config");
    let mut command = std::process::Command::new(&schemathesis);
    command
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(gateway.url("/openapi.json"))
        .args(["-H", &format!("Authorization: Bearer {KEY}")])
        .args(["--checks", "all", "--max-examples", "40", "--workers", "1"])
        // `DELETE /v1/tasks/{id}` cancels a task, which stays readable (`cancelled`)
        // for `tasks.ttl`, as background calls are specified: not the deleted
        // resource this check expects to be gone. (The other DELETE, of a session,
        // does remove it: `rest.rs` checks that it is then not found.)
        .args(["--exclude-checks", "use_after_free"])
        .arg("--no-color")
        .current_dir(dir.path())
        .env("NO_COLOR", "1");
    let output = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::task::spawn_blocking(move || command.output()),
    )
    .await
    .expect("schemathesis finishes within 5 minutes")
    .expect("join")
    .expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "schemathesis found the API and its document disagree (see above)"
    );
    let operations: usize = document["paths"]
        .as_object()
        .expect("paths")
        .values()
        .map(|item| item.as_object().map_or(0, |methods| methods.len()))
        .sum();
    assert!(
        stdout.contains(&format!("{operations} selected")),
        "every one of the {operations} operations was tested"
    );
    gateway.assert_alive();
}
