//! The skills upstream against real directories: what it lists, what prompts/get,
//! resources/read and the tool answer, that no URI reaches outside a skill, that it
//! follows edits on disk, caps what it serves, and reports an unreadable path.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_adapters::skills::{Limits, SkillsConfig, SkillsUpstream};
use toolgate_adapters::{CallContext, Connection, JsonObject, Upstream};

/// A fresh directory under the system temp dir, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(label: &str) -> Dir {
        let path = std::env::temp_dir().join(format!(
            "toolgate-skills-{label}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(path: &Path, content: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Two skills: `alpha` (skill.yaml, a script, a binary asset) and `beta` (heading only).
fn two_skills(root: &Path) {
    write(
        &root.join("alpha/SKILL.md"),
        "# Alpha heading\n\nDo alpha things.\n",
    );
    write(
        &root.join("alpha/skill.yaml"),
        "name: Alpha Skill\ndescription: Makes alphas\n",
    );
    write(
        &root.join("alpha/scripts/run.sh"),
        "#!/bin/sh\necho alpha\n",
    );
    write(
        &root.join("alpha/assets/logo.png"),
        [0x89u8, b'P', b'N', b'G', 0xff, 0x00],
    );
    write(&root.join("alpha/.hidden"), "not served");
    write(
        &root.join("beta/SKILL.md"),
        "intro\n## Beta tools\nUse beta.\n",
    );
    // Not a skill: no SKILL.md.
    write(&root.join("notes/README.md"), "x");
}

fn ctx() -> CallContext {
    CallContext::new(Duration::from_secs(10), "test")
}

async fn connected(upstream: &SkillsUpstream) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while upstream.connection() != Connection::Connected {
        assert!(Instant::now() < deadline, "not scanned within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `check` (at most 10 s, every 50 ms) until it holds.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..400 {
        if check() {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: not after 400 polls");
}

fn names(items: &[JsonObject], key: &str) -> Vec<String> {
    items
        .iter()
        .map(|i| i[key].as_str().unwrap().to_owned())
        .collect()
}

async fn read(upstream: &SkillsUpstream, uri: &str) -> Result<Value, toolgate_adapters::RpcError> {
    upstream
        .forward("resources/read", Some(json!({"uri": uri})), ctx())
        .await
        .expect("the upstream answers")
}

#[tokio::test]
async fn lists_gets_reads_and_calls() {
    let dir = Dir::new("basic");
    two_skills(&dir.0);
    let config = SkillsConfig {
        paths: vec![dir.0.display().to_string()],
    };
    let upstream = SkillsUpstream::spawn("sk", &config);
    connected(&upstream).await;
    assert_eq!(upstream.last_error(), None);
    upstream.check(Duration::from_secs(5)).await.expect("check");

    let tools = upstream.tools();
    let tool_names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tool_names, ["alpha", "beta"]);
    assert!(
        tools[0].raw["description"]
            .as_str()
            .unwrap()
            .contains("Makes alphas")
    );
    assert_eq!(
        tools[0].raw["inputSchema"],
        json!({"type": "object", "properties": {}})
    );

    let offerings = upstream.offerings();
    assert_eq!(names(&offerings.prompts, "name"), ["alpha", "beta"]);
    assert_eq!(offerings.prompts[0]["description"], "Makes alphas");
    assert_eq!(offerings.prompts[0]["title"], "Alpha Skill");
    assert_eq!(offerings.prompts[1]["description"], "Beta tools");
    assert_eq!(
        names(&offerings.resources, "uri"),
        [
            "skill://alpha/SKILL.md",
            "skill://alpha/assets/logo.png",
            "skill://alpha/scripts/run.sh",
            "skill://alpha/skill.yaml",
            "skill://beta/SKILL.md",
        ]
    );
    let script = &offerings.resources[2];
    assert_eq!(script["name"], "alpha__scripts/run.sh");
    assert_eq!(script["mimeType"], "text/x-shellscript");
    assert_eq!(script["size"], 21);

    let prompt = upstream
        .forward("prompts/get", Some(json!({"name": "beta"})), ctx())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(prompt["messages"][0]["role"], "user");
    assert_eq!(
        prompt["messages"][0]["content"],
        json!({"type": "text", "text": "intro\n## Beta tools\nUse beta.\n"})
    );
    let unknown = upstream
        .forward("prompts/get", Some(json!({"name": "gamma"})), ctx())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(unknown.code, -32602);

    let text = read(&upstream, "skill://alpha/scripts/run.sh")
        .await
        .unwrap();
    assert_eq!(
        text["contents"][0],
        json!({"uri": "skill://alpha/scripts/run.sh", "mimeType": "text/x-shellscript",
               "text": "#!/bin/sh\necho alpha\n"})
    );
    let blob = read(&upstream, "skill://alpha/assets/logo.png")
        .await
        .unwrap();
    assert_eq!(blob["contents"][0]["blob"], "iVBOR/8A");
    assert_eq!(blob["contents"][0]["mimeType"], "image/png");
    assert!(blob["contents"][0].get("text").is_none());

    let output = upstream
        .call("alpha", JsonObject::new(), ctx())
        .await
        .expect("the tool call");
    assert!(!output.is_error());
    let output = output.into_object();
    let content = output["content"].as_array().unwrap();
    assert_eq!(content[0]["text"], "# Alpha heading\n\nDo alpha things.\n");
    let links: Vec<&str> = content[1..]
        .iter()
        .map(|b| {
            assert_eq!(b["type"], "resource_link");
            b["uri"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        links,
        [
            "skill://alpha/SKILL.md",
            "skill://alpha/assets/logo.png",
            "skill://alpha/scripts/run.sh",
            "skill://alpha/skill.yaml",
        ]
    );
    let missing = upstream.call("gamma", JsonObject::new(), ctx()).await;
    assert_eq!(missing.unwrap_err().code(), "not_found");
    upstream.shutdown().await;
    assert_eq!(upstream.connection(), Connection::Closed);
}

#[tokio::test]
async fn no_uri_leaves_a_skill() {
    let dir = Dir::new("escape");
    let skills = dir.0.join("skills");
    two_skills(&skills);
    write(&dir.0.join("secret.txt"), "top secret");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.0.join("secret.txt"), skills.join("alpha/leak.txt"))
            .unwrap();
        std::os::unix::fs::symlink(&dir.0, skills.join("alpha/up")).unwrap();
        std::os::unix::fs::symlink(
            skills.join("alpha/SKILL.md"),
            skills.join("alpha/inside.md"),
        )
        .unwrap();
        // A skill whose SKILL.md leads out of it is not served.
        std::fs::create_dir_all(skills.join("evil")).unwrap();
        std::os::unix::fs::symlink(dir.0.join("secret.txt"), skills.join("evil/SKILL.md")).unwrap();
        // One whose skill.yaml leads out keeps its heading as the description.
        write(&dir.0.join("outside.yaml"), "description: from outside\n");
        std::os::unix::fs::symlink(dir.0.join("outside.yaml"), skills.join("beta/skill.yaml"))
            .unwrap();
    }
    let config = SkillsConfig {
        paths: vec![skills.display().to_string()],
    };
    let upstream = SkillsUpstream::spawn("sk", &config);
    connected(&upstream).await;
    let offerings = upstream.offerings();
    assert_eq!(names(&offerings.prompts, "name"), ["alpha", "beta"]);
    assert_eq!(offerings.prompts[1]["description"], "Beta tools");
    let listed = names(&offerings.resources, "uri");
    assert!(
        !listed
            .iter()
            .any(|u| u.contains("leak") || u.contains("up/")),
        "{listed:?}"
    );
    #[cfg(unix)]
    assert!(
        listed.iter().any(|u| u == "skill://alpha/inside.md"),
        "{listed:?}"
    );
    for uri in [
        "skill://alpha/../secret.txt",
        "skill://alpha/%2E%2E/secret.txt",
        "skill://alpha/..%2Fsecret.txt",
        "skill://alpha/leak.txt",
        "skill://alpha/up/secret.txt",
        "skill://alpha/.hidden",
        "skill://alpha/nope.md",
        "skill://alpha/scripts",
        "skill://gamma/SKILL.md",
        "skill://alpha//etc/passwd",
        "file:///etc/passwd",
        "skill://notes/README.md",
        "skill://evil/SKILL.md",
    ] {
        let error = read(&upstream, uri).await.expect_err(uri);
        assert_eq!(
            (error.code, error.message.as_str(), error.data),
            (-32002, "Resource not found", Some(json!({"uri": uri}))),
            "{uri}"
        );
    }
    #[cfg(unix)]
    read(&upstream, "skill://alpha/inside.md")
        .await
        .expect("a link inside the skill");
    // A file written after the scan is read as it is now.
    write(&skills.join("alpha/scripts/run.sh"), "echo changed\n");
    let now = read(&upstream, "skill://alpha/scripts/run.sh")
        .await
        .unwrap();
    assert_eq!(now["contents"][0]["text"], "echo changed\n");
    upstream.shutdown().await;
}

#[tokio::test]
async fn follows_changes_on_disk() {
    let dir = Dir::new("changes");
    two_skills(&dir.0);
    // One path is a parent of skills, the other is a skill itself.
    let single = dir.0.join("solo");
    write(&single.join("SKILL.md"), "# Solo\n");
    let config = SkillsConfig {
        paths: vec![dir.0.display().to_string(), single.display().to_string()],
    };
    let upstream = SkillsUpstream::spawn("sk", &config);
    connected(&upstream).await;
    let mut changed = upstream.tools_changed();
    let seen = *changed.borrow_and_update();
    let prompts = |u: &SkillsUpstream| names(&u.offerings().prompts, "name");
    assert_eq!(prompts(&upstream), ["alpha", "beta", "solo"]);

    write(&dir.0.join("beta/SKILL.md"), "# Beta renamed\n");
    write(&dir.0.join("alpha/assets/new.txt"), "new");
    std::fs::remove_dir_all(dir.0.join("solo")).unwrap();
    eventually("the edit, the new file and the removed skill", || {
        let offerings = upstream.offerings();
        let uris = names(&offerings.resources, "uri");
        offerings
            .prompts
            .iter()
            .any(|p| p["description"] == "Beta renamed")
            && uris.contains(&"skill://alpha/assets/new.txt".to_owned())
            && !uris.iter().any(|u| u.starts_with("skill://solo/"))
            && upstream.tools().len() == 2
    })
    .await;
    assert!(
        *changed.borrow_and_update() > seen,
        "tools_changed was bumped"
    );
    assert_eq!(prompts(&upstream), ["alpha", "beta"]);

    write(&dir.0.join("gamma/SKILL.md"), "# Gamma\n");
    eventually("a new skill", || {
        upstream.tools().iter().any(|t| t.name == "gamma")
    })
    .await;
    // Directories that did not exist at the last scan are watched from then on.
    write(&dir.0.join("gamma/docs/deep/guide.md"), "deep");
    eventually("a file in new directories", || {
        names(&upstream.offerings().resources, "uri")
            .contains(&"skill://gamma/docs/deep/guide.md".to_owned())
    })
    .await;
    write(&dir.0.join("gamma/docs/deep/more.md"), "more");
    eventually("a second file there", || {
        names(&upstream.offerings().resources, "uri")
            .contains(&"skill://gamma/docs/deep/more.md".to_owned())
    })
    .await;
    upstream.shutdown().await;
}

#[tokio::test]
async fn caps_and_unreadable_paths() {
    let dir = Dir::new("caps");
    for n in 0..5 {
        write(&dir.0.join(format!("s{n}/SKILL.md")), "# S\n");
        for f in 0..5 {
            write(&dir.0.join(format!("s{n}/f{f}.txt")), "x");
        }
    }
    write(&dir.0.join("s0/big.bin"), vec![0u8; 2048]);
    let missing = dir.0.join("missing");
    let config = SkillsConfig {
        paths: vec![dir.0.display().to_string(), missing.display().to_string()],
    };
    let limits = Limits {
        max_skills: 3,
        max_files_per_skill: 4,
        max_total_files: 10,
        max_file_bytes: 1024,
        max_depth: 2,
    };
    let upstream = SkillsUpstream::spawn_with_limits("sk", &config, limits);
    connected(&upstream).await;
    assert_eq!(upstream.tools().len(), 3);
    let offerings = upstream.offerings();
    assert!(
        offerings.resources.len() <= 10,
        "{}",
        offerings.resources.len()
    );
    assert!(
        !names(&offerings.resources, "uri")
            .iter()
            .any(|u| u.contains("big.bin"))
    );
    let error = upstream.last_error().expect("the missing path is reported");
    assert!(error.contains(&missing.display().to_string()), "{error}");
    let check = upstream.check(Duration::from_secs(5)).await.unwrap_err();
    assert!(check.to_string().contains("missing"), "{check}");
    // Once the path exists, it is picked up and the error clears.
    write(&missing.join("late/SKILL.md"), "# Late\n");
    eventually("the late path", || upstream.last_error().is_none()).await;
    upstream
        .check(Duration::from_secs(5))
        .await
        .expect("readable now");
    upstream.shutdown().await;
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// FIFOs never block the upstream (no writer ever comes): one among a skill's files
/// is left out of the listing, and a file or SKILL.md swapped for a FIFO after the
/// scan is answered at once with an error; the whole test is bounded by 20 s.
#[cfg(unix)]
#[tokio::test]
async fn fifos_are_left_out_and_never_block() {
    let dir = Dir::new("fifo");
    write(&dir.0.join("alpha/SKILL.md"), "# Alpha\n");
    write(&dir.0.join("alpha/notes.md"), "notes");
    mkfifo(&dir.0.join("alpha/pipe.md"));
    let config = SkillsConfig {
        paths: vec![dir.0.display().to_string()],
    };
    let upstream = SkillsUpstream::spawn("sk", &config);
    let within = Duration::from_secs(20);
    tokio::time::timeout(within, async {
        connected(&upstream).await;
        let uris = names(&upstream.offerings().resources, "uri");
        assert!(uris.iter().any(|u| u.ends_with("/notes.md")), "{uris:?}");
        assert!(!uris.iter().any(|u| u.contains("pipe")), "{uris:?}");
        let refused = read(&upstream, "skill://alpha/pipe.md").await;
        assert!(refused.is_err(), "{refused:?}");

        // Swapped for FIFOs after the scan: answered at once.
        std::fs::remove_file(dir.0.join("alpha/notes.md")).unwrap();
        mkfifo(&dir.0.join("alpha/notes.md"));
        let refused = read(&upstream, "skill://alpha/notes.md").await;
        assert!(refused.is_err(), "{refused:?}");
        std::fs::remove_file(dir.0.join("alpha/SKILL.md")).unwrap();
        mkfifo(&dir.0.join("alpha/SKILL.md"));
        let prompt = upstream
            .forward("prompts/get", Some(json!({"name": "alpha"})), ctx())
            .await
            .expect("the upstream answers");
        assert!(prompt.is_err(), "{prompt:?}");
        // The rescans the swaps cause finish too: the skill is gone from the listing.
        eventually("alpha leaves the listing", || upstream.tools().is_empty()).await;
    })
    .await
    .expect("nothing blocked on a FIFO");
    upstream.shutdown().await;
}
