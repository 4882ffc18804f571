//! The downstream MCP client as an upstream sees it during a call.
//!
//! An upstream's server->client requests (sampling, elicitation, roots) and its
//! notifications about a call arrive on the adapter's reader task. They are queued here
//! and sent by the task that serves the downstream request, so they keep their order
//! with the call's progress and go out on that request's own stream.

use async_trait::async_trait;
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
    queue: mpsc::Sender<BridgeEvent>,
    /// The client said it takes URL-mode elicitations.
    elicits_urls: bool,
}

impl QueueBridge {
    /// Bounded: an upstream flooding a slow caller with notifications loses some
    /// (with a debug log), never memory.
    pub fn new() -> (Self, mpsc::Receiver<BridgeEvent>) {
        let (queue, events) = mpsc::channel(BRIDGE_QUEUE);
        (
            Self {
                queue,
                elicits_urls: false,
            },
            events,
        )
    }

    /// The same bridge, to a client that takes URL-mode elicitations when `yes`.
    pub fn eliciting_urls(self, yes: bool) -> Self {
        Self {
            elicits_urls: yes,
            ..self
        }
    }
}

#[async_trait]
impl ClientBridge for QueueBridge {
    async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (answer, answered) = oneshot::channel();
        let queued = self
            .queue
            .send(BridgeEvent::Request {
                method: method.to_owned(),
                params,
                answer,
            })
            .await;
        if queued.is_err() {
            return Err(call_finished());
        }
        answered.await.unwrap_or_else(|_| Err(call_finished()))
    }

    fn notify(&self, method: &str, params: Value) {
        // The call has finished when the queue is closed: nothing left to tell.
        if let Err(mpsc::error::TrySendError::Full(_)) = self.queue.try_send(BridgeEvent::Notify {
            method: method.to_owned(),
            params,
        }) {
            tracing::debug!(method, "notification dropped: the caller is behind");
        }
    }

    fn elicits_urls(&self) -> bool {
        self.elicits_urls
    }
}

/// Whether MCP client capabilities (`initialize`'s, or a 2026-07-28 request's
/// `io.modelcontextprotocol/clientCapabilities`) include URL-mode elicitation.
pub fn elicits_urls(capabilities: Option<&Value>) -> bool {
    capabilities
        .and_then(|c| c.get("elicitation"))
        .and_then(|e| e.get("url"))
        .is_some_and(Value::is_object)
}

/// Messages that may wait for one caller.
const BRIDGE_QUEUE: usize = 1024;

fn call_finished() -> RpcError {
    RpcError {
        code: toolgate_adapters::codes::INTERNAL_ERROR,
        message: "the downstream call this request belonged to has finished".into(),
        data: None,
    }
}
