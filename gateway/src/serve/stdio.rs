//! MCP over stdio (`toolgate stdio`) for desktop clients: the same handler as `/mcp`,
//! on stdin/stdout. rmcp writes into a pipe; a pump copies each line to stdout,
//! restoring raw tool definitions on the way (see [`super::fidelity`]). Logs go to
//! stderr, never stdout.

use std::sync::Arc;

use bytes::Bytes;
use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::fidelity::rewrite_message;
use super::mcp::McpHandler;
use super::mcp_shared::McpShared;
use crate::gateway::Gateway;
use crate::policy::Tenant;

/// Serves one stdio client as `tenant` (the process is the session).
pub async fn run(gateway: Arc<Gateway>, tenant: Arc<Tenant>) -> anyhow::Result<()> {
    let shared = McpShared::new(gateway.clone());
    let session = gateway.sessions.create(&tenant.name).await?;
    let (rmcp_side, pump_side) = tokio::io::duplex(1 << 20);
    let pump = tokio::spawn(async move {
        let mut lines = BufReader::new(pump_side).lines();
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.next_line().await? {
            let out = rewrite_message(&gateway.catalog(), Bytes::from(line));
            stdout.write_all(&out).await?;
            stdout.write_all(b"\n").await?;
            stdout.flush().await?;
        }
        anyhow::Ok(())
    });
    let service = McpHandler::for_process(shared, tenant, session.id)
        .serve((tokio::io::stdin(), rmcp_side))
        .await?;
    service.waiting().await?;
    pump.await??;
    Ok(())
}
