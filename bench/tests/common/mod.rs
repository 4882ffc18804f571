//! What the bench's tests share: running `toolgate-bench` bounded in time.

use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Runs `toolgate-bench ARGS`, killed past `timeout` (a panic naming it); answers its
/// exit status, stdout and stderr (through files: a full pipe cannot stall it).
#[allow(dead_code)] // Each test binary uses one of the two.
pub(crate) fn run_bench(args: &[&str], timeout: Duration) -> (ExitStatus, String, String) {
    run_bench_with_env(args, &[], timeout)
}

/// [`run_bench`] with extra environment variables.
pub(crate) fn run_bench_with_env(
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> (ExitStatus, String, String) {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-bench-test-{}-{}",
        std::process::id(),
        args.join("-").replace(['/', ' '], "_")
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let stdout_path = dir.join("stdout.txt");
    let stderr_path = dir.join("stderr.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate-bench"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("start toolgate-bench");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("toolgate-bench {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (status, stdout, stderr)
}
