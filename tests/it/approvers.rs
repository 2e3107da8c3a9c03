//! Approvers: a rule names who may approve a tool's calls (principals and
//! roles), and four eyes keeps the user who asked from approving their own.

use crate::common;
use crate::common::assert_contains;

use common::{Server, fixture, user_says};
use serde_json::json;

const FOUR_EYES: &str = "\
auth:
  principalHeader: X-User
  roles: {finance: [lead]}
toolConfirmation:
  tools:
    process_payment: {approvers: [role:finance], requireDistinctApprover: true}
";

fn as_user(who: &str) -> [(&'static str, &str); 1] {
    [("x-user", who)]
}

async fn asked(server: &Server) -> common::Reply {
    let body = user_says("chat-pay", "Send 50 USD to Hanako").to_string();
    server.post_with("/stream", &as_user("clerk"), body).await
}

async fn decide(server: &Server, who: &str, body: serde_json::Value) -> common::Reply {
    let path = "/api/confirmations/adk-3";
    server
        .post_with(path, &as_user(who), body.to_string())
        .await
}

#[tokio::test]
async fn a_clerks_payment_waits_for_a_finance_approver() -> anyhow::Result<()> {
    let server = Server::from_yaml(FOUR_EYES).await;
    let reply = asked(&server).await;
    // The card tells the clerk who must approve.
    let question = reply.of_type("tool-input-available");
    assert_eq!(
        question[0]["input"]["toolConfirmation"]["hint"],
        "Send 50 USD to Hanako? (waiting for approval by role:finance)",
        "{}",
        reply.body
    );
    let open = server
        .get_with("/api/confirmations?chatId=chat-pay", &as_user("clerk"))
        .await
        .json();
    assert_eq!(open[0]["approvers"], json!(["role:finance"]));
    assert_eq!(open[0]["mayApprove"], false);

    // Neither the clerk nor someone without the role may approve.
    let own = decide(&server, "clerk", json!({"approved": true})).await;
    assert_eq!(own.status, 403, "{}", own.body);
    assert_eq!(
        own.json()["error"],
        "the user who asked may not approve this call themselves; waiting for role:finance"
    );
    let other = decide(&server, "mallory", json!({"approved": true})).await;
    assert_eq!(other.status, 403, "{}", other.body);
    assert_eq!(
        other.json()["error"],
        "only role:finance may approve this call"
    );
    // Nor in the chat: the answer is refused and the question stays open.
    let mut in_chat = fixture("pay_hanako_approved.json");
    in_chat["messages"][1]["parts"][1]["input"]["toolConfirmation"]["hint"] =
        json!("Send 50 USD to Hanako? (waiting for approval by role:finance)");
    let refused = server
        .post_with("/stream", &as_user("clerk"), in_chat.to_string())
        .await;
    assert!(
        refused.body.contains("waiting for role:finance"),
        "{}",
        refused.body
    );
    assert_eq!(server.payments(), 0);

    // Both the clerk and the approver may look it up; nobody else.
    let path = "/api/confirmations/adk-3";
    let looked = server.get_with(path, &as_user("clerk")).await;
    assert_eq!(looked.json()["status"], "open", "{}", looked.body);
    assert_eq!(server.get_with(path, &as_user("lead")).await.status, 200);
    assert_eq!(server.get_with(path, &as_user("mallory")).await.status, 404);

    // A finance approver may; the call runs once, as asked.
    let approved = decide(&server, "lead", json!({"approved": true})).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(approved.json()["outcome"]["kind"], "output");
    assert_eq!(server.payments(), 1);
    // The clerk's card can learn how it ended.
    let ended = server.get_with(path, &as_user("clerk")).await.json();
    assert_eq!(ended["status"], "decided");
    assert_eq!(ended["outcome"]["kind"], "output");
    let again = decide(&server, "lead", json!({"approved": true})).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(server.payments(), 1);

    // The clerk's log shows who refused and who approved.
    let log = server
        .get_with("/api/audit?chatId=chat-pay", &as_user("clerk"))
        .await;
    let events = log.json_lines();
    let decisions: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["decision"].as_str().unwrap_or(""),
                e["by"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("asked", "policy"),
            ("refused", "clerk through the API"),
            ("refused", "mallory through the API"),
            ("refused", "toolgate"),
            ("approved", "lead through the API"),
            ("replayed", "an earlier answer"),
        ],
        "{}",
        log.body
    );
    Ok(())
}

#[tokio::test]
async fn the_clerk_may_still_deny_their_own_call() -> anyhow::Result<()> {
    let server = Server::from_yaml(FOUR_EYES).await;
    asked(&server).await;
    let denied = decide(
        &server,
        "clerk",
        json!({"approved": false, "reason": "typo"}),
    )
    .await;
    assert_eq!(denied.status, 200, "{}", denied.body);
    assert_eq!(denied.json()["outcome"]["kind"], "denied");
    let late = decide(&server, "lead", json!({"approved": true})).await;
    assert_eq!(late.status, 409, "{}", late.body);
    assert_eq!(server.payments(), 0);
    Ok(())
}

#[tokio::test]
async fn without_approvers_another_user_cannot_see_the_question() -> anyhow::Result<()> {
    let server = Server::from_yaml("auth:\n  principalHeader: X-User\n").await;
    asked(&server).await;
    let other = decide(&server, "lead", json!({"approved": true})).await;
    assert_eq!(other.status, 404, "{}", other.body);
    let own = decide(&server, "clerk", json!({"approved": true})).await;
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(server.payments(), 1);
    Ok(())
}

/// A key carries its principal's roles; the asker may approve when listed
/// (no four eyes).
#[tokio::test]
async fn a_keys_roles_make_an_approver() -> anyhow::Result<()> {
    use sha2::Digest;
    let hash = |key: &str| hex::encode(sha2::Sha256::digest(key.as_bytes()));
    let yaml = format!(
        "auth:\n  apiKeys:\n    - {{principal: clerk, sha256: '{}'}}\n    - {{principal: lead, sha256: '{}', roles: [finance]}}\n\
         toolConfirmation:\n  tools:\n    process_payment: {{approvers: [role:finance, clerk]}}\n",
        hash("clerk-key"),
        hash("lead-key"),
    );
    let server = Server::from_yaml(&yaml).await;
    let body = user_says("chat-pay", "Send 50 USD to Hanako").to_string();
    let reply = server
        .post_with("/stream", &[("x-api-key", "clerk-key")], body)
        .await;
    // Listed: no "waiting for" on the clerk's card.
    let question = reply.of_type("tool-input-available");
    assert_eq!(
        question[0]["input"]["toolConfirmation"]["hint"], "Send 50 USD to Hanako?",
        "{}",
        reply.body
    );
    let path = "/api/confirmations/adk-3";
    let approved = server
        .post_with(path, &[("x-api-key", "lead-key")], r#"{"approved": true}"#)
        .await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(server.payments(), 1);
    Ok(())
}

#[test]
fn four_eyes_needs_approvers() {
    let err = toolgate::config::Settings::from_yaml(
        "toolConfirmation:\n  tools:\n    process_payment: {requireDistinctApprover: true}\n",
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert_contains(&err, "requireDistinctApprover");
}

/// An edit is an approval of the edited call: when its arguments need
/// other approvers (`escalate`), only they may make it, and the question
/// waits for them.
#[tokio::test]
async fn an_edit_that_needs_another_approver_waits_for_them() -> anyhow::Result<()> {
    let yaml = "\
auth:
  principalHeader: X-User
  roles: {finance: [lead], cfo: [boss]}
toolConfirmation:
  tools:
    process_payment:
      editable: true
      approvers: [role:finance, role:cfo]
      escalate: [{when: 'amount > 1000', approvers: [role:cfo]}]
";
    let server = Server::from_yaml(yaml).await;
    asked(&server).await;
    let bigger = json!({"approved": true, "editedArgs": {"amount": 2000, "recipient": "Hanako", "currency": "USD"}});
    let refused = decide(&server, "lead", bigger.clone()).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(
        refused.json()["error"],
        "this edit needs another approver: only role:cfo may approve this call"
    );
    assert_eq!(server.payments(), 0);
    let open = server
        .get_with("/api/confirmations?chatId=chat-pay", &as_user("clerk"))
        .await
        .json();
    assert_eq!(open[0]["id"], "adk-3", "still open");
    let approved = decide(&server, "boss", bigger).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(approved.json()["outcome"]["ranWith"]["amount"], 2000);
    assert_eq!(server.payments(), 1);
    Ok(())
}
