//! THE one decision: may this caller, in this scope, do this with this item?
//!
//! [`decide`] answers for every kind of item ([`Item`]: a tool, a prompt, a resource,
//! a resource template) and every method ([`Method`]: list, use, expand, search,
//! describe, complete, subscribe). The sets a surface shows — the tools listed, the ones a
//! session may still expand, the ones a search may return — come from the same
//! [`Allowed`] through the same rules, so a list path and a call path never disagree.
//!
//! Hidden is nonexistent: an item outside the tenant's allowed set is
//! [`Decision::Hidden`] for every method, and every surface answers that exactly as it
//! answers a name nothing in the catalog has.

use std::collections::BTreeSet;

use crate::catalog::Catalog;

/// What a tenant may use in one catalog snapshot (built by [`super::Policy::allowed`]).
/// Its sets are read only through the decision's methods below.
#[derive(Debug)]
pub struct Allowed {
    /// Allowed tool names, sorted.
    pub(super) names: BTreeSet<String>,
    /// The tools a new session sees (a subset of `names`).
    pub(super) initial: BTreeSet<String>,
    /// Allowed prompts, resources and templates, by their policy names (see
    /// [`crate::catalog::offerings`]); sessions do not narrow these.
    pub(super) offerings: BTreeSet<String>,
    /// Upstreams whose every URI the tenant may read (it is allowed `<upstream>__*`).
    pub(super) whole_upstreams: BTreeSet<String>,
}

/// Where a request stands: inside a session with its expansions, or sessionless
/// (MCP 2026-07-28), where `tools/list` shows the initial set and any allowed tool may
/// be called by its exact name.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    Session(&'a BTreeSet<String>),
    Stateless,
}

/// What a decision is about, by its catalog (policy) name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    Tool(&'a str),
    Prompt(&'a str),
    /// A resource by its policy name: a listed resource's, the template's a URI
    /// matches, or `<upstream>__*` for a URI neither lists (see
    /// [`crate::catalog::offerings`]).
    Resource(&'a str),
    Template(&'a str),
}

/// What the caller wants to do with the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Appear in a list (`tools/list`, `prompts/list`, `resources/list`, …).
    List,
    /// Call a tool, get a prompt, read a resource.
    Use,
    /// Add a tool to a session (`tool_expand_tools`).
    Expand,
    /// Be found by `tool_search` or named in a suggestion.
    Search,
    /// Have its whole definition read (`tool_schema`).
    Describe,
    /// Complete an argument of a prompt or template.
    Complete,
    /// Subscribe to a resource's updates.
    Subscribe,
}

/// The answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// A tool the tenant may use that this session has not selected: not listed, and
    /// in a session not callable until `tool_expand_tools` adds it.
    NotSelected,
    /// Not allowed, or not there: the same thing to the caller.
    Hidden,
}

/// A tool's standing for a caller: what the console explains and the tool-call
/// refusals tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Listed, callable.
    Visible,
    /// Allowed but not visible: callable only after `tool_expand_tools` (in a session)
    /// or by exact name (sessionless).
    Selectable,
    /// Not allowed or not existing: the same thing to the caller.
    Hidden,
}

impl Access {
    /// `visible`, `selectable` or `hidden`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Visible => "visible",
            Access::Selectable => "selectable",
            Access::Hidden => "hidden",
        }
    }
}

/// THE decision: may the tenant whose allowed set is `allowed`, in `scope`, do
/// `method` with `item`?
pub fn decide(allowed: &Allowed, scope: Scope<'_>, item: Item<'_>, method: Method) -> Decision {
    match item {
        Item::Tool(name) => match (allowed.tool_access(scope, name), method) {
            (Access::Hidden, _) => Decision::Hidden,
            // Tools have no completion and no subscription: there is nothing of that
            // name to the caller.
            (_, Method::Complete | Method::Subscribe) => Decision::Hidden,
            (Access::Visible, _) => Decision::Allow,
            (Access::Selectable, Method::Expand | Method::Search | Method::Describe) => {
                Decision::Allow
            }
            (Access::Selectable, Method::Use) if matches!(scope, Scope::Stateless) => {
                Decision::Allow
            }
            (Access::Selectable, Method::List | Method::Use) => Decision::NotSelected,
        },
        // Sessions do not narrow prompts, resources and templates.
        Item::Prompt(name) | Item::Resource(name) | Item::Template(name) => {
            if allowed.offering(name) {
                Decision::Allow
            } else {
                Decision::Hidden
            }
        }
    }
}

impl Allowed {
    /// [`decide`], as a yes or no.
    pub fn permits(&self, scope: Scope<'_>, item: Item<'_>, method: Method) -> bool {
        decide(self, scope, item, method) == Decision::Allow
    }

    /// A tool's standing in `scope`.
    pub fn tool_access(&self, scope: Scope<'_>, name: &str) -> Access {
        if !self.names.contains(name) {
            return Access::Hidden;
        }
        let visible = self.initial.contains(name)
            || matches!(scope, Scope::Session(expanded) if expanded.contains(name));
        if visible {
            Access::Visible
        } else {
            Access::Selectable
        }
    }

    /// The tools listed in `scope` (what [`Method::List`] allows), sorted.
    pub fn listed_tools<'a>(&'a self, scope: Scope<'a>) -> BTreeSet<&'a String> {
        let mut names: BTreeSet<&String> = self.initial.iter().collect();
        if let Scope::Session(expanded) = scope {
            names.extend(expanded.iter().filter(|n| self.names.contains(*n)));
        }
        names
    }

    /// The tools a session could still add in `scope` (allowed, not listed), sorted.
    pub fn expandable_tools<'a>(&'a self, scope: Scope<'a>) -> impl Iterator<Item = &'a String> {
        self.names
            .iter()
            .filter(move |name| self.tool_access(scope, name) == Access::Selectable)
    }

    /// Every tool a search may return or a suggestion may name, sorted.
    pub fn searchable_tools(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// How many tools, tools of a new session's list, and prompts, resources and
    /// templates the tenant may use (the console's summary).
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.names.len(), self.initial.len(), self.offerings.len())
    }

    /// Whether anything `upstream` serves in `catalog` is allowed: a tool, a prompt, a
    /// resource or template, or its unlisted URIs. What a tenant may know about an
    /// upstream (its status) follows from this.
    pub fn reaches_upstream(&self, catalog: &Catalog, upstream: &str) -> bool {
        let offerings = catalog.offerings();
        self.whole_upstreams.contains(upstream)
            || catalog
                .entries()
                .iter()
                .any(|e| e.upstream == upstream && self.names.contains(&e.name))
            || offerings
                .prompts
                .entries()
                .iter()
                .any(|e| e.upstream == upstream && self.offering(&e.name))
            || offerings
                .resources
                .iter()
                .chain(offerings.templates.iter())
                .any(|i| i.upstream == upstream && self.offering(&i.name))
    }

    /// A prompt, resource or template's policy name is allowed (or its upstream's
    /// every URI is).
    fn offering(&self, name: &str) -> bool {
        self.offerings.contains(name)
            || name
                .strip_suffix("__*")
                .is_some_and(|upstream| self.whole_upstreams.contains(upstream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Allowed {
        let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        Allowed {
            names: set(&["a__listed", "a__selectable"]),
            initial: set(&["a__listed"]),
            offerings: set(&["a__prompt", "a__resource", "a__template"]),
            whole_upstreams: set(&["b"]),
        }
    }

    const METHODS: [Method; 7] = [
        Method::List,
        Method::Use,
        Method::Expand,
        Method::Search,
        Method::Describe,
        Method::Complete,
        Method::Subscribe,
    ];

    /// Hidden is nonexistent, in one table: every item kind × method × protocol
    /// version (a 2025 session, with and without the tool expanded, and a 2026
    /// sessionless request). A name outside the allowed set is answered exactly as a
    /// name that does not exist — `Hidden` — whatever is asked.
    #[test]
    fn hidden_is_nonexistent_for_every_item_method_and_version() {
        let allowed = allowed();
        let none = BTreeSet::new();
        let expanded: BTreeSet<String> = ["a__selectable".to_string()].into();
        let scopes = [
            ("2025-11-25 session", Scope::Session(&none)),
            ("2025-11-25 session, expanded", Scope::Session(&expanded)),
            ("2026-07-28 sessionless", Scope::Stateless),
        ];
        let hidden = [
            Item::Tool("a__denied"),
            Item::Tool("nothing__here"),
            Item::Prompt("a__denied"),
            Item::Resource("a__denied"),
            Item::Resource("c__*"),
            Item::Template("a__denied"),
        ];
        for (version, scope) in scopes {
            for method in METHODS {
                for item in hidden {
                    assert_eq!(
                        decide(&allowed, scope, item, method),
                        Decision::Hidden,
                        "{version}: {item:?} {method:?}"
                    );
                }
            }
        }
        // What is allowed, per method and version.
        use Decision::{Allow, Hidden, NotSelected};
        #[rustfmt::skip]
        /// Per method, in the order of `METHODS`.
        type Row = [Decision; 7];
        let table: &[(Item, Row, Row, Row)] = &[
            //                         session (not expanded)                      session (expanded)                        sessionless
            //                         List  Use  Expand Search Describe Complete Subscribe
            (
                Item::Tool("a__listed"),
                [Allow, Allow, Allow, Allow, Allow, Hidden, Hidden],
                [Allow, Allow, Allow, Allow, Allow, Hidden, Hidden],
                [Allow, Allow, Allow, Allow, Allow, Hidden, Hidden],
            ),
            (
                Item::Tool("a__selectable"),
                [
                    NotSelected,
                    NotSelected,
                    Allow,
                    Allow,
                    Allow,
                    Hidden,
                    Hidden,
                ],
                [Allow, Allow, Allow, Allow, Allow, Hidden, Hidden],
                [NotSelected, Allow, Allow, Allow, Allow, Hidden, Hidden],
            ),
            (
                Item::Prompt("a__prompt"),
                [Allow; 7],
                [Allow; 7],
                [Allow; 7],
            ),
            (
                Item::Resource("a__resource"),
                [Allow; 7],
                [Allow; 7],
                [Allow; 7],
            ),
            (Item::Resource("b__*"), [Allow; 7], [Allow; 7], [Allow; 7]),
            (
                Item::Template("a__template"),
                [Allow; 7],
                [Allow; 7],
                [Allow; 7],
            ),
        ];
        for (item, session, expanded_session, stateless) in table {
            for (i, method) in METHODS.into_iter().enumerate() {
                for (version, scope, want) in [
                    (scopes[0].0, scopes[0].1, session[i]),
                    (scopes[1].0, scopes[1].1, expanded_session[i]),
                    (scopes[2].0, scopes[2].1, stateless[i]),
                ] {
                    assert_eq!(
                        decide(&allowed, scope, *item, method),
                        want,
                        "{version}: {item:?} {method:?}"
                    );
                }
            }
        }
    }

    /// The sets surfaces show come from the same rules as the decision.
    #[test]
    fn the_sets_agree_with_the_decision() {
        let allowed = allowed();
        let none = BTreeSet::new();
        let expanded: BTreeSet<String> = ["a__selectable".to_string()].into();
        for scope in [
            Scope::Session(&none),
            Scope::Session(&expanded),
            Scope::Stateless,
        ] {
            for name in allowed.searchable_tools() {
                let item = Item::Tool(name);
                assert_eq!(
                    allowed.listed_tools(scope).contains(name),
                    allowed.permits(scope, item, Method::List),
                    "{name} in {scope:?}"
                );
                assert_eq!(
                    allowed.expandable_tools(scope).any(|n| n == name),
                    decide(&allowed, scope, item, Method::List) == Decision::NotSelected,
                    "{name} in {scope:?}"
                );
                assert!(allowed.permits(scope, item, Method::Search));
            }
        }
    }
}
