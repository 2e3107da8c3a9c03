//! `GET /live`: the UI message stream over one WebSocket, in the frame
//! protocol of the AI SDK's `WebSocketChatTransport` (ai 7.x).
//!
//! In: `send` (a turn, as `useChat` posts it), `resume` (replay the chat's
//! turn in flight), `abort`, and toolgate's own `confirm` (a decision on an
//! open question, for clients that answer without a new turn). Out: `start`,
//! `chunk` (per-request `sequence` from 0, no gaps), `end`, `no-active`,
//! `error`. Every frame that cannot be served gets an `error` frame naming
//! why; the connection stays open.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::auth::{Caller, X_API_KEY};
use super::runs::{Run, Subscription};
use super::{ApiError, HttpState};
use crate::confirm::{AnswerKeys, Decision, OutOfBand};
use crate::protocol::ChatRequest;
use crate::protocol::message::check_id;

/// Frames queued for one socket before a turn waits for it.
const OUTBOX: usize = 256;
/// How often an idle socket is pinged.
const PING_EVERY: Duration = Duration::from_secs(20);
/// A write the peer has not taken in this long closes the socket.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
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
        confirmed: bool,
        request_id: Option<String>,
        /// Judged as an answer on the chat is.
        #[serde(flatten)]
        answer: AnswerKeys,
        #[serde(default)]
        headers: HashMap<String, String>,
    },
}

pub(super) async fn live(
    State(state): State<HttpState>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    // With a principal header, the proxy must have set it on the upgrade.
    if state.api_keys.is_empty() {
        Caller::from_headers(&state, &headers)?;
    }
    let limit = state.max_body_bytes;
    Ok(upgrade
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| connection(socket, state, headers)))
}

/// One socket: its requests run as tasks writing into one outbox.
async fn connection(socket: WebSocket, state: HttpState, upgrade: HeaderMap) {
    let (mut sink, mut incoming) = socket.split();
    let (outbox, mut queued) = mpsc::channel::<Message>(OUTBOX);
    let writer = state.tasks.spawn(async move {
        // A peer that stops taking frames is let go: its turns then see
        // their reader stall, and stop.
        while let Some(message) = queued.recv().await {
            match tokio::time::timeout(WRITE_TIMEOUT, sink.send(message)).await {
                Ok(Ok(())) => {}
                _ => return,
            }
        }
        let _ = tokio::time::timeout(WRITE_TIMEOUT, sink.close()).await;
    });
    let mut requests: HashMap<String, (Arc<Run>, JoinHandle<()>)> = HashMap::new();
    let mut ping = tokio::time::interval(
        PING_EVERY
            .min(state.live.idle / 2)
            .max(Duration::from_millis(10)),
    );
    let mut last_heard = Instant::now();
    let mut budget = Budget::new(state.live.frames_per_sec);
    loop {
        let message = tokio::select! {
            message = incoming.next() => message,
                        _ = ping.tick() => {
                requests.retain(|_, (_, task)| !task.is_finished());
                // Idle: no frame from the client, and none of its turns in flight.
                                if requests.is_empty() && last_heard.elapsed() > state.live.idle {
                    let why = format!("closing a socket idle for {} s", state.live.idle.as_secs());
                    let _ = outbox.try_send(error("", &why));
                    break;
                }
                // Never wait on a full outbox here: that is a peer not reading.
                let _ = outbox.try_send(Message::Ping(Default::default()));
                continue;
            }
        };
        let text = match message {
            None | Some(Ok(Message::Close(_))) => break,
            // A frame over the size limit, or a broken protocol: say why, then close.
            // The library's words (which may be the OS's) go to the log only.
            Some(Err(e)) => {
                tracing::info!("closing a socket: {e}");
                let why = format!(
                    "closing the socket: a frame over {} bytes or outside the WebSocket protocol",
                    state.max_body_bytes
                );
                let _ = outbox.try_send(error("", &why));
                break;
            }
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                last_heard = Instant::now();
                let _ = outbox.try_send(error(
                    "",
                    "binary frames are not part of the protocol; send JSON text",
                ));
                continue;
            }
            // A pong says the peer is there, not that it is busy.
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
        };
        last_heard = Instant::now();
        requests.retain(|_, (_, task)| !task.is_finished());
        if !budget.take() {
            let id = request_id(&text);
            let why = format!(
                "more than {} frames a second; this one was dropped",
                state.live.frames_per_sec
            );
            let _ = outbox.try_send(error(&id, &why));
            continue;
        }
        if let Err((id, why)) = frame(&state, &upgrade, &text, &outbox, &mut requests).await {
            let _ = outbox.try_send(error(&id, &why));
        }
    }
    // The socket is gone: its readers leave, and turns nobody waits on stop.
    for (_, (_, task)) in requests {
        task.abort();
    }
    drop(outbox);
    let _ = writer.await;
}

/// Serves one frame; the error frame's `(requestId, errorText)` otherwise.
async fn frame(
    state: &HttpState,
    upgrade: &HeaderMap,
    text: &str,
    outbox: &mpsc::Sender<Message>,
    requests: &mut HashMap<String, (Arc<Run>, JoinHandle<()>)>,
) -> Result<(), (String, String)> {
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
            let principal = principal(state, upgrade, &headers).map_err(fail)?;
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
            let (run, reader) = super::chat::start(state, request, &principal).map_err(fail)?;
            let task = state
                .tasks
                .spawn(forward(request_id.clone(), reader, outbox.clone()));
            requests.insert(request_id, (run, task));
        }
        ClientFrame::Resume {
            request_id,
            id: chat_id,
            headers,
        } => {
            check_request(requests, &request_id)?;
            let principal = principal(state, upgrade, &headers).map_err(fail)?;
            let run = state.runs.get(&principal, &chat_id);
            match run.as_ref().and_then(|run| run.resume()) {
                Some(reader) => {
                    let task =
                        state
                            .tasks
                            .spawn(forward(request_id.clone(), reader, outbox.clone()));
                    if let Some(run) = run {
                        requests.insert(request_id, (run, task));
                    }
                }
                None => {
                    let frame = json!({"type": "no-active", "requestId": request_id});
                    let _ = outbox.try_send(Message::Text(frame.to_string().into()));
                }
            }
        }
        ClientFrame::Abort { request_id } => {
            if let Some((run, task)) = requests.remove(&request_id) {
                run.abort();
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
            let principal = principal(state, upgrade, &headers).map_err(fail)?;
            let decision = Decision::new(confirmed, answer);
            // An approval runs the call: the socket keeps serving meanwhile.
            let (gate, outbox) = (state.agent.gate.clone(), outbox.clone());
            state.tasks.spawn(async move {
                let why = match gate
                    .decide_out_of_band(&principal, &confirmation_id, decision)
                    .await
                {
                    // A held turn shows the outcome on its own stream.
                    Ok(OutOfBand::Decided(_)) => return,
                    Ok(OutOfBand::Conflict(why) | OutOfBand::Invalid(why)) => why,
                    Ok(OutOfBand::NotFound) => format!("no confirmation `{confirmation_id}`"),
                    Err(e) => ApiError::from(e).public(),
                };
                let _ = outbox.send(error(&id, &why)).await;
            });
        }
    }
    Ok(())
}

/// A request id a new `send` or `resume` may take.
fn check_request(
    requests: &HashMap<String, (Arc<Run>, JoinHandle<()>)>,
    request_id: &str,
) -> Result<(), (String, String)> {
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

/// Who sends a frame: with API keys, the key in the frame's own headers
/// (browsers cannot set them on the upgrade) or the upgrade's; otherwise
/// whoever the upgrade says (a proxy's header is never taken from a frame).
fn principal(
    state: &HttpState,
    upgrade: &HeaderMap,
    frame: &HashMap<String, String>,
) -> Result<String, ApiError> {
    let mut headers = upgrade.clone();
    if !state.api_keys.is_empty() {
        let names = [header::AUTHORIZATION, X_API_KEY];
        // Names in any case; two spellings of one name are both kept, and
        // must agree.
        let keys: Vec<_> = frame
            .iter()
            .filter_map(|(name, value)| {
                let name = names
                    .iter()
                    .find(|n| n.as_str().eq_ignore_ascii_case(name))?;
                Some((name.clone(), HeaderValue::from_str(value).ok()?))
            })
            .collect();
        // A frame that names a key replaces the upgrade's.
        if !keys.is_empty() {
            for name in &names {
                headers.remove(name);
            }
        }
        for (name, value) in keys {
            headers.append(name, value);
        }
    }
    Caller::from_headers(state, &headers).map(|caller| caller.principal)
}

/// Writes one request's chunks to the socket: `start`, `chunk`s, `end`.
async fn forward(request_id: String, reader: Subscription, outbox: mpsc::Sender<Message>) {
    let id = serde_json::to_string(&request_id).unwrap_or_default();
    let start = format!(r#"{{"type":"start","requestId":{id}}}"#);
    if outbox.send(Message::Text(start.into())).await.is_err() {
        return;
    }
    let mut chunks = std::pin::pin!(reader.chunks());
    while let Some((sequence, json)) = chunks.next().await {
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

/// Frames a second, with a burst of as many.
struct Budget {
    per_sec: f64,
    tokens: f64,
    at: Instant,
}

impl Budget {
    fn new(per_sec: u32) -> Self {
        let per_sec = f64::from(per_sec.max(1));
        Self {
            per_sec,
            tokens: per_sec,
            at: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * self.per_sec;
        self.tokens = (self.tokens + refill).min(self.per_sec);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Settings of the socket mode.
#[derive(Debug, Clone, Copy)]
pub struct LiveLimits {
    /// A socket that says nothing for this long is closed.
    pub idle: Duration,
    pub frames_per_sec: u32,
}
