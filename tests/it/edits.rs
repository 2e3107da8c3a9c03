//! Approving with edited arguments: only where the tool allows it, checked
//! against the tool's schema and the policy, and kept in the audit log.

use crate::common;
use crate::common::Must;

use common::{Server, fixture};
use serde_json::{Value, json};
use toolgate::Config;

fn editable() -> Config {
    let path = format!(
        "{}/tests/fixtures/config/editable.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    Config::load(std::path::Path::new(&path)).must()
}

fn edited(args: Value) -> Value {
    let mut body = fixture("pay_hanako_edited.json");
    body["messages"][1]["parts"][1]["output"]["editedArgs"] = args;
    body
}

#[tokio::test]
async fn an_edited_approval_runs_the_edit() {
    let server = Server::with_config(editable()).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let reply = server.chat(&fixture("pay_hanako_edited.json")).await;
    assert_sse!("edited_args", reply.body);
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn edits_are_checked_before_anything_runs() {
    let server = Server::with_config(editable()).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let bad = server
        .chat(&edited(json!({"amount": "lots", "recipient": "Hanako"})))
        .await;
    assert_eq!(
        bad.error_texts(),
        ["edited arguments are not valid: /amount breaks the `type` rule"]
    );
    let extra = server
        .chat(&edited(
            json!({"amount": 5, "recipient": "Hanako", "memo": "x"}),
        ))
        .await;
    assert!(
        extra.error_texts()[0].starts_with("edited arguments are not valid: "),
        "{:?}",
        extra.error_texts()
    );
    assert_eq!(server.payments(), 0);
    // A refused edit leaves the question open: a plain approval still works.
    server.chat(&fixture("pay_hanako_approved.json")).await;
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn an_edit_meets_the_policy_too() {
    let server = Server::with_config(editable()).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let reply = server
        .chat(&edited(
            json!({"amount": 9000, "recipient": "Hanako", "currency": "USD"}),
        ))
        .await;
    assert_eq!(
        reply.error_texts(),
        ["denied by policy: payments over 5000 need a bank transfer"]
    );
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn only_editable_tools_take_edits() {
    let server = Server::start().await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let reply = server.chat(&fixture("pay_hanako_edited.json")).await;
    assert_eq!(
        reply.error_texts(),
        ["the arguments of process_payment may not be edited"]
    );
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn the_audit_log_keeps_both_versions() -> anyhow::Result<()> {
    let server = Server::with_config(editable()).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    server.chat(&fixture("pay_hanako_edited.json")).await;
    let audit = server.get("/api/audit").await;
    let events = audit.json_lines();
    let edit = events
        .iter()
        .find(|e| e["decision"] == "edited")
        .unwrap_or_else(|| panic!("{}", audit.body));
    let asked = events
        .iter()
        .find(|e| e["decision"] == "asked")
        .unwrap_or_else(|| panic!("{}", audit.body));
    assert_eq!(
        edit["issuedArgsDigest"], asked["argsDigest"],
        "the issued version"
    );
    assert_ne!(
        edit["argsDigest"], asked["argsDigest"],
        "and the one that ran"
    );
    Ok(())
}

#[tokio::test]
async fn a_replay_shows_the_call_as_it_ran() {
    let server = Server::with_config(editable()).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    server.chat(&fixture("pay_hanako_edited.json")).await;
    // The page re-sends its history, with the plain approval it shows.
    let replay = server.chat(&fixture("pay_hanako_approved.json")).await;
    let input = replay
        .of_type("tool-input-available")
        .into_iter()
        .find(|c| c["toolCallId"] == "call-2")
        .map(|c| c["input"].clone());
    assert_eq!(
        input,
        Some(json!({"amount": 40, "recipient": "Hanako", "currency": "USD"}))
    );
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn an_open_question_says_whether_it_may_be_edited() -> anyhow::Result<()> {
    let server = Server::with_config(editable()).await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let open = server.get("/api/confirmations?chatId=chat-pay").await;
    let open: Value = serde_json::from_str(&open.body)?;
    assert_eq!(open[0]["originalFunctionCall"]["name"], "process_payment");
    assert_eq!(open[0]["editable"], true);
    Ok(())
}
