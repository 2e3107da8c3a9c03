//! A held turn's state, saved in the store's turn log when the turn starts
//! to wait for a human, so that another instance sharing the store can
//! continue it if this one dies: it waits for the same questions and then
//! goes on from the stored history, as the turn itself would have.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::encode::TurnEncoder;
use super::{Agent, Engine, Phase, Pieces, StepState, Turn};
use crate::confirm::Scope;
use crate::protocol::sink::{Out, Writer};
use crate::protocol::{ConfirmationFlow, ConfirmationProtocol, UiMessage};
use crate::provider::StopReason;

/// Everything that continues a turn waiting for a human (held flow).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldTurn {
    pub principal: String,
    pub chat_id: String,
    protocol: ConfirmationProtocol,
    flow: ConfirmationFlow,
    /// The `ai` version the client asked its chunks fitted to, if it did.
    pub client_version: Option<String>,
    /// The conversation, its last message the outgoing one so far.
    history: Vec<UiMessage>,
    continuing: bool,
    steps: usize,
    taken: Vec<String>,
    /// The questions still waited for, the current one first.
    questions: Vec<String>,
    handed: bool,
    had_calls: bool,
    stop: Option<StopReason>,
}

impl Turn {
    /// Saves what continues this turn, which now waits for `questions`,
    /// for another instance; a turn that cannot be saved goes on here.
    /// Made at once, saved by the future (which borrows nothing of the turn).
    pub(super) fn save_held(
        &self,
        questions: &[String],
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let logs = self.agent.turn_logs.clone();
        let held = logs.as_ref().map(|_| HeldTurn {
            principal: self.scope.principal.clone(),
            chat_id: self.scope.chat_id.clone(),
            protocol: self.protocol,
            flow: self.flow,
            client_version: self.client_version.map(|v| v.to_string()),
            history: self.history.clone(),
            continuing: self.continuing,
            steps: self.steps,
            taken: self.taken.iter().cloned().collect(),
            questions: questions.to_vec(),
            handed: self.step.handed,
            had_calls: self.step.had_calls,
            stop: self.step.stop,
        });
        // The question lives at most this long; the state as long.
        let ttl = self.agent.gate.expiry();
        async move {
            let (Some(logs), Some(held)) = (logs, held) else {
                return;
            };
            let state = match serde_json::to_vec(&held) {
                Ok(state) => state,
                Err(e) => {
                    tracing::warn!("encoding a held turn (no other instance can continue it): {e}");
                    return;
                }
            };
            if let Err(e) = logs.hold(&held.principal, &held.chat_id, &state, ttl).await {
                tracing::warn!("saving a held turn (no other instance can continue it): {e}");
            }
        }
    }
}

impl Agent {
    /// Continues `held`, a turn another instance ran until it died while
    /// it waited for a human: no new `start`, the same questions waited
    /// for, then the model again from the stored history.
    pub fn continue_held(
        self: Arc<Self>,
        held: HeldTurn,
        mut out: Out,
        waiting: tokio::sync::watch::Sender<bool>,
    ) -> Pieces {
        async_stream::stream! {
            let mut turn = Turn {
                encoder: TurnEncoder::new(
                    self.ids.clone(),
                    self.denied_as,
                    self.gate.redaction().clone(),
                ),
                tools: None,
                // Only toolgate's own turn is held in the turn log.
                engine: Engine::Own,
                // A held turn answers nothing in the chat (its question is
                // decided out of band): the identity of the request that
                // started it is not kept, and would meet no `approverIdentity`.
                known: crate::identity::Known::by(crate::identity::Source::Anonymous),
                scope: Scope {
                    chat_id: held.chat_id,
                    principal: held.principal,
                },
                history: held.history,
                continuing: held.continuing,
                protocol: held.protocol,
                flow: held.flow,
                client_version: held.client_version.and_then(|v| v.parse().ok()),
                waiting,
                phase: Phase::Hold(held.questions.into_iter()),
                steps: held.steps,
                started: std::time::Instant::now(),
                taken: held.taken.into_iter().collect::<HashSet<_>>(),
                step: StepState {
                    asked: true,
                    handed: held.handed,
                    questions: Vec::new(),
                    had_calls: held.had_calls,
                    stop: held.stop,
                },
                agent: self,
            };
            while turn.advance(&mut out).await {
                if let Some(batch) = out.take() {
                    yield batch;
                }
            }
        }
        .boxed()
    }
}
