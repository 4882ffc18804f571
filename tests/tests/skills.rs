//! Skill packages as an upstream, end to end through the real binary.
//!
//! The skills config of docs/skills.md, run as written from a temp dir (its relative path
//! resolved against the file), serves two skills: a 2025-11-25 session lists their
//! prompts, resources and tools, gets a prompt, reads files through the gateway's
//! URIs (text and blob), calls a skill's tool and reads back the links it returned;
//! REST loads a skill too. Then, with the session open, SKILL.md is edited, a file is
//! added and a skill removed: the session is told (`list_changed`) and its lists,
//! reads and calls follow. A config reload adds a second skills upstream.
//!
//! A tenant allowed one skill sees nothing of the other, and every request about the
//! other skill is answered exactly like one about a skill that does not exist, over a
//! session, sessionless (2026-07-28) and REST.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use toolgate_e2e::{
    Gateway, McpSession, TempDir, first_text, hash_key, rest_post, tool_names, workspace_root,
};

const KEY: &str = "alpha-only-key-0123456789";

fn write(path: &Path, content: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Two skills under `root`: `alpha` (skill.yaml, a script, a binary asset), `beta`.
fn two_skills(root: &Path) {
    write(
        &root.join("alpha/SKILL.md"),
        "# Alpha\n\nRun scripts/run.sh.\n",
    );
    write(
        &root.join("alpha/skill.yaml"),
        "name: Alpha\ndescription: Makes alphas\n",
    );
    write(
        &root.join("alpha/scripts/run.sh"),
        "#!/bin/sh\necho alpha\n",
    );
    write(
        &root.join("alpha/assets/logo.png"),
        [0x89u8, b'P', b'N', b'G', 0xff, 0x00],
    );
    write(&root.join("beta/SKILL.md"), "# Beta tools\n\nUse beta.\n");
}

/// The yaml block of docs/skills.md ("Skill upstreams").
fn readme_config() -> String {
    let readme =
        std::fs::read_to_string(workspace_root().join("docs/skills.md")).expect("docs/skills.md");
    let section = &readme[readme.find("# Skill upstreams").expect("the section")..];
    let start = section.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    section[start..start + section[start..].find("```").expect("its end")].to_owned()
}

fn gw_uri(upstream: &str, original: &str) -> String {
    format!("toolgate://{upstream}/{original}")
}

async fn result(session: &McpSession, method: &str, params: Value) -> Value {
    let ex = session.request(method, params).await.expect(method);
    match ex.error() {
        Some(error) => panic!("{method}: {error}"),
        None => ex.result().clone(),
    }
}

async fn error(session: &McpSession, method: &str, params: Value) -> Value {
    let ex = session.request(method, params).await.expect(method);
    ex.error()
        .unwrap_or_else(|| panic!("{method} succeeded: {:?}", ex.response))
        .clone()
}

fn field(list: &Value, key: &str, field: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {list}"))
        .iter()
        .map(|item| item[field].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Waits (at most `timeout`, at most 1000 frames) until every `methods` notification
/// arrived on the GET stream.
async fn wait_notifications(rx: &mut UnboundedReceiver<Value>, methods: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut missing: Vec<&str> = methods.to_vec();
    let mut seen = Vec::new();
    for _ in 0..1000 {
        if missing.is_empty() {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(frame)) => {
                missing.retain(|m| frame["method"] != *m);
                seen.push(frame);
            }
            _ => break,
        }
    }
    assert!(missing.is_empty(), "missing {missing:?}; frames: {seen:#?}");
}

/// Polls `probe` (every 100 ms, at most 150 times or 20 s) until it returns true.
async fn eventually<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    for _ in 0..150 {
        if probe().await {
            return;
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within 20 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_serve_prompts_resources_tools_and_follow_edits() {
    let dir = TempDir::new("skills");
    let skills = dir.path().join("skills");
    two_skills(&skills);
    let config_path = dir.path().join("toolgate.yaml");
    let readme = readme_config();
    std::fs::write(&config_path, &readme).unwrap();
    let mut gateway = Gateway::start_with_file(&config_path).await;
    let up = "team";
    let entry = gateway
        .wait_upstream_state(up, "healthy", Duration::from_secs(30))
        .await;
    assert_eq!(entry["kind"], "skills", "{entry}");
    assert_eq!(entry["tools"], 2, "{entry}");

    let session = McpSession::connect(&gateway.mcp_url())
        .await
        .expect("initialize");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (status, stream) = session.open_get_stream(tx).await.expect("GET /mcp");
    assert_eq!(status, 200);

    // Lists.
    let prompts = result(&session, "prompts/list", json!({})).await;
    assert_eq!(
        field(&prompts, "prompts", "name"),
        ["team__alpha", "team__beta"]
    );
    assert_eq!(
        field(&prompts, "prompts", "description"),
        ["Makes alphas", "Beta tools"]
    );
    let resources = result(&session, "resources/list", json!({})).await;
    let script = gw_uri(up, "skill://alpha/scripts/run.sh");
    assert_eq!(
        field(&resources, "resources", "uri"),
        [
            gw_uri(up, "skill://alpha/SKILL.md"),
            gw_uri(up, "skill://alpha/assets/logo.png"),
            script.clone(),
            gw_uri(up, "skill://alpha/skill.yaml"),
            gw_uri(up, "skill://beta/SKILL.md"),
        ]
    );
    assert_eq!(
        field(&resources, "resources", "mimeType"),
        [
            "text/markdown",
            "image/png",
            "text/x-shellscript",
            "application/yaml",
            "text/markdown"
        ]
    );
    let tools = tool_names(&session.list_tools().await.expect("tools/list"));
    for want in ["team__alpha", "team__beta"] {
        assert!(tools.iter().any(|t| t == want), "{want} not in {tools:?}");
    }

    // A prompt, reads, the tool and its links.
    let prompt = result(&session, "prompts/get", json!({"name": "team__beta"})).await;
    assert_eq!(
        prompt["messages"][0],
        json!({"role": "user", "content": {"type": "text", "text": "# Beta tools\n\nUse beta.\n"}})
    );
    let read = result(&session, "resources/read", json!({"uri": script})).await;
    assert_eq!(
        read["contents"][0],
        json!({"uri": script, "mimeType": "text/x-shellscript", "text": "#!/bin/sh\necho alpha\n"})
    );
    let logo = gw_uri(up, "skill://alpha/assets/logo.png");
    let blob = result(&session, "resources/read", json!({"uri": logo})).await;
    assert_eq!(blob["contents"][0]["blob"], "iVBOR/8A", "{blob}");
    let call = session
        .call_tool("team__alpha", json!({}))
        .await
        .expect("call");
    let content = call.result()["content"]
        .as_array()
        .expect("content")
        .clone();
    assert_eq!(
        first_text(call.result()),
        "# Alpha\n\nRun scripts/run.sh.\n"
    );
    let links: Vec<String> = content
        .iter()
        .filter(|b| b["type"] == "resource_link")
        .map(|b| b["uri"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(links.len(), 4, "{content:#?}");
    assert!(links.contains(&script), "{links:?}");
    for link in &links {
        result(&session, "resources/read", json!({"uri": link})).await;
    }
    // Unknown and escaping URIs: the upstream's own "not found".
    for uri in [
        gw_uri(up, "skill://alpha/nope.md"),
        gw_uri(up, "skill://alpha/../beta/SKILL.md"),
        gw_uri(up, "skill://alpha/%2e%2e/beta/SKILL.md"),
    ] {
        let error = error(&session, "resources/read", json!({"uri": uri})).await;
        assert_eq!(error["code"], -32002, "{uri}: {error}");
        assert_eq!(error["message"], "Resource not found", "{uri}: {error}");
    }
    // Function-calling clients load a skill over REST.
    let (status, rest) = rest_post(&gateway, "/v1/tools/team__beta/call", None, json!({})).await;
    assert_eq!(status, 200, "{rest}");
    assert_eq!(
        rest["content"][0]["text"], "# Beta tools\n\nUse beta.\n",
        "{rest}"
    );

    // Edits while the session is open: SKILL.md changes, a file appears.
    while rx.try_recv().is_ok() {}
    write(
        &skills.join("beta/SKILL.md"),
        "# Beta v2\n\nUse beta, version 2.\n",
    );
    write(&skills.join("alpha/assets/notes.txt"), "notes");
    wait_notifications(
        &mut rx,
        &[
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed",
        ],
    )
    .await;
    let notes = gw_uri(up, "skill://alpha/assets/notes.txt");
    eventually("the edit and the new file listed", || async {
        let prompts = result(&session, "prompts/list", json!({})).await;
        let resources = result(&session, "resources/list", json!({})).await;
        field(&prompts, "prompts", "description").contains(&"Beta v2".to_owned())
            && field(&resources, "resources", "uri").contains(&notes)
    })
    .await;
    let prompt = result(&session, "prompts/get", json!({"name": "team__beta"})).await;
    assert_eq!(
        prompt["messages"][0]["content"]["text"],
        "# Beta v2\n\nUse beta, version 2.\n"
    );
    let read = result(&session, "resources/read", json!({"uri": notes})).await;
    assert_eq!(read["contents"][0]["text"], "notes");
    let call = session
        .call_tool("team__alpha", json!({}))
        .await
        .expect("call");
    assert!(
        call.result().to_string().contains(&notes),
        "{:?}",
        call.response
    );

    // A skill removed: its prompt, files and tool go.
    while rx.try_recv().is_ok() {}
    std::fs::remove_dir_all(skills.join("beta")).unwrap();
    wait_notifications(&mut rx, &["notifications/tools/list_changed"]).await;
    eventually("beta gone", || async {
        let prompts = result(&session, "prompts/list", json!({})).await;
        let resources = result(&session, "resources/list", json!({})).await;
        let tools = tool_names(&session.list_tools().await.expect("tools/list"));
        field(&prompts, "prompts", "name") == ["team__alpha"]
            && !field(&resources, "resources", "uri")
                .iter()
                .any(|u| u.contains("skill://beta/"))
            && !tools.iter().any(|t| t == "team__beta")
    })
    .await;
    let gone = error(&session, "prompts/get", json!({"name": "team__beta"})).await;
    assert_eq!(gone["code"], -32602, "{gone}");
    let call = session
        .call_tool("team__beta", json!({}))
        .await
        .expect("call");
    assert_eq!(
        call.error().map(|e| e["code"].clone()),
        Some(json!(-32602)),
        "{:?}",
        call.response
    );

    // A reload adds a second skills upstream.
    write(&dir.path().join("more/delta/SKILL.md"), "# Delta\n");
    let more = format!("{readme}  more:\n    skills: {{paths: [more]}}\n");
    std::fs::write(&config_path, more).unwrap();
    eventually("the reloaded upstream's prompt", || async {
        let prompts = result(&session, "prompts/list", json!({})).await;
        field(&prompts, "prompts", "name").contains(&"more__delta".to_owned())
    })
    .await;
    stream.abort();
    gateway.assert_alive();
}

/// Normalizes an error's text for comparing two names' answers.
fn shape(error: &Value, name: &str) -> Value {
    let mut error = error.clone();
    if let Some(message) = error["message"].as_str() {
        error["message"] = json!(message.replace(name, "<NAME>"));
    }
    if let Some(data) = error.get_mut("data") {
        *data = json!(data.to_string().replace(name, "<NAME>"));
    }
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_allowed_one_skill_sees_nothing_of_the_other() {
    let dir = TempDir::new("skills-tenant");
    two_skills(dir.path());
    let mut gateway = Gateway::start(json!({
        "allowed_hosts": ["localhost", "127.0.0.1", "::1"],
        "tenants": {"alpha_only": {
            "api_keys": [hash_key(KEY)],
            "allow": ["kit__alpha", "kit__alpha__*"],
        }},
        // For the upstream status (`/v1/upstreams` needs a credential with tenants).
        "admin": {"token": "skills-admin-token-0123456789"},
        "upstreams": {"kit": {"skills": {"paths": [dir.path()]}}},
    }))
    .await;
    gateway
        .wait_upstream_state("kit", "healthy", Duration::from_secs(30))
        .await;
    let url = gateway.mcp_url();
    let legacy = McpSession::bare(&url)
        .with_bearer(KEY)
        .initialize()
        .await
        .expect("initialize");
    let modern = McpSession::modern(&url).with_bearer(KEY);
    for session in [&legacy, &modern] {
        let version = &session.protocol;
        let prompts = result(session, "prompts/list", json!({})).await;
        assert_eq!(
            field(&prompts, "prompts", "name"),
            ["kit__alpha"],
            "{version}"
        );
        let resources = result(session, "resources/list", json!({})).await;
        let uris = field(&resources, "resources", "uri");
        assert_eq!(uris.len(), 4, "{version}: {uris:?}");
        assert!(
            uris.iter()
                .all(|u| u.starts_with("toolgate://kit/skill://alpha/")),
            "{uris:?}"
        );
        let tools = tool_names(&session.list_tools().await.expect("tools/list"));
        assert!(
            tools.contains(&"kit__alpha".to_owned()),
            "{version}: {tools:?}"
        );
        assert!(
            !tools.iter().any(|t| t.contains("beta")),
            "{version}: {tools:?}"
        );
        // What it may use works.
        result(session, "prompts/get", json!({"name": "kit__alpha"})).await;
        result(
            session,
            "resources/read",
            json!({"uri": "toolgate://kit/skill://alpha/scripts/run.sh"}),
        )
        .await;
        let call = session
            .call_tool("kit__alpha", json!({}))
            .await
            .expect("call");
        assert!(call.error().is_none(), "{version}: {:?}", call.response);

        // The other skill is answered like a skill that does not exist.
        for (hidden, absent) in [("kit__beta", "kit__zeta")] {
            let a = error(session, "prompts/get", json!({"name": hidden})).await;
            let b = error(session, "prompts/get", json!({"name": absent})).await;
            assert_eq!(
                shape(&a, hidden),
                shape(&b, absent),
                "{version} prompts/get"
            );
            let a = session.call_tool(hidden, json!({})).await.expect("call");
            let b = session.call_tool(absent, json!({})).await.expect("call");
            let (a, b) = (a.error().expect("an error"), b.error().expect("an error"));
            assert_eq!(shape(a, hidden), shape(b, absent), "{version} tools/call");
        }
        for (hidden, absent) in [
            (
                "toolgate://kit/skill://beta/SKILL.md",
                "toolgate://kit/skill://zeta/SKILL.md",
            ),
            (
                "toolgate://kit/skill://alpha/../beta/SKILL.md",
                "toolgate://kit/skill://alpha/../zeta/SKILL.md",
            ),
        ] {
            let a = error(session, "resources/read", json!({"uri": hidden})).await;
            let b = error(session, "resources/read", json!({"uri": absent})).await;
            assert_eq!(a["code"], -32002, "{version}: {a}");
            assert_eq!(
                shape(&a, hidden),
                shape(&b, absent),
                "{version} resources/read"
            );
        }
    }
    let (hidden_status, hidden) =
        rest_post(&gateway, "/v1/tools/kit__beta/call", Some(KEY), json!({})).await;
    let (absent_status, absent) =
        rest_post(&gateway, "/v1/tools/kit__zeta/call", Some(KEY), json!({})).await;
    assert_eq!(hidden_status, absent_status, "{hidden} / {absent}");
    assert_eq!(
        shape(&hidden["error"], "kit__beta"),
        shape(&absent["error"], "kit__zeta")
    );
    gateway.assert_alive();
}

/// `toolgate check` probes a skills upstream: an unreadable path fails it, naming the
/// path; readable paths pass.
#[test]
fn check_names_an_unreadable_skills_path() {
    let dir = TempDir::new("skills-check");
    two_skills(&dir.path().join("skills"));
    let config = dir.path().join("toolgate.yaml");
    let run = |paths: &str| {
        let text = format!("upstreams:\n  team:\n    skills: {{paths: {paths}}}\n");
        std::fs::write(&config, text).unwrap();
        // `check` exits once it has looked at every upstream (bounded by
        // startup_timeout and the health timeout, both at their defaults).
        let output = std::process::Command::new(toolgate_e2e::toolgate_bin())
            .arg("check")
            .arg("--config")
            .arg(&config)
            .output()
            .expect("toolgate check");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        (output.status.success(), stdout)
    };
    let (ok, stdout) = run("[skills]");
    assert!(ok, "{stdout}");
    assert!(
        stdout.contains("healthy") && stdout.contains("2 tools"),
        "{stdout}"
    );
    let (ok, stdout) = run("[skills, nowhere]");
    assert!(!ok, "{stdout}");
    assert!(
        stdout.contains("cannot read skills path") && stdout.contains("nowhere"),
        "{stdout}"
    );
}
