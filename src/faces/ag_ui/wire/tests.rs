use serde_json::{Value, json};

use super::*;
use crate::call::ToolCall;
use crate::protocol::chunk::ToolExtras;
use crate::protocol::{BlockId, ConfirmationProtocol, UiChunk};
use crate::run::RecordKind;

/// The chunk `json` is the AI SDK's JSON of (the kinds these tests write).
fn chunk(json: &Value) -> UiChunk {
    let text = |key: &str| json[key].as_str().unwrap_or_default().to_owned();
    let id = || BlockId::from(text("id"));
    let input = || Box::new(json["input"].clone());
    let extras = ToolExtras::default;
    match json["type"].as_str().unwrap_or_default() {
        "start" => UiChunk::Start {
            message_id: Some(text("messageId")),
            message_metadata: None,
        },
        "start-step" => UiChunk::StartStep,
        "finish-step" => UiChunk::FinishStep,
        "finish" => UiChunk::Finish {
            finish_reason: None,
            message_metadata: None,
        },
        "abort" => UiChunk::Abort { reason: None },
        "error" => UiChunk::Error {
            error_text: text("errorText"),
        },
        block @ ("text-start" | "text-delta" | "text-end") => {
            block_chunk(false, block, id(), text("delta"))
        }
        block @ ("reasoning-start" | "reasoning-delta" | "reasoning-end") => {
            block_chunk(true, block, id(), text("delta"))
        }
        "tool-input-start" => UiChunk::ToolInputStart {
            tool_call_id: text("toolCallId"),
            tool_name: text("toolName"),
            extras: extras(),
        },
        "tool-input-delta" => UiChunk::ToolInputDelta {
            tool_call_id: text("toolCallId"),
            input_text_delta: text("inputTextDelta"),
        },
        "tool-input-available" => UiChunk::ToolInputAvailable {
            tool_call_id: text("toolCallId"),
            tool_name: text("toolName"),
            input: input(),
            extras: extras(),
        },
        "tool-input-error" => UiChunk::ToolInputError {
            tool_call_id: text("toolCallId"),
            tool_name: text("toolName"),
            input: input(),
            error_text: text("errorText"),
            extras: extras(),
        },
        "tool-approval-request" => UiChunk::ToolApprovalRequest {
            approval_id: text("approvalId"),
            tool_call_id: text("toolCallId"),
        },
        "tool-output-available" => UiChunk::ToolOutputAvailable {
            tool_call_id: text("toolCallId"),
            output: Box::new(json["output"].clone()),
            provider_executed: None,
            provider_metadata: None,
            dynamic: None,
            preliminary: json["preliminary"].as_bool(),
        },
        "tool-output-error" => UiChunk::ToolOutputError {
            tool_call_id: text("toolCallId"),
            error_text: text("errorText"),
            provider_executed: None,
            provider_metadata: None,
            dynamic: None,
        },
        "tool-output-denied" => UiChunk::ToolOutputDenied {
            tool_call_id: text("toolCallId"),
        },
        other => panic!("no test chunk {other}"),
    }
}

/// A text or reasoning block's chunk, by its JSON type.
fn block_chunk(reasoning: bool, kind: &str, id: BlockId, delta: String) -> UiChunk {
    let provider_metadata = None;
    let delta = delta.into();
    match (reasoning, kind.rsplit('-').next()) {
        (false, Some("start")) => UiChunk::TextStart {
            id,
            provider_metadata,
        },
        (false, Some("delta")) => UiChunk::TextDelta {
            id,
            delta,
            provider_metadata,
        },
        (false, _) => UiChunk::TextEnd {
            id,
            provider_metadata,
        },
        (true, Some("start")) => UiChunk::ReasoningStart {
            id,
            provider_metadata,
        },
        (true, Some("delta")) => UiChunk::ReasoningDelta {
            id,
            delta,
            provider_metadata,
        },
        (true, _) => UiChunk::ReasoningEnd {
            id,
            provider_metadata,
        },
    }
}

/// The events of `chunks`; what the run ends with.
fn check(chunks: &[Value], expected: &[Value]) -> Tail {
    let mut translator = Translator::new("run-1");
    let mut events = Vec::new();
    for json in chunks {
        events.extend(translator.on_chunk(&chunk(json)));
    }
    assert_eq!(events, expected);
    translator.tail()
}

#[test]
fn text_and_reasoning_are_messages_named_by_the_run() {
    let tail = check(
        &[
            json!({"type": "start", "messageId": "msg-1"}),
            json!({"type": "start-step"}),
            json!({"type": "reasoning-start", "id": "r-1"}),
            json!({"type": "reasoning-delta", "id": "r-1", "delta": "hm"}),
            json!({"type": "reasoning-end", "id": "r-1"}),
            json!({"type": "text-start", "id": "t-1"}),
            json!({"type": "text-delta", "id": "t-1", "delta": "Hi"}),
            json!({"type": "text-delta", "id": "t-1", "delta": ""}),
            json!({"type": "text-delta", "id": "t-9", "delta": "unopened"}),
            json!({"type": "text-end", "id": "t-1"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish"}),
        ],
        &[
            json!({"type": "REASONING_START", "messageId": "run-1.r-1"}),
            json!({"type": "REASONING_MESSAGE_START", "messageId": "run-1.r-1", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "run-1.r-1", "delta": "hm"}),
            json!({"type": "REASONING_MESSAGE_END", "messageId": "run-1.r-1"}),
            json!({"type": "REASONING_END", "messageId": "run-1.r-1"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "run-1.t-1", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "run-1.t-1", "delta": "Hi"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "run-1.t-1"}),
        ],
    );
    assert_eq!(
        tail.messages,
        [
            json!({"id": "run-1.r-1", "role": "reasoning", "content": "hm"}),
            json!({"id": "run-1.t-1", "role": "assistant", "content": "Hi"}),
        ]
    );
    assert_eq!(tail.ended, Ended::Finished);
}

#[test]
fn a_streamed_call_keeps_its_deltas_and_an_asked_one_is_noted() {
    let tail = check(
        &[
            json!({"type": "tool-input-start", "toolCallId": "call-1", "toolName": "pay"}),
            json!({"type": "tool-input-delta", "toolCallId": "call-1", "inputTextDelta": "{\"a\":"}),
            json!({"type": "tool-input-delta", "toolCallId": "call-1", "inputTextDelta": "1}"}),
            json!({"type": "tool-input-available", "toolCallId": "call-1", "toolName": "pay", "input": {"a": 1}}),
            json!({"type": "tool-approval-request", "approvalId": "approval-2", "toolCallId": "call-1"}),
            json!({"type": "finish", "finishReason": "tool-calls"}),
        ],
        &[
            json!({"type": "TOOL_CALL_START", "toolCallId": "call-1", "toolCallName": "pay", "parentMessageId": "call-1"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": "{\"a\":"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": "1}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "call-1"}),
        ],
    );
    assert_eq!(tail.asked, [("approval-2".to_owned(), "call-1".to_owned())]);
    assert_eq!(
        tail.messages[0]["toolCalls"][0]["function"],
        json!({"name": "pay", "arguments": "{\"a\":1}"})
    );
}

#[test]
fn a_call_said_whole_gets_its_start_and_arguments_and_each_outcome_a_result() {
    let result = |id: &str, content: &str| json!({"type": "TOOL_CALL_RESULT", "messageId": format!("run-1.result.{id}"), "toolCallId": id, "content": content, "role": "tool"});
    check(
        &[
            json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "w", "input": {"city": "Paris"}}),
            json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"t": 20}, "preliminary": true}),
            json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"t": 21}}),
            json!({"type": "tool-output-available", "toolCallId": "c2", "output": "plain"}),
            json!({"type": "tool-output-error", "toolCallId": "c3", "errorText": "boom"}),
            json!({"type": "tool-output-denied", "toolCallId": "c4"}),
            json!({"type": "tool-input-error", "toolCallId": "c5", "toolName": "w", "input": {}, "errorText": "bad"}),
        ],
        &[
            json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "w", "parentMessageId": "c1"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"city\":\"Paris\"}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c1"}),
            result("c1", "{\"t\":21}"),
            result("c2", "plain"),
            result("c3", "boom"),
            result("c4", DENIED),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c5", "toolCallName": "w", "parentMessageId": "c5"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c5", "delta": "{}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c5"}),
            result("c5", "bad"),
        ],
    );
}

#[test]
fn a_step_s_calls_join_its_text_message_and_a_new_step_starts_another() {
    let start = |id: &str, parent: &str| json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": "pay", "parentMessageId": parent});
    let whole = |id: &str| json!({"type": "tool-input-available", "toolCallId": id, "toolName": "pay", "input": {}});
    let args = |id: &str| json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": "{}"});
    let end = |id: &str| json!({"type": "TOOL_CALL_END", "toolCallId": id});
    let tail = check(
        &[
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "t-1"}),
            json!({"type": "text-delta", "id": "t-1", "delta": "Paying both."}),
            json!({"type": "text-end", "id": "t-1"}),
            whole("a"),
            whole("b"),
            json!({"type": "finish-step"}),
            json!({"type": "start-step"}),
            whole("c"),
            whole("d"),
        ],
        &[
            json!({"type": "TEXT_MESSAGE_START", "messageId": "run-1.t-1", "role": "assistant"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "run-1.t-1", "delta": "Paying both."}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "run-1.t-1"}),
            start("a", "run-1.t-1"),
            args("a"),
            end("a"),
            start("b", "run-1.t-1"),
            args("b"),
            end("b"),
            start("c", "c"),
            args("c"),
            end("c"),
            start("d", "c"),
            args("d"),
            end("d"),
        ],
    );
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "pay", "arguments": "{}"}});
    assert_eq!(
        tail.messages,
        [
            json!({"id": "run-1.t-1", "role": "assistant", "content": "Paying both.", "toolCalls": [call("a"), call("b")]}),
            json!({"id": "c", "role": "assistant", "toolCalls": [call("c"), call("d")]}),
        ]
    );
}

#[test]
fn an_error_is_a_run_error_and_an_abort_a_cancelled_run() {
    let failed = check(
        &[
            json!({"type": "error", "errorText": "the model failed"}),
            json!({"type": "text-start", "id": "t-1"}),
        ],
        &[json!({"type": "RUN_ERROR", "message": "the model failed", "code": TURN_ERROR})],
    );
    assert_eq!(failed.ended, Ended::Failed);
    let aborted = check(&[json!({"type": "abort"})], &[]);
    assert_eq!(
        run_finished("t", "r", &aborted.ended, Vec::new())["outcome"],
        json!({"type": "cancelled"})
    );
    assert_eq!(
        run_finished("t", "r", &Ended::Finished, vec![json!({"id": "q"})])["outcome"],
        json!({"type": "interrupt", "interrupts": [{"id": "q"}]})
    );
    assert_eq!(
        run_finished("t", "r", &Ended::Finished, Vec::new())["outcome"],
        json!({"type": "success"})
    );
}

fn issued() -> Issued {
    Issued {
        id: "approval-3".into(),
        chat_id: "thread-1".into(),
        principal: "alice".into(),
        call: ToolCall {
            id: "call-2".into(),
            name: "process_payment".into(),
            args: json!({"amount": 50}),
        },
        hint: "Send 50 USD?".into(),
        protocol: ConfirmationProtocol::AiSdk,
        issued_at_ms: 0,
        expires_at_ms: 86_400_000,
        kind: RecordKind::Question,
        fingerprint: None,
    }
}

const PLAIN: Allowed = Allowed {
    remember: false,
    edits: false,
};
const ALL: Allowed = Allowed {
    remember: true,
    edits: true,
};

#[test]
fn a_question_is_a_tool_bound_interrupt() {
    let parameters = json!({"type": "object", "properties": {"amount": {"type": "number"}}});
    let interrupt = interrupt(&issued(), ALL, Some(&parameters));
    assert_eq!(
        interrupt,
        json!({
            "id": "approval-3",
            "reason": "confirmation",
            "message": "Approve running `process_payment` with {\"amount\":50}? Send 50 USD?",
            "toolCallId": "call-2",
            "responseSchema": {
                "type": "object",
                "properties": {
                    "approved": {"type": "boolean"},
                    "reason": {"type": "string"},
                    "remember": {"type": "string", "enum": ["once", "chat", "always"]},
                    "editedArgs": parameters,
                },
                "required": ["approved"],
                "additionalProperties": false,
            },
            "expiresAt": "1970-01-02T00:00:00.000Z",
        })
    );
    let plain = response_schema(PLAIN, None);
    assert_eq!(
        plain["properties"].as_object().map(|p| p.len()),
        Some(2),
        "{plain}"
    );
}

#[test]
fn payloads_against_the_schema() {
    let approve = |remember, edited| Decision::Approve {
        payload: None,
        remember,
        approve_next: None,
        edited,
        grant: None,
    };
    let cases: Vec<(Value, Allowed, Result<Decision, &str>)> = vec![
        (json!({"approved": true}), PLAIN, Ok(approve(None, None))),
        (
            json!({"approved": false, "reason": "no"}),
            PLAIN,
            Ok(Decision::Deny {
                reason: Some("no".into()),
            }),
        ),
        (
            json!({"approved": true, "remember": "once"}),
            ALL,
            Ok(approve(None, None)),
        ),
        (
            json!({"approved": true, "remember": "chat"}),
            ALL,
            Ok(approve(Some(Remember::Chat), None)),
        ),
        (
            json!({"approved": true, "remember": "always"}),
            ALL,
            Ok(approve(Some(Remember::Everywhere), None)),
        ),
        (
            json!({"approved": true, "editedArgs": {"amount": 1}}),
            ALL,
            Ok(approve(None, Some(json!({"amount": 1})))),
        ),
        (
            json!({"approved": true, "remember": "chat"}),
            PLAIN,
            Err("remember"),
        ),
        (
            json!({"approved": true, "editedArgs": {}}),
            PLAIN,
            Err("editedArgs"),
        ),
        (
            json!({"approved": true, "remember": "forever"}),
            ALL,
            Err("once, chat, always"),
        ),
        (
            json!({"approved": true, "editedArgs": [1]}),
            ALL,
            Err("an object"),
        ),
        (
            json!({"approved": false, "editedArgs": {}}),
            ALL,
            Err("a denial"),
        ),
        (json!({"approved": "true"}), PLAIN, Err("true or false")),
        (json!({"reason": "why"}), PLAIN, Err("true or false")),
        (
            json!({"approved": true, "reason": 1}),
            PLAIN,
            Err("a string"),
        ),
        (json!({"approved": true, "x": 1}), ALL, Err("`x`")),
        (json!([true]), PLAIN, Err("an object")),
    ];
    for (payload, allowed, expected) in cases {
        let got = decision(Some(&payload), allowed);
        match (&got, expected) {
            (Ok(got), Ok(expected)) => assert_eq!(got, &expected, "{payload}"),
            (Err(why), Err(part)) => assert!(why.contains(part), "{payload}: {why}"),
            _ => panic!("{payload}: {got:?}"),
        }
    }
    assert!(decision(None, ALL).is_err());
}

#[test]
fn times_are_rfc3339_utc() {
    for (ms, text) in [
        (0, "1970-01-01T00:00:00.000Z"),
        (951_782_400_123, "2000-02-29T00:00:00.123Z"),
        (1_798_761_599_999, "2026-12-31T23:59:59.999Z"),
        (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
    ] {
        assert_eq!(rfc3339(ms), text);
    }
}
