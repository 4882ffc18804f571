//! Each user's own catalog. An upstream reached with each user's own authorization
//! (`credentials: oauth`) may list different tools to different users; each user's
//! connection lists what that user's token opens. A caller whose connections have
//! listed is answered from a catalog of their own: the shared snapshot with those
//! upstreams' tools taken from the caller's own lists (marked as theirs). The tenant's
//! policy applies to it as to the shared one, and listing, calls, `tool_search`,
//! `tool_expand_tools` and the exports all read it through [`crate::access::View`].
//!
//! A user's catalog is built when first asked for after the shared snapshot or one of
//! their lists changed, and kept (with its allowed set and search index) for the
//! callers after, up to [`MAX_KEPT`] users.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use toolgate_adapters::ToolDef;
use toolgate_search::SearchCache;

use super::{Gateway, upstreams::UpstreamMap};
use crate::catalog::{Catalog, PerUserList, Shaping, Source};
use crate::policy::Caller;
use crate::policy::{Allowed, Tenant};

/// Users whose catalogs are kept; past it the least recently used is dropped (and
/// built again when asked for).
const MAX_KEPT: usize = 1024;

#[derive(Default)]
pub(super) struct PersonalCatalogs {
    kept: Mutex<HashMap<Arc<str>, Personal>>,
}

struct Personal {
    /// The shared snapshot it was built on.
    base: Weak<Catalog>,
    /// The user's own lists it was built from, by upstream (`None`: the shared list).
    lists: Vec<Option<Arc<Vec<ToolDef>>>>,
    catalog: Arc<Catalog>,
    /// The allowed set of the tenant (as of the policy it was worked out with).
    allowed: Option<(Weak<Tenant>, Arc<Allowed>)>,
    search: Arc<SearchCache<Catalog>>,
    used: std::time::Instant,
}

impl PersonalCatalogs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Personal>> {
        // Every critical section is a plain map update.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn same_lists(a: &[Option<Arc<Vec<ToolDef>>>], b: &[Option<Arc<Vec<ToolDef>>>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        })
}

impl Gateway {
    /// The catalog `caller` is answered from and the tenant's allowed set in it, when
    /// the caller has a catalog of their own (see the module docs); `None`: the shared
    /// snapshot.
    pub(crate) fn own_view(&self, caller: &Caller) -> Option<(Arc<Catalog>, Arc<Allowed>)> {
        let upstreams = self.upstreams();
        // Each upstream listed per caller, with whose lists the caller sees there: their
        // own, or their tenant's (`per_tenant`).
        let principal = caller.principal();
        let per_user: Vec<(
            &str,
            Arc<str>,
            &Arc<toolgate_adapters::mcp::PerCallerUpstream>,
        )> = upstreams
            .iter()
            .filter(|(_, m)| m.credentials.lists_per_caller())
            .filter_map(|(name, m)| {
                let per_caller = m.per_caller.as_ref()?;
                Some((
                    name.as_str(),
                    principal.holder_for(m.credentials),
                    per_caller,
                ))
            })
            .collect();
        if per_user.is_empty() {
            return None;
        }
        let holder = principal.holder();
        let lists: Vec<Option<Arc<Vec<ToolDef>>>> = per_user
            .iter()
            .map(|(_, lister, upstream)| upstream.tools_for(lister))
            .collect();
        if lists.iter().all(Option::is_none) {
            return None;
        }
        let base = self.catalog();
        let fresh = |p: &Personal| {
            p.base.upgrade().is_some_and(|b| Arc::ptr_eq(&b, &base)) && same_lists(&p.lists, &lists)
        };
        let kept = {
            let mut kept = self.personal.lock();
            match kept.get_mut(&holder) {
                Some(p) if fresh(p) => {
                    p.used = std::time::Instant::now();
                    let allowed = p
                        .allowed
                        .as_ref()
                        .filter(|(tenant, _)| std::ptr::eq(tenant.as_ptr(), &*caller.tenant))
                        .map(|(_, allowed)| allowed.clone());
                    Some((p.catalog.clone(), allowed))
                }
                _ => None,
            }
        };
        let catalog = match kept {
            Some((catalog, Some(allowed))) => return Some((catalog, allowed)),
            Some((catalog, None)) => catalog,
            None => {
                let own: HashMap<&str, Arc<Vec<ToolDef>>> = per_user
                    .iter()
                    .zip(&lists)
                    .filter_map(|((name, _, _), list)| Some((*name, list.clone()?)))
                    .collect();
                let catalog = Arc::new(super::off_the_workers(|| build(&base, &upstreams, &own)));
                self.keep(holder.clone(), &base, lists, &catalog);
                catalog
            }
        };
        let allowed = self.policy().allowed_in(&caller.tenant, &catalog);
        if let Some(p) = self.personal.lock().get_mut(&holder)
            && Arc::ptr_eq(&p.catalog, &catalog)
        {
            p.allowed = Some((Arc::downgrade(&caller.tenant), allowed.clone()));
        }
        Some((catalog, allowed))
    }

    fn keep(
        &self,
        holder: Arc<str>,
        base: &Arc<Catalog>,
        lists: Vec<Option<Arc<Vec<ToolDef>>>>,
        catalog: &Arc<Catalog>,
    ) {
        let mut kept = self.personal.lock();
        if !kept.contains_key(&holder)
            && kept.len() >= MAX_KEPT
            && let Some(oldest) = kept
                .iter()
                .min_by_key(|(_, p)| p.used)
                .map(|(k, _)| k.clone())
        {
            kept.remove(&oldest);
        }
        kept.insert(
            holder,
            Personal {
                base: Arc::downgrade(base),
                lists,
                catalog: catalog.clone(),
                allowed: None,
                search: Arc::new(self.search.sibling()),
                used: std::time::Instant::now(),
            },
        );
    }

    /// The search cache of `catalog`: the shared one's, or the user's whose catalog it
    /// is (a user's own catalog never replaces the shared index).
    pub(super) fn search_cache_for(
        &self,
        catalog: &Arc<Catalog>,
    ) -> Option<Arc<SearchCache<Catalog>>> {
        self.personal
            .lock()
            .values()
            .find(|p| Arc::ptr_eq(&p.catalog, catalog))
            .map(|p| p.search.clone())
    }
}

/// The shared snapshot `base` with the tools of the upstreams in `own` taken from
/// those lists.
fn build(
    base: &Catalog,
    upstreams: &UpstreamMap,
    own: &HashMap<&str, Arc<Vec<ToolDef>>>,
) -> Catalog {
    let shaped: HashMap<&str, Shaping> = own
        .keys()
        .filter_map(|name| {
            let mounted = upstreams.get(*name)?;
            Some((
                *name,
                Shaping {
                    per_user: Some(PerUserList::Own),
                    ..mounted.shaping.clone()
                },
            ))
        })
        .collect();
    let lists: Vec<(&str, &super::Mounted, Arc<Vec<ToolDef>>)> = upstreams
        .iter()
        .map(|(name, mounted)| {
            let tools = own
                .get(name.as_str())
                .cloned()
                .unwrap_or_else(|| mounted.upstream.tools());
            (name.as_str(), &**mounted, tools)
        })
        .collect();
    let sources: Vec<Source<'_>> = lists
        .iter()
        .map(|(name, mounted, tools)| Source {
            upstream: name,
            namespace: mounted.namespace,
            tools: tools.as_slice(),
            shaping: Some(shaped.get(name).unwrap_or(&mounted.shaping)),
        })
        .collect();
    let (catalog, _) = Catalog::rebuild(&sources, base);
    catalog.with_offerings_of(base)
}
