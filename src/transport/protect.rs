//! The guard as a layer: every request passes `Guard::check` before routing,
//! and a refusal leaves through the one error edge, `ApiError`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::guard::{Facts, Guard};

/// `router` behind the guard, with request bodies read under `body_read`
/// (the longest silence while a body is read).
pub fn protect(router: Router, guard: Guard, body_read: Duration) -> Router {
    router
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(body_read))
        .layer(axum::middleware::from_fn_with_state(Arc::new(guard), check))
}

async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    match guard.check(&Facts::of(&request)) {
        Ok(()) => next.run(request).await,
        Err(refused) => ApiError::from(refused).into_response(),
    }
}
