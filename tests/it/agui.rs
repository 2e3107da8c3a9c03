//! `POST /ag-ui`: AG-UI 1.0 runs over raw SSE (no Node): text, tool calls,
//! every confirmation a tool-bound interrupt, and the resume rules.

use std::time::Duration;

use crate::common;
use crate::common::Must;

use common::{Reply, Server};
use serde_json::{Value, json};
use toolgate::Config;

/// A run's events, in order (no `[DONE]`: AG-UI clients parse every line).
fn events(reply: &Reply) -> Vec<Value> {
    assert!(!reply.body.contains("[DONE]"), "{}", reply.body);
    reply.chunks()
}

fn types(reply: &Reply) -> Vec<String> {
    events(reply)
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn of_type(reply: &Reply, kind: &str) -> Vec<Value> {
    events(reply)
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

fn last(reply: &Reply) -> Value {
    events(reply).pop().unwrap_or_default()
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "content": text})
}

fn input(thread: &str, run: &str, messages: Vec<Value>) -> Value {
    json!({"threadId": thread, "runId": run, "messages": messages, "tools": [], "context": [], "state": {}})
}

async fn run(server: &Server, who: &str, body: &Value) -> Reply {
    server
        .post_with("/ag-ui", &[("x-user", who)], body.to_string())
        .await
}

fn config() -> Config {
    let mut config = Config::default();
    config.auth.principal_header = Some("x-user".into());
    config
}

fn editable() -> Config {
    let path = format!(
        "{}/tests/fixtures/config/editable.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut config = Config::load(std::path::Path::new(&path)).must();
    config.auth.principal_header = Some("x-user".into());
    config
}

/// The thread's messages after a run, as a client applying its events
/// holds them: the snapshot of an interrupted run.
fn snapshot(reply: &Reply) -> Vec<Value> {
    let snapshots = of_type(reply, "MESSAGES_SNAPSHOT");
    let messages = snapshots.last().map(|s| s["messages"].clone());
    messages
        .and_then(|m| m.as_array().cloned())
        .unwrap_or_default()
}

/// Alice asks to pay Hanako in `thread-1`: the interrupted run.
async fn asked(server: &Server, text: &str) -> (Reply, Vec<Value>) {
    let reply = run(
        server,
        "alice",
        &input("thread-1", "run-1", vec![user("u1", text)]),
    )
    .await;
    let interrupts = last(&reply)["outcome"]["interrupts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (reply, interrupts)
}

fn resume(messages: Vec<Value>, run_id: &str, entries: Value) -> Value {
    let mut body = input("thread-1", run_id, messages);
    body["resume"] = entries;
    body
}

fn approve(id: &Value) -> Value {
    json!([{"interruptId": id, "status": "resolved", "payload": {"approved": true}}])
}

#[tokio::test]
async fn text_is_a_text_message_between_run_started_and_run_finished() {
    let server = Server::with_config(config()).await;
    let reply = run(
        &server,
        "alice",
        &input("t-text", "r1", vec![user("u1", "Hello there")]),
    )
    .await;
    assert_eq!(reply.status, 200);
    let kinds = types(&reply);
    assert_eq!(kinds.first().map(String::as_str), Some("RUN_STARTED"));
    assert_eq!(kinds.last().map(String::as_str), Some("RUN_FINISHED"));
    assert!(
        kinds.contains(&"TEXT_MESSAGE_START".to_owned()),
        "{kinds:?}"
    );
    assert!(kinds.contains(&"TEXT_MESSAGE_END".to_owned()), "{kinds:?}");
    let text: String = of_type(&reply, "TEXT_MESSAGE_CONTENT")
        .iter()
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(text, "You said: Hello there");
    assert_eq!(last(&reply)["outcome"], json!({"type": "success"}));
    assert_eq!(last(&reply)["threadId"], "t-text");
    assert_eq!(last(&reply)["runId"], "r1");
}

/// AG-UI runs count in the metrics under a transport of their own.
#[tokio::test]
async fn runs_are_counted_as_agui_turns() {
    let server = Server::with_config(config()).await;
    let body = input("t-metrics", "r1", vec![user("u1", "Hello there")]);
    assert_eq!(run(&server, "alice", &body).await.status, 200);
    let finished = "toolgate_turns_total{transport=\"agui\",outcome=\"finished\"} 1";
    let text = common::wait::until_ok("the run counted as finished", || async {
        let text = server
            .get_with("/metrics", &[("x-user", "alice")])
            .await
            .body;
        if text.lines().any(|l| l == finished) {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await;
    assert!(
        text.lines()
            .any(|l| l == "toolgate_streams_open{transport=\"agui\"} 0"),
        "{text}"
    );
    assert!(!text.contains("transport=\"sse\",outcome"), "{text}");
}

#[tokio::test]
async fn capabilities_say_human_in_the_loop() {
    let server = Server::with_config(config()).await;
    let reply = server.get("/ag-ui").await;
    assert_eq!(reply.status, 200);
    let hitl = &reply.json()["humanInTheLoop"];
    assert_eq!(hitl["interrupts"], true);
    assert_eq!(hitl["approvals"], true);
    assert_eq!(hitl["approveWithEdits"], true);
}

#[tokio::test]
async fn a_body_that_is_not_a_run_is_a_400() {
    let server = Server::with_config(config()).await;
    for body in [
        json!({"threadId": "t"}),
        json!({"threadId": "", "runId": "r", "messages": []}),
        json!("no"),
    ] {
        let reply = run(&server, "alice", &body).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        assert!(!reply.body.contains("RUN_STARTED"));
    }
}

#[tokio::test]
async fn a_confirmation_is_a_tool_bound_interrupt_after_the_snapshots() {
    let server = Server::with_config(config()).await;
    let (reply, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
    let kinds = types(&reply);
    let tail: Vec<&str> = kinds
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"],
        "{kinds:?}"
    );
    for kind in ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"] {
        assert!(kinds.contains(&kind.to_owned()), "{kind}: {kinds:?}");
    }
    assert_eq!(interrupts.len(), 1, "{}", reply.body);
    let interrupt = &interrupts[0];
    let call = &of_type(&reply, "TOOL_CALL_START")[0];
    assert_eq!(interrupt["reason"], "confirmation");
    assert_eq!(interrupt["toolCallId"], call["toolCallId"]);
    assert_eq!(call["toolCallName"], "process_payment");
    let message = interrupt["message"].as_str().unwrap_or("");
    assert!(
        message.contains("process_payment") && message.contains("Hanako"),
        "{message}"
    );
    let schema = &interrupt["responseSchema"];
    assert_eq!(schema["required"], json!(["approved"]));
    assert_eq!(schema["properties"]["approved"]["type"], "boolean");
    assert!(schema["properties"]["reason"].is_object());
    assert!(
        schema["properties"].get("editedArgs").is_none(),
        "no edits by default"
    );
    assert!(
        interrupt["expiresAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    // The snapshot holds the input and the call.
    let messages = snapshot(&reply);
    assert_eq!(messages[0]["id"], "u1");
    assert_eq!(messages[1]["toolCalls"][0]["id"], call["toolCallId"]);
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn approved_runs_once_and_the_result_is_on_the_original_call() {
    let server = Server::with_config(config()).await;
    let (first, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
    let call_id = interrupts[0]["toolCallId"].clone();
    let body = resume(snapshot(&first), "run-2", approve(&interrupts[0]["id"]));
    let reply = run(&server, "alice", &body).await;
    let results = of_type(&reply, "TOOL_CALL_RESULT");
    assert_eq!(results.len(), 1, "{}", reply.body);
    assert_eq!(results[0]["toolCallId"], call_id);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("completed")
    );
    assert_eq!(last(&reply)["outcome"], json!({"type": "success"}));
    assert!(!of_type(&reply, "TEXT_MESSAGE_CONTENT").is_empty());
    assert_eq!(server.payments(), 1);

    // The same resume again: nothing runs a second time.
    let again = run(&server, "alice", &body).await;
    assert_eq!(
        last(&again)["outcome"],
        json!({"type": "success"}),
        "{}",
        again.body
    );
    assert_eq!(
        of_type(&again, "TOOL_CALL_RESULT")[0]["toolCallId"],
        call_id
    );
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn denied_and_cancelled_run_nothing() {
    for (entry, reason) in [
        (
            json!({"status": "resolved", "payload": {"approved": false, "reason": "not today"}}),
            "not today",
        ),
        (json!({"status": "cancelled"}), "cancelled"),
    ] {
        let server = Server::with_config(config()).await;
        let (first, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
        let mut entry = entry;
        entry["interruptId"] = interrupts[0]["id"].clone();
        let reply = run(
            &server,
            "alice",
            &resume(snapshot(&first), "run-2", json!([entry])),
        )
        .await;
        let results = of_type(&reply, "TOOL_CALL_RESULT");
        assert_eq!(results.len(), 1, "{}", reply.body);
        assert_eq!(results[0]["toolCallId"], interrupts[0]["toolCallId"]);
        let text: String = of_type(&reply, "TEXT_MESSAGE_CONTENT")
            .iter()
            .filter_map(|e| e["delta"].as_str())
            .collect();
        assert!(text.contains("denied") && text.contains(reason), "{text}");
        assert_eq!(last(&reply)["outcome"]["type"], "success");
        assert_eq!(server.payments(), 0);
    }
}

#[tokio::test]
async fn approved_with_edits_runs_the_edit() {
    let server = Server::with_config(editable()).await;
    let (first, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
    let schema = &interrupts[0]["responseSchema"]["properties"]["editedArgs"];
    assert!(
        schema["properties"]["amount"].is_object(),
        "the tool's schema: {schema}"
    );
    let edited = json!({"amount": 20, "recipient": "Hanako", "currency": "USD"});
    let entry = json!([{"interruptId": interrupts[0]["id"], "status": "resolved",
        "payload": {"approved": true, "editedArgs": edited}}]);
    let reply = run(&server, "alice", &resume(snapshot(&first), "run-2", entry)).await;
    let result = &of_type(&reply, "TOOL_CALL_RESULT")[0];
    assert!(
        result["content"].as_str().unwrap_or("").contains("20"),
        "{result}"
    );
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn input_without_resume_while_pending_is_a_run_error() {
    let server = Server::with_config(config()).await;
    let (first, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
    let mut messages = snapshot(&first);
    messages.push(user("u2", "What's the weather in Paris?"));
    let reply = run(&server, "alice", &input("thread-1", "run-2", messages)).await;
    let error = last(&reply);
    assert_eq!(error["type"], "RUN_ERROR", "{}", reply.body);
    assert_eq!(error["code"], "INTERRUPTS_PENDING");
    let id = interrupts[0]["id"].as_str().unwrap_or("-");
    assert!(error["message"].as_str().unwrap_or("").contains(id));
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn forged_and_other_users_interrupt_ids_are_refused() {
    let server = Server::with_config(config()).await;
    let (first, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
    let messages = snapshot(&first);
    let forged = run(
        &server,
        "alice",
        &resume(messages.clone(), "r2", approve(&json!("approval-999"))),
    )
    .await;
    assert_eq!(last(&forged)["type"], "RUN_ERROR", "{}", forged.body);
    assert_eq!(last(&forged)["code"], "INVALID_RESUME");
    // Mallory names Alice's real interrupt, in Alice's thread id.
    let theirs = run(
        &server,
        "mallory",
        &resume(messages, "r3", approve(&interrupts[0]["id"])),
    )
    .await;
    assert_eq!(last(&theirs)["code"], "INVALID_RESUME", "{}", theirs.body);
    assert_eq!(server.payments(), 0);
    let open = server
        .get_with("/api/confirmations?chatId=thread-1", &[("x-user", "alice")])
        .await;
    assert!(
        open.body
            .contains(interrupts[0]["id"].as_str().unwrap_or("-"))
    );
}

#[tokio::test]
async fn a_payload_that_does_not_fit_the_schema_is_a_run_error() {
    let server = Server::with_config(config()).await;
    let (first, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
    let id = &interrupts[0]["id"];
    for payload in [
        json!({"approved": "yes"}),
        json!({"reason": "no approved"}),
        json!({"approved": true, "editedArgs": {"amount": 1}}),
        json!({"approved": true, "extra": 1}),
        json!(true),
    ] {
        let entry = json!([{"interruptId": id, "status": "resolved", "payload": payload}]);
        let reply = run(&server, "alice", &resume(snapshot(&first), "r2", entry)).await;
        assert_eq!(
            last(&reply)["type"],
            "RUN_ERROR",
            "{payload}: {}",
            reply.body
        );
        assert_eq!(last(&reply)["code"], "INVALID_RESUME");
    }
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn two_interrupts_are_answered_together_and_a_partial_resume_is_refused() {
    let server = Server::with_config(config()).await;
    let (first, interrupts) = asked(&server, "Send 10 USD to Taro and 20 USD to Jiro").await;
    assert_eq!(interrupts.len(), 2, "{}", first.body);
    let partial = run(
        &server,
        "alice",
        &resume(snapshot(&first), "r2", approve(&interrupts[0]["id"])),
    )
    .await;
    assert_eq!(last(&partial)["code"], "INVALID_RESUME", "{}", partial.body);
    assert!(
        last(&partial)["message"]
            .as_str()
            .unwrap_or("")
            .contains("every open interrupt")
    );
    assert_eq!(server.payments(), 0, "nothing decided");
    let both = json!([
        {"interruptId": interrupts[0]["id"], "status": "resolved", "payload": {"approved": true}},
        {"interruptId": interrupts[1]["id"], "status": "resolved", "payload": {"approved": false}},
    ]);
    let reply = run(&server, "alice", &resume(snapshot(&first), "r3", both)).await;
    let results: Vec<Value> = of_type(&reply, "TOOL_CALL_RESULT")
        .iter()
        .map(|r| r["toolCallId"].clone())
        .collect();
    assert_eq!(
        results,
        [
            interrupts[0]["toolCallId"].clone(),
            interrupts[1]["toolCallId"].clone()
        ],
        "{}",
        reply.body
    );
    assert_eq!(last(&reply)["outcome"]["type"], "success");
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn an_expired_interrupt_is_a_run_error() {
    let server = Server::with_config(config()).await;
    let (first, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
    server.clock.advance(Duration::from_secs(24 * 60 * 60 + 1));
    let reply = run(
        &server,
        "alice",
        &resume(snapshot(&first), "r2", approve(&interrupts[0]["id"])),
    )
    .await;
    assert_eq!(last(&reply)["type"], "RUN_ERROR", "{}", reply.body);
    assert_eq!(last(&reply)["code"], "INTERRUPT_EXPIRED");
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn an_interrupt_decided_in_the_inbox_is_reported_on_the_next_resume() {
    let server = Server::with_config(config()).await;
    let (first, interrupts) = asked(&server, "Send 50 USD to Hanako").await;
    let id = interrupts[0]["id"].as_str().unwrap_or("-");
    let decided = server
        .post_with(
            &format!("/api/confirmations/{id}"),
            &[("x-user", "alice")],
            json!({"approved": true}).to_string(),
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    // The client, which did not see it, denies: the approval stands.
    let deny = json!([{"interruptId": id, "status": "resolved", "payload": {"approved": false}}]);
    let reply = run(&server, "alice", &resume(snapshot(&first), "r2", deny)).await;
    let result = &of_type(&reply, "TOOL_CALL_RESULT")[0];
    assert_eq!(result["toolCallId"], interrupts[0]["toolCallId"]);
    assert!(
        result["content"]
            .as_str()
            .unwrap_or("")
            .contains("completed"),
        "{result}"
    );
    assert_eq!(server.payments(), 1);
}
