//! Every JSON-RPC error code toolgate sends or reads, in one place: JSON-RPC 2.0's own,
//! and those MCP and the gateway assign in the server range (-32000 to -32099). Both
//! sides use them — the adapters reading upstreams' errors and answering for skills,
//! the gateway answering its clients — so a code means one thing everywhere.

/// The message is not valid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// The message is not a valid JSON-RPC request (or not one this transport takes).
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The method's params are wrong (an unknown tool or prompt is answered so too).
pub const INVALID_PARAMS: i64 = -32602;
/// The server failed.
pub const INTERNAL_ERROR: i64 = -32603;

/// A generic server error (servers often say "rate limit" with it).
pub const SERVER_ERROR: i64 = -32000;
/// The gateway's front door refused the request (no or bad credentials, a rate limit,
/// state unavailable): `data.code` says which.
pub const REFUSED: i64 = -32001;
/// MCP: the resource does not exist (or the caller may not know it does).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// MCP 2026-07-28: a header disagrees with the message it carries.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: the request needs a capability the client did not declare.
pub const MISSING_CAPABILITY: i64 = -32021;
/// MCP 2026-07-28: the protocol version is not one the server supports.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// The code some servers answer "rate limited" with.
pub const RATE_LIMITED: i64 = -32029;
