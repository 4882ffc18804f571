//! The query parameters of the REST routes: what `/openapi.json` documents for a route
//! is what it reads, and anything else is refused (400 `unknown_query_parameter`).
//!
//! Ignoring them would answer as if nothing were wrong: a misspelt `format` lists
//! OpenAI schemas, a call's `session` sent in the query instead of its body runs the
//! call outside the session (a tool expanded there is then "not found"). The body's
//! members are held to the same rule (`invalid_body` for one a call does not read).

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::{Method, StatusCode, Uri};

use super::{error, openapi};

/// Route layer of the REST router: refuses a query parameter the matched route does
/// not read. Routes the document does not describe (`/openapi.json` itself) pass.
pub(super) async fn known_only(route: MatchedPath, request: Request, next: Next) -> Response {
    match refuse_unknown(request.method(), route.as_str(), request.uri()) {
        Some(refused) => refused,
        None => next.run(request).await,
    }
}

/// The refusal of the first query parameter of `uri` that `method route` (a route as
/// the router and the document write it: `/v1/tools/{name}/call`) does not read.
pub(super) fn refuse_unknown(method: &Method, route: &str, uri: &Uri) -> Option<Response> {
    let query = uri.query()?;
    let known = openapi::query_parameters(method, route)?;
    let (unknown, _) = url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| !known.contains(&name.as_ref()))?;
    // Said back bounded: the name is the caller's.
    let shown: String = unknown.chars().take(64).collect();
    let reads = if known.is_empty() {
        "reads none".to_owned()
    } else {
        format!("reads {}", known.join(", "))
    };
    Some(error(
        StatusCode::BAD_REQUEST,
        "unknown_query_parameter",
        format!(
            "unknown query parameter {shown:?}: {method} {route} {reads} (what else it \
             takes goes in its path or JSON body; see /openapi.json)"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(method: Method, route: &str, uri: &str) -> Option<String> {
        let uri: Uri = uri.parse().expect("a URI");
        refuse_unknown(&method, route, &uri).map(|r| r.status().to_string())
    }

    #[test]
    fn a_route_reads_what_its_document_lists_and_nothing_else() {
        let list = "/v1/tools";
        assert_eq!(refused(Method::GET, list, "/v1/tools"), None);
        assert_eq!(
            refused(
                Method::GET,
                list,
                "/v1/tools?format=gemini&strict=false&session=s"
            ),
            None
        );
        assert!(refused(Method::GET, list, "/v1/tools?fromat=gemini").is_some());
        // Percent-encoded names are decoded before they are compared.
        assert_eq!(refused(Method::GET, list, "/v1/tools?%66ormat=mcp"), None);
        let call = "/v1/tools/{name}/call";
        assert!(refused(Method::POST, call, "/v1/tools/a__b/call?session=s").is_some());
        assert_eq!(refused(Method::POST, call, "/v1/tools/a__b/call"), None);
        assert_eq!(
            refused(
                Method::GET,
                "/v1/tools/{name}/schema",
                "/x?path=/inputSchema&session=s"
            ),
            None
        );
        // Not in the document: not held to it.
        assert_eq!(
            refused(Method::GET, "/openapi.json", "/openapi.json?v=2"),
            None
        );
    }
}
