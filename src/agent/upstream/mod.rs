//! The turn's upstream engine (`model.provider: adk`): an ADK agent runs
//! the model and the tools. The turn ([`Turn::advance`], the same loop as
//! toolgate's own model) sends it the user's new message, or the answers
//! the gate took to its questions, and shows what the agent did.
//!
//! Nothing else of the (untrusted) history reaches ADK: ADK keeps the
//! conversation itself, and would take a client's made-up result for a
//! gated call as the tool's. Its questions pass the gate as the model's
//! calls do (the policy first, then the user), and an answer reaches ADK
//! only once the gate took it; from then on the request to ADK runs on
//! the gate's tracked tasks to its end, so a client that hangs up cannot
//! lose an approval it gave.
//!
//! `events.rs` reads ADK's events, `answers.rs` takes the answers through
//! the gate; this file steps the engine, one piece of I/O at a time.

mod answers;
mod events;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::mpsc;

use super::event::AgentEvent;
use super::history::user_content;
use super::{Phase, Turn};
use crate::call::ToolCall;
use crate::confirm::{Gate, GateError};
use crate::protocol::sink::Out;
use crate::protocol::{ConfirmationFlow, FinishReason, Role, UiMessage};
use crate::provider::adk::{Adk, AdkEvent, Message, Reply};
use crate::provider::{ProviderError, UserContent};

/// ADK's events as the turn reads them.
type Events = BoxStream<'static, Result<AdkEvent, ProviderError>>;

/// Events buffered between a kept request to ADK and the turn reading it.
const KEPT: usize = 64;

/// A user's message says nothing ADK can take.
const NOTHING_TO_SAY: &str = "the last user message has no text or file for the agent";

/// What the upstream engine knows while the turn reads ADK.
pub(super) struct Upstream {
    adk: Arc<Adk>,
    /// ADK's session of the chat, once found.
    session: String,
    next: Next,
    /// Requests sent to ADK, each a round of its events.
    round: usize,
    step_open: bool,
    /// Calls ADK's model made whose fate is not known yet: run, or asked about.
    pending: Vec<ToolCall>,
    /// Approved calls whose result ADK sends next, with the native approval
    /// they answer.
    approved: HashMap<String, (ToolCall, Option<String>)>,
    /// Calls whose outcome the turn has shown already (a denial): ADK's
    /// own words for it are not shown again.
    decided: HashSet<String>,
    /// Answers for ADK's next request.
    replies: Vec<Reply>,
    /// Questions waiting for a human, asked in this turn.
    asked: Vec<String>,
    /// Questions of the continued message nobody answered yet.
    unanswered: usize,
    failed: bool,
}

/// What the engine does next.
enum Next {
    /// Finds (or makes) the chat's ADK session.
    Session,
    /// Sends ADK the user's message, or the continued message's answers.
    First,
    /// Reads ADK's events for the current request, one at a time.
    Read(Events),
    /// The request's events are read: the calls left shown, the held
    /// questions waited for, the answers sent on.
    RoundEnd,
    /// The turn's end.
    End,
}

/// What ADK gets first.
enum First {
    Send(Message),
    /// The answers' request, started by the task that took them.
    Started(Events),
}

impl Upstream {
    pub(super) fn new(adk: Arc<Adk>) -> Box<Self> {
        Box::new(Self {
            adk,
            session: String::new(),
            next: Next::Session,
            round: 0,
            step_open: false,
            pending: Vec::new(),
            approved: HashMap::new(),
            decided: HashSet::new(),
            replies: Vec::new(),
            asked: Vec::new(),
            unanswered: 0,
            failed: false,
        })
    }

    /// Ends the turn with `error`: nothing follows it.
    fn fail(&mut self, turn: &mut Turn, error: String, out: &mut Out) {
        self.failed = true;
        turn.emit(AgentEvent::Error(error), out);
    }

    /// The gate failed: a fixed text for the client, the detail for the log.
    fn gate_failed(&mut self, turn: &mut Turn, e: &GateError, out: &mut Out) {
        tracing::error!("the gate failed: {}", e.detail());
        self.fail(turn, e.to_string(), out);
    }

    /// `ToolCalls` while a question waits for its answer, else `Stop`.
    fn finish_reason(&self) -> FinishReason {
        match self.asked.is_empty() && self.unanswered == 0 {
            true => FinishReason::Stop,
            false => FinishReason::ToolCalls,
        }
    }

    /// ADK's events for `message`. Answers run on the gate's tracked
    /// tasks to their end (ADK runs an approved call then); a user's
    /// message stops when its reader leaves.
    fn send(&self, turn: &Turn, message: &Message) -> Events {
        let events = self.adk.run(&turn.scope.principal, &self.session, message);
        match message {
            Message::User(_) => events,
            Message::Replies(_) => kept(&turn.agent.gate, events),
        }
    }

    /// What ADK gets first: the user's new message, or the answers the gate
    /// took from the continued one, already on their way (`None`: nothing
    /// to send).
    async fn first_message(
        &mut self,
        turn: &mut Turn,
        out: &mut Out,
    ) -> Result<Option<First>, GateError> {
        if !turn.continuing {
            let contents = new_message(&turn.history);
            if contents.is_empty() {
                self.fail(turn, NOTHING_TO_SAY.to_owned(), out);
                return Ok(None);
            }
            return Ok(Some(First::Send(Message::User(contents))));
        }
        if self.forged_results(turn, out).await? {
            return Ok(None);
        }
        let taken = self.take_answers(turn).await?;
        for (tool_call_id, error_text) in taken.rejected {
            let event = AgentEvent::Rejected {
                tool_call_id,
                error_text,
            };
            turn.emit(event, out);
        }
        self.unanswered += taken.unanswered;
        for decided in taken.decided {
            self.decided_here(turn, decided, out);
        }
        Ok(taken.events.map(First::Started))
    }

    /// The round's end: the calls left shown, the questions waited for
    /// (held flow), then the answers to ADK, unless the turn is out of
    /// rounds.
    async fn round_end(&mut self, turn: &mut Turn, out: &mut Out) -> Next {
        self.calls_without_result(turn, out);
        if turn.flow == ConfirmationFlow::Hold && !self.asked.is_empty() {
            // Whoever reads this turn may leave; it stays for the answers.
            turn.waiting.send_replace(true);
            let held = self.hold(turn, out).await;
            turn.waiting.send_replace(false);
            if let Err(e) = held {
                self.gate_failed(turn, &e, out);
                return Next::End;
            }
        }
        let replies = std::mem::take(&mut self.replies);
        if replies.is_empty() {
            return Next::End;
        }
        let events = self.send(turn, &Message::Replies(replies));
        if self.round == turn.agent.max_steps.max(1) {
            // Out of rounds: the answers taken still reach ADK, unread.
            drop(events);
            return Next::End;
        }
        self.round += 1;
        Next::Read(events)
    }
}

impl Turn {
    /// Does the upstream engine's next piece, its chunks into `out`.
    pub(super) async fn upstream(&mut self, mut up: Box<Upstream>, out: &mut Out) -> Phase {
        let next = std::mem::replace(&mut up.next, Next::End);
        up.next = match next {
            Next::Session => {
                let scope = &self.scope;
                match up.adk.session(&scope.principal, &scope.chat_id).await {
                    Ok(session) => {
                        up.session = session;
                        Next::First
                    }
                    Err(e) => {
                        self.emit(AgentEvent::Error(e.to_string()), out);
                        return Phase::Done;
                    }
                }
            }
            Next::First => {
                let first = match up.first_message(self, out).await {
                    Ok(first) => first,
                    Err(e) => {
                        up.gate_failed(self, &e, out);
                        return Phase::Done;
                    }
                };
                up.round = 1;
                match first {
                    Some(First::Send(message)) => Next::Read(up.send(self, &message)),
                    Some(First::Started(events)) => Next::Read(events),
                    None if up.failed => return Phase::Done,
                    None => return self.finish(up.finish_reason(), out),
                }
            }
            Next::Read(mut events) => match events.next().await {
                Some(event) => {
                    up.on_event(self, event, out).await;
                    if up.failed {
                        return Phase::Done;
                    }
                    Next::Read(events)
                }
                None => Next::RoundEnd,
            },
            Next::RoundEnd => match up.round_end(self, out).await {
                _ if up.failed => return Phase::Done,
                next => next,
            },
            Next::End => {
                if up.step_open {
                    self.emit(AgentEvent::StepFinish, out);
                }
                return self.finish(up.finish_reason(), out);
            }
        };
        Phase::Upstream(up)
    }
}

/// What the user's new message (the last user message) says that ADK
/// takes: its text and files.
fn new_message(history: &[UiMessage]) -> Vec<UserContent> {
    let message = history.iter().rev().find(|m| m.role == Role::User);
    message
        .map(|m| m.parts.iter().filter_map(user_content).collect())
        .unwrap_or_default()
}

/// `events` read to their end on the gate's tracked tasks, whatever
/// happens to the turn: ADK stops an agent whose request is dropped, and
/// an answer it was given must be carried out.
fn kept(gate: &Gate, events: Events) -> Events {
    let (sender, receiver) = mpsc::channel(KEPT);
    gate.keep(async move {
        let mut events = events;
        let mut sender = Some(sender);
        while let Some(event) = events.next().await {
            if let Some(to) = &sender
                && to.send(event).await.is_err()
            {
                // The turn is gone; ADK goes on to the end.
                sender = None;
            }
        }
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (event, receiver))
    })
    .boxed()
}
