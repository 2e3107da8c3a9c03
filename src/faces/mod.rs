//! The faces, side by side, each a folder that maps its wire to the door
//! (`run`) and nothing else, and the router that serves them:
//!
//! - `ai_sdk/`: the AI SDK's UI message stream, `http.rs` over SSE
//!   (`/stream`, `/api/chat` and their resumes) and `live/` over a
//!   WebSocket (`/live`, in the AI SDK's frames and the seed dialect);
//! - `ag_ui/`: AG-UI 1.0 runs at `/ag-ui` (`request.rs` the run's input,
//!   `resume.rs` its interrupts, `wire/` its events);
//! - `mcp/`: toolgate as an MCP server (`/mcp` and stdio);
//! - `decisions/`: the decisions API (`confirmations.rs`), the inbox and
//!   its live feed (`inbox.rs`, `feeds.rs`), a signed link's page
//!   (`links/`), tools and the audit log (`records.rs`);
//! - `edge/`: what stands before every face: `protect.rs`, `guard/`,
//!   `cors.rs` (Host, Origin, bodies), `auth/` (who is asking), `error.rs`
//!   (the one place errors become statuses), `sse.rs` (an SSE response),
//!   `health.rs` (liveness, readiness, `/metrics`), `demo.rs`.

mod ag_ui;
mod ai_sdk;
mod decisions;
mod edge;
pub mod mcp;

// Each face's files, and the edge's, by the names the router and the
// faces call them.
use ag_ui as agui;
use ai_sdk::{http as chat, live};
use decisions::{confirmations, feeds, inbox, links, records};
use edge::{auth, cors, error, health, protect, sse};
pub use edge::{demo, guard};

pub use auth::oidc::{Oidc, OidcSettings};
pub use auth::{ApiKey, Caller, checked_url};
pub use error::ApiError;
pub use health::{MetricsRoute, metrics_routes};
pub use live::{LiveDialect, LiveLimits};
pub use protect::{BodyTimes, WholeBody, protect};

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use tokio_util::task::TaskTracker;
use tower::Layer;
use tower_http::trace::TraceLayer;

use crate::metrics::Metrics;
use crate::notify::Links;
use crate::run::{Asker, Health, Questions, Turns};

/// The principal when no principal header is configured.
pub const ANONYMOUS: &str = "anonymous";

/// What every route reads, behind one `Arc`: a request's extractors clone
/// it several times, and a clone of the fields took an atomic count for
/// each and a copy of the principal header's name.
#[derive(Clone)]
pub struct HttpState(Arc<Http>);

impl From<Http> for HttpState {
    fn from(http: Http) -> Self {
        Self(Arc::new(http))
    }
}

impl std::ops::Deref for HttpState {
    type Target = Http;

    fn deref(&self) -> &Http {
        &self.0
    }
}

/// [`HttpState`]'s fields.
pub struct Http {
    pub keep_alive: Duration,
    pub max_body_bytes: usize,
    pub principal_header: Option<String>,
    /// Empty when keys are off.
    pub api_keys: Arc<Vec<ApiKey>>,
    /// `auth.oidc`: the issuer whose bearer tokens name callers.
    pub oidc: Option<Arc<Oidc>>,
    /// The run API every face adapts its wire to.
    pub turns: Arc<Turns>,
    /// The questions people decide through the decisions API and links.
    pub questions: Arc<Questions>,
    pub live: LiveLimits,
    /// The server's tasks beyond the requests (a socket's writer and
    /// forwarders, out-of-band decisions); shutdown waits for them.
    pub tasks: TaskTracker,
    /// The key of the notification links; `None` (no notifier): no link is valid.
    pub links: Option<Links>,
    /// The app's metrics (`/metrics`; turns count through [`Turns`]).
    pub metrics: Metrics,
    /// Whether and how `/metrics` is on this router.
    pub metrics_route: MetricsRoute,
    /// Set when the server starts draining: `/readyz` then answers 503.
    pub draining: Arc<AtomicBool>,
    /// Readiness and the MCP servers' states (`/readyz`, `/metrics`).
    pub health: Health,
    /// The inbox's SSE streams, capped, and the listings they share.
    pub inbox_feeds: Arc<InboxFeeds>,
}

/// The inbox's live listings (`/api/confirmations/events`).
pub type InboxFeeds = feeds::Feeds<inbox::InboxKey, inbox::Listed>;

impl Http {
    /// Whether callers are told apart (API keys or a principal header):
    /// then every principal, `anonymous` included, has the per-user caps.
    pub fn identifies_callers(&self) -> bool {
        self.bearer() || self.principal_header.is_some()
    }

    /// Whether callers present a bearer credential (API keys, OIDC tokens).
    pub fn bearer(&self) -> bool {
        !self.api_keys.is_empty() || self.oidc.is_some()
    }

    /// `who` asking the run API for a turn.
    pub fn asker<'a>(&self, who: &'a crate::identity::Identity) -> Asker<'a> {
        Asker {
            who,
            told_apart: self.identifies_callers(),
        }
    }
}

pub fn router(state: HttpState) -> Router {
    let limit = state.max_body_bytes;
    let router = match state.metrics_route {
        MetricsRoute::Off => Router::new(),
        MetricsRoute::Keyed => Router::new().route("/metrics", get(health::metrics_keyed)),
        MetricsRoute::Public => Router::new().route("/metrics", get(health::metrics_public)),
    };
    let routes = router
        .route("/stream", post(chat::stream))
        .route("/api/chat", post(chat::stream))
        .route("/ag-ui", post(agui::run).get(agui::capabilities))
        .route("/live", get(live::live))
        .route("/stream/{chat_id}/stream", get(chat::resume))
        .route("/api/chat/{chat_id}/stream", get(chat::resume))
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/api/tools", get(records::tools))
        .route("/api/audit", get(records::audit))
        .route("/api/approvals", get(confirmations::approvals))
        .route("/api/approvals/{id}", delete(confirmations::revoke))
        .route("/api/grants", get(confirmations::grants))
        .route("/api/grants/{id}", delete(confirmations::revoke_grant))
        .route("/api/confirmations", get(inbox::open))
        .route("/api/confirmations/events", get(inbox::events))
        .route(
            "/api/confirmations/{id}",
            post(confirmations::decide).get(confirmations::one),
        )
        .route(
            "/confirmations/link/{token}",
            get(links::page).post(links::decide),
        )
        .with_state(state);
    // Around the routes as one service, as `protect` does and for the same
    // reason: `Router::layer` wraps each route, and every request clones them.
    let service = tower::ServiceBuilder::new()
        .layer(DefaultBodyLimit::max(limit))
        .service(routes);
    // tower-http's request trace, only when its `debug` lines are logged
    // (`RUST_LOG=tower_http=debug`): it times every body frame (two clock
    // reads a frame) and wraps every response body, and without it a
    // failed request is still logged, by `ApiError` at the edge.
    match tracing::enabled!(target: "tower_http::trace", tracing::Level::DEBUG) {
        true => Router::new().fallback_service(TraceLayer::new_for_http().layer(service)),
        false => Router::new().fallback_service(service),
    }
}
