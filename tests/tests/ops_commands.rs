//! What an operator runs around the gateway, as real processes: `toolgate healthcheck`
//! (the container image's health check) against a ready gateway, one still starting
//! and a closed port.
//!
//! No upstream here needs node: each gateway serves an empty catalog or waits on
//! `sleep`. Every server binds 127.0.0.1; every run is bounded.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use toolgate_e2e::{Gateway, TempDir, free_port, toolgate_bin, workspace_root};

/// Bound for one short command (no upstream starts).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn describe(&self) -> String {
        format!(
            "exit: {:?}\n----- stdout -----\n{}\n----- stderr -----\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `toolgate ARGS` with `env` added, to completion within [`RUN_TIMEOUT`].
fn toolgate(args: &[&str], env: &[(&str, &str)]) -> Run {
    let dir = TempDir::new("ops-run");
    let out = dir.path().join("stdout");
    let err = dir.path().join("stderr");
    let mut command = Command::new(toolgate_bin());
    command
        .args(args)
        .envs(env.iter().copied())
        .env("TOOLGATE_LOG", "info,rmcp=warn")
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"));
    let status = toolgate_e2e::run_bounded(&mut command, RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("toolgate {args:?}: {e}"));
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Run {
        code: status.code(),
        stdout: read(&out),
        stderr: read(&err),
    }
}

fn path_arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

// ---------------------------------------------------------------------------------
// healthcheck
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn healthcheck_is_0_for_a_ready_gateway_by_url_and_by_its_config() {
    let gateway = Gateway::start(json!({"upstreams": {}})).await;
    let url = format!("{}/readyz", gateway.base);
    let by_url = toolgate(&["healthcheck", "--url", &url], &[]);
    assert_eq!(by_url.code, Some(0), "{}", by_url.describe());
    let by_config = toolgate(
        &["healthcheck", "--config", path_arg(&gateway.config_path)],
        &[],
    );
    assert_eq!(by_config.code, Some(0), "{}", by_config.describe());
    let by_listen = toolgate(
        &[
            "healthcheck",
            "--listen",
            &format!("127.0.0.1:{}", gateway.port),
        ],
        &[],
    );
    assert_eq!(by_listen.code, Some(0), "{}", by_listen.describe());
}

#[test]
fn healthcheck_fails_in_one_line_naming_a_closed_port() {
    let port = free_port();
    let run = toolgate(
        &[
            "healthcheck",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--timeout",
            "2s",
        ],
        &[],
    );
    assert_eq!(run.code, Some(1), "{}", run.describe());
    let line = run.stderr.trim();
    assert!(!line.contains('\n'), "one line: {}", run.describe());
    assert!(
        line.contains(&format!("http://127.0.0.1:{port}/readyz")) && line.contains("refused"),
        "names the URL and the cause: {}",
        run.describe()
    );
}

#[test]
fn healthcheck_fails_with_the_gateways_reason_while_it_starts() {
    // An upstream that never answers keeps /readyz at 503 for startup_timeout.
    let gateway = Gateway::spawn(json!({
        "startup_timeout": "90s",
        "upstreams": {"slow": {"stdio": {"command": "sleep", "args": ["120"]}}}
    }));
    let url = format!("{}/readyz", gateway.base);
    // Until it answers (before: refused, or no answer while it sets up), bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let run = loop {
        let run = toolgate(&["healthcheck", "--url", &url, "--timeout", "2s"], &[]);
        if run.stderr.contains("not ready") || std::time::Instant::now() > deadline {
            break run;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(run.code, Some(1), "{}", run.describe());
    assert!(
        run.stderr.contains("not ready (503 Service Unavailable)")
            && run
                .stderr
                .contains("waiting for every upstream's first answer"),
        "{}\n----- gateway -----\n{}",
        run.describe(),
        gateway.proc.logs()
    );
}
