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
        // Examples use ${VAR:-default}; load them with an empty environment so a
        // variable without a default is caught.
        if let Err(error) = Config::parse(&text, &|_| None) {
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
    assert!(everything.stdio.is_some());
    assert_eq!(config.listen, "127.0.0.1:8080");
}
