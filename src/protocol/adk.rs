//! ADK's confirmation protocol on the wire: the question is an
//! `adk_request_confirmation` call whose input wraps the
//! `originalFunctionCall`; the answer is that call's output,
//! `{"confirmed": true, …}`. `native.rs` reads the AI SDK's own approvals
//! with the same functions.

use serde::Deserialize;
use serde_json::{Value, json};

use super::answer::{Answer, Decision, Seal, object};
use super::compat::ConfirmationProtocol;
use super::message::RequestError;
use super::message::{AnswerKeys, CONFIRMATION_TOOL, ToolPart, ToolState, confirmed};
use crate::call::ToolCall;

/// The answer in an `adk_request_confirmation` part, or `None` when the
/// part is another tool's or not answered yet. Anything but `confirmed:
/// true` is a denial, unless it is a response (`decision: "respond"`,
/// `output`); a malformed key is an error.
pub fn answer(part: &ToolPart) -> Result<Option<Answer>, RequestError> {
    if part.tool_name != CONFIRMATION_TOOL {
        return Ok(None);
    }
    let decision = match &part.state {
        ToolState::OutputAvailable {
            output,
            preliminary: false,
        } => {
            let keys = AnswerKeys::of_output(output)?;
            Decision::new(confirmed(output, &keys), keys)?
        }
        ToolState::OutputError { error_text } => Decision::Deny {
            reason: Some(error_text.clone()),
        },
        ToolState::OutputDenied(approval) => Decision::Deny {
            reason: approval.as_ref().and_then(|a| a.reason.clone()),
        },
        _ => return Ok(None),
    };
    Ok(Some(Answer {
        confirmation_id: part.tool_call_id.clone(),
        original: original_call(&part.input),
        decision,
        protocol: ConfirmationProtocol::Adk,
        seal: Seal::from_metadata(part.call_provider_metadata.as_ref()),
    }))
}

/// Whether `part` is an ADK question still waiting for its answer.
pub fn is_pending(part: &ToolPart) -> bool {
    part.tool_name == CONFIRMATION_TOOL
        && matches!(
            part.state,
            ToolState::InputStreaming | ToolState::InputAvailable
        )
}

/// The input of an `adk_request_confirmation` call asking about `call`.
pub fn question(call: &ToolCall, hint: &str) -> Value {
    json!({
        "originalFunctionCall": {"id": call.id, "name": call.name, "args": call.args},
        "toolConfirmation": {"hint": hint, "confirmed": false},
    })
}

/// A confirmation part's output for a question approved or denied, as
/// the client's answer says it: `{"confirmed": …}`.
pub fn answer_output(confirmed: bool) -> Value {
    json!({"confirmed": confirmed})
}

/// A confirmation part's output for a question a remembered approval
/// settled.
pub fn remembered_output() -> Value {
    json!({"confirmed": true, "remembered": true})
}

/// A confirmation part's output for a question the person answered in the
/// tool's place, with `output`.
pub fn response_output(output: &Value) -> Value {
    json!({"decision": "respond", "output": output})
}

/// `input.originalFunctionCall` as a call, if it has the right shape.
pub fn original_call(input: &Value) -> Option<ToolCall> {
    let original: OriginalFunctionCall = object(input.get("originalFunctionCall")?)?;
    Some(ToolCall {
        id: original.id,
        name: original.name,
        args: original.args,
    })
}

#[derive(Deserialize)]
struct OriginalFunctionCall {
    id: String,
    name: String,
    /// Absent is `null`, as the call was issued with no arguments.
    #[serde(default)]
    args: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(state: ToolState) -> ToolPart {
        ToolPart {
            tool_call_id: "adk-1".into(),
            tool_name: CONFIRMATION_TOOL.into(),
            dynamic: false,
            input: json!({"originalFunctionCall": {"id": "c", "name": "t", "args": {"a": 1}}}),
            state,
            provider_executed: false,
            call_provider_metadata: None,
        }
    }

    fn output(value: Value) -> ToolState {
        ToolState::OutputAvailable {
            output: value,
            preliminary: false,
        }
    }

    fn decision(state: ToolState) -> Option<Decision> {
        answer(&part(state)).ok().flatten().map(|a| a.decision)
    }

    #[test]
    fn only_confirmed_true_approves() {
        assert_eq!(
            decision(output(json!({"confirmed": true, "payload": {"d": 2}}))),
            Some(Decision::Approve {
                payload: Some(json!({"d": 2})),
                remember: None,
                approve_next: None,
                edited: None,
                grant: None
            })
        );
        assert_eq!(
            decision(output(json!({"confirmed": false, "reason": "no"}))),
            Some(Decision::Deny {
                reason: Some("no".into())
            })
        );
        for malformed in [
            json!({}),
            json!({"confirmed": "true"}),
            json!("yes"),
            json!(null),
            json!({"confirmed": 1}),
            json!({"confirmed": null}),
            json!([true]),
        ] {
            assert_eq!(
                decision(output(malformed.clone())),
                Some(Decision::Deny { reason: None }),
                "{malformed}"
            );
        }
        assert!(
            answer(&part(output(json!({"confirmed": true, "approveNext": -1})))).is_err(),
            "a malformed key is refused, not dropped"
        );
        for response in [
            json!({"decision": "respond", "output": {"policy": "30 days"}}),
            json!({"confirmed": true, "decision": "respond", "output": {"policy": "30 days"}}),
        ] {
            assert_eq!(
                decision(output(response.clone())),
                Some(Decision::Respond {
                    output: json!({"policy": "30 days"})
                }),
                "{response}"
            );
        }
        assert!(
            answer(&part(output(
                json!({"confirmed": false, "decision": "respond", "output": 1})
            )))
            .is_err(),
            "a response is no denial"
        );
        assert_eq!(decision(ToolState::InputAvailable), None);
        assert_eq!(
            decision(ToolState::OutputAvailable {
                output: json!({"confirmed": true}),
                preliminary: true
            }),
            None
        );
    }

    #[test]
    fn the_original_call_only_from_an_object() {
        let cases = [
            (
                json!({"originalFunctionCall": {"id": "c", "name": "t", "args": {"a": 1}}}),
                Some(("c", "t", json!({"a": 1}))),
            ),
            (
                json!({"originalFunctionCall": {"id": "c", "name": "t"}}),
                Some(("c", "t", Value::Null)),
            ),
            (json!({"originalFunctionCall": ["c", "t", {"a": 1}]}), None),
            (
                json!({"originalFunctionCall": {"id": 1, "name": "t"}}),
                None,
            ),
            (json!({"originalFunctionCall": {"name": "t"}}), None),
            (json!({"other": {}}), None),
            (json!("c"), None),
        ];
        for (input, expected) in cases {
            let expected = expected.map(|(id, name, args)| ToolCall {
                id: id.into(),
                name: name.into(),
                args,
            });
            assert_eq!(original_call(&input), expected, "{input}");
        }
    }

    #[test]
    fn a_question_reads_back_as_its_call() {
        let call = ToolCall {
            id: "c".into(),
            name: "t".into(),
            args: json!({"a": [1, 2]}),
        };
        assert_eq!(original_call(&question(&call, "sure?")), Some(call));
    }

    #[test]
    fn the_outputs_toolgate_writes_read_back_as_their_answers() {
        let approve = Some(Decision::Approve {
            payload: None,
            remember: None,
            approve_next: None,
            edited: None,
            grant: None,
        });
        assert_eq!(decision(output(answer_output(true))), approve);
        assert_eq!(decision(output(remembered_output())), approve);
        assert_eq!(
            decision(output(answer_output(false))),
            Some(Decision::Deny { reason: None })
        );
        assert_eq!(
            decision(output(response_output(&json!({"policy": "30 days"})))),
            Some(Decision::Respond {
                output: json!({"policy": "30 days"})
            })
        );
    }

    #[test]
    fn pending_until_answered() {
        assert!(is_pending(&part(ToolState::InputAvailable)));
        assert!(!is_pending(&part(output(json!({"confirmed": true})))));
        let mut other = part(ToolState::InputAvailable);
        other.tool_name = "t".into();
        assert!(!is_pending(&other));
    }
}
