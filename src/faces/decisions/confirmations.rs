//! Decisions outside the chat: `POST /api/confirmations/{id}` (a
//! decision; the open questions are listed by `inbox.rs`), and the
//! remembered approvals, `GET /api/approvals` and `DELETE /api/approvals/{id}`,
//! and the narrowed grants, `GET /api/grants` and `DELETE /api/grants/{id}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::faces::auth::Caller;
use crate::faces::{ApiError, HttpState, WholeBody};
use crate::protocol::RequestError;
use crate::run::{AnswerKeys, Decision, Outcome, Revoked, Standing, Whose};

/// A decision made through the API: `{approved, reason?, payload?,
/// remember?, approveNext?, editedArgs?}`, or `{decision: "respond",
/// output}`, the keys judged as on the chat.
#[derive(serde::Deserialize)]
struct DecisionBody {
    /// Left out only by a response.
    #[serde(default)]
    approved: Option<bool>,
    #[serde(flatten)]
    keys: AnswerKeys,
    /// Whatever else came: refused, so a misspelt key is not dropped.
    #[serde(flatten)]
    unknown: serde_json::Map<String, serde_json::Value>,
}

pub(in crate::faces) async fn decide(
    State(state): State<HttpState>,
    caller: Caller,
    Path(id): Path<String>,
    WholeBody(body): WholeBody,
) -> Result<Response, ApiError> {
    crate::protocol::message::check_id("confirmation id", &id)?;
    let decision = decision(&body)?;
    let who = caller.identity();
    let outcome = (state.questions.decide(&who, &id, decision))
        .await?
        .decided()
        .map_err(|refused| ApiError::refused(refused, &id))?;
    Ok(axum::Json(serde_json::json!({"id": id, "outcome": outcome})).into_response())
}

/// `GET /api/confirmations/{id}`: one question and where it stands (open,
/// being decided, or how it ended), for the user who asked or someone who
/// may decide it; 404 for anyone else. A card whose question was decided
/// elsewhere learns how.
pub(in crate::faces) async fn one(
    State(state): State<HttpState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    crate::protocol::message::check_id("confirmation id", &id)?;
    let Some(question) = state.questions.show(&caller.identity(), &id).await? else {
        return Err(ApiError::NotFound(format!("no confirmation `{id}`")));
    };
    let issued = &question.issued;
    let (status, outcome) = match &question.standing {
        Standing::Open => ("open", None),
        Standing::Deciding => ("deciding", None),
        Standing::Expired => ("decided", Some(Outcome::Expired)),
        Standing::Decided(outcome) => ("decided", Some(outcome.clone())),
    };
    let mut body = serde_json::json!({
        "id": issued.id,
        "chatId": issued.chat_id,
        "principal": issued.principal,
        "originalFunctionCall": {"id": issued.call.id, "name": issued.call.name, "args": issued.call.args},
        "hint": issued.hint,
        "expiresAtMs": issued.expires_at_ms,
        "fingerprint": issued.fingerprint,
        "status": status,
    });
    if let Some(outcome) = outcome {
        body["outcome"] = serde_json::json!(outcome);
        // Who decided and how toolgate knew them (the audit log's `approver`).
        if let Some(approver) = &question.approver {
            body["approver"] = serde_json::json!(approver);
        }
    }
    Ok(axum::Json(body).into_response())
}

/// The decision in an API body.
fn decision(body: &[u8]) -> Result<Decision, RequestError> {
    let body: DecisionBody =
        serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))?;
    if let Some(key) = body.unknown.keys().next() {
        return Err(RequestError::Invalid(format!("unknown key `{key}`")));
    }
    Decision::new(body.approved, body.keys)
}

/// The caller's remembered approvals (an operator's: anyone's).
pub(in crate::faces) async fn approvals(
    State(state): State<HttpState>,
    whose: Whose,
) -> Result<Response, ApiError> {
    Ok(axum::Json(state.questions.remembered(&whose).await?).into_response())
}

/// Revokes one of the caller's remembered approvals: 204, or 404.
pub(in crate::faces) async fn revoke(
    State(state): State<HttpState>,
    Path(id): Path<String>,
    whose: Whose,
) -> Result<Response, ApiError> {
    crate::protocol::message::check_id("approval id", &id)?;
    match state.questions.revoke(&whose, &id).await? {
        true => Ok(StatusCode::NO_CONTENT.into_response()),
        false => Err(ApiError::NotFound(format!("no remembered approval `{id}`"))),
    }
}

/// The caller's narrowed grants, each with its state (an operator's:
/// anyone's).
pub(in crate::faces) async fn grants(
    State(state): State<HttpState>,
    whose: Whose,
) -> Result<Response, ApiError> {
    Ok(axum::Json(state.questions.grants(&whose).await?).into_response())
}

/// Revokes one of the caller's narrowed grants: 204; 404 when they have
/// none by that id; 409 when it ended already.
pub(in crate::faces) async fn revoke_grant(
    State(state): State<HttpState>,
    Path(id): Path<String>,
    whose: Whose,
) -> Result<Response, ApiError> {
    crate::protocol::message::check_id("grant id", &id)?;
    match state.questions.revoke_grant(&whose, &id).await? {
        Revoked::Now => Ok(StatusCode::NO_CONTENT.into_response()),
        Revoked::NotFound => Err(ApiError::NotFound(format!("no grant `{id}`"))),
        Revoked::Ended(ended) => Err(ApiError::Conflict(format!(
            "grant `{id}` is already {}",
            ended.word()
        ))),
    }
}
