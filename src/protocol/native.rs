//! The AI SDK's own approvals (ai 6+) on the wire: the question is the
//! tool's part in state `approval-requested`, the answer the same part
//! `approval-responded` with `approval.approved`. `adk.rs` reads ADK's
//! confirmations with the same functions.

use super::answer::{Answer, Decision, Seal};
use super::compat::ConfirmationProtocol;
use super::message::RequestError;
use super::message::{CONFIRMATION_TOOL, ToolPart, ToolState};
use crate::call::ToolCall;

/// The answer in a tool part whose approval was responded to, or `None`.
/// Anything but `approved: true` is a denial. Never an error: an approval's
/// keys are typed where the part is parsed.
pub fn answer(part: &ToolPart) -> Result<Option<Answer>, RequestError> {
    // ADK's wrapper call is read by `adk.rs`, whatever its state.
    if part.tool_name == CONFIRMATION_TOOL {
        return Ok(None);
    }
    let ToolState::ApprovalResponded(approval) = &part.state else {
        return Ok(None);
    };
    let decision = match approval.approved {
        Some(true) => Decision::Approve {
            payload: None,
            remember: None,
            approve_next: None,
            edited: None,
            grant: None,
        },
        Some(false) | None => Decision::Deny {
            reason: approval.reason.clone(),
        },
    };
    Ok(Some(Answer {
        confirmation_id: approval.id.clone(),
        original: Some(ToolCall {
            id: part.tool_call_id.clone(),
            name: part.tool_name.clone(),
            args: part.input.clone(),
        }),
        decision,
        protocol: ConfirmationProtocol::AiSdk,
        seal: Seal::from_metadata(part.call_provider_metadata.as_ref()),
    }))
}

/// Whether `part` is an approval still waiting for its answer.
pub fn is_pending(part: &ToolPart) -> bool {
    matches!(part.state, ToolState::ApprovalRequested { .. })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::message::Approval;

    fn part(state: ToolState) -> ToolPart {
        ToolPart {
            tool_call_id: "call-1".into(),
            tool_name: "process_payment".into(),
            dynamic: false,
            input: json!({"amount": 1}),
            state,
            provider_executed: false,
            call_provider_metadata: None,
        }
    }

    fn responded(approved: Option<bool>, reason: Option<&str>) -> Option<Answer> {
        let approval = Approval {
            id: "apr-1".into(),
            approved,
            reason: reason.map(str::to_owned),
        };
        answer(&part(ToolState::ApprovalResponded(approval)))
            .ok()
            .flatten()
    }

    #[test]
    fn approval_responses() {
        assert_eq!(
            responded(Some(true), None),
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
                    edited: None,
                    grant: None
                },
                protocol: ConfirmationProtocol::AiSdk,
                seal: None,
            })
        );
        for approved in [None, Some(false)] {
            assert_eq!(
                responded(approved, Some("hm")).map(|a| a.decision),
                Some(Decision::Deny {
                    reason: Some("hm".into())
                })
            );
        }
    }

    #[test]
    fn only_a_responded_approval_answers() {
        assert_eq!(
            answer(&part(ToolState::InputAvailable)).ok().flatten(),
            None
        );
        let mut wrapper = part(ToolState::ApprovalResponded(Approval {
            id: "apr-1".into(),
            approved: Some(true),
            reason: None,
        }));
        wrapper.tool_name = CONFIRMATION_TOOL.into();
        assert_eq!(answer(&wrapper).ok().flatten(), None);
    }

    #[test]
    fn pending_until_responded() {
        let requested = ToolState::ApprovalRequested {
            approval_id: "apr-1".into(),
        };
        assert!(is_pending(&part(requested)));
        assert!(!is_pending(&part(ToolState::InputAvailable)));
    }
}
