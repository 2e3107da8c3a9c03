//! HTTP: routes, the SSE body, and the one place errors become statuses.

pub mod demo;
mod error;
pub mod guard;
mod live;
mod protect;
pub mod runs;
mod sse;

pub use live::LiveLimits;
pub use protect::protect;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;

pub use error::ApiError;

use crate::agent::Agent;
use crate::protocol::{
    ChatRequest, ClientVersion, ConfirmationFlow, ConfirmationProtocol, RequestError,
};

/// The principal when no principal header is configured.
pub const ANONYMOUS: &str = "anonymous";

/// A resolved API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub principal: String,
    pub sha256: [u8; 32],
    pub admin: bool,
}

#[derive(Clone)]
pub struct HttpState {
    pub agent: Arc<Agent>,
    pub keep_alive: Duration,
    pub max_body_bytes: usize,
    pub principal_header: Option<String>,
    /// Empty when keys are off.
    pub api_keys: Arc<Vec<ApiKey>>,
    pub protocol: ConfirmationProtocol,
    pub flow: ConfirmationFlow,
    pub client_version: ClientVersion,
    pub runs: Arc<runs::Runs>,
    pub live: LiveLimits,
}

pub fn router(state: HttpState) -> Router {
    let limit = state.max_body_bytes;
    Router::new()
        .route("/stream", post(stream))
        .route("/api/chat", post(stream))
        .route("/live", get(live::live))
        .route("/stream/{chat_id}/stream", get(resume))
        .route("/api/chat/{chat_id}/stream", get(resume))
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/tools", get(tools))
        .route("/api/approvals", get(approvals))
        .route("/api/audit", get(audit))
        .route("/api/confirmations", get(open_confirmations))
        .route("/api/confirmations/{id}", post(decide))
        .route("/api/approvals/{id}", axum::routing::delete(revoke))
        .layer(DefaultBodyLimit::max(limit))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

async fn stream(
    State(state): State<HttpState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let principal = principal(&state, &headers)?;
    let body =
        body.map_err(|rejection| ApiError::from_body_rejection(rejection, state.max_body_bytes))?;
    let request = ChatRequest::from_slice(&body)?;
    let (_, reader) = start(&state, request, &principal)?;
    let chunks = reader.chunks().map(|(_, json)| json);
    Ok(sse::response(chunks, state.keep_alive).into_response())
}

/// Starts the turn for `request` and subscribes to it.
fn start(
    state: &HttpState,
    request: ChatRequest,
    principal: &str,
) -> Result<(Arc<runs::Run>, runs::Subscription), ApiError> {
    let chat_id = request.chat_id.clone();
    let (waiting, waits) = tokio::sync::watch::channel(false);
    let chunks = turn(state, request, principal.to_owned(), waiting)?;
    let owner = runs::Owner {
        principal,
        chat_id: &chat_id,
        capped: principal != ANONYMOUS,
    };
    Ok(state.runs.start(owner, chunks, waits)?)
}

/// The turn for `request`, in the confirmation protocol and flow it asks
/// for, its chunks fitted to the client's `ai` version.
fn turn(
    state: &HttpState,
    request: ChatRequest,
    principal: String,
    waiting: tokio::sync::watch::Sender<bool>,
) -> Result<futures::stream::BoxStream<'static, crate::protocol::UiChunk>, ApiError> {
    let protocol = request.options.protocol.unwrap_or(state.protocol);
    let flow = request.options.flow.unwrap_or(state.flow);
    let client = request
        .options
        .client_version
        .unwrap_or(state.client_version);
    if protocol == ConfirmationProtocol::AiSdk && !client.has_approvals() {
        return Err(RequestError::Invalid(format!(
            "native approvals (protocol ai-sdk) need ai 6 or later, not {client}; use protocol adk"
        ))
        .into());
    }
    tracing::debug!(chat = %request.chat_id, messages = request.messages.len(), "turn");
    Ok(state
        .agent
        .clone()
        .turn(request, principal, protocol, flow, waiting)
        .flat_map(move |chunk| futures::stream::iter(client.fit(chunk)))
        .boxed())
}

/// `useChat({resume: true})`: the turn in flight in this chat, replayed
/// from its `start` chunk; 204 when there is none.
async fn resume(
    State(state): State<HttpState>,
    headers: HeaderMap,
    axum::extract::Path(chat_id): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    let principal = principal(&state, &headers)?;
    let reader = state
        .runs
        .get(&principal, &chat_id)
        .and_then(|run| run.resume());
    match reader {
        Some(reader) => {
            let chunks = reader.chunks().map(|(_, json)| json);
            Ok(sse::response(chunks, state.keep_alive).into_response())
        }
        None => Ok(axum::http::StatusCode::NO_CONTENT.into_response()),
    }
}

async fn tools(State(state): State<HttpState>, headers: HeaderMap) -> Result<Response, ApiError> {
    principal(&state, &headers)?;
    Ok(axum::Json(state.agent.gate.inventory()).into_response())
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuditQuery {
    chat_id: Option<String>,
    /// Operators only: another principal's log.
    principal: Option<String>,
    /// Milliseconds since the Unix epoch.
    #[serde(default)]
    since: u64,
}

/// The caller's audit log as JSON lines, oldest first.
async fn audit(
    State(state): State<HttpState>,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<AuditQuery>,
) -> Result<Response, ApiError> {
    let principal = subject(&state, &headers, query.principal)?;
    let events = state
        .agent
        .gate
        .audit_log(
            &principal,
            query.chat_id.as_deref(),
            query.since,
            AUDIT_PAGE,
        )
        .await?;
    let mut lines = String::new();
    for event in events {
        lines.push_str(&serde_json::to_string(&event).unwrap_or_default());
        lines.push('\n');
    }
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
        lines,
    )
        .into_response())
}

/// Most audit events one request returns; page on with `since`.
const AUDIT_PAGE: usize = 10_000;

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChatQuery {
    chat_id: String,
}

/// The caller's open questions in a chat, for a page that reloads.
async fn open_confirmations(
    State(state): State<HttpState>,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<ChatQuery>,
) -> Result<Response, ApiError> {
    let principal = principal(&state, &headers)?;
    let scope = crate::confirm::Scope {
        chat_id: query.chat_id,
        principal,
    };
    let gate = &state.agent.gate;
    let now = gate.now_ms();
    let open: Vec<serde_json::Value> = gate
        .open(&scope)
        .await?
        .into_iter()
        .map(|issued| {
            serde_json::json!({
                "id": issued.id,
                "chatId": issued.chat_id,
                "protocol": match issued.protocol {
                    ConfirmationProtocol::Adk => "adk",
                    ConfirmationProtocol::AiSdk => "ai-sdk",
                },
                "originalFunctionCall": {"id": issued.call.id, "name": issued.call.name, "args": issued.call.args},
                "hint": issued.hint,
                "expiresAtMs": issued.expires_at_ms,
                // A browser's clock may differ from the server's.
                "expiresInMs": issued.expires_at_ms.saturating_sub(now),
                "editable": gate.editable(&issued.call.name),
            })
        })
        .collect();
    Ok(axum::Json(open).into_response())
}

/// A decision made through the API: `{approved, reason?, payload?,
/// remember?, approveNext?, editedArgs?}`, the keys judged as on the chat.
#[derive(serde::Deserialize)]
struct DecisionBody {
    approved: bool,
    #[serde(flatten)]
    keys: crate::confirm::AnswerKeys,
    /// Whatever else came: refused, so a misspelt key is not dropped.
    #[serde(flatten)]
    unknown: serde_json::Map<String, serde_json::Value>,
}

async fn decide(
    State(state): State<HttpState>,
    headers: HeaderMap,
    axum::extract::Path(id): axum::extract::Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let principal = principal(&state, &headers)?;
    crate::protocol::message::check_id("confirmation id", &id)?;
    let body =
        body.map_err(|rejection| ApiError::from_body_rejection(rejection, state.max_body_bytes))?;
    let decision = decision(&body)?;
    match state
        .agent
        .gate
        .decide_out_of_band(&principal, &id, decision)
        .await?
    {
        crate::confirm::OutOfBand::Decided(outcome) => {
            Ok(axum::Json(serde_json::json!({"id": id, "outcome": outcome})).into_response())
        }
        crate::confirm::OutOfBand::Conflict(why) => Err(ApiError::Conflict(why)),
        crate::confirm::OutOfBand::Invalid(why) => Err(RequestError::Invalid(why).into()),
        crate::confirm::OutOfBand::NotFound => {
            Err(ApiError::NotFound(format!("no confirmation `{id}`")))
        }
    }
}

/// The decision in an API body.
fn decision(body: &[u8]) -> Result<crate::confirm::Decision, RequestError> {
    let body: DecisionBody =
        serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))?;
    if let Some(key) = body.unknown.keys().next() {
        return Err(RequestError::Invalid(format!("unknown key `{key}`")));
    }
    Ok(crate::confirm::Decision::new(body.approved, body.keys))
}

#[derive(serde::Deserialize)]
struct PrincipalQuery {
    /// Operators only: another principal's.
    principal: Option<String>,
}

/// The caller's remembered approvals (an operator's: anyone's).
async fn approvals(
    State(state): State<HttpState>,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<PrincipalQuery>,
) -> Result<Response, ApiError> {
    let principal = subject(&state, &headers, query.principal)?;
    let list = state.agent.gate.remembered(&principal).await?;
    Ok(axum::Json(list).into_response())
}

/// Revokes one of the caller's remembered approvals: 204, or 404.
async fn revoke(
    State(state): State<HttpState>,
    headers: HeaderMap,
    axum::extract::Path(id): axum::extract::Path<String>,
    axum::extract::Query(query): axum::extract::Query<PrincipalQuery>,
) -> Result<Response, ApiError> {
    let (caller, _) = caller(&state, &headers)?;
    let principal = subject(&state, &headers, query.principal)?;
    let by = if caller == principal {
        "user".to_owned()
    } else {
        format!("operator {caller}")
    };
    match state.agent.gate.revoke(&principal, &id, by).await? {
        true => Ok(axum::http::StatusCode::NO_CONTENT.into_response()),
        false => Err(ApiError::NotFound(format!("no remembered approval `{id}`"))),
    }
}

/// Who is asking: the principal of the API key when keys are configured,
/// else the trusted proxy's header, else `anonymous`.
fn principal(state: &HttpState, headers: &HeaderMap) -> Result<String, ApiError> {
    caller(state, headers).map(|(principal, _)| principal)
}

/// The principal whose records an operator's request reads: their own, or
/// with `?principal=` (operators only; anyone else gets 403) another's.
fn subject(
    state: &HttpState,
    headers: &HeaderMap,
    asked: Option<String>,
) -> Result<String, ApiError> {
    let (principal, admin) = caller(state, headers)?;
    match asked {
        Some(other) if other != principal && !admin => Err(ApiError::Forbidden),
        Some(other) => Ok(other),
        None => Ok(principal),
    }
}

/// The caller's principal, and whether their key is an operator's.
fn caller(state: &HttpState, headers: &HeaderMap) -> Result<(String, bool), ApiError> {
    if !state.api_keys.is_empty() {
        use sha2::Digest;
        use subtle::ConstantTimeEq;
        let key = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(ApiError::NoKey)?;
        let hash: [u8; 32] = sha2::Sha256::digest(key.trim().as_bytes()).into();
        // Every key is compared, in constant time.
        let found = state.api_keys.iter().fold(None, |found, key| {
            if bool::from(key.sha256.ct_eq(&hash)) {
                Some(key)
            } else {
                found
            }
        });
        return found
            .map(|key| (key.principal.clone(), key.admin))
            .ok_or(ApiError::BadKey);
    }
    let Some(name) = &state.principal_header else {
        return Ok((ANONYMOUS.to_owned(), false));
    };
    // Two values mean the proxy appended to one the client sent: trust neither.
    if headers.get_all(name).iter().count() > 1 {
        return Err(ApiError::Unauthorized(name.clone()));
    }
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(|v| (v.to_owned(), false))
        .ok_or_else(|| ApiError::Unauthorized(name.clone()))
}
