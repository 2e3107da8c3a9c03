//! `GET /livez`, `/readyz` and `/metrics`: what an orchestrator and
//! Prometheus ask. Their answers are fixed words; causes go to the log.

use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::faces::HttpState;
use crate::faces::auth::Caller;
use crate::metrics::{CONTENT_TYPE, Metrics};
use crate::run::{Health, Unready};

/// Where `/metrics` is served on the main port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsRoute {
    /// Not there (`metrics.enabled: false`, or on `metrics.bind`).
    Off,
    /// Behind `auth.apiKeys`, like the API.
    Keyed,
    /// Open to anyone who passes the guard (`metrics.public: true`).
    Public,
}

/// The process is up.
pub(in crate::faces) async fn livez() -> &'static str {
    "ok"
}

/// Whether this instance should get traffic: not draining, its store
/// answers, and every MCP server the config requires is available.
pub(in crate::faces) async fn readyz(State(state): State<HttpState>) -> Response {
    let unready = |why: &'static str| (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    if state.draining.load(Ordering::Relaxed) {
        return unready("draining");
    }
    match state.health.ready().await {
        Ok(()) => "ok".into_response(),
        Err(Unready::Store(why)) => {
            tracing::warn!("not ready: the store failed: {why}");
            unready("storage unavailable")
        }
        Err(Unready::McpServer(name)) => {
            tracing::info!(server = %name, "not ready: a required MCP server is not available");
            unready("a required MCP server is unavailable")
        }
    }
}

pub(in crate::faces) async fn metrics_public(State(state): State<HttpState>) -> Response {
    export(&state.metrics, &state.health)
}

/// The caller is resolved (and refused without a key) before anything is read.
pub(in crate::faces) async fn metrics_keyed(State(state): State<HttpState>, _: Caller) -> Response {
    export(&state.metrics, &state.health)
}

/// `/metrics`, `/livez` and `/readyz`, for `metrics.bind`: no key, no
/// other route. It keeps serving while the main port drains, so a probe
/// there sees `draining` rather than a refused connection.
pub fn metrics_routes(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics_public))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// The text exposition, with the MCP servers' states read now.
fn export(metrics: &Metrics, health: &Health) -> Response {
    metrics.mcp_servers(health.mcp_servers());
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::error!("encoding the metrics failed: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
