//! One request's turn, as a stream of UI chunks. Dropping the stream (the
//! client went away) cancels the model call and the tools still running,
//! except a confirmed call, which finishes and records its outcome.
//!
//! The turn does the I/O (the gate, the model) and emits [`AgentEvent`]s;
//! [`TurnEncoder`] makes the chunks. It advances one piece of I/O at a
//! time, so each piece's chunks go out before the next one waits.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;

use super::answers::Answers;
use super::encode::TurnEncoder;
use super::event::AgentEvent;
use super::history::{Earlier, earlier_questions, to_model_messages};
use super::step::Model;
use super::upstream::Upstream;
use super::{Agent, Engine, Phase, Pieces, StepState, Turn};
use crate::confirm::{ClientOutput, GateError, Scope};
use crate::protocol::sink::{Out, Writer};
use crate::protocol::{
    ChatRequest, ConfirmationFlow, ConfirmationProtocol, FinishReason, Part, Role, ToolPart,
    ToolState, UiMessage,
};
use crate::provider::{ModelRequest, StopReason};

impl Agent {
    /// Runs one turn for `request` on behalf of `who`; new confirmations
    /// are asked in `protocol`, and its chunks written into `out`, the
    /// writer of the face that started it.
    pub fn turn(
        self: Arc<Self>,
        request: ChatRequest,
        who: crate::identity::Identity,
        protocol: ConfirmationProtocol,
        flow: ConfirmationFlow,
        mut out: Out,
        waiting: tokio::sync::watch::Sender<bool>,
    ) -> Pieces {
        async_stream::stream! {
            // Built when first polled, like everything it does (the message's id).
            let mut turn = Turn::new(self, request, who, protocol, flow, waiting);
            while turn.advance(&mut out).await {
                if let Some(batch) = out.take() {
                    yield batch;
                }
            }
        }
        .boxed()
    }
}

impl Turn {
    fn new(
        agent: Arc<Agent>,
        request: ChatRequest,
        who: crate::identity::Identity,
        protocol: ConfirmationProtocol,
        flow: ConfirmationFlow,
        waiting: tokio::sync::watch::Sender<bool>,
    ) -> Self {
        let (principal, known) = who.into_parts();
        let scope = Scope {
            chat_id: request.chat_id.into_string(),
            principal,
        };
        let client_version = request.options.client_version;
        let (history, continuing) = super::outgoing(&agent.ids, request.messages);
        let engine = match &agent.upstream {
            Some(adk) => Engine::Adk(adk.clone()),
            None => Engine::Own,
        };
        Self {
            engine,
            encoder: TurnEncoder::new(
                agent.ids.clone(),
                agent.denied_as,
                agent.gate.redaction().clone(),
            ),
            tools: None,
            agent,
            scope,
            known,
            history,
            continuing,
            protocol,
            flow,
            client_version,
            waiting,
            phase: Phase::Start,
            steps: 0,
            started: std::time::Instant::now(),
            taken: HashSet::new(),
            step: StepState::default(),
        }
    }

    /// Does the next piece of the turn, its chunks into `out`; false once
    /// the turn is over.
    pub(super) async fn advance(&mut self, out: &mut Out) -> bool {
        let phase = std::mem::replace(&mut self.phase, Phase::Done);
        self.phase = match phase {
            Phase::Start => {
                self.emit(AgentEvent::Start, out);
                match &self.engine {
                    Engine::Own => Phase::Judge,
                    Engine::Adk(adk) => Phase::Upstream(Upstream::new(adk.clone())),
                }
            }
            // All but the model's phase are boxed: the turn's state holds
            // room for its largest phase while it waits, a held stream for
            // as long as its model takes.
            Phase::Judge => Box::pin(self.judge(out)).await,
            Phase::Answers(answers) => Box::pin(self.answer(answers, out)).await,
            Phase::Earlier(questions) => Box::pin(self.earlier(questions, out)).await,
            Phase::Step => self.step_start(out),
            Phase::Model(model) => self.model(model, out).await,
            Phase::Gate(gate) => Box::pin(self.gate(gate, out)).await,
            Phase::Run(run) => Box::pin(self.run(run, out)).await,
            Phase::Hold(questions) => Box::pin(self.hold(questions, out)).await,
            Phase::Upstream(upstream) => Box::pin(self.upstream(upstream, out)).await,
            Phase::Done => return false,
        };
        true
    }

    /// Encodes `event` into `out` and the outgoing message.
    pub(super) fn emit(&mut self, event: AgentEvent, out: &mut Out) {
        let (encoder, message) = self.encoding();
        encoder.on_event(event, message, out);
    }

    /// The encoder and the outgoing message it writes into.
    pub(super) fn encoding(&mut self) -> (&mut TurnEncoder, &mut UiMessage) {
        let message = self.history.len() - 1;
        (&mut self.encoder, &mut self.history[message])
    }

    /// Encodes a call's outcome: with the native approval it answers, and
    /// the provider's metadata of a call with no part yet.
    pub(super) fn emit_outcome(
        &mut self,
        call: crate::call::ToolCall,
        outcome: crate::store::Outcome,
        approval: Option<String>,
        metadata: Option<serde_json::Value>,
        out: &mut Out,
    ) {
        let event = AgentEvent::Outcome {
            call,
            outcome,
            approval,
            metadata,
        };
        self.emit(event, out);
    }

    /// The stream's end when the gate failed: a fixed text for the client,
    /// the detail for the log.
    pub(super) fn gate_failed(&mut self, e: &GateError, out: &mut Out) -> Phase {
        tracing::error!("the gate failed: {}", e.detail());
        self.emit(AgentEvent::Error(e.to_string()), out);
        Phase::Done
    }

    pub(super) fn finish(&mut self, reason: FinishReason, out: &mut Out) -> Phase {
        self.emit(AgentEvent::Finish(reason), out);
        Phase::Done
    }

    /// What the client says its tools returned, judged before the model
    /// reads it.
    async fn judge(&mut self, out: &mut Out) -> Phase {
        let judged = judge_client_outputs(
            &self.agent.gate,
            &self.scope,
            &mut self.history,
            self.continuing,
        );
        let rejected = match judged.await {
            Ok(rejected) => rejected,
            Err(e) => return self.gate_failed(&e, out),
        };
        for (tool_call_id, error_text) in rejected {
            let event = AgentEvent::Rejected {
                tool_call_id,
                error_text,
            };
            self.emit(event, out);
        }
        match self.continuing {
            true => Phase::Answers(Answers::new(&self.history[self.history.len() - 1])),
            false => Phase::Earlier(earlier_questions(&self.history).into_iter()),
        }
    }

    /// One question the user moved on from: its outcome, if it has one now,
    /// goes into this message.
    async fn earlier(
        &mut self,
        mut questions: std::vec::IntoIter<Earlier>,
        out: &mut Out,
    ) -> Phase {
        let Some(question) = questions.next() else {
            return self.steps_begin();
        };
        let gate = &self.agent.gate;
        match Box::pin(gate.moved_on(&self.scope, &question.confirmation_id)).await {
            Ok(Some((call, outcome))) => {
                let event = AgentEvent::MovedOn {
                    confirmation_id: question.confirmation_id,
                    call,
                    outcome,
                };
                self.emit(event, out);
                Phase::Earlier(questions)
            }
            Ok(None) => Phase::Earlier(questions),
            Err(e) => self.gate_failed(&e, out),
        }
    }

    /// After the answers: the model steps.
    pub(super) fn steps_begin(&mut self) -> Phase {
        let message = &self.history[self.history.len() - 1];
        self.taken = message
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Tool(t) => Some(t.tool_call_id.clone()),
                _ => None,
            })
            .collect();
        self.tools = Some(self.agent.gate.specs());
        Phase::Step
    }

    fn step_start(&mut self, out: &mut Out) -> Phase {
        if self.steps == self.agent.max_steps {
            // Out of steps with tool results the model has not seen yet.
            return self.finish(FinishReason::ToolCalls, out);
        }
        self.steps += 1;
        self.step = StepState::default();
        self.emit(AgentEvent::StepStart, out);
        let request = ModelRequest {
            messages: to_model_messages(&self.history),
            tools: match &self.tools {
                Some(tools) => tools.clone(),
                None => self.agent.gate.specs(),
            },
        };
        if self.steps == 1 {
            self.agent.gate.metrics().overhead(self.started.elapsed());
        }
        Phase::Model(Model::new(self.agent.provider.watched(request)))
    }

    /// The step is over: the next one, or the turn's end.
    pub(super) fn step_end(&mut self, out: &mut Out) -> Phase {
        self.emit(AgentEvent::StepFinish, out);
        if self.step.asked || self.step.handed {
            return self.finish(FinishReason::ToolCalls, out);
        }
        if !self.step.had_calls {
            let stop = self.step.stop.unwrap_or(StopReason::Stop);
            return self.finish(finish_reason(stop), out);
        }
        Phase::Step
    }
}

/// Replaces every result of a client-side tool the gate does not take with
/// its error. In the continued message (the only one whose parts the client
/// can still change) the parts are left to the encoder: returned are their
/// ids and errors.
async fn judge_client_outputs(
    gate: &crate::confirm::Gate,
    scope: &Scope,
    history: &mut [UiMessage],
    continuing: bool,
) -> Result<Vec<(String, String)>, GateError> {
    let last = history.len().saturating_sub(1);
    let mut rejected = Vec::new();
    for (index, message) in history.iter_mut().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        let outgoing = continuing && index == last;
        for part in &mut message.parts {
            let Part::Tool(part) = part else { continue };
            // Boxed here, where there is a tool part: unboxed, its state
            // (6.5 KB) would be every turn's, and was allocated for each.
            let output = Box::pin(gate.check_client_output(scope, part)).await?;
            if let ClientOutput::Rejected(why) = output {
                match outgoing {
                    true => rejected.push((part.tool_call_id.clone(), why)),
                    false => reject(part, why),
                }
            }
        }
    }
    Ok(rejected)
}

/// An earlier message's part: the model reads the error instead.
fn reject(part: &mut ToolPart, why: String) {
    part.state = ToolState::OutputError { error_text: why };
}

fn finish_reason(stop: StopReason) -> FinishReason {
    match stop {
        StopReason::Stop => FinishReason::Stop,
        StopReason::Length => FinishReason::Length,
        StopReason::ContentFilter => FinishReason::ContentFilter,
        StopReason::ToolCalls => FinishReason::ToolCalls,
        StopReason::Other => FinishReason::Other,
    }
}
