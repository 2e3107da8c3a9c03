//! The MCP face: toolgate as an MCP server, so that any MCP client (a
//! coding agent, a desktop assistant) calls the tools toolgate knows
//! behind the same policy, questions, inbox and audit log as the chat.
//! Streamable HTTP at `/mcp` (rmcp's `StreamableHttpService`, behind the
//! same guard, auth, body limits, metrics and traces as the other routes)
//! and stdio (`toolgate mcp`).
//!
//! A face only: `handler.rs` maps `tools/list` and `tools/call` onto the
//! run API's [`Calls`] and back, `wire.rs` holds MCP's words for the
//! core's (the approval form, a decision, a result), `stdio.rs` serves it
//! over stdin and stdout. No gate logic lives here.

mod handler;
mod stdio;
mod wire;

pub use stdio::{StdioError, serve_stdio};

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::{Caller, HttpState};
use crate::metrics::Metrics;
use crate::run::Calls;

/// One MCP server over the run API: every session and request gets a clone.
#[derive(Debug, Clone)]
pub struct McpFace {
    calls: Calls,
    /// 2026-07-28: how long a retry waits for a decision made elsewhere.
    retry_wait: Duration,
    /// Older sessions: how long a call waits for one (and for an answer
    /// to the approval form).
    hold: Duration,
    metrics: Metrics,
    /// stdio's principal; over HTTP each request's authenticated caller.
    principal: Option<Arc<str>>,
}

impl McpFace {
    pub fn new(calls: Calls, retry_wait: Duration, hold: Duration, metrics: Metrics) -> Self {
        Self {
            calls,
            retry_wait,
            hold,
            metrics,
            principal: None,
        }
    }

    /// Every call is `principal`'s (stdio: the process has one user).
    pub fn as_principal(mut self, principal: &str) -> Self {
        self.principal = Some(principal.into());
        self
    }
}

/// `/mcp` (`POST`, `GET`, `DELETE`), each request's caller resolved as the
/// chat's are before rmcp sees it. Sessions of older clients live in this
/// process; 2026-07-28 requests need none.
pub fn routes(state: HttpState, face: McpFace) -> Router {
    let config = StreamableHttpServerConfig::default()
        // toolgate's own guard checks Host and Origin before any route.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(state.max_body_bytes)
        .with_sse_keep_alive(Some(state.keep_alive));
    let service = StreamableHttpService::new(
        move || Ok(face.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(state, authenticate))
}

/// Resolves the caller (API key, principal header) as every route does,
/// and hands it to the handler in the request's extensions.
async fn authenticate(
    State(state): State<HttpState>,
    mut request: Request,
    next: Next,
) -> Response {
    match Caller::from_headers(&state, request.headers()).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}
