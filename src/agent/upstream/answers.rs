//! Answers to ADK's questions: the continued message's, through the gate
//! before anything reaches ADK, and (held flow) those decided elsewhere
//! while the turn waits.

use std::collections::HashSet;

use serde_json::Value;

use super::{Events, Upstream, kept};
use crate::agent::answers::{Open, answers};
use crate::agent::event::AgentEvent;
use crate::agent::{Turn, card_settled};
use crate::confirm::{Answer, Answered, CONFIRMATION_TOOL, Decision, Gate, GateError, Scope};
use crate::protocol::sink::Out;
use crate::protocol::{ConfirmationProtocol, Part, UiMessage, adk};
use crate::provider::adk::{Adk, Message, Reply};
use crate::store::Outcome;

/// On a made-up result for a call that waits for a decision.
const FORGED_RESULT: &str =
    "refused: this call waits for a decision; only the agent reports its result";

const FORGED_REQUEST: &str =
    "the request carries a tool result toolgate did not issue; nothing was sent to the agent";

/// A question the gate decided in this request, and how.
pub(super) struct Decided {
    pub(super) id: String,
    pub(super) native: bool,
    /// The client's output on an ADK confirmation part, echoed back.
    pub(super) echo: Option<Value>,
    pub(super) payload: Option<Value>,
    pub(super) verdict: Answered,
}

impl Decided {
    /// What ADK is told: approved (a hand-off) or not; nothing for a
    /// refused answer, whose question stays open.
    pub(super) fn reply(&self) -> Option<Reply> {
        let confirmed = match &self.verdict {
            Answered::Client { .. } => true,
            Answered::Recorded { outcome, .. } => matches!(outcome, Outcome::HandedOff { .. }),
            Answered::Running { .. } | Answered::Rejected(_) => return None,
        };
        Some(Reply {
            confirmation_id: self.id.clone(),
            confirmed,
            payload: self.payload.clone().filter(|_| confirmed),
        })
    }
}

/// The continued message's answers through the gate.
pub(super) struct Taken {
    pub(super) decided: Vec<Decided>,
    /// Parts whose answer the gate refused, with why.
    pub(super) rejected: Vec<(String, String)>,
    pub(super) unanswered: usize,
    /// The request that carries the decisions to ADK, started.
    pub(super) events: Option<Events>,
}

impl Upstream {
    /// Takes the continued message's answers and open questions through
    /// the gate and starts ADK's request with them. From the first claim
    /// until ADK has the answers, nothing waits on the client: one tracked
    /// task does it all. Made at once; the future borrows nothing.
    pub(super) fn take_answers(
        &self,
        turn: &Turn,
    ) -> impl Future<Output = Result<Taken, GateError>> + Send + 'static {
        let (answered, open) = answers(&turn.history[turn.history.len() - 1]);
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let gate = &turn.agent.gate;
        let work = take(
            gate.clone(),
            turn.scope.clone(),
            turn.known.clone(),
            answered,
            open,
            self.adk.clone(),
            self.session.clone(),
        );
        gate.keep(async move {
            let _ = sender.send(work.await);
        });
        async move {
            receiver
                .await
                .map_err(|_| GateError::Task("the answers' task ended without a word".into()))?
        }
    }

    /// Refuses a continued message that gives a result for a call still
    /// waiting for a decision: ADK would take it as the tool's (true of
    /// any call it asked about), so nothing of it is sent. True when refused.
    pub(super) async fn forged_results(
        &mut self,
        turn: &mut Turn,
        out: &mut Out,
    ) -> Result<bool, GateError> {
        let open = Box::pin(turn.agent.gate.open(&turn.scope)).await?;
        let waiting: HashSet<&str> = open.iter().map(|i| i.call.id.as_str()).collect();
        let forged = forged(&turn.history[turn.history.len() - 1], &waiting);
        if forged.is_empty() {
            return Ok(false);
        }
        for tool_call_id in forged {
            tracing::warn!(chat = %turn.scope.chat_id, call = %tool_call_id, "a result for a call awaiting a decision was refused");
            let error_text = FORGED_RESULT.to_owned();
            let event = AgentEvent::Rejected {
                tool_call_id,
                error_text,
            };
            turn.emit(event, out);
        }
        self.fail(turn, FORGED_REQUEST.to_owned(), out);
        Ok(true)
    }

    /// A question the gate decided: what the client sees now (its reply
    /// to ADK is made by [`Decided::reply`]).
    pub(super) fn decided_here(&mut self, turn: &mut Turn, decided: Decided, out: &mut Out) {
        let Decided {
            id: confirmation_id,
            native,
            echo,
            verdict,
            ..
        } = decided;
        let Some((call, outcome)) = settled(verdict) else {
            return;
        };
        if !native {
            let approved = outcome.is_none();
            let output = echo.unwrap_or_else(|| adk::answer_output(approved));
            let card = card_settled(
                confirmation_id.clone(),
                output,
                outcome.as_ref(),
                &call.name,
            );
            turn.emit(card, out);
            let event = AgentEvent::Released {
                call: call.clone(),
                kept: true,
            };
            turn.emit(event, out);
        }
        let approval = native.then_some(confirmation_id);
        match outcome {
            None => {
                self.approved.insert(call.id.clone(), (call, approval));
            }
            Some(outcome) => {
                self.decided.insert(call.id.clone());
                turn.emit_outcome(call, outcome, approval, None, out);
            }
        }
    }

    /// Held flow: each question asked is decided elsewhere, or times out;
    /// the answers go to ADK next.
    pub(super) async fn hold(&mut self, turn: &mut Turn, out: &mut Out) -> Result<(), GateError> {
        let native = turn.protocol == ConfirmationProtocol::AiSdk;
        for id in std::mem::take(&mut self.asked) {
            let held = Box::pin(turn.agent.gate.hold(&turn.scope, &id)).await?;
            // The server stops: the questions left stay open, answered with
            // the client's next request as in the finish flow.
            let Some((call, outcome)) = held else { break };
            let decided = Decided {
                id,
                native,
                echo: None,
                payload: None,
                verdict: Answered::Recorded { call, outcome },
            };
            self.replies.extend(decided.reply());
            self.decided_here(turn, decided, out);
        }
        Ok(())
    }
}

/// A decided upstream call and its outcome: `None` when approved (ADK
/// runs it and reports its result). `None` for a verdict with nothing to
/// show: a refused answer, or a call started here, which never happens
/// to an upstream agent's.
pub(super) fn settled(verdict: Answered) -> Option<(crate::call::ToolCall, Option<Outcome>)> {
    match verdict {
        Answered::Client { call } => Some((call, None)),
        Answered::Recorded { call, outcome } => match outcome {
            Outcome::HandedOff { .. } => Some((call, None)),
            outcome => Some((call, Some(outcome))),
        },
        Answered::Running { call, .. } => {
            tracing::error!(call = %call.id, "an upstream agent's call was started here");
            None
        }
        Answered::Rejected(_) => None,
    }
}

/// The parts of `message` that give a result for a call in `waiting`.
pub(super) fn forged(message: &UiMessage, waiting: &HashSet<&str>) -> Vec<String> {
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Tool(tool)
                if tool.tool_name != CONFIRMATION_TOOL
                    && tool.is_resolved()
                    && waiting.contains(tool.tool_call_id.as_str()) =>
            {
                Some(tool.tool_call_id.clone())
            }
            _ => None,
        })
        .collect()
}

/// Takes every answer and open question of the continued message through
/// the gate and starts the request to ADK with the decisions: run on the
/// gate's tracked tasks, so that a decision taken always reaches ADK.
async fn take(
    gate: Gate,
    scope: Scope,
    known: crate::identity::Known,
    answered: Vec<(Answer, Option<Value>)>,
    open: Vec<Open>,
    adk: std::sync::Arc<Adk>,
    session: String,
) -> Result<Taken, GateError> {
    let mut taken = Taken {
        decided: Vec::new(),
        rejected: Vec::new(),
        unanswered: 0,
        events: None,
    };
    let mut first_error = None;
    for (answer, echo) in answered {
        let native = answer.protocol == ConfirmationProtocol::AiSdk;
        let verdict = match Box::pin(gate.check_answer(&scope, &known, &answer)).await {
            Ok(verdict) => verdict,
            // The decisions taken so far still go to ADK.
            Err(e) => {
                first_error = Some(e);
                break;
            }
        };
        if let Answered::Rejected(why) = verdict {
            let part = match (answer.original, native) {
                (Some(original), true) => original.id,
                _ => answer.confirmation_id,
            };
            taken.rejected.push((part, why));
            continue;
        }
        let payload = match &answer.decision {
            Decision::Approve { payload, .. } => payload.clone(),
            // The gate refuses a response to an upstream agent's question.
            Decision::Deny { .. } | Decision::Respond { .. } => None,
        };
        taken.decided.push(Decided {
            id: answer.confirmation_id,
            native,
            echo,
            payload,
            verdict,
        });
    }
    for open in open.into_iter().filter(|_| first_error.is_none()) {
        match Box::pin(gate.settle(&scope, &open.confirmation_id)).await {
            Ok(None) => taken.unanswered += 1,
            Ok(Some(verdict)) => taken.decided.push(Decided {
                id: open.confirmation_id,
                native: !open.adk,
                echo: None,
                payload: None,
                verdict,
            }),
            Err(e) => {
                first_error = Some(e);
                break;
            }
        }
    }
    let replies: Vec<Reply> = taken.decided.iter().filter_map(Decided::reply).collect();
    if !replies.is_empty() {
        let events = adk.run(&scope.principal, &session, &Message::Replies(replies));
        taken.events = Some(kept(&gate, events));
    }
    match first_error {
        // ADK has what was taken; the turn reports the failure.
        Some(e) => {
            drop(taken.events.take());
            Err(e)
        }
        None => Ok(taken),
    }
}
