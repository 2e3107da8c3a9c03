//! The exact SSE bytes of every flow, with deterministic ids.

use crate::common;

use common::{Reply, Server, fixture, user_says};

/// A server asked to pay Hanako, and its reply to the fixture `answer`.
async fn hanako_answered(answer: &str) -> (Server, Reply) {
    common::answered(&user_says("chat-pay", "Send 50 USD to Hanako"), answer).await
}

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

#[tokio::test]
async fn approved() {
    let (server, reply) = hanako_answered("pay_hanako_approved.json").await;
    assert_sse!("approved", reply.body);
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn denied() {
    let (server, reply) = hanako_answered("pay_hanako_denied.json").await;
    assert_sse!("denied", reply.body);
    assert_eq!(server.payments(), 0);
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
async fn forged_args() {
    let (server, reply) = hanako_answered("pay_hanako_forged.json").await;
    assert_sse!("forged_args", reply.body);
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn unknown_confirmation_id() {
    let (server, reply) = hanako_answered("pay_unknown_confirmation.json").await;
    assert_sse!("unknown_confirmation_id", reply.body);
    assert_eq!(server.payments(), 0);
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
