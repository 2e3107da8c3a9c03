//! The guard as a layer: every request passes `Guard::check` before routing,
//! and a refusal leaves through the one error edge, `ApiError`. Behind it,
//! CORS for the origins the guard allows (`cors.rs`), before any handler.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::cors::{self, Cors};
use super::guard::{Facts, Guard};

/// `router` behind the guard, then CORS (when the guard allows another
/// origin), with request bodies read under `body_read` (the longest silence
/// while a body is read).
pub fn protect(router: Router, guard: Guard, body_read: Duration) -> Router {
    let guard = Arc::new(guard);
    let router = router.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(body_read));
    // Inside the guard: the Host check comes first; a preflight (an OPTIONS,
    // no body) passes the guard's other checks and is answered here.
    let router = match Cors::new(guard.clone()) {
        Some(cors) => router.layer(axum::middleware::from_fn_with_state(
            Arc::new(cors),
            cors::answer,
        )),
        None => router,
    };
    router.layer(axum::middleware::from_fn_with_state(guard, check))
}

async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    match guard.check(&Facts::of(&request)) {
        Ok(()) => next.run(request).await,
        Err(refused) => ApiError::from(refused).into_response(),
    }
}
