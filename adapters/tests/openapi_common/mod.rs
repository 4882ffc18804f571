//! Shared helpers of the OpenAPI tests (a directory, so cargo does not build it as a test target of its own).

#![allow(dead_code)]

use std::path::PathBuf;

/// The shared spec corpus: `$TOOLGATE_SHARED/specs`, by default `../shared/specs`
/// relative to the workspace root. `None` (after a notice) when it is missing, except
/// under `CI=true`, where a missing corpus fails the test.
pub(crate) fn specs_dir() -> Option<PathBuf> {
    toolgate_test_support::specs_dir(&[])
}

/// This crate's own test data.
pub(crate) fn data(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
        .to_string_lossy()
        .into_owned()
}
