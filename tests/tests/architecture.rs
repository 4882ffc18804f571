//! The house's rules about its own shape, read from the source: no import cycle among
//! the gateway's rooms, none among the adapters' or the search crate's rooms, none
//! among the OpenAPI adapter's modules (its pipeline runs one way: load → refs →
//! operations → convert → import → upstream; invoke → guard → client).
//!
//! A *room* is a top-level module of a crate (`policy`, `catalog`, …), except in the
//! folders whose children are rooms of their own (`serve/` holds one room per surface,
//! `state/` one per concern). An edge A → B is any path in A's code that names B
//! (`use crate::b::…`, `crate::b::X`, `super::b`), outside `#[cfg(test)]` code and
//! test-only files. Paths inside macro calls count too.
//!
//! `cargo test -p toolgate-e2e --test architecture -- --nocapture` prints each graph
//! as a plain list (room → what it imports).
//! With `TOOLGATE_ARCHITECTURE_WHY=1` it also prints the path behind each edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use syn::visit::Visit;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// One source file of a crate: its module path and its parsed contents.
struct Module {
    path: Vec<String>,
    file: syn::File,
}

/// Every module of the crate rooted at `src/lib.rs`, found by following its `mod`
/// declarations (so `#[cfg(test)] mod …;` files are left out, as the build leaves them).
fn modules(src: &Path) -> Vec<Module> {
    let mut found = Vec::new();
    let mut pending = vec![(Vec::<String>::new(), src.join("lib.rs"))];
    let mut guard = 0;
    while let Some((path, file_path)) = pending.pop() {
        guard += 1;
        assert!(guard < 2_000, "more modules than any crate here has");
        let text = std::fs::read_to_string(&file_path)
            .unwrap_or_else(|e| panic!("{}: {e}", file_path.display()));
        let file =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file_path.display()));
        // Children of `a/mod.rs` and `lib.rs` live in `a/`; of `a/b.rs` in `a/b/`.
        let dir = match file_path.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs") => file_path.parent().expect("a folder").to_path_buf(),
            _ => file_path.with_extension(""),
        };
        collect_mods(&file.items, &path, &dir, &mut pending);
        found.push(Module { path, file });
    }
    found
}

/// Queues the out-of-line `mod` declarations of `items` (inline modules' own
/// out-of-line children too), skipping test-only ones.
fn collect_mods(
    items: &[syn::Item],
    path: &[String],
    dir: &Path,
    pending: &mut Vec<(Vec<String>, PathBuf)>,
) {
    for item in items {
        let syn::Item::Mod(module) = item else {
            continue;
        };
        if is_test_only(&module.attrs) {
            continue;
        }
        let name = module.ident.to_string();
        let mut child = path.to_vec();
        child.push(name.clone());
        match &module.content {
            Some((_, inner)) => collect_mods(inner, &child, &dir.join(&name), pending),
            None => {
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                let file = if flat.exists() { flat } else { nested };
                pending.push((child, file));
            }
        }
    }
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

/// The module paths (absolute, from the crate root) that one module's code names.
struct Names<'a> {
    here: &'a [String],
    /// The modules declared in this one (`mod x;`): a path may start at one of them.
    children: BTreeSet<String>,
    named: BTreeSet<Vec<String>>,
}

impl Names<'_> {
    /// `segments` as written in module `self.here` (inside inline modules `inline`),
    /// made absolute when it starts at `crate`, `super` or `self`.
    fn note(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut absolute: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.here.to_vec(),
            child if self.children.contains(child) => self.here.to_vec(),
            "super" => {
                let mut base = self.here.to_vec();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                self.named.insert(base);
                return;
            }
            _ => return,
        };
        let skip = usize::from(first == "crate" || first == "self");
        absolute.extend(segments[skip..].iter().cloned());
        self.named.insert(absolute);
    }

    fn note_use(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.note_use(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.note(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.note(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.note(prefix),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.note_use(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    /// `pub(super)` and `pub(in crate::x)` name where an item is seen, not a use of it.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.note_use(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.note(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro bodies are tokens: find `crate :: a :: b` and `super :: a` runs in them.
        let tokens: Vec<proc_macro2::TokenTree> = flatten(mac.tokens.clone());
        let mut i = 0;
        while i < tokens.len() {
            if let proc_macro2::TokenTree::Ident(ident) = &tokens[i]
                && (ident == "crate" || ident == "super")
            {
                let mut segments = vec![ident.to_string()];
                let mut j = i + 1;
                while j + 2 < tokens.len() + 1
                    && matches!(&tokens.get(j), Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == ':')
                    && matches!(&tokens.get(j + 1), Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == ':')
                {
                    match tokens.get(j + 2) {
                        Some(proc_macro2::TokenTree::Ident(next)) => {
                            segments.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                self.note(&segments);
                i = j;
            } else {
                i += 1;
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

fn flatten(stream: proc_macro2::TokenStream) -> Vec<proc_macro2::TokenTree> {
    let mut out = Vec::new();
    for tree in stream {
        match tree {
            proc_macro2::TokenTree::Group(group) => out.extend(flatten(group.stream())),
            other => out.push(other),
        }
    }
    out
}

/// The room a module path belongs to: its first segment, or its first two under one
/// of `houses` (folders whose children are rooms).
fn room_of(path: &[String], houses: &[&str]) -> Option<String> {
    let first = path.first()?;
    match path.get(1) {
        Some(second) if houses.contains(&first.as_str()) => Some(format!("{first}::{second}")),
        _ => Some(first.clone()),
    }
}

/// The import graph of a crate's rooms: room → the rooms its code names.
fn room_graph(src: &Path, houses: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    graph_of(&modules(src), |path| room_of(path, houses))
}

fn graph_of(
    modules: &[Module],
    room_of_path: impl Fn(&[String]) -> Option<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let known: BTreeSet<String> = modules
        .iter()
        .filter_map(|m| room_of_path(&m.path))
        .collect();
    // A path names the room of the longest module prefix it has: `state::Unavailable`
    // is an item of the `state` house itself, `state::conn::RedisConn` of `state::conn`.
    let module_paths: BTreeSet<&[String]> = modules.iter().map(|m| m.path.as_slice()).collect();
    let room = |path: &[String]| {
        (0..=path.len())
            .rev()
            .find(|n| module_paths.contains(&path[..*n]))
            .and_then(|n| room_of_path(&path[..n]))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> =
        known.iter().map(|r| (r.clone(), BTreeSet::new())).collect();
    for module in modules {
        let Some(from) = room(&module.path) else {
            continue;
        };
        let children = module
            .file
            .items
            .iter()
            .filter_map(|item| match item {
                syn::Item::Mod(m) => Some(m.ident.to_string()),
                _ => None,
            })
            .collect();
        let mut names = Names {
            here: &module.path,
            children,
            named: BTreeSet::new(),
        };
        names.visit_file(&module.file);
        for named in names.named {
            if let Some(to) = room(&named)
                && to != from
                && known.contains(&to)
            {
                if std::env::var_os("TOOLGATE_ARCHITECTURE_WHY").is_some() {
                    println!("{} → {to}: {}", module.path.join("::"), named.join("::"));
                }
                graph.get_mut(&from).expect("known").insert(to);
            }
        }
    }
    graph
}

/// The strongly connected components of more than one room: each one is a cycle.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut g = DiGraph::<&str, ()>::new();
    let index: BTreeMap<&str, _> = graph.keys().map(|k| (k.as_str(), g.add_node(k))).collect();
    for (from, tos) in graph {
        for to in tos {
            g.add_edge(index[from.as_str()], index[to.as_str()], ());
        }
    }
    tarjan_scc(&g)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut rooms: Vec<String> = component.iter().map(|n| g[*n].to_string()).collect();
            rooms.sort();
            rooms
        })
        .collect()
}

/// For a failure message: the edges inside one cycle.
fn edges_within(graph: &BTreeMap<String, BTreeSet<String>>, cycle: &[String]) -> String {
    let mut lines = Vec::new();
    for from in cycle {
        let inside: Vec<&str> = graph[from]
            .iter()
            .filter(|to| cycle.contains(to))
            .map(String::as_str)
            .collect();
        lines.push(format!("  {from} → {}", inside.join(", ")));
    }
    lines.join("\n")
}

fn print_map(title: &str, graph: &BTreeMap<String, BTreeSet<String>>) {
    println!("{title}");
    for (from, tos) in graph {
        let tos: Vec<&str> = tos.iter().map(String::as_str).collect();
        println!("  {from} → {}", tos.join(", "));
    }
}

fn assert_acyclic(title: &str, graph: &BTreeMap<String, BTreeSet<String>>) {
    print_map(title, graph);
    let found = cycles(graph);
    let described: Vec<String> = found
        .iter()
        .map(|cycle| format!("{}:\n{}", cycle.join(" ⇄ "), edges_within(graph, cycle)))
        .collect();
    assert!(
        found.is_empty(),
        "{title}: import cycles (each room below can reach every other):\n{}",
        described.join("\n")
    );
}

#[test]
fn the_gateway_rooms_import_each_other_one_way() {
    let graph = room_graph(&workspace_root().join("gateway/src"), &["serve", "state"]);
    assert!(
        graph.len() > 10,
        "the gateway's rooms were found: {graph:?}"
    );
    assert_acyclic("gateway/src", &graph);
}

/// The gateway's core: what serves a call. It must stand alone.
const CORE: &[&str] = &[
    "access",
    "call",
    "catalog",
    "coalesce",
    "config",
    "credentials",
    "errors",
    "export",
    "gateway",
    "health",
    "logging",
    "metrics",
    "policy",
    "recent",
    "state",
    "state::conn",
    "state::ratelimit",
    "state::sessions",
    "summary",
    "telemetry",
    "truncate",
    "validate",
];

/// The services built on the core (and their own records), and the surfaces: they may
/// import the core, never the other way round.
const SERVICES: &[&str] = &[
    "app",
    "healthcheck",
    "preflight",
    "registry",
    "reload",
    "serve",
    "state::registrations",
    "state::tasks",
    "state::tokens",
    "tasks",
    "upstream_auth",
];

fn is_service(room: &str) -> bool {
    SERVICES.contains(&room) || room.starts_with("serve::")
}

/// The core imports none of the services built on it (registrations, background
/// calls, reload, the surfaces, the application that assembles them); every room is
/// one or the other, so a new room is placed on purpose.
#[test]
fn the_core_imports_no_service() {
    let graph = room_graph(&workspace_root().join("gateway/src"), &["serve", "state"]);
    let unplaced: Vec<&String> = graph
        .keys()
        .filter(|room| !CORE.contains(&room.as_str()) && !is_service(room))
        .collect();
    assert!(
        unplaced.is_empty(),
        "rooms neither core nor service (add each to CORE or SERVICES in this file): {unplaced:?}"
    );
    let mut wrong = Vec::new();
    for room in CORE {
        let Some(imports) = graph.get(*room) else {
            continue;
        };
        for import in imports.iter().filter(|i| is_service(i)) {
            wrong.push(format!("{room} → {import}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "the core imports services (move what it needs into the core, or hand it in from the service): {wrong:?}"
    );
}

#[test]
fn the_adapter_rooms_import_each_other_one_way() {
    let src = workspace_root().join("adapters/src");
    let graph = room_graph(&src, &[]);
    assert!(
        graph.contains_key("openapi") && graph.contains_key("mcp"),
        "{graph:?}"
    );
    assert_acyclic("adapters/src", &graph);
}

#[test]
fn the_search_rooms_import_each_other_one_way() {
    let graph = room_graph(&workspace_root().join("search/src"), &[]);
    assert!(
        graph.contains_key("index") && graph.contains_key("embed"),
        "{graph:?}"
    );
    assert_acyclic("search/src", &graph);
}

#[test]
fn the_openapi_pipeline_runs_one_way() {
    let all = modules(&workspace_root().join("adapters/src"));
    // Each module of the OpenAPI adapter is a room of its own.
    let graph = graph_of(&all, |path| match path {
        [first, second, ..] if first == "openapi" => Some(second.clone()),
        _ => None,
    });
    assert!(
        graph.contains_key("load") && graph.contains_key("invoke"),
        "{graph:?}"
    );
    assert_acyclic("adapters/src/openapi", &graph);
}

/// The check itself: a cycle written on purpose is found and named.
#[test]
fn a_cycle_is_found() {
    let parse = |text: &str| syn::parse_file(text).expect("parses");
    let modules = vec![
        Module {
            path: vec!["a".into()],
            file: parse("use crate::b::Thing; pub struct Other;"),
        },
        Module {
            path: vec!["b".into()],
            file: parse("pub struct Thing; fn f() { let _ = format!(\"{:?}\", crate::a::Other); }"),
        },
        Module {
            path: vec!["c".into()],
            file: parse("use super::a::Other; #[cfg(test)] mod tests { use crate::b::Thing; }"),
        },
    ];
    let graph = graph_of(&modules, |path| path.first().cloned());
    assert_eq!(cycles(&graph), vec![vec!["a".to_string(), "b".to_string()]]);
    assert!(
        graph["c"].contains("a") && !graph["c"].contains("b"),
        "{graph:?}"
    );
}
