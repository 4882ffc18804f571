//! Every config file shipped in `config/` must load: an example that drifts from the
//! config model is a broken promise to users.

use std::path::Path;

use toolgate::config::Config;

#[test]
fn every_example_config_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("config/ exists") {
        let path = entry.expect("readable entry").path();
        if !matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable config");
        // Examples use ${VAR:-default}, except for the secrets a deployment must
        // choose (an example value would be public): load them with only those set,
        // so any other variable without a default is caught.
        if let Err(error) = Config::parse(&text, &required_secrets) {
            panic!("{} does not load: {error}", path.display());
        }
        checked += 1;
    }
    assert!(
        checked >= 2,
        "expected the example configs in {}",
        dir.display()
    );
}

#[test]
fn quickstart_mounts_server_everything() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/quickstart.yaml");
    let config = Config::load(&path).expect("quickstart loads");
    let everything = &config.upstreams["everything"];
    assert!(everything.stdio().is_some());
    assert_eq!(config.listen, "127.0.0.1:8080");
}

/// The variables examples require without a default: secrets no example may choose
/// for a deployment (the admin token: the gateway refuses known example tokens).
fn required_secrets(name: &str) -> Option<String> {
    match name {
        "TOOLGATE_ADMIN_TOKEN" => Some("golden-admin-token-0123456789".into()),
        _ => None,
    }
}

/// Fixed values for the variables the examples read, so their normalized forms do not
/// depend on the machine; any other variable takes the default written in the file.
fn golden_env(name: &str) -> Option<String> {
    match name {
        "REMOTE_MCP_TOKEN" => Some("golden-remote-token".into()),
        _ => required_secrets(name),
    }
}

/// No shipped example falls back to a token the gateway refuses: unset, the admin
/// token is an error naming the variable, not a public default.
#[test]
fn no_example_falls_back_to_an_example_token() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    for name in ["openapi-and-tenants.yaml", "replicas-redis.yaml"] {
        let text = std::fs::read_to_string(dir.join(name)).expect("readable config");
        let error = Config::parse(&text, &|_| None)
            .expect_err(&format!("{name} loads without TOOLGATE_ADMIN_TOKEN"))
            .to_string();
        assert!(error.contains("TOOLGATE_ADMIN_TOKEN"), "{name}: {error}");
    }
}

/// Each example's meaning, spelled out: the parsed config serialized back (defaults
/// filled in, `${VAR}` substituted, secrets as they serialize), committed as
/// `config/normalized/NAME.yaml` so a change in what a file means shows in review.
/// `TOOLGATE_WRITE_GOLDEN=1` rewrites the snapshots.
#[test]
fn every_example_config_matches_its_normalized_form() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    let golden_dir = dir.join("normalized");
    let write = std::env::var_os("TOOLGATE_WRITE_GOLDEN").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("config/ exists") {
        let path = entry.expect("readable entry").path();
        if !matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            continue;
        }
        let name = path.file_name().expect("a file name").to_owned();
        let text = std::fs::read_to_string(&path).expect("readable config");
        let config = Config::parse(&text, &golden_env)
            .unwrap_or_else(|e| panic!("{} does not load: {e}", path.display()));
        let normalized = format!(
            "# {} as the gateway reads it (generated: TOOLGATE_WRITE_GOLDEN=1 cargo test -p \
             toolgate --test config_examples)\n{}",
            Path::new("config").join(&name).display(),
            serde_norway::to_string(&config).expect("a config serializes")
        );
        // The normalized form is itself a config that means the same.
        let reread = Config::parse(&normalized, &|_| None)
            .unwrap_or_else(|e| panic!("normalized {} does not load: {e}", path.display()));
        assert_eq!(reread, config, "{} does not round-trip", path.display());
        let golden = golden_dir.join(&name);
        if write {
            std::fs::create_dir_all(&golden_dir).expect("config/normalized/ can be created");
            std::fs::write(&golden, &normalized).expect("golden file written");
        } else {
            let committed = std::fs::read_to_string(&golden).unwrap_or_default();
            if committed != normalized {
                failures.push(format!(
                    "{} differs from {}:\n{}",
                    golden.display(),
                    path.display(),
                    line_diff(&committed, &normalized)
                ));
            }
        }
        names.push(name);
    }
    assert!(names.len() >= 2, "expected the example configs");
    if !write {
        // A snapshot whose example is gone is stale.
        for entry in std::fs::read_dir(&golden_dir).expect("config/normalized/ exists") {
            let name = entry.expect("readable entry").file_name();
            if !names.contains(&name) {
                failures.push(format!("config/normalized/{name:?} has no example config"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\n(if the change is intended: TOOLGATE_WRITE_GOLDEN=1 cargo test -p toolgate \
         --test config_examples, and review the diff)",
        failures.join("\n\n")
    );
}

/// The lines only in `old` (`-`) and only in `new` (`+`), around the first difference:
/// enough to see what changed without a diff library.
fn line_diff(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = format!("@@ line {} @@\n", prefix + 1);
    for line in &old[prefix..old.len() - suffix] {
        out.push_str(&format!("-{line}\n"));
    }
    for line in &new[prefix..new.len() - suffix] {
        out.push_str(&format!("+{line}\n"));
    }
    out
}
