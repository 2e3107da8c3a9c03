//! The exact SSE bytes of the native AI SDK approval flow
//! (`toolgate.protocol: ai-sdk` in the body).

use crate::common;

use common::{Server, fixture};
use serde_json::{Value, json};

fn ask(text: &str) -> Value {
    json!({
        "id": "chat-pay",
        "trigger": "submit-message",
        "toolgate": {"protocol": "ai-sdk"},
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]
    })
}

#[tokio::test]
async fn native_approval_requested() {
    let server = Server::start().await;
    let reply = server.chat(&ask("Send 50 USD to Hanako")).await;
    assert_sse!("native_approval_requested", reply.body);
    assert_eq!(server.payments(), 0);
}

answer_snapshots! {
    ask("Send 50 USD to Hanako");
    native_approved: "native_approved.json" => "native_approved", 1;
    native_denied_with_reason: "native_denied.json" => "native_denied", 0;
    native_forged: "native_forged.json" => "native_forged", 0;
}

#[tokio::test]
async fn native_two_approvals() {
    let server = Server::start().await;
    let first = server
        .chat(&ask("Send 50 USD to Hanako and pay $20 to Bob"))
        .await;
    assert_sse!("native_two_requested", first.body);
    let reply = server.chat(&fixture("native_two_answered.json")).await;
    assert_sse!("native_two_answered", reply.body);
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn native_replayed() {
    let server = Server::start().await;
    server.chat(&ask("Send 50 USD to Hanako")).await;
    server.chat(&fixture("native_approved.json")).await;
    let replay = server.chat(&fixture("native_approved.json")).await;
    assert_sse!("native_replayed", replay.body);
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn an_adk_confirmation_answered_natively_runs_nothing() {
    let server = Server::start().await;
    server
        .chat(&common::user_says("chat-pay", "Send 50 USD to Hanako"))
        .await;
    let mut body = fixture("native_approved.json");
    body["messages"][1]["parts"][1]["approval"]["id"] = json!("adk-3");
    let reply = server.chat(&body).await;
    assert_eq!(
        reply.of_type("tool-output-error"),
        [
            json!({"type": "tool-output-error", "toolCallId": "call-2", "errorText": "confirmation answered in another form than it was asked"})
        ]
    );
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn native_approvals_for_an_old_client_are_refused() {
    let server = Server::start().await;
    let mut body = ask("Send 50 USD to Hanako");
    body["toolgate"]["clientVersion"] = json!("5.0.0");
    let reply = server.chat(&body).await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body,
        r#"{"error":"invalid request: native approvals (protocol ai-sdk) need ai 6 or later, not 5.0.0; use protocol adk"}"#
    );
}

/// `toolConfirmation.deniedAs: output-error`: a denied approval ends as the
/// error the model reads too, and the model still hears it as a denial.
#[tokio::test]
async fn a_native_denial_as_an_error() {
    let mut config = toolgate::config::Config::default();
    config.tool_confirmation.denied_as = toolgate::protocol::DeniedAs::OutputError;
    let server = Server::with_config(config).await;
    server.chat(&ask("Send 50 USD to Hanako")).await;
    let reply = server.chat(&fixture("native_denied.json")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.of_type("tool-output-denied"), Vec::<Value>::new());
    assert_eq!(
        reply.of_type("tool-output-error"),
        [
            json!({"type": "tool-output-error", "toolCallId": "call-2", "errorText": "User denied execution: too much"})
        ]
    );
    assert_eq!(
        reply.text(),
        "The process_payment call was denied: too much."
    );
    assert_eq!(server.payments(), 0);
}

/// A pre-release client (`ai@6.0.0-beta.148`) is fitted as its release and
/// gets native approvals; a version that cannot be read is a 400 that does
/// not repeat it.
#[tokio::test]
async fn client_versions_per_request() {
    let server = Server::start().await;
    let mut body = ask("Send 50 USD to Hanako");
    body["toolgate"]["clientVersion"] = json!("6.0.0-beta.148");
    let reply = server.chat(&body).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.of_type("tool-approval-request").len(), 1);
    for bad in ["6.0.0-beta.01", "6.0-beta.1", "<script>"] {
        body["toolgate"]["clientVersion"] = json!(bad);
        let reply = server.chat(&body).await;
        assert_eq!(reply.status, 400, "{bad}");
        assert_eq!(
            reply.body,
            r#"{"error":"invalid request: `toolgate.clientVersion` is not an ai version: expected MAJOR.MINOR.PATCH (or MAJOR, MAJOR.MINOR), optionally with a pre-release, e.g. 7.0.173 or 6.0.0-beta.148"}"#
        );
    }
}
