//! The dialect of the `adk-stream-protocol` app's WebSocket transport,
//! `live.dialect: adk-stream-protocol`.
//!
//! In (JSON text, `version: "1.0"` when given): `message` (a turn: the body
//! `POST /stream` takes, flat, or under `data` in the app's older form),
//! `ping`, `interrupt`; `tool_result`, `audio_control` and `audio_chunk` are
//! refused with a plain JSON `{"type":"error","errorText"}` frame. Out: each
//! chunk its own text frame, exactly its SSE bytes (`data: {…}\n\n`), every
//! turn ended by `data: [DONE]\n\n`; `{"type":"pong","timestamp"}`. One
//! turn at a time: a new `message` supersedes the one in flight, whose
//! frames stop (the client closed that stream when it sent this one). A
//! frame that is not the dialect's closes the socket with 1002.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::{Message, Utf8Bytes, close_code};
use bytes::Bytes;
use futures::StreamExt;
use opentelemetry_http::HeaderExtractor;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Close, Farewell, Socket};
use crate::faces::ApiError;
use crate::metrics::Transport;
use crate::protocol::sse::{DONE, SseEncoder};
use crate::protocol::{ChatRequest, RequestError, UiChunk};
use crate::run::{Run, Subscription, Wire};

pub(super) const BINARY: Close = Close::new(close_code::UNSUPPORTED, "binary frames are not taken");
const NOT_JSON: Close = Close::new(close_code::PROTOCOL, "frame is not JSON");
const UNKNOWN_TYPE: Close = Close::new(close_code::PROTOCOL, "unknown frame type");
const MALFORMED: Close = Close::new(close_code::PROTOCOL, "malformed frame");

/// Every frame type of the dialect; any other closes the socket.
const TYPES: [&str; 6] = [
    "message",
    "ping",
    "interrupt",
    "tool_result",
    "audio_control",
    "audio_chunk",
];

/// The one version of the dialect.
const VERSION: &str = "1.0";

/// A client's frame, once its `type` is known to be one of [`TYPES`].
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Frame {
    Message {
        /// The older form: the body under `data`.
        data: Option<Map<String, Value>>,
        /// The flat form: the body's own keys (`id`, `messages`, `trigger`,
        /// `messageId`), with `timestamp`, which the body parser ignores.
        #[serde(flatten)]
        body: Map<String, Value>,
    },
    Ping {
        /// Echoed as it came (`null` when missing).
        #[serde(default)]
        timestamp: Value,
    },
    Interrupt {
        #[serde(rename = "reason")]
        _reason: Option<String>,
    },
    ToolResult {
        #[serde(rename = "toolCallId")]
        _tool_call_id: String,
        #[serde(rename = "result")]
        _result: Map<String, Value>,
    },
    AudioControl {
        #[serde(rename = "action")]
        _action: AudioAction,
    },
    AudioChunk {
        #[serde(rename = "chunk")]
        _chunk: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum AudioAction {
    Start,
    Stop,
}

/// The turn a socket forwards: its run (none for a refused one) and the
/// task writing its frames.
struct Turn {
    run: Option<Arc<Run>>,
    task: JoinHandle<()>,
}

/// One socket of the dialect.
pub(super) struct Session {
    turn: Option<Turn>,
    /// The chat of a `message` that names none (the older form), minted
    /// when first needed: one per socket, as the app's server kept one
    /// session per connection.
    chat_id: Option<String>,
    /// Audio is refused once per socket, not once per chunk.
    audio_refused: bool,
}

impl Session {
    pub(super) fn new() -> Self {
        Self {
            turn: None,
            chat_id: None,
            audio_refused: false,
        }
    }

    pub(super) async fn text(&mut self, socket: &Socket, text: &str) -> Result<(), Close> {
        match parse(text)? {
            Frame::Message { data, body, .. } => {
                let body = match data {
                    None if body.get("messages").is_some_and(Value::is_array) => body,
                    Some(data)
                        if !body.contains_key("messages")
                            && data.get("messages").is_some_and(Value::is_array) =>
                    {
                        data
                    }
                    _ => return Err(MALFORMED),
                };
                self.message(socket, body).await;
            }
            Frame::Ping { timestamp, .. } => {
                // Built by hand: the key order is the app's.
                let pong = format!(r#"{{"type":"pong","timestamp":{timestamp}}}"#);
                socket.say(Message::Text(pong.into()));
            }
            Frame::Interrupt { .. } => {
                // The turn ends; its reader then writes `[DONE]`.
                if let Some(run) = self.turn.as_ref().and_then(|turn| turn.run.as_ref()) {
                    run.abort();
                }
            }
            Frame::ToolResult { .. } => socket.say(refusal(
                "tool_result frames are not taken: a client-side tool's result comes back \
                 in the chat, as its tool part's output in the next message",
            )),
            Frame::AudioControl { .. } | Frame::AudioChunk { .. } => {
                if !std::mem::replace(&mut self.audio_refused, true) {
                    socket.say(refusal(
                        "audio is not supported: send text in message frames",
                    ));
                }
            }
        }
        Ok(())
    }

    /// A frame over the budget is dropped; a dropped `message` is a turn
    /// the client waits for, so it gets one that says why.
    pub(super) async fn over_budget(&mut self, socket: &Socket, text: &str) {
        let kind = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned));
        if kind.as_deref() == Some("message") {
            self.supersede().await;
            let why = format!(
                "more than {} frames a second; this message was dropped",
                socket.state.live.frames_per_sec
            );
            self.turn = Some(refused(socket, why));
        }
    }

    pub(super) fn busy(&mut self) -> bool {
        if self
            .turn
            .as_ref()
            .is_some_and(|turn| turn.task.is_finished())
        {
            self.turn = None;
        }
        self.turn.is_some()
    }

    pub(super) fn end(self) {
        if let Some(turn) = self.turn {
            turn.task.abort();
        }
    }

    /// Starts the turn `body` asks for, as `POST /stream` would.
    async fn message(&mut self, socket: &Socket, mut body: Map<String, Value>) {
        self.supersede().await;
        if body.get("id").is_none_or(Value::is_null) {
            let turns = &socket.state.turns;
            let chat_id = self
                .chat_id
                .get_or_insert_with(|| turns.new_chat_id("live"));
            body.insert("id".into(), chat_id.clone().into());
        }
        let turn = match start(socket, &body).await {
            Ok((run, reader)) => Turn {
                run: Some(run),
                task: socket
                    .state
                    .tasks
                    .spawn(forward(reader, socket.outbox.clone())),
            },
            Err(e) => refused(socket, e.public()),
        };
        self.turn = Some(turn);
    }

    /// Stops forwarding the turn in flight, and waits until its writer can
    /// write no more: none of its frames may follow the next turn's. With
    /// nobody reading it, the turn stops unless it waits for a human.
    async fn supersede(&mut self) {
        if let Some(turn) = self.turn.take() {
            turn.task.abort();
            let _ = turn.task.await;
        }
    }
}

/// The frame, or why it closes the socket.
fn parse(text: &str) -> Result<Frame, Close> {
    let value: Value = serde_json::from_str(text).map_err(|_| NOT_JSON)?;
    match value.get("type").and_then(Value::as_str) {
        Some(kind) if TYPES.contains(&kind) => {}
        Some(_) => return Err(UNKNOWN_TYPE),
        None => return Err(MALFORMED),
    }
    if value.get("version").is_some_and(|v| v != VERSION) {
        return Err(MALFORMED);
    }
    serde_json::from_value(value).map_err(|_| MALFORMED)
}

async fn start(
    socket: &Socket,
    body: &Map<String, Value>,
) -> Result<(Arc<Run>, Subscription), ApiError> {
    // The app sends no key in its frames: the upgrade's headers say who.
    let who = socket.caller(&HashMap::new()).await?.into_identity();
    let bytes = serde_json::to_vec(body).map_err(|e| RequestError::Json(e.to_string()))?;
    let request = ChatRequest::from_slice(&bytes)?;
    // A turn continues the trace of the socket's upgrade request.
    let trace = HeaderExtractor(&socket.upgrade);
    let asker = socket.state.asker(&who);
    Ok((socket.state.turns)
        .start(request, asker, Wire::AiSdk, Transport::Live, &trace)
        .await?)
}

/// A turn refused before it started: its error chunk, then `[DONE]`.
fn refused(socket: &Socket, why: String) -> Turn {
    let outbox = socket.outbox.clone();
    let task = socket.state.tasks.spawn(async move {
        let mut encoder = SseEncoder::new();
        encoder.push(&UiChunk::Error { error_text: why });
        if send(&outbox, encoder.take()).await {
            encoder.push_raw(DONE);
            send(&outbox, encoder.take()).await;
        }
    });
    Turn { run: None, task }
}

/// Writes a turn's chunks, one frame each, then `[DONE]`.
async fn forward(reader: Subscription, outbox: mpsc::Sender<Message>) {
    let mut chunks = std::pin::pin!(reader.chunks());
    while let Some((_, event)) = chunks.next().await {
        if !send(&outbox, event.sse().clone()).await {
            return;
        }
    }
    send(&outbox, Bytes::from_static(DONE)).await;
}

/// Queues one frame, waiting for room; `false` once the socket is gone.
async fn send(outbox: &mpsc::Sender<Message>, frame: Bytes) -> bool {
    // Chunk JSON is serde's, always UTF-8.
    let text = Utf8Bytes::try_from(frame.clone())
        .unwrap_or_else(|_| String::from_utf8_lossy(&frame).into_owned().into());
    outbox.send(Message::Text(text)).await.is_ok()
}

/// A frame toolgate does not take, said so outside any turn's stream.
fn refusal(why: &str) -> Message {
    Message::Text(
        json!({"type": "error", "errorText": why})
            .to_string()
            .into(),
    )
}

/// The close frame of a socket that closes on its own.
pub(super) fn farewell(why: Farewell) -> Close {
    match why {
        Farewell::Idle => Close::new(close_code::NORMAL, "idle"),
        Farewell::Broken => Close::new(close_code::SIZE, "frame too large or broken"),
        // The upgrade needed a key here: a socket of this dialect is keyed.
        Farewell::NoKey => Close::new(close_code::POLICY, "no valid API key"),
        Farewell::KeylessFrame => {
            Close::new(close_code::SIZE, "frame too large before a valid API key")
        }
    }
}
