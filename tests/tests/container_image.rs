//! What can be checked of the container image without a container engine: the build
//! context (every workspace member and file the build needs is sent, heavy and secret
//! directories are not), the Dockerfile's promises (non-root 65532, the binary and
//! config where the entrypoint looks, a locked release build, a health check), that
//! the binary needs no shared library beyond what the distroless `cc` base ships, and
//! that the image's built-in config is valid.
//! (Building the image needs its base images from a registry: `rust`, distroless and
//! `debian`. The test machines reach no registry, so no test builds it here.)

use std::process::Command;

use serde_json::Value;
use toolgate_e2e::build_context::DockerIgnore;
use toolgate_e2e::{toolgate_bin, workspace_root};

/// Shared libraries `gcr.io/distroless/cc-debian12` provides (glibc, libgcc, libm).
const DISTROLESS_CC_LIBS: &[&str] = &[
    "linux-vdso.so.1",
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
];

/// One `FROM … AS name` stage of the Dockerfile: its base and its instructions, each
/// on one line (continuations joined, comments dropped).
struct Stage {
    base: String,
    name: String,
    lines: Vec<String>,
}

impl Stage {
    fn has(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l == line)
    }

    fn starting(&self, prefix: &str) -> Vec<&String> {
        self.lines
            .iter()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }
}

fn dockerfile_stages() -> Vec<Stage> {
    let text =
        std::fs::read_to_string(workspace_root().join("Dockerfile")).expect("read the Dockerfile");
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(line);
                instructions.push(std::mem::take(&mut current));
            }
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    for instruction in instructions {
        if let Some(from) = instruction.strip_prefix("FROM ") {
            let words: Vec<&str> = from.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => name.to_string(),
                _ => panic!("every stage is named (FROM image AS name): {instruction}"),
            };
            stages.push(Stage {
                base: words[0].to_owned(),
                name,
                lines: Vec::new(),
            });
        } else {
            stages
                .last_mut()
                .expect("an instruction before the first FROM")
                .lines
                .push(instruction);
        }
    }
    stages
}

/// What both runtime images promise: the binary and config where the entrypoint
/// looks, non-root 65532, writable state at /var/lib/toolgate, and a health check in
/// exec form (no shell in distroless) that asks `toolgate healthcheck`.
fn assert_runtime_stage(stage: &Stage) {
    let name = &stage.name;
    let describe = || format!("stage {name}: {:#?}", stage.lines);
    for line in [
        "USER 65532:65532",
        r#"ENTRYPOINT ["/usr/local/bin/toolgate"]"#,
        r#"CMD ["serve", "--config", "/etc/toolgate/config.yaml"]"#,
        "COPY config/container.yaml /etc/toolgate/config.yaml",
        "COPY --from=build /out/usr/local/bin/toolgate /usr/local/bin/toolgate",
        "COPY --from=build --chown=65532:65532 /out/var/lib/toolgate /var/lib/toolgate",
    ] {
        assert!(stage.has(line), "missing `{line}` in {}", describe());
    }
    let health = stage.starting("HEALTHCHECK ");
    assert_eq!(health.len(), 1, "one health check: {}", describe());
    let command = health[0]
        .split_once(" CMD ")
        .map(|(_, command)| command.trim())
        .unwrap_or_else(|| panic!("HEALTHCHECK … CMD …: {}", health[0]));
    assert!(
        command.starts_with(r#"["/usr/local/bin/toolgate", "healthcheck""#),
        "exec form (no shell) running `toolgate healthcheck`: {command}"
    );
    assert!(
        command.contains(r#""--config", "/etc/toolgate/config.yaml"]"#),
        "the health check asks the address the CMD's config listens on: {command}"
    );
}

#[test]
fn dockerfile_builds_a_distroless_default_and_a_node_variant_both_as_65532() {
    let stages = dockerfile_stages();
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["build", "runtime-node", "runtime"], "the stages");

    let build = &stages[0];
    assert!(
        build.starting("RUN ").iter().any(|l| l
            .contains("cargo build --profile dist -p toolgate --locked")
            && l.contains("target/dist/toolgate")),
        "a locked build with the stripped `dist` profile: {:#?}",
        build.lines
    );
    let manifest =
        std::fs::read_to_string(workspace_root().join("Cargo.toml")).expect("Cargo.toml");
    let dist = manifest
        .split("[profile.dist]")
        .nth(1)
        .unwrap_or_else(|| panic!("Cargo.toml has no [profile.dist]"));
    let dist = dist.split("\n[").next().unwrap_or_default();
    assert!(
        dist.contains("inherits = \"release\"") && dist.contains("strip = \"symbols\""),
        "[profile.dist] is release without symbols: {dist}"
    );

    // The default target (the last stage): the binary alone on distroless.
    let runtime = &stages[2];
    assert_eq!(runtime.base, "gcr.io/distroless/cc-debian12:nonroot");
    assert_runtime_stage(runtime);

    // The variant for stdio servers: Node.js (npx) and uv (uvx), as the same user,
    // every cache and home under the writable /tmp (read-only root filesystem).
    let node = &stages[1];
    assert!(node.base.starts_with("debian:"), "{}", node.base);
    assert_runtime_stage(node);
    let run = node
        .starting("RUN ")
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for needed in ["nodejs", "npm", "uv==", "--uid 65532", "--gid 65532"] {
        assert!(
            run.contains(needed),
            "runtime-node installs {needed}: {run}"
        );
    }
    let env = node
        .starting("ENV ")
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    for variable in [
        "HOME",
        "npm_config_cache",
        "UV_CACHE_DIR",
        "UV_TOOL_DIR",
        "UV_PYTHON_INSTALL_DIR",
    ] {
        let value = env
            .split_whitespace()
            .find_map(|pair| pair.strip_prefix(&format!("{variable}=")))
            .unwrap_or_else(|| panic!("runtime-node sets {variable}: {env}"));
        assert!(
            value == "/tmp" || value.starts_with("/tmp/"),
            "{variable}={value} is not under the writable /tmp"
        );
    }
}

/// The docs' build commands name targets the Dockerfile has, and say how the image
/// checks its health.
#[test]
fn the_docs_build_the_images_the_dockerfile_has() {
    let stages: Vec<String> = dockerfile_stages().into_iter().map(|s| s.name).collect();
    let docs = std::fs::read_to_string(workspace_root().join("docs/helm.md")).expect("docs");
    let targets: Vec<&str> = docs
        .split("--target ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    assert!(
        targets.contains(&"runtime-node"),
        "docs/helm.md builds the node variant"
    );
    for target in targets {
        assert!(
            stages.iter().any(|s| s == target),
            "no stage {target}: {stages:?}"
        );
    }
    assert!(
        docs.contains("toolgate healthcheck"),
        "docs/helm.md names the health check"
    );
}

#[test]
fn the_binary_needs_only_what_the_distroless_cc_base_ships() {
    let binary = toolgate_bin();
    let output = match Command::new("ldd").arg(&binary).output() {
        Ok(output) => output,
        Err(error) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "ldd is needed under CI=true: {error}"
            );
            eprintln!("NOTICE: skipping: ldd not available ({error})");
            return;
        }
    };
    let listing = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "ldd {}: {listing}",
        binary.display()
    );
    let needed: Vec<&str> = listing
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(|lib| lib.rsplit('/').next().unwrap_or(lib))
        .collect();
    assert!(needed.contains(&"libc.so.6"), "{listing}");
    let missing: Vec<&&str> = needed
        .iter()
        .filter(|lib| !DISTROLESS_CC_LIBS.contains(lib))
        .collect();
    assert!(
        missing.is_empty(),
        "not in the distroless cc image: {missing:?}\n{listing}"
    );
}

#[test]
fn the_images_built_in_config_is_valid() {
    let output = Command::new(toolgate_bin())
        .args(["check", "--config"])
        .arg(workspace_root().join("config/container.yaml"))
        .output()
        .expect("run toolgate check");
    assert!(
        output.status.success(),
        "toolgate check config/container.yaml: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---------------------------------------------------------------------------------
// The build context
// ---------------------------------------------------------------------------------

/// The workspace members' directories, relative to the root, from `cargo metadata`
/// (what `cargo build` in the context will load).
fn workspace_member_dirs() -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata JSON");
    let root = std::fs::canonicalize(workspace_root()).expect("the workspace root");
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut dirs: Vec<String> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(&id)))
        .map(|p| {
            let manifest = std::path::Path::new(p["manifest_path"].as_str().expect("a path"));
            let dir = manifest.parent().expect("a manifest's directory");
            dir.strip_prefix(&root)
                .unwrap_or_else(|_| panic!("{} is outside the workspace", dir.display()))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 3, "workspace members: {dirs:?}");
    dirs
}

/// The files the members' sources embed (`include_str!("…")`, `include_bytes!("…")`),
/// relative to the root: the build fails without them as surely as without a manifest.
fn embedded_files(context: &[String], member_dirs: &[String]) -> Vec<String> {
    let mut embedded = Vec::new();
    for file in context.iter().filter(|f| f.ends_with(".rs")) {
        if !member_dirs
            .iter()
            .any(|d| file.starts_with(&format!("{d}/")))
        {
            continue;
        }
        let text = std::fs::read_to_string(workspace_root().join(file)).expect("a source");
        for macro_name in ["include_str!(\"", "include_bytes!(\""] {
            for (start, _) in text.match_indices(macro_name) {
                let rest = &text[start + macro_name.len()..];
                let Some(end) = rest.find('"') else { continue };
                let dir = std::path::Path::new(file).parent().expect("in a directory");
                let joined = dir.join(&rest[..end]);
                // Resolve `..` lexically: the context has no symlinks to follow.
                let mut parts: Vec<String> = Vec::new();
                for part in joined.components() {
                    match part {
                        std::path::Component::ParentDir => {
                            parts.pop();
                        }
                        std::path::Component::Normal(p) => {
                            parts.push(p.to_string_lossy().into_owned())
                        }
                        _ => {}
                    }
                }
                // Only files that exist: a missing one fails the build anyway, and
                // this also skips the macros' names in comments (like this file's).
                let path = parts.join("/");
                if workspace_root().join(&path).is_file() {
                    embedded.push(path);
                }
            }
        }
    }
    embedded
}

/// The sources the Dockerfile's `COPY` lines take from the context (not `--from` a
/// stage), e.g. `.` and `config/container.yaml`.
fn copied_sources(dockerfile: &str) -> Vec<String> {
    let mut sources = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        let Some(args) = line.strip_prefix("COPY ") else {
            continue;
        };
        let words: Vec<&str> = args.split_whitespace().collect();
        if words.iter().any(|w| w.starts_with("--from=")) {
            continue;
        }
        let paths: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| !w.starts_with("--"))
            .collect();
        if let Some((_destination, from)) = paths.split_last() {
            sources.extend(from.iter().map(|s| s.to_string()));
        }
    }
    sources
}

#[test]
fn the_build_context_holds_every_workspace_member_and_what_the_dockerfile_copies() {
    let root = workspace_root();
    let rules = DockerIgnore::load(&root).unwrap_or_else(|e| panic!("{e}"));
    let context = rules
        .context_files(&root)
        .unwrap_or_else(|e| panic!("walking the build context: {e}"));
    let in_context = |path: &str| context.binary_search(&path.to_owned()).is_ok();
    let mut missing = Vec::new();

    // `cargo build --locked` loads every member's manifest, and the workspace's.
    let members = workspace_member_dirs();
    for file in ["Cargo.toml", "Cargo.lock"] {
        if !in_context(file) {
            missing.push(file.to_owned());
        }
    }
    for dir in &members {
        let manifest = format!("{dir}/Cargo.toml");
        if !in_context(&manifest) {
            missing.push(manifest);
        }
        // Every Rust source of the member (a manifest alone does not build).
        let on_disk = DockerIgnore::parse("")
            .unwrap()
            .context_files(&root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"));
        for file in on_disk.iter().filter(|f| f.ends_with(".rs")) {
            let path = format!("{dir}/{file}");
            if !path.contains("/target/") && !in_context(&path) {
                missing.push(path);
            }
        }
    }
    for file in embedded_files(&context, &members) {
        if !in_context(&file) {
            missing.push(format!(
                "{file} (embedded with include_str!/include_bytes!)"
            ));
        }
    }
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("the Dockerfile");
    let sources = copied_sources(&dockerfile);
    assert!(
        sources.contains(&".".to_owned()),
        "COPY sources: {sources:?}"
    );
    for source in &sources {
        let source = source.trim_start_matches("./");
        let present = match source {
            "" | "." => !context.is_empty(),
            path => in_context(path) || context.iter().any(|f| f.starts_with(&format!("{path}/"))),
        };
        if !present {
            missing.push(format!("{source} (copied by the Dockerfile)"));
        }
    }
    assert!(
        missing.is_empty(),
        "not in the build context after .dockerignore (cargo or COPY would fail in `docker \
         build`):\n  {}",
        missing.join("\n  ")
    );

    // Heavy or secret-bearing directories stay out: history, build output,
    // dependencies installed on this machine.
    for path in [
        ".git",
        ".git/config",
        "target/release/toolgate",
        "node_modules/x/package.json",
        ".venv/bin/python",
    ] {
        assert!(
            rules.excludes(path),
            "{path} would be sent to the builder: add it to .dockerignore"
        );
    }
    let heavy: Vec<&String> = context
        .iter()
        .filter(|f| {
            [".git/", "target/", "node_modules/", ".venv/"]
                .iter()
                .any(|d| f.starts_with(d) || f.contains(&format!("/{d}")))
        })
        .take(5)
        .collect();
    assert!(heavy.is_empty(), "in the build context: {heavy:?}");
}
