//! Shared helpers of the OpenAPI tests (a directory, so cargo does not build it as a test target of its own).

#![allow(dead_code)]

use std::path::PathBuf;

/// The shared spec corpus: `$TOOLGATE_SHARED/specs`, by default `../shared/specs`
/// relative to the workspace root. `None` (after a notice) when it is missing, except
/// under `CI=true`, where a missing corpus fails the test.
pub fn specs_dir() -> Option<PathBuf> {
    let shared = match std::env::var("TOOLGATE_SHARED") {
        Ok(d) => PathBuf::from(d),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    };
    let specs = shared.join("specs");
    if specs.is_dir() {
        return Some(specs);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "the spec corpus is missing at {} (set TOOLGATE_SHARED)",
            specs.display()
        );
    }
    eprintln!(
        "NOTICE: spec corpus not found at {}; skipping",
        specs.display()
    );
    None
}

/// This crate's own test data.
pub fn data(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
        .to_string_lossy()
        .into_owned()
}
