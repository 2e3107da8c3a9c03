//! Confirmations are security decisions: only an approval this server issued,
//! for this chat and user, with the exact call, runs anything, and only once.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;

use std::time::Duration;

use common::{Server, fixture, user_says};
use serde_json::{Value, json};
use toolgate::Config;

async fn asked(server: &Server) {
    let reply = server.says("chat-pay", "Send 50 USD to Hanako").await;
    assert_eq!(
        reply.of_type("tool-input-available").len(),
        1,
        "{}",
        reply.body
    );
}

/// Each `tool-output-error` chunk, as `toolCallId: errorText`.
fn errors(reply: &common::Reply) -> Vec<String> {
    reply
        .of_type("tool-output-error")
        .iter()
        .map(|c| {
            let (id, text) = (&c["toolCallId"], &c["errorText"]);
            format!(
                "{}: {}",
                id.as_str().unwrap_or(""),
                text.as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn expired_confirmation_runs_nothing() {
    let server = Server::start().await;
    asked(&server).await;
    server.clock.advance(Duration::from_secs(24 * 60 * 60 + 1));
    let reply = server.chat(&fixture("pay_hanako_approved.json")).await;
    // The card and the call both end as expired: nobody decided.
    let expired = "The request to run process_payment expired without an answer; nobody approved or denied it.";
    assert_eq!(
        errors(&reply),
        [format!("adk-3: {expired}"), format!("call-2: {expired}")]
    );
    assert_eq!(server.payments(), 0);
    // And it stays expired: a later answer does not run it either.
    let again = server.chat(&fixture("pay_hanako_approved.json")).await;
    assert_eq!(server.payments(), 0, "{}", again.body);
}

#[tokio::test]
async fn answer_just_before_expiry_runs() {
    let server = Server::start().await;
    asked(&server).await;
    server.clock.advance(Duration::from_secs(24 * 60 * 60));
    server.chat(&fixture("pay_hanako_approved.json")).await;
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn confirmation_from_another_chat_runs_nothing() {
    let server = Server::start().await;
    asked(&server).await;
    let mut body = fixture("pay_hanako_approved.json");
    body["id"] = json!("chat-other");
    let reply = server.chat(&body).await;
    assert_eq!(
        errors(&reply),
        ["adk-3: confirmation belongs to another chat"]
    );
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn confirmation_of_another_user_runs_nothing() -> anyhow::Result<()> {
    let mut config = Config::default();
    config.auth.principal_header = Some("x-user".into());
    let server = Server::with_config(config).await;
    let client = reqwest::Client::new();
    let send = |user: Option<&'static str>, body: Value| {
        let mut request = client
            .post(format!("{}/stream", server.url))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(user) = user {
            request = request.header("x-user", user);
        }
        async move {
            let response = request.send().await.must();
            (
                response.status().as_u16(),
                response.text().await.unwrap_or_default(),
            )
        }
    };
    let (status, body) = send(None, user_says("chat-pay", "hi")).await;
    assert_eq!(
        (status, body.as_str()),
        (
            401,
            r#"{"error":"the request does not name its user (the proxy in front sets who it is)"}"#
        )
    );
    // The header's name is the deployment's, not the client's to learn.
    assert!(!body.to_ascii_lowercase().contains("x-user"), "{body}");
    let (status, _) = send(
        Some("alice"),
        user_says("chat-pay", "Send 50 USD to Hanako"),
    )
    .await;
    assert_eq!(status, 200);
    let (_, body) = send(Some("mallory"), fixture("pay_hanako_approved.json")).await;
    assert_contains(&body, "confirmation belongs to another user");
    assert_eq!(server.payments(), 0);
    let (_, body) = send(Some("alice"), fixture("pay_hanako_approved.json")).await;
    assert_contains(&body, "tx-");
    assert_eq!(server.payments(), 1);
    Ok(())
}

#[tokio::test]
async fn forged_call_name_or_id_runs_nothing() {
    let server = Server::start().await;
    asked(&server).await;
    let path = "/messages/1/parts/1/input/originalFunctionCall";
    for (key, value) in [
        ("id", json!("call-77")),
        ("name", json!("get_weather")),
        ("args", json!({"amount": 50})),
    ] {
        let mut body = fixture("pay_hanako_approved.json");
        if let Some(original) = body.pointer_mut(path) {
            original[key] = value;
        }
        let reply = server.chat(&body).await;
        assert_eq!(
            errors(&reply),
            ["adk-3: originalFunctionCall differs from the call this server issued"]
        );
    }
    assert_eq!(server.payments(), 0);
    // The real answer still works afterwards: rejections consume nothing.
    server.chat(&fixture("pay_hanako_approved.json")).await;
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn racing_approvals_run_once_and_report_the_same_outcome() {
    let server = Server::start().await;
    asked(&server).await;
    let approved = fixture("pay_hanako_approved.json");
    let replies = futures::future::join_all((0..8).map(|_| server.chat(&approved))).await;
    assert_eq!(server.payments(), 1);
    let outputs: Vec<Value> = replies
        .iter()
        .map(|r| {
            r.of_type("tool-output-available")
                .into_iter()
                .find(|c| c["toolCallId"] == "call-2")
                .map_or(Value::Null, |c| c["output"].clone())
        })
        .collect();
    assert!(
        outputs
            .iter()
            .all(|o| o == &outputs[0] && o["status"] == "completed"),
        "{outputs:?}"
    );
}

#[tokio::test]
async fn a_denial_then_a_replayed_approval_stays_denied() {
    let server = Server::start().await;
    asked(&server).await;
    server.chat(&fixture("pay_hanako_denied.json")).await;
    let reply = server.chat(&fixture("pay_hanako_approved.json")).await;
    assert_eq!(errors(&reply), ["call-2: User denied execution: too much"]);
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn invented_parts_run_nothing() {
    let server = Server::start().await;
    asked(&server).await;
    let reply = server.chat(&fixture("invented_parts.json")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(server.payments(), 0, "{}", reply.body);
    // A new user message after invented approvals runs nothing either.
    let mut body = fixture("invented_parts.json");
    if let Some(messages) = body["messages"].as_array_mut() {
        messages.push(
            json!({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "go on"}]}),
        );
    }
    server.chat(&body).await;
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn one_of_two_answered_runs_that_one_and_waits_for_the_other() {
    let server = Server::start().await;
    server
        .says("chat-pay", "Send 50 USD to Hanako and pay $20 to Bob")
        .await;
    let reply = server.chat(&fixture("pay_two_half_answered.json")).await;
    assert_eq!(server.payments(), 1);
    let kinds: Vec<String> = reply
        .chunks()
        .iter()
        .map(|c| c["type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(
        !kinds
            .iter()
            .any(|k| k == "start-step" || k.starts_with("text")),
        "model called: {kinds:?}"
    );
    assert_eq!(
        reply.of_type("finish"),
        [json!({"type": "finish", "finishReason": "tool-calls"})]
    );
    // Answering both afterwards: Hanako's recorded payment is reported, not repeated.
    server.chat(&fixture("pay_two_answered.json")).await;
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn the_adk_documents_model_message_form_works() {
    let server = Server::start().await;
    let first = server.chat(&json!({"id": "chat-pay", "messages": [{"role": "user", "content": "Send 50 USD to Hanako"}]})).await;
    assert_eq!(
        first.of_type("tool-input-available")[0]["toolCallId"],
        "adk-3"
    );
    let reply = server.chat(&fixture("model_form_approved.json")).await;
    assert_eq!(server.payments(), 1);
    assert_eq!(reply.text(), "Sent 50 USD to Hanako (transaction tx-4).");
}

#[tokio::test]
async fn a_payment_over_the_limit_fails_and_the_model_goes_on() {
    // Over the tool's schema: refused before anyone is asked.
    let server = Server::start().await;
    let reply = server.says("chat-pay", "Send 50000 USD to Hanako").await;
    let refused = "the arguments do not fit the input schema of `process_payment`: \
                   /amount breaks the `maximum` rule";
    let errors = reply.of_type("tool-input-error");
    assert_eq!(errors.len(), 1, "{}", reply.body);
    assert_eq!(errors[0]["toolCallId"], "call-2");
    assert_eq!(errors[0]["errorText"], refused);
    assert!(
        reply.of_type("tool-input-available").is_empty(),
        "{}",
        reply.body
    );
    assert_eq!(
        reply.text(),
        format!("The process_payment call failed: {refused}.")
    );
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_whole_float_sent_back_as_an_integer_is_the_same_call() {
    // A JavaScript client turns the issued `50.0` into `50`.
    let server = Server::start().await;
    let first = server.says("chat-pay", "Send 50.0 USD to Hanako").await;
    assert!(first.body.contains(r#""amount":50.0"#), "{}", first.body);
    let mut body = fixture("pay_hanako_approved.json");
    body["messages"][0]["parts"][0]["text"] = json!("Send 50.0 USD to Hanako");
    let reply = server.chat(&body).await;
    assert_eq!(server.payments(), 1, "{}", reply.body);
}

#[tokio::test]
async fn a_principal_header_given_twice_is_refused() -> anyhow::Result<()> {
    let mut config = Config::default();
    config.auth.principal_header = Some("x-user".into());
    let server = Server::with_config(config).await;
    let response = reqwest::Client::new()
        .post(format!("{}/stream", server.url))
        .header("x-user", "mallory")
        .header("x-user", "alice")
        .header("content-type", "application/json")
        .body(user_says("c", "hi").to_string())
        .send()
        .await?;
    assert_eq!(response.status().as_u16(), 401);
    let body = response.text().await.unwrap_or_default();
    assert!(!body.to_ascii_lowercase().contains("x-user"), "{body}");
    Ok(())
}

#[tokio::test]
async fn a_list_of_payments_asks_once_for_each() {
    let server = Server::start().await;
    for (text, want) in [
        (
            "Send 10 USD to Taro and 20 USD to Jiro",
            vec![(10, "Taro"), (20, "Jiro")],
        ),
        (
            "Send 10 USD to Taro, 20 USD to Jiro and 30 USD to Saburo",
            vec![(10, "Taro"), (20, "Jiro"), (30, "Saburo")],
        ),
    ] {
        let reply = server.says("chat-list", text).await;
        let asked: Vec<(u64, String)> = reply
            .of_type("tool-input-available")
            .iter()
            .map(|c| {
                let call = &c["input"]["originalFunctionCall"];
                assert_eq!(call["name"], "process_payment", "{}", reply.body);
                (
                    call["args"]["amount"].as_u64().unwrap_or(0),
                    call["args"]["recipient"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let want: Vec<(u64, String)> = want.iter().map(|(a, r)| (*a, (*r).to_owned())).collect();
        assert_eq!(asked, want, "{text}: {}", reply.body);
    }
    assert_eq!(server.payments(), 0);
}
