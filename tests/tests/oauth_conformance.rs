//! toolgate as the OAuth client of its upstreams, judged by the official MCP
//! conformance suite (npm `@modelcontextprotocol/conformance` 0.2.0-alpha.12, its
//! client `auth/*` scenarios): each scenario starts an OAuth-protected MCP server and
//! its authorization server, and runs `tests/python/oauth_conformance_client.py`
//! against them. That client starts toolgate with the scenario's server as an
//! upstream configured `credentials: oauth`, connects a user through the gateway's
//! connect link (in place of a browser) and calls the upstream's tool through the
//! gateway. The suite checks what reached the servers: discovery paths, registration,
//! PKCE, `resource`, scopes, token endpoint authentication, step-up and its limit.
//!
//! Every scored `auth/*` scenario of `--requirements 2025-11-25` runs at that
//! revision, each on its own, and must end with no failed check and no warning; so
//! must the client-credentials extension's two (the gateway's own service identity,
//! `credentials: client_credentials`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use toolgate_e2e::{NodeDeps, TempDir, require, run_bounded, toolgate_bin};

/// The scored `auth/*` client scenarios of the suite's 2025-11-25 requirements.
const SCENARIOS_2025_11_25: [&str; 14] = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
];

/// The client-credentials extension (`io.modelcontextprotocol/oauth-client-credentials`,
/// not scored): the gateway's own service identity, with a secret and with a signed
/// assertion.
const EXTENSIONS: [&str; 2] = [
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
];

/// Scenarios run at once (each starts a gateway and two servers).
const PARALLEL: usize = 4;

/// One scenario's outcome: the suite's exit status and the checks it recorded.
struct Outcome {
    scenario: String,
    exit_ok: bool,
    /// `(id, status, description)` of every check not SUCCESS or INFO.
    bad: Vec<(String, String, String)>,
    checks: usize,
    output: String,
}

fn run_scenario(deps: &NodeDeps, python: &Path, scenario: &str) -> Outcome {
    let dir = TempDir::new("oauth-conformance");
    let results = dir.path().join("results");
    let out_path = dir.path().join("out");
    let client =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/oauth_conformance_client.py");
    let mut cmd = std::process::Command::new(deps.node());
    cmd.arg(deps.conformance_next_entry())
        .arg("client")
        .arg("--command")
        // The suite splits the command on spaces: neither path may hold one.
        .arg(format!("{} {}", python.display(), client.display()))
        .arg("--scenario")
        .arg(scenario)
        .arg("--spec-version")
        .arg("2025-11-25")
        // As `--requirements` runs its set: extension scenarios too, at the revision.
        .arg("--force")
        .arg("--timeout")
        .arg("60000")
        .arg("-o")
        .arg(&results)
        .env("TOOLGATE_BIN", toolgate_bin())
        .env("NO_COLOR", "1");
    let out = std::fs::File::create(&out_path).expect("output file");
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().expect("output file"))
        .stderr(out);
    let status = run_bounded(&mut cmd, Duration::from_secs(120));
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let exit_ok = status.as_ref().is_ok_and(|s| s.success());
    let (checks, bad) = recorded_checks(&results);
    Outcome {
        scenario: scenario.to_owned(),
        exit_ok,
        bad,
        checks,
        output,
    }
}

/// The checks of every `checks.json` under `dir`: how many, and the ones neither
/// SUCCESS nor INFO.
fn recorded_checks(dir: &Path) -> (usize, Vec<(String, String, String)>) {
    let mut count = 0;
    let mut bad = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut visited = 0;
    while let Some(d) = stack.pop() {
        visited += 1;
        if visited > 200 {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "checks.json") {
                let checks: Value = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or(Value::Null);
                for check in checks.as_array().into_iter().flatten() {
                    count += 1;
                    let status = check["status"].as_str().unwrap_or("").to_owned();
                    if status != "SUCCESS" && status != "INFO" {
                        bad.push((
                            check["id"].as_str().unwrap_or("").to_owned(),
                            status,
                            check["description"].as_str().unwrap_or("").to_owned(),
                        ));
                    }
                }
            }
        }
    }
    (count, bad)
}

#[test]
fn the_gateway_passes_every_scored_client_auth_scenario_of_2025_11_25_and_client_credentials() {
    let deps = require!(NodeDeps::conformance_next());
    let python = require!(toolgate_e2e::python());
    let mut outcomes = Vec::new();
    let all: Vec<&str> = SCENARIOS_2025_11_25
        .iter()
        .chain(&EXTENSIONS)
        .copied()
        .collect();
    for chunk in all.chunks(PARALLEL) {
        let runs: Vec<_> = chunk
            .iter()
            .map(|scenario| {
                let (deps, python, scenario) = (deps.clone(), python.clone(), scenario.to_string());
                std::thread::spawn(move || run_scenario(&deps, &python, &scenario))
            })
            .collect();
        outcomes.extend(runs.into_iter().map(|r| r.join().expect("scenario thread")));
    }
    let mut failures = Vec::new();
    for outcome in &outcomes {
        println!(
            "{}: {} checks, {} not passed, suite exit {}",
            outcome.scenario,
            outcome.checks,
            outcome.bad.len(),
            if outcome.exit_ok { "ok" } else { "failed" }
        );
        if !outcome.exit_ok || !outcome.bad.is_empty() || outcome.checks == 0 {
            failures.push(format!(
                "{}: {:?}\n{}",
                outcome.scenario,
                outcome.bad,
                outcome
                    .output
                    .chars()
                    .rev()
                    .take(4000)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>()
            ));
        }
    }
    let passed = outcomes.len() - failures.len();
    println!(
        "client auth scenarios (2025-11-25 and client credentials): {passed}/{} pass",
        outcomes.len()
    );
    assert!(
        failures.is_empty(),
        "scenarios not passed:\n{}",
        failures.join("\n\n")
    );
}
