//! What every transport hands the supervisor: a live [`Rpc`] plus a [`Link`] that owns
//! the transport's resources (child process, HTTP session, reader tasks).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::jsonrpc::{Rpc, RpcEvent};

/// The transport side of one connection. Dropping it releases everything (a stdio child
/// is killed, reader tasks stop); [`Link::close`] does the same gracefully.
#[async_trait]
pub(crate) trait Link: Send + Sync {
    /// Called once `initialize` succeeded, before any other message is sent.
    fn after_initialize(&self, _protocol_version: &str) {}

    /// The child process id (stdio only).
    fn pid(&self) -> Option<u32> {
        None
    }

    /// Ends the connection gracefully (bounded in time): a stdio child gets its stdin
    /// closed, then signals; a streamable HTTP session is deleted.
    async fn close(&self);
}

/// A transport-level connection, not yet initialized.
pub(crate) struct Connected {
    pub rpc: Arc<Rpc>,
    pub events: mpsc::Receiver<RpcEvent>,
    pub link: Box<dyn Link>,
}
