//! Requests about prompts, resources and completion, forwarded to the upstream that
//! serves them (see [`crate::serve::mcp::features`]): no policy here — the surface decided
//! on the item — only the upstream's state and the caller's deadline.

use std::time::Duration;

use toolgate_adapters::{CallContext, Connection, ToolError};

use super::Gateway;

impl Gateway {
    /// Sends a request about prompts, resources or completion to `upstream`, with the
    /// upstream's own names and URIs in `params` (see [`crate::serve::mcp::features`]).
    pub async fn forward_to(
        &self,
        upstream: &str,
        method: &str,
        params: serde_json::Value,
        ctx: CallContext,
    ) -> Result<Result<serde_json::Value, toolgate_adapters::RpcError>, ToolError> {
        let upstreams = self.upstreams();
        let Some(mounted) = upstreams.get(upstream) else {
            return Err(ToolError::unavailable(
                upstream,
                "it is not mounted any more",
            ));
        };
        if mounted.upstream.connection() != Connection::Connected {
            return Err(ToolError::unavailable(
                upstream,
                mounted
                    .upstream
                    .last_error()
                    .unwrap_or_else(|| "not connected".into()),
            ));
        }
        let timeout = ctx.remaining();
        match tokio::time::timeout(
            timeout + Duration::from_millis(250),
            mounted.upstream.forward(method, Some(params), ctx),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(ToolError::timeout(upstream, method, timeout)),
        }
    }
}
