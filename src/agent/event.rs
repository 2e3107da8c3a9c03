//! What happened in a turn, before it is a chunk: the turn (which does the
//! I/O) emits these, and [`super::encode::TurnEncoder`] alone turns them into
//! chunks and into the outgoing message.

use serde_json::Value;

use crate::call::ToolCall;
use crate::protocol::{ConfirmationProtocol, DeltaText, FinishReason};
use crate::store::{Issued, Outcome};

/// One thing a turn did, in the order it did it. Closed: a new kind of event
/// is a new variant, which the encoder must then handle.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The turn began; the outgoing message's id goes to the client.
    Start,
    /// The gate did not take an answer, or a client's result, on the part
    /// `tool_call_id`: that part ends with this error.
    Rejected {
        tool_call_id: String,
        error_text: String,
    },
    /// An ADK question was settled: its confirmation part's output
    /// (`{"confirmed": …}`).
    Confirmed {
        confirmation_id: String,
        output: Value,
    },
    /// An approved ADK call, held back while it was asked about, is shown
    /// now. `kept`: the client's `onToolCall` must skip it (only a hand-off
    /// gives a client-side tool's call to the client).
    Released {
        call: ToolCall,
        kept: bool,
    },
    /// A client-side tool's call handed to the client to run, under
    /// `handoff` (for an answered question: the confirmation's id).
    HandedOff {
        call: ToolCall,
        handoff: String,
        /// The protocol it was asked in, if it was asked about: the part
        /// asked on then holds the provider's metadata.
        asked: Option<ConfirmationProtocol>,
        /// The provider's metadata of a call that was not asked about.
        metadata: Option<Value>,
        /// Its `tool-input-start` already went out (a live call).
        streamed: bool,
    },
    /// A model step began.
    StepStart,
    TextDelta(DeltaText),
    ReasoningDelta(DeltaText),
    /// The reasoning block ends with the metadata its provider needs back.
    ReasoningEnd(Value),
    /// The model began a call. `live`: its input streams as it arrives;
    /// otherwise it is shown only once the gate decided.
    ToolCallStart {
        id: String,
        name: String,
        live: bool,
    },
    /// More arguments of a live call.
    ToolInputDelta {
        id: String,
        delta: String,
    },
    /// The model's response in this step ended.
    ModelEnd,
    /// A call whose arguments are unusable (not JSON, too large), recorded
    /// as this error; `call.args` is the text the model sent.
    InvalidInput {
        call: ToolCall,
        error_text: String,
        metadata: Option<Value>,
    },
    /// The gate lets a call run now; its outcome follows.
    Permitted {
        call: ToolCall,
        metadata: Option<Value>,
        streamed: bool,
    },
    /// A call needs a human.
    Asked(Asked),
    /// The call cannot run anywhere (e.g. an unknown tool).
    Refused {
        call: ToolCall,
        reason: String,
        metadata: Option<Value>,
        streamed: bool,
    },
    /// A call ended: output, error, denial, or handed off before.
    Outcome {
        call: ToolCall,
        outcome: Outcome,
        /// The native approval it answers: a denial is then
        /// `tool-output-denied`, otherwise an error the user can read.
        approval: Option<String>,
        /// The provider's metadata, for a call with no part yet.
        metadata: Option<Value>,
    },
    /// A question the user moved on from (wrote a new message while its
    /// card was open) has an outcome now: decided elsewhere, expired, or
    /// cancelled. Its card is in an earlier message, so the outcome goes in
    /// this one as a `data-toolgate-outcome` part, for the client's history
    /// and the model's.
    MovedOn {
        confirmation_id: String,
        /// The call as it ran.
        call: ToolCall,
        outcome: Outcome,
    },
    /// A model step ended.
    StepFinish,
    /// The turn failed; the stream ends.
    Error(String),
    /// The turn ended.
    Finish(FinishReason),
}

/// A question about a call, asked in `issued.protocol`.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub issued: Issued,
    /// The seal of the question, when answers are signed.
    pub seal: Option<Value>,
    /// The provider's metadata of the call.
    pub metadata: Option<Value>,
    pub streamed: bool,
    /// A client-side tool: the server holds its call until approved.
    pub client_side: bool,
}
