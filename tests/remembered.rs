//! Answers richer than yes/no: remember the approval for this chat (which
//! also settles the other open questions it covers), and approve the next N.

mod common;

use common::{Server, fixture, user_says};

fn asked(reply: &common::Reply) -> usize {
    reply.of_type("tool-input-available").iter().filter(|c| c["toolName"] == "adk_request_confirmation").count()
}

#[tokio::test]
async fn remember_for_this_chat() {
    let server = Server::start().await;
    server.chat(&user_says("chat-pay", "Send 50 USD to Hanako and pay $20 to Bob")).await;
    // Hanako's answered with "remember for this chat"; Bob's is still open and gets settled.
    let reply = server.chat(&fixture("pay_two_remember_session.json")).await;
    assert_sse!("remember_session", reply.body);
    assert_eq!(server.payments(), 2);

    let again = server.chat(&user_says("chat-pay", "Send 5 USD to Carol")).await;
    assert_eq!(asked(&again), 0, "{}", again.body);
    assert_eq!(server.payments(), 3);
    let elsewhere = server.chat(&user_says("chat-other", "Send 5 USD to Carol")).await;
    assert_eq!(asked(&elsewhere), 1, "another chat still asks");
    assert_eq!(server.payments(), 3);
}

#[tokio::test]
async fn approve_the_next_n() {
    let server = Server::start().await;
    server.chat(&user_says("chat-pay", "Send 50 USD to Hanako")).await;
    let reply = server.chat(&fixture("pay_hanako_approve_next_1.json")).await;
    assert_sse!("approve_next_n", reply.body);
    assert_eq!(server.payments(), 1);

    let next = server.chat(&user_says("chat-pay", "Send 5 USD to Carol")).await;
    assert_eq!(asked(&next), 0, "the next one runs: {}", next.body);
    assert_eq!(server.payments(), 2);
    let after = server.chat(&user_says("chat-pay", "Send 6 USD to Dan")).await;
    assert_eq!(asked(&after), 1, "the budget is spent");
    assert_eq!(server.payments(), 2);
}
