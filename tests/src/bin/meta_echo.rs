//! The `_meta` echo MCP server ([`toolgate_e2e::meta_echo`]) over stdio: one JSON-RPC
//! message per line in, one answer per line out, until stdin closes.

use std::io::{BufRead, Write};

fn main() -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(answer) = toolgate_e2e::meta_echo::answer(&message) {
            writeln!(stdout, "{answer}")?;
            stdout.flush()?;
        }
    }
    Ok(())
}
