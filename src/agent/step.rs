//! One model step: the model's response, then every call it made through
//! the gate, the permitted ones run, and (held flow) the questions waited for.

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::future::FutureExt;
use futures::stream::FuturesOrdered;
use serde_json::Value;

use super::event::{AgentEvent, Asked};
use super::{Phase, Turn, card_settled, decided_answer};
use crate::call::{MAX_ARGS_BYTES, ToolCall};
use crate::confirm::{NewCall, Permit};
use crate::protocol::sink::Out;
use crate::protocol::{ConfirmationFlow, ConfirmationProtocol};
use crate::store::Outcome;

mod model;
pub(super) use model::Model;

/// A call the model is streaming.
struct Streaming {
    /// The id the provider gave it; `id` differs only when that one was taken.
    provider_id: String,
    id: String,
    name: String,
    args: String,
    /// Its arguments grew past [`MAX_ARGS_BYTES`]; the rest were dropped.
    too_large: bool,
    /// Its input streams to the client as it arrives.
    live: bool,
    /// What the provider needs back with the call.
    metadata: Option<Value>,
}

/// The step's calls going through the gate, in the order the model made them.
pub(super) struct Gate {
    calls: std::vec::IntoIter<Streaming>,
    /// Calls that need no confirmation, with their provider's metadata.
    permits: Vec<(Permit, Option<Value>)>,
}

/// The permitted calls, running together; results come in call order.
pub(super) type Run = FuturesOrdered<BoxFuture<'static, (ToolCall, Option<Value>, Outcome)>>;

impl Turn {
    /// Takes one call through the gate.
    pub(super) async fn gate(&mut self, mut gate: Gate, out: &mut Out) -> Phase {
        let Some(streaming) = gate.calls.next() else {
            let running = gate.permits.into_iter().map(|(permit, metadata)| {
                let call = permit.call().clone();
                // Owned, so that the calls outlive this borrow of the turn.
                let agent = self.agent.clone();
                let chat_id = self.scope.chat_id.clone();
                let run = async move {
                    let outcome = agent.gate.run(permit, &chat_id).await;
                    (call, metadata, outcome)
                };
                run.boxed()
            });
            return Phase::Run(running.collect());
        };
        let Streaming {
            id,
            name,
            args,
            too_large,
            live: streamed,
            metadata,
            ..
        } = streaming;
        let parsed = match too_large {
            true => Err(format!("tool call arguments exceed {MAX_ARGS_BYTES} bytes")),
            false => parse_args(&args),
        };
        let args = match parsed {
            Ok(args) => args,
            Err(error_text) => {
                let args = Value::String(args);
                let call = ToolCall { id, name, args };
                let event = AgentEvent::InvalidInput {
                    call,
                    error_text,
                    metadata,
                };
                self.emit(event, out);
                return Phase::Gate(gate);
            }
        };
        let call = ToolCall { id, name, args };
        let checked = self
            .agent
            .gate
            .check_new(&self.scope, call.clone(), self.protocol);
        let event = match Box::pin(checked).await {
            Err(e) => return self.gate_failed(&e, out),
            Ok(NewCall::Run(permit)) => {
                gate.permits.push((permit, metadata.clone()));
                AgentEvent::Permitted {
                    call,
                    metadata,
                    streamed,
                }
            }
            Ok(NewCall::Client { call, handoff }) => {
                self.step.handed = true;
                AgentEvent::HandedOff {
                    call,
                    handoff,
                    asked: None,
                    metadata,
                    streamed,
                }
            }
            Ok(NewCall::Ask(issued)) => {
                self.step.asked = true;
                self.step.questions.push(issued.id.clone());
                if self.protocol == ConfirmationProtocol::Adk {
                    self.taken.insert(issued.id.clone());
                }
                let gate = &self.agent.gate;
                let seal = gate.seal(&issued).map(|seal| seal.to_metadata());
                let client_side = match self.protocol {
                    ConfirmationProtocol::Adk => false,
                    ConfirmationProtocol::AiSdk => gate.runs_on_client(&issued.call.name),
                };
                AgentEvent::Asked(Asked {
                    issued,
                    seal,
                    metadata,
                    streamed,
                    client_side,
                })
            }
            Ok(NewCall::Refused(reason)) => AgentEvent::Refused {
                call,
                reason,
                metadata,
                streamed,
            },
            Ok(NewCall::Invalid(error_text)) => AgentEvent::InvalidInput {
                call,
                error_text,
                metadata,
            },
        };
        self.emit(event, out);
        Phase::Gate(gate)
    }

    /// Records the next permitted call's outcome.
    pub(super) async fn run(&mut self, mut running: Run, out: &mut Out) -> Phase {
        if let Some((call, metadata, outcome)) = running.next().await {
            self.emit_outcome(call, outcome, None, metadata, out);
            return Phase::Run(running);
        }
        match self.flow {
            ConfirmationFlow::Hold => {
                let questions = std::mem::take(&mut self.step.questions);
                Phase::Hold(questions.into_iter())
            }
            ConfirmationFlow::Finish => self.step_end(out),
        }
    }

    /// Held: each question is decided elsewhere, or times out, and the model
    /// goes on.
    pub(super) async fn hold(
        &mut self,
        mut questions: std::vec::IntoIter<String>,
        out: &mut Out,
    ) -> Phase {
        let Some(confirmation_id) = questions.next() else {
            self.step.asked = false;
            return self.step_end(out);
        };
        // Saved first, so that the turn is never marked waiting without
        // what continues it elsewhere.
        let waited_for: Vec<String> = std::iter::once(confirmation_id.clone())
            .chain(questions.as_slice().iter().cloned())
            .collect();
        self.save_held(&waited_for).await;
        // Whoever reads this turn may leave; it stays for the answer.
        self.waiting.send_replace(true);
        let held = Box::pin(self.agent.gate.hold(&self.scope, &confirmation_id)).await;
        self.waiting.send_replace(false);
        let (call, outcome) = match held {
            Ok(Some(decided)) => decided,
            // The server stops: the message ends as the finish flow ends
            // it, its cards open; their answers come with the client's next
            // request, to any instance sharing the store.
            Ok(None) => return self.step_end(out),
            Err(e) => return self.gate_failed(&e, out),
        };
        let adk = self.protocol == ConfirmationProtocol::Adk;
        if let Outcome::HandedOff { .. } = outcome {
            let output = adk.then(|| crate::protocol::adk::answer_output(true));
            self.hand_off_approved(call, confirmation_id, self.protocol, output, out);
            self.step.handed = true;
            return Phase::Hold(questions);
        }
        if adk {
            let output = decided_answer(&outcome);
            let card = card_settled(confirmation_id.clone(), output, Some(&outcome), &call.name);
            self.emit(card, out);
            self.release(&call, out);
        }
        let approval = (!adk).then_some(confirmation_id);
        self.emit_outcome(call, outcome, approval, None, out);
        Phase::Hold(questions)
    }
}

fn parse_args(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| format!("invalid JSON arguments: {e}"))
}
