//! `GET /live` in the `adk-stream-protocol` dialect (`live.dialect:
//! adk-stream-protocol`), frame by frame: `message` frames in, each chunk's
//! exact SSE bytes out as its own text frame, `[DONE]` after every turn;
//! ping/pong, interrupt, refused frames, and bad frames closing with 1002.

use crate::common;
use crate::common::Must;
use crate::common::from_json;

use std::time::Duration;

use common::ws::{Socket, connect};
use common::{Server, fixture, user_says};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use toolgate::Config;

const DONE: &str = "data: [DONE]\n\n";
const SEED: &str = "live: {dialect: adk-stream-protocol}\n";
/// The seed app asks in the AI SDK's own approval protocol.
const NATIVE: &str = "live: {dialect: adk-stream-protocol}\ntoolConfirmation: {protocol: ai-sdk}\n";

async fn server(yaml: &str) -> Server {
    Server::with_config(Config::from_yaml(yaml).must()).await
}

/// The seed's `message` frame for a `useChat` body (flat, as it sends now).
fn message(body: &Value) -> Value {
    let mut frame = json!({
        "type": "message", "version": "1.0", "timestamp": 1_765_432_100_000_u64,
        "id": body["id"], "messages": body["messages"], "trigger": body["trigger"],
    });
    if let Some(message_id) = body.get("messageId") {
        frame["messageId"] = message_id.clone();
    }
    frame
}

async fn send(socket: &mut Socket, frame: &Value) {
    send_text(socket, &frame.to_string()).await;
}

async fn send_text(socket: &mut Socket, text: &str) {
    socket.send(Message::Text(text.into())).await.must();
}

/// The next text frame, as sent.
async fn next(socket: &mut Socket) -> String {
    let wait = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => return text.to_string(),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("the socket ended: {other:?}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("no frame"))
}

/// A turn's frames up to and with `[DONE]`, each one chunk's SSE bytes.
async fn turn(socket: &mut Socket) -> Vec<String> {
    let mut frames = Vec::new();
    loop {
        let frame = next(socket).await;
        let done = frame == DONE;
        if !done {
            let json = frame
                .strip_prefix("data: ")
                .and_then(|f| f.strip_suffix("\n\n"))
                .unwrap_or_else(|| panic!("not one SSE event: {frame:?}"));
            from_json::<Value>(json);
        }
        frames.push(frame);
        if done {
            return frames;
        }
    }
}

/// The chunks of a turn's frames.
fn chunks(frames: &[String]) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f.as_str() != DONE)
        .filter_map(|f| serde_json::from_str(&f["data: ".len()..]).ok())
        .collect()
}

fn kinds(frames: &[String]) -> Vec<String> {
    chunks(frames)
        .iter()
        .map(|c| c["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The close frame the server ends the socket with: (code, reason).
async fn closed(socket: &mut Socket) -> (u16, String) {
    let wait = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(Some(frame)))) => {
                    return (u16::from(frame.code), frame.reason.to_string());
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("not a close frame: {other:?}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("no close frame"))
}

#[tokio::test]
async fn a_message_is_one_frame_a_chunk_then_done_the_sse_bytes_exactly() {
    let seed = server(SEED).await;
    let mut socket = connect(&seed).await;
    let body = user_says("chat-text", "hello there");
    send(&mut socket, &message(&body)).await;
    let frames = turn(&mut socket).await;
    assert_eq!(frames.last().map(String::as_str), Some(DONE));
    // The same turn over SSE, on a server in the same state: the same bytes.
    let sse = Server::start().await.chat(&body).await;
    assert_eq!(frames.concat(), sse.body);
    assert_eq!(
        frames[..3],
        [
            "data: {\"type\":\"start\",\"messageId\":\"msg-1\"}\n\n",
            "data: {\"type\":\"start-step\"}\n\n",
            "data: {\"type\":\"text-start\",\"id\":\"txt-2\"}\n\n",
        ]
    );

    // The next turn on the same socket ends with its own `[DONE]`.
    send(&mut socket, &message(&user_says("chat-two", "again"))).await;
    let second = turn(&mut socket).await;
    assert_eq!(second.iter().filter(|f| *f == DONE).count(), 1);
    assert_eq!(
        kinds(&second).last().map(String::as_str),
        Some("finish"),
        "{second:?}"
    );
}

/// The seed's confirmation: the question, `finish-step` right after it (its
/// receiver closes the stream there and shows the buttons), then the whole
/// history back with the part `approval-responded`: the payment runs once.
#[tokio::test]
async fn a_confirmation_asks_then_the_approval_runs_the_tool_once() {
    let server = server(NATIVE).await;
    let mut socket = connect(&server).await;
    let ask = user_says("chat-pay", "Send 50 USD to Hanako");
    send(&mut socket, &message(&ask)).await;
    let asked = turn(&mut socket).await;
    assert_sse!("native_approval_requested", asked.concat());
    let kinds = kinds(&asked);
    let at = kinds
        .iter()
        .position(|k| k == "tool-approval-request")
        .unwrap_or_else(|| panic!("no question: {kinds:?}"));
    assert_eq!(kinds[at + 1..], ["finish-step", "finish"]);
    assert_eq!(server.payments(), 0);

    // The seed sends the answer as its next `message`, without `toolgate`.
    let approved = fixture("native_approved.json");
    send(&mut socket, &message(&approved)).await;
    let ran = turn(&mut socket).await;
    assert_sse!("native_approved", ran.concat());
    assert_eq!(server.payments(), 1);

    // Sent again, it runs nothing more.
    send(&mut socket, &message(&approved)).await;
    turn(&mut socket).await;
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn a_ping_is_answered_with_its_own_timestamp() {
    let server = server(SEED).await;
    let mut socket = connect(&server).await;
    send_text(
        &mut socket,
        r#"{"type":"ping","version":"1.0","timestamp":1765432109876}"#,
    )
    .await;
    assert_eq!(
        next(&mut socket).await,
        r#"{"type":"pong","timestamp":1765432109876}"#
    );
}

/// An interrupt ends the turn in flight at once: no more chunks, `[DONE]`,
/// and the socket goes on.
#[tokio::test]
async fn an_interrupt_ends_the_turn_in_flight() {
    // A minute before each delta: the turn is surely still going.
    let server = server(&format!("{SEED}model: {{deltaDelayMs: 60000}}\n")).await;
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        &message(&user_says("chat-slow", "hello there")),
    )
    .await;
    let first = next(&mut socket).await;
    assert_eq!(
        first,
        "data: {\"type\":\"start\",\"messageId\":\"msg-1\"}\n\n"
    );
    send(
        &mut socket,
        &json!({"type": "interrupt", "version": "1.0", "timestamp": 1, "reason": "user_abort"}),
    )
    .await;
    let rest = turn(&mut socket).await;
    assert_eq!(rest.last().map(String::as_str), Some(DONE));
    let kinds = kinds(&rest);
    assert!(
        kinds.iter().all(|k| k == "start-step" || k == "text-start"),
        "{kinds:?}"
    );
    send_text(
        &mut socket,
        r#"{"type":"ping","version":"1.0","timestamp":7}"#,
    )
    .await;
    assert_eq!(next(&mut socket).await, r#"{"type":"pong","timestamp":7}"#);
}

#[tokio::test]
async fn a_frame_not_of_the_dialect_closes_the_socket_with_1002() -> anyhow::Result<()> {
    let server = server(SEED).await;
    let bad = [
        ("not json", "frame is not JSON"),
        (r#"{"type":"send","requestId":"r1"}"#, "unknown frame type"),
        (r#"{"version":"1.0","messages":[]}"#, "malformed frame"),
        (r#"{"type":"message","version":"1.0"}"#, "malformed frame"),
        (
            r#"{"type":"message","version":"1.0","id":"c","messages":{}}"#,
            "malformed frame",
        ),
        (
            r#"{"type":"message","version":"1.0","data":{"messages":[]},"messages":[]}"#,
            "malformed frame",
        ),
        (
            r#"{"type":"ping","version":"2.0","timestamp":1}"#,
            "malformed frame",
        ),
        (
            r#"{"type":"tool_result","version":"1.0","toolCallId":7}"#,
            "malformed frame",
        ),
    ];
    for (frame, reason) in bad {
        let mut socket = connect(&server).await;
        send_text(&mut socket, frame).await;
        assert_eq!(closed(&mut socket).await, (1002, reason.into()), "{frame}");
    }
    let mut socket = connect(&server).await;
    socket.send(Message::Binary(vec![1, 2, 3].into())).await?;
    assert_eq!(
        closed(&mut socket).await,
        (1003, "binary frames are not taken".into())
    );
    Ok(())
}

/// The app's older frame, `{type, version, data: {messages}}`, names no
/// chat: its turns are in one chat per socket.
#[tokio::test]
async fn the_older_data_form_keeps_one_chat_per_socket() {
    let server = server(NATIVE).await;
    let mut socket = connect(&server).await;
    let ask = user_says("ignored", "Send 50 USD to Hanako");
    let older = |messages: &Value| json!({"type": "message", "version": "1.0", "data": {"messages": messages}});
    send(&mut socket, &older(&ask["messages"])).await;
    let asked = chunks(&turn(&mut socket).await);
    let find = |kind: &str| -> Value {
        asked
            .iter()
            .find(|c| c["type"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind}: {asked:?}"))
    };
    let (start, question, input) = (
        find("start"),
        find("tool-approval-request"),
        find("tool-input-available"),
    );
    let history = json!([
        ask["messages"][0],
        {"id": start["messageId"], "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-process_payment", "toolCallId": question["toolCallId"],
             "input": input["input"], "state": "approval-responded",
             "approval": {"id": question["approvalId"], "approved": true}}
        ]}
    ]);

    // Another socket is another chat: the approval is not its to give.
    let mut other = connect(&server).await;
    send(&mut other, &older(&history)).await;
    turn(&mut other).await;
    assert_eq!(server.payments(), 0);

    send(&mut socket, &older(&history)).await;
    let ran = chunks(&turn(&mut socket).await);
    assert_eq!(server.payments(), 1);
    assert!(
        ran.iter()
            .any(|c| c["type"] == "tool-output-available" && c["output"]["status"] == "completed"),
        "{ran:?}"
    );
}

/// What toolgate does not take is said on the socket, which stays open: a
/// message it refuses is a turn of one error chunk; a `tool_result` or audio
/// gets a plain JSON `error` frame (audio once).
#[tokio::test]
async fn refused_frames_are_said_and_the_socket_stays() {
    let server = server(SEED).await;
    let mut socket = connect(&server).await;
    let mut wizard = user_says("chat-bad", "hi");
    wizard["messages"][0]["role"] = json!("wizard");
    send(&mut socket, &message(&wizard)).await;
    assert_eq!(
        turn(&mut socket).await,
        [
            "data: {\"type\":\"error\",\"errorText\":\"invalid request: messages[0]: unknown role `wizard`\"}\n\n",
            DONE
        ]
    );

    send(
        &mut socket,
        &json!({"type": "tool_result", "version": "1.0", "timestamp": 1, "toolCallId": "call-1", "result": {"ok": true}}),
    )
    .await;
    assert_eq!(
        next(&mut socket).await,
        r#"{"type":"error","errorText":"tool_result frames are not taken: a client-side tool's result comes back in the chat, as its tool part's output in the next message"}"#
    );
    for _ in 0..2 {
        send(
            &mut socket,
            &json!({"type": "audio_control", "version": "1.0", "action": "start"}),
        )
        .await;
    }
    assert_eq!(
        next(&mut socket).await,
        r#"{"type":"error","errorText":"audio is not supported: send text in message frames"}"#
    );
    // Still serving; the second audio frame said nothing.
    send_text(&mut socket, r#"{"type":"ping","timestamp":3}"#).await;
    assert_eq!(next(&mut socket).await, r#"{"type":"pong","timestamp":3}"#);
}

/// Over the frame budget a `message` still gets its turn: one that says it
/// was dropped.
#[tokio::test]
async fn a_message_over_the_frame_budget_is_a_turn_that_says_so() {
    let server = server(&format!("{SEED}stream: {{liveFramesPerSec: 1}}\n")).await;
    let mut socket = connect(&server).await;
    send_text(&mut socket, r#"{"type":"ping","timestamp":1}"#).await;
    send(&mut socket, &message(&user_says("chat-fast", "hi"))).await;
    assert_eq!(next(&mut socket).await, r#"{"type":"pong","timestamp":1}"#);
    assert_eq!(
        turn(&mut socket).await,
        [
            "data: {\"type\":\"error\",\"errorText\":\"more than 1 frames a second; this message was dropped\"}\n\n",
            DONE
        ]
    );
}

/// The seed sends no key in its frames: with API keys, the upgrade needs one.
#[tokio::test]
async fn with_api_keys_the_upgrade_carries_the_key() -> anyhow::Result<()> {
    let yaml = format!("{SEED}{}", common::api_keys(&[("alice", "alice-key")]));
    let server = server(&yaml).await;
    let url = format!("{}/live", server.url.replacen("http", "ws", 1));
    let refused = tokio_tungstenite::connect_async(url.as_str()).await;
    assert!(
        matches!(
            refused,
            Err(tokio_tungstenite::tungstenite::Error::Http(ref response)) if response.status() == 401
        ),
        "{refused:?}"
    );
    let mut request = url.as_str().into_client_request()?;
    let key = "Bearer alice-key".parse()?;
    request.headers_mut().insert("authorization", key);
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await?;
    send(&mut socket, &message(&user_says("chat-key", "hello"))).await;
    let frames = turn(&mut socket).await;
    assert_eq!(
        kinds(&frames).last().map(String::as_str),
        Some("finish"),
        "{frames:?}"
    );
    Ok(())
}

/// A chat id a header cannot carry is refused as on `/stream`: the turn is
/// its error chunk, the fixed text without the id, then `[DONE]`.
#[tokio::test]
async fn a_chat_id_a_header_cannot_carry_is_a_turn_that_says_so() {
    let server = server(SEED).await;
    let mut socket = connect(&server).await;
    send(&mut socket, &message(&user_says("café", "hi"))).await;
    let frames = turn(&mut socket).await;
    assert_eq!(kinds(&frames), ["error"], "{frames:?}");
    let text = chunks(&frames)[0]["errorText"].as_str().map(str::to_owned);
    assert!(
        text.is_some_and(|t| t.contains(toolgate::protocol::BAD_CHAT_ID) && !t.contains("café")),
        "{frames:?}"
    );
}
