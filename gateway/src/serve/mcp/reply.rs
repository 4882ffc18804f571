//! What the MCP handler answers one message with, whatever carries it. The handler
//! ([`super::McpSessions::handle`]) knows messages and sessions only; a transport
//! turns a [`Reply`] into its own shape: `/mcp` ([`super::http`]) into a JSON body,
//! an SSE stream, `202` or an error status, stdio (`crate::serve::stdio`) into lines.

use bytes::Bytes;
use futures::stream::BoxStream;

use super::error::McpError;

/// The handler's answer to one message.
pub(crate) enum Reply {
    /// Nothing goes back: a notification or the client's answer was taken.
    Taken,
    /// One message.
    Message(Vec<u8>),
    /// One message made of parts, sent as they are (a `tools/list` of thousands of
    /// definitions is megabytes the catalog already holds: never copied into one).
    Parts(Vec<Bytes>),
    /// Messages as they come, the answer last (progress, the upstream's requests and
    /// notifications go ahead of it). Empty when the call was cancelled first.
    Stream(BoxStream<'static, Bytes>),
    /// The message was refused before it could be answered as a request: `error`
    /// answers request `id` (raw JSON, `null` when none could be read). Over HTTP the
    /// error's status goes with it.
    Refused { error: McpError, id: String },
    /// `initialize` made a session: its id, and the answer.
    Initialized { session: String, message: Vec<u8> },
}

impl Reply {
    /// `error` answering request `id` (raw JSON).
    pub(crate) fn refused(error: McpError, id: &str) -> Reply {
        Reply::Refused {
            error,
            id: id.to_owned(),
        }
    }

    /// Messages as `messages` yields them.
    pub(crate) fn stream(messages: impl futures::Stream<Item = Bytes> + Send + 'static) -> Reply {
        Reply::Stream(Box::pin(messages))
    }

    /// Messages as they arrive on `receiver`, until its senders are gone.
    pub(crate) fn from_receiver(receiver: tokio::sync::mpsc::Receiver<Bytes>) -> Reply {
        Reply::stream(futures::stream::unfold(
            receiver,
            |mut receiver| async move {
                let message = receiver.recv().await?;
                Some((message, receiver))
            },
        ))
    }
}

impl From<McpError> for Reply {
    /// A refusal of a message whose id could not be read.
    fn from(error: McpError) -> Reply {
        Reply::refused(error, "null")
    }
}
