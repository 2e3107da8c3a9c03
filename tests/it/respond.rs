//! The `respond` decision: a person answers in the tool's place. The tool
//! never runs; the answer is the call's result, which the model reads.
//! Through the API, in the chat's ADK answer, on a held turn and a socket's
//! `confirm` frame; replays, conflicts, malformed responses, and an output
//! that does not fit the tool's output schema.

use crate::common;
use crate::common::assert_contains;
use anyhow::Context;

use common::ws::{connect, lines, send, turn, until, until_end};
use common::{Server, fixture, user_says, wait};
use serde_json::{Value, json};
use toolgate::Config;

const FIXTURE: &str = env!("CARGO_BIN_EXE_toolgate-mcp-fixture");

fn note() -> Value {
    json!({"note": "paid by cheque"})
}

fn respond(output: Value) -> Value {
    json!({"decision": "respond", "output": output})
}

/// What the scripted model says of the human's output.
const SAID: &str = r#"process_payment returned {"note":"paid by cheque"}."#;

/// The chat's follow-up with `output` as the ADK confirmation's answer.
fn answered(output: Value) -> Value {
    let mut body = fixture("pay_hanako_approved.json");
    body["messages"][1]["parts"][1]["output"] = output;
    body
}

/// The output each part ended with, by its tool call id.
fn output_of(reply: &common::Reply, id: &str) -> Value {
    reply
        .of_type("tool-output-available")
        .into_iter()
        .find(|c| c["toolCallId"] == id)
        .map(|c| c["output"].clone())
        .unwrap_or_else(|| panic!("no output for {id} in {}", reply.body))
}

async fn decide(server: &Server, id: &str, body: Value) -> (u16, Value) {
    let reply = server.decide(id, body.to_string()).await;
    (reply.status, reply.json())
}

async fn audit(server: &Server) -> Vec<Value> {
    server.get("/api/audit").await.json_lines()
}

fn decisions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["decision"].as_str().unwrap_or("").to_owned())
        .collect()
}

async fn open_questions(server: &Server, chat: &str) -> usize {
    let open = server
        .get(&format!("/api/confirmations?chatId={chat}"))
        .await;
    open.json().as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn a_response_through_the_api_is_the_result_and_nothing_runs() {
    let server = Server::start().await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let (status, first) = decide(&server, "adk-3", respond(note())).await;
    assert_eq!(
        (status, &first),
        (
            200,
            &json!({"id": "adk-3", "outcome": {"kind": "output", "output": note(), "responded": true}})
        )
    );
    assert_eq!(server.payments(), 0);

    // The same response again is a replay; any other decision a conflict.
    assert_eq!(
        decide(&server, "adk-3", respond(note())).await,
        (200, first)
    );
    let conflicts = [
        (
            respond(json!({"note": "paid in cash"})),
            "confirmation `adk-3` was already responded to with another output",
        ),
        (
            json!({"approved": true}),
            "confirmation `adk-3` was already responded to",
        ),
        (
            json!({"approved": false}),
            "confirmation `adk-3` was already responded to",
        ),
    ];
    for (body, error) in conflicts {
        assert_eq!(
            decide(&server, "adk-3", body).await,
            (409, json!({"error": error}))
        );
    }
    assert_eq!(server.payments(), 0);

    // The page's next request: the call ends with the human's output,
    // the confirmation shows the answer, and the model reads it.
    let reply = server.chat(&fixture("pay_hanako_unanswered.json")).await;
    assert_eq!(output_of(&reply, "call-2"), note());
    assert_eq!(output_of(&reply, "adk-3"), respond(note()));
    assert_eq!(reply.text(), SAID);
    assert_eq!(server.payments(), 0);

    let events = audit(&server).await;
    assert_eq!(
        decisions(&events),
        [
            "asked",
            "responded",
            "replayed",
            "refused",
            "refused",
            "refused"
        ]
    );
    assert_eq!(events[1]["by"], "user through the API");
    assert_eq!(events[1]["reason"], Value::Null);
}

#[tokio::test]
async fn a_response_after_an_approval_is_a_conflict() {
    let server = Server::start().await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let (status, _) = decide(&server, "adk-3", json!({"approved": true})).await;
    assert_eq!(status, 200);
    assert_eq!(
        decide(&server, "adk-3", respond(note())).await,
        (
            409,
            json!({"error": "confirmation `adk-3` was already approved"})
        )
    );
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn a_response_in_the_chat_is_the_result() {
    let server = Server::start().await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let body = answered(respond(note()));
    let reply = server.chat(&body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(output_of(&reply, "adk-3"), respond(note()), "the echo");
    assert_eq!(output_of(&reply, "call-2"), note());
    assert_eq!(reply.text(), SAID);
    assert_eq!(server.payments(), 0);

    // The same answer again gets the recorded outcome.
    let replay = server.chat(&body).await;
    assert_eq!(output_of(&replay, "call-2"), note());
    assert_eq!(server.payments(), 0);
    let events = audit(&server).await;
    assert_eq!(decisions(&events), ["asked", "responded", "replayed"]);
    assert_eq!(events[1]["by"], "user");
    assert_eq!(events[1]["reason"], Value::Null);
}

#[tokio::test]
async fn a_response_continues_a_held_turn() {
    let server = Server::start().await;
    let mut body = user_says("chat-hold", "Send 50 USD to Hanako");
    body["toolgate"] = json!({"flow": "hold"});
    let (reply, (status, _)) = tokio::join!(server.chat(&body), async {
        wait::until("the question to be asked", || async {
            open_questions(&server, "chat-hold").await == 1
        })
        .await;
        decide(&server, "adk-3", respond(note())).await
    });
    assert_eq!(status, 200);
    assert_eq!(output_of(&reply, "adk-3"), respond(note()));
    assert_eq!(output_of(&reply, "call-2"), note());
    assert_eq!(reply.text(), SAID);
    assert!(
        reply.body.contains(r#""finishReason":"stop""#),
        "{}",
        reply.body
    );
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_confirm_frame_responds_on_the_socket() {
    let server = Server::start().await;
    let mut socket = connect(&server).await;
    let mut body = user_says("chat-hold", "Send 50 USD to Hanako");
    body["toolgate"] = json!({"flow": "hold"});
    send(&mut socket, turn("r1", &body)).await;
    let mut frames = Vec::new();
    until(&mut socket, &mut frames, "originalFunctionCall").await;
    send(
        &mut socket,
        json!({"type": "confirm", "confirmationId": "adk-3", "decision": "respond", "output": note(), "requestId": "r1"}),
    )
    .await;
    until_end(&mut socket, &mut frames, "r1").await;
    let seen = lines(&frames);
    assert_contains(
        &seen,
        r#""toolCallId":"call-2","output":{"note":"paid by cheque"}"#,
    );
    assert_contains(&seen, r#""finishReason":"stop""#);
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_malformed_response_is_refused_whole() {
    let server = Server::start().await;
    server.says("chat-pay", "Send 50 USD to Hanako").await;
    let cases = [
        (
            json!({"approved": false, "decision": "respond", "output": note()}),
            json!({"confirmed": false, "decision": "respond", "output": note()}),
            r#"invalid request: invalid answer: `decision: "respond"` is no denial: leave `confirmed`/`approved` out, or `true`"#,
        ),
        (
            json!({"decision": "respond"}),
            json!({"decision": "respond"}),
            r#"invalid request: invalid answer: `decision: "respond"` needs an `output`"#,
        ),
        (
            json!({"approved": true, "decision": "maybe", "output": note()}),
            json!({"confirmed": true, "decision": "maybe", "output": note()}),
            "unknown variant `maybe`, expected `respond`",
        ),
        (
            json!({"approved": true, "output": note()}),
            json!({"confirmed": true, "output": note()}),
            r#"invalid request: invalid answer: `output` comes only with `decision: "respond"`"#,
        ),
    ];
    for (api, chat, error) in cases {
        let (status, said) = decide(&server, "adk-3", api.clone()).await;
        assert_eq!(status, 400, "{api}: {said}");
        let said = said["error"].as_str().unwrap_or_default().to_owned();
        assert!(said.contains(error), "{api}: {said}");
        let reply = server.chat(&answered(chat.clone())).await;
        assert_eq!(reply.status, 400, "{chat}: {}", reply.body);
    }
    assert_eq!(
        decide(&server, "adk-3", json!({})).await,
        (
            400,
            json!({"error": r#"invalid request: missing `approved` (`confirmed`), or `decision: "respond"`"#})
        )
    );
    assert_eq!(server.payments(), 0);
    assert_eq!(
        open_questions(&server, "chat-pay").await,
        1,
        "the question stays open"
    );
}

#[tokio::test]
async fn a_response_must_fit_the_tools_output_schema() -> anyhow::Result<()> {
    let yaml = format!("mcpServers:\n  notes:\n    command: {FIXTURE}\n");
    let config = Config::from_yaml(&yaml).with_context(|| yaml.clone())?;
    let server = Server::with(config, |app| app.with_provider(common::calls::Calls)).await;
    wait::until("the MCP server to be available", || async {
        server
            .get("/api/tools")
            .await
            .body
            .contains("\"available\"")
    })
    .await;
    let first = server
        .says("chat-notes", r#"mcp--notes--read_note {"path": "todo"}"#)
        .await;
    let asked = first.of_type("tool-input-available");
    let id = asked[0]["toolCallId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        asked[0]["toolName"],
        common::confirmation_name(),
        "{}",
        first.body
    );

    let (status, refused) = decide(&server, &id, respond(json!({"text": 5}))).await;
    assert_eq!(
        (status, refused),
        (
            400,
            json!({"error": "invalid request: the response does not fit the output schema of mcp--notes--read_note: /text breaks the `type` rule"})
        )
    );
    assert_eq!(open_questions(&server, "chat-notes").await, 1);
    let fits = json!({"path": "todo", "text": "call the bank"});
    let (status, decided) = decide(&server, &id, respond(fits.clone())).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["outcome"]["output"], fits);
    assert_eq!(
        decisions(&audit(&server).await),
        ["asked", "refused", "responded"]
    );
    Ok(())
}
