//! A chat id that cannot travel in a header and a URL path (beyond ASCII,
//! a `/`, a space) is refused where it comes in, on every face, with one
//! fixed text that does not repeat it, and nothing of a turn is streamed:
//! `x-workflow-run-id` is only ever a chat id a client reads back as sent.

use crate::common;

use common::ws::{connect, next, says, send, turn};
use common::{Reply, Server, user_says};
use serde_json::json;
use toolgate::protocol::BAD_CHAT_ID;

/// Ids no client can resume by: a header read as Latin-1 changes the
/// first two; a path splits or loses the others.
const UNTRAVELLED: &[&str] = &["café", "チャット", "a/b", "chat with spaces"];

/// The refusal: 400, the fixed text, not the id, and no turn.
fn assert_refused(reply: &Reply, id: &str, what: &str) {
    assert_eq!(reply.status, 400, "{what} {id:?}: {}", reply.body);
    assert!(
        reply.body.contains(BAD_CHAT_ID),
        "{what} {id:?}: {}",
        reply.body
    );
    assert!(
        !reply.body.contains(id),
        "{what}: the id is repeated: {}",
        reply.body
    );
    assert!(
        reply.headers.get("x-workflow-run-id").is_none(),
        "{what} {id:?}: a run named"
    );
    assert!(
        reply.chunks().is_empty(),
        "{what} {id:?}: streamed {}",
        reply.body
    );
}

#[tokio::test]
async fn sse_refuses_a_chat_id_a_header_cannot_carry() {
    let server = Server::start().await;
    for id in UNTRAVELLED {
        for path in ["/stream", "/api/chat"] {
            let reply = server.post(path, user_says(id, "hello").to_string()).await;
            assert_refused(&reply, id, path);
        }
    }
}

#[tokio::test]
async fn the_resume_routes_refuse_a_chat_id_a_header_cannot_carry() {
    let server = Server::start().await;
    for path in [
        "/stream/caf%C3%A9/stream",
        "/api/chat/caf%C3%A9/stream?startIndex=0",
        "/stream/a%2Fb/stream",
    ] {
        let reply = server.get(path).await;
        assert_refused(&reply, "café", path);
    }
}

/// The run id a turn's response names is the chat id, unchanged, for ids
/// of every kind clients make.
#[tokio::test]
async fn the_run_id_is_the_chat_id_as_sent() {
    let server = Server::start().await;
    for id in [
        "V1StGXR8_Z5jdHi6B-myT",
        "6f1c2f9e-3d4b-4a5e-9c7d-0e1f2a3b4c5d",
        "chat.v2~draft",
    ] {
        let reply = server
            .post("/stream", user_says(id, "hello").to_string())
            .await;
        assert_eq!(reply.status, 200, "{id}: {}", reply.body);
        let named = reply.headers.get("x-workflow-run-id").map(|v| v.as_bytes());
        assert_eq!(named, Some(id.as_bytes()), "{id}");
    }
}

#[tokio::test]
async fn live_refuses_a_chat_id_a_header_cannot_carry_with_an_error_frame() {
    let server = Server::start().await;
    let mut socket = connect(&server).await;
    send(&mut socket, turn("r1", &says("café", "hello"))).await;
    let sent = next(&mut socket).await;
    send(
        &mut socket,
        json!({"type": "resume", "requestId": "r2", "id": "café", "headers": {}, "body": {}}),
    )
    .await;
    let resumed = next(&mut socket).await;
    for (frame, request) in [(sent, "r1"), (resumed, "r2")] {
        assert_eq!(frame["type"], "error", "{frame}");
        assert_eq!(frame["requestId"], request, "{frame}");
        let text = frame["errorText"].as_str().unwrap_or_default();
        assert!(
            text.contains(BAD_CHAT_ID) && !text.contains("café"),
            "{frame}"
        );
    }
}

/// AG-UI's thread is the chat: the same rule, before `RUN_STARTED`.
#[tokio::test]
async fn ag_ui_refuses_a_thread_id_a_header_cannot_carry() {
    let server = Server::start().await;
    let body = json!({
        "threadId": "café", "runId": "r1", "tools": [], "context": [], "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
    });
    let reply = server.post("/ag-ui", body.to_string()).await;
    assert_refused(&reply, "café", "/ag-ui");
}
