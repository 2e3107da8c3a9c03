//! The model's response read: its events in batches, text and reasoning
//! shown as they come, each call gathered for the gate.

use futures::{FutureExt, StreamExt};

use super::{Gate, Streaming};
use crate::agent::event::AgentEvent;
use crate::agent::{Phase, Turn};
use crate::call::{MAX_ARGS_BYTES, MAX_CALLS_PER_STEP};
use crate::protocol::ConfirmationProtocol;
use crate::protocol::sink::{Out, Writer};
use crate::provider::measured::Watch;
use crate::provider::{ModelEvents, ProviderError, ProviderEvent};

/// At most this many of a model's events are read at once.
const MODEL_BATCH: usize = 64;

/// The model's response being read.
pub(in crate::agent) struct Model {
    events: ModelEvents,
    /// What is left of the batch read last.
    ready: std::vec::IntoIter<ProviderEvent>,
    /// Shown each event and the end: the request's count and span.
    watch: Option<Watch>,
    calls: Vec<Streaming>,
}

impl Model {
    pub(in crate::agent) fn new((events, watch): (ModelEvents, Option<Watch>)) -> Self {
        Self {
            events,
            ready: Vec::new().into_iter(),
            watch,
            calls: Vec::new(),
        }
    }
}

impl Turn {
    /// Reads the model's response: the next batch, then those already
    /// there, up to [`MODEL_BATCH`] events, so that a fast model's deltas go
    /// out together (nothing is waited for between them).
    pub(in crate::agent) async fn model(&mut self, mut model: Model, out: &mut Out) -> Phase {
        if model.ready.as_slice().is_empty() {
            let next = model.events.next().await;
            if let Some(phase) = self.model_batch(&mut model, next, out) {
                return phase;
            }
        }
        // A model that is always ready must not hold the worker thread.
        tokio::task::coop::consume_budget().await;
        let mut read = 0;
        loop {
            for event in model.ready.by_ref() {
                if let Some(watch) = &mut model.watch {
                    watch.event(&event);
                }
                if let Some(phase) = self.model_event(&mut model.calls, event, out) {
                    return phase;
                }
                read += 1;
                // Each event takes from the task's budget, as the first did.
                let budget = tokio::task::coop::consume_budget().now_or_never();
                if read == MODEL_BATCH || budget.is_none() {
                    return Phase::Model(model);
                }
            }
            let Some(next) = model.events.next().now_or_never() else {
                return Phase::Model(model);
            };
            if let Some(phase) = self.model_batch(&mut model, next, out) {
                return phase;
            }
        }
    }

    /// What was read of the model: a batch, to read next, or the end or an
    /// error, and the phase they lead to.
    fn model_batch(
        &mut self,
        model: &mut Model,
        next: Option<Result<Vec<ProviderEvent>, ProviderError>>,
        out: &mut Out,
    ) -> Option<Phase> {
        match next {
            Some(Ok(batch)) => {
                // Room for the batch at once, rather than growing (and
                // copying) the buffer five times on the way to 64.
                if batch.len() > 1 {
                    out.reserve(batch.len());
                }
                model.ready = batch.into_iter();
                None
            }
            Some(Err(e)) => {
                if let Some(watch) = &mut model.watch {
                    watch.error(&e);
                }
                self.emit(AgentEvent::Error(e.to_string()), out);
                Some(Phase::Done)
            }
            None => {
                if let Some(watch) = &mut model.watch {
                    watch.end();
                }
                self.emit(AgentEvent::ModelEnd, out);
                self.step.had_calls = !model.calls.is_empty();
                Some(Phase::Gate(Gate {
                    calls: std::mem::take(&mut model.calls).into_iter(),
                    permits: Vec::new(),
                }))
            }
        }
    }

    /// One event of the model's response; the phase to go to if the step
    /// cannot read on.
    fn model_event(
        &mut self,
        calls: &mut Vec<Streaming>,
        event: ProviderEvent,
        out: &mut Out,
    ) -> Option<Phase> {
        let event = match event {
            // Straight to the encoder: see `TurnEncoder::text`.
            ProviderEvent::TextDelta(delta) => {
                let (encoder, message) = self.encoding();
                encoder.text(delta, message, out);
                return None;
            }
            ProviderEvent::ReasoningDelta(delta) => {
                let (encoder, message) = self.encoding();
                encoder.reasoning(delta, message, out);
                return None;
            }
            ProviderEvent::ReasoningMetadata(metadata) => AgentEvent::ReasoningEnd(*metadata),
            ProviderEvent::ToolCallStart {
                id: provider_id,
                name,
                metadata,
            } => {
                if calls.len() == MAX_CALLS_PER_STEP {
                    let error = format!(
                        "the model made more than {MAX_CALLS_PER_STEP} tool calls in one step"
                    );
                    self.emit(AgentEvent::Error(error), out);
                    return Some(Phase::Done);
                }
                let id = match self.taken.contains(&provider_id) {
                    true => self.agent.ids.next("call"),
                    false => provider_id.clone(),
                };
                self.taken.insert(id.clone());
                // With ADK confirmations a call that may ask is held back: its
                // own part must not appear before it is allowed to run. A
                // tool with sensitive pointers is too: its input is masked,
                // which raw deltas could not be.
                let live = (self.protocol == ConfirmationProtocol::AiSdk
                    || !self.agent.gate.may_ask(&name))
                    && !self.agent.gate.redaction().has_pointers(&name);
                let event = AgentEvent::ToolCallStart {
                    id: id.clone(),
                    name: name.clone(),
                    live,
                };
                calls.push(Streaming {
                    provider_id,
                    id,
                    name,
                    args: String::new(),
                    too_large: false,
                    live,
                    metadata: metadata.map(|m| *m),
                });
                event
            }
            ProviderEvent::ToolCallDelta { id, delta } => {
                let Some(call) = calls.iter_mut().rev().find(|c| c.provider_id == id) else {
                    let error = format!("model sent arguments for an unknown call `{id}`");
                    self.emit(AgentEvent::Error(error), out);
                    return Some(Phase::Done);
                };
                if call.too_large || call.args.len() + delta.len() > MAX_ARGS_BYTES {
                    call.too_large = true;
                    return None;
                }
                call.args.push_str(&delta);
                if !call.live {
                    return None;
                }
                let id = call.id.clone();
                AgentEvent::ToolInputDelta { id, delta }
            }
            ProviderEvent::ToolCallEnd { .. } => return None,
            ProviderEvent::Finish { reason, .. } => {
                self.step.stop = Some(reason);
                return None;
            }
        };
        self.emit(event, out);
        None
    }
}
