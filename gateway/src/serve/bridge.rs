//! The downstream MCP client as an upstream sees it during a call.
//!
//! An upstream's server->client requests (sampling, elicitation, roots) and its
//! notifications about a call arrive on the adapter's reader task. They are queued here
//! and sent by the task that serves the downstream request, for two reasons: the queue
//! keeps them in order with the call's progress, and rmcp routes a server request onto
//! the originating request's SSE stream only when it is sent from that request's task.

use async_trait::async_trait;
use rmcp::model::{CustomNotification, CustomRequest, ServerNotification, ServerRequest};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use toolgate_adapters::{ClientBridge, RpcError};

/// Something an upstream wants the downstream client to receive.
pub enum BridgeEvent {
    Notify {
        method: String,
        params: Value,
    },
    Request {
        method: String,
        params: Value,
        answer: oneshot::Sender<Result<Value, RpcError>>,
    },
}

/// The [`ClientBridge`] handed to adapters: it only queues.
pub struct QueueBridge {
    queue: mpsc::UnboundedSender<BridgeEvent>,
}

impl QueueBridge {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<BridgeEvent>) {
        let (queue, events) = mpsc::unbounded_channel();
        (Self { queue }, events)
    }
}

#[async_trait]
impl ClientBridge for QueueBridge {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (answer, answered) = oneshot::channel();
        let queued = self.queue.send(BridgeEvent::Request {
            method: method.to_owned(),
            params,
            answer,
        });
        if queued.is_err() {
            return Err(call_finished());
        }
        answered.await.unwrap_or_else(|_| Err(call_finished()))
    }

    fn notify(&self, method: &str, params: Value) {
        // The call has finished when the queue is closed: nothing left to tell.
        let _ = self.queue.send(BridgeEvent::Notify {
            method: method.to_owned(),
            params,
        });
    }
}

fn call_finished() -> RpcError {
    RpcError {
        code: -32603,
        message: "the downstream call this request belonged to has finished".into(),
        data: None,
    }
}

/// Delivers one event to the downstream client. Must run in the task serving the
/// downstream request (see the module docs).
pub async fn deliver(peer: &Peer<RoleServer>, event: BridgeEvent) {
    match event {
        BridgeEvent::Notify { method, params } => {
            let notification = ServerNotification::CustomNotification(CustomNotification::new(
                method,
                Some(params),
            ));
            if let Err(error) = peer.send_notification(notification).await {
                tracing::debug!(%error, "notification not delivered (caller gone)");
            }
        }
        BridgeEvent::Request {
            method,
            params,
            answer,
        } => {
            let request = ServerRequest::CustomRequest(CustomRequest::new(method, Some(params)));
            let result = match peer.send_request(request).await {
                Ok(result) => serde_json::to_value(result).map_err(|error| RpcError {
                    code: -32603,
                    message: format!("client result could not be re-encoded: {error}"),
                    data: None,
                }),
                Err(ServiceError::McpError(error)) => Err(RpcError {
                    code: i64::from(error.code.0),
                    message: error.message.to_string(),
                    data: error.data,
                }),
                Err(error) => Err(RpcError {
                    code: -32603,
                    message: format!("the downstream client did not answer: {error}"),
                    data: None,
                }),
            };
            let _ = answer.send(result);
        }
    }
}
