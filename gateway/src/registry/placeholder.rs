//! The stand-in for an OpenAPI upstream whose spec is still being imported (state
//! `starting`), or whose import failed (state `down`, with the error), so status
//! surfaces show what is going on.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use toolgate_adapters::{
    CallContext, CallOutput, Connection, JsonObject, ToolDef, ToolError, Upstream,
};

/// Stands in for an upstream that is still importing, or whose import failed.
pub struct Placeholder {
    name: String,
    error: std::sync::Mutex<Option<String>>,
    changed: watch::Sender<u64>,
}

impl Placeholder {
    pub fn new(name: String) -> Self {
        Self {
            name,
            error: std::sync::Mutex::new(None),
            changed: watch::channel(0).0,
        }
    }

    pub(crate) fn fail(&self, error: String) {
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
    }

    fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[async_trait]
impl Upstream for Placeholder {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Arc<Vec<ToolDef>> {
        Arc::default()
    }

    fn tools_changed(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn connection(&self) -> Connection {
        if self.error().is_some() {
            Connection::Closed
        } else {
            Connection::Connecting
        }
    }

    fn last_error(&self) -> Option<String> {
        self.error()
    }

    async fn call(&self, _: &str, _: JsonObject, _: CallContext) -> Result<CallOutput, ToolError> {
        Err(ToolError::unavailable(
            &self.name,
            self.error()
                .unwrap_or_else(|| "its spec is still being imported".into()),
        ))
    }

    async fn check(&self, _: Duration) -> Result<(), ToolError> {
        Err(ToolError::unavailable(
            &self.name,
            self.error().unwrap_or_else(|| "still importing".into()),
        ))
    }

    async fn shutdown(&self) {}
}
