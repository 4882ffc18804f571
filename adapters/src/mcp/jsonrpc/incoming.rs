//! What the server sends besides responses: notifications (progress, list changes, log
//! lines, anything else) and server->client requests, routed as the parent module's
//! docs describe.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    BRIDGE_TIMEOUT, FIRE_AND_FORGET_TIMEOUT, METHOD_NOT_FOUND, Rpc, RpcEvent, truncate_utf8,
};
use crate::{ClientBridge, Progress};

impl Rpc {
    pub(super) fn handle_notification(&self, method: &str, params: Value, related: Option<u64>) {
        match method {
            "notifications/progress" => self.handle_progress(params),
            "notifications/tools/list_changed" => {
                // A full queue already holds a re-listing to do.
                let _ = self.events.try_send(RpcEvent::ToolsListChanged);
            }
            "notifications/prompts/list_changed" | "notifications/resources/list_changed" => {
                let _ = self.events.try_send(RpcEvent::OfferingsListChanged);
            }
            // The server gave up on a request it sent us; our answer, if any, will be
            // ignored by it. Nothing to undo here.
            "notifications/cancelled" => {
                tracing::debug!(upstream = %self.upstream, "server cancelled one of its requests")
            }
            _ => {
                if method == "notifications/message" {
                    log_server_message(&self.upstream, &params);
                }
                // What came on a call's own stream belongs to that call. A log line
                // on the server's own stream goes to the call in flight when there is
                // exactly one and all callers are one tenant (servers built on rmcp
                // send every log line there, even a call's own); otherwise nothing
                // is guessed, and nothing goes to a call that has ended.
                let bridge = if related.is_some() || method == "notifications/message" {
                    self.bridge_for(related)
                } else {
                    None
                };
                match bridge {
                    // notify never blocks, so wire order with progress holds.
                    Some(bridge) => bridge.notify(method, params),
                    None => {
                        if let Some(tx) = self.notifications.get() {
                            // No receiver is normal (no passthrough surface listening).
                            let _ = tx.send((method.to_owned(), params));
                        }
                    }
                }
            }
        }
    }

    /// The downstream client of the call a server request belongs to, if known: the
    /// call whose response stream carried it, or else — only when every caller of
    /// this upstream is one tenant — the only call in flight (stdio and legacy SSE
    /// carry no link between a server request and the call that caused it). Between
    /// several calls, or several tenants, nothing is guessed.
    fn bridge_for(&self, related: Option<u64>) -> Option<Arc<dyn ClientBridge>> {
        let st = self.lock();
        match related {
            Some(id) => st.calls.get(&id).cloned().flatten(),
            None if st.calls.len() == 1 && self.may_attribute_unlinked() => {
                st.calls.values().next().cloned().flatten()
            }
            None => None,
        }
    }

    fn handle_progress(&self, params: Value) {
        let Some(token) = params.get("progressToken") else {
            tracing::debug!(upstream = %self.upstream, "progress notification without a token");
            return;
        };
        let Some(progress) = params.get("progress").and_then(Value::as_f64) else {
            tracing::debug!(upstream = %self.upstream, "progress notification without a number");
            return;
        };
        let update = Progress {
            progress,
            total: params.get("total").and_then(Value::as_f64),
            message: params
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        let key = token.to_string();
        let mut st = self.lock();
        let Some(sink) = st.progress.get(&key) else {
            tracing::debug!(upstream = %self.upstream, "progress for an unknown or finished call");
            return;
        };
        match sink.try_send(update) {
            Ok(()) => {}
            Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                tracing::debug!(upstream = %self.upstream, "progress dropped: the caller is behind")
            }
            // The caller stopped listening (its call, and any stream after it, ended).
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {
                st.progress.remove(&key);
            }
        }
    }

    /// Answers a server->client request: `ping` here, the rest through the call's
    /// downstream client when there is one (see the module docs).
    pub(super) fn answer_server_request(
        self: &Arc<Self>,
        method: String,
        id: Value,
        params: Value,
        related: Option<u64>,
    ) {
        let bridge = match method.as_str() {
            "ping" => None,
            // Roots describe the connection, and servers ask for them whenever they
            // like (after `initialized`, on a timer), not because of a call: only a
            // request that arrived on a call's own stream goes to that call's client.
            "roots/list" if related.is_none() => None,
            _ => self.bridge_for(related),
        };
        // Answered from a task of its own: the reader must keep reading (a stdio child
        // blocked on a full stdout would otherwise never read our reply, and the
        // downstream client may take its time).
        let rpc = self.clone();
        tokio::spawn(async move {
            let answer = match (method.as_str(), bridge) {
                ("ping", _) => Ok(json!({})),
                (_, Some(bridge)) => {
                    let within = bridge.answer_within().unwrap_or(BRIDGE_TIMEOUT);
                    match tokio::time::timeout(within, bridge.request(&method, params)).await {
                        Ok(answer) => answer.map_err(|e| (e.code, e.message, e.data)),
                        Err(_) => Err((
                            crate::codes::INTERNAL_ERROR,
                            "the downstream client did not answer in time".to_owned(),
                            None,
                        )),
                    }
                }
                ("roots/list", None) => Ok(json!({"roots": []})),
                (_, None) => {
                    tracing::debug!(upstream = %rpc.upstream, method = %method, "refusing a server request outside a known call");
                    Err((
                        METHOD_NOT_FOUND,
                        format!(
                            "'{method}' is not available: the gateway could not tie this \
                             request to a call whose client supports it (send it during \
                             the call, on the call's own response stream; without that \
                             link it is passed on only while one call is in flight and \
                             every caller of this server is one tenant)"
                        ),
                        None,
                    ))
                }
            };
            let reply = match answer {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err((code, message, data)) => {
                    let mut error = json!({"code": code, "message": message});
                    if let Some(data) = data {
                        error["data"] = data;
                    }
                    json!({"jsonrpc": "2.0", "id": id, "error": error})
                }
            };
            let deadline = Instant::now() + FIRE_AND_FORGET_TIMEOUT;
            let sent = tokio::time::timeout_at(
                deadline,
                rpc.outbound
                    .send(super::Outgoing::from_value(&reply), None, deadline),
            );
            if !matches!(sent.await, Ok(Ok(()))) {
                tracing::debug!(upstream = %rpc.upstream, "could not answer a server request");
            }
        });
    }
}

/// Logs an MCP `notifications/message` at a matching level, bounded in size.
fn log_server_message(upstream: &str, params: &Value) {
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .unwrap_or("info");
    let logger = params.get("logger").and_then(Value::as_str).unwrap_or("");
    let mut data = match params.get("data") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    };
    truncate_utf8(&mut data, 2048);
    match level {
        "debug" => tracing::debug!(upstream, logger, "{data}"),
        "info" | "notice" => tracing::info!(upstream, logger, "{data}"),
        "warning" => tracing::warn!(upstream, logger, "{data}"),
        _ => tracing::error!(upstream, logger, level, "{data}"),
    }
}
