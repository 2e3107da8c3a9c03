//! One behavioural suite, run through HTTP against every store backend:
//! memory, SQLite and, with the `redis-server` feature, Redis.

use crate::common;
use crate::common::Must;

use std::time::Duration;

use common::{Server, fixture, user_says};
use serde_json::json;
use toolgate::Config;

/// A server on a fresh store of the given kind. The temporary folder lives
/// as long as the server.
async fn server(kind: &str) -> (Server, Option<tempfile::TempDir>) {
    server_with(kind, Config::default()).await
}

/// The same with `config`.
async fn server_with(kind: &str, config: Config) -> (Server, Option<tempfile::TempDir>) {
    Server::on_backend(kind, config).await
}

async fn approved_once_and_replayed(kind: &str) {
    let (server, _dir) = server(kind).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let approved = fixture("pay_hanako_approved.json");
    let first = server.chat(&approved).await;
    let replay = server.chat(&approved).await;
    assert_eq!(server.payments(), 1);
    let output = |r: &common::Reply| {
        r.of_type("tool-output-available")
            .into_iter()
            .find(|c| c["toolCallId"] == "call-2")
    };
    assert_eq!(output(&first), output(&replay));
}

async fn a_hundred_racing_approvals_run_once(kind: &str) {
    let (server, _dir) = server(kind).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let approved = fixture("pay_hanako_approved.json");
    futures::future::join_all((0..100).map(|_| server.chat(&approved))).await;
    assert_eq!(server.payments(), 1);
}

async fn forged_and_foreign_answers_run_nothing(kind: &str) {
    let (server, _dir) = server(kind).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let forged = server.chat(&fixture("pay_hanako_forged.json")).await;
    assert_eq!(
        forged.error_texts(),
        ["originalFunctionCall differs from the call this server issued"]
    );
    let mut other_chat = fixture("pay_hanako_approved.json");
    other_chat["id"] = json!("chat-other");
    assert_eq!(
        server.chat(&other_chat).await.error_texts(),
        ["confirmation belongs to another chat"]
    );
    let unknown = server.chat(&fixture("pay_unknown_confirmation.json")).await;
    assert_eq!(
        unknown.error_texts(),
        ["confirmation `adk-99` was not issued by this server"]
    );
    assert_eq!(server.payments(), 0);
}

async fn a_denial_stays_a_denial(kind: &str) {
    let (server, _dir) = server(kind).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    server.chat(&fixture("pay_hanako_denied.json")).await;
    let approved = server.chat(&fixture("pay_hanako_approved.json")).await;
    assert_eq!(approved.error_texts(), ["User denied execution: too much"]);
    assert_eq!(server.payments(), 0);
}

async fn an_expired_confirmation_runs_nothing(kind: &str) {
    let (server, _dir) = server(kind).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    server.clock.advance(Duration::from_secs(24 * 60 * 60 + 1));
    let late = server.chat(&fixture("pay_hanako_approved.json")).await;
    // The card and the call both end as expired: nobody decided.
    let expired = "The request to run process_payment expired without an answer; nobody approved or denied it.";
    assert_eq!(late.error_texts(), [expired, expired]);
    assert_eq!(server.payments(), 0);
}

fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml).must()
}

/// A decision after the window: 410, and the question ended as expired.
async fn a_late_decision_is_gone(kind: &str) {
    let (server, _dir) = server(kind).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    server.clock.advance(Duration::from_secs(24 * 60 * 60 + 1));
    let late = server.approve("adk-3").await;
    assert_eq!(late.status, 410, "{}", late.body);
    assert_eq!(late.json()["outcome"], json!({"kind": "expired"}));
    let again = server.decide("adk-3", r#"{"approved": false}"#).await;
    assert_eq!(again.status, 410, "{}", again.body);
    assert_eq!(server.payments(), 0);
}

/// Four eyes: the asker may not approve, a finance approver may, once.
async fn an_approver_decides(kind: &str) {
    let yaml = "auth:\n  principalHeader: X-User\n  roles: {finance: [lead]}\n\
        toolConfirmation:\n  tools:\n    process_payment: {approvers: [role:finance], requireDistinctApprover: true}\n";
    let (server, _dir) = server_with(kind, config(yaml)).await;
    let ask = user_says("chat-pay", "Send 50 USD to Hanako").to_string();
    server
        .post_with("/stream", &[("x-user", "clerk")], ask)
        .await;
    let path = "/api/confirmations/adk-3";
    let approve = r#"{"approved": true}"#;
    let own = server
        .post_with(path, &[("x-user", "clerk")], approve)
        .await;
    assert_eq!(own.status, 403, "{}", own.body);
    let lead = server.post_with(path, &[("x-user", "lead")], approve).await;
    assert_eq!(lead.status, 200, "{}", lead.body);
    let again = server.post_with(path, &[("x-user", "lead")], approve).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(server.payments(), 1);
}

/// The chat so far, with its card open, and a new message.
fn moved_on(text: &str) -> serde_json::Value {
    let mut chat = fixture("pay_hanako_unanswered.json");
    if let Some(messages) = chat["messages"].as_array_mut() {
        messages
            .push(json!({"id": "u2", "role": "user", "parts": [{"type": "text", "text": text}]}));
    }
    chat
}

/// A card left open: decided later, its outcome comes with the next
/// message; with `onNewMessage: cancel`, it is closed.
async fn a_card_left_open(kind: &str) {
    let (server, _dir) = server(kind).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let outcome = |reply: &common::Reply| {
        reply
            .of_type("data-toolgate-outcome")
            .first()
            .map(|c| c["data"]["outcome"]["kind"].clone())
    };
    assert_eq!(outcome(&server.chat(&moved_on("hello")).await), None);
    let decided = server.approve("adk-3").await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    assert_eq!(
        outcome(&server.chat(&moved_on("thanks")).await),
        Some(json!("output"))
    );
    assert_eq!(server.payments(), 1);

    let yaml = "toolConfirmation:\n  tools:\n    process_payment: {onNewMessage: cancel}\n";
    let (server, _dir) = server_with(kind, config(yaml)).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    assert_eq!(
        outcome(&server.chat(&moved_on("never mind")).await),
        Some(json!("cancelled"))
    );
    let late = server.approve("adk-3").await;
    assert_eq!(late.status, 409, "{}", late.body);
    assert_eq!(server.payments(), 0);
}

/// One `#[tokio::test]` per case, each the shared case run on `$backend`.
macro_rules! cases {
    ($backend:ident: $($case:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $case() {
            super::$case(stringify!($backend)).await;
        }
    )*};
}

macro_rules! suite {
    ($($backend:ident),*) => {$(
        mod $backend {
            cases!($backend:
                approved_once_and_replayed,
                a_hundred_racing_approvals_run_once,
                forged_and_foreign_answers_run_nothing,
                a_denial_stays_a_denial,
                an_expired_confirmation_runs_nothing,
                a_late_decision_is_gone,
                an_approver_decides,
                a_card_left_open,
            );
        }
    )*};
}

suite!(memory, sqlite);
#[cfg(feature = "redis-server")]
suite!(redis);
