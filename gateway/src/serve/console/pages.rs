//! The upstreams page (the console's home) and the reloads & health page, each with a
//! fragment the script polls to keep its live region current.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::auth::{Current, Viewer};
use super::html::{self, esc, url_part};
use super::{Console, admin_only, signed_in, signed_in_fragment};
use crate::config::Kind;
use crate::serve::ops;

/// How often the script refreshes a live region, in milliseconds.
const POLL_MS: u32 = 2000;

pub(super) async fn upstreams(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let current = match signed_in(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    let table = upstreams_table(&console, &current).await;
    let intro = if current.viewer.is_admin() {
        "Every upstream, live. States: starting (never connected yet), healthy, degraded (checks failing), down (connection lost or checks failed repeatedly)."
    } else {
        "The upstreams your API key reaches, live."
    };
    let body = format!(
        "<p class=\"lead\">{intro}</p>\
         <div class=\"live\" data-poll=\"/console/upstreams/fragment\" data-every=\"{POLL_MS}\" aria-live=\"polite\">{table}</div>",
    );
    super::html(
        StatusCode::OK,
        html::page(
            &current.viewer,
            &current.csrf,
            "/console",
            "Upstreams",
            &body,
        ),
    )
}

pub(super) async fn upstreams_fragment(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Response {
    let current = match signed_in_fragment(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    super::html(StatusCode::OK, upstreams_table(&console, &current).await)
}

/// The upstream rows as the admin API (admin) or `/v1/upstreams` (a tenant) has them.
async fn rows(console: &Console, viewer: &Viewer) -> Result<Vec<Value>, String> {
    match viewer {
        Viewer::Admin => console
            .admin
            .upstreams()
            .await
            .map_err(|(_, body)| body["error"]["message"].as_str().unwrap_or("").to_owned()),
        Viewer::Tenant(tenant, _) => Ok(ops::visible_statuses(&console.door.gateway, tenant)
            .into_iter()
            .map(|s| serde_json::to_value(s).unwrap_or_default())
            .collect()),
    }
}

async fn upstreams_table(console: &Console, current: &Current) -> String {
    let rows = match rows(console, &current.viewer).await {
        Ok(rows) => rows,
        Err(message) => return html::notice("bad", &message),
    };
    if rows.is_empty() {
        return html::notice("info", "No upstreams.");
    }
    let admin = current.viewer.is_admin();
    let mut out = String::from(
        "<table class=\"upstreams\"><caption class=\"sr-only\">Upstreams</caption><thead><tr>\
         <th scope=\"col\">Upstream</th><th scope=\"col\">Kind</th><th scope=\"col\">State</th>\
         <th scope=\"col\">Last error</th><th scope=\"col\">Check latency</th>\
         <th scope=\"col\">Tools</th>",
    );
    if admin {
        out.push_str("<th scope=\"col\">Origin</th>");
    }
    // Call counts cover every tenant's calls: the admin's to see, not a tenant's.
    if admin {
        out.push_str("<th scope=\"col\">Calls / errors (6 min)</th><th scope=\"col\">Actions</th>");
    }
    out.push_str("</tr></thead><tbody>");
    let metrics = &console.door.gateway.metrics;
    for row in &rows {
        let name = row["name"].as_str().unwrap_or_default();
        let kind = row["kind"].as_str().unwrap_or_default();
        let state = row["state"].as_str().unwrap_or("starting");
        let last_error = row["last_error"].as_str().unwrap_or("—");
        let latency = row["latency_ms"]
            .as_f64()
            .map_or_else(|| "—".to_owned(), |ms| format!("{ms:.1} ms"));
        let tools = row["tools"].as_u64().unwrap_or(0);
        let series = metrics.recent.series(name);
        let _ = write!(
            out,
            "<tr data-upstream=\"{n}\"><th scope=\"row\"><a href=\"/console/catalog?upstream={u}\">{n}</a></th>\
             <td>{kind}</td><td class=\"state\">{badge}</td><td class=\"error\">{err}</td>\
             <td>{latency}</td><td>{tools}</td>",
            n = esc(name),
            u = url_part(name),
            kind = esc(kind),
            badge = html::state_badge(state),
            err = esc(last_error),
        );
        if admin {
            let _ = write!(
                out,
                "<td>{}</td>",
                esc(row["origin"].as_str().unwrap_or("config"))
            );
        }
        if admin {
            let _ = write!(
                out,
                "<td>{}</td>",
                html::sparkline(&series.calls, &series.errors, series.bucket_seconds)
            );
            out.push_str("<td><div class=\"actions\">");
            // Refresh imports the spec again: only an OpenAPI upstream has one.
            if Kind::from_name(kind) == Some(Kind::Openapi) {
                let _ = write!(
                    out,
                    "<form method=\"post\" action=\"/console/upstreams/{u}/refresh\">{csrf}\
                     <button type=\"submit\" aria-label=\"Refresh {n}\">Refresh</button></form>",
                    u = url_part(name),
                    n = esc(name),
                    csrf = html::csrf_field(&current.csrf),
                );
            }
            if row["origin"] == "admin" {
                let _ = write!(
                    out,
                    "<form method=\"post\" action=\"/console/upstreams/{u}/delete\">{csrf}\
                     <button type=\"submit\" class=\"danger\" aria-label=\"Delete {n}\">Delete</button></form>",
                    u = url_part(name),
                    n = esc(name),
                    csrf = html::csrf_field(&current.csrf),
                );
            }
            out.push_str("</div></td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

pub(super) async fn health(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let current = match signed_in(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    if let Err(response) = admin_only(&current) {
        return *response;
    }
    let body = format!(
        "<div class=\"live\" data-poll=\"/console/health/fragment\" data-every=\"{POLL_MS}\" aria-live=\"polite\">{}</div>",
        health_body(&console).await
    );
    super::html(
        StatusCode::OK,
        html::page(
            &current.viewer,
            &current.csrf,
            "/console/health",
            "Reloads & health",
            &body,
        ),
    )
}

pub(super) async fn health_fragment(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Response {
    let current = match signed_in_fragment(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    if let Err(response) = admin_only(&current) {
        return *response;
    }
    super::html(StatusCode::OK, health_body(&console).await)
}

async fn health_body(console: &Console) -> String {
    let gateway = &console.door.gateway;
    let (status, ready) = ops::readiness(gateway).await;
    let mut out = String::from("<h2>Readiness (<code>/readyz</code>)</h2>");
    let state = if status == StatusCode::OK {
        "ready"
    } else {
        "not ready"
    };
    let class = if status == StatusCode::OK {
        "ok"
    } else {
        "bad"
    };
    let _ = write!(
        out,
        "<p><span class=\"badge {class}\" id=\"readiness\">{state}</span> HTTP {}</p><dl class=\"facts\">",
        status.as_u16()
    );
    if let Some(map) = ready.as_object() {
        for (key, value) in map.iter().filter(|(k, _)| *k != "ready") {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Array(items) if items.is_empty() => "none".to_owned(),
                other => other.to_string(),
            };
            let _ = write!(
                out,
                "<dt>{}</dt><dd>{}</dd>",
                esc(&key.replace('_', " ")),
                esc(&text)
            );
        }
    }
    out.push_str("</dl><h2>Config reloads</h2>");
    let reloads = console.door.app.reloads.entries();
    if reloads.is_empty() {
        out.push_str(&html::notice(
            "info",
            "No reload since the gateway started (a reload runs when the config file changes, or on SIGHUP).",
        ));
        return out;
    }
    out.push_str(
        "<table class=\"reloads\"><thead><tr><th scope=\"col\">When</th><th scope=\"col\">Trigger</th>\
         <th scope=\"col\">Outcome</th><th scope=\"col\">Detail</th></tr></thead><tbody>",
    );
    for reload in reloads.iter().rev() {
        let (class, outcome) = if reload.accepted {
            ("ok", "accepted")
        } else {
            ("bad", "rejected")
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td><span class=\"badge {class}\">{outcome}</span></td><td class=\"error\">{}</td></tr>",
            html::utc(reload.at),
            esc(reload.trigger),
            esc(&reload.detail)
        );
    }
    out.push_str("</tbody></table>");
    out
}
