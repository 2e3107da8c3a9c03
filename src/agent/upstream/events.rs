//! ADK's events, each as the turn shows it: the agent's text and steps,
//! the calls it ran, and its questions through the gate.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::Upstream;
use crate::agent::Turn;
use crate::agent::event::{AgentEvent, Asked};
use crate::call::ToolCall;
use crate::confirm::{NewCall, Question};
use crate::protocol::sink::Out;
use crate::provider::ProviderError;
use crate::provider::adk::{AdkEvent, Confirmation, Reply};
use crate::store::Outcome;

const GATE_CONFUSED: &str = "the gate let an upstream agent's call run here";

impl Upstream {
    pub(super) async fn on_event(
        &mut self,
        turn: &mut Turn,
        event: Result<AdkEvent, ProviderError>,
        out: &mut Out,
    ) {
        let event = match event {
            Ok(event) => event,
            Err(e) => return self.fail(turn, e.to_string(), out),
        };
        if in_step(&event, &self.decided, &self.approved) && !self.step_open {
            self.step_open = true;
            turn.emit(AgentEvent::StepStart, out);
        }
        match event {
            AdkEvent::Step => {
                if self.step_open {
                    turn.emit(AgentEvent::ModelEnd, out);
                    turn.emit(AgentEvent::StepFinish, out);
                }
                self.step_open = true;
                turn.emit(AgentEvent::StepStart, out);
            }
            AdkEvent::TextDelta(delta) => turn.emit(AgentEvent::TextDelta(delta.into()), out),
            AdkEvent::ReasoningDelta(delta) => {
                turn.emit(AgentEvent::ReasoningDelta(delta.into()), out)
            }
            AdkEvent::Call(call) => self.pending.push(call),
            AdkEvent::Output { id, name, output } => self.output(turn, id, name, output, out),
            AdkEvent::Confirm(asked) => self.question(turn, asked, out).await,
        }
    }

    /// A tool ADK ran returned.
    fn output(&mut self, turn: &mut Turn, id: String, name: String, output: Value, out: &mut Out) {
        if self.decided.contains(&id) {
            return;
        }
        turn.emit(AgentEvent::ModelEnd, out);
        let outcome = Outcome::Output {
            output,
            ran_with: None,
            responded: false,
        };
        let (call, approval) = match self.approved.remove(&id) {
            Some(approved) => approved,
            None => {
                let call = self.take_pending(&id).unwrap_or(ToolCall {
                    // A call this turn did not see made (the agent resumed one).
                    id,
                    name,
                    args: Value::Object(Default::default()),
                });
                let shown = AgentEvent::Released {
                    call: call.clone(),
                    kept: true,
                };
                turn.emit(shown, out);
                (call, None)
            }
        };
        turn.emit_outcome(call, outcome, approval, None, out);
    }

    /// The call `id` ADK made, no longer pending.
    fn take_pending(&mut self, id: &str) -> Option<ToolCall> {
        let index = self.pending.iter().position(|c| c.id == id)?;
        Some(self.pending.remove(index))
    }

    /// ADK asks about one of its calls: the gate decides.
    async fn question(&mut self, turn: &mut Turn, asked: Confirmation, out: &mut Out) {
        self.take_pending(&asked.original.id);
        turn.emit(AgentEvent::ModelEnd, out);
        let call = asked.original.clone();
        let question = Question {
            id: asked.id.clone(),
            call: asked.original,
            hint: asked.hint,
        };
        let gate = &turn.agent.gate;
        let verdict = Box::pin(gate.check_upstream(&turn.scope, question, turn.protocol)).await;
        let event = match verdict {
            Err(e) => return self.gate_failed(turn, &e, out),
            Ok(NewCall::Ask(issued)) => {
                self.asked.push(issued.id.clone());
                let seal = gate.seal(&issued).map(|seal| seal.to_metadata());
                AgentEvent::Asked(Asked {
                    issued,
                    seal,
                    metadata: None,
                    streamed: false,
                    client_side: false,
                })
            }
            // Allowed by the policy (a remembered approval, approve-next-N…).
            Ok(NewCall::Client { call, handoff }) => {
                self.replies.push(Reply {
                    confirmation_id: handoff,
                    confirmed: true,
                    payload: None,
                });
                self.approved.insert(call.id.clone(), (call.clone(), None));
                AgentEvent::Released { call, kept: true }
            }
            Ok(NewCall::Refused(reason) | NewCall::Invalid(reason)) => {
                self.replies.push(Reply {
                    confirmation_id: asked.id,
                    confirmed: false,
                    payload: None,
                });
                self.decided.insert(call.id.clone());
                AgentEvent::Refused {
                    call,
                    reason,
                    metadata: None,
                    streamed: false,
                }
            }
            // The gate permits an upstream call only as a hand-back.
            Ok(NewCall::Run(_)) => return self.fail(turn, GATE_CONFUSED.to_owned(), out),
        };
        turn.emit(event, out);
    }

    /// Calls ADK made that neither ran nor were asked about by the
    /// response's end: shown, with no result yet.
    pub(super) fn calls_without_result(&mut self, turn: &mut Turn, out: &mut Out) {
        turn.emit(AgentEvent::ModelEnd, out);
        for call in std::mem::take(&mut self.pending) {
            turn.emit(AgentEvent::Released { call, kept: true }, out);
        }
    }
}

/// Whether `event` belongs to a step of the agent's. What the agent does
/// does; the outcome of a call decided here (approved or refused before ADK
/// ran it) does not, as an answered call's outcome does not in toolgate's
/// own turn. A step's start (`Step`) opens one itself; a call shows only
/// with its outcome or question.
pub(super) fn in_step(
    event: &AdkEvent,
    decided: &HashSet<String>,
    approved: &HashMap<String, (ToolCall, Option<String>)>,
) -> bool {
    match event {
        AdkEvent::Step | AdkEvent::Call(_) => false,
        AdkEvent::Output { id, .. } => !decided.contains(id) && !approved.contains_key(id),
        AdkEvent::TextDelta(_) | AdkEvent::ReasoningDelta(_) | AdkEvent::Confirm(_) => true,
    }
}
