//! `POST /stream` and `POST /api/chat` (a turn, streamed as SSE), and their
//! `GET …/{chatId}/stream` resumes.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch;

use super::auth::Caller;
use super::{ANONYMOUS, ApiError, HttpState, runs, sse};
use crate::confirm::GateError;
use crate::metrics::{Metrics, Transport};
use crate::protocol::{ChatRequest, ConfirmationProtocol, RequestError, UiChunk};

pub(super) async fn stream(
    State(state): State<HttpState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body =
        body.map_err(|rejection| ApiError::from_body_rejection(rejection, state.max_body_bytes))?;
    let request = ChatRequest::from_slice(&body)?;
    let (_, reader) = start(&state, request, &caller.principal, Transport::Sse)?;
    let chunks = reader.chunks().map(|(_, json)| json);
    Ok(sse::response(chunks, state.keep_alive).into_response())
}

/// Starts the turn for `request` and subscribes to it.
pub(super) fn start(
    state: &HttpState,
    request: ChatRequest,
    principal: &str,
    transport: Transport,
) -> Result<(Arc<runs::Run>, runs::Subscription), ApiError> {
    let chat_id = request.chat_id.clone();
    let (waiting, waits) = watch::channel(false);
    let chunks = turn(state, request, principal.to_owned(), waiting)?;
    let chunks = measured(&state.metrics, transport, chunks);
    let owner = runs::Owner {
        principal,
        chat_id: &chat_id,
        capped: principal != ANONYMOUS,
    };
    Ok(state.runs.start(owner, chunks, waits)?)
}

/// `chunks`, counted: open while streaming, the first chunk of content
/// timed, and how the turn ended once it is dropped (no allocation per chunk).
fn measured(
    metrics: &Metrics,
    transport: Transport,
    chunks: BoxStream<'static, UiChunk>,
) -> BoxStream<'static, UiChunk> {
    let mut watch = metrics.turn(transport);
    chunks
        .inspect(move |chunk| match chunk {
            UiChunk::Finish { .. } => watch.ended("finished"),
            UiChunk::Error { .. } => watch.ended("error"),
            UiChunk::Abort { .. } => watch.ended("aborted"),
            UiChunk::Start { .. }
            | UiChunk::StartStep
            | UiChunk::FinishStep
            | UiChunk::MessageMetadata { .. } => {}
            _ => watch.content(),
        })
        .boxed()
}

/// The turn for `request`, in the confirmation protocol and flow it asks
/// for, its chunks fitted to the client's `ai` version.
fn turn(
    state: &HttpState,
    request: ChatRequest,
    principal: String,
    waiting: watch::Sender<bool>,
) -> Result<BoxStream<'static, UiChunk>, ApiError> {
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

/// `useChat({resume: true})`: the turn in flight in this chat (on this
/// instance, or with a shared store on any), replayed from its `start`
/// chunk; 204 when there is none, as the AI SDK expects.
pub(super) async fn resume(
    State(state): State<HttpState>,
    caller: Caller,
    Path(chat_id): Path<String>,
) -> Result<Response, ApiError> {
    let resumed = state
        .runs
        .resume(&caller.principal, &chat_id)
        .await
        .map_err(GateError::from)?;
    match resumed {
        Some(resumed) => {
            let chunks = resumed.reader.chunks().map(|(_, json)| json);
            Ok(sse::response(chunks, state.keep_alive).into_response())
        }
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}
