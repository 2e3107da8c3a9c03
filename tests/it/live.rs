//! `GET /live` with a WebSocket client: the frame protocol, confirmations
//! answered on the socket, through the API, by the timeout, and after a
//! reconnect; aborts; bad frames answered with `error` frames.

use crate::common;
use crate::common::assert_contains;

use std::time::Duration;

use common::ws::{
    asking, connect, held, lines, next, says, send, turn, until, until_end, whole_turn,
};
use common::{Server, fixture};
use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn a_text_turn_is_start_chunks_end() {
    let server = Server::start().await;
    let mut socket = connect(&server).await;
    let frames = whole_turn(&mut socket, "r1", &says("chat-text", "hello there")).await;
    assert_sse!("live_text_only", lines(&frames));
}

/// The stock transport: the turn ends with the question; the answer comes
/// as the next `send`, checked by the gate as over SSE.
#[tokio::test]
async fn the_stock_flow_asks_then_the_next_send_answers() {
    let server = Server::start().await;
    let mut socket = connect(&server).await;
    let frames = whole_turn(
        &mut socket,
        "r1",
        &says("chat-pay", "Send 50 USD to Hanako"),
    )
    .await;
    assert!(lines(&frames).contains(r#""finishReason":"tool-calls""#));
    assert_eq!(server.payments(), 0);
    let second = whole_turn(&mut socket, "r2", &fixture("pay_hanako_approved.json")).await;
    assert_eq!(server.payments(), 1);
    assert_sse!("live_stock_approved", lines(&second));
}

#[tokio::test]
async fn a_confirm_frame_continues_the_same_request() {
    let server = Server::start().await;
    let (mut socket, mut frames) = asking(&server, "chat-hold").await;
    send(
        &mut socket,
        json!({"type": "confirm", "confirmationId": "adk-3", "confirmed": true, "requestId": "r1"}),
    )
    .await;
    until_end(&mut socket, &mut frames, "r1").await;
    assert_eq!(server.payments(), 1);
    assert_sse!("live_confirm_frame", lines(&frames));
}

#[tokio::test]
async fn an_approval_through_the_api_reaches_the_waiting_socket() {
    let server = Server::start().await;
    let (mut socket, mut frames) = asking(&server, "chat-hold").await;
    let denied = r#"{"approved": false, "reason": "no"}"#;
    let decided = server.decide("adk-3", denied).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    until_end(&mut socket, &mut frames, "r1").await;
    assert_eq!(server.payments(), 0);
    assert!(lines(&frames).contains("User denied execution: no"));
}

#[tokio::test]
async fn nobody_deciding_in_time_expires_on_the_socket() -> anyhow::Result<()> {
    let server = Server::from_yaml("toolConfirmation:\n  timeout: 300\n").await;
    let mut socket = connect(&server).await;
    let frames = whole_turn(
        &mut socket,
        "r1",
        &held("chat-late", "Send 50 USD to Hanako"),
    )
    .await;
    let all = lines(&frames);
    assert_contains(
        &all,
        "expired without an answer; nobody approved or denied it.",
    );
    assert!(!all.contains("User denied execution"), "{all}");
    assert_contains(&all, r#""finishReason":"stop""#);
    assert_eq!(server.payments(), 0);
    Ok(())
}

/// A dropped socket with a question open: a new socket's `resume` replays
/// the turn from its first chunk, question included, and can answer it.
#[tokio::test]
async fn a_reconnect_resumes_the_held_turn() {
    let server = Server::start().await;
    let (first, before) = asking(&server, "chat-back").await;
    drop(first);
    // Time for the server to see the socket go, and wrongly end the held
    // turn if it would: what must not happen has no event to wait for.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let mut second = connect(&server).await;
    send(
        &mut second,
        json!({"type": "resume", "requestId": "r9", "id": "chat-back", "headers": {}, "body": {}}),
    )
    .await;
    let mut after = Vec::new();
    until(&mut second, &mut after, "originalFunctionCall").await;
    let chunks = |frames: &[Value]| -> Vec<Value> {
        frames
            .iter()
            .filter(|f| f["type"] == "chunk")
            .map(|f| f["chunk"].clone())
            .collect()
    };
    assert_eq!(chunks(&after), chunks(&before), "the replay differs");
    send(
        &mut second,
        json!({"type": "confirm", "confirmationId": "adk-3", "confirmed": true}),
    )
    .await;
    until_end(&mut second, &mut after, "r9").await;
    assert_eq!(server.payments(), 1);
    assert_eq!(after.last().map(|f| f["type"].clone()), Some(json!("end")));
}

#[tokio::test]
async fn a_resume_with_nothing_in_flight_is_no_active() {
    let server = Server::start().await;
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        json!({"type": "resume", "requestId": "r1", "id": "chat-none", "headers": {}, "body": {}}),
    )
    .await;
    assert_eq!(
        next(&mut socket).await,
        json!({"type": "no-active", "requestId": "r1"})
    );
}

#[tokio::test]
async fn bad_frames_get_error_frames_and_the_socket_stays() -> anyhow::Result<()> {
    let server = Server::start().await;
    let mut socket = connect(&server).await;
    socket.send(Message::Text("not json".into())).await?;
    let frame = next(&mut socket).await;
    assert_eq!(frame["type"], "error");
    assert!(
        frame["errorText"]
            .as_str()
            .is_some_and(|t| t.starts_with("not a JSON frame"))
    );

    send(&mut socket, json!({"type": "bogus", "requestId": "r0"})).await;
    let frame = next(&mut socket).await;
    assert_eq!(
        (frame["type"].clone(), frame["requestId"].clone()),
        (json!("error"), json!("r0"))
    );

    socket.send(Message::Binary(vec![1, 2, 3].into())).await?;
    assert_eq!(next(&mut socket).await["type"], "error");

    let mut bad = turn("r1", &says("chat-bad", "hi"));
    bad["messages"] = json!([{"id": "u1", "role": "wizard", "parts": []}]);
    send(&mut socket, bad).await;
    let frame = next(&mut socket).await;
    assert_eq!(
        (frame["type"].clone(), frame["requestId"].clone()),
        (json!("error"), json!("r1"))
    );

    send(
        &mut socket,
        json!({"type": "confirm", "confirmationId": "nope", "confirmed": true}),
    )
    .await;
    let frame = next(&mut socket).await;
    assert_eq!(frame["type"], "error");
    assert_eq!(frame["errorText"], "no confirmation `nope`");

    // Still serving.
    let frames = whole_turn(&mut socket, "r2", &says("chat-ok", "hello")).await;
    assert_eq!(frames.last().map(|f| f["type"].clone()), Some(json!("end")));
    Ok(())
}

#[tokio::test]
async fn too_many_frames_are_refused_one_by_one() -> anyhow::Result<()> {
    let server = Server::from_yaml("stream:\n  liveFramesPerSec: 2\n").await;
    let mut socket = connect(&server).await;
    for n in 0..3 {
        send(&mut socket, json!({"type": "resume", "requestId": format!("r{n}"), "id": "c", "headers": {}, "body": {}})).await;
    }
    let replies: Vec<Value> = vec![
        next(&mut socket).await,
        next(&mut socket).await,
        next(&mut socket).await,
    ];
    let refused = replies.iter().filter(|f| f["type"] == "error").count();
    assert_eq!(refused, 1, "{replies:?}");
    Ok(())
}

#[tokio::test]
async fn an_idle_socket_is_told_and_closed() -> anyhow::Result<()> {
    let server = Server::from_yaml("stream:\n  liveIdleSecs: 1\n").await;
    let mut socket = connect(&server).await;
    let frame = next(&mut socket).await;
    assert_eq!(frame["type"], "error");
    assert!(
        frame["errorText"]
            .as_str()
            .is_some_and(|t| t.contains("idle"))
    );
    Ok(())
}

#[tokio::test]
async fn a_frame_over_the_size_limit_is_named_before_the_close() -> anyhow::Result<()> {
    let server = Server::from_yaml("stream:\n  maxBodyBytes: 2000\n").await;
    let mut socket = connect(&server).await;
    let big = says("chat-big", &"x".repeat(5000));
    let _ = socket
        .send(Message::Text(turn("r1", &big).to_string().into()))
        .await;
    let frame = next(&mut socket).await;
    assert_eq!(frame["type"], "error");
    assert!(
        frame["errorText"]
            .as_str()
            .is_some_and(|t| t.contains("closing the socket")),
        "{frame}"
    );
    Ok(())
}

/// A server with one API key, `alice-key`, and `extra` config.
async fn keyed(extra: &str) -> Server {
    let keys = common::api_keys(&[("alice", "alice-key")]);
    Server::from_yaml(&format!("{keys}{extra}")).await
}

/// A `resume` frame, with the key or without.
fn resume(request: &str, key: Option<&str>) -> Value {
    let headers = match key {
        Some(key) => json!({"authorization": format!("Bearer {key}")}),
        None => json!({}),
    };
    json!({"type": "resume", "requestId": request, "id": "chat-none", "headers": headers})
}

/// Frames until the socket ends (`None` when it is still open after `limit`).
async fn frames_until_closed(
    socket: &mut common::ws::Socket,
    limit: Duration,
) -> Option<Vec<Value>> {
    use futures::StreamExt;
    let read = async {
        let mut frames = Vec::new();
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    frames.push(serde_json::from_str(&text).unwrap_or(Value::Null));
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                _ => return frames,
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok()
}

/// With API keys, a socket that never names a valid key is closed at
/// `live.keyDeadlineSecs` however often it talks: its refused frames do
/// not keep it open. A socket that named one stays.
#[tokio::test]
async fn a_keyless_socket_is_closed_at_its_deadline_though_it_keeps_talking() {
    let server = keyed("live: {keyDeadlineSecs: 1}\n").await;
    let mut keyless = connect(&server).await;
    let mut keyed = connect(&server).await;
    send(&mut keyed, resume("k1", Some("alice-key"))).await;
    assert_eq!(next(&mut keyed).await["type"], "no-active");
    // Every 100 ms a frame, each refused for want of a key; the old server
    // kept such a socket open as long as it talked. 20 s at most.
    let mut said = Vec::new();
    let farewell = |f: &Value| {
        f["errorText"]
            .as_str()
            .is_some_and(|t| t.contains("closing the socket"))
    };
    for n in 0..200 {
        let frame = resume(&format!("r{n}"), Some("wrong-key"));
        if keyless
            .send(Message::Text(frame.to_string().into()))
            .await
            .is_err()
        {
            break;
        }
        if let Some(frame) = common::ws::next_within(&mut keyless, Duration::from_millis(100)).await
        {
            said.push(frame);
        }
        if said.last().is_some_and(farewell) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = said.last().cloned().unwrap_or_default();
    assert!(
        farewell(&last),
        "still open after {} frames: {last}",
        said.len()
    );
    assert_eq!(
        last["errorText"],
        "closing the socket: no frame named a valid API key within 1 s"
    );
    assert!(
        said.iter()
            .any(|f| f["errorText"] == "the API key is not valid"),
        "its frames were refused"
    );
    // The keyed socket is past the deadline too, and still served.
    send(&mut keyed, resume("k2", Some("alice-key"))).await;
    assert_eq!(next(&mut keyed).await["type"], "no-active");
}

/// With API keys, a frame over `live.keylessFrameBytes` before any valid
/// key closes the socket unread (the old server parsed 2.4 MB of it);
/// once a key was named, frames up to `stream.maxBodyBytes` are read.
#[tokio::test]
async fn a_big_frame_before_a_key_closes_the_socket_unparsed() -> anyhow::Result<()> {
    let server = keyed("").await;
    let big = format!(
        "{{\"type\":\"resume\",\"padding\":\"{}\"}}",
        "x".repeat(2_400_000)
    );
    let mut keyless = connect(&server).await;
    let _ = keyless.send(Message::Text(big.clone().into())).await;
    let frames = frames_until_closed(&mut keyless, Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("still open"));
    assert_eq!(
        frames.last().map(|f| f["errorText"].clone()),
        Some(json!(
            "closing the socket: a frame over 65536 bytes before one named a valid API key"
        )),
        "{frames:?}"
    );

    let mut keyed = connect(&server).await;
    send(&mut keyed, resume("k1", Some("alice-key"))).await;
    assert_eq!(next(&mut keyed).await["type"], "no-active");
    let padded = format!(
        "{{\"type\":\"resume\",\"padding\":\"{}\"}}",
        "x".repeat(100_000)
    );
    keyed.send(Message::Text(padded.into())).await?;
    let frame = next(&mut keyed).await;
    assert!(
        frame["errorText"]
            .as_str()
            .is_some_and(|t| t.starts_with("not a frame of this protocol")),
        "read and answered: {frame}"
    );
    Ok(())
}

/// With `maxConnections: 8`, eight sockets that never name a key held
/// every slot for good: a keyed request was closed at once, for as long as
/// they talked. Now they are closed at their deadline and it is served.
#[tokio::test]
async fn keyless_sockets_do_not_keep_a_keyed_request_out() {
    let server = keyed(
        "live: {keyDeadlineSecs: 1}\nserver: {maxConnections: 8, maxConnectionsPerPeer: 8}\n",
    )
    .await;
    let mut sockets = Vec::new();
    for _ in 0..8 {
        sockets.push(connect(&server).await);
    }
    let keyed_request = || async {
        let reply = reqwest::Client::new()
            .get(format!("{}/api/tools", server.url))
            .header("authorization", "Bearer alice-key")
            .send()
            .await
            .map_err(|e| e.to_string())?;
        match reply.status().as_u16() {
            200 => Ok(()),
            status => Err(format!("status {status}")),
        }
    };
    assert!(keyed_request().await.is_err(), "every slot is taken");
    // They keep talking, keyless; the keyed request gets in.
    let deadline = tokio::time::Instant::now() + common::wait::PATIENCE;
    loop {
        for socket in &mut sockets {
            let frame = resume("r", None);
            let _ = socket.send(Message::Text(frame.to_string().into())).await;
        }
        match keyed_request().await {
            Ok(()) => break,
            Err(seen) => assert!(
                tokio::time::Instant::now() < deadline,
                "the keyed request was never served: {seen}"
            ),
        }
        tokio::time::sleep(common::wait::POLL).await;
    }
}
