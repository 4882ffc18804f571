//! The real browser of the tests: Debian's `chromium`, driven by npm `playwright-core`
//! from a script in `tests/node/`. A missing one is a notice and a skip, except under
//! `CI=true` (`.ci/run` installs chromium; `scripts/test` the npm packages).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::{NodeDeps, missing, run_bounded, workspace_root};

/// Debian's chromium (`TOOLGATE_CHROMIUM` overrides the path).
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("TOOLGATE_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.is_file() {
        Some(path)
    } else {
        missing(
            &path.display().to_string(),
            "Debian's chromium: apt-get install chromium (.ci/run installs it)",
        );
        None
    }
}

/// Whether `deps` has npm `playwright-core` (a notice when not).
pub fn has_playwright(deps: &NodeDeps) -> bool {
    let found = deps
        .node_modules
        .join("playwright-core/package.json")
        .is_file();
    if !found {
        missing("npm playwright-core", "npm package not installed");
    }
    found
}

/// `<target dir>/<name>`, where a browser test leaves its screenshots.
pub fn screenshot_dir(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test> -> target
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join(name)
}

/// Runs `tests/node/<script>` with `env` (plus `NODE_MODULES` and `CHROMIUM`),
/// bounded by `timeout`, its output kept in `log`. The JSON summary it prints last
/// when it succeeded; otherwise the output, as the error.
pub fn run_script(
    deps: &NodeDeps,
    chromium: &Path,
    script: &str,
    env: &[(&str, &str)],
    log: &Path,
    timeout: Duration,
) -> Result<Value, String> {
    let mut cmd = std::process::Command::new(deps.node());
    cmd.arg(workspace_root().join("tests/node").join(script))
        .current_dir(workspace_root())
        .env("NODE_MODULES", &deps.node_modules)
        .env("CHROMIUM", chromium)
        .envs(env.iter().copied());
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let out = std::fs::File::create(log).map_err(|e| e.to_string())?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(out.try_clone().map_err(|e| e.to_string())?)
        .stderr(out);
    let status = run_bounded(&mut cmd, timeout);
    let text = std::fs::read_to_string(log).unwrap_or_default();
    match status {
        Ok(status) if status.success() => text
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
            .ok_or_else(|| format!("{script} printed no summary:\n{text}")),
        Ok(status) => Err(format!("{script} failed ({status}):\n{text}")),
        Err(e) => Err(format!("{script}: {e}:\n{text}")),
    }
}
