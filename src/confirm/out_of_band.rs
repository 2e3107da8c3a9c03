//! What a decision made outside the chat does (the approvals API, a
//! socket's `confirm` frame), and what a held question becomes when nobody
//! decides in time.

use std::borrow::Cow;
use std::time::Duration;

use serde_json::Value;

use super::check::Refusal;
use super::pipeline::{Form, Reached, Who, settled};
use super::records::as_ran;
use super::{Answered, Decision, Gate, GateError, OutOfBand, Scope};
use crate::call::ToolCall;
use crate::identity::Identity;
use crate::store::{Outcome, Status};

/// How often a held turn looks whether its question was claimed by a
/// decision that will never say its outcome.
const LOOK_EVERY: Duration = Duration::from_secs(5);

impl Gate {
    /// Decides a confirmation through the API rather than the chat: the
    /// caller is authenticated as `who` (its roles and source count), so no
    /// signature or history check applies. The same decision twice is
    /// fine; a different one is a conflict. An approved call runs here, and
    /// the chat's next request reports its outcome.
    pub async fn decide_out_of_band(
        &self,
        who: &Identity,
        id: &str,
        decision: Decision,
    ) -> Result<OutOfBand, GateError> {
        let gate = self.clone();
        let (who, id) = (who.clone(), id.to_owned());
        self.to_the_end(async move { gate.decide_here(Who::Caller(&who), &id, decision).await })
            .await
    }

    /// Decides as `who`, through the decision pipeline: the same checks,
    /// claim and records whichever way the decision came. An approved call
    /// runs to its end before this returns.
    pub(super) async fn decide_here(
        &self,
        who: Who<'_>,
        id: &str,
        decision: Decision,
    ) -> Result<OutOfBand, GateError> {
        let reached = self
            .decide_question(Form::OutOfBand(who), id, &decision)
            .await?;
        // The answer goes to a person: the arguments an edit ran with, masked.
        let tool = match &reached {
            Reached::Earlier { call, .. }
            | Reached::Won {
                answered:
                    Answered::Running { call, .. }
                    | Answered::Client { call }
                    | Answered::Recorded { call, .. },
                ..
            } => Some(call.name.clone()),
            Reached::Won {
                answered: Answered::Rejected(_),
                ..
            }
            | Reached::NotFound
            | Reached::Refused { .. } => None,
        };
        let answer = match reached {
            Reached::NotFound => OutOfBand::NotFound,
            Reached::Refused { refusal, why } => match refusal {
                Refusal::NotApprover(_) => OutOfBand::Forbidden(why),
                Refusal::OutcomeUnknown | Refusal::Stale(_) => OutOfBand::Conflict(why),
                _ => OutOfBand::Invalid(why),
            },
            Reached::Earlier { outcome, .. } => settled(id, &decision, &outcome),
            Reached::Won { answered, edited } => OutOfBand::Decided(match answered {
                Answered::Running { outcome, .. } => outcome.await,
                Answered::Recorded { outcome, .. } => outcome,
                // Handed out as edited, if the approval edited it.
                Answered::Client { call } => Outcome::HandedOff {
                    ran_with: edited.then_some(call.args),
                },
                Answered::Rejected(why) => Outcome::Error {
                    message: why,
                    ran_with: None,
                },
            }),
        };
        Ok(match (answer, tool) {
            (OutOfBand::Decided(outcome), Some(tool)) => {
                OutOfBand::Decided(match self.shown_outcome(&tool, &outcome) {
                    Cow::Borrowed(_) => outcome,
                    Cow::Owned(shown) => shown,
                })
            }
            (answer, _) => answer,
        })
    }

    /// Waits for the question `id` to be decided elsewhere (the approvals
    /// API, a socket's `confirm` frame, another tab). When its window closes
    /// first, it ends as expired, unless a decision wins the store's claim
    /// at that moment. The call as it ran and its outcome; `None` when the
    /// server started to stop first ([`Gate::release_held`]): the question
    /// stays open.
    pub async fn hold(
        &self,
        scope: &Scope,
        id: &str,
    ) -> Result<Option<(ToolCall, Outcome)>, GateError> {
        if self.releasing.is_cancelled() {
            return Ok(None);
        }
        let issued = self
            .store
            .get(id)
            .await?
            .filter(|i| i.chat_id == scope.chat_id && i.principal == scope.principal);
        let Some(issued) = issued else {
            let outcome = Outcome::Error {
                message: format!("confirmation `{id}` is gone"),
                ran_with: None,
            };
            return Ok(Some((
                ToolCall {
                    id: id.to_owned(),
                    name: String::new(),
                    args: Value::Null,
                },
                outcome,
            )));
        };
        let window =
            Duration::from_millis(issued.expires_at_ms.saturating_sub(self.clock.now_ms()));
        let closes = tokio::time::Instant::now() + window;
        // Waiting is only reading: dropping it leaves nothing half done.
        loop {
            let left = closes.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            let waited = tokio::select! {
                waited = self.store.wait_outcome(id, left.min(LOOK_EVERY)) => waited?,
                () = self.releasing.cancelled() => return Ok(None),
            };
            if let Some(outcome) = waited {
                return Ok(Some((as_ran(issued.call, &outcome), outcome)));
            }
            // A decision whose instance died after it won the claim never
            // says its outcome: judged like any claim in flight, or the
            // turn would wait for the question's whole life.
            if let Some(Status::Claimed { .. }) = self.store.status(id).await? {
                let outcome = tokio::select! {
                    outcome = self.in_flight(id) => outcome?,
                    () = self.releasing.cancelled() => return Ok(None),
                };
                return Ok(Some((as_ran(issued.call, &outcome), outcome)));
            }
        }
        let (gate, scope) = (self.clone(), scope.clone());
        let call = issued.call.clone();
        let outcome = self
            .to_the_end(async move { gate.expire(&scope, &issued).await })
            .await?;
        Ok(Some((as_ran(call, &outcome), outcome)))
    }
}
