//! What can be checked of the container image without a container engine: the
//! Dockerfile's promises (non-root 65532, the binary and config where the entrypoint
//! looks, a locked release build), that the binary needs no shared library beyond what
//! the distroless `cc` base ships, and that the image's built-in config is valid.
//! (Building and running the image needs a Docker engine; these machines have none.)

use std::process::Command;

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

#[test]
fn dockerfile_runs_the_binary_as_65532_on_a_distroless_base() {
    let dockerfile =
        std::fs::read_to_string(workspace_root().join("Dockerfile")).expect("read the Dockerfile");
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let stages: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(
        stages.len(),
        2,
        "a build stage and a runtime stage: {stages:?}"
    );
    assert!(
        stages[1].contains("gcr.io/distroless/cc-debian12"),
        "minimal runtime image: {}",
        stages[1]
    );
    let runtime: Vec<&&str> = lines
        .iter()
        .skip_while(|l| !l.starts_with("FROM gcr.io/distroless"))
        .collect();
    assert!(
        runtime.contains(&&"USER 65532:65532"),
        "non-root 65532: {runtime:?}"
    );
    assert!(
        runtime.contains(&&r#"ENTRYPOINT ["/usr/local/bin/toolgate"]"#),
        "{runtime:?}"
    );
    assert!(
        runtime.contains(&&r#"CMD ["serve", "--config", "/etc/toolgate/config.yaml"]"#),
        "{runtime:?}"
    );
    assert!(
        runtime.contains(&&"COPY config/container.yaml /etc/toolgate/config.yaml"),
        "the built-in config the CMD names: {runtime:?}"
    );
    assert!(
        dockerfile.contains("cargo build --release -p toolgate --locked"),
        "a locked release build"
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
