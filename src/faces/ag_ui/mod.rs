//! The AG-UI 1.0 face: `POST /ag-ui` runs a turn from a `RunAgentInput`
//! and streams it as AG-UI events over SSE; `GET /ag-ui` says what the
//! agent can do (`humanInTheLoop`). A face only, over the same run API
//! and gate as `/stream`:
//!
//! - `request.rs` reads the request (the thread's messages as the UI history
//!   a turn takes, the resume entries);
//! - `resume.rs` checks a resume against the store and decides each answer
//!   through the gate's one pipeline, as the decisions API does;
//! - `wire.rs` holds AG-UI's words: the turn's UI chunks as events, a
//!   question as a tool-bound interrupt, a payload as a decision;
//! - `writer.rs` is what the turn writes its chunks into: each said at once
//!   in AG-UI's events, framed as SSE (the turn's log holds them as they go
//!   out; no other request reads this run).
//!
//! A question ends the run (`RUN_FINISHED` with the interrupts, after the
//! snapshots); the next run on the thread carries `resume`, and the turn
//! it starts reports each outcome as the call's `TOOL_CALL_RESULT`.

mod request;
mod resume;
mod wire;
mod writer;

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use opentelemetry_http::HeaderExtractor;
use serde_json::Value;

use super::auth::Caller;
use super::{ApiError, HttpState, WholeBody, sse};
use crate::identity::Identity;
use crate::metrics::Transport;
use crate::protocol::sse::Event;
use crate::run::Wire;
use request::RunAgentInput;
use resume::{Refused, ResumeError};
use writer::AgUiWriter;

/// `GET /ag-ui`: the agent's capabilities.
pub(super) async fn capabilities() -> Json<Value> {
    Json(wire::capabilities())
}

/// `POST /ag-ui`: one run. A body that is not a `RunAgentInput` is a 400;
/// once the stream has started every refusal is a `RUN_ERROR`.
pub(super) async fn run(
    State(state): State<HttpState>,
    caller: Caller,
    headers: HeaderMap,
    WholeBody(body): WholeBody,
) -> Result<Response, ApiError> {
    let input = RunAgentInput::from_slice(&body)?;
    let keep_alive = state.keep_alive;
    let events = events(state, caller.identity(), headers, input);
    Ok(sse::response_without_done(events, keep_alive).into_response())
}

fn frame(event: &Value) -> Event {
    Event::framing(event.to_string().as_bytes())
}

/// The run's events: `RUN_STARTED`, the resume's decisions, the turn's
/// events, then the snapshots and `RUN_FINISHED`, or a `RUN_ERROR`.
fn events(
    state: HttpState,
    who: Identity,
    headers: HeaderMap,
    input: RunAgentInput,
) -> impl Stream<Item = Event> + Send + 'static {
    async_stream::stream! {
        let (thread, run) = (input.thread_id.clone(), input.run_id.clone());
        yield frame(&wire::run_started(&thread, &run));
        let turns = state.turns.clone();
        let questions = &state.questions;
        let asked = match &input.resume {
            Some(entries) if !entries.is_empty() => resume::resume(questions, &who, &thread, entries).await,
            _ => resume::nothing_pending(questions, &who, &thread).await.map(|()| HashMap::new()),
        };
        let asked = match asked {
            Ok(asked) => asked,
            Err(e) => {
                yield frame(&refusal(e));
                return;
            }
        };
        let request = match input.request(&asked) {
            Ok(request) => request,
            Err(e) => {
                yield frame(&refusal_of(ApiError::from(e)));
                return;
            }
        };
        let trace = HeaderExtractor(&headers);
        let asker = state.asker(&who);
        let (writer, tail) = AgUiWriter::new(&run);
        let wire = Wire::Own(Box::new(writer));
        let started = turns.start(request, asker, wire, Transport::Agui, &trace).await;
        let reader = match started {
            Ok((_, reader)) => reader,
            Err(e) => {
                yield frame(&refusal_of(ApiError::from(e)));
                return;
            }
        };
        // The turn's events, as the writer framed them.
        let mut chunks = std::pin::pin!(reader.chunks());
        while let Some((_, event)) = chunks.next().await {
            yield event;
        }
        // The turn has let go of its writer: it ended, or was stopped.
        let Ok(tail) = tail.await else { return };
        if tail.ended == wire::Ended::Failed {
            return;
        }
        let interrupts = match resume::interrupts(questions, &who, &thread, &tail.asked).await {
            Ok(interrupts) => interrupts,
            Err(e) => {
                yield frame(&refusal_of(ApiError::from(e)));
                return;
            }
        };
        if !interrupts.is_empty() {
            for snapshot in wire::snapshots(input.state.as_ref(), &input.messages, &tail.messages) {
                yield frame(&snapshot);
            }
        }
        yield frame(&wire::run_finished(&thread, &run, &tail.ended, interrupts));
    }
}

/// A resume refused, as `RUN_ERROR`.
fn refusal(e: ResumeError) -> Value {
    match e {
        ResumeError::Refused(Refused { code, message }) => wire::run_error(code, &message),
        ResumeError::Core(e) => refusal_of(ApiError::from(e)),
    }
}

/// An error of the run API as `RUN_ERROR`, in the fixed text its status
/// would carry (never internals).
fn refusal_of(e: ApiError) -> Value {
    e.log();
    let message = e.to_string();
    let code = match e.status().as_u16() {
        400..=499 => wire::REFUSED,
        _ => wire::TURN_ERROR,
    };
    wire::run_error(code, &message)
}
