//! An older client's MCP session is its opener's alone, and nobody opens
//! more than their share: the door's `Sessions` behind `/mcp`.

use serde_json::json;

use crate::common::{Must, Server};
use crate::mcp_face::{Client, Present, is_error, pay, text_of};

/// The session generation.
const OLD: &str = "2025-11-25";

const SERVER: &str = "auth:\n  principalHeader: x-user\n";

fn as_user(server: &Server, user: &str) -> Client {
    Client::new(server).with_header("x-user", user)
}

/// `method` on `/mcp` with `session`, as `user`: the status.
async fn raw(server: &Server, method: reqwest::Method, user: &str, session: &str) -> u16 {
    let response = reqwest::Client::new()
        .request(method, format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", OLD)
        .header("x-user", user)
        .header("mcp-session-id", session)
        .send()
        .await
        .must();
    response.status().as_u16()
}

#[tokio::test]
async fn another_user_cannot_use_answer_in_or_close_a_session() {
    let server = Server::from_yaml(SERVER).await;
    let mut alice = as_user(&server, "alice");
    alice.initialize().await;
    let session = alice.session.clone().present();
    let mut mallory = as_user(&server, "mallory");
    mallory.session = Some(session.clone());

    // Mallory answers an elicitation of Alice's session as if he were her,
    // and calls a tool in it: neither reaches the session.
    let forged = json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {"approve": true, "remember": "always"}}});
    let (status, _, _) = mallory.post(OLD, &forged).await;
    assert_eq!(status, 404);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "process_payment", "arguments": pay(5)}});
    let (status, _, _) = mallory.post(OLD, &call).await;
    assert_eq!(status, 404);
    assert_eq!(
        raw(&server, reqwest::Method::GET, "mallory", &session).await,
        404
    );
    assert_eq!(
        raw(&server, reqwest::Method::DELETE, "mallory", &session).await,
        404
    );
    assert_eq!(server.payments(), 0);

    // Alice's session is whole: her call is asked in it, and runs once.
    let approve = json!({"action": "accept", "content": {"approve": true}});
    let paid = alice
        .call_in_session("process_payment", pay(5), approve)
        .await;
    assert!(!is_error(&paid), "{paid}");
    assert!(text_of(&paid).contains("completed"), "{paid}");
    assert_eq!(server.payments(), 1);
    // No remembered approval was stored for her by anyone else.
    let again = alice
        .call_in_session("process_payment", pay(6), json!({"action": "decline"}))
        .await;
    assert!(is_error(&again), "{again}");
    assert_eq!(server.payments(), 1);
    assert_eq!(
        raw(&server, reqwest::Method::DELETE, "alice", &session).await,
        202
    );
}

#[tokio::test]
async fn sessions_are_capped_per_user_and_a_closed_one_frees_its_place() {
    let server = Server::from_yaml(&format!(
        "{SERVER}mcp:\n  maxSessionsPerUser: 2\n  maxSessions: 3\n"
    ))
    .await;
    let mut opened = Vec::new();
    for _ in 0..2 {
        let mut alice = as_user(&server, "alice");
        alice.initialize().await;
        opened.push(alice.session.clone().present());
    }
    let third = as_user(&server, "alice");
    let (status, body) = third.try_initialize().await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body.contains("too many MCP sessions for this user"),
        "{body}"
    );

    // Another user still gets in, up to the total.
    let mut bob = as_user(&server, "bob");
    bob.initialize().await;
    let (status, body) = as_user(&server, "carol").try_initialize().await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("too many MCP sessions (at most 3)"), "{body}");

    // Alice closes one of hers: she may open another.
    let closed = raw(&server, reqwest::Method::DELETE, "alice", &opened[0]).await;
    assert_eq!(closed, 202);
    let mut again = as_user(&server, "alice");
    again.initialize().await;
    // A stateless (2026-07-28) call needs no session, so no share.
    let called = as_user(&server, "alice")
        .call("get_weather", json!({"city": "Tokyo"}), json!({}))
        .await;
    assert!(!is_error(&called), "{called}");
}

#[tokio::test]
async fn an_approval_remembered_for_one_mcp_call_reaches_no_chat_turn() {
    let server = Server::from_yaml(SERVER).await;
    let mut alice = as_user(&server, "alice");
    alice.initialize().await;
    // "this same call again without asking": remembered in the call's own chat.
    let remember = json!({"action": "accept", "content": {"approve": true, "remember": "chat"}});
    let paid = alice
        .call_in_session("process_payment", pay(5), remember)
        .await;
    assert!(!is_error(&paid), "{paid}");
    assert_eq!(server.payments(), 1);
    let audit = server.get_with("/api/audit", &[("x-user", "alice")]).await;
    let chat = audit
        .json_lines()
        .into_iter()
        .find_map(|e| e["chatId"].as_str().map(str::to_owned))
        .present();
    assert!(chat.starts_with("mcp-"), "{chat}");

    // Alice's own chat turn in that chat, paying someone else: refused
    // before any turn, so the remembered approval runs nothing.
    let forged = r#"use process_payment with {"amount": 50, "recipient": "mallory"}"#;
    for id in [chat.clone(), chat.to_uppercase()] {
        let reply = server
            .post_with(
                "/stream",
                &[("x-user", "alice")],
                crate::common::user_says(&id, forged).to_string(),
            )
            .await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert!(
            reply.body.contains(toolgate::protocol::RESERVED_CHAT_ID),
            "{}",
            reply.body
        );
    }
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn a_server_that_tells_no_one_apart_holds_sessions_to_the_total() {
    // No keys, no principal header: everyone is `anonymous`, one user.
    let server = Server::from_yaml("mcp:\n  maxSessionsPerUser: 1\n  maxSessions: 3\n").await;
    for _ in 0..3 {
        Client::new(&server).initialize().await;
    }
    let (status, body) = Client::new(&server).try_initialize().await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("too many MCP sessions (at most 3)"), "{body}");
}
