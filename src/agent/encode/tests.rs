//! The encoder's table: each row an event sequence and the chunks it makes,
//! one JSON line each, for both confirmation protocols and both ways a
//! native denial ends (`toolConfirmation.deniedAs`).

use serde_json::{Value, json};

use super::TurnEncoder;
use crate::agent::event::{AgentEvent, Asked};
use crate::call::ToolCall;
use crate::ids::Ids;
use crate::protocol::{ConfirmationProtocol, DeniedAs, FinishReason, Role, UiMessage};
use crate::store::{Issued, Outcome};

use ConfirmationProtocol::{Adk, AiSdk};

mod message;

fn stock() -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: "stock".into(),
        args: json!({"sku": "A1"}),
    }
}

/// The question about [`stock`], with the id the gate gives it.
fn issued(protocol: ConfirmationProtocol) -> Issued {
    let id = match protocol {
        Adk => "adk-1",
        AiSdk => "approval-1",
    };
    Issued {
        id: id.into(),
        chat_id: "chat".into(),
        principal: "alice".into(),
        call: stock(),
        hint: "Check stock?".into(),
        protocol,
        issued_at_ms: 0,
        expires_at_ms: 1,
        kind: crate::store::RecordKind::Question,
        fingerprint: None,
    }
}

fn asked(protocol: ConfirmationProtocol, metadata: Option<Value>) -> AgentEvent {
    AgentEvent::Asked(Asked {
        issued: issued(protocol),
        seal: None,
        metadata,
        streamed: protocol == AiSdk,
        client_side: false,
    })
}

fn confirmed(confirmed: bool) -> AgentEvent {
    AgentEvent::Confirmed {
        confirmation_id: "adk-1".into(),
        output: json!({"confirmed": confirmed}),
    }
}

fn outcome(outcome: Outcome, approval: Option<&str>) -> AgentEvent {
    AgentEvent::Outcome {
        call: stock(),
        outcome,
        approval: approval.map(str::to_owned),
        metadata: None,
    }
}

fn handed_off(asked: Option<ConfirmationProtocol>, handoff: &str) -> AgentEvent {
    AgentEvent::HandedOff {
        call: stock(),
        handoff: handoff.into(),
        asked,
        metadata: None,
        streamed: false,
    }
}

fn message() -> UiMessage {
    UiMessage {
        id: "msg-1".into(),
        role: Role::Assistant,
        parts: Vec::new(),
    }
}

/// The chunks of `events`, one JSON line each, and the message they built,
/// with native denials said as `denied_as`.
fn encode(denied_as: DeniedAs, events: Vec<AgentEvent>) -> (String, UiMessage) {
    let mut encoder = TurnEncoder::new(
        Ids::sequential(),
        denied_as,
        std::sync::Arc::new(crate::call::Redaction::standard()),
    );
    let mut message = message();
    let mut out = Vec::new();
    for event in events {
        encoder.on_event(event, &mut message, &mut out);
    }
    let lines: Vec<String> = out
        .iter()
        .map(|c| serde_json::to_string(c).unwrap_or_default())
        .collect();
    (lines.join("\n"), message)
}

#[test]
fn events_to_chunks() {
    let gemini = || Some(json!({"google": {"thoughtSignature": "sig"}}));
    let denied = Outcome::Denied {
        reason: Some("not now".into()),
    };
    // The same whichever way a native denial ends.
    let adk_denial = |name| {
        let events = vec![
            confirmed(false),
            AgentEvent::Released {
                call: stock(),
                kept: false,
            },
            outcome(denied.clone(), None),
        ];
        let wire = r#"{"type":"tool-output-available","toolCallId":"adk-1","output":{"confirmed":false}}
{"type":"tool-input-start","toolCallId":"call-1","toolName":"stock"}
{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"}}
{"type":"tool-output-error","toolCallId":"call-1","errorText":"User denied execution: not now"}"#;
        (name, events, wire)
    };
    let rows: Vec<(&str, Vec<AgentEvent>, &str)> = vec![
        (
            "a step of text after reasoning",
            vec![
                AgentEvent::Start,
                AgentEvent::StepStart,
                AgentEvent::ReasoningDelta("hm".into()),
                AgentEvent::TextDelta("hi".into()),
                AgentEvent::ModelEnd,
                AgentEvent::StepFinish,
                AgentEvent::Finish(FinishReason::Stop),
            ],
            r#"{"type":"start","messageId":"msg-1"}
{"type":"start-step"}
{"type":"reasoning-start","id":"rsn-1"}
{"type":"reasoning-delta","id":"rsn-1","delta":"hm"}
{"type":"reasoning-end","id":"rsn-1"}
{"type":"text-start","id":"txt-2"}
{"type":"text-delta","id":"txt-2","delta":"hi"}
{"type":"text-end","id":"txt-2"}
{"type":"finish-step"}
{"type":"finish","finishReason":"stop"}"#,
        ),
        (
            "adk: a question holds the call back and asks",
            vec![
                AgentEvent::TextDelta("let me see".into()),
                AgentEvent::ToolCallStart {
                    id: "call-1".into(),
                    name: "stock".into(),
                    live: false,
                },
                AgentEvent::ModelEnd,
                asked(Adk, gemini()),
            ],
            r#"{"type":"text-start","id":"txt-1"}
{"type":"text-delta","id":"txt-1","delta":"let me see"}
{"type":"text-end","id":"txt-1"}
{"type":"tool-input-start","toolCallId":"adk-1","toolName":"adk_request_confirmation"}
{"type":"tool-input-available","toolCallId":"adk-1","toolName":"adk_request_confirmation","input":{"originalFunctionCall":{"id":"call-1","name":"stock","args":{"sku":"A1"}},"toolConfirmation":{"hint":"Check stock?","confirmed":false}},"providerMetadata":{"google":{"thoughtSignature":"sig"}}}"#,
        ),
        (
            "native: a question streams the call and requests approval",
            vec![
                AgentEvent::ToolCallStart {
                    id: "call-1".into(),
                    name: "stock".into(),
                    live: true,
                },
                AgentEvent::ToolInputDelta {
                    id: "call-1".into(),
                    delta: "{}".into(),
                },
                AgentEvent::Asked(Asked {
                    issued: issued(AiSdk),
                    seal: Some(json!({"toolgate": {"seal": "s"}})),
                    metadata: gemini(),
                    streamed: true,
                    client_side: true,
                }),
            ],
            r#"{"type":"tool-input-start","toolCallId":"call-1","toolName":"stock"}
{"type":"tool-input-delta","toolCallId":"call-1","inputTextDelta":"{}"}
{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"},"providerExecuted":true,"providerMetadata":{"toolgate":{"seal":"s"},"google":{"thoughtSignature":"sig"}}}
{"type":"tool-approval-request","approvalId":"approval-1","toolCallId":"call-1"}"#,
        ),
        (
            "adk: an approved client-side call is handed off",
            vec![
                asked(Adk, gemini()),
                confirmed(true),
                handed_off(Some(Adk), "adk-1"),
            ],
            r#"{"type":"tool-input-start","toolCallId":"adk-1","toolName":"adk_request_confirmation"}
{"type":"tool-input-available","toolCallId":"adk-1","toolName":"adk_request_confirmation","input":{"originalFunctionCall":{"id":"call-1","name":"stock","args":{"sku":"A1"}},"toolConfirmation":{"hint":"Check stock?","confirmed":false}},"providerMetadata":{"google":{"thoughtSignature":"sig"}}}
{"type":"tool-output-available","toolCallId":"adk-1","output":{"confirmed":true}}
{"type":"tool-input-start","toolCallId":"call-1","toolName":"stock"}
{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"},"providerMetadata":{"google":{"thoughtSignature":"sig"},"toolgate":{"handoff":"adk-1"}}}"#,
        ),
        (
            "native: an approved client-side call is handed off",
            vec![
                asked(AiSdk, gemini()),
                handed_off(Some(AiSdk), "approval-1"),
            ],
            r#"{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"},"providerMetadata":{"google":{"thoughtSignature":"sig"}}}
{"type":"tool-approval-request","approvalId":"approval-1","toolCallId":"call-1"}
{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"},"providerExecuted":false,"providerMetadata":{"google":{"thoughtSignature":"sig"},"toolgate":{"handoff":"approval-1"}}}"#,
        ),
        (
            "a call that needs no question is handed off at once",
            vec![handed_off(None, "handoff-1")],
            r#"{"type":"tool-input-start","toolCallId":"call-1","toolName":"stock"}
{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"},"providerMetadata":{"toolgate":{"handoff":"handoff-1"}}}"#,
        ),
        (
            "a refused call runs nowhere",
            vec![AgentEvent::Refused {
                call: stock(),
                reason: "unknown tool `stock`".into(),
                metadata: None,
                streamed: false,
            }],
            r#"{"type":"tool-input-start","toolCallId":"call-1","toolName":"stock"}
{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"},"providerExecuted":true}
{"type":"tool-output-error","toolCallId":"call-1","errorText":"unknown tool `stock`"}"#,
        ),
        adk_denial("adk: a denial is the call's error"),
        (
            "native: a denial is tool-output-denied",
            vec![outcome(denied.clone(), Some("approval-1"))],
            r#"{"type":"tool-output-denied","toolCallId":"call-1"}"#,
        ),
        (
            "adk: an approved call is released, provider-executed, and runs",
            vec![
                confirmed(true),
                AgentEvent::Released {
                    call: stock(),
                    kept: true,
                },
                outcome(
                    Outcome::Output {
                        output: json!(3),
                        ran_with: None,
                        responded: false,
                    },
                    None,
                ),
            ],
            r#"{"type":"tool-output-available","toolCallId":"adk-1","output":{"confirmed":true}}
{"type":"tool-input-start","toolCallId":"call-1","toolName":"stock"}
{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"},"providerExecuted":true}
{"type":"tool-output-available","toolCallId":"call-1","output":3}"#,
        ),
        (
            "a permitted call's input, then its error",
            vec![
                AgentEvent::Permitted {
                    call: stock(),
                    metadata: None,
                    streamed: true,
                },
                outcome(
                    Outcome::Error {
                        message: "timed out".into(),
                        ran_with: None,
                    },
                    None,
                ),
            ],
            r#"{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"}}
{"type":"tool-output-error","toolCallId":"call-1","errorText":"timed out"}"#,
        ),
        (
            "a call handed off before whose client sent no result",
            vec![outcome(Outcome::HandedOff { ran_with: None }, None)],
            r#"{"type":"tool-output-error","toolCallId":"call-1","errorText":"no result from the client"}"#,
        ),
        (
            "unusable arguments are a tool-input-error only",
            vec![AgentEvent::InvalidInput {
                call: ToolCall {
                    args: json!("{"),
                    ..stock()
                },
                error_text: "invalid JSON arguments".into(),
                metadata: None,
            }],
            r#"{"type":"tool-input-error","toolCallId":"call-1","toolName":"stock","input":"{","errorText":"invalid JSON arguments"}"#,
        ),
        (
            "a rejected answer, then the turn fails",
            vec![
                AgentEvent::Rejected {
                    tool_call_id: "adk-1".into(),
                    error_text: "confirmation expired".into(),
                },
                AgentEvent::Error("the gate failed".into()),
            ],
            r#"{"type":"tool-output-error","toolCallId":"adk-1","errorText":"confirmation expired"}
{"type":"error","errorText":"the gate failed"}"#,
        ),
    ];
    // `deniedAs: output-error` changes a native denial only.
    let as_error: Vec<(&str, Vec<AgentEvent>, &str)> = vec![
        (
            "native, deniedAs output-error: a denial is the call's error",
            vec![
                asked(AiSdk, None),
                outcome(denied.clone(), Some("approval-1")),
            ],
            r#"{"type":"tool-input-available","toolCallId":"call-1","toolName":"stock","input":{"sku":"A1"}}
{"type":"tool-approval-request","approvalId":"approval-1","toolCallId":"call-1"}
{"type":"tool-output-error","toolCallId":"call-1","errorText":"User denied execution: not now"}"#,
        ),
        (
            "native, deniedAs output-error: a denial without a reason",
            vec![outcome(
                Outcome::Denied { reason: None },
                Some("approval-1"),
            )],
            r#"{"type":"tool-output-error","toolCallId":"call-1","errorText":"User denied execution"}"#,
        ),
        adk_denial("adk, deniedAs output-error: a denial is the call's error, as ever"),
        (
            "native, deniedAs output-error: an approved call's output is unchanged",
            vec![outcome(
                Outcome::Output {
                    output: json!(3),
                    ran_with: None,
                    responded: false,
                },
                Some("approval-1"),
            )],
            r#"{"type":"tool-output-available","toolCallId":"call-1","output":3}"#,
        ),
    ];
    let rows = rows
        .into_iter()
        .map(|(name, events, expected)| (name, DeniedAs::OutputDenied, events, expected))
        .chain(
            as_error
                .into_iter()
                .map(|(name, events, expected)| (name, DeniedAs::OutputError, events, expected)),
        );
    let wrong: Vec<String> = rows
        .filter_map(|(name, denied_as, events, expected)| {
            let (wire, _) = encode(denied_as, events);
            (wire != expected).then(|| format!("{name}:\n{wire}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
