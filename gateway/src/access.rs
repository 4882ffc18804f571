//! What a caller sees: who is asking ([`Caller`]: a tenant, and a session or none) and
//! the [`View`] of one catalog snapshot their requests are answered from. Listing asks
//! [`policy::decide`] through it, as the call path ([`crate::call`]) does.

use std::sync::Arc;

use crate::catalog::{Catalog, Entry};
use crate::gateway::Gateway;
use crate::policy::{Allowed, Item, Method};

pub use crate::policy::Caller;

/// One consistent view for a request: the catalog snapshot and the caller's allowed
/// set in it.
pub struct View {
    pub catalog: Arc<Catalog>,
    pub allowed: Arc<Allowed>,
}

impl View {
    /// The caller's view: their own catalog when they have one (an upstream listed
    /// per user), else the shared snapshot.
    pub fn of(gateway: &Gateway, caller: &Caller) -> View {
        if let Some((catalog, allowed)) = gateway.own_view(caller) {
            return View { catalog, allowed };
        }
        let catalog = gateway.catalog();
        let allowed = gateway.policy().allowed(&caller.tenant, &catalog);
        View { catalog, allowed }
    }

    /// The catalog entries the caller sees in `tools/list`, sorted by name.
    pub fn visible(&self, caller: &Caller) -> Vec<Arc<Entry>> {
        self.allowed
            .listed_tools(caller.scope())
            .into_iter()
            .filter_map(|name| self.catalog.get(name).cloned())
            .collect()
    }

    /// [`policy::decide`](crate::policy::decide) for this caller, as a yes or no.
    pub fn permits(&self, caller: &Caller, item: Item<'_>, method: Method) -> bool {
        self.allowed.permits(caller.scope(), item, method)
    }
}
