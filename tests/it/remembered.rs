//! Answers richer than yes/no: remember the approval for this chat (which
//! also settles the other open questions it covers), and approve the next N.

use crate::common;

use common::{Server, fixture, user_says};

fn asked(reply: &common::Reply) -> usize {
    reply
        .of_type("tool-input-available")
        .iter()
        .filter(|c| c["toolName"] == "adk_request_confirmation")
        .count()
}

#[tokio::test]
async fn remember_for_this_chat() {
    let server = Server::start().await;
    server
        .chat(&user_says(
            "chat-pay",
            "Send 50 USD to Hanako and pay $20 to Bob",
        ))
        .await;
    // Hanako's answered with "remember for this chat"; Bob's is still open and gets settled.
    let reply = server.chat(&fixture("pay_two_remember_session.json")).await;
    assert_sse!("remember_session", reply.body);
    assert_eq!(server.payments(), 2);

    let again = server
        .chat(&user_says("chat-pay", "Send 5 USD to Carol"))
        .await;
    assert_eq!(asked(&again), 0, "{}", again.body);
    assert_eq!(server.payments(), 3);
    let elsewhere = server
        .chat(&user_says("chat-other", "Send 5 USD to Carol"))
        .await;
    assert_eq!(asked(&elsewhere), 1, "another chat still asks");
    assert_eq!(server.payments(), 3);
}

#[tokio::test]
async fn approve_the_next_n() {
    let server = Server::start().await;
    server
        .chat(&user_says("chat-pay", "Send 50 USD to Hanako"))
        .await;
    let reply = server
        .chat(&fixture("pay_hanako_approve_next_1.json"))
        .await;
    assert_sse!("approve_next_n", reply.body);
    assert_eq!(server.payments(), 1);

    let next = server
        .chat(&user_says("chat-pay", "Send 5 USD to Carol"))
        .await;
    assert_eq!(asked(&next), 0, "the next one runs: {}", next.body);
    assert_eq!(server.payments(), 2);
    let after = server
        .chat(&user_says("chat-pay", "Send 6 USD to Dan"))
        .await;
    assert_eq!(asked(&after), 1, "the budget is spent");
    assert_eq!(server.payments(), 2);
}

#[tokio::test]
async fn remembered_approvals_are_listed_and_revoked_by_their_user_only() {
    let mut config = toolgate::Config::default();
    config.auth.principal_header = Some("x-user".into());
    let server = Server::with_config(config).await;
    let client = reqwest::Client::new();
    let as_user =
        |user: &'static str, request: reqwest::RequestBuilder| request.header("x-user", user);
    let chat = |user: &'static str, body: serde_json::Value| {
        let request = as_user(user, client.post(format!("{}/stream", server.url)))
            .header("content-type", "application/json")
            .body(body.to_string());
        async move {
            request
                .send()
                .await
                .map(|_| ())
                .unwrap_or_else(|e| panic!("{e}"))
        }
    };
    let list = |user: &'static str| {
        let request = as_user(user, client.get(format!("{}/api/approvals", server.url)));
        async move {
            let text = request
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .text()
                .await
                .unwrap_or_default();
            serde_json::from_str::<serde_json::Value>(&text)
                .unwrap_or_else(|e| panic!("{e}: {text}"))
        }
    };
    let revoke = |user: &'static str, id: String| {
        let request = as_user(
            user,
            client.delete(format!("{}/api/approvals/{id}", server.url)),
        );
        async move {
            request
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .status()
                .as_u16()
        }
    };

    chat(
        "alice",
        user_says("chat-pay", "Send 50 USD to Hanako and pay $20 to Bob"),
    )
    .await;
    chat("alice", fixture("pay_two_remember_session.json")).await;
    let mine = list("alice").await;
    assert_eq!(mine.as_array().map(Vec::len), Some(1), "{mine}");
    assert_eq!(mine[0]["tool"], "internal--process_payment");
    assert_eq!(mine[0]["chatId"], "chat-pay");
    let id = mine[0]["id"].as_str().unwrap_or("").to_owned();

    assert_eq!(list("mallory").await, serde_json::json!([]));
    assert_eq!(revoke("mallory", id.clone()).await, 404);
    assert_eq!(revoke("alice", id.clone()).await, 204);
    assert_eq!(revoke("alice", id).await, 404);
    assert_eq!(list("alice").await, serde_json::json!([]));
    let paid = server.payments();
    chat("alice", user_says("chat-pay", "Send 5 USD to Carol")).await;
    assert_eq!(server.payments(), paid, "revoked: it asks again");
}
