//! A WebSocket client of `/live` for tests: frames in and out, and the
//! `send` frame of a `useChat` body.

use super::Must;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::Server;

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn connect(server: &Server) -> Socket {
    connect_to(&server.url).await
}

/// A socket to `/live` of the server (or balancer) at `base` (`http://…`).
pub async fn connect_to(base: &str) -> Socket {
    let url = format!("{}/live", base.replacen("http", "ws", 1));
    let (socket, _) = tokio_tungstenite::connect_async(url).await.must();
    socket
}

pub async fn send(socket: &mut Socket, frame: Value) {
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .must();
}

/// The next text frame, as JSON.
pub async fn next(socket: &mut Socket) -> Value {
    let wait = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    return super::from_json(&text);
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("the socket ended: {other:?}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("no frame"))
}

/// Frames of `request` up to its `end` (or `error`), checking the sequence.
pub async fn until_end(socket: &mut Socket, frames: &mut Vec<Value>, request: &str) {
    loop {
        let frame = next(socket).await;
        let done = frame["requestId"] == request
            && matches!(frame["type"].as_str(), Some("end" | "error"));
        frames.push(frame);
        if done {
            break;
        }
    }
    check_sequence(frames, request);
}

/// Sends turn `request` of `body`, and reads its frames to its end.
pub async fn whole_turn(socket: &mut Socket, request: &str, body: &Value) -> Vec<Value> {
    send(socket, turn(request, body)).await;
    let mut frames = Vec::new();
    until_end(socket, &mut frames, request).await;
    frames
}

/// Frames up to the first chunk whose JSON contains `needle`.
pub async fn until(socket: &mut Socket, frames: &mut Vec<Value>, needle: &str) {
    loop {
        let frame = next(socket).await;
        let found = frame["chunk"].to_string().contains(needle);
        frames.push(frame);
        if found {
            return;
        }
    }
}

pub fn check_sequence(frames: &[Value], request: &str) {
    let sequence: Vec<u64> = frames
        .iter()
        .filter(|f| f["type"] == "chunk" && f["requestId"] == request)
        .filter_map(|f| f["sequence"].as_u64())
        .collect();
    let expected: Vec<u64> = (0..sequence.len() as u64).collect();
    assert_eq!(sequence, expected, "sequence with gaps");
}

pub fn lines(frames: &[Value]) -> String {
    frames.iter().map(|f| format!("{f}\n")).collect()
}

pub fn turn(request: &str, body: &Value) -> Value {
    let mut frame = json!({
        "type": "send", "requestId": request, "id": body["id"], "trigger": "submit-message",
        "messages": body["messages"], "headers": {}, "body": {},
    });
    if let Some(message_id) = body.get("messageId") {
        frame["messageId"] = message_id.clone();
    }
    if let Some(options) = body.get("toolgate") {
        frame["body"]["toolgate"] = options.clone();
    }
    frame
}

/// A socket on which turn `r1`, a held payment in `chat`, asks its
/// question: the frames up to it.
pub async fn asking(server: &Server, chat: &str) -> (Socket, Vec<Value>) {
    let mut socket = connect(server).await;
    send(
        &mut socket,
        turn("r1", &held(chat, "Send 50 USD to Hanako")),
    )
    .await;
    let mut frames = Vec::new();
    until(&mut socket, &mut frames, "originalFunctionCall").await;
    (socket, frames)
}

pub fn says(chat: &str, text: &str) -> Value {
    super::user_says(chat, text)
}

pub fn held(chat: &str, text: &str) -> Value {
    let mut body = says(chat, text);
    body["toolgate"] = json!({"flow": "hold"});
    body
}

/// The next text frame within `wait`, or `None`.
pub async fn next_within(socket: &mut Socket, wait: Duration) -> Option<Value> {
    let read = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => return serde_json::from_str::<Value>(&text).ok(),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                _ => return None,
            }
        }
    };
    tokio::time::timeout(wait, read).await.ok().flatten()
}
