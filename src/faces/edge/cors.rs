//! CORS for the pages `cors.allowedOrigins` names: a page on another origin
//! (a dev server on `localhost:3000`, an app on its own domain) needs a
//! browser's preflight answered before it may POST JSON or send a key, and
//! `Access-Control-Allow-Origin` on the answer before it may read it.
//!
//! Only a request whose `Origin` the guard allows goes through
//! `tower_http`'s `CorsLayer`, which answers preflights itself (before any
//! handler, so before authentication). Any other request gets no CORS
//! header: the browser keeps the page from reading the answer, and the
//! guard has already refused its state-changing ones. With no origin
//! configured there is no layer at all. The guard runs first: a preflight
//! to a host toolgate does not serve is refused like any request.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use tower::{Layer, ServiceExt};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::faces::guard::Guard;

/// The request headers a page may send: the JSON body's type, the API key
/// in either form, and `user-agent`, which the `ai` 5.0 clients' transport
/// sets on every request (Chromium drops it; other browsers ask for it).
///
/// `auth.principalHeader` is not among them, on purpose: it is the trusted
/// proxy's to set, replacing any a client sent. A page that names it
/// itself fails its preflight rather than choosing its own principal
/// through a proxy that forgot to replace it.
pub const ALLOWED_HEADERS: [HeaderName; 4] = [
    header::CONTENT_TYPE,
    header::AUTHORIZATION,
    HeaderName::from_static("x-api-key"),
    header::USER_AGENT,
];

/// The methods toolgate's routes take.
pub const ALLOWED_METHODS: [Method; 4] =
    [Method::GET, Method::POST, Method::DELETE, Method::OPTIONS];

/// The response headers a page may read besides the safelisted ones: the
/// UI message stream's marker.
pub const EXPOSED_HEADERS: [HeaderName; 1] =
    [HeaderName::from_static("x-vercel-ai-ui-message-stream")];

/// How long a browser may keep a preflight's answer.
const MAX_AGE: Duration = Duration::from_secs(600);

/// The CORS layer, for the origins the guard allows.
pub(in crate::faces) struct Cors {
    guard: Arc<Guard>,
    layer: CorsLayer,
}

impl Cors {
    /// `None` when the guard allows no origin besides toolgate's own.
    pub(in crate::faces) fn new(guard: Arc<Guard>) -> Option<Self> {
        if !guard.cross_origin() {
            return None;
        }
        let allows = guard.clone();
        let layer = CorsLayer::new()
            .allow_origin(AllowOrigin::predicate(move |origin, _| {
                origin
                    .to_str()
                    .is_ok_and(|origin| allows.allows_origin(origin))
            }))
            .allow_methods(ALLOWED_METHODS)
            .allow_headers(ALLOWED_HEADERS)
            .expose_headers(EXPOSED_HEADERS)
            .max_age(MAX_AGE);
        Some(Self { guard, layer })
    }

    /// Whether a request comes from an allowed page: one `Origin`, allowed.
    fn allowed(&self, request: &Request) -> bool {
        let mut origins = request.headers().get_all(header::ORIGIN).iter();
        match (origins.next(), origins.next()) {
            (Some(origin), None) => origin
                .to_str()
                .is_ok_and(|origin| self.guard.allows_origin(origin)),
            _ => false,
        }
    }
}

/// The middleware: an allowed page's request through the `CorsLayer` (a
/// preflight is answered there), any other on to the routes. Every answer
/// varies by `Origin`, for caches.
pub(in crate::faces) async fn answer(
    State(cors): State<Arc<Cors>>,
    request: Request,
    next: Next,
) -> Response {
    if cors.allowed(&request) {
        return match cors.layer.layer(next).oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    let mut response = next.run(request).await;
    response
        .headers_mut()
        .append(header::VARY, HeaderValue::from_static("origin"));
    response
}
