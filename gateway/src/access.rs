//! The call path as a caller sees it: who is asking ([`Caller`]: a tenant, and a
//! session or none), what they may list, and the checked call. Every surface goes
//! through here so listing and calling always ask [`policy::decide`] the same way.

use std::collections::BTreeSet;
use std::sync::Arc;

use toolgate_adapters::{CallContext, CallOutput, JsonObject, ToolError};

use crate::catalog::gateway_tools::EXPAND;
use crate::catalog::{Catalog, Entry};
use crate::errors::unknown_tool;
use crate::gateway::{Gateway, ResultUsage};
use crate::policy::{self, Access, Allowed, Scope};

pub use crate::policy::Caller;

/// One consistent view for a request: the catalog snapshot and the caller's allowed
/// set in it.
pub struct View {
    pub catalog: Arc<Catalog>,
    pub allowed: Arc<Allowed>,
}

impl View {
    pub fn of(gateway: &Gateway, caller: &Caller) -> View {
        let catalog = gateway.catalog();
        let allowed = gateway.policy().allowed(&caller.tenant, &catalog);
        View { catalog, allowed }
    }

    pub fn access(&self, caller: &Caller, name: &str) -> Access {
        policy::decide(&self.allowed, caller.scope(), name)
    }

    /// The catalog entries the caller sees in `tools/list`, sorted by name.
    pub fn visible(&self, caller: &Caller) -> Vec<Arc<Entry>> {
        let scope = caller.scope();
        let mut names: BTreeSet<&String> = self.allowed.initial.iter().collect();
        if let Scope::Session(expanded) = scope {
            names.extend(expanded.iter().filter(|n| self.allowed.names.contains(*n)));
        }
        names
            .into_iter()
            .filter_map(|name| self.catalog.get(name).cloned())
            .collect()
    }
}

/// A call by a catalog name, checked against the policy first.
pub async fn call(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    arguments: JsonObject,
    ctx: CallContext,
) -> Result<CallOutput, ToolError> {
    call_counted(gateway, caller, name, arguments, ctx)
        .await
        .map(|(output, _)| output)
}

/// [`call`], also answering the result's token counts.
pub async fn call_counted(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    arguments: JsonObject,
    ctx: CallContext,
) -> Result<(CallOutput, ResultUsage), ToolError> {
    admit(gateway, caller, name, &ctx)?;
    gateway.call_counted(caller, name, arguments, ctx).await
}

/// The policy's word on a call of `name` by `caller`: `Ok` when it may go through;
/// otherwise the refusal (audited and counted), an unknown tool for a name the caller
/// may not see. Background tasks ask this before they are created, so a refused call
/// never becomes a task.
pub fn admit(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    ctx: &CallContext,
) -> Result<(), ToolError> {
    let view = View::of(gateway, caller);
    let span = tracing::info_span!(
        target: crate::telemetry::SPAN_TARGET,
        "toolgate.policy",
        tool = name,
        tenant = %caller.tenant.name,
        decision = tracing::field::Empty,
    );
    crate::telemetry::parent_on(&span, ctx);
    let access = view.access(caller, name);
    let callable = access.callable(caller.scope());
    span.record(
        "decision",
        match access {
            Access::Hidden => "hidden",
            _ if !callable => "not_selected",
            _ => "admitted",
        },
    );
    drop(span);
    match access {
        Access::Hidden => Err(gateway.refused(caller, name, None, unknown_tool(name))),
        _ if !callable => {
            let upstream = view.catalog.get(name).map(|e| e.upstream.clone());
            Err(gateway.refused(caller, name, upstream.as_deref(), not_selected(name)))
        }
        _ => {
            tracing::debug!(tenant = %caller.tenant.name, session = ?caller.session_id(), tool = name, "call admitted");
            Ok(())
        }
    }
}

fn not_selected(name: &str) -> ToolError {
    ToolError::NotSelected(format!(
        "tool '{name}' is available but not selected in this session: call {EXPAND} with \
         {{\"tool_names\": [\"{name}\"]}} first, then call '{name}' again"
    ))
}
