//! One judgment of an answer: the same malformed answer is refused on
//! `/stream` (400 before the turn starts), on `/live` (an `error` frame) and
//! by `POST /api/confirmations/{id}` (400); nothing runs, nothing is
//! recorded, and the question stays open for a proper answer.

use crate::common;

use common::ws::{connect, next, send};
use common::{Server, approval, transaction};
use serde_json::{Value, json};

/// The answer keys every carrier refuses.
fn malformed() -> Vec<Value> {
    vec![
        json!({"approveNext": -1}),
        json!({"approveNext": 1e30}),
        json!({"approveNext": "3"}),
        json!({"remember": "forever"}),
        json!({"remember": {"scope": "window", "minutes": 0}}),
        json!({"remember": {"scope": "window", "minutes": 43_201}}),
        json!({"remember": {"scope": "window", "minutes": 60, "chatId": "x"}}),
    ]
}

fn with(mut answer: Value, keys: &Value) -> Value {
    if let (Some(answer), Some(keys)) = (answer.as_object_mut(), keys.as_object()) {
        answer.extend(keys.clone());
    }
    answer
}

#[tokio::test]
async fn the_same_malformed_answer_is_refused_on_stream_live_and_the_api() {
    let server = Server::start().await;
    let first = server.says("chat-pay", "Send 50 USD to Hanako").await;
    let good = approval("chat-pay", &first);
    let id = first.of_type("tool-input-available")[0]["toolCallId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let audit = server.get("/api/audit").await.body;
    let long = "x".repeat(300);

    for keys in malformed() {
        let mut body = good.clone();
        let output = &mut body["messages"][1]["parts"][1]["output"];
        *output = with(json!({"confirmed": true}), &keys);
        let reply = server.chat(&body).await;
        assert_eq!(reply.status, 400, "/stream with {keys}: {}", reply.body);

        let url = format!("/api/confirmations/{id}");
        let reply = server
            .post(&url, with(json!({"approved": true}), &keys).to_string())
            .await;
        assert_eq!(reply.status, 400, "the API with {keys}: {}", reply.body);

        let mut socket = connect(&server).await;
        let frame =
            json!({"type": "confirm", "confirmationId": id, "confirmed": true, "requestId": "r1"});
        send(&mut socket, with(frame, &keys)).await;
        let frame = next(&mut socket).await;
        assert_eq!(
            (frame["type"].clone(), frame["requestId"].clone()),
            (json!("error"), json!("r1")),
            "/live with {keys}"
        );
    }

    // An id over 256 bytes: refused, and never repeated whole.
    let mut body = good.clone();
    body["messages"][1]["parts"][1]["toolCallId"] = json!(long);
    let reply = server.chat(&body).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(!reply.body.contains(&long), "{}", reply.body);
    let mut body = good.clone();
    body["id"] = json!(long);
    assert_eq!(server.chat(&body).await.status, 400);
    let reply = server.approve(&long).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(!reply.body.contains(&long), "{}", reply.body);
    let mut socket = connect(&server).await;
    let frame =
        json!({"type": "confirm", "confirmationId": long, "confirmed": true, "requestId": "r2"});
    send(&mut socket, frame).await;
    let frame = next(&mut socket).await;
    assert_eq!(frame["type"], "error", "{frame}");
    assert!(!frame.to_string().contains(&long), "{frame}");

    assert_eq!(server.payments(), 0, "nothing ran on a malformed answer");
    assert_eq!(
        server.get("/api/audit").await.body,
        audit,
        "nothing recorded"
    );
    // The question is still open: a proper answer runs the call.
    assert!(transaction(&server.chat(&good).await).is_some());
    assert_eq!(server.payments(), 1);
}
