//! The MCP face: toolgate as an MCP server, so that any MCP client (a
//! coding agent, a desktop assistant) calls the tools toolgate knows
//! behind the same policy, questions, inbox and audit log as the chat.
//! Streamable HTTP at `/mcp` (rmcp's `StreamableHttpService`, behind the
//! same guard, auth, body limits, metrics and traces as the other routes)
//! and stdio (`toolgate mcp`).
//!
//! A face only: `handler.rs` maps `tools/list` and `tools/call` onto the
//! run API's [`Calls`] and back, `wire.rs` holds MCP's words for the
//! core's (the approval form, a decision, a result), `sessions.rs` tells
//! the door's [`Sessions`] of older clients' sessions, `stdio.rs` serves
//! it over stdin and stdout. No gate logic lives here.

mod handler;
mod sessions;
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

use super::{ApiError, Caller, HttpState};
use crate::metrics::Metrics;
use crate::run::{Calls, Sessions};
use sessions::{OPENER, Opener, OwnedSessions, SESSION_HEADER};

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
/// process, each its opener's alone ([`Sessions`]); 2026-07-28 requests
/// need none.
pub fn routes(state: HttpState, face: McpFace, sessions: Arc<Sessions>) -> Router {
    let config = StreamableHttpServerConfig::default()
        // toolgate's own guard checks Host and Origin before any route.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(state.max_body_bytes)
        .with_sse_keep_alive(Some(state.keep_alive));
    let owned = OwnedSessions {
        local: LocalSessionManager::default(),
        sessions: sessions.clone(),
    };
    let service = StreamableHttpService::new(move || Ok(face.clone()), Arc::new(owned), config);
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            (state, sessions),
            authenticate,
        ))
}

/// Resolves the caller (API key, principal header) as every route does,
/// and hands it to the handler in the request's extensions; a request in
/// a session goes on only if the door says the session is the caller's.
async fn authenticate(
    State((state, sessions)): State<(HttpState, Arc<Sessions>)>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = match Caller::from_headers(&state, request.headers()).await {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    let principal = caller.principal.clone();
    if let Some(id) = request.headers().get(SESSION_HEADER) {
        // A header that is not text names no session of anyone's.
        let id = id.to_str().unwrap_or("");
        if let Err(e) = sessions.check(id, &principal) {
            return ApiError::Session(e).into_response();
        }
    }
    request.extensions_mut().insert(caller);
    let opener = Opener::new(&principal, state.identifies_callers());
    let (response, opener) = OPENER
        .scope(opener, async move {
            let response = next.run(request).await;
            (response, OPENER.with(|o| o.refused.take()))
        })
        .await;
    match opener {
        // rmcp answered the door's refusal as its own failure; the edge says why.
        Some(refused) => ApiError::Session(refused).into_response(),
        None => response,
    }
}
