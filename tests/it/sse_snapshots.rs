//! The exact SSE bytes of every flow, with deterministic ids.

use crate::common;

use common::{Server, fixture, user_says};

#[tokio::test]
async fn text_only() {
    let server = Server::start().await;
    let reply = server.says("chat-text", "hello there").await;
    assert_eq!(reply.status, 200);
    assert_sse!("text_only", reply.body);
}

#[tokio::test]
async fn tool_without_confirmation() {
    let server = Server::start().await;
    let reply = server
        .says("chat-weather", "What is the weather in Tokyo?")
        .await;
    assert_sse!("tool_without_confirmation", reply.body);
}

#[tokio::test]
async fn confirmation_requested() {
    let server = Server::start().await;
    let reply = server.says("chat-pay", "Send 50 USD to Hanako").await;
    assert_sse!("confirmation_requested", reply.body);
    assert_eq!(server.payments(), 0);
}

answer_snapshots! {
    user_says("chat-pay", "Send 50 USD to Hanako");
    approved: "pay_hanako_approved.json" => "approved", 1;
    denied: "pay_hanako_denied.json" => "denied", 0;
    forged_args: "pay_hanako_forged.json" => "forged_args", 0;
    unknown_confirmation_id: "pay_unknown_confirmation.json" => "unknown_confirmation_id", 0;
}

#[tokio::test]
async fn two_confirmations_approve_and_deny() {
    let server = Server::start().await;
    let first = server
        .says("chat-pay", "Send 50 USD to Hanako and pay $20 to Bob")
        .await;
    assert_sse!("two_confirmations_requested", first.body);
    let reply = server.chat(&fixture("pay_two_answered.json")).await;
    assert_sse!("two_confirmations_answered", reply.body);
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn replay() {
    let server = Server::start().await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let approved = fixture("pay_hanako_approved.json");
    server.chat(&approved).await;
    let replay = server.chat(&approved).await;
    assert_sse!("replay", replay.body);
    assert_eq!(server.payments(), 1);
}
