//! The frame protocol of the AI SDK's `WebSocketChatTransport` (ai 7.x),
//! `live.dialect: ai-sdk`.
//!
//! In: `send` (a turn, as `useChat` posts it), `resume` (replay the chat's
//! turn in flight), `abort`, and toolgate's own `confirm` (a decision on an
//! open question, for clients that answer without a new turn). Out: `start`,
//! `chunk` (per-request `sequence` from 0, no gaps), `end`, `no-active`,
//! `error`. Every frame that cannot be served gets an `error` frame naming
//! why; the connection stays open.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::Message;
use futures::{Stream, StreamExt};
use opentelemetry_http::HeaderExtractor;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Farewell, Socket};
use crate::faces::{ApiError, HttpState};
use crate::metrics::Transport;
use crate::protocol::message::check_id;
use crate::protocol::sse::Event;
use crate::protocol::{ChatId, ChatRequest};
use crate::run::{AnswerKeys, Decision, OutOfBand, Refused};
use crate::run::{Run, StartIndex, Wire};

/// Requests (sends and resumes) in flight on one socket.
const MAX_REQUESTS: usize = 64;

/// A client's frame.
#[derive(Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
enum ClientFrame {
    Send {
        request_id: String,
        id: String,
        trigger: Option<String>,
        message_id: Option<String>,
        messages: Value,
        #[serde(default)]
        headers: HashMap<String, String>,
        #[serde(default)]
        body: Map<String, Value>,
    },
    Resume {
        request_id: String,
        id: String,
        #[serde(default)]
        headers: HashMap<String, String>,
    },
    Abort {
        request_id: String,
    },
    Confirm {
        confirmation_id: String,
        /// Left out only by a response (`decision: "respond"`).
        #[serde(default)]
        confirmed: Option<bool>,
        request_id: Option<String>,
        /// Judged as an answer on the chat is.
        #[serde(flatten)]
        answer: AnswerKeys,
        #[serde(default)]
        headers: HashMap<String, String>,
    },
}

/// Each request in flight on the socket, by its `requestId`: its run when
/// it is this instance's (another instance's turn cannot be aborted here).
type Requests = HashMap<String, (Option<Arc<Run>>, JoinHandle<()>)>;

/// The requests of one socket.
#[derive(Default)]
pub(super) struct Session {
    requests: Requests,
}

impl Session {
    pub(super) async fn text(&mut self, socket: &Socket, text: &str) {
        self.requests.retain(|_, (_, task)| !task.is_finished());
        if let Err((id, why)) = frame(socket, text, &mut self.requests).await {
            socket.say(error(&id, &why));
        }
    }

    pub(super) fn busy(&mut self) -> bool {
        self.requests.retain(|_, (_, task)| !task.is_finished());
        !self.requests.is_empty()
    }

    pub(super) fn end(self) {
        for (_, (_, task)) in self.requests {
            task.abort();
        }
    }
}

pub(super) fn binary(socket: &Socket) {
    socket.say(error(
        "",
        "binary frames are not part of the protocol; send JSON text",
    ));
}

pub(super) fn over_budget(socket: &Socket, text: &str) {
    let why = format!(
        "more than {} frames a second; this one was dropped",
        socket.state.live.frames_per_sec
    );
    socket.say(error(&request_id(text), &why));
}

/// The `error` frame said before the socket closes on its own.
pub(super) fn farewell(state: &HttpState, why: Farewell) -> Message {
    let why = match why {
        Farewell::Idle => format!("closing a socket idle for {} s", state.live.idle.as_secs()),
        Farewell::Broken => format!(
            "closing the socket: a frame over {} bytes or outside the WebSocket protocol",
            state.max_body_bytes
        ),
        Farewell::NoKey => format!(
            "closing the socket: no frame named a valid API key within {} s",
            state.live.key_deadline.as_secs()
        ),
        Farewell::KeylessFrame => format!(
            "closing the socket: a frame over {} bytes before one named a valid API key",
            state.live.keyless_frame_bytes
        ),
    };
    error("", &why)
}

/// Serves one frame; the error frame's `(requestId, errorText)` otherwise.
async fn frame(
    socket: &Socket,
    text: &str,
    requests: &mut Requests,
) -> Result<(), (String, String)> {
    let (state, outbox) = (&socket.state, &socket.outbox);
    let value: Value = serde_json::from_str(text)
        .map_err(|e| (String::new(), format!("not a JSON frame: {e}")))?;
    let id = value
        .get("requestId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let parsed: ClientFrame = serde_json::from_value(value)
        .map_err(|e| (id.clone(), format!("not a frame of this protocol: {e}")))?;
    let fail = |e: ApiError| (id.clone(), e.public());
    match parsed {
        ClientFrame::Send {
            request_id,
            id: chat_id,
            trigger,
            message_id,
            messages,
            headers,
            mut body,
        } => {
            check_request(requests, &request_id)?;
            let who = socket.caller(&headers).await.map_err(fail)?.into_identity();
            // The body `useChat` would post: the transport's `body` with the turn.
            body.insert("id".into(), chat_id.into());
            body.insert("messages".into(), messages);
            body.insert(
                "trigger".into(),
                trigger.unwrap_or_else(|| "submit-message".into()).into(),
            );
            if let Some(message_id) = message_id {
                body.insert("messageId".into(), message_id.into());
            }
            let bytes =
                serde_json::to_vec(&body).map_err(|e| (request_id.clone(), e.to_string()))?;
            let request = ChatRequest::from_slice(&bytes).map_err(|e| fail(e.into()))?;
            let trace = HeaderExtractor(&socket.upgrade);
            let (run, reader) = (state.turns)
                .start(
                    request,
                    state.asker(&who),
                    Wire::AiSdk,
                    Transport::Live,
                    &trace,
                )
                .await
                .map_err(|e| fail(e.into()))?;
            let task =
                state
                    .tasks
                    .spawn(forward(request_id.clone(), reader.chunks(), outbox.clone()));
            requests.insert(request_id, (Some(run), task));
        }
        ClientFrame::Resume {
            request_id,
            id: chat_id,
            headers,
        } => {
            check_request(requests, &request_id)?;
            let who = socket.caller(&headers).await.map_err(fail)?.into_identity();
            let chat_id = ChatId::parse(chat_id).map_err(|e| fail(e.into()))?;
            let resumed = (state.turns)
                .resume(
                    state.asker(&who),
                    &chat_id,
                    StartIndex::START,
                    Transport::Live,
                )
                .await
                .map_err(|e| fail(e.into()))?;
            match resumed {
                Some(resumed) => {
                    let reader = resumed.reader.chunks();
                    let task =
                        state
                            .tasks
                            .spawn(forward(request_id.clone(), reader, outbox.clone()));
                    requests.insert(request_id, (resumed.run, task));
                }
                None => {
                    let frame = json!({"type": "no-active", "requestId": request_id});
                    let _ = outbox.try_send(Message::Text(frame.to_string().into()));
                }
            }
        }
        ClientFrame::Abort { request_id } => {
            if let Some((run, task)) = requests.remove(&request_id) {
                if let Some(run) = run {
                    run.abort();
                }
                task.abort();
            }
        }
        ClientFrame::Confirm {
            confirmation_id,
            confirmed,
            request_id,
            answer,
            headers,
        } => {
            let fail = |e: ApiError| (request_id.clone().unwrap_or_default(), e.public());
            check_id("confirmationId", &confirmation_id).map_err(|e| fail(e.into()))?;
            let id = request_id.unwrap_or_else(|| confirmation_id.clone());
            let fail = |e: ApiError| (id.clone(), e.public());
            let who = socket.caller(&headers).await.map_err(fail)?.identity();
            let decision = Decision::new(confirmed, answer).map_err(|e| fail(e.into()))?;
            // An approval runs the call: the socket keeps serving meanwhile.
            let (questions, outbox) = (state.questions.clone(), outbox.clone());
            state.tasks.spawn(async move {
                let decided = questions.decide(&who, &confirmation_id, decision).await;
                let why = match decided.map(OutOfBand::decided) {
                    // A held turn shows the outcome on its own stream.
                    Ok(Ok(_)) => return,
                    Ok(Err(Refused::NotFound)) => format!("no confirmation `{confirmation_id}`"),
                    Ok(Err(refused)) => refused.to_string(),
                    Err(e) => ApiError::from(e).public(),
                };
                let _ = outbox.send(error(&id, &why)).await;
            });
        }
    }
    Ok(())
}

/// A request id a new `send` or `resume` may take.
fn check_request(requests: &Requests, request_id: &str) -> Result<(), (String, String)> {
    if requests.contains_key(request_id) {
        return Err((
            request_id.to_owned(),
            "this requestId is already in use".into(),
        ));
    }
    if requests.len() >= MAX_REQUESTS {
        let why = format!("more than {MAX_REQUESTS} requests in flight on this socket");
        return Err((request_id.to_owned(), why));
    }
    Ok(())
}

/// Writes one request's chunks to the socket: `start`, `chunk`s, `end`.
async fn forward(
    request_id: String,
    chunks: impl Stream<Item = (usize, Event)> + Send + 'static,
    outbox: mpsc::Sender<Message>,
) {
    let id = serde_json::to_string(&request_id).unwrap_or_default();
    let start = format!(r#"{{"type":"start","requestId":{id}}}"#);
    if outbox.send(Message::Text(start.into())).await.is_err() {
        return;
    }
    let mut chunks = std::pin::pin!(chunks);
    while let Some((sequence, event)) = chunks.next().await {
        let json = event.json();
        let mut frame = String::with_capacity(json.len() + id.len() + 48);
        frame.push_str(r#"{"type":"chunk","requestId":"#);
        frame.push_str(&id);
        frame.push_str(r#","sequence":"#);
        frame.push_str(&sequence.to_string());
        frame.push_str(r#","chunk":"#);
        frame.push_str(&String::from_utf8_lossy(&json));
        frame.push('}');
        if outbox.send(Message::Text(frame.into())).await.is_err() {
            return;
        }
    }
    let end = format!(r#"{{"type":"end","requestId":{id}}}"#);
    let _ = outbox.send(Message::Text(end.into())).await;
}

fn error(request_id: &str, text: &str) -> Message {
    let frame = json!({"type": "error", "requestId": request_id, "errorText": text});
    Message::Text(frame.to_string().into())
}

/// The `requestId` of a frame that may not parse.
fn request_id(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v.get("requestId")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}
