//! The outgoing message each event sequence builds: what the model reads
//! next follows what the client was told.

use serde_json::json;

use super::{Adk, AiSdk, asked, confirmed, encode, outcome};
use crate::agent::event::AgentEvent;
use crate::protocol::message::Approval;
use crate::protocol::{DeniedAs, Part, ToolState, UiMessage};
use crate::store::Outcome;

#[test]
fn the_message_follows_the_chunks() {
    let tool = |message: &UiMessage, id: &str| {
        message.parts.iter().find_map(|p| match p {
            Part::Tool(t) if t.tool_call_id == id => Some(t.state.clone()),
            _ => None,
        })
    };
    // ADK: the question's part, answered; the call's own part, denied.
    let denied = Outcome::Denied { reason: None };
    let (_, message) = encode(
        DeniedAs::OutputDenied,
        vec![
            asked(Adk, None),
            confirmed(false),
            outcome(denied.clone(), None),
        ],
    );
    assert_eq!(
        tool(&message, "adk-1"),
        Some(ToolState::OutputAvailable {
            output: json!({"confirmed": false}),
            preliminary: false
        })
    );
    assert_eq!(
        tool(&message, "call-1"),
        Some(ToolState::OutputError {
            error_text: "User denied execution".into()
        })
    );
    // Native: one part, from approval requested to denied.
    let native_denial = || {
        vec![
            AgentEvent::StepStart,
            asked(AiSdk, None),
            outcome(denied.clone(), Some("approval-1")),
        ]
    };
    let (_, message) = encode(DeniedAs::OutputDenied, native_denial());
    assert_eq!(message.parts.len(), 2);
    assert_eq!(
        tool(&message, "call-1"),
        Some(ToolState::OutputDenied(Some(Approval {
            id: "approval-1".into(),
            approved: Some(false),
            reason: None
        })))
    );
    // Native, `deniedAs: output-error`: the part ends in the error the
    // client was sent, which the model reads back as the same denial.
    let (_, message) = encode(DeniedAs::OutputError, native_denial());
    assert_eq!(message.parts.len(), 2);
    let state = tool(&message, "call-1");
    assert_eq!(
        state,
        Some(ToolState::OutputError {
            error_text: "User denied execution".into()
        })
    );
    let text = match state {
        Some(ToolState::OutputError { error_text }) => error_text,
        _ => String::new(),
    };
    assert_eq!(crate::call::parse_denial(&text), Some(None));
}
