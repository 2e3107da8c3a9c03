//! The outgoing message's tool parts: each event's change to them, made
//! where its chunk is made ([`super::TurnEncoder`]).

use serde_json::Value;

use crate::call::{ToolCall, cancelled_text, denial_text, expired_text};
use crate::protocol::message::Approval;
use crate::protocol::{DeniedAs, Part, ToolPart, ToolState, UiChunk, UiMessage};
use crate::store::Outcome;
use crate::tools::client::NO_RESULT;

/// Gives the call's part its final state and returns the chunk that says so.
/// A denial answered natively (`approval` is its id) is `tool-output-denied`
/// unless `denied_as` says `output-error`; otherwise it is an error the user
/// can read, the denial text the model reads too. A call with no part yet
/// gets one, with `metadata`.
pub(super) fn record(
    message: &mut UiMessage,
    call: ToolCall,
    outcome: &Outcome,
    approval: Option<String>,
    metadata: Option<Value>,
    denied_as: DeniedAs,
) -> UiChunk {
    let (chunk, state) = match (outcome, approval) {
        (Outcome::Output { output, .. }, _) => (
            UiChunk::tool_output(&call.id, output.clone()),
            ToolState::OutputAvailable {
                output: output.clone(),
                preliminary: false,
            },
        ),
        (Outcome::Error { message, .. }, _) => (
            UiChunk::tool_error(&call.id, message.clone()),
            ToolState::OutputError {
                error_text: message.clone(),
            },
        ),
        (Outcome::Denied { reason }, Some(approval_id)) if denied_as == DeniedAs::OutputDenied => (
            UiChunk::ToolOutputDenied {
                tool_call_id: call.id.clone(),
            },
            ToolState::OutputDenied(Some(Approval {
                id: approval_id,
                approved: Some(false),
                reason: reason.clone(),
            })),
        ),
        (Outcome::Denied { reason }, _) => {
            let text = denial_text(reason.as_deref());
            (
                UiChunk::tool_error(&call.id, text.clone()),
                ToolState::OutputError { error_text: text },
            )
        }
        // Nobody decided: not a denial, whichever protocol asked.
        (Outcome::Expired, _) => {
            let text = expired_text(&call.name);
            (
                UiChunk::tool_error(&call.id, text.clone()),
                ToolState::OutputError { error_text: text },
            )
        }
        (Outcome::Cancelled, _) => {
            let text = cancelled_text(&call.name);
            (
                UiChunk::tool_error(&call.id, text.clone()),
                ToolState::OutputError { error_text: text },
            )
        }
        // Handed out before (a replayed answer), and the client sent no result.
        (Outcome::HandedOff { .. }, _) => (
            UiChunk::tool_error(&call.id, NO_RESULT.to_owned()),
            ToolState::OutputError {
                error_text: NO_RESULT.to_owned(),
            },
        ),
    };
    // A part the client holds under this id gets the real call and outcome.
    match tool_part_mut(message, &call.id) {
        Some(part) => {
            part.tool_name = call.name;
            part.input = call.args;
            part.state = state;
        }
        None => {
            let part = tool_part(call.id, call.name, call.args, state, metadata);
            message.parts.push(part);
        }
    }
    chunk
}

/// Gives a call handed to the client its part, waiting for the client's result.
pub(super) fn hand_to_client(message: &mut UiMessage, call: ToolCall, metadata: Option<Value>) {
    match tool_part_mut(message, &call.id) {
        Some(part) => {
            part.tool_name = call.name;
            part.input = call.args;
            part.state = ToolState::InputAvailable;
            part.call_provider_metadata = metadata;
        }
        None => {
            let state = ToolState::InputAvailable;
            let part = tool_part(call.id, call.name, call.args, state, metadata);
            message.parts.push(part);
        }
    }
}

fn tool_part_mut<'a>(message: &'a mut UiMessage, id: &str) -> Option<&'a mut ToolPart> {
    message.parts.iter_mut().find_map(|p| match p {
        Part::Tool(t) if t.tool_call_id == id => Some(t),
        _ => None,
    })
}

/// The `callProviderMetadata` of the tool part `id`, if any.
pub(super) fn part_metadata(message: &UiMessage, id: &str) -> Option<Value> {
    message.parts.iter().find_map(|p| match p {
        Part::Tool(t) if t.tool_call_id == id => t.call_provider_metadata.clone(),
        _ => None,
    })
}

/// Sets the state of the tool part `id`, if there is one.
pub(super) fn set_state(message: &mut UiMessage, id: &str, state: ToolState) {
    if let Some(part) = tool_part_mut(message, id) {
        part.state = state;
    }
}

/// Both providers' metadata in one object (`{"toolgate": …, "google": …}`).
pub(super) fn merge(a: Option<Value>, b: Option<Value>) -> Option<Value> {
    match (a, b) {
        (Some(Value::Object(mut a)), Some(Value::Object(b))) => {
            a.extend(b);
            Some(Value::Object(a))
        }
        (a, b) => a.or(b),
    }
}

pub(super) fn tool_part(
    tool_call_id: String,
    tool_name: String,
    input: Value,
    state: ToolState,
    call_provider_metadata: Option<Value>,
) -> Part {
    Part::Tool(ToolPart {
        tool_call_id,
        tool_name,
        dynamic: false,
        input,
        state,
        provider_executed: false,
        call_provider_metadata,
    })
}
