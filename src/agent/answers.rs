//! A continued message: its answers, then its questions still open, each
//! through the gate before the model goes on.

use std::collections::HashSet;

use serde_json::Value;

use super::event::AgentEvent;
use super::{Phase, Turn, card_settled, decided_answer};
use crate::call::ToolCall;
use crate::confirm::{Answer, Answered, CONFIRMATION_TOOL, Running};
use crate::protocol::sink::Out;
use crate::protocol::{ConfirmationProtocol, FinishReason, Part, ToolState, UiMessage};

/// The continued message's work, in order, and how far it got.
pub(super) struct Answers {
    work: std::vec::IntoIter<Work>,
    /// An approved call running, whose outcome comes next: with the
    /// native approval it answers.
    running: Option<(ToolCall, Running, Option<String>)>,
    unanswered: usize,
    /// Approved calls of client-side tools handed to the client now.
    handed: usize,
}

/// What a continuation works through: answers first, since an approval
/// remembered there may settle an open question.
enum Work {
    /// An answer, with the ADK output to echo back.
    Answer(Box<(Answer, Option<Value>)>),
    Open(Open),
}

/// A question in the continued message that nobody answered yet.
pub(super) struct Open {
    pub(super) confirmation_id: String,
    pub(super) adk: bool,
}

impl Answers {
    pub(super) fn new(message: &UiMessage) -> Self {
        let (answers, open) = answers(message);
        let answers = answers.into_iter().map(|a| Work::Answer(Box::new(a)));
        let work: Vec<Work> = answers.chain(open.into_iter().map(Work::Open)).collect();
        Self {
            work: work.into_iter(),
            running: None,
            unanswered: 0,
            handed: 0,
        }
    }
}

impl Turn {
    /// Works through one answer or open question.
    pub(super) async fn answer(&mut self, mut work: Answers, out: &mut Out) -> Phase {
        if let Some((call, running, approval)) = work.running.take() {
            let outcome = running.await;
            self.emit_outcome(call, outcome, approval, None, out);
            return Phase::Answers(work);
        }
        let Some(item) = work.work.next() else {
            // The client answers its calls, and the user the questions,
            // with the next request.
            if work.unanswered > 0 || work.handed > 0 {
                return self.finish(FinishReason::ToolCalls, out);
            }
            return self.steps_begin();
        };
        let gate = &self.agent.gate;
        let (confirmation_id, adk, echo, verdict) = match item {
            Work::Answer(boxed) => {
                let (answer, echo) = *boxed;
                let adk = answer.protocol == ConfirmationProtocol::Adk;
                // The gate's futures (a store's among them) are boxed: inline
                // they would make every turn's state as large as the largest.
                match Box::pin(gate.check_answer(&self.scope, &self.known, &answer)).await {
                    Ok(Answered::Rejected(error_text)) => {
                        // ADK: on the confirmation part; native: on the call's own part.
                        let tool_call_id = match (answer.original, adk) {
                            (Some(original), false) => original.id,
                            _ => answer.confirmation_id,
                        };
                        self.emit(
                            AgentEvent::Rejected {
                                tool_call_id,
                                error_text,
                            },
                            out,
                        );
                        return Phase::Answers(work);
                    }
                    verdict => (answer.confirmation_id, adk, echo, verdict),
                }
            }
            Work::Open(open) => match Box::pin(gate.settle(&self.scope, &open.confirmation_id))
                .await
            {
                Ok(None) => {
                    work.unanswered += 1;
                    return Phase::Answers(work);
                }
                verdict => {
                    // What the confirmation's output becomes: settled by a
                    // remembered approval, or decided elsewhere.
                    let echo = match &verdict {
                        Ok(Some(Answered::Recorded { outcome, .. })) => decided_answer(outcome),
                        _ => crate::protocol::adk::remembered_output(),
                    };
                    let verdict = verdict.map(|v| v.unwrap_or(Answered::Rejected(String::new())));
                    (
                        open.confirmation_id,
                        open.adk,
                        open.adk.then_some(echo),
                        verdict,
                    )
                }
            },
        };
        let protocol = match adk {
            true => ConfirmationProtocol::Adk,
            false => ConfirmationProtocol::AiSdk,
        };
        let (call, outcome) = match verdict {
            Err(e) => return self.gate_failed(&e, out),
            Ok(Answered::Rejected(_)) => return Phase::Answers(work),
            Ok(Answered::Client { call }) => {
                let echo = echo.filter(|_| adk);
                self.hand_off_approved(call, confirmation_id, protocol, echo, out);
                work.handed += 1;
                return Phase::Answers(work);
            }
            Ok(Answered::Recorded { call, outcome }) => (call, Ok(outcome)),
            Ok(Answered::Running { call, outcome }) => (call, Err(outcome)),
        };
        if adk {
            if let Some(output) = echo {
                let recorded = outcome.as_ref().ok();
                let card = card_settled(confirmation_id.clone(), output, recorded, &call.name);
                self.emit(card, out);
            }
            self.release(&call, out);
        }
        let approval = (!adk).then_some(confirmation_id);
        match outcome {
            Ok(outcome) => self.emit_outcome(call, outcome, approval, None, out),
            // Its input goes out before the call's outcome is waited for.
            Err(running) => work.running = Some((call, running, approval)),
        }
        Phase::Answers(work)
    }

    /// Hands an approved call of a client-side tool out: in ADK, after the
    /// confirmation's own output (`adk_output`).
    pub(super) fn hand_off_approved(
        &mut self,
        call: ToolCall,
        confirmation_id: String,
        protocol: ConfirmationProtocol,
        adk_output: Option<Value>,
        out: &mut Out,
    ) {
        if let Some(output) = adk_output {
            let confirmation_id = confirmation_id.clone();
            self.emit(
                AgentEvent::Confirmed {
                    confirmation_id,
                    output,
                },
                out,
            );
        }
        let event = AgentEvent::HandedOff {
            call,
            handoff: confirmation_id,
            asked: Some(protocol),
            metadata: None,
            streamed: false,
        };
        self.emit(event, out);
    }

    /// Shows an approved ADK call; only a hand-off gives a client-side
    /// tool's call to `onToolCall`.
    pub(super) fn release(&mut self, call: &ToolCall, out: &mut Out) {
        let kept = self.agent.gate.kept_from_client(&call.name);
        let call = call.clone();
        self.emit(AgentEvent::Released { call, kept }, out);
    }
}

/// The answered confirmations in the continued message (with the ADK output
/// to echo back), and the questions still open.
pub(super) fn answers(message: &UiMessage) -> (Vec<(Answer, Option<Value>)>, Vec<Open>) {
    let resolved: HashSet<&str> = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Tool(t) if t.tool_name != CONFIRMATION_TOOL && t.is_resolved() => {
                Some(t.tool_call_id.as_str())
            }
            _ => None,
        })
        .collect();
    let mut answers = Vec::new();
    let mut open = Vec::new();
    for part in &message.parts {
        let Part::Tool(tool) = part else { continue };
        if Answer::is_pending(tool) {
            let confirmation_id = match &tool.state {
                ToolState::ApprovalRequested { approval_id } => approval_id.clone(),
                _ => tool.tool_call_id.clone(),
            };
            open.push(Open {
                confirmation_id,
                adk: tool.tool_name == CONFIRMATION_TOOL,
            });
            continue;
        }
        let answer = match Answer::from_part(tool) {
            Ok(Some(answer)) => answer,
            Ok(None) => continue,
            // The request's parser refused these already; nothing runs on one.
            Err(e) => {
                tracing::warn!(part = %tool.tool_call_id, "malformed answer ignored: {e}");
                continue;
            }
        };
        // An ADK answer whose original call already has its result was handled.
        let handled = answer.protocol == ConfirmationProtocol::Adk
            && answer
                .original
                .as_ref()
                .is_some_and(|o| resolved.contains(o.id.as_str()));
        if handled {
            continue;
        }
        let echo = match &tool.state {
            ToolState::OutputAvailable { output, .. } if tool.tool_name == CONFIRMATION_TOOL => {
                Some(output.clone())
            }
            _ => None,
        };
        answers.push((answer, echo));
    }
    (answers, open)
}
