//! A new message while a card is open: answered as an ordinary turn, the
//! card stays answerable, and once decided its outcome reaches the chat in
//! a later message (`data-toolgate-outcome`); or, with `onNewMessage:
//! cancel`, the card is closed as cancelled.

use crate::common;
use crate::common::assert_contains;

use common::{Server, fixture, user_says};
use serde_json::{Value, json};

/// The chat so far (ending with the open card), then the user's new message.
fn moved_on(mut chat: Value, text: &str) -> Value {
    chat["toolgate"] = chat.get("toolgate").cloned().unwrap_or(json!({}));
    let messages = chat["messages"].as_array_mut();
    if let Some(messages) = messages {
        let n = messages.len();
        messages.push(json!({"id": format!("u{n}"), "role": "user", "parts": [{"type": "text", "text": text}]}));
    }
    chat
}

/// The card of `fixture` left open: ADK's as asked, or native's
/// `approval-requested`.
fn open_card(native: bool) -> Value {
    if !native {
        return fixture("pay_hanako_unanswered.json");
    }
    let mut chat = fixture("native_approved.json");
    chat["messages"][1]["parts"][1]["state"] = json!("approval-requested");
    chat["messages"][1]["parts"][1]["approval"] = json!({"id": "approval-3"});
    chat
}

fn outcomes(reply: &common::Reply) -> Vec<Value> {
    reply
        .of_type("data-toolgate-outcome")
        .into_iter()
        .map(|c| c["data"].clone())
        .collect()
}

async fn a_card_left_open_stays_answerable_and_its_outcome_comes_later(native: bool) {
    let server = Server::start().await;
    let mut first = user_says("chat-pay", "Send 50 USD to Hanako");
    if native {
        first["toolgate"] = json!({"protocol": "ai-sdk"});
    }
    server.chat(&first).await;
    let id = if native { "approval-3" } else { "adk-3" };

    // A new message while the card is open: an ordinary turn.
    let weather = server
        .chat(&moved_on(open_card(native), "What's the weather in Paris?"))
        .await;
    assert!(weather.text().contains("Paris"), "{}", weather.body);
    assert!(outcomes(&weather).is_empty(), "{}", weather.body);
    let open = server.get("/api/confirmations?chatId=chat-pay").await;
    assert!(open.body.contains(id), "still open: {}", open.body);

    // Decided elsewhere; the chat's next message brings the outcome.
    let decided = server.approve(&id).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    assert_eq!(server.payments(), 1);
    let later = server.chat(&moved_on(open_card(native), "Thanks")).await;
    let brought = outcomes(&later);
    assert_eq!(brought.len(), 1, "{}", later.body);
    assert_eq!(brought[0]["confirmationId"], id);
    assert_eq!(brought[0]["toolCallId"], "call-2");
    assert_eq!(brought[0]["outcome"]["kind"], "output");
    assert_eq!(brought[0]["outcome"]["output"]["status"], "completed");
    assert_eq!(server.payments(), 1, "reported, not run again");

    // Once the chat holds it, it is not brought again.
    let mut held = moved_on(open_card(native), "Thanks");
    let message = json!({"id": "msg-9", "role": "assistant", "parts": [
        {"type": "data-toolgate-outcome", "id": id, "data": brought[0]},
        {"type": "text", "text": "You're welcome.", "state": "done"}
    ]});
    if let Some(messages) = held["messages"].as_array_mut() {
        messages.push(message);
        messages
            .push(json!({"id": "u9", "role": "user", "parts": [{"type": "text", "text": "Bye"}]}));
    }
    let after = server.chat(&held).await;
    assert!(outcomes(&after).is_empty(), "{}", after.body);
}

#[tokio::test]
async fn an_adk_card_left_open_stays_answerable_and_its_outcome_comes_later() {
    a_card_left_open_stays_answerable_and_its_outcome_comes_later(false).await;
}

#[tokio::test]
async fn a_native_card_left_open_stays_answerable_and_its_outcome_comes_later() {
    a_card_left_open_stays_answerable_and_its_outcome_comes_later(true).await;
}

#[tokio::test]
async fn on_new_message_cancel_closes_the_card() -> anyhow::Result<()> {
    let server = Server::from_yaml(
        "toolConfirmation:\n  tools:\n    process_payment: {onNewMessage: cancel}\n",
    )
    .await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let reply = server
        .chat(&moved_on(
            open_card(false),
            "Never mind, what's the weather in Paris?",
        ))
        .await;
    let brought = outcomes(&reply);
    assert_eq!(brought.len(), 1, "{}", reply.body);
    assert_eq!(brought[0]["outcome"], json!({"kind": "cancelled"}));
    let late = server.approve("adk-3").await;
    assert_eq!(late.status, 409, "{}", late.body);
    assert!(late.body.contains("was cancelled"), "{}", late.body);
    assert_eq!(server.payments(), 0);
    let audit = server.get("/api/audit?chatId=chat-pay").await;
    assert!(
        audit.body.contains(r#""decision":"cancelled""#),
        "{}",
        audit.body
    );
    Ok(())
}

/// On `/live`, a new message while a held turn waits is its own turn; the
/// held one keeps waiting, and goes on once someone decides.
#[tokio::test]
async fn on_the_socket_a_new_message_does_not_end_the_held_turn() {
    use common::ws::{asking, lines, until_end, whole_turn};
    let server = Server::start().await;
    let (mut socket, mut first) = asking(&server, "chat-pay").await;
    let mut next = moved_on(open_card(false), "What's the weather in Paris?");
    next["toolgate"] = json!({"flow": "hold"});
    let second = whole_turn(&mut socket, "r2", &next).await;
    let answered = lines(&second);
    assert_contains(&answered, "Paris");
    assert_eq!(server.payments(), 0);

    let decided = server.approve("adk-3").await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    until_end(&mut socket, &mut first, "r1").await;
    let held_turn = lines(&first);
    assert_contains(&held_turn, r#""type":"tool-output-available""#);
    assert_contains(&held_turn, r#""finishReason":"stop""#);
    assert_eq!(server.payments(), 1);
}

/// Over SSE, a held stream still read goes on after a new message is
/// answered on another request.
#[tokio::test]
async fn over_sse_a_new_message_does_not_end_the_held_turn() {
    use futures::StreamExt;
    let server = Server::start().await;
    let mut first = user_says("chat-pay", "Send 50 USD to Hanako");
    first["toolgate"] = json!({"flow": "hold"});
    let mut held = server.open(&first).await;
    let mut seen = String::new();
    while !seen.contains("originalFunctionCall") {
        match held.next().await {
            Some(Ok(piece)) => seen.push_str(&String::from_utf8_lossy(&piece)),
            other => panic!("{other:?} in {seen}"),
        }
    }
    let weather = server
        .chat(&moved_on(open_card(false), "What's the weather in Paris?"))
        .await;
    assert!(weather.text().contains("Paris"), "{}", weather.body);
    let decided = server.approve("adk-3").await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    while let Some(Ok(piece)) = held.next().await {
        seen.push_str(&String::from_utf8_lossy(&piece));
    }
    assert_contains(&seen, r#""type":"tool-output-available""#);
    assert_contains(&seen, "[DONE]");
    assert_eq!(server.payments(), 1);
}
