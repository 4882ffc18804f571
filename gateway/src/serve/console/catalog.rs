//! The catalog page (tools, prompts, resources; search with the `tool_search` engine;
//! filter by upstream) and a tool's detail page (description, annotations, input
//! schema tree, its export in every function-schema format, its token cost, and a
//! form to try it). A tenant sees only what its policy allows, and a tool it may not
//! use is answered like one that does not exist.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::auth::{Current, Viewer};
use super::html::{self, esc, url_part};
use super::{Console, not_found, schema, signed_in};
use crate::access::View;
use crate::catalog::{Catalog, Entry};
use crate::export::{self, ExportOptions, Format};
use crate::policy::{self, Allowed, Item, Method};

/// The most rows a catalog listing shows (search or filter to narrow).
const MAX_ROWS: usize = 300;
/// The most search hits asked for.
const SEARCH_LIMIT: usize = 50;

/// The catalog snapshot and, for a tenant, what it may use there.
struct Visibility {
    catalog: Arc<Catalog>,
    /// `None` for the admin (everything).
    allowed: Option<Arc<Allowed>>,
}

impl Visibility {
    /// What `viewer` sees: for a tenant's user, the catalog their calls are answered
    /// from (their own, where an upstream lists per user).
    fn of(console: &Console, viewer: &Viewer) -> Visibility {
        let gateway = &console.door.gateway;
        match viewer.caller() {
            None => Visibility {
                catalog: gateway.catalog(),
                allowed: None,
            },
            Some(caller) => {
                let view = View::of(gateway, &caller);
                Visibility {
                    catalog: view.catalog,
                    allowed: Some(view.allowed),
                }
            }
        }
    }

    /// Whether the viewer may use `item` (the admin: anything), as a sessionless
    /// caller of the tenant would.
    fn permits(&self, item: Item<'_>) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|a| a.permits(policy::Scope::Stateless, item, Method::Use))
    }
}

pub(super) async fn catalog(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let current = match signed_in(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    let scope = Visibility::of(&console, &current.viewer);
    let q = query.get("q").map(|q| q.trim()).unwrap_or_default();
    let upstream = query
        .get("upstream")
        .map(String::as_str)
        .unwrap_or_default();
    let upstreams: BTreeSet<&str> = scope
        .catalog
        .entries()
        .iter()
        .filter(|e| scope.permits(Item::Tool(&e.name)))
        .map(|e| e.upstream.as_str())
        .collect();
    let mut body = String::new();
    let _ = write!(
        body,
        "<form method=\"get\" action=\"/console/catalog\" class=\"filters\" role=\"search\">\
         <label for=\"q\">Search tools</label>\
         <input id=\"q\" name=\"q\" type=\"search\" value=\"{}\" placeholder=\"e.g. add two numbers\">\
         <label for=\"upstream\">Upstream</label><select id=\"upstream\" name=\"upstream\">\
         <option value=\"\">all</option>",
        esc(q)
    );
    html::options(&mut body, upstreams.iter().copied(), upstream);
    body.push_str("</select><button type=\"submit\">Search</button></form>");

    let entries: Vec<&Arc<Entry>> = if q.is_empty() {
        scope
            .catalog
            .entries()
            .iter()
            .filter(|e| scope.permits(Item::Tool(&e.name)))
            .collect()
    } else {
        let hits = search(&console, &current.viewer, &scope, q);
        hits.iter()
            .filter_map(|name| scope.catalog.get(name))
            .collect()
    };
    let entries: Vec<&Arc<Entry>> = entries
        .into_iter()
        .filter(|e| upstream.is_empty() || e.upstream == upstream)
        .collect();
    let heading = if q.is_empty() {
        format!("Tools ({})", entries.len())
    } else {
        format!("Tools matching “{}” ({}, best first)", q, entries.len())
    };
    let _ = write!(body, "<h2 id=\"tools-h\">{}</h2>", esc(&heading));
    if entries.is_empty() {
        body.push_str(&html::notice("info", "No tools."));
    } else {
        body.push_str(
            "<table class=\"tools\" aria-labelledby=\"tools-h\"><thead><tr><th scope=\"col\">Tool</th>\
             <th scope=\"col\">Upstream</th><th scope=\"col\">Description</th>\
             <th scope=\"col\">Tokens (listed)</th></tr></thead><tbody>",
        );
        for entry in entries.iter().take(MAX_ROWS) {
            let definition = entry.definition();
            let description = definition
                .get("description")
                .and_then(Value::as_str)
                .and_then(|d| d.lines().next())
                .unwrap_or_default();
            let _ = write!(
                body,
                "<tr><th scope=\"row\"><a href=\"/console/tools/{u}\">{n}</a></th><td>{up}</td>\
                 <td>{d}</td><td>{t}</td></tr>",
                u = url_part(&entry.name),
                n = esc(&entry.name),
                up = esc(&entry.upstream),
                d = esc(&truncate(description, 160)),
                t = entry.definition_tokens,
            );
        }
        body.push_str("</tbody></table>");
        if entries.len() > MAX_ROWS {
            body.push_str(&html::notice(
                "info",
                &format!(
                    "{} more tools not shown: search or filter by upstream to narrow.",
                    entries.len() - MAX_ROWS
                ),
            ));
        }
    }
    offerings(&scope, upstream, &mut body);
    super::html(
        StatusCode::OK,
        html::page(
            &current.viewer,
            &current.csrf,
            "/console/catalog",
            "Catalog",
            &body,
        ),
    )
}

/// Ranked tool names for `q`: the `tool_search` engine over what the viewer may use.
fn search(console: &Console, viewer: &Viewer, scope: &Visibility, q: &str) -> Vec<String> {
    let gateway = &console.door.gateway;
    let hits = match viewer.caller() {
        None => gateway.search_where(&scope.catalog, q, SEARCH_LIMIT, |_| true),
        Some(caller) => {
            let view = View::of(gateway, &caller);
            gateway.search_where(&view.catalog, q, SEARCH_LIMIT, |name| {
                view.permits(&caller, Item::Tool(name), Method::Search)
            })
        }
    };
    hits.iter()
        .filter_map(|hit| hit["name"].as_str().map(str::to_owned))
        .collect()
}

fn truncate(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(chars).collect();
    cut.push('…');
    cut
}

/// The prompts, resources and templates the viewer may use, in `upstream` when given.
fn offerings(scope: &Visibility, upstream: &str, body: &mut String) {
    let offerings = scope.catalog.offerings();
    let in_upstream = |u: &str| upstream.is_empty() || u == upstream;
    let prompts: Vec<_> = offerings
        .prompts
        .entries()
        .iter()
        .filter(|e| in_upstream(&e.upstream) && scope.permits(Item::Prompt(&e.name)))
        .take(MAX_ROWS)
        .collect();
    let prompts: Vec<(&str, String)> = prompts
        .into_iter()
        .map(|prompt| {
            let definition = prompt.definition();
            let description = definition
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            (prompt.name.as_str(), truncate(description, 160))
        })
        .collect();
    listing(body, "Prompts", &prompts);
    let items: Vec<(&str, String)> = offerings
        .resources
        .iter()
        .chain(offerings.templates.iter())
        .filter(|i| in_upstream(&i.upstream) && scope.permits(Item::Resource(&i.name)))
        .take(MAX_ROWS)
        .map(|item| (item.uri.as_str(), item.name.clone()))
        .collect();
    listing(body, "Resources and templates", &items);
}

/// A heading with its count and a plain list of `(name, description)` rows.
fn listing(body: &mut String, heading: &str, rows: &[(&str, String)]) {
    let _ = write!(body, "<h2>{heading} ({})</h2>", rows.len());
    if rows.is_empty() {
        body.push_str("<p>None.</p>");
        return;
    }
    body.push_str("<ul class=\"plain\">");
    for (name, description) in rows {
        let _ = write!(
            body,
            "<li><code>{}</code> <span class=\"desc\">{}</span></li>",
            esc(name),
            esc(description)
        );
    }
    body.push_str("</ul>");
}

pub(super) async fn tool(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let current = match signed_in(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    let scope = Visibility::of(&console, &current.viewer);
    let Some(entry) = scope
        .catalog
        .get(&name)
        .filter(|_| scope.permits(Item::Tool(&name)))
        .cloned()
    else {
        return not_found(&current);
    };
    let body = detail(&console, &current, &entry);
    super::html(
        StatusCode::OK,
        html::page(
            &current.viewer,
            &current.csrf,
            "/console/catalog",
            &entry.name,
            &body,
        ),
    )
}

fn detail(console: &Console, current: &Current, entry: &Entry) -> String {
    let full = Value::Object(entry.full_definition());
    let mut out = String::new();
    let _ = write!(
        out,
        "<p class=\"lead\">From upstream <a href=\"/console/catalog?upstream={u}\">{n}</a>, \
         where it is called <code>{o}</code>.</p>",
        u = url_part(&entry.upstream),
        n = esc(&entry.upstream),
        o = esc(&entry.original)
    );
    let description = full["description"].as_str().unwrap_or("(no description)");
    let _ = write!(
        out,
        "<section aria-labelledby=\"desc-h\"><h2 id=\"desc-h\">Description</h2><p class=\"prose\">{}</p></section>",
        esc(description)
    );
    let _ = write!(
        out,
        "<section aria-labelledby=\"cost-h\"><h2 id=\"cost-h\">Token cost</h2><dl class=\"facts\">\
         <dt>Listed definition</dt><dd id=\"listed-tokens\">{} tokens</dd><dt>Whole definition</dt><dd>{} tokens</dd>\
         <dt>Abbreviated in listings</dt><dd>{}</dd></dl></section>",
        entry.definition_tokens,
        entry.full_tokens,
        if entry.abbreviated() {
            "yes (its whole schema is read with tool_schema)"
        } else {
            "no"
        }
    );
    out.push_str("<section aria-labelledby=\"ann-h\"><h2 id=\"ann-h\">Annotations</h2>");
    match full["annotations"].as_object() {
        Some(annotations) if !annotations.is_empty() => {
            out.push_str("<dl class=\"facts\">");
            for (key, value) in annotations {
                let _ = write!(
                    out,
                    "<dt>{}</dt><dd>{}</dd>",
                    esc(key),
                    esc(&value.to_string())
                );
            }
            out.push_str("</dl>");
        }
        _ => out.push_str("<p>None.</p>"),
    }
    out.push_str("</section>");
    let input = &full["inputSchema"];
    let _ = write!(
        out,
        "<section aria-labelledby=\"schema-h\"><h2 id=\"schema-h\">Input schema</h2>{}</section>",
        schema::tree(input)
    );
    out.push_str("<section aria-labelledby=\"export-h\"><h2 id=\"export-h\">Exports</h2>");
    let definition = entry.definition();
    for format in Format::ALL {
        let text = match export::export(&definition, format, &ExportOptions::default()) {
            Ok(value) => serde_json::to_string_pretty(&value).unwrap_or_default(),
            Err(e) => format!("not expressible in this format: {}", e.reason),
        };
        let _ = write!(
            out,
            "<details><summary>{}</summary><pre><code>{}</code></pre></details>",
            esc(format.as_str()),
            esc(&text)
        );
    }
    out.push_str("</section>");
    out.push_str(&try_form(console, current, entry, input));
    out
}

/// The try-out form: fields from the input schema, the tenant to call as, and the
/// regions the script fills with the call's events and result.
fn try_form(console: &Console, current: &Current, entry: &Entry, input: &Value) -> String {
    let policy = console.door.gateway.policy();
    let tenants: Vec<String> = match &current.viewer {
        Viewer::Admin if policy.is_open() => vec![crate::policy::OPEN_TENANT.to_owned()],
        Viewer::Admin => policy.tenant_names(),
        Viewer::Tenant(tenant, _) => vec![tenant.name.clone()],
    };
    let catalog = console.door.gateway.catalog();
    let mut options = String::new();
    for name in &tenants {
        let may = policy.tenant(name).is_some_and(|t| {
            policy.allowed(&t, &catalog).permits(
                policy::Scope::Stateless,
                Item::Tool(&entry.name),
                Method::Use,
            )
        });
        let note = if may { "" } else { " (not allowed)" };
        let _ = write!(
            options,
            "<option value=\"{n}\">{n}{note}</option>",
            n = esc(name)
        );
    }
    format!(
        "<section aria-labelledby=\"try-h\"><h2 id=\"try-h\">Try it</h2>\
         <form id=\"try\" class=\"stack\" data-call=\"/console/tools/{u}/call\">\
         <label for=\"as-tenant\">Call as tenant</label><select id=\"as-tenant\" name=\"tenant\">{options}</select>\
         {fields}<button type=\"submit\">Call {n}</button></form>\
         <div class=\"call-out\"><section aria-labelledby=\"events-h\"><h3 id=\"events-h\">Events</h3>\
         <ol id=\"events\" aria-live=\"polite\"></ol></section>\
         <section aria-labelledby=\"result-h\"><h3 id=\"result-h\">Result</h3>\
         <div id=\"result\" aria-live=\"polite\"><p class=\"hint\">Not called yet.</p></div></section></div></section>",
        u = url_part(&entry.name),
        n = esc(&entry.name),
        fields = schema::form_fields(input),
    )
}
