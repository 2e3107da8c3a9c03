//! `POST /stream` and `POST /api/chat` (a turn, streamed as SSE), and their
//! `GET …/{chatId}/stream` resumes: the SSE face over [`crate::run::Turns`].
//!
//! The resume is also `WorkflowChatTransport`'s (`@ai-sdk/workflow`): a
//! turn's response names its run in `x-workflow-run-id` (the chat id: the
//! transport's own reconnect after a reload asks by chat id at the same
//! URL, and a chat has one resumable turn at a time), and
//! `?startIndex=N` reads the turn from chunk N (negative: back from the
//! tail, which `x-workflow-stream-tail-index` names).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use opentelemetry_http::HeaderExtractor;
use serde::Deserialize;

use crate::faces::auth::Caller;
use crate::faces::{ApiError, HttpState, WholeBody, sse};
use crate::metrics::Transport;
use crate::protocol::{ChatId, ChatRequest, RequestError};
use crate::run::{StartIndex, Wire};

/// The run a streamed turn's response belongs to (its chat id).
const RUN_ID: HeaderName = HeaderName::from_static("x-workflow-run-id");
/// The number of the last chunk written when a resume began.
const TAIL_INDEX: HeaderName = HeaderName::from_static("x-workflow-stream-tail-index");

pub(in crate::faces) async fn stream(
    State(state): State<HttpState>,
    caller: Caller,
    headers: HeaderMap,
    WholeBody(body): WholeBody,
) -> Result<Response, ApiError> {
    let request = ChatRequest::from_slice(&body)?;
    let run_id = run_id(&request.chat_id);
    let who = caller.into_identity();
    let asker = state.asker(&who);
    let trace = HeaderExtractor(&headers);
    let (_, reader) = (state.turns)
        .start(request, asker, Wire::AiSdk, Transport::Sse, &trace)
        .await?;
    let mut response = sse::log_response(reader, state.keep_alive);
    if let Some(run_id) = run_id {
        response.headers_mut().insert(RUN_ID, run_id);
    }
    Ok(response)
}

/// The run id a turn of `chat` is named by: the chat id, which a
/// [`ChatId`] keeps to characters a header carries unchanged (a raw UTF-8
/// header is read back as Latin-1, another id, whose resume finds nothing).
/// `None` cannot happen; if it did, the turn would go unnamed rather than
/// misnamed.
fn run_id(chat: &ChatId) -> Option<HeaderValue> {
    HeaderValue::from_str(chat.as_str()).ok()
}

/// Where a resume starts: `?startIndex=N`, the turn's start without it.
#[derive(Deserialize)]
pub(in crate::faces) struct ResumeQuery {
    #[serde(rename = "startIndex")]
    start_index: Option<i64>,
}

/// `useChat({resume: true})`: the turn in flight in this chat (on this
/// instance, or with a shared store on any), replayed from its `start`
/// chunk, or from chunk `startIndex` (`WorkflowChatTransport`); 204 when
/// there is none or nothing is left of it, as both clients expect.
pub(in crate::faces) async fn resume(
    State(state): State<HttpState>,
    caller: Caller,
    Path(chat_id): Path<String>,
    query: Result<Query<ResumeQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let chat_id = ChatId::parse(chat_id)?;
    let Query(query) = query.map_err(|_| {
        RequestError::Invalid("startIndex must be a whole number of chunks".to_owned())
    })?;
    let at = query.start_index.map_or(StartIndex::START, StartIndex);
    let who = caller.into_identity();
    match (state.turns)
        .resume(state.asker(&who), &chat_id, at, Transport::Sse)
        .await?
    {
        Some(resumed) => {
            let tail = resumed.written.map(|n| n as i64 - 1);
            let chunks = resumed.chunks().map(|(_, event)| event);
            let mut response = sse::response(chunks, state.keep_alive);
            if let Some(tail) = tail {
                response
                    .headers_mut()
                    .insert(TAIL_INDEX, HeaderValue::from(tail));
            }
            Ok(response)
        }
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}
