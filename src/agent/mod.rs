//! The agent turn: UI history in, UI chunks out. One loop drives every turn
//! (`Turn::advance`, `turn.rs`); what runs the model and the tools is an
//! `Engine`: toolgate's own (the model through a [`ModelProvider`], each
//! call through the confirmation gate: `step.rs`, `answers.rs`, `held.rs`)
//! or an upstream ADK agent whose questions go through the gate
//! (`upstream/`). The turn emits events; `encode` alone makes chunks of them.

mod answers;
mod blocks;
mod encode;
mod event;
mod held;
pub mod history;
mod step;
mod turn;
mod upstream;

use std::collections::HashSet;
use std::sync::Arc;

use crate::call::ToolSpec;
use crate::confirm::{Gate, Scope};
use crate::ids::Ids;
use crate::protocol::{ConfirmationFlow, ConfirmationProtocol, DeniedAs, UiMessage};
use crate::provider::{ModelProvider, StopReason};
use answers::Answers;
use encode::TurnEncoder;
use step::{Model, Run};

pub use held::HeldTurn;

/// A turn's chunks, framed as they are made, in the pieces it makes them
/// in: those that are ready together (a model's events read at once, a
/// step's end) come as one batch, so that what handles them is polled once
/// a piece, not once a chunk. No piece is empty.
pub type Pieces = futures::stream::BoxStream<'static, crate::protocol::sink::Batch>;

/// Everything a turn needs; shared by all requests.
pub struct Agent {
    pub gate: Gate,
    pub provider: Arc<dyn ModelProvider>,
    pub ids: Ids,
    /// Model calls per turn before it stops (default 8).
    pub max_steps: usize,
    /// How a call denied through a native approval ends on the wire.
    pub denied_as: DeniedAs,
    /// An ADK agent that runs the model and its tools in place of
    /// `provider`; the turn then gates what it asks about.
    pub upstream: Option<Arc<crate::provider::adk::Adk>>,
    /// With a shared store: where a held turn saves what continues it, so
    /// that another instance takes it over if this one dies.
    pub turn_logs: Option<crate::store::TurnLogs>,
}

/// What runs a turn's model and tools: the one thing turns differ in.
/// Both run on one loop, [`Turn::advance`], through one encoder.
enum Engine {
    /// toolgate's own: the model through `provider`, each call it makes
    /// through the gate, the permitted ones run here.
    Own,
    /// An upstream ADK agent runs the model and the tools; the gate
    /// decides what it asks about (`upstream/`).
    Adk(Arc<crate::provider::adk::Adk>),
}

/// A turn in progress: what it has done, what comes next.
struct Turn {
    agent: Arc<Agent>,
    engine: Engine,
    scope: Scope,
    /// How the request that started the turn knew its principal
    /// (`scope.principal`): its answers in the chat are decided so.
    known: crate::identity::Known,
    /// The conversation; its last message is the outgoing one.
    history: Vec<UiMessage>,
    /// The client continued its last (assistant) message.
    continuing: bool,
    protocol: ConfirmationProtocol,
    flow: ConfirmationFlow,
    /// The `ai` version the client asked its chunks fitted to (saved with a held turn).
    client_version: Option<crate::protocol::ClientVersion>,
    /// Set while the turn waits for a human, so its readers may leave.
    waiting: tokio::sync::watch::Sender<bool>,
    encoder: TurnEncoder,
    phase: Phase,
    /// Model steps begun.
    steps: usize,
    /// Every toolCallId in the outgoing message: the client rejects a
    /// message with two parts of one id.
    taken: HashSet<String>,
    /// The tools the model is offered: one snapshot, taken after the answers.
    tools: Option<Arc<[ToolSpec]>>,
    step: StepState,
    /// When the turn was made: its first model request times toolgate's overhead.
    started: std::time::Instant,
}

/// What the current model step did so far.
#[derive(Default)]
struct StepState {
    /// A question waits for the user.
    asked: bool,
    /// A call was handed to the client: its result comes with the next request.
    handed: bool,
    /// The questions this step asked, for a held flow.
    questions: Vec<String>,
    had_calls: bool,
    stop: Option<StopReason>,
}

/// What [`Turn::advance`] does next.
enum Phase {
    /// The message's start.
    Start,
    /// What the client says its tools returned, judged.
    Judge,
    /// A continued message's answers and open questions.
    Answers(Answers),
    /// A new message: the questions still open in earlier messages, each
    /// looked up once.
    Earlier(std::vec::IntoIter<history::Earlier>),
    /// A model step begins, unless the turn is out of steps.
    Step,
    /// The model's response, one event at a time.
    Model(Model),
    /// The step's calls through the gate, one at a time.
    Gate(step::Gate),
    /// The permitted calls' outcomes, in call order.
    Run(Run),
    /// Held flow: the step's questions, each waited for.
    Hold(std::vec::IntoIter<String>),
    /// The upstream agent's turn, its state with it.
    Upstream(Box<upstream::Upstream>),
    Done,
}

/// The conversation a turn writes to, its last message the outgoing one:
/// the assistant message the client continues, or a new one; and whether
/// the client continued it.
fn outgoing(ids: &Ids, mut history: Vec<UiMessage>) -> (Vec<UiMessage>, bool) {
    let continuing = history
        .last()
        .is_some_and(|m| m.role == crate::protocol::Role::Assistant);
    if !continuing {
        history.push(UiMessage {
            id: ids.next("msg"),
            role: crate::protocol::Role::Assistant,
            parts: Vec::new(),
        });
    }
    (history, continuing)
}

/// What an ADK confirmation's own part says for a question decided
/// elsewhere (the API, a socket, another tab), as the client's answer
/// would: yes or no, or the person's response in the tool's place.
fn decided_answer(outcome: &crate::store::Outcome) -> serde_json::Value {
    use crate::protocol::adk;
    use crate::store::Outcome;
    match outcome {
        Outcome::Output {
            output,
            responded: true,
            ..
        } => adk::response_output(output),
        Outcome::Denied { .. } | Outcome::Expired | Outcome::Cancelled => adk::answer_output(false),
        Outcome::Output {
            responded: false, ..
        }
        | Outcome::Error { .. }
        | Outcome::HandedOff { .. } => adk::answer_output(true),
    }
}

/// How an ADK confirmation's own part ends once its question is settled:
/// with `output` (the answer, as the client's would be), or, for a
/// question nobody answered in time, as an error that says it expired.
fn card_settled(
    confirmation_id: String,
    output: serde_json::Value,
    outcome: Option<&crate::store::Outcome>,
    tool: &str,
) -> event::AgentEvent {
    match outcome {
        Some(crate::store::Outcome::Expired) => event::AgentEvent::Rejected {
            tool_call_id: confirmation_id,
            error_text: crate::call::expired_text(tool),
        },
        Some(crate::store::Outcome::Cancelled) => event::AgentEvent::Rejected {
            tool_call_id: confirmation_id,
            error_text: crate::call::cancelled_text(tool),
        },
        _ => event::AgentEvent::Confirmed {
            confirmation_id,
            output,
        },
    }
}
