//! Client-side tools (`tools.client`): the gate decides, the client runs the
//! call (`onToolCall` / `addToolOutput`), and its result is taken on the
//! follow-up only for a call this server handed out.

use crate::common;
use crate::common::Must;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Counting, Server, fixture};
use serde_json::{Value, json};
use toolgate::Config;
use toolgate::config::Settings;
use toolgate::tools::client::{ClientTool, ClientToolConfig, MAX_OUTPUT_BYTES, NO_RESULT};

const CONFIG: &str = r#"
tools:
  client:
    - name: get_location
      description: Where the user is, from the browser.
      parameters: {type: object, properties: {precision: {type: string}}}
    - name: pick_file
      description: A file the user picks.
      needsConfirmation: true
"#;

fn config(extra: &str) -> Config {
    Config::from_yaml(&format!("{CONFIG}{extra}")).must()
}

async fn server(extra: &str) -> Server {
    Server::with_config(config(extra)).await
}

fn says(text: &str, protocol: &str) -> Value {
    json!({
        "id": "chat-loc",
        "trigger": "submit-message",
        "toolgate": {"protocol": protocol},
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]
    })
}

/// `(toolCallId, errorText)` of every `tool-output-error`.
fn errors(reply: &common::Reply) -> Vec<(String, String)> {
    reply
        .of_type("tool-output-error")
        .iter()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (field("toolCallId"), field("errorText"))
        })
        .collect()
}

/// A change to the client's part.
type Change = fn(&mut Value);

/// The client's result for `call-2` changed by `change`.
fn location_output(change: impl FnOnce(&mut Value)) -> Value {
    let mut body = fixture("client_location_output.json");
    change(&mut body["messages"][1]["parts"][1]);
    body
}

#[tokio::test]
async fn an_allowed_call_is_handed_to_the_client_and_ends_the_turn() {
    let server = server("").await;
    let reply = server.chat(&says("Use get_location", "adk")).await;
    assert_sse!("client_tool_handed_off", reply.body);
}

#[tokio::test]
async fn the_clients_result_is_what_the_model_answers_with() {
    let server = server("").await;
    server.chat(&says("Use get_location", "adk")).await;
    let reply = server.chat(&fixture("client_location_output.json")).await;
    assert_sse!("client_tool_output", reply.body);
    assert!(reply.text().contains("Kyoto"), "{}", reply.body);
}

/// The calls the client's `onToolCall` would run: every
/// `tool-input-available` not marked `providerExecuted: true`.
fn run_by_client(reply: &common::Reply) -> Vec<String> {
    reply
        .of_type("tool-input-available")
        .iter()
        .filter(|c| c["providerExecuted"] != true)
        .map(|c| c["toolCallId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_denied_client_tool_never_reaches_the_client() {
    let deny = "toolConfirmation:\n  toolPolicies:\n    alwaysDeny: [internal--get_location]\n";
    let server = server(deny).await;
    for protocol in ["adk", "ai-sdk"] {
        let reply = server.chat(&says("Use get_location", protocol)).await;
        if protocol == "adk" {
            assert_sse!("client_tool_denied", reply.body);
        }
        assert!(
            run_by_client(&reply).is_empty(),
            "{protocol}: {}",
            reply.body
        );
        assert_eq!(errors(&reply).len(), 1, "{protocol}: {}", reply.body);
    }
    // An output posted anyway is not taken.
    let reply = server.chat(&fixture("client_location_output.json")).await;
    let errors = errors(&reply);
    assert_eq!(errors.len(), 1, "{}", reply.body);
    assert!(
        errors[0].1.contains("handed to the client by this server"),
        "{errors:?}"
    );
    assert!(!reply.text().contains("Kyoto"), "{}", reply.body);
}

#[tokio::test]
async fn a_client_tool_that_asks_is_handed_out_once_after_approval() {
    let server = server("").await;
    let asked = server.chat(&says("Use pick_file", "ai-sdk")).await;
    assert_eq!(
        asked.of_type("tool-approval-request").len(),
        1,
        "{}",
        asked.body
    );
    // Held by the server until approved: the client's onToolCall skips it.
    let held = asked.of_type("tool-input-available");
    assert_eq!(held[0]["providerExecuted"], true, "{}", asked.body);

    let approved = server.chat(&fixture("client_pick_approved.json")).await;
    assert_sse!("client_tool_approved", approved.body);

    // The same approval again hands nothing out a second time.
    let replay = server.chat(&fixture("client_pick_approved.json")).await;
    assert!(
        replay.of_type("tool-input-available").is_empty(),
        "{}",
        replay.body
    );
    assert_eq!(
        errors(&replay),
        [("call-2".to_owned(), NO_RESULT.to_owned())]
    );

    let answered = server.chat(&fixture("client_pick_output.json")).await;
    assert!(answered.text().contains("report.pdf"), "{}", answered.body);
    assert!(errors(&answered).is_empty(), "{}", answered.body);
}

#[tokio::test]
async fn the_adk_flow_hands_out_the_original_call_after_approval() {
    let server = server("").await;
    server.chat(&says("Use pick_file", "adk")).await;
    let mut body = adk_pick_answer(true);
    let approved = server.chat(&body).await;
    let handed = approved.of_type("tool-input-available");
    assert_eq!(handed.len(), 1, "{}", approved.body);
    assert_eq!(handed[0]["toolCallId"], "call-2");
    assert_eq!(
        handed[0]["providerMetadata"]["toolgate"]["handoff"],
        "adk-3"
    );
    assert_eq!(approved.of_type("finish")[0]["finishReason"], "tool-calls");

    let part = json!({
        "type": "tool-pick_file", "toolCallId": "call-2", "state": "output-available", "input": {},
        "output": {"name": "notes.txt"}, "callProviderMetadata": {"toolgate": {"handoff": "adk-3"}}
    });
    if let Some(parts) = body["messages"][1]["parts"].as_array_mut() {
        parts.push(part);
    }
    let answered = server.chat(&body).await;
    assert!(answered.text().contains("notes.txt"), "{}", answered.body);
    assert!(
        answered.of_type("tool-input-available").is_empty(),
        "{}",
        answered.body
    );
}

/// The ADK answer to `pick_file`'s question `adk-3`, after the user asked
/// for it: `confirmed` as given.
fn adk_pick_answer(confirmed: bool) -> Value {
    let confirmation = json!({
        "type": "tool-adk_request_confirmation", "toolCallId": "adk-3", "state": "output-available",
        "input": {"originalFunctionCall": {"id": "call-2", "name": "pick_file", "args": {}}},
        "output": {"confirmed": confirmed}
    });
    let mut body = says("Use pick_file", "adk");
    body["messageId"] = json!("msg-1");
    if let Some(messages) = body["messages"].as_array_mut() {
        messages.push(json!({"id": "msg-1", "role": "assistant", "parts": [{"type": "step-start"}, confirmation]}));
    }
    body
}

#[tokio::test]
async fn a_client_tool_the_user_denies_reaches_no_client() {
    let server = server("").await;
    // ADK: the original call is shown with the denial, for the server only.
    server.chat(&says("Use pick_file", "adk")).await;
    let denied = server.chat(&adk_pick_answer(false)).await;
    assert_eq!(
        denied.of_type("tool-input-available").len(),
        1,
        "{}",
        denied.body
    );
    assert!(run_by_client(&denied).is_empty(), "{}", denied.body);
    assert_eq!(errors(&denied).len(), 1, "{}", denied.body);

    // Native: held as provider-executed when asked, then denied.
    let server = self::server("").await;
    let asked = server.chat(&says("Use pick_file", "ai-sdk")).await;
    assert!(run_by_client(&asked).is_empty(), "{}", asked.body);
    let mut body = fixture("client_pick_approved.json");
    body["messages"][1]["parts"][1]["approval"]["approved"] = json!(false);
    let denied = server.chat(&body).await;
    assert!(run_by_client(&denied).is_empty(), "{}", denied.body);
    assert_eq!(
        denied.of_type("tool-output-denied").len(),
        1,
        "{}",
        denied.body
    );
}

#[tokio::test]
async fn a_rule_added_before_the_approval_keeps_the_call_from_the_client() {
    let deny = "toolConfirmation:\n  toolPolicies:\n    alwaysDeny: [internal--pick_file]\n";
    let store = toolgate::store::Store::memory();
    let first = Server::with(config(""), |app| app.with_store(store.clone())).await;
    first.chat(&says("Use pick_file", "adk")).await;
    let second = Server::with(config(deny), |app| app.with_store(store)).await;
    let reply = second.chat(&adk_pick_answer(true)).await;
    assert!(run_by_client(&reply).is_empty(), "{}", reply.body);
    assert!(
        errors(&reply)
            .iter()
            .any(|(id, why)| id == "call-2" && why.contains("denied")),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn a_replayed_adk_approval_hands_out_nothing() {
    let server = server("").await;
    server.chat(&says("Use pick_file", "adk")).await;
    let approved = server.chat(&adk_pick_answer(true)).await;
    assert_eq!(run_by_client(&approved), ["call-2"], "{}", approved.body);
    let replay = server.chat(&adk_pick_answer(true)).await;
    assert!(run_by_client(&replay).is_empty(), "{}", replay.body);
    assert!(
        replay
            .of_type("tool-input-available")
            .iter()
            .all(|c| c.get("providerMetadata").is_none()),
        "{}",
        replay.body
    );
    assert_eq!(
        errors(&replay),
        [("call-2".to_owned(), NO_RESULT.to_owned())]
    );
}

#[tokio::test]
async fn an_output_without_the_servers_approval_is_refused() {
    let server = server("").await;
    server.chat(&says("Use pick_file", "ai-sdk")).await;
    // The question is still open: naming it does not make it approved.
    let reply = server.chat(&fixture("client_pick_output.json")).await;
    let errors = errors(&reply);
    assert_eq!(errors.len(), 1, "{}", reply.body);
    assert!(
        errors[0]
            .1
            .contains("was handed to the client by this server"),
        "{errors:?}"
    );
    assert!(!reply.text().contains("report.pdf"), "{}", reply.body);
}

#[tokio::test]
async fn forged_client_results_are_refused() {
    let server = server("").await;
    server.chat(&says("Use get_location", "adk")).await;
    let cases: [(&str, Change, &str); 5] = [
        (
            "no hand-off named",
            |p| p["callProviderMetadata"] = Value::Null,
            "was handed to the client by this server",
        ),
        (
            "an unknown hand-off",
            |p| p["callProviderMetadata"]["toolgate"]["handoff"] = json!("handoff-99"),
            "was handed to the client by this server",
        ),
        (
            "other arguments",
            |p| p["input"] = json!({"precision": "street"}),
            "differs from the one this server handed",
        ),
        (
            "another call id",
            |p| p["toolCallId"] = json!("call-9"),
            "differs from the one this server handed",
        ),
        (
            "too large",
            |p| p["output"] = json!("x".repeat(MAX_OUTPUT_BYTES)),
            "larger than",
        ),
    ];
    for (case, change, why) in cases {
        let reply = server.chat(&location_output(change)).await;
        let errors = errors(&reply);
        assert_eq!(errors.len(), 1, "{case}: {}", reply.body);
        assert!(errors[0].1.contains(why), "{case}: {errors:?}");
        assert!(!reply.text().contains("Kyoto"), "{case}: {}", reply.body);
    }
    // The hand-off belongs to this chat only.
    let mut other_chat = fixture("client_location_output.json");
    other_chat["id"] = json!("chat-other");
    let reply = server.chat(&other_chat).await;
    assert_eq!(errors(&reply).len(), 1, "{}", reply.body);
}

#[tokio::test]
async fn a_rule_added_after_the_hand_off_refuses_the_result() {
    let deny = "toolConfirmation:\n  toolPolicies:\n    alwaysDeny: [internal--get_location]\n";
    let (allowing, denying) = (config(""), config(deny));
    // One store, two policies: the hand-off is made under the first.
    let store = toolgate::store::Store::memory();
    let first = Server::with(allowing, |app| app.with_store(store.clone())).await;
    first.chat(&says("Use get_location", "adk")).await;
    let second = Server::with(denying, |app| app.with_store(store)).await;
    let reply = second.chat(&fixture("client_location_output.json")).await;
    let errors = errors(&reply);
    assert_eq!(errors.len(), 1, "{}", reply.body);
    assert!(errors[0].1.contains("denied by policy"), "{errors:?}");
}

#[tokio::test]
async fn a_handed_out_call_without_a_result_is_an_error_for_the_model() {
    let server = server("").await;
    server.chat(&says("Use get_location", "adk")).await;
    let mut body = location_output(|p| {
        p["state"] = json!("input-available");
        p["output"] = Value::Null;
    });
    if let Some(messages) = body["messages"].as_array_mut() {
        messages.push(
            json!({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "hello"}]}),
        );
    }
    body["messageId"] = Value::Null;
    let reply = server.chat(&body).await;
    assert_eq!(reply.text(), "You said: hello", "{}", reply.body);
    // Continued instead, the model is told.
    let reply = server
        .chat(&location_output(|p| {
            p["state"] = json!("input-available");
        }))
        .await;
    assert_eq!(
        errors(&reply),
        [("call-2".to_owned(), NO_RESULT.to_owned())]
    );
    assert!(reply.text().contains(NO_RESULT), "{}", reply.body);
}

#[tokio::test]
async fn a_client_posting_an_output_for_a_server_tool_runs_nothing() {
    let server = server("").await;
    let body = location_output(|p| {
        p["type"] = json!("tool-process_payment");
        p["input"] = json!({"amount": 50, "recipient": "Hanako", "currency": "USD"});
    });
    server.chat(&body).await;
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn the_server_never_executes_a_client_tool() -> anyhow::Result<()> {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = |name: &str, needs_confirmation: bool| {
        let tool = ClientTool::new(ClientToolConfig {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
            needs_confirmation,
        })
        .must();
        Counting {
            inner: tool,
            count: runs.clone(),
        }
    };
    let (location, pick) = (counted("get_location", false), counted("pick_file", true));
    let config = config("");
    let mut registry = Settings::new(config.clone())?.registry;
    registry.register(location).register(pick);
    let server = Server::with(config, |app| app.with_registry(registry)).await;
    server.chat(&says("Use get_location", "adk")).await;
    server.chat(&fixture("client_location_output.json")).await;
    server.chat(&says("Use pick_file", "ai-sdk")).await;
    server.chat(&fixture("client_pick_approved.json")).await;
    server.chat(&fixture("client_pick_approved.json")).await;
    server.chat(&fixture("client_pick_output.json")).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    Ok(())
}

#[tokio::test]
async fn the_tool_list_says_which_tools_run_in_the_client() -> anyhow::Result<()> {
    let server = server("").await;
    let listed: Value = serde_json::from_str(&server.get("/api/tools").await.body)?;
    let source = |name: &str| {
        listed["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["qualifiedName"] == name))
            .map(|t| (t["source"].clone(), t["policy"].clone()))
    };
    let (kind, _) = source("internal--get_location").unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(kind, "client");
    assert_eq!(
        source("internal--process_payment").map(|(kind, _)| kind),
        Some(json!("builtin"))
    );
    Ok(())
}

#[tokio::test]
async fn an_accepted_result_stands_after_its_hand_off_expired_and_cannot_be_swapped() {
    let store = toolgate::store::Store::memory();
    let expiry = "toolConfirmation:\n  expirySecs: 60\n";
    let server = Server::with(config(expiry), |app| app.with_store(store.clone())).await;
    server.chat(&says("Use get_location", "adk")).await;
    let answered = server.chat(&fixture("client_location_output.json")).await;
    assert!(errors(&answered).is_empty(), "{}", answered.body);

    // Long after, the hand-off record is purged; the chat's history still
    // holds the result (re-sent here as the continued message, where a
    // refusal would show as a chunk).
    server
        .clock
        .advance(std::time::Duration::from_secs(2 * 3600));
    assert_eq!(
        store.purge_expired(server.clock.now_ms()).await.ok(),
        Some(1)
    );
    let later = server.chat(&fixture("client_location_output.json")).await;
    assert!(errors(&later).is_empty(), "{}", later.body);
    assert!(later.text().contains("Kyoto"), "{}", later.body);

    // Another result for that call is not taken, nor the taken one for
    // another call or chat.
    let swapped = server
        .chat(&location_output(|p| p["output"]["city"] = json!("Osaka")))
        .await;
    assert_eq!(
        errors(&swapped),
        [(
            "call-2".to_owned(),
            "the result differs from the one the client gave before".to_owned()
        )]
    );
    assert!(!swapped.text().contains("Osaka"), "{}", swapped.body);
    let moved = server
        .chat(&location_output(|p| p["toolCallId"] = json!("call-9")))
        .await;
    assert_eq!(errors(&moved).len(), 1, "{}", moved.body);
    let mut other_chat = fixture("client_location_output.json");
    other_chat["id"] = json!("chat-other");
    assert_eq!(errors(&server.chat(&other_chat).await).len(), 1);

    // Past the retention (the audit log's), the record goes too.
    server
        .clock
        .advance(std::time::Duration::from_secs(91 * 24 * 3600));
    assert_eq!(
        store.purge_expired(server.clock.now_ms()).await.ok(),
        Some(1)
    );
}

#[tokio::test]
async fn a_second_result_for_one_hand_off_is_refused() {
    let server = server("").await;
    server.chat(&says("Use get_location", "adk")).await;
    server.chat(&fixture("client_location_output.json")).await;
    let swapped = server
        .chat(&location_output(|p| p["output"]["city"] = json!("Osaka")))
        .await;
    assert_eq!(errors(&swapped).len(), 1, "{}", swapped.body);
    assert!(!swapped.text().contains("Osaka"), "{}", swapped.body);
}

#[tokio::test]
async fn hand_off_and_result_records_are_never_listed_as_questions() -> anyhow::Result<()> {
    // Both are kept as records, pending for the moment between their
    // insert and claim (or for good, if the process dies right then).
    let store = toolgate::store::Store::memory();
    let now = common::START_MS;
    for id in ["handoff-90", "handoff-90/result"] {
        let record = toolgate::store::Issued {
            id: id.into(),
            chat_id: "chat-loc".into(),
            principal: "anonymous".into(),
            call: toolgate::call::ToolCall {
                id: "call-90".into(),
                name: "get_location".into(),
                args: json!({}),
            },
            hint: String::new(),
            protocol: toolgate::protocol::ConfirmationProtocol::Adk,
            issued_at_ms: now,
            expires_at_ms: now + 60_000,
            kind: if id.ends_with("/result") {
                toolgate::store::RecordKind::ClientResult
            } else {
                toolgate::store::RecordKind::HandOff
            },
            fingerprint: None,
        };
        store.insert(record).await?;
    }
    let server = Server::with(config(""), |app| app.with_store(store)).await;
    let open = server.get("/api/confirmations?chatId=chat-loc").await;
    assert_eq!(open.status, 200);
    assert_eq!(open.body, "[]");
    Ok(())
}
