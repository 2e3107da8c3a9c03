//! [`AgentEvent`]s → UI chunks, for both confirmation protocols. The only
//! place a turn's chunk is made and the only place the outgoing message
//! changes, so that what the client is told and what the model reads next
//! cannot drift apart. Pure: no I/O, no async.

use std::sync::Arc;

use serde_json::Value;

mod parts;

use super::blocks::Blocks;
use super::event::{AgentEvent, Asked};
use super::history::MOVED_ON;
use crate::call::{Redaction, ToolCall};
use crate::confirm::{CONFIRMATION_TOOL, shown_outcome, with_handoff};
use crate::ids::Ids;
use crate::protocol::chunk::DataChunk;
use crate::protocol::sink::ChunkSink;
use crate::protocol::{
    ConfirmationProtocol, DeltaText, DeniedAs, Part, ToolState, UiChunk, UiMessage,
};
use crate::store::Outcome;
use parts::{hand_to_client, merge, part_metadata, record, set_state, tool_part};

/// Encodes one turn's events; holds the open text or reasoning block.
#[derive(Debug)]
pub struct TurnEncoder {
    blocks: Blocks,
    /// How a natively denied call ends (`toolConfirmation.deniedAs`).
    denied_as: DeniedAs,
    /// What the client is never shown of a call's arguments: every chunk
    /// with a call's input is masked; the parts the model reads are not.
    redaction: Arc<Redaction>,
}

impl TurnEncoder {
    /// Block ids come from `ids`; a native denial is said as `denied_as`;
    /// calls' inputs are masked by `redaction`.
    pub fn new(ids: Ids, denied_as: DeniedAs, redaction: Arc<Redaction>) -> Self {
        Self {
            blocks: Blocks::new(ids),
            denied_as,
            redaction,
        }
    }

    /// [`AgentEvent::TextDelta`]'s chunks, for a caller that has the delta
    /// alone: the most frequent event, which as an `AgentEvent` would be
    /// moved whole (the size of the largest event) for its few bytes.
    pub fn text(&mut self, delta: DeltaText, message: &mut UiMessage, out: &mut impl ChunkSink) {
        self.blocks.text(delta, out, &mut message.parts);
    }

    /// [`AgentEvent::ReasoningDelta`]'s chunks, as [`TurnEncoder::text`].
    pub fn reasoning(
        &mut self,
        delta: DeltaText,
        message: &mut UiMessage,
        out: &mut impl ChunkSink,
    ) {
        self.blocks.reasoning(delta, out, &mut message.parts);
    }

    /// Appends `event`'s chunks to `out` and applies it to `message`, the
    /// outgoing one. The event is taken by value so that deltas and outputs
    /// move into their chunks instead of being copied.
    pub fn on_event(
        &mut self,
        event: AgentEvent,
        message: &mut UiMessage,
        out: &mut impl ChunkSink,
    ) {
        match event {
            AgentEvent::Start => out.push(UiChunk::Start {
                message_id: Some(message.id.clone()),
                message_metadata: None,
            }),
            AgentEvent::Rejected {
                tool_call_id,
                error_text,
            } => {
                set_state(
                    message,
                    &tool_call_id,
                    ToolState::OutputError {
                        error_text: error_text.clone(),
                    },
                );
                out.push(UiChunk::tool_error(&tool_call_id, error_text));
            }
            AgentEvent::Confirmed {
                confirmation_id,
                output,
            } => {
                // The part holds the answer as the client's does; the model
                // reads a confirmation part only for its error.
                let state = ToolState::OutputAvailable {
                    output: output.clone(),
                    preliminary: false,
                };
                set_state(message, &confirmation_id, state);
                out.push(UiChunk::tool_output(&confirmation_id, output));
            }
            AgentEvent::Released { call, kept } => {
                input_chunks(
                    &self.redaction,
                    &call,
                    true,
                    None,
                    kept.then_some(true),
                    out,
                );
            }
            AgentEvent::HandedOff {
                call,
                handoff,
                asked,
                metadata,
                streamed,
            } => {
                // A question's part holds the provider's metadata: ADK's the
                // confirmation's, native's the call's own.
                let (metadata, with_start, provider_executed) = match asked {
                    Some(ConfirmationProtocol::Adk) => {
                        (part_metadata(message, &handoff), true, None)
                    }
                    // Shown before as provider-executed; now `onToolCall` takes it.
                    Some(ConfirmationProtocol::AiSdk) => {
                        (part_metadata(message, &call.id), false, Some(false))
                    }
                    None => (metadata, !streamed, None),
                };
                let metadata = Some(with_handoff(metadata, &handoff));
                input_chunks(
                    &self.redaction,
                    &call,
                    with_start,
                    metadata.clone(),
                    provider_executed,
                    out,
                );
                hand_to_client(message, call, metadata);
            }
            AgentEvent::MovedOn {
                confirmation_id,
                call,
                outcome,
            } => {
                let data = serde_json::json!({
                    "confirmationId": confirmation_id,
                    "toolCallId": call.id,
                    "toolName": call.name,
                    "input": self.redaction.mask(&call.name, &call.args),
                    "outcome": shown_outcome(&self.redaction, &call.name, &outcome),
                });
                out.push(UiChunk::Data(Box::new(DataChunk {
                    name: MOVED_ON.to_owned(),
                    id: Some(confirmation_id),
                    data: data.clone(),
                    transient: None,
                })));
                let name = MOVED_ON.to_owned();
                message.parts.push(Part::Data { name, data });
            }
            AgentEvent::StepStart => {
                out.push(UiChunk::StartStep);
                message.parts.push(Part::StepStart);
            }
            AgentEvent::TextDelta(delta) => self.text(delta, message, out),
            AgentEvent::ReasoningDelta(delta) => self.reasoning(delta, message, out),
            AgentEvent::ReasoningEnd(metadata) => {
                self.blocks.reasoning_end(metadata, out, &mut message.parts);
            }
            AgentEvent::ToolCallStart { id, name, live } => {
                self.blocks.close(out, &mut message.parts);
                if live {
                    out.push(UiChunk::ToolInputStart {
                        tool_call_id: id,
                        tool_name: name,
                        extras: Default::default(),
                    });
                }
            }
            AgentEvent::ToolInputDelta { id, delta } => out.push(UiChunk::ToolInputDelta {
                tool_call_id: id,
                input_text_delta: delta,
            }),
            AgentEvent::ModelEnd => self.blocks.close(out, &mut message.parts),
            AgentEvent::InvalidInput {
                call,
                error_text,
                metadata,
            } => {
                out.push(UiChunk::ToolInputError {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    input: Box::new(self.redaction.mask(&call.name, &call.args).into_owned()),
                    error_text: error_text.clone(),
                    extras: Default::default(),
                });
                let outcome = Outcome::Error {
                    message: error_text,
                    ran_with: None,
                };
                // `tool-input-error` already told the client; the part is
                // for the model.
                record(message, call, &outcome, None, metadata, self.denied_as);
            }
            AgentEvent::Permitted {
                call,
                metadata,
                streamed,
            } => input_chunks(&self.redaction, &call, !streamed, metadata, None, out),
            AgentEvent::Asked(asked) => ask(&self.redaction, asked, message, out),
            AgentEvent::Refused {
                call,
                reason,
                metadata,
                streamed,
            } => {
                // A refused call runs nowhere: `onToolCall` skips what is
                // provider-executed.
                input_chunks(
                    &self.redaction,
                    &call,
                    !streamed,
                    metadata.clone(),
                    Some(true),
                    out,
                );
                let outcome = Outcome::Error {
                    message: reason,
                    ran_with: None,
                };
                out.push(record(
                    message,
                    call,
                    &outcome,
                    None,
                    metadata,
                    self.denied_as,
                ));
            }
            AgentEvent::Outcome {
                call,
                outcome,
                approval,
                metadata,
            } => out.push(record(
                message,
                call,
                &outcome,
                approval,
                metadata,
                self.denied_as,
            )),
            AgentEvent::StepFinish => out.push(UiChunk::FinishStep),
            AgentEvent::Error(error_text) => out.push(UiChunk::Error { error_text }),
            AgentEvent::Finish(reason) => out.push(UiChunk::finish(reason)),
        }
    }
}

/// A question's chunks and its part: ADK's confirmation call, or a native
/// approval request on the call itself.
fn ask(redaction: &Redaction, asked: Asked, message: &mut UiMessage, out: &mut impl ChunkSink) {
    let metadata = merge(asked.seal, asked.metadata);
    let issued = asked.issued;
    match issued.protocol {
        ConfirmationProtocol::Adk => {
            let shown = redaction.mask_call(&issued.call);
            let input = crate::protocol::adk::question(&shown, &issued.hint);
            out.push(UiChunk::tool_input_start(&issued.id, CONFIRMATION_TOOL));
            let mut available =
                UiChunk::tool_input_available(&issued.id, CONFIRMATION_TOOL, input.clone());
            set_extras(&mut available, metadata.clone(), None);
            out.push(available);
            let state = ToolState::InputAvailable;
            let part = tool_part(
                issued.id,
                CONFIRMATION_TOOL.to_owned(),
                input,
                state,
                metadata,
            );
            message.parts.push(part);
        }
        ConfirmationProtocol::AiSdk => {
            // A client-side tool's call is the server's to hold until
            // approved: `onToolCall` skips what is provider-executed.
            let call = issued.call;
            let held = asked.client_side.then_some(true);
            input_chunks(
                redaction,
                &call,
                !asked.streamed,
                metadata.clone(),
                held,
                out,
            );
            out.push(UiChunk::ToolApprovalRequest {
                approval_id: issued.id.clone(),
                tool_call_id: call.id.clone(),
            });
            let state = ToolState::ApprovalRequested {
                approval_id: issued.id,
            };
            let part = tool_part(call.id, call.name, call.args, state, metadata);
            message.parts.push(part);
        }
    }
}

/// `tool-input-start` (unless it already streamed) and
/// `tool-input-available` (its input masked) with `metadata` and
/// `provider_executed`.
fn input_chunks(
    redaction: &Redaction,
    call: &ToolCall,
    with_start: bool,
    metadata: Option<Value>,
    provider_executed: Option<bool>,
    out: &mut impl ChunkSink,
) {
    if with_start {
        out.push(UiChunk::tool_input_start(&call.id, &call.name));
    }
    let input = redaction.mask(&call.name, &call.args).into_owned();
    let mut chunk = UiChunk::tool_input_available(&call.id, &call.name, input);
    set_extras(&mut chunk, metadata, provider_executed);
    out.push(chunk);
}

/// Puts `metadata` (the client returns it as the part's
/// `callProviderMetadata`) and `provider_executed` (the client's
/// `onToolCall` skips a call that is) on a `tool-input-available` chunk.
fn set_extras(chunk: &mut UiChunk, metadata: Option<Value>, provider_executed: Option<bool>) {
    if let UiChunk::ToolInputAvailable { extras, .. } = chunk {
        if metadata.is_some() {
            extras.provider_metadata =
                merge(extras.provider_metadata.take().map(|m| *m), metadata).map(Box::new);
        }
        extras.provider_executed = provider_executed;
    }
}

#[cfg(test)]
mod tests;
