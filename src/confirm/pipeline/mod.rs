//! The decision pipeline: the one place a question is claimed, a decision
//! acted on, its outcome recorded and the decision audited.
//!
//! A person's decision (an answer in the chat, a `/live` `confirm` frame,
//! `POST /api/confirmations/{id}`, a signed link; `respond` among them)
//! goes through [`Gate::decide_question`]: the facts are gathered, the pure
//! admission step (`admit.rs`) says what may happen, then the question is
//! claimed, the decision acted on, recorded and audited. What the gate
//! decides alone goes through the steps of `alone.rs`: the policy (a
//! client tool's hand-off, an upstream agent's question), a question's
//! window closing (the sweep, a held turn), `onNewMessage: cancel`, and a
//! remembered approval.
//!
//! `form.rs` says how a decision arrived and names who made it;
//! `refused.rs` audits what the pipeline does not take; `ledger.rs` holds
//! the only calls of the store's `claim`, `finish` and `audit` (besides
//! `execute.rs`, which records the end of a tool it started for a claim
//! won here): `tests/it/tidy_pipeline.rs` checks it.

mod alone;
mod form;
mod ledger;
mod refused;

pub(super) use form::{Form, Who, approver};
pub(super) use refused::settled;

use serde_json::Value;

use super::admit::{Known, Plan, admit};
use super::audit::{Note, outcome_reason};
use super::check::{self, Edits, Refusal};
use super::records::as_ran;
use super::{Answered, Decision, Gate, GateError, OutOfBand, Scope};
use crate::call::ToolCall;
use crate::policy::Verdict;
use crate::store::{AuditDecision, Claim, Issued, Outcome, Status};

/// What the pipeline made of a decision; its face tells it in its own words.
pub(super) enum Reached {
    /// Refused before any claim, or its outcome will never be known: why.
    Refused { refusal: Refusal, why: String },
    /// No such question for this caller (out of band only).
    NotFound,
    /// Decided before this decision, or ended as expired by it: the call
    /// as it ran and its outcome.
    Earlier { call: ToolCall, outcome: Outcome },
    /// This decision won the claim, and did this (`edited`: an approval
    /// that runs the user's edit).
    Won { answered: Answered, edited: bool },
}

/// How a question stands for a decision that did not win its claim.
enum Lost {
    Earlier(Outcome),
    /// Ended as expired by this decision (or by one that won meanwhile).
    EndedNow(Outcome),
    Unknown,
}

impl Gate {
    /// Every person's decision on question `id`, whichever way it came.
    pub(super) async fn decide_question(
        &self,
        form: Form<'_>,
        id: &str,
        decision: &Decision,
    ) -> Result<Reached, GateError> {
        if let Form::Chat { scope, answer, who } = form
            && let Err(refusal) =
                check::sealed(self.signer.as_ref(), &self.answer_as_shown(answer), scope)
        {
            return Ok(self.refused_in_chat(scope, answer, who, refusal).await);
        }
        let issued = self.store.get(id).await?;
        let Some(issued) = issued.filter(|i| form.sees(self, i)) else {
            return Ok(match form {
                Form::Chat { scope, answer, who } => {
                    let refusal = Refusal::NotIssued(id.to_owned());
                    self.refused_in_chat(scope, answer, who, refusal).await
                }
                Form::OutOfBand(who) => self.not_found(who, id).await,
            });
        };
        // What came back as it was shown: the masked values are the issued ones.
        let unmasked;
        let form = match form {
            Form::Chat { scope, answer, who } => {
                unmasked = self.unmasked_answer(answer, &issued);
                Form::Chat {
                    scope,
                    answer: &unmasked,
                    who,
                }
            }
            Form::OutOfBand(who) => Form::OutOfBand(who),
        };
        let restored = self.unmasked_decision(decision, &issued);
        let decision = &*restored;
        // A chat's answer is judged in its chat; any other in the question's.
        let own;
        let scope = match form {
            Form::Chat { scope, .. } => scope,
            Form::OutOfBand(_) => {
                own = Scope {
                    chat_id: issued.chat_id.clone(),
                    principal: issued.principal.clone(),
                };
                &own
            }
        };
        let principal = form.decider(self, &issued);
        let roles = self.roles_with(principal, form.roles());
        let now = self.clock.now_ms();
        let edit = matches!(
            decision,
            Decision::Approve {
                edited: Some(_),
                ..
            }
        );
        let (editable, schema) = match form {
            Form::OutOfBand(_) if !edit => (false, Value::Null),
            _ => self.edits(&issued.call.name),
        };
        let definition = self.definition(&issued.call.name);
        let output_schema = match decision {
            Decision::Respond { .. } => self.output_schema(&issued.call.name),
            Decision::Approve { .. } | Decision::Deny { .. } => None,
        };
        let known = Known {
            issued: &issued,
            principal,
            roles: &roles,
            source: form.source(),
            policy: &self.policy,
            now_ms: now,
            edits: Edits {
                editable,
                schema: &schema,
                max_bytes: crate::call::MAX_ARGS_BYTES,
            },
            upstream: self.upstream,
            output_schema: output_schema.as_ref(),
            definition: definition.as_deref(),
            chat: match form {
                Form::Chat { scope, answer, .. } => Some((answer, scope)),
                Form::OutOfBand(_) => None,
            },
        };
        let lost = match admit(&known, decision) {
            Err(refusal) => {
                return Ok(self.refused(form, scope, &issued, principal, refusal).await);
            }
            Ok(Plan::Expired) => match self.store.status(id).await? {
                Some(Status::Done(outcome)) => Lost::Earlier(outcome),
                // An answer in the chat does not wait for a claim in flight.
                Some(Status::Claimed { .. }) if form.in_chat() => Lost::Unknown,
                _ => Lost::EndedNow(self.expire(scope, &issued).await?),
            },
            // Ended now by this approval, as stale: refused, nothing ran.
            Ok(Plan::Stale) => match self.end_stale(scope, &issued, now, form.identity()).await? {
                None => {
                    let refusal = Refusal::Stale(issued.call.name.clone());
                    let why = refusal.to_string();
                    return Ok(Reached::Refused { refusal, why });
                }
                Some(lost) => lost,
            },
            Ok(Plan::Claim(run)) => match self.take(id, now).await? {
                Some(lost) => lost,
                None => {
                    let waited = now.saturating_sub(issued.issued_at_ms);
                    self.metrics.confirmation_waited(waited);
                    let acted = self.act(form, scope, &issued, principal, run, decision);
                    return acted.await;
                }
            },
        };
        let outcome = match lost {
            Lost::Unknown => {
                let refusal = Refusal::OutcomeUnknown;
                return Ok(self.refused(form, scope, &issued, principal, refusal).await);
            }
            Lost::Earlier(outcome) | Lost::EndedNow(outcome) if !form.in_chat() => {
                let call = &issued.call;
                let note = match settled(id, decision, &outcome) {
                    OutOfBand::Conflict(why) | OutOfBand::Expired(why) => {
                        Note::refused(scope, call, form.identity()).because(why)
                    }
                    _ => Note::new(AuditDecision::Replayed, scope, call)
                        .by("an earlier answer")
                        .approver(form.identity()),
                };
                let note = note.fingerprint(issued.fingerprint.as_ref());
                self.note(note.on(Some(id))).await;
                outcome
            }
            Lost::Earlier(outcome) => {
                let call = as_ran(issued.call.clone(), &outcome);
                let note = Note::new(AuditDecision::Replayed, scope, &call).by("an earlier answer");
                let note = note.fingerprint(issued.fingerprint.as_ref());
                let note = note.approver(form.identity());
                self.note(note.reason(outcome_reason(&outcome)).on(Some(id)))
                    .await;
                return Ok(Reached::Earlier { call, outcome });
            }
            Lost::EndedNow(outcome) => {
                let call = as_ran(issued.call.clone(), &outcome);
                let note = Note::refused(scope, &call, form.identity());
                let note = note.fingerprint(issued.fingerprint.as_ref());
                self.note(note.reason(outcome_reason(&outcome)).on(Some(id)))
                    .await;
                return Ok(Reached::Earlier { call, outcome });
            }
        };
        let call = as_ran(issued.call, &outcome);
        Ok(Reached::Earlier { call, outcome })
    }

    /// A decision that won the claim: acted on, recorded, and audited.
    async fn act(
        &self,
        form: Form<'_>,
        scope: &Scope,
        issued: &Issued,
        principal: &str,
        run: ToolCall,
        decision: &Decision,
    ) -> Result<Reached, GateError> {
        let id = issued.id.as_str();
        // Who decided, for the audit log: the user who asked, or an approver.
        let who = if principal == issued.principal {
            "user"
        } else {
            principal
        };
        let (answered, audited, by) = match decision {
            Decision::Approve { .. } => {
                self.approve_won(scope, id, run, &issued.call.args, decision, who)
                    .await?
            }
            Decision::Deny { reason } => {
                let outcome = Outcome::Denied {
                    reason: reason.clone(),
                };
                self.close(id, outcome.clone()).await?;
                let call = issued.call.clone();
                let answered = Answered::Recorded { call, outcome };
                (answered, AuditDecision::Rejected, who.to_owned())
            }
            // Recorded without running, like a denial.
            Decision::Respond { output } => {
                let outcome = Outcome::Output {
                    output: output.clone(),
                    ran_with: None,
                    responded: true,
                };
                self.close(id, outcome.clone()).await?;
                let call = issued.call.clone();
                let answered = Answered::Recorded { call, outcome };
                (answered, AuditDecision::Responded, who.to_owned())
            }
        };
        // A rule's denial names the rule, not the way the decision came.
        let by = match form {
            Form::OutOfBand(who) if audited != AuditDecision::Denied => {
                format!("{by}{}", who.via())
            }
            _ => by,
        };
        let (call, reason) = match &answered {
            Answered::Recorded { call, outcome } => (call, outcome_reason(outcome)),
            Answered::Running { call, .. } | Answered::Client { call } => (call, None),
            Answered::Rejected(_) => (&issued.call, None),
        };
        let issued_args = match form {
            Form::Chat { answer, .. } => answer.original.as_ref().map(|o| &o.args),
            Form::OutOfBand(_) => Some(&issued.call.args),
        };
        let edited = audited == AuditDecision::Edited;
        let issued_args = edited.then_some(issued_args).flatten();
        let note = Note::new(audited, scope, call).by(by).reason(reason);
        let note = note.fingerprint(issued.fingerprint.as_ref());
        // A rule that denied the approval decided, not the approver.
        let note = match audited {
            AuditDecision::Denied => note,
            _ => note.approver(form.identity()),
        };
        self.note(note.on(Some(id)).edited_from(issued_args)).await;
        Ok(Reached::Won { answered, edited })
    }

    /// An approval that won the claim: runs `call` (the issued one or the
    /// user's edit), unless a rule now denies it.
    async fn approve_won(
        &self,
        scope: &Scope,
        id: &str,
        call: ToolCall,
        issued_args: &Value,
        approval: &Decision,
        who: &str,
    ) -> Result<(Answered, AuditDecision, String), GateError> {
        let (payload, remember, approve_next, grant) = match approval {
            Decision::Approve {
                payload,
                remember,
                approve_next,
                grant,
                ..
            } => (payload.clone(), *remember, *approve_next, grant.as_ref()),
            Decision::Deny { .. } | Decision::Respond { .. } => (None, None, None, None),
        };
        if let Some(Verdict::Deny { reason }) = self.verdict(scope, &call) {
            // A rule added since the question was asked, or one the edit hits, still wins.
            let outcome = Outcome::Error {
                message: format!("denied by policy: {reason}"),
                ran_with: None,
            };
            self.close(id, outcome.clone()).await?;
            let answered = Answered::Recorded { call, outcome };
            return Ok((answered, AuditDecision::Denied, "policy".to_owned()));
        }
        let edited = *issued_args != call.args;
        let ran_with = edited.then(|| call.args.clone());
        let decision = if edited {
            AuditDecision::Edited
        } else {
            AuditDecision::Approved
        };
        let mut by = approver(who, remember, approve_next);
        let grant = grant.map(|narrowed| self.narrow(scope, id, &call.name, narrowed));
        if let Some(grant) = &grant {
            by = format!("{by}, with narrowed grant {}", grant.id);
        }
        if self.runs_elsewhere(&call.name) {
            let name = call.name.clone();
            self.close(id, Outcome::HandedOff { ran_with }).await?;
            self.extend(scope, &name, remember, approve_next).await;
            if let Some(grant) = grant {
                self.keep_grant(grant).await;
            }
            return Ok((Answered::Client { call }, decision, by));
        }
        // Started before this returns: no await point lies between winning
        // the claim and the call running.
        let outcome = self.start_confirmed(
            id.to_owned(),
            call.clone(),
            payload,
            &scope.chat_id,
            ran_with,
        );
        self.extend(scope, &call.name, remember, approve_next).await;
        if let Some(grant) = grant {
            self.keep_grant(grant).await;
        }
        Ok((Answered::Running { call, outcome }, decision, by))
    }

    /// Claims `id`: `None` when this claim won, else how the question stands.
    async fn take(&self, id: &str, now_ms: u64) -> Result<Option<Lost>, GateError> {
        Ok(match self.claim(id, now_ms).await? {
            Claim::Won => None,
            Claim::Done(outcome) => Some(Lost::Earlier(outcome)),
            Claim::InFlight { since_ms, orphaned } => {
                Some(match self.claimed_outcome(id, since_ms, orphaned).await? {
                    Some(outcome) => Lost::Earlier(outcome),
                    None => Lost::Unknown,
                })
            }
        })
    }
}
