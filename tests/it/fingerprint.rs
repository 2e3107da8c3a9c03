//! A call's fingerprint against a real MCP server that relists a tool with
//! another input schema (the fixture's `grow {"reshape": true}`): the open
//! questions of the old definition are refused as stale and end without
//! running (each refusal audited as the approval of whoever tried),
//! remembered approvals and budgets granted for it stop applying, and the
//! next call is asked again under the new definition. On every store
//! backend.

use serde_json::{Value, json};
use toolgate::Config;

use crate::common::calls::Calls;
use crate::common::{self, Must, Server, assert_contains, body};
use crate::mcp::{Journal, available, outputs, stdio_server, tool, until};

/// `notes` over stdio, `grow` (the relisting) allowed, on a fresh `kind` store.
async fn notes_on(kind: &str, journal: &Journal) -> (Server, Option<tempfile::TempDir>) {
    let yaml = format!(
        "{}toolConfirmation:\n  toolPolicies:\n    alwaysAllow: ['mcp--notes--grow']\n",
        stdio_server(&journal.path(), "")
    );
    let config = Config::from_yaml(&yaml).must();
    let (store, dir) = common::store_of(kind).await;
    let server = Server::with(config, move |app| {
        app.with_provider(Calls).with_store(store)
    })
    .await;
    available(&server, "notes").await;
    (server, dir)
}

fn delete(path: &str) -> String {
    format!(r#"mcp--notes--delete_note {{"path": "{path}"}}"#)
}

/// Asks to delete `path` in `chat`: the reply and its question's id.
async fn ask(server: &Server, chat: &str, path: &str) -> (common::Reply, String) {
    let reply = server.says(chat, &delete(path)).await;
    assert_eq!(
        common::asked_call(&reply)["name"],
        "mcp--notes--delete_note",
        "{}",
        reply.body
    );
    let id = body::question(&reply.body);
    (reply, id)
}

/// The question's fingerprint as `GET /api/confirmations/{id}` shows it.
async fn fingerprint_of(server: &Server, id: &str) -> Value {
    let question = server.get(&format!("/api/confirmations/{id}")).await;
    assert_eq!(question.status, 200, "{}", question.body);
    let fingerprint = question.json()["fingerprint"].clone();
    for part in ["definition", "call"] {
        let digest = fingerprint[part].as_str().unwrap_or_default();
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{part}: {fingerprint}"
        );
    }
    fingerprint
}

/// The audit events about question `id`.
async fn audited(server: &Server, id: &str) -> Vec<Value> {
    server
        .get("/api/audit")
        .await
        .json_lines()
        .into_iter()
        .filter(|e| e["confirmationId"] == id)
        .collect()
}

/// The `refused` events among `events`.
fn refusals(events: &[Value]) -> Vec<Value> {
    let refused = events.iter().filter(|e| e["decision"] == "refused");
    refused.cloned().collect()
}

fn deleted(journal: &Journal, path: &str) -> usize {
    journal.count(&format!(r#"call delete_note {{"path":"{path}""#))
}

async fn relisted_tool_makes_questions_stale_and_ends_grants(kind: &str) {
    let journal = Journal::new();
    let (server, _dir) = notes_on(kind, &journal).await;

    // Asked: the fingerprint is kept with the question, listed with it,
    // and in the audit log.
    let (_, open_api) = ask(&server, "chat-a", "a.txt").await;
    let asked = fingerprint_of(&server, &open_api).await;
    let listed = server.get("/api/confirmations?chatId=chat-a").await.json();
    assert_eq!(listed[0]["fingerprint"], asked, "{listed}");
    let events = audited(&server, &open_api).await;
    assert_eq!(events[0]["decision"], "asked", "{events:?}");
    assert_eq!(events[0]["fingerprint"], asked["call"], "{events:?}");
    // The same call in another chat has the same fingerprint; another
    // argument another.
    let (first_b, open_chat) = ask(&server, "chat-b", "a.txt").await;
    assert_eq!(fingerprint_of(&server, &open_chat).await, asked);
    let (_, other) = ask(&server, "chat-c", "c.txt").await;
    let other = fingerprint_of(&server, &other).await;
    assert_eq!(other["definition"], asked["definition"]);
    assert_ne!(other["call"], asked["call"]);

    // A grant for the chat, and a budget of approve-the-next-3 in another:
    // each made for the definition as it is listed now, and applying.
    let (_, id) = ask(&server, "chat-g", "g1.txt").await;
    let granted = server
        .decide(&id, r#"{"approved": true, "remember": "session"}"#)
        .await;
    assert_eq!(granted.status, 200, "{}", granted.body);
    let approvals = server.get("/api/approvals").await.json();
    assert_eq!(
        approvals[0]["definition"], asked["definition"],
        "{approvals}"
    );
    let (_, id) = ask(&server, "chat-n", "n1.txt").await;
    let budget = server
        .decide(&id, r#"{"approved": true, "approveNext": 3}"#)
        .await;
    assert_eq!(budget.status, 200, "{}", budget.body);
    for (chat, path) in [("chat-g", "g2.txt"), ("chat-n", "n2.txt")] {
        let reply = server.says(chat, &delete(path)).await;
        assert_eq!(
            outputs(&reply),
            [json!(format!("deleted {path}"))],
            "{}",
            reply.body
        );
    }

    // The server relists delete_note with another argument.
    let reply = server
        .says("chat-r", r#"mcp--notes--grow {"reshape": true}"#)
        .await;
    assert_eq!(outputs(&reply), [json!("reshaped")], "{}", reply.body);
    until(&server, "relisted", |tools| {
        tool(tools, "mcp--notes--delete_note")
            .is_some_and(|t| t["parameters"]["properties"].get("force").is_some())
    })
    .await;

    // An approval through the API of a question asked before: refused as
    // stale (409), ended, and nothing ran.
    let stale = server.approve(&open_api).await;
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert_contains(&stale.body, "changed since this call was asked");
    let question = server
        .get(&format!("/api/confirmations/{open_api}"))
        .await
        .json();
    assert_eq!(question["status"], "decided", "{question}");
    assert_eq!(question["outcome"]["kind"], "error", "{question}");
    // By decision, not by place: events of one millisecond may list in any
    // order (the test's clock stands still).
    let refused = refusals(&audited(&server, &open_api).await);
    assert_eq!(refused.len(), 1, "{refused:?}");
    let last = refused[0].clone();
    assert_eq!(last["fingerprint"], asked["call"], "{refused:?}");
    // A refused decision names who tried, not toolgate's rules.
    let tried = json!({"source": "anonymous", "principal": "anonymous"});
    assert_eq!(last["approver"], tried, "{refused:?}");
    // Again: it ended as stale, and is refused as such.
    assert_eq!(server.approve(&open_api).await.status, 409);
    let again = refusals(&audited(&server, &open_api).await);
    assert_eq!(again.len(), 2, "{again:?}");
    assert!(again.iter().all(|e| e["approver"] == tried), "{again:?}");
    // An approval in the chat: the same.
    let in_chat = server
        .chat(&common::approval_of("chat-b", &delete("a.txt"), &first_b))
        .await;
    assert_contains(&in_chat.body, "changed since this call was asked");
    let refused = refusals(&audited(&server, &open_chat).await);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["approver"], tried, "{refused:?}");
    assert_eq!(deleted(&journal, "a.txt"), 0, "{:?}", journal.lines());

    // The grant and the budget no longer apply: each chat is asked again,
    // under the new definition.
    for (chat, path) in [("chat-g", "g3.txt"), ("chat-n", "n3.txt")] {
        let (_, id) = ask(&server, chat, path).await;
        let again = fingerprint_of(&server, &id).await;
        assert_ne!(again["definition"], asked["definition"], "{again}");
        assert_eq!(deleted(&journal, path), 0);
    }
    // The stale call, asked again, runs once approved.
    let (_, id) = ask(&server, "chat-a", "a.txt").await;
    let again = fingerprint_of(&server, &id).await;
    assert_ne!(again["call"], asked["call"]);
    let approved = server.approve(&id).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(deleted(&journal, "a.txt"), 1, "{:?}", journal.lines());
}

#[tokio::test]
async fn a_relisted_tool_makes_questions_stale_and_ends_grants_in_memory() {
    relisted_tool_makes_questions_stale_and_ends_grants("memory").await;
}

#[tokio::test]
async fn a_relisted_tool_makes_questions_stale_and_ends_grants_in_sqlite() {
    relisted_tool_makes_questions_stale_and_ends_grants("sqlite").await;
}

#[cfg(feature = "redis-server")]
#[tokio::test]
async fn a_relisted_tool_makes_questions_stale_and_ends_grants_in_redis() {
    relisted_tool_makes_questions_stale_and_ends_grants("redis").await;
}
