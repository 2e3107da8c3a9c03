//! Read-only records: `GET /api/tools` (the tools and MCP servers) and
//! `GET /api/audit` (the caller's audit log).

use axum::extract::{Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

use crate::faces::auth::Caller;
use crate::faces::{ApiError, HttpState};
use crate::run::Whose;

/// Most audit events one request returns; page on with `since`.
const AUDIT_PAGE: usize = 10_000;

pub(in crate::faces) async fn tools(State(state): State<HttpState>, _: Caller) -> Response {
    axum::Json(state.questions.inventory()).into_response()
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::faces) struct AuditQuery {
    chat_id: Option<String>,
    /// Milliseconds since the Unix epoch.
    #[serde(default)]
    since: u64,
}

/// The caller's audit log as JSON lines, oldest first.
pub(in crate::faces) async fn audit(
    State(state): State<HttpState>,
    whose: Whose,
    Query(query): Query<AuditQuery>,
) -> Result<Response, ApiError> {
    let chat_id = query.chat_id.as_deref();
    let events = state
        .questions
        .audit(&whose, chat_id, query.since, AUDIT_PAGE)
        .await?;
    let mut lines = String::new();
    for event in events {
        lines.push_str(&serde_json::to_string(&event).unwrap_or_default());
        lines.push('\n');
    }
    Ok(([(CONTENT_TYPE, "application/x-ndjson")], lines).into_response())
}
