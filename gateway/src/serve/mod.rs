//! Thin surfaces over the gateway core: MCP over streamable HTTP at `/mcp` and over
//! stdio (one implementation, [`mcp`], for both), the ops endpoints, the admin
//! API and the plain-HTTP function surface.
//!
//! Every HTTP request passes the [`guard`] first (Host, Origin, CORS, JSON bodies)
//! and is served by the [`listener`] (timeouts, connection cap). The web [`console`]
//! at `/console` reads the same data through the same functions.

pub mod admin;
mod admission;
pub mod auth;
pub mod bridge;
pub mod console;
pub mod guard;
pub mod listener;
pub mod mcp;
pub mod oauth;
pub mod ops;
pub mod rest;
pub mod stdio;

use std::sync::Arc;

use axum::Router;
use axum::routing::any;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::credentials::Authenticator;
use crate::gateway::Gateway;

/// The HTTP application: `/mcp` plus the ops endpoints, the admin API, the console and
/// the REST surface, behind the [`guard`].
pub fn router(app: Arc<App>, authenticator: Authenticator, stop: CancellationToken) -> Router {
    Front::new(app, authenticator, stop).router
}

/// The HTTP application as the listener serves it: [`router`], with `/mcp` and
/// `POST /v1/tools/{name}/call` answered without the router's layers. They cost about
/// 4 % of a tool call's instructions (a boxed future and a moved request per layer, the
/// path matched again, headers copied by extractors) and more of its CPU; these two
/// need none of them, only the [`guard`], which they meet here through the same two
/// functions the router's middleware calls, and the same handlers the router routes to.
#[derive(Clone)]
pub struct Front {
    router: Router,
    mcp: Arc<McpFront>,
    gateway: Arc<Gateway>,
}

impl Front {
    /// The HTTP surfaces of `app`, admitting callers with `authenticator` (see
    /// [`Authenticator::for_config`]; only the HTTP surfaces need one, so `check` and
    /// `tools` never fetch a JWKS). `stop` ends their background work.
    pub fn new(app: Arc<App>, authenticator: Authenticator, stop: CancellationToken) -> Front {
        let gateway = app.gateway.clone();
        let door = Arc::new(auth::FrontDoor {
            gateway: gateway.clone(),
            app: app.clone(),
            authenticator,
        });
        let mcp = Arc::new(McpFront {
            door: door.clone(),
            sessions: mcp::McpSessions::new(&app, stop),
            max_body: gateway.config().max_request_body_bytes,
        });
        let mcp_routes = Router::new()
            .route("/mcp", any(mcp_front))
            .with_state(mcp.clone());
        let admin = admin::Admin::new(app.registry.clone());
        let router = ops::router(door.clone())
            .merge(admin::router(admin.clone()))
            .merge(console::router(door.clone(), admin))
            .merge(oauth::router(app.upstream_auth.clone()))
            .merge(rest::router(door))
            .merge(mcp_routes)
            // After every route (a fallback set before a merge would panic it).
            .fallback(rest::no_such_endpoint)
            .method_not_allowed_fallback(rest::method_not_allowed)
            .layer(axum::middleware::from_fn_with_state(
                gateway.clone(),
                guard::check,
            ));
        Front {
            router,
            mcp,
            gateway,
        }
    }
}

impl tower_service::Service<axum::extract::Request> for Front {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::Either<
        futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>,
        axum::routing::future::RouteFuture<std::convert::Infallible>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        // The router is always ready, and so is `/mcp`.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::extract::Request) -> Self::Future {
        let path = request.uri().path();
        let fast = if path == "/mcp" {
            Fast::Mcp
        } else if request.method() == http::Method::POST
            && let Some(name) = rest::call_path_name(path)
        {
            Fast::RestCall(name)
        } else {
            return futures::future::Either::Right(self.router.call(request));
        };
        let (mcp, gateway) = (self.mcp.clone(), self.gateway.clone());
        futures::future::Either::Left(boxed_in_place(move || async move {
            Ok(match guard::screen(&gateway, &request) {
                guard::Screened::Answer(response) => response,
                guard::Screened::Pass { cors } => {
                    let response = match fast {
                        Fast::Mcp => serve_mcp(&mcp, request).await,
                        Fast::RestCall(name) => {
                            rest::serve_call(mcp.door.clone(), name, request).await
                        }
                    };
                    guard::finish(response, cors)
                }
            })
        }))
    }
}

/// Boxes a request's future with its memory allocated first, so the future is written
/// into the box where it will live. `Box::pin(future)` built this one (8.8 KB: it holds
/// every state of the call path, nested) on the stack and then copied it into the box,
/// a copy on every request; allocating first lets the compiler write the few fields an
/// unstarted future has straight into the heap.
#[inline(always)]
fn boxed_in_place<F>(make: impl FnOnce() -> F) -> futures::future::BoxFuture<'static, F::Output>
where
    F: std::future::Future + Send + 'static,
{
    let place: Box<std::mem::MaybeUninit<F>> = Box::new_uninit();
    let boxed: Box<F> = Box::write(place, make());
    Box::into_pin(boxed)
}

/// The requests [`Front`] answers without the router: the ones on every tool call.
enum Fast {
    Mcp,
    /// `POST /v1/tools/{name}/call`, with the decoded name.
    RestCall(String),
}

/// What `/mcp` needs.
struct McpFront {
    door: Arc<auth::FrontDoor>,
    sessions: mcp::McpSessions,
    max_body: usize,
}

/// `/mcp` as a route of the [`router`].
async fn mcp_front(
    axum::extract::State(front): axum::extract::State<Arc<McpFront>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    serve_mcp(&front, request).await
}

/// Everything `/mcp` does: refuse oversized bodies, admit the caller and check its
/// session, answer ([`mcp`]), and make any error a JSON-RPC error.
async fn serve_mcp(front: &McpFront, request: axum::extract::Request) -> axum::response::Response {
    if let Some(refused) = mcp::protocol_errors::refuse_oversized(request.headers(), front.max_body)
    {
        return refused;
    }
    let response = match auth::admit_mcp(&front.door, request.headers()).await {
        Err(refused) => mcp::error::McpError::turned_away(refused).response(),
        Ok(admitted) => front.sessions.route_trusted(request, admitted).await,
    };
    mcp::protocol_errors::as_jsonrpc_error(response).await
}
