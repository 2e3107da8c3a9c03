//! Grants never widen who may approve: a remembered approval or an
//! approve-next budget decides only calls the user who asked approves
//! alone; `remember` and `approveNext` on a question others decide are
//! refused; a grant made before approvers were added decides nothing after.

use crate::common;
use crate::common::Must;

use common::{Reply, Server, asked, user_says};
use serde_json::{Value, json};
use toolgate::Config;
use toolgate::ids::Ids;
use toolgate::store::Store;

pub(crate) fn as_user(who: &str) -> [(&'static str, &str); 1] {
    [("x-user", who)]
}

pub(crate) fn server_config(yaml: &str) -> Config {
    Config::from_yaml(yaml).must()
}

pub(crate) async fn says(server: &Server, who: &str, chat: &str, text: &str) -> Reply {
    let body = user_says(chat, text).to_string();
    server.post_with("/stream", &as_user(who), body).await
}

/// The id of the one question open in `chat`.
pub(crate) async fn open_question(server: &Server, who: &str, chat: &str) -> String {
    let open = server
        .get_with(&format!("/api/confirmations?chatId={chat}"), &as_user(who))
        .await
        .json();
    match open.as_array().map(Vec::as_slice) {
        Some([question]) => question["id"].as_str().unwrap_or_default().to_owned(),
        _ => panic!("one open question in {chat}: {open}"),
    }
}

pub(crate) async fn decide(server: &Server, who: &str, id: &str, body: Value) -> Reply {
    let path = format!("/api/confirmations/{id}");
    server
        .post_with(&path, &as_user(who), body.to_string())
        .await
}

pub(crate) async fn status(server: &Server, who: &str, id: &str) -> Value {
    let path = format!("/api/confirmations/{id}");
    server.get_with(&path, &as_user(who)).await.json()["status"].clone()
}

/// The first reply's question sent back unanswered, as a client resending
/// its card does.
fn unanswered(chat: &str, text: &str, first: &Reply) -> Value {
    let message_id = first.of_type("start")[0]["messageId"].clone();
    let ask = first.of_type("tool-input-available")[0].clone();
    json!({
        "id": chat, "trigger": "submit-message", "messageId": message_id,
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]},
            {"id": message_id, "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-adk_request_confirmation", "toolCallId": ask["toolCallId"],
                 "state": "input-available", "input": ask["input"],
                 "callProviderMetadata": ask["providerMetadata"]}
            ]}
        ]
    })
}

const ESCALATE_ONLY: &str = "\
auth:
  principalHeader: X-User
toolConfirmation:
  tools:
    process_payment:
      escalate: [{when: \"amount > 1000\", approvers: [cfo]}]
";

#[tokio::test]
async fn a_remembered_approval_never_skips_an_escalation() {
    let server = Server::with_config(server_config(ESCALATE_ONLY)).await;
    // A large payment waits for the CFO.
    let big_text = "Send 5000 USD to Bob";
    let big = says(&server, "alice", "chat-big", big_text).await;
    assert_eq!(asked(&big), 1, "{}", big.body);
    let big_id = open_question(&server, "alice", "chat-big").await;

    // Alice approves her own small payment, remembered everywhere.
    says(&server, "alice", "chat-small", "Send 50 USD to Hanako").await;
    let small = open_question(&server, "alice", "chat-small").await;
    let approved = decide(
        &server,
        "alice",
        &small,
        json!({"approved": true, "remember": "global"}),
    )
    .await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(server.payments(), 1);

    // It covers her small payments...
    let small_again = says(&server, "alice", "chat-2", "Send 60 USD to Carol").await;
    assert_eq!(asked(&small_again), 0, "{}", small_again.body);
    assert_eq!(server.payments(), 2);
    // ...never one the CFO must approve.
    let large = says(&server, "alice", "chat-3", "Send 9000 USD to Mallory").await;
    assert_eq!(asked(&large), 1, "{}", large.body);
    assert_eq!(server.payments(), 2);
    assert!(
        large.body.contains("waiting for approval by cfo"),
        "{}",
        large.body
    );

    // Nor does the open one run when her client sends its card again.
    let again = server
        .post_with(
            "/stream",
            &as_user("alice"),
            unanswered("chat-big", big_text, &big).to_string(),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(server.payments(), 2, "{}", again.body);
    assert_eq!(status(&server, "alice", &big_id).await, "open");

    // The CFO decides it.
    let by_cfo = decide(&server, "cfo", &big_id, json!({"approved": true})).await;
    assert_eq!(by_cfo.status, 200, "{}", by_cfo.body);
    assert_eq!(server.payments(), 3);
}

pub(crate) const FOUR_EYES: &str = "\
auth:
  principalHeader: X-User
  roles: {finance: [bob], cfo: [carol]}
toolConfirmation:
  tools:
    process_payment:
      approvers: [role:finance]
      requireDistinctApprover: true
      escalate: [{when: \"amount > 1000\", approvers: [role:cfo]}]
";

#[tokio::test]
async fn an_approver_cannot_grant_the_asker_more_calls() {
    let server = Server::with_config(server_config(FOUR_EYES)).await;
    says(&server, "alice", "chat-a", "Send 50 USD to Hanako").await;
    let id = open_question(&server, "alice", "chat-a").await;

    for grant in [
        json!({"approved": true, "approveNext": 5}),
        json!({"approved": true, "remember": "global"}),
        json!({"approved": true, "remember": "session"}),
        json!({"approved": true, "remember": {"scope": "window", "minutes": 60}}),
    ] {
        let refused = decide(&server, "bob", &id, grant.clone()).await;
        assert_eq!(refused.status, 400, "{grant}: {}", refused.body);
        assert_eq!(
            refused.json()["error"],
            "invalid request: `remember` and `approveNext` are only for calls the user who asked approves \
             alone; this call needs role:finance, not the user who asked: decide it without them",
            "{grant}"
        );
        assert_eq!(server.payments(), 0);
        assert_eq!(status(&server, "alice", &id).await, "open", "{grant}");
    }
    // A plain approval is the finance approver's to give.
    let approved = decide(&server, "bob", &id, json!({"approved": true})).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(server.payments(), 1);

    // Alice's next payments ask again, small and large alike.
    for (chat, text) in [
        ("chat-b", "Send 40 USD to Hanako"),
        ("chat-c", "Send 9000 USD to Mallory"),
    ] {
        let reply = says(&server, "alice", chat, text).await;
        assert_eq!(asked(&reply), 1, "{text}: {}", reply.body);
    }
    assert_eq!(server.payments(), 1);
    let remembered = server
        .get_with("/api/approvals", &as_user("alice"))
        .await
        .json();
    assert_eq!(remembered, json!([]));
}

#[tokio::test]
async fn an_approver_among_others_remembers_nothing_in_the_chat() {
    let yaml = "\
auth:
  principalHeader: X-User
toolConfirmation:
  tools:
    process_payment: {approvers: [alice, bob]}
";
    let server = Server::with_config(server_config(yaml)).await;
    let text = "Send 50 USD to Hanako";
    let first = says(&server, "alice", "chat-a", text).await;
    let mut answer = common::approval("chat-a", &first);
    answer["messages"][1]["parts"][1]["output"] = json!({"confirmed": true, "remember": "global"});
    let refused = server
        .post_with("/stream", &as_user("alice"), answer.to_string())
        .await;
    assert!(
        refused.body.contains(
            "are only for calls the user who asked approves alone; this call needs alice or bob"
        ),
        "{}",
        refused.body
    );
    assert_eq!(server.payments(), 0);

    answer["messages"][1]["parts"][1]["output"] = json!({"confirmed": true});
    let approved = server
        .post_with("/stream", &as_user("alice"), answer.to_string())
        .await;
    assert_eq!(server.payments(), 1, "{}", approved.body);
}

#[tokio::test]
async fn a_grant_made_before_approvers_were_added_decides_nothing() {
    let store = Store::memory();
    let before = "auth: {principalHeader: X-User}\n";
    let server = Server::with(server_config(before), |app| app.with_store(store.clone())).await;
    says(&server, "alice", "chat-a", "Send 50 USD to Hanako").await;
    let id = open_question(&server, "alice", "chat-a").await;
    let body = json!({"approved": true, "approveNext": 3, "remember": "global"});
    let approved = decide(&server, "alice", &id, body).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(server.payments(), 1);

    // The same store under a policy that names approvers.
    let after = "\
auth:
  principalHeader: X-User
toolConfirmation:
  tools:
    process_payment: {approvers: [cfo]}
";
    // Random ids: the first server's sequential ones are in the store.
    let server = Server::with(server_config(after), |app| {
        app.with_store(store.clone()).with_ids(Ids::random())
    })
    .await;
    for chat in ["chat-a", "chat-b"] {
        let reply = says(&server, "alice", chat, "Send 20 USD to Hanako").await;
        assert_eq!(asked(&reply), 1, "{chat}: {}", reply.body);
    }
    assert_eq!(server.payments(), 0);
}
