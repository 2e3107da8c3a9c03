//! The hold flow: the stream stays open after asking, and a decision made
//! elsewhere (the approvals API) or the timeout lets the model go on.

use crate::common;
use crate::common::assert_contains;

use std::time::Duration;

use common::body::{Streaming, read_to, read_to_end};
use common::{Reply, Server, user_says, wait};
use serde_json::{Value, json};
use toolgate::Config;

fn held(chat: &str, text: &str) -> Value {
    let mut body = user_says(chat, text);
    body["toolgate"] = json!({"flow": "hold"});
    body
}

/// The chunk of a question, up to its input.
const QUESTION: &str = "\"toolName\":\"adk_request_confirmation\",\"input\"";

/// A held turn of `chat` paying Hanako, read up to its question: the open
/// body, and what was read.
async fn asking(server: &Server, chat: &str) -> (Streaming, String) {
    let held = held(chat, "Send 50 USD to Hanako");
    server.open_until(&held, |s| s.contains(QUESTION)).await
}

/// A server of `config` (a held flow with a short timeout), and its whole
/// reply to a payment in `chat` that nobody answers.
async fn unanswered(config: Config, chat: &str) -> (Server, Reply) {
    let server = Server::with_config(config).await;
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        server.chat(&user_says(chat, "Send 50 USD to Hanako")),
    )
    .await
    .unwrap_or_else(|_| panic!("the held stream never ended"));
    (server, reply)
}

#[tokio::test]
async fn an_approval_through_the_api_continues_the_open_stream() {
    let server = Server::start().await;
    let (mut body, mut seen) = asking(&server, "chat-hold").await;
    assert_eq!(server.payments(), 0);
    let decided = server.approve("adk-3").await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    read_to_end(&mut body, &mut seen).await;
    assert_eq!(server.payments(), 1);
    assert_sse!("hold_approved_through_the_api", seen);
}

#[tokio::test]
async fn a_denial_through_the_api_tells_the_model() {
    let server = Server::start().await;
    let (mut body, mut seen) = asking(&server, "chat-hold").await;
    let denied = r#"{"approved": false, "reason": "not today"}"#;
    let decided = server.decide("adk-3", denied).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    read_to_end(&mut body, &mut seen).await;
    assert_eq!(server.payments(), 0);
    assert_contains(&seen, r#""errorText":"User denied execution: not today""#);
    assert_contains(&seen, r#""finishReason":"stop""#);
}

#[tokio::test]
async fn nobody_deciding_in_time_ends_as_expired() -> anyhow::Result<()> {
    let config = Config::from_yaml("toolConfirmation:\n  timeout: 300\n  flow: hold\n")?;
    let (server, reply) = unanswered(config, "chat-late").await;
    assert_eq!(server.payments(), 0);
    assert_sse!("hold_expired", reply.body);

    // Too late: the question is gone, and says why.
    let late = server.approve("adk-3").await;
    assert_eq!(late.status, 410, "{}", late.body);
    let error: serde_json::Value = serde_json::from_str(&late.body).unwrap_or_default();
    assert_eq!(
        error["error"],
        "confirmation `adk-3` expired: nobody approved or denied it before it expired"
    );
    assert_eq!(error["outcome"], serde_json::json!({"kind": "expired"}));
    assert_eq!(server.payments(), 0);
    let open = server.get("/api/confirmations?chatId=chat-late").await;
    assert_eq!(open.body, "[]");
    let audit = server.get("/api/audit?chatId=chat-late").await;
    let decisions: Vec<String> = audit
        .json_lines()
        .iter()
        .filter_map(|event| event["decision"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(decisions, ["asked", "expired", "refused"], "{}", audit.body);
    Ok(())
}

/// A reload while a question is open: the held turn survives the client
/// that left, a resume replays it from `start`, and the decision reaches it.
#[tokio::test]
async fn a_reload_finds_the_held_turn_and_its_question() -> anyhow::Result<()> {
    let server = Server::start().await;
    assert_eq!(server.get("/stream/chat-reload/stream").await.status, 204);

    let (body, first) = asking(&server, "chat-reload").await;
    drop(body);
    // Time for the server to see the client leave, and wrongly end the held
    // turn if it would: what must not happen has no event to wait for.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let resumed = reqwest::get(format!("{}/api/chat/chat-reload/stream", server.url)).await?;
    assert_eq!(resumed.status(), 200);
    let mut body = Box::pin(resumed.bytes_stream());
    let mut seen = String::new();
    read_to(&mut body, &mut seen, QUESTION).await;
    // The same bytes, from `start` to the question.
    let upto = |s: &str| s[..s.find(QUESTION).map_or(0, |i| i + QUESTION.len())].to_owned();
    assert_eq!(upto(&seen), upto(&first));
    let decided = server.approve("adk-3").await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    read_to_end(&mut body, &mut seen).await;
    assert_eq!(server.payments(), 1);
    assert!(
        seen.ends_with("data: [DONE]\n\n") && seen.contains("tx-4"),
        "{seen}"
    );
    assert_eq!(server.get("/stream/chat-reload/stream").await.status, 204);
    Ok(())
}

/// A turn that is not waiting for anyone stops when its client leaves.
#[tokio::test]
async fn a_streaming_turn_is_not_kept_for_a_resume() -> anyhow::Result<()> {
    let server = Server::from_yaml("model:\n  deltaDelayMs: 20\n").await;
    let (body, _) = server
        .open_until(&user_says("chat-gone", "count to 500"), |s| {
            s.contains("text-delta")
        })
        .await;
    drop(body);
    wait::until(
        "the turn to stop without a reader (a resume answering 204)",
        || async { server.get("/stream/chat-gone/stream").await.status == 204 },
    )
    .await;
    Ok(())
}

/// Natively asked (`tool-approval-request`), a question nobody decides ends
/// as an error that says it expired, not as a denial.
#[tokio::test]
async fn a_native_question_nobody_decides_ends_as_expired() -> anyhow::Result<()> {
    let config =
        Config::from_yaml("toolConfirmation:\n  timeout: 300\n  flow: hold\n  protocol: ai-sdk\n")?;
    let (server, reply) = unanswered(config, "chat-native").await;
    assert_eq!(server.payments(), 0);
    assert_eq!(
        reply.of_type("tool-approval-request").len(),
        1,
        "{}",
        reply.body
    );
    assert!(
        reply.of_type("tool-output-denied").is_empty(),
        "{}",
        reply.body
    );
    let errors = reply.of_type("tool-output-error");
    assert_eq!(
        errors
            .iter()
            .map(|e| e["errorText"].as_str().unwrap_or(""))
            .collect::<Vec<_>>(),
        [
            "The request to run process_payment expired without an answer; nobody approved or denied it."
        ],
        "{}",
        reply.body
    );
    Ok(())
}
