//! Answers richer than yes/no: remember the approval for this chat (which
//! also settles the other open questions it covers), and approve the next N.

use crate::common;
use crate::common::Must;
use crate::common::from_json;

use std::time::Duration;

use common::{Server, asked, fixture, user_says};

#[tokio::test]
async fn remember_for_this_chat() {
    let server = Server::start().await;
    server
        .says("chat-pay", "Send 50 USD to Hanako and pay $20 to Bob")
        .await;
    // Hanako's answered with "remember for this chat"; Bob's is still open and gets settled.
    let reply = server.chat(&fixture("pay_two_remember_session.json")).await;
    assert_sse!("remember_session", reply.body);
    assert_eq!(server.payments(), 2);

    let again = server.says("chat-pay", "Send 5 USD to Carol").await;
    assert_eq!(asked(&again), 0, "{}", again.body);
    assert_eq!(server.payments(), 3);
    let elsewhere = server.says("chat-other", "Send 5 USD to Carol").await;
    assert_eq!(asked(&elsewhere), 1, "another chat still asks");
    assert_eq!(server.payments(), 3);
}

#[tokio::test]
async fn approve_the_next_n() {
    let server = Server::start().await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let reply = server
        .chat(&fixture("pay_hanako_approve_next_1.json"))
        .await;
    assert_sse!("approve_next_n", reply.body);
    assert_eq!(server.payments(), 1);

    let next = server.says("chat-pay", "Send 5 USD to Carol").await;
    assert_eq!(asked(&next), 0, "the next one runs: {}", next.body);
    assert_eq!(server.payments(), 2);
    let after = server.says("chat-pay", "Send 6 USD to Dan").await;
    assert_eq!(asked(&after), 1, "the budget is spent");
    assert_eq!(server.payments(), 2);
}

#[tokio::test]
async fn remembered_approvals_are_listed_and_revoked_by_their_user_only() -> anyhow::Result<()> {
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
        async move { request.send().await.map(|_| ()).must() }
    };
    let list = |user: &'static str| {
        let request = as_user(user, client.get(format!("{}/api/approvals", server.url)));
        async move {
            let text = request.send().await.must().text().await.unwrap_or_default();
            from_json::<serde_json::Value>(&text)
        }
    };
    let revoke = |user: &'static str, id: String| {
        let request = as_user(
            user,
            client.delete(format!("{}/api/approvals/{id}", server.url)),
        );
        async move { request.send().await.must().status().as_u16() }
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
    Ok(())
}

/// `chat`'s answer to the question `first` asked, with `remember` as given.
fn approve_remembering(
    chat: &str,
    first: &common::Reply,
    remember: serde_json::Value,
) -> serde_json::Value {
    let mut body = common::approval(chat, first);
    body["messages"][1]["parts"][1]["output"]["remember"] = remember;
    body
}

/// The approving event's `by` in the audit log.
async fn approved_by(server: &Server) -> Vec<String> {
    let audit = server.get("/api/audit").await;
    audit
        .json_lines()
        .into_iter()
        .filter(|event| event["decision"] == "approved")
        .filter_map(|event| event["by"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_window_grant_reaches_every_chat_until_its_window_ends() {
    let server = Server::start().await;
    let first = server.says("chat-pay", "Send 50 USD to Hanako").await;
    let window = serde_json::json!({"scope": "window", "minutes": 60});
    let reply = server
        .chat(&approve_remembering("chat-pay", &first, window))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(server.payments(), 1);
    assert_eq!(
        approved_by(&server).await,
        ["user, remembered for 60 minutes"]
    );

    let listed = server.get("/api/approvals").await;
    let listed: serde_json::Value = from_json(&listed.body);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["tool"], "internal--process_payment");
    assert_eq!(listed[0]["chatId"], serde_json::Value::Null, "every chat");
    assert_eq!(listed[0]["createdAtMs"], common::START_MS);
    assert_eq!(listed[0]["expiresAtMs"], common::START_MS + 60 * 60 * 1000);

    // Another chat of the same user, within the window: runs without asking.
    server.clock.advance(Duration::from_secs(60 * 60 - 1));
    let elsewhere = server.says("chat-other", "Send 5 USD to Carol").await;
    assert_eq!(asked(&elsewhere), 0, "{}", elsewhere.body);
    assert_eq!(server.payments(), 2);

    // The window is over: it asks again, and the grant is no longer listed.
    server.clock.advance(Duration::from_secs(1));
    let after = server.says("chat-third", "Send 6 USD to Dan").await;
    assert_eq!(asked(&after), 1, "{}", after.body);
    assert_eq!(server.payments(), 2);
    assert_eq!(server.get("/api/approvals").await.body, "[]");
}

#[tokio::test]
async fn once_is_never_remembered() {
    for remember in [serde_json::json!("once"), serde_json::Value::Null] {
        let server = Server::start().await;
        let first = server.says("chat-pay", "Send 50 USD to Hanako").await;
        let reply = server
            .chat(&approve_remembering("chat-pay", &first, remember.clone()))
            .await;
        assert_eq!(reply.status, 200, "{remember}: {}", reply.body);
        assert_eq!(server.payments(), 1, "{remember}");
        assert_eq!(server.get("/api/approvals").await.body, "[]", "{remember}");
        assert_eq!(approved_by(&server).await, ["user"], "{remember}");
        let again = server.says("chat-pay", "Send 5 USD to Carol").await;
        assert_eq!(asked(&again), 1, "{remember}: it asks again");
    }
}

/// Through `POST /api/confirmations/{id}` too; a window out of range is
/// refused with the whole answer.
#[tokio::test]
async fn a_window_grant_through_the_api() {
    let server = Server::start().await;
    let first = server.says("chat-pay", "Send 50 USD to Hanako").await;
    let id = first.of_type("tool-input-available")[0]["toolCallId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let path = format!("/api/confirmations/{id}");
    let refused = server
        .post(
            &path,
            r#"{"approved": true, "remember": {"scope": "window", "minutes": 43201}}"#,
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(server.payments(), 0);
    let decided = server
        .post(
            &path,
            r#"{"approved": true, "remember": {"scope": "window", "minutes": 43200}}"#,
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    let listed: serde_json::Value =
        serde_json::from_str(&server.get("/api/approvals").await.body).unwrap_or_default();
    assert_eq!(
        listed[0]["expiresAtMs"],
        common::START_MS + 30 * 24 * 60 * 60 * 1000
    );
}
