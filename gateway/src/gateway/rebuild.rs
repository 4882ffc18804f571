//! The catalog rebuilt from the mounted upstreams' tools and offerings: one snapshot,
//! published whole, with name collisions resolved and logged once.

use std::sync::Arc;

use super::Gateway;
use crate::catalog::offerings::{OfferingSource, Offerings};
use crate::catalog::{Catalog, Collision, Source};

impl Gateway {
    /// Rebuilds the catalog from the upstreams' current tools; returns the collisions
    /// it resolved (already logged).
    ///
    /// A rebuild that builds many large definitions anew takes seconds (each is
    /// counted and fitted to its budget in every export format); it runs, and waits
    /// for a rebuild in progress, with this runtime thread's other tasks moved away.
    pub fn rebuild_catalog(&self) -> Vec<Collision> {
        super::off_the_workers(|| self.rebuild_catalog_here())
    }

    fn rebuild_catalog_here(&self) -> Vec<Collision> {
        // One rebuild at a time: two racing rebuilds could otherwise publish an older
        // snapshot after a newer one.
        let _serial = self.rebuild_lock.lock().unwrap_or_else(|e| e.into_inner());
        let upstreams = self.upstreams();
        let tool_lists: Vec<_> = upstreams
            .iter()
            .map(|(name, mounted)| (name, mounted, mounted.upstream.tools()))
            .collect();
        let sources: Vec<Source<'_>> = tool_lists
            .iter()
            .map(|(name, mounted, tools)| Source {
                upstream: name.as_str(),
                namespace: mounted.namespace,
                tools: tools.as_slice(),
                shaping: Some(&mounted.shaping),
            })
            .collect();
        let (catalog, collisions) = Catalog::rebuild(&sources, &self.catalog());
        let offering_lists: Vec<_> = upstreams
            .iter()
            .map(|(name, mounted)| (name, mounted.namespace, mounted.upstream.offerings()))
            .collect();
        let offering_sources: Vec<OfferingSource<'_>> = offering_lists
            .iter()
            .map(|(name, namespace, offerings)| OfferingSource {
                upstream: name.as_str(),
                namespace: *namespace,
                offerings,
            })
            .collect();
        let catalog = catalog.with_offerings(Offerings::build(&offering_sources));
        {
            // Log each collision once, not on every rebuild.
            let mut logged = self
                .logged_collisions
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for collision in &collisions {
                if !logged.insert(collision.name.clone()) {
                    continue;
                }
                if collision.involves_passthrough {
                    tracing::error!(
                        name = %collision.name,
                        claimants = ?collision.claimants,
                        "tool name claimed by more than one upstream, one of them with `namespace: none`"
                    );
                } else {
                    tracing::warn!(
                        name = %collision.name,
                        claimants = ?collision.claimants,
                        "tool name collision resolved: the first claimant keeps the name, the others get a hash suffix"
                    );
                }
            }
        }
        let current = self.catalog.load();
        let changed =
            current.entries() != catalog.entries() || current.offerings() != catalog.offerings();
        self.catalog.store(Arc::new(catalog));
        self.metrics.set_catalog_size(self.catalog().len());
        if changed {
            self.catalog_version.send_modify(|v| *v += 1);
            // With an embedding model, start embedding the new tools now rather than
            // on the first search.
            self.search.warm(&self.catalog());
        }
        self.tell_upstreams_their_tenants();
        collisions
    }

    /// Tells each upstream whether one tenant alone can reach it (after every catalog
    /// rebuild and policy swap): only then may its messages that name no call be
    /// passed to the one call in flight.
    pub(super) fn tell_upstreams_their_tenants(&self) {
        let (policy, catalog) = (self.policy(), self.catalog());
        for (name, mounted) in self.upstreams().iter() {
            mounted
                .upstream
                .set_one_tenant(policy.one_tenant_reaches(&catalog, name));
        }
    }
}
