//! Process start versus protocol answer, against a real slow starter
//! (`tests/python/slow_start_server.py`): a stdio server whose child process is still
//! working when the `initialize` deadline passes is waited for while it makes progress
//! (and only up to `stdio_start_limit`); one that is up but idle is given up at the
//! deadline with an error that says so. Linux only (progress is read from `/proc`).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolgate_adapters::mcp::{McpOptions, McpTransport, McpUpstream, StdioConfig, spawn};
use toolgate_adapters::{Connection, Upstream};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/slow_start_server.py")
}

fn have_python() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A fresh `--starts` file for `label`.
fn starts_file(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolgate-stdio-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(format!("{label}.starts"));
    let _ = std::fs::remove_file(&file);
    file
}

fn starts(file: &Path) -> usize {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .count()
}

/// The answer is due within 2 s (`startup_timeout`; requests 1 s).
fn options() -> McpOptions {
    McpOptions {
        request_timeout: Duration::from_secs(1),
        startup_timeout: Duration::from_secs(2),
        ..McpOptions::default()
    }
}

fn start(label: &str, starts: &Path, mode: &[&str], options: McpOptions) -> Arc<McpUpstream> {
    let mut args = vec![
        script().display().to_string(),
        "--starts".to_owned(),
        starts.display().to_string(),
    ];
    args.extend(mode.iter().map(|a| a.to_string()));
    spawn(
        label.into(),
        McpTransport::Stdio(StdioConfig {
            command: "python3".into(),
            args,
            env: Default::default(),
            inherit_env: Default::default(),
            cwd: None,
            token_env: None,
            max_line_bytes: toolgate_adapters::mcp::DEFAULT_MAX_LINE_BYTES,
        }),
        options,
    )
}

/// The first error the upstream reports (bounded).
async fn first_error(up: &McpUpstream, within: Duration) -> String {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(e) = up.last_error() {
            return e;
        }
        assert!(tokio::time::Instant::now() < deadline, "no error reported");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_still_starting_is_waited_for_and_an_idle_one_is_given_up() {
    common::init_tracing();
    if !cfg!(target_os = "linux") || !have_python() {
        eprintln!("NOTICE: skipping: needs Linux and python3");
        return;
    }
    tokio::time::timeout(Duration::from_secs(60), async {
        // Its child works for 6 s, three times the 2 s deadline.
        let slow_starts = starts_file("slow");
        let slow = start("slow", &slow_starts, &["--busy", "6"], options());
        let idle_starts = starts_file("idle");
        let idle = start("idle", &idle_starts, &["--idle"], options());

        let error = first_error(&idle, Duration::from_secs(15)).await;
        assert!(
            error.contains("initialize failed")
                && error.contains("made no progress")
                && error.contains("not answering"),
            "{error}"
        );
        assert_ne!(idle.connection(), Connection::Connected);

        let mut rx = slow.connection_changes();
        tokio::time::timeout(
            Duration::from_secs(30),
            rx.wait_for(|c| *c == Connection::Connected),
        )
        .await
        .expect("the slow starter connects")
        .expect("connection channel");
        assert_eq!(
            starts(&slow_starts),
            1,
            "started once: {:?}",
            slow.last_error()
        );
        assert_eq!(slow.last_error(), None);
        assert!(slow.tools().iter().any(|t| t.name == "ready"));
        // The idle one is restarted after being given up, as after a failed start.
        assert!(starts(&idle_starts) >= 2, "the idle server was given up");
        slow.shutdown().await;
        idle.shutdown().await;
    })
    .await
    .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_is_given_up_at_the_start_limit_however_busy() {
    common::init_tracing();
    if !cfg!(target_os = "linux") || !have_python() {
        eprintln!("NOTICE: skipping: needs Linux and python3");
        return;
    }
    tokio::time::timeout(Duration::from_secs(60), async {
        let busy_starts = starts_file("busy");
        let up = start(
            "busy",
            &busy_starts,
            &["--busy", "60"],
            McpOptions {
                stdio_start_limit: Duration::from_secs(4),
                ..options()
            },
        );
        let error = first_error(&up, Duration::from_secs(20)).await;
        assert!(
            error.contains("still starting after 4s") && error.contains("stdio_start_limit"),
            "{error}"
        );
        assert!(starts(&busy_starts) >= 1);
        up.shutdown().await;
    })
    .await
    .expect("bounded");
}
