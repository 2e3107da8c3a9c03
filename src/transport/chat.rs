//! `POST /stream` and `POST /api/chat` (a turn, streamed as SSE), and their
//! `GET …/{chatId}/stream` resumes: the SSE face over [`crate::run::Turns`].

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use opentelemetry_http::HeaderExtractor;

use super::auth::Caller;
use super::{ApiError, HttpState, sse};
use crate::metrics::Transport;
use crate::protocol::ChatRequest;

pub(super) async fn stream(
    State(state): State<HttpState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body =
        body.map_err(|rejection| ApiError::from_body_rejection(rejection, state.max_body_bytes))?;
    let request = ChatRequest::from_slice(&body)?;
    let asker = state.asker(&caller.principal);
    let trace = HeaderExtractor(&headers);
    let (_, reader) = (state.turns)
        .start(request, asker, Transport::Sse, &trace)
        .await?;
    let chunks = reader.chunks().map(|(_, event)| event);
    Ok(sse::response(chunks, state.keep_alive).into_response())
}

/// `useChat({resume: true})`: the turn in flight in this chat (on this
/// instance, or with a shared store on any), replayed from its `start`
/// chunk; 204 when there is none, as the AI SDK expects.
pub(super) async fn resume(
    State(state): State<HttpState>,
    caller: Caller,
    Path(chat_id): Path<String>,
) -> Result<Response, ApiError> {
    crate::protocol::message::check_id("the chat id", &chat_id)?;
    match (state.turns)
        .resume(&caller.principal, &chat_id, Transport::Sse)
        .await?
    {
        Some(resumed) => {
            let chunks = resumed.reader.chunks().map(|(_, event)| event);
            Ok(sse::response(chunks, state.keep_alive).into_response())
        }
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}
