//! `/mcp`: the MCP handler over streamable HTTP. What is HTTP's alone is here: the
//! HTTP method (POST a message, GET the session's stream, DELETE the session), the
//! body's size and time limits, the `Accept`, `Content-Type` and `MCP-Protocol-Version`
//! checks, and the shape of each [`Reply`] on the wire — one JSON body, an SSE stream,
//! `202`, or an error with its status.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::Method;

use super::error::McpError;
use super::{McpSessions, Reply, wire};
use crate::serve::auth::Admitted;

/// How often an idle GET stream carries a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

impl McpSessions {
    /// Answers one `/mcp` request of an admitted caller (its `Host` and `Origin` were
    /// checked by [`crate::serve::guard`], its credentials and session by the front
    /// door).
    pub async fn route_trusted(&self, request: Request, admitted: Admitted) -> Response {
        let method = request.method().clone();
        match (method, admitted.session) {
            (Method::POST, session) => {
                let (parts, body) = request.into_parts();
                let limit = self.gateway.config().max_request_body_bytes;
                let bytes = match axum::body::to_bytes(body, limit).await {
                    Ok(bytes) => bytes,
                    Err(error) => {
                        return match crate::serve::listener::body_timeout(&error) {
                            Some(late) => McpError::body_timeout(late.to_string()).response(),
                            // A body without a declared length, past the limit.
                            None => super::protocol_errors::body_too_large(limit, None),
                        };
                    }
                };
                if let Some(refused) = wire::refuse_post(&parts.headers) {
                    return refused;
                }
                let reply = self
                    .handle(&bytes, admitted.caller, session, Some(parts.headers))
                    .await;
                respond(reply)
            }
            (Method::GET, Some(session)) => {
                if let Some(refused) = wire::refuse_get(request.headers()) {
                    return refused;
                }
                self.open_stream(&session.id, &admitted.caller)
            }
            (Method::DELETE, Some(session)) => {
                if let Some(refused) = wire::refuse_version(request.headers()) {
                    return refused;
                }
                match self.end(&session.id).await {
                    Ok(()) => wire::ended(),
                    Err(unavailable) => McpError::turned_away(
                        crate::serve::auth::state_unavailable(&unavailable.to_string()),
                    )
                    .response(),
                }
            }
            (Method::GET | Method::DELETE, None) => super::session_required_error().response(),
            _ => {
                let mut refused = McpError::method_not_allowed(
                    "/mcp takes POST (messages), GET (a session's stream) and DELETE (end a session)",
                )
                .response();
                refused.headers_mut().insert(
                    http::header::ALLOW,
                    http::HeaderValue::from_static("GET, POST, DELETE"),
                );
                refused
            }
        }
    }

    /// GET: the session's stream, as SSE.
    fn open_stream(&self, session: &str, caller: &crate::access::Caller) -> Response {
        let receiver = self.session_messages(session, caller);
        let stop = self.stop.clone();
        // A first event with an id and a retry delay, as the spec's resumable
        // streams start; there is no replay, so a reconnect just opens a new stream.
        let priming = Bytes::from_static(b"id: 0\nretry: 3000\ndata: \n\n");
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let messages = futures::stream::unfold(
            (receiver, keep_alive, stop),
            |(mut receiver, mut keep_alive, stop)| async move {
                let next = tokio::select! {
                    message = receiver.recv() => wire::sse_frame(&message?),
                    _ = keep_alive.tick() => Bytes::from_static(b": keep-alive\n\n"),
                    _ = stop.cancelled() => return None,
                };
                Some((
                    Ok::<Bytes, std::io::Error>(next),
                    (receiver, keep_alive, stop),
                ))
            },
        );
        let stream = futures::stream::once(async move { Ok(priming) }).chain(messages);
        wire::sse_response(Body::from_stream(stream))
    }
}

/// A [`Reply`] as HTTP says it.
fn respond(reply: Reply) -> Response {
    match reply {
        Reply::Taken => wire::accepted(),
        Reply::Message(message) => wire::json_response(message),
        Reply::Parts(parts) => wire::json_parts_response(parts),
        // A client that hangs up drops the stream, which cancels what feeds it.
        Reply::Stream(messages) => wire::sse_response(Body::from_stream(
            messages.map(|message| Ok::<_, std::io::Error>(wire::sse_frame(&message))),
        )),
        Reply::Refused { error, id } => error.answer(&id),
        Reply::Initialized { session, message } => {
            let mut response = wire::json_response(message);
            if let Ok(value) = http::HeaderValue::from_str(&session) {
                response.headers_mut().insert(wire::SESSION_HEADER, value);
            }
            response
        }
    }
}
