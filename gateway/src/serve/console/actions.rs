//! What the console changes or runs, each a POST behind the session's CSRF token and
//! the cross-site check: signing in and out, registering an OpenAPI API by URL (the
//! admin API's own import and report), refreshing and deleting one, and calling a tool
//! as a tenant (the REST call's event stream).

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use toolgate_adapters::JsonObject;

use super::auth::{self, Current, Viewer};
use super::html::{self, esc};
use super::{Console, admin_only, signed_in};
use crate::access::Caller;
use crate::serve::rest::stream::{self, Framing};
use crate::telemetry::CallTrace;

type Fields = Form<HashMap<String, String>>;

pub(super) async fn login(
    State(console): State<Arc<Console>>,
    peer: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    headers: HeaderMap,
    Form(fields): Fields,
) -> Response {
    let token = fields.get("token").map(String::as_str).unwrap_or_default();
    let address = peer.map(|axum::Extension(axum::extract::ConnectInfo(peer))| peer.ip());
    auth::login(&console, &headers, address, token).await
}

pub(super) async fn logout(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(fields): Fields,
) -> Response {
    let current = match signed_in(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    if let Err(refused) =
        auth::check_post(&current, &headers, fields.get("csrf").map(String::as_str))
    {
        return *refused;
    }
    auth::logout(&console, &current).await
}

/// A signed-in admin's POST with its CSRF form field, or the refusal.
async fn admin_post(
    console: &Console,
    headers: &HeaderMap,
    fields: &HashMap<String, String>,
) -> Result<Current, Box<Response>> {
    let current = signed_in(console, headers).await?;
    auth::check_post(&current, headers, fields.get("csrf").map(String::as_str))?;
    admin_only(&current)?;
    Ok(current)
}

/// The register form, filled with `fields` (what was just previewed or refused, so it
/// can be imported or corrected), and `result` below it.
fn register_page(current: &Current, fields: &HashMap<String, String>, result: &str) -> String {
    let value = |key: &str| esc(fields.get(key).map(String::as_str).unwrap_or_default());
    let private = if fields.get("allow_private_networks").map(String::as_str) == Some("true") {
        " checked"
    } else {
        ""
    };
    let body = format!(
        "<p class=\"lead\">Import an OpenAPI (2.0, 3.0 or 3.1) API by the URL of its spec: its operations become tools at once, for every MCP session and REST caller its tenants' patterns allow.</p>\
         <form method=\"post\" action=\"/console/register\" class=\"stack\" id=\"register\">{csrf}\
         <label for=\"reg-name\">Name (the tools' prefix)</label>\
         <input id=\"reg-name\" name=\"name\" value=\"{name}\" required pattern=\"[A-Za-z0-9_\\-]{{1,32}}\" aria-describedby=\"reg-name-hint\">\
         <p class=\"hint\" id=\"reg-name-hint\">Letters, digits, <code>_</code> and <code>-</code>; tools are named <code>&lt;name&gt;__&lt;operation&gt;</code>.</p>\
         <label for=\"reg-url\">Spec URL</label>\
         <input id=\"reg-url\" name=\"spec_url\" value=\"{url}\" type=\"url\" required placeholder=\"https://api.example.com/openapi.json\">\
         <label for=\"reg-base\">Base URL (optional: the spec's first server otherwise)</label>\
         <input id=\"reg-base\" name=\"base_url\" value=\"{base}\" type=\"url\">\
         <div class=\"check\"><input id=\"reg-private\" name=\"allow_private_networks\" type=\"checkbox\" value=\"true\"{private}>\
         <label for=\"reg-private\">The API is on a private network or this machine (allow private addresses)</label></div>\
         <div class=\"actions\"><button type=\"submit\" name=\"action\" value=\"preview\">Preview</button>\
         <button type=\"submit\" name=\"action\" value=\"import\">Import</button></div></form>{result}",
        csrf = html::csrf_field(&current.csrf),
        name = value("name"),
        url = value("spec_url"),
        base = value("base_url"),
    );
    html::page(
        &current.viewer,
        &current.csrf,
        "/console/register",
        "Register an API",
        &body,
    )
}

pub(super) async fn register_form(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Response {
    let current = match signed_in(&console, &headers).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    if let Err(response) = admin_only(&current) {
        return *response;
    }
    super::html(StatusCode::OK, register_page(&current, &HashMap::new(), ""))
}

pub(super) async fn register(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(fields): Fields,
) -> Response {
    let current = match admin_post(&console, &headers, &fields).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    let text = |key: &str| {
        fields
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let mut openapi = json!({"spec_url": text("spec_url").unwrap_or_default()});
    if let Some(base) = text("base_url") {
        openapi["base_url"] = json!(base);
    }
    if text("allow_private_networks").as_deref() == Some("true") {
        openapi["allow_private_networks"] = json!(true);
    }
    let registration = json!({"name": text("name").unwrap_or_default(), "openapi": openapi});
    let body = serde_json::to_vec(&registration).unwrap_or_default();
    let (status, answer, verb) = if text("action").as_deref() == Some("preview") {
        let (status, answer) = console.admin.preview(&body).await;
        (
            status,
            answer,
            "would be imported (preview: nothing changed)",
        )
    } else {
        let (status, answer) = console.admin.register(&body).await;
        (status, answer, "imported")
    };
    let result = report(status, &answer, verb);
    // After an import the form starts empty again; after a preview or a refusal it
    // keeps what was entered.
    let kept = if verb == "imported" && status.is_success() {
        HashMap::new()
    } else {
        fields.clone()
    };
    super::html(
        status_for_page(status),
        register_page(&current, &kept, &result),
    )
}

/// A page answering a failed change is still a page: the status says how it went.
fn status_for_page(status: StatusCode) -> StatusCode {
    if status.is_success() {
        StatusCode::OK
    } else {
        status
    }
}

/// The import report: tools, skipped and repaired operations with reasons, names
/// shortened and renamed, and what the tools cost a model in tokens.
fn report(status: StatusCode, answer: &Value, verb: &str) -> String {
    if !status.is_success() {
        let message = answer["error"]["message"].as_str().unwrap_or("failed");
        return format!(
            "<section id=\"report\" aria-labelledby=\"report-h\"><h2 id=\"report-h\">Not {verb}</h2>{}</section>",
            html::notice("bad", message)
        );
    }
    let name = answer["name"].as_str().unwrap_or_default();
    let r = &answer["report"];
    let mut out = format!(
        "<section id=\"report\" aria-labelledby=\"report-h\"><h2 id=\"report-h\">{} {verb}</h2>",
        esc(name)
    );
    let imported = answer.get("catalog_tokens").is_some();
    let number = |v: &Value| v.as_u64().unwrap_or(0);
    let _ = write!(
        out,
        "<dl class=\"facts\"><dt>Spec version</dt><dd>{}</dd><dt>Operations</dt><dd>{}</dd>\
         <dt>Imported</dt><dd id=\"imported\">{}</dd><dt>Skipped</dt><dd id=\"skipped\">{}</dd>\
         <dt>Repaired</dt><dd>{}</dd><dt>Names shortened</dt><dd>{}</dd>\
         {}</dl>",
        esc(r["spec_version"].as_str().unwrap_or("?")),
        number(&r["operations"]),
        number(&r["imported"]),
        r["skipped"].as_array().map_or(0, Vec::len),
        r["repaired"].as_array().map_or(0, Vec::len),
        r["shortened"].as_array().map_or(0, Vec::len),
        if answer.get("catalog_tokens").is_some() {
            format!(
                "<dt>Token cost (as listed)</dt><dd id=\"catalog-tokens\">{}</dd>\
                 <dt>Token cost (whole)</dt><dd>{}</dd>",
                number(&answer["catalog_tokens"]),
                number(&answer["definition_costs"]["full_tokens"]),
            )
        } else {
            format!(
                "<dt>Token cost (approximate)</dt><dd id=\"catalog-tokens\">{}</dd>",
                number(&r["approx_tokens"])
            )
        },
    );
    let reasons = |title: &str, list: &Value, out: &mut String| {
        let Some(items) = list.as_array().filter(|i| !i.is_empty()) else {
            return;
        };
        let _ = write!(out, "<h3>{title}</h3><ul class=\"plain\">");
        for item in items.iter().take(500) {
            let _ = write!(
                out,
                "<li><code>{}</code>: {}</li>",
                esc(item["operation"].as_str().unwrap_or_default()),
                esc(item["reason"].as_str().unwrap_or_default())
            );
        }
        out.push_str("</ul>");
    };
    reasons("Skipped, with reasons", &r["skipped"], &mut out);
    reasons("Repaired", &r["repaired"], &mut out);
    if let Some(shortened) = r["shortened"].as_array().filter(|s| !s.is_empty()) {
        out.push_str("<h3>Names shortened</h3><ul class=\"plain\">");
        for pair in shortened.iter().take(500) {
            let _ = write!(
                out,
                "<li><code>{}</code> → <code>{}</code></li>",
                esc(pair[0].as_str().unwrap_or_default()),
                esc(pair[1].as_str().unwrap_or_default())
            );
        }
        out.push_str("</ul>");
    }
    if let Some(tools) = answer["tools"].as_array() {
        out.push_str("<h3>Tools</h3><ul class=\"plain\" id=\"imported-tools\">");
        for tool in tools.iter().filter_map(Value::as_str).take(500) {
            if imported {
                let _ = write!(
                    out,
                    "<li><a href=\"/console/tools/{}\">{}</a></li>",
                    html::url_part(tool),
                    esc(tool)
                );
            } else {
                let _ = write!(out, "<li><code>{}</code></li>", esc(tool));
            }
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>");
    out
}

pub(super) async fn refresh(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Form(fields): Fields,
) -> Response {
    let current = match admin_post(&console, &headers, &fields).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    let (status, answer) = console.admin.refresh(name).await;
    let body = report(status, &answer, "refreshed");
    super::html(
        status_for_page(status),
        html::page(&current.viewer, &current.csrf, "/console", "Refresh", &body),
    )
}

pub(super) async fn delete(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Form(fields): Fields,
) -> Response {
    let current = match admin_post(&console, &headers, &fields).await {
        Ok(current) => current,
        Err(response) => return *response,
    };
    let (status, answer) = console.admin.remove(&name).await;
    let body = if status.is_success() {
        html::notice("ok", &format!("{name} was removed."))
    } else {
        html::notice(
            "bad",
            answer["error"]["message"].as_str().unwrap_or("failed"),
        )
    };
    let body = format!("{body}<p><a href=\"/console\">Back to the upstreams</a></p>");
    super::html(
        status_for_page(status),
        html::page(&current.viewer, &current.csrf, "/console", "Delete", &body),
    )
}

fn json_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": "refused", "message": message}})),
    )
        .into_response()
}

/// `POST /console/tools/{name}/call` `{tenant, arguments}` with `X-CSRF-Token`: the
/// call made as that tenant (a tenant's own session: only as itself), answered with
/// the REST tool-call event stream (start, progress, complete, result).
pub(super) async fn call(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let current = match auth::current(&console, &headers).await {
        Ok(Some(current)) => current,
        Ok(None) => {
            return json_error(
                StatusCode::UNAUTHORIZED,
                "your console session ended: sign in again",
            );
        }
        Err(unavailable) => {
            return json_error(StatusCode::SERVICE_UNAVAILABLE, &unavailable.to_string());
        }
    };
    if let Err(refused) = auth::check_post(&current, &headers, None) {
        return *refused;
    }
    let request: JsonObject = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(_) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                "expected {\"tenant\": …, \"arguments\": {…}}",
            );
        }
    };
    let arguments = match request.get("arguments") {
        None | Some(Value::Null) => JsonObject::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => return json_error(StatusCode::BAD_REQUEST, "`arguments` must be a JSON object"),
    };
    let gateway = &console.door.gateway;
    let policy = gateway.policy();
    let asked = request
        .get("tenant")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // A tenant's session calls as its key would: its tenant, as the user it names
    // (whose own account a per-user upstream is called with); the admin as the
    // tenant picked, as a whole.
    let (tenant, subject) = match &current.viewer {
        Viewer::Tenant(tenant, subject) if asked.is_empty() || asked == tenant.name => {
            (tenant.clone(), subject.clone())
        }
        Viewer::Tenant(..) => {
            return json_error(
                StatusCode::FORBIDDEN,
                "a tenant's console calls only as that tenant",
            );
        }
        Viewer::Admin => {
            let name = if policy.is_open() {
                crate::policy::OPEN_TENANT
            } else {
                asked
            };
            match policy.tenant(name) {
                Some(tenant) => (tenant, None),
                None => return json_error(StatusCode::BAD_REQUEST, "no tenant of that name"),
            }
        }
    };
    // The call counts against the tenant's rate limit, as its own calls do.
    if gateway.count_request(&tenant).await.is_err() {
        return json_error(
            StatusCode::TOO_MANY_REQUESTS,
            "the tenant is over its rate limit (or the shared limiter is unavailable): try again shortly",
        );
    }
    let caller = Caller::new(tenant, subject);
    // The browser's headers (its cookie among them) stay out of the call.
    let trace = CallTrace::start("console", &HeaderMap::new(), None);
    let ctx = trace.call_context(gateway.config().call_timeout);
    stream::respond(
        console.door.clone(),
        caller,
        name,
        arguments,
        ctx,
        Framing::Sse,
    )
}
