//! The LiteLLM proxy (`litellm[proxy]`) as its MCP gateway docs set it up: a
//! `config.yaml` with the upstream under `mcp_servers:` (transport `http`, i.e.
//! streamable HTTP), a `master_key` as the only credential, started with
//! `litellm --config` (one uvicorn process). No database: without `DATABASE_URL` the
//! proxy serves servers from the config file and checks the master key itself, and
//! nothing the MCP path needs asks for one. Its MCP endpoint is `/mcp/`; it names the
//! tool `<server>-<tool>` (`fast-echo`).
//!
//! Telemetry and fetches off: `telemetry: false`, `LITELLM_TELEMETRY=False`, and the
//! `LITELLM_LOCAL_*` switches that make it read its model price map, blog posts,
//! policy templates and other lists from the package instead of the network.

use std::time::Duration;

use anyhow::Result;
use serde_json::json;

use super::{Peer, PeerKind, base_command, random_hex, wait_ready};
use crate::proc::{ProcGroup, TempDir, free_port};

/// The server name under `mcp_servers:` (the tool's prefix).
const SERVER: &str = "fast";
/// Importing the proxy takes 20–40 s on 2 busy cores.
const READY_TIMEOUT: Duration = Duration::from_secs(240);

pub(super) async fn start(
    kind: PeerKind,
    version: String,
    upstream_mcp: &str,
    tool: &str,
) -> Result<Peer> {
    let venv = kind.venv();
    let dir = TempDir::new("litellm")?;
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let master_key = format!("sk-{}", random_hex()?);
    // JSON is YAML.
    let config = json!({
        "model_list": [],
        "mcp_servers": {SERVER: {"url": upstream_mcp, "transport": "http"}},
        "general_settings": {"master_key": master_key},
        "litellm_settings": {"telemetry": false},
    });
    let config_path = dir.path().join("config.yaml");
    std::fs::write(&config_path, serde_json::to_string_pretty(&config)?)?;

    let mut cmd = base_command(&venv.join("bin/litellm"), dir.path())?;
    cmd.arg("--config")
        .arg(&config_path)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .env("LITELLM_TELEMETRY", "False")
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_LOCAL_BLOG_POSTS", "True")
        .env("LITELLM_LOCAL_POLICY_TEMPLATES", "True")
        .env("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
        .env("LITELLM_LOCAL_AUTOROUTER_PRESETS", "True");
    let mut group = ProcGroup::spawn("litellm", &mut cmd)?;
    wait_ready(
        &mut group,
        &format!("{base}/health/liveliness"),
        dir.path(),
        READY_TIMEOUT,
    )
    .await?;
    Ok(Peer {
        kind,
        version,
        mcp_url: format!("{base}/mcp/"),
        bearer: master_key,
        tool: format!("{SERVER}-{tool}"),
        group,
        dir,
    })
}
