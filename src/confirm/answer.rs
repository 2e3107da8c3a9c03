//! Reading a user's answer out of an `adk_request_confirmation` tool part.
//! Everything here is untrusted: it only says what the client claims.

use serde_json::Value;

use super::CONFIRMATION_TOOL;
use super::signing::Seal;
use crate::call::ToolCall;
pub use crate::protocol::message::{AnswerKeys, Remember};
use crate::protocol::{ConfirmationProtocol, RequestError, ToolPart, ToolState};

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Approve {
        payload: Option<Value>,
        remember: Option<Remember>,
        approve_next: Option<u32>,
        /// Arguments the user changed before approving.
        edited: Option<Value>,
    },
    Deny {
        reason: Option<String>,
    },
}

impl Decision {
    /// A yes or no with the answer's other keys, however it arrived.
    pub fn new(approved: bool, keys: AnswerKeys) -> Self {
        if approved {
            Decision::Approve {
                payload: keys.payload,
                remember: keys.remember,
                approve_next: keys.approve_next,
                edited: keys.edited_args,
            }
        } else {
            Decision::Deny {
                reason: keys.reason,
            }
        }
    }
}

/// What the client says about one confirmation.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub confirmation_id: String,
    /// The `originalFunctionCall` the client sent back, if it parses.
    pub original: Option<ToolCall>,
    pub decision: Decision,
    pub protocol: ConfirmationProtocol,
    /// The signature that came back with the question, if any.
    pub seal: Option<Seal>,
}

impl Answer {
    /// The answer in a tool part, or `None` when the part holds none: an
    /// answered `adk_request_confirmation` part, or (ai 6+) a part whose
    /// approval was responded to. Anything but an explicit `confirmed:
    /// true` is a denial (fail closed); a malformed key ([`AnswerKeys`]) is
    /// an error: the request that carries it is refused.
    pub fn from_part(part: &ToolPart) -> Result<Option<Self>, RequestError> {
        if part.tool_name != CONFIRMATION_TOOL {
            let ToolState::ApprovalResponded(approval) = &part.state else {
                return Ok(None);
            };
            let decision = match approval.approved {
                Some(true) => Decision::Approve {
                    payload: None,
                    remember: None,
                    approve_next: None,
                    edited: None,
                },
                Some(false) | None => Decision::Deny {
                    reason: approval.reason.clone(),
                },
            };
            return Ok(Some(Answer {
                confirmation_id: approval.id.clone(),
                original: Some(ToolCall {
                    id: part.tool_call_id.clone(),
                    name: part.tool_name.clone(),
                    args: part.input.clone(),
                }),
                decision,
                protocol: ConfirmationProtocol::AiSdk,
                seal: Seal::from_metadata(part.call_provider_metadata.as_ref()),
            }));
        }
        let decision = match &part.state {
            ToolState::OutputAvailable {
                output,
                preliminary: false,
            } => {
                let yes = output.get("confirmed") == Some(&Value::Bool(true));
                Decision::new(yes, AnswerKeys::of_output(output)?)
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

    /// Whether `part` is a question still waiting for its answer.
    pub fn is_pending(part: &ToolPart) -> bool {
        match &part.state {
            ToolState::InputStreaming | ToolState::InputAvailable => {
                part.tool_name == CONFIRMATION_TOOL
            }
            ToolState::ApprovalRequested { .. } => true,
            _ => false,
        }
    }
}

/// `input.originalFunctionCall` as a call, if it has the right shape.
pub fn original_call(input: &Value) -> Option<ToolCall> {
    let original = input.get("originalFunctionCall")?;
    Some(ToolCall {
        id: original.get("id")?.as_str()?.to_owned(),
        name: original.get("name")?.as_str()?.to_owned(),
        args: original.get("args").cloned().unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::Approval;
    use serde_json::json;

    fn part(state: ToolState) -> ToolPart {
        ToolPart {
            tool_call_id: "adk-1".into(),
            tool_name: "adk_request_confirmation".into(),
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

    #[test]
    fn native_approval_responses() {
        let native = |approval: Approval| {
            let mut p = part(ToolState::ApprovalResponded(approval));
            p.tool_name = "process_payment".into();
            p.tool_call_id = "call-1".into();
            p.input = json!({"amount": 1});
            Answer::from_part(&p).ok().flatten()
        };
        let yes = native(Approval {
            id: "apr-1".into(),
            approved: Some(true),
            reason: None,
        });
        assert_eq!(
            yes,
            Some(Answer {
                confirmation_id: "apr-1".into(),
                original: Some(ToolCall {
                    id: "call-1".into(),
                    name: "process_payment".into(),
                    args: json!({"amount": 1})
                }),
                decision: Decision::Approve {
                    payload: None,
                    remember: None,
                    approve_next: None,
                    edited: None
                },
                protocol: ConfirmationProtocol::AiSdk,
                seal: None,
            })
        );
        let unsure = native(Approval {
            id: "apr-1".into(),
            approved: None,
            reason: Some("hm".into()),
        });
        assert_eq!(
            unsure.map(|a| a.decision),
            Some(Decision::Deny {
                reason: Some("hm".into())
            })
        );
    }

    #[test]
    fn only_confirmed_true_approves() {
        let decision = |state| {
            Answer::from_part(&part(state))
                .ok()
                .flatten()
                .map(|a| a.decision)
        };
        assert_eq!(
            decision(output(json!({"confirmed": true, "payload": {"d": 2}}))),
            Some(Decision::Approve {
                payload: Some(json!({"d": 2})),
                remember: None,
                approve_next: None,
                edited: None
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
        ] {
            assert_eq!(
                decision(output(malformed)),
                Some(Decision::Deny { reason: None })
            );
        }
        assert_eq!(
            decision(output(json!({"confirmed": false, "reason": "too much"}))),
            Some(Decision::Deny {
                reason: Some("too much".into())
            })
        );
        assert!(
            Answer::from_part(&part(output(json!({"confirmed": true, "approveNext": -1}))))
                .is_err(),
            "a malformed key is refused, not dropped"
        );
        assert_eq!(decision(ToolState::InputAvailable), None);
        assert_eq!(
            decision(ToolState::OutputAvailable {
                output: json!({"confirmed": true}),
                preliminary: true
            }),
            None
        );
        assert_eq!(
            Answer::from_part(&part(output(json!({"confirmed": true}))))
                .ok()
                .flatten()
                .and_then(|a| a.original),
            Some(ToolCall {
                id: "c".into(),
                name: "t".into(),
                args: json!({"a": 1})
            })
        );
    }
}
