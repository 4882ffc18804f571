//! What a caller sees: who is asking ([`Caller`]: a tenant, and a session or none) and
//! the [`View`] of one catalog snapshot their requests are answered from. Listing asks
//! [`policy::decide`] through it, as the call path ([`crate::call`]) does.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::catalog::{Catalog, Entry};
use crate::gateway::Gateway;
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
