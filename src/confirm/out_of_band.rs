//! What a decision made outside the chat does (the approvals API, a
//! socket's `confirm` frame), and what a held question becomes when nobody
//! decides in time.

use std::time::Duration;

use serde_json::Value;

use super::audit::{edited_from, outcome_reason};
use super::check;
use super::records::as_ran;
use super::{
    Answered, CANCELLED, Decision, EXPIRED, Gate, GateError, OUTCOME_UNKNOWN, OutOfBand, Scope,
};
use crate::call::ToolCall;
use crate::store::{AuditDecision, Claim, Issued, Outcome, Status, StoreError};

/// How often a held turn looks whether its question was claimed by a
/// decision that will never say its outcome.
const LOOK_EVERY: Duration = Duration::from_secs(5);

impl Gate {
    /// Decides a confirmation through the API rather than the chat: the
    /// caller is authenticated as `principal`, so no signature or history
    /// check applies. The same decision twice is fine; a different one is a
    /// conflict. An approved call runs here, and the chat's next request
    /// reports its outcome.
    pub async fn decide_out_of_band(
        &self,
        principal: &str,
        id: &str,
        decision: Decision,
    ) -> Result<OutOfBand, GateError> {
        let gate = self.clone();
        let (principal, id) = (principal.to_owned(), id.to_owned());
        self.to_the_end(async move {
            gate.decide_here(Who::Caller(&principal), &id, decision)
                .await
        })
        .await
    }

    /// Decides as `who`: the same checks, claim and records whichever way
    /// the decision came.
    pub(super) async fn decide_here(
        &self,
        who: Who<'_>,
        id: &str,
        decision: Decision,
    ) -> Result<OutOfBand, GateError> {
        let approve = decision.needs_approver();
        let issued = self.store.get(id).await?;
        let via = who.via();
        // Another user's question is not there for the caller, unless its
        // tool names approvers: then it is, and they may or may not decide.
        // A link was minted for its question.
        let Some(issued) = issued.filter(|i| match who {
            Who::Caller(principal) => {
                i.principal == principal || self.approvers(&i.call).others_decide()
            }
            Who::Link { .. } => true,
        }) else {
            let caller = Scope {
                chat_id: String::new(),
                principal: who.principal().unwrap_or_default().to_owned(),
            };
            let nothing = ToolCall {
                id: String::new(),
                name: String::new(),
                args: Value::Null,
            };
            let why = format!("no confirmation `{id}` for this user");
            self.note(
                &caller,
                &nothing,
                AuditDecision::Refused,
                "toolgate".into(),
                Some(why),
                Some(id),
            )
            .await;
            return Ok(OutOfBand::NotFound);
        };
        // The question's own scope: its events are the asker's.
        let scope = Scope {
            chat_id: issued.chat_id.clone(),
            principal: issued.principal.clone(),
        };
        // A link decides as whoever follows it when the server knows them;
        // for a question only its asker decides, as the asker.
        let approvers = self.approvers(&issued.call);
        let principal = match who.principal() {
            Some(principal) => principal,
            None if !approvers.others_decide() => issued.principal.as_str(),
            None => "",
        };
        // Who decided, for the audit log: the user who asked, or an approver.
        let who = if principal == issued.principal {
            "user".to_owned()
        } else {
            principal.to_owned()
        };
        let now = self.clock.now_ms();
        let settled = |outcome: Outcome| {
            if outcome == Outcome::Expired {
                return OutOfBand::Expired(format!("confirmation `{id}` expired: {EXPIRED}"));
            }
            if outcome == Outcome::Cancelled {
                return OutOfBand::Conflict(format!(
                    "confirmation `{id}` was cancelled: {CANCELLED}"
                ));
            }
            match check::repeats(&decision, &outcome) {
                Ok(()) => OutOfBand::Decided(outcome),
                Err(earlier) => {
                    OutOfBand::Conflict(format!("confirmation `{id}` was already {earlier}"))
                }
            }
        };
        // An edit fits the tool's schema, a response its output schema;
        // a refused one leaves the question open.
        let fits = match &decision {
            Decision::Approve {
                edited: Some(edited),
                ..
            } => self.edited_call(&issued, edited).map(Some),
            Decision::Respond { output } => {
                self.response_fits(&issued.call.name, output).map(|()| None)
            }
            _ => Ok(None),
        };
        let call = match fits {
            Ok(call) => call,
            Err(refusal) => {
                let why = refusal.to_string();
                let reason = Some(why.clone());
                self.note(
                    &scope,
                    &issued.call,
                    AuditDecision::Refused,
                    "toolgate".into(),
                    reason,
                    Some(id),
                )
                .await;
                return Ok(OutOfBand::Invalid(why));
            }
        };
        // Approvers and four eyes, for the call as asked and as edited.
        if let Err(refusal) = self.may_decide(&issued, call.as_ref(), principal, approve) {
            let why = match principal {
                "" => format!("{refusal}; sign in to decide through a link"),
                _ => refusal.to_string(),
            };
            let by = if principal.is_empty() {
                "someone"
            } else {
                principal
            };
            self.note(
                &scope,
                &issued.call,
                AuditDecision::Refused,
                format!("{by}{via}"),
                Some(why.clone()),
                Some(id),
            )
            .await;
            return Ok(OutOfBand::Forbidden(why));
        }
        // A grant past this call only where the asker decides alone; the
        // question stays open for a decision without one.
        if let Err(refusal) = self.may_grant(&issued, call.as_ref(), &decision) {
            let why = refusal.to_string();
            let by = format!("{who}{via}");
            self.note(
                &scope,
                &issued.call,
                AuditDecision::Refused,
                by,
                Some(why.clone()),
                Some(id),
            )
            .await;
            return Ok(OutOfBand::Invalid(why));
        }
        // Decided before: the same decision again is a replay, another one a conflict.
        let earlier = match self.store.status(id).await? {
            Some(Status::Done(outcome)) if now > issued.expires_at_ms => Some(settled(outcome)),
            // Too late: the question ends as expired (if nothing else
            // ended it at that moment), and this decision is refused.
            _ if now > issued.expires_at_ms => {
                let outcome = self.time_out(&scope, issued.clone()).await?;
                Some(settled(outcome))
            }
            _ => match self.claim(id, now).await? {
                Claim::Done(outcome) => Some(settled(outcome)),
                Claim::InFlight { since_ms, orphaned } => {
                    Some(match self.claimed_outcome(id, since_ms, orphaned).await? {
                        Some(outcome) => settled(outcome),
                        None => OutOfBand::Conflict(OUTCOME_UNKNOWN.into()),
                    })
                }
                Claim::Won => None,
            },
        };
        if let Some(result) = earlier {
            let (decision, by, reason) = match &result {
                OutOfBand::Conflict(why) | OutOfBand::Expired(why) => {
                    (AuditDecision::Refused, "toolgate", Some(why.clone()))
                }
                _ => (AuditDecision::Replayed, "an earlier answer", None),
            };
            self.note(&scope, &issued.call, decision, by.into(), reason, Some(id))
                .await;
            return Ok(result);
        }
        let waited = self.clock.now_ms().saturating_sub(issued.issued_at_ms);
        self.metrics.confirmation_waited(waited);
        let outcome = match &decision {
            Decision::Approve { .. } => {
                let call = call.unwrap_or_else(|| issued.call.clone());
                let (answered, decision, by) = self
                    .approve_won(&scope, id, call, &issued.call.args, &decision, &who)
                    .await?;
                let original = (decision == AuditDecision::Edited).then_some(&issued.call.args);
                match answered {
                    Answered::Running { call, outcome } => {
                        let by = format!("{by}{via}");
                        self.record(edited_from(
                            self.event(&scope, &call, decision, by, None, Some(id)),
                            original,
                        ))
                        .await;
                        outcome.await
                    }
                    Answered::Recorded { call, outcome } => {
                        let reason = outcome_reason(&outcome);
                        self.record(edited_from(
                            self.event(&scope, &call, decision, by, reason, Some(id)),
                            original,
                        ))
                        .await;
                        outcome
                    }
                    Answered::Client { call } => {
                        let by = format!("{by}{via}");
                        self.record(edited_from(
                            self.event(&scope, &call, decision, by, None, Some(id)),
                            original,
                        ))
                        .await;
                        let ran_with = (decision == AuditDecision::Edited).then_some(call.args);
                        Outcome::HandedOff { ran_with }
                    }
                    Answered::Rejected(why) => Outcome::Error {
                        message: why,
                        ran_with: None,
                    },
                }
            }
            Decision::Deny { reason } => {
                let outcome = Outcome::Denied {
                    reason: reason.clone(),
                };
                self.store.finish(id, outcome.clone()).await?;
                self.note(
                    &scope,
                    &issued.call,
                    AuditDecision::Rejected,
                    format!("{who}{via}"),
                    reason.clone(),
                    Some(id),
                )
                .await;
                outcome
            }
            // Recorded without running, like a denial; `by` as an approval's.
            Decision::Respond { output } => {
                let outcome = self.respond_won(id, output).await?;
                let by = format!("{who}{via}");
                self.note(
                    &scope,
                    &issued.call,
                    AuditDecision::Responded,
                    by,
                    None,
                    Some(id),
                )
                .await;
                outcome
            }
        };
        Ok(OutOfBand::Decided(outcome))
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
            .to_the_end(async move { gate.time_out(&scope, issued).await })
            .await?;
        Ok(Some((as_ran(call, &outcome), outcome)))
    }

    /// The outcome of question `id`, claimed by a decision: recorded, or
    /// waited for while its instance lives and its call may still run,
    /// else unknown. A claim is never undone, so claiming a claimed
    /// question only reads its claim.
    async fn in_flight(&self, id: &str) -> Result<Outcome, GateError> {
        let unknown = || Outcome::Error {
            message: OUTCOME_UNKNOWN.into(),
            ran_with: None,
        };
        Ok(match self.claim(id, self.clock.now_ms()).await? {
            Claim::Done(outcome) => outcome,
            Claim::InFlight { since_ms, orphaned } => self
                .claimed_outcome(id, since_ms, orphaned)
                .await?
                .unwrap_or_else(unknown),
            // Not claimed after all: nothing ran, and nothing will.
            Claim::Won => {
                let outcome = unknown();
                self.store.finish(id, outcome.clone()).await?;
                outcome
            }
        })
    }

    /// A question nobody decided in its window: ended as expired, unless a
    /// decision wins the claim at that moment (then its outcome).
    pub(super) async fn time_out(
        &self,
        scope: &Scope,
        issued: Issued,
    ) -> Result<Outcome, GateError> {
        let id = issued.id.as_str();
        let claim = match self.claim(id, self.clock.now_ms()).await {
            // Forgotten meanwhile: it expired all the same.
            Err(StoreError::NotClaimed(_)) => Claim::Done(Outcome::Expired),
            claim => claim?,
        };
        let outcome = match claim {
            Claim::Won => {
                self.store.finish(id, Outcome::Expired).await?;
                let waited = self.clock.now_ms().saturating_sub(issued.issued_at_ms);
                self.metrics.confirmation_waited(waited);
                self.note(
                    scope,
                    &issued.call,
                    AuditDecision::Expired,
                    "toolgate".into(),
                    Some(EXPIRED.to_owned()),
                    Some(id),
                )
                .await;
                Outcome::Expired
            }
            Claim::Done(outcome) => outcome,
            Claim::InFlight { since_ms, orphaned } => {
                match self.claimed_outcome(id, since_ms, orphaned).await? {
                    Some(outcome) => outcome,
                    None => Outcome::Error {
                        message: OUTCOME_UNKNOWN.into(),
                        ran_with: None,
                    },
                }
            }
        };
        Ok(outcome)
    }
}

/// Who decides a question out of band.
#[derive(Debug, Clone, Copy)]
pub(super) enum Who<'a> {
    /// An authenticated caller (the API, a socket's `confirm` frame).
    Caller(&'a str),
    /// Whoever follows a signed link sent to `target`: the caller when the
    /// request names one (a proxy's principal header, a key), else nobody
    /// the server knows, who may decide only a question its asker decides.
    Link {
        target: &'a str,
        caller: Option<&'a str>,
    },
}

impl<'a> Who<'a> {
    fn principal(self) -> Option<&'a str> {
        match self {
            Who::Caller(principal) => Some(principal),
            Who::Link { caller, .. } => caller,
        }
    }

    /// How the decision came, for the audit log.
    fn via(self) -> String {
        match self {
            Who::Caller(_) => " through the API".to_owned(),
            Who::Link { target, .. } => format!(" through a signed link ({target})"),
        }
    }
}
