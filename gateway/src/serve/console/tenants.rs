//! A tenant as the policy sees it: its patterns, its allowed set, its initial set (what
//! a new session lists first), its live sessions, and for any tool why it is or is not
//! visible — the policy's own explanation ([`crate::policy::Policy::explain`]), never a
//! second reading of the patterns. A tenant signed in with its API key sees only
//! itself and only the tools it may use.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};

use super::auth::{Current, Viewer};
use super::html::{self, esc, url_part};
use super::{Console, signed_in};
use crate::catalog::Catalog;
use crate::policy::{Allowed, Explanation, FirstList, Item, Method, Policy, Rule, Scope, Tenant};

/// The most rows a tenant's lists show.
const MAX_ROWS: usize = 300;

pub(super) async fn tenants(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let current = match signed_in(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    let policy = console.door.gateway.policy();
    let mut body = String::new();
    let tenant: Option<Arc<Tenant>> = match &current.viewer {
        Viewer::Tenant(tenant, _) => Some(tenant.clone()),
        Viewer::Admin => {
            let names = if policy.is_open() {
                vec![crate::policy::OPEN_TENANT.to_owned()]
            } else {
                policy.tenant_names()
            };
            if policy.is_open() {
                body.push_str(&html::notice(
                    "info",
                    "No tenants are configured: every caller is the open tenant, which may use every tool.",
                ));
            }
            let chosen = query
                .get("tenant")
                .filter(|t| names.contains(t))
                .or(names.first())
                .cloned()
                .unwrap_or_default();
            body.push_str(
                "<form method=\"get\" action=\"/console/tenants\" class=\"filters\">\
                 <label for=\"tenant\">Tenant</label><select id=\"tenant\" name=\"tenant\">",
            );
            html::options(&mut body, names.iter().map(String::as_str), &chosen);
            body.push_str("</select><button type=\"submit\">Show</button></form>");
            policy.tenant(&chosen)
        }
    };
    let Some(tenant) = tenant else {
        body.push_str(&html::notice("info", "No tenant to show."));
        return page(&current, &body);
    };
    describe(&console, &current, &tenant, query.get("tool"), &mut body);
    page(&current, &body)
}

fn page(current: &Current, body: &str) -> Response {
    super::html(
        StatusCode::OK,
        html::page(
            &current.viewer,
            &current.csrf,
            "/console/tenants",
            "Tenants",
            body,
        ),
    )
}

fn describe(
    console: &Console,
    current: &Current,
    tenant: &Tenant,
    tool: Option<&String>,
    body: &mut String,
) {
    let gateway = &console.door.gateway;
    let policy = gateway.policy();
    let catalog = gateway.catalog();
    let allowed = policy.allowed(tenant, &catalog);
    let admin = current.viewer.is_admin();
    facts(console, admin, tenant, &allowed, body);
    explain_form(&policy, &catalog, admin, tenant, &allowed, tool, body);
    allowed_table(tenant, &allowed, body);
    if admin {
        denied_table(tenant, &catalog, &allowed, body);
    }
}

/// The tenant's counts, live sessions and (for the admin) its patterns.
fn facts(console: &Console, admin: bool, tenant: &Tenant, allowed: &Allowed, body: &mut String) {
    let gateway = &console.door.gateway;
    let sessions = gateway
        .sessions
        .live_by_tenant()
        .map(|counts| counts.get(&tenant.name).copied().unwrap_or(0).to_string())
        .unwrap_or_else(|| "not counted with shared state".to_owned());
    let (tools, first_list, offerings) = allowed.counts();
    let _ = write!(
        body,
        "<h2 id=\"tenant-h\">Tenant <code>{}</code></h2><dl class=\"facts\">\
         <dt>Allowed tools</dt><dd id=\"allowed-count\">{}</dd><dt>In a new session's first list</dt><dd>{}</dd>\
         <dt>Prompts and resources allowed</dt><dd>{}</dd><dt>Live MCP/REST sessions</dt><dd id=\"live-sessions\">{}</dd>",
        esc(&tenant.name),
        tools,
        first_list,
        offerings,
        esc(&sessions)
    );
    let config = gateway.config();
    if admin && let Some(patterns) = config.tenants.get(&tenant.name) {
        let list = |items: &[String]| {
            if items.is_empty() {
                "none".to_owned()
            } else {
                items
                    .iter()
                    .map(|p| format!("<code>{}</code>", esc(p)))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        };
        let _ = write!(
            body,
            "<dt>allow</dt><dd>{}</dd><dt>deny</dt><dd>{}</dd><dt>initial</dt><dd>{}</dd>",
            list(&patterns.allow),
            list(&patterns.deny),
            patterns.initial.as_deref().map_or_else(
                || "not set (the whole allowed set when small enough)".to_owned(),
                list
            )
        );
    }
    body.push_str("</dl>");
}

/// The form that explains why a tool is or is not visible, and its answer.
/// `policy`, `catalog` and `allowed` are of one snapshot.
fn explain_form(
    policy: &Policy,
    catalog: &Arc<Catalog>,
    admin: bool,
    tenant: &Tenant,
    allowed: &Allowed,
    tool: Option<&String>,
    body: &mut String,
) {
    let names: Vec<&str> = catalog
        .entries()
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| admin || allowed.permits(Scope::Stateless, Item::Tool(n), Method::Use))
        .collect();
    let asked = tool.map(|t| t.trim()).unwrap_or_default();
    let _ = write!(
        body,
        "<h2 id=\"explain-h\">Why is a tool visible or not?</h2>\
         <form method=\"get\" action=\"/console/tenants\" class=\"filters\">\
         <input type=\"hidden\" name=\"tenant\" value=\"{t}\">\
         <label for=\"tool\">Tool name</label>\
         <input id=\"tool\" name=\"tool\" list=\"tool-names\" value=\"{a}\" autocomplete=\"off\">\
         <datalist id=\"tool-names\">",
        t = esc(&tenant.name),
        a = esc(asked)
    );
    for name in names.iter().take(2000) {
        let _ = write!(body, "<option value=\"{}\">", esc(name));
    }
    body.push_str("</datalist><button type=\"submit\">Explain</button></form>");
    if !asked.is_empty() {
        // A tenant asking about a tool it may not use learns nothing: hidden is
        // nonexistent.
        let explanation = policy.explain(tenant, catalog, asked);
        let shown = if admin || explanation.rule.is_allowed() && explanation.exists {
            explain_text(asked, &explanation)
        } else {
            html::notice("info", &format!("There is no tool named {asked}."))
        };
        let _ = write!(
            body,
            "<div id=\"explanation\" role=\"status\">{shown}</div>"
        );
    }
}

/// The allowed set, with whether a new session lists each.
fn allowed_table(tenant: &Tenant, allowed: &Allowed, body: &mut String) {
    let _ = write!(
        body,
        "<h2 id=\"allowed-h\">Allowed tools ({})</h2>",
        allowed.searchable_tools().len()
    );
    if allowed.searchable_tools().is_empty() {
        body.push_str("<p>None.</p>");
    } else {
        body.push_str(
            "<table id=\"allowed\" aria-labelledby=\"allowed-h\"><thead><tr><th scope=\"col\">Tool</th>\
             <th scope=\"col\">Allowed by</th><th scope=\"col\">First list</th></tr></thead><tbody>",
        );
        for name in allowed.searchable_tools().iter().take(MAX_ROWS) {
            let rule = match tenant.explain(name) {
                Rule::Allowed { by } => format!("<code>{}</code>", esc(by)),
                _ => String::new(),
            };
            let new_session = Scope::Session(&BTreeSet::new());
            let first = if allowed.permits(new_session, Item::Tool(name), Method::List) {
                "listed"
            } else {
                "by search / expand"
            };
            let _ = write!(
                body,
                "<tr><th scope=\"row\"><a href=\"/console/tenants?tenant={t}&amp;tool={u}\">{n}</a></th>\
                 <td>{rule}</td><td>{first}</td></tr>",
                t = url_part(&tenant.name),
                u = url_part(name),
                n = esc(name)
            );
        }
        body.push_str("</tbody></table>");
        if allowed.searchable_tools().len() > MAX_ROWS {
            body.push_str(&html::notice(
                "info",
                &format!(
                    "{} more not shown.",
                    allowed.searchable_tools().len() - MAX_ROWS
                ),
            ));
        }
    }
}

/// What the tenant may not use, and the pattern that keeps it out (the admin's view).
fn denied_table(tenant: &Tenant, catalog: &Catalog, allowed: &Allowed, body: &mut String) {
    let denied: Vec<&str> = catalog
        .entries()
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| !allowed.permits(Scope::Stateless, Item::Tool(n), Method::Use))
        .collect();
    let _ = write!(
        body,
        "<h2 id=\"denied-h\">Not allowed ({})</h2>",
        denied.len()
    );
    if denied.is_empty() {
        body.push_str("<p>None.</p>");
        return;
    }
    body.push_str(
        "<table id=\"denied\" aria-labelledby=\"denied-h\"><thead><tr><th scope=\"col\">Tool</th>\
         <th scope=\"col\">Why</th></tr></thead><tbody>",
    );
    for name in denied.iter().take(MAX_ROWS) {
        let _ = write!(
            body,
            "<tr><th scope=\"row\"><a href=\"/console/tenants?tenant={t}&amp;tool={u}\">{n}</a></th><td>{why}</td></tr>",
            t = url_part(&tenant.name),
            u = url_part(name),
            n = esc(name),
            why = rule_text(&tenant.explain(name))
        );
    }
    body.push_str("</tbody></table>");
}

fn rule_text(rule: &Rule<'_>) -> String {
    match rule {
        Rule::Allowed { by } => format!("allowed by <code>{}</code>", esc(by)),
        Rule::Denied { by, allowed_by } => format!(
            "denied by <code>{}</code> (deny wins over <code>{}</code>, which matches too)",
            esc(by),
            esc(allowed_by)
        ),
        Rule::NotAllowed {
            denied_by: Some(by),
        } => format!(
            "no allow pattern matches it (and <code>{}</code> denies it)",
            esc(by)
        ),
        Rule::NotAllowed { denied_by: None } => "no allow pattern matches it".to_owned(),
    }
}

fn explain_text(name: &str, explanation: &Explanation<'_>) -> String {
    if !explanation.exists {
        return html::notice(
            "info",
            &format!("There is no tool named {name} in the catalog."),
        );
    }
    let access = explanation.access.as_str();
    let class = match access {
        "visible" => "ok",
        "selectable" => "warn",
        _ => "bad",
    };
    let first = match explanation.first_list {
        FirstList::NotAllowed => "It is not listed, searched, expanded nor callable for this tenant: to the tenant it does not exist.".to_owned(),
        FirstList::ByPattern { pattern } => format!(
            "A new session lists it first: the initial pattern <code>{}</code> matches it.",
            esc(pattern)
        ),
        FirstList::WholeSetFits { allowed, max } => format!(
            "A new session lists it first: no initial patterns, and the allowed set ({allowed} tools) is within sessions.initial_max_tools ({max})."
        ),
        FirstList::NoInitialPattern => "A new session does not list it first (no initial pattern matches it): it is found with tool_search and added with tool_expand_tools, or called by name without a session.".to_owned(),
        FirstList::WholeSetTooLarge { allowed, max } => format!(
            "A new session does not list it first: no initial patterns, and the allowed set ({allowed} tools) is larger than sessions.initial_max_tools ({max}); it is found with tool_search and added with tool_expand_tools."
        ),
        FirstList::OverTokenBudget { .. } => "A new session does not list it first: the first list's token budget (sessions.initial_max_tokens) was spent on other tools; it is found with tool_search and added with tool_expand_tools.".to_owned(),
    };
    format!(
        "<p><code>{n}</code>: <span class=\"badge {class}\" id=\"access\">{access}</span> — {rule}.</p><p>{first}</p>",
        n = esc(name),
        rule = rule_text(&explanation.rule)
    )
}
