//! The one call path. Every surface — MCP over HTTP and stdio, REST and its
//! `tool_calls`/`tool_use` batches, background tasks, the console — turns its request
//! into (caller, name, arguments, [`CallContext`]) and calls [`call`]:
//!
//! ```text
//! call ─ a protocol tool? ── protocol_tools (tool_search, tool_expand_tools, …)
//!      └ authorize: the policy's word on one catalog snapshot, the entry handed on
//!        └ invoke: validate → call slot → upstream (timeout) → token budget
//!                  → one audit line and metric (refusals too)
//! ```
//!
//! Rooms: this file (dispatch and authorization), [`invoke`] (the way to the upstream
//! and the one record), [`protocol_tools`] (what the gateway's own tools do; their
//! definitions are [`crate::catalog::protocol_tools`]).

mod credentials;
mod invoke;
pub mod protocol_tools;

pub(crate) use credentials::SERVICE;
pub use invoke::ResultUsage;

use std::sync::Arc;

use toolgate_adapters::{CallContext, CallOutput, JsonObject, ToolError};

use crate::access::View;
use crate::catalog::Entry;
use crate::catalog::protocol_tools::EXPAND;
use crate::errors::unknown_tool;
use crate::gateway::Gateway;
use crate::policy::{Caller, Decision, Item, Method, decide};

/// What a call answered.
#[derive(Debug)]
pub struct Called {
    pub output: CallOutput,
    /// The result's token counts; `None` for the gateway's own tools (never fitted).
    pub usage: Option<ResultUsage>,
    /// The caller's visible set changed (`tool_expand_tools` in a session): a surface
    /// that can announces `list_changed`.
    pub list_changed: bool,
}

/// The one call path: a protocol tool runs here; a catalog tool is authorized on one
/// catalog snapshot and invoked with the entry the policy admitted.
pub async fn call(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    arguments: JsonObject,
    ctx: CallContext,
) -> Result<Called, ToolError> {
    if protocol_tools::is_protocol_tool(name) {
        let (output, list_changed) = protocol_tools::call(gateway, caller, name, arguments, ctx)
            .await
            .unwrap_or_else(|| Err(unknown_tool(name)))?;
        return Ok(Called {
            output,
            usage: None,
            list_changed,
        });
    }
    let (output, usage) = call_catalog_tool(gateway, caller, name, arguments, ctx).await?;
    Ok(Called {
        output,
        usage: Some(usage),
        list_changed: false,
    })
}

/// A catalog tool (never a protocol tool): authorized, then invoked.
async fn call_catalog_tool(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    arguments: JsonObject,
    ctx: CallContext,
) -> Result<(CallOutput, ResultUsage), ToolError> {
    // A tool of a per-user upstream whose list the caller's own connection has not
    // made here yet: connect (or ask the user to), then decide on their catalog.
    // One view decides, unless the caller's catalog changes by connecting here.
    let mut view = View::of(gateway, caller);
    if let Some(mounted) = credentials::unlisted_own(gateway, caller, name, &view.catalog) {
        if let Err(error) = credentials::list_own(gateway, caller, &mounted, &ctx).await {
            let upstream = toolgate_adapters::Upstream::name(&*mounted.upstream);
            return Err(invoke::refused(
                gateway,
                caller,
                name,
                Some(upstream),
                error,
            ));
        }
        view = View::of(gateway, caller);
    }
    let admitted = authorize_in(&view, gateway, caller, name, &ctx)?;
    invoke::invoke(gateway, caller, admitted, arguments, ctx).await
}

/// A call the policy admitted: the name and the catalog entry it was decided on, so the
/// call goes to exactly what was decided (a catalog swapped meanwhile changes nothing).
#[derive(Debug, Clone)]
pub struct Admitted {
    pub name: String,
    pub entry: Arc<Entry>,
}

/// The policy's word on a call of `name` by `caller`: the admitted entry when it may go
/// through; otherwise the refusal (audited and counted), an unknown tool for a name the
/// caller may not see. Background tasks ask this before they are created, so a refused
/// call never becomes a task.
pub fn authorize(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    ctx: &CallContext,
) -> Result<Admitted, ToolError> {
    authorize_in(&View::of(gateway, caller), gateway, caller, name, ctx)
}

/// [`authorize`] on the caller's `view`, taken already.
fn authorize_in(
    view: &View,
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    ctx: &CallContext,
) -> Result<Admitted, ToolError> {
    let span = tracing::info_span!(
        target: crate::telemetry::SPAN_TARGET,
        "toolgate.policy",
        tool = name,
        tenant = %caller.tenant.name,
        subject = caller.subject(),
        decision = tracing::field::Empty,
    );
    crate::telemetry::parent_on(&span, ctx);
    let decision = decide(&view.allowed, caller.scope(), Item::Tool(name), Method::Use);
    span.record(
        "decision",
        match decision {
            Decision::Hidden => "hidden",
            Decision::NotSelected => "not_selected",
            Decision::Allow => "admitted",
        },
    );
    drop(span);
    let entry = view.catalog.get(name).cloned();
    match (decision, entry) {
        (_, None) => Err(match upstream_not_up(gateway, caller, name) {
            Some((upstream, down)) => invoke::refused(gateway, caller, name, Some(&upstream), down),
            None => invoke::refused(gateway, caller, name, None, unknown_tool(name)),
        }),
        (Decision::Hidden, _) => Err(invoke::refused(
            gateway,
            caller,
            name,
            None,
            unknown_tool(name),
        )),
        (Decision::NotSelected, Some(entry)) => Err(invoke::refused(
            gateway,
            caller,
            name,
            Some(&entry.upstream),
            not_selected(name),
        )),
        (Decision::Allow, Some(entry)) => {
            tracing::debug!(tenant = %caller.tenant.name, session = ?caller.session_id(), tool = name, "call admitted");
            Ok(Admitted {
                name: name.to_owned(),
                entry,
            })
        }
    }
}

/// A name the caller's catalog lacks because its upstream is not up (never answered,
/// or lost and not listing): when the caller's patterns allow the name, it hears that
/// upstream's state and when to retry, not that no such tool exists — which would send
/// a model searching elsewhere. A name its patterns do not allow stays an unknown tool,
/// as does one an upstream that is up does not list: the answer tells nothing the
/// caller's own patterns do not.
fn upstream_not_up(gateway: &Gateway, caller: &Caller, name: &str) -> Option<(String, ToolError)> {
    let (upstream, _) = name.split_once(crate::catalog::SEPARATOR)?;
    if !caller.tenant.allows(name) {
        return None;
    }
    let upstreams = gateway.upstreams();
    let mounted = upstreams.get(upstream)?;
    if mounted.namespace != crate::config::Namespace::Prefix {
        return None;
    }
    invoke::not_up(mounted, upstream).map(|down| (upstream.to_owned(), down))
}

fn not_selected(name: &str) -> ToolError {
    ToolError::NotSelected(format!(
        "tool '{name}' is available but not selected in this session: call {EXPAND} with \
         {{\"tool_names\": [\"{name}\"]}} first, then call '{name}' again"
    ))
}
