//! The bench still runs: `toolgate-bench all --smoke` (a few calls per case, 50
//! sessions, a 200-tool catalog, a 64 KB truncation, a
//! three-server search slice) completes and prints a table with
//! every row. No timing is asserted: this machine's numbers belong in bench/README.md.
//! The peer gateways are pointed at an empty directory, so their rows must be skipped
//! with one notice each (CI installs no peer).

use std::time::Duration;

mod common;

#[test]
fn smoke_run_prints_every_row() {
    // Generous: the first run may build the toolgate binary.
    let no_peers =
        std::env::temp_dir().join(format!("toolgate-bench-no-peers-{}", std::process::id()));
    let no_peers = no_peers.to_string_lossy().into_owned();
    let (status, stdout, stderr) = common::run_bench_with_env(
        &["all", "--smoke"],
        &[("TOOLGATE_BENCH_PEERS", &no_peers)],
        Duration::from_secs(900),
    );
    assert!(
        status.success(),
        "toolgate-bench all --smoke failed ({status}):\n{stdout}\n{stderr}"
    );

    let mut expected: Vec<String> = Vec::new();
    for c in [1, 16, 64] {
        for path in [
            "MCP streamable HTTP",
            "MCP via a bare proxy (floor)",
            "MCP 2026-07-28, sessionless",
            "OpenAPI via REST",
            "OpenAPI via MCP",
            "stdio via MCP",
        ] {
            expected.push(format!("| {path} | {c} | "));
        }
    }
    expected.extend(
        [
            "| import generated (200 operations) | ",
            "| tools/list, 200-tool catalog, tenant allowed half | ",
            "| memory per idle MCP session (50 sessions) | ",
            "| count tokens, 64 KB JSON (o200k_base) | ",
            "| truncate 64 KB JSON to 12000 tokens | ",
            "| background call created vs plain call, REST, memory (c=1, median of 5) | ",
            "| GET /v1/tasks/{id} of a finished task, memory (c=1, median of 5) | ",
            "| memory per stored task, memory (20 finished tasks, gateway RSS) | ",
            "| search eval set | ",
            "| search eval, all ",
            "| search eval latency | ",
            "| stdio crash recovery, the bench's stdio server ",
        ]
        .map(String::from),
    );
    for row in &expected {
        assert!(
            stdout.lines().any(|line| line.starts_with(row.as_str())),
            "row {row:?} missing from the report:\n{stdout}"
        );
    }
    for peer in ["ContextForge", "LiteLLM"] {
        let notice = format!("Note: {peer} not installed in ");
        assert!(
            stdout.lines().any(|l| l.starts_with(&notice)),
            "no skip notice for {peer}:\n{stdout}"
        );
        assert!(
            !stdout.contains(&format!("| MCP via {peer} ")),
            "a row for {peer}, which is not installed:\n{stdout}"
        );
    }
    // Direct stdio is measured at c=1 only; every other row has a direct side. (The
    // third cell is the direct throughput; the bare-proxy ratio is "—" off MCP rows.)
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("| stdio via MCP | 1 | ")
                && l.split('|')
                    .nth(3)
                    .is_some_and(|direct| direct.trim() != "—")),
        "stdio direct missing at c=1:\n{stdout}"
    );
}
