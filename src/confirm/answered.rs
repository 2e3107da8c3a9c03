//! What a user's answer in the chat does: checked once, then
//! claimed, and an approval started or handed out at once.

use serde_json::Value;

use super::audit::{edited_from, outcome_reason};
use super::check::{self, Edits, Refusal};
use super::records::as_ran;
use super::{Answer, Answered, Decision, Gate, GateError, Remember, Scope};
use crate::call::QualifiedName;
use crate::call::ToolCall;
use crate::policy::{ToolInfo, Verdict};
use crate::store::{AuditDecision, Claim, Issued, Outcome, Status};

impl Gate {
    /// Checks a user's answer against what this server issued, and records
    /// the decision in the audit log.
    pub async fn check_answer(
        &self,
        scope: &Scope,
        answer: &Answer,
    ) -> Result<Answered, GateError> {
        let (gate, scope, answer) = (self.clone(), scope.clone(), answer.clone());
        self.to_the_end(async move { gate.answer(&scope, &answer).await })
            .await
    }

    pub(super) async fn answer(
        &self,
        scope: &Scope,
        answer: &Answer,
    ) -> Result<Answered, GateError> {
        let (answered, decision, by) = self.judge_answer(scope, answer).await?;
        let (call, reason) = match &answered {
            Answered::Rejected(why) => (answer.original.clone(), Some(why.clone())),
            Answered::Recorded { call, outcome } => (Some(call.clone()), outcome_reason(outcome)),
            Answered::Running { call, .. } | Answered::Client { call } => {
                (Some(call.clone()), None)
            }
        };
        let unknown = ToolCall {
            id: String::new(),
            name: String::new(),
            args: Value::Null,
        };
        let call = call.unwrap_or(unknown);
        let issued_args = (decision == AuditDecision::Edited)
            .then(|| answer.original.as_ref().map(|o| &o.args))
            .flatten();
        let event = self.event(
            scope,
            &call,
            decision,
            by,
            reason,
            Some(&answer.confirmation_id),
        );
        self.record(edited_from(event, issued_args)).await;
        Ok(answered)
    }

    pub(super) async fn judge_answer(
        &self,
        scope: &Scope,
        answer: &Answer,
    ) -> Result<(Answered, AuditDecision, String), GateError> {
        let reject = |refusal: Refusal| {
            let (decision, why) = (AuditDecision::Refused, refusal.to_string());
            tracing::warn!(confirmation = %answer.confirmation_id, chat = %scope.chat_id, "confirmation rejected: {why}");
            Ok((Answered::Rejected(why), decision, "toolgate".to_owned()))
        };
        let recorded = |call: ToolCall, outcome: Outcome| {
            Ok((
                Answered::Recorded {
                    call: as_ran(call, &outcome),
                    outcome,
                },
                AuditDecision::Replayed,
                "an earlier answer".to_owned(),
            ))
        };
        if let Err(refusal) = check::sealed(self.signer.as_ref(), answer, scope) {
            return reject(refusal);
        }
        let Some(issued) = self.store.get(&answer.confirmation_id).await? else {
            return reject(Refusal::NotIssued(answer.confirmation_id.clone()));
        };
        let now = self.clock.now_ms();
        let (editable, schema) = self.edits(&issued.call.name);
        let edits = Edits {
            editable,
            schema: &schema,
            max_bytes: crate::call::MAX_ARGS_BYTES,
        };
        // An edit is checked before the claim: a refused edit leaves the question open.
        let call = match check::check(answer, &issued, scope, now, edits) {
            Ok(call) => call,
            // A decided call keeps its outcome; an undecided one can no
            // longer be: it ends as expired, and this answer is refused.
            Err(Refusal::Expired) => {
                return match self.store.status(&issued.id).await? {
                    Some(Status::Done(outcome)) => recorded(issued.call, outcome),
                    Some(Status::Claimed { .. }) => reject(Refusal::OutcomeUnknown),
                    Some(Status::Pending) | None => {
                        let call = issued.call.clone();
                        let outcome = self.time_out(scope, issued).await?;
                        let (answered, _, _) = recorded(call, outcome)?;
                        Ok((answered, AuditDecision::Refused, "toolgate".to_owned()))
                    }
                };
            }
            Err(refusal) => return reject(refusal),
        };
        // Approvers and four eyes: a refused approval leaves the question
        // open for those who may decide.
        let approve = answer.decision.needs_approver();
        if let Err(refusal) = self.may_decide(&issued, Some(&call), &scope.principal, approve) {
            return reject(refusal);
        }
        if let Err(refusal) = self.may_grant(&issued, Some(&call), &answer.decision) {
            return reject(refusal);
        }
        if let Decision::Respond { output } = &answer.decision
            && let Err(refusal) = self.response_fits(&issued.call.name, output)
        {
            return reject(refusal);
        }
        let claim = self.claim(&issued.id, now).await?;
        if claim == Claim::Won {
            let waited = now.saturating_sub(issued.issued_at_ms);
            self.metrics.confirmation_waited(waited);
        }
        match claim {
            Claim::Done(outcome) => recorded(issued.call, outcome),
            Claim::InFlight { since_ms, orphaned } => {
                match self.claimed_outcome(&issued.id, since_ms, orphaned).await? {
                    Some(outcome) => recorded(issued.call, outcome),
                    None => reject(Refusal::OutcomeUnknown),
                }
            }
            Claim::Won => match &answer.decision {
                Decision::Approve { .. } => {
                    let decision = &answer.decision;
                    self.approve_won(scope, &issued.id, call, &issued.call.args, decision, "user")
                        .await
                }
                Decision::Deny { reason } => {
                    let outcome = Outcome::Denied {
                        reason: reason.clone(),
                    };
                    self.store.finish(&issued.id, outcome.clone()).await?;
                    Ok((
                        Answered::Recorded {
                            call: issued.call,
                            outcome,
                        },
                        AuditDecision::Rejected,
                        "user".to_owned(),
                    ))
                }
                // Recorded without running, like a denial.
                Decision::Respond { output } => {
                    let outcome = self.respond_won(&issued.id, output).await?;
                    Ok((
                        Answered::Recorded {
                            call: issued.call,
                            outcome,
                        },
                        AuditDecision::Responded,
                        "user".to_owned(),
                    ))
                }
            },
        }
    }

    /// Whether `name`'s arguments may be edited, and the schema an edit
    /// must fit (`null` for a tool now gone: no edit passes).
    pub(super) fn edits(&self, name: &str) -> (bool, Value) {
        let qualified = QualifiedName::of(name);
        // An upstream agent runs its call with the arguments it made.
        let editable = !self.upstream
            && self.policy.editable(&ToolInfo {
                name,
                qualified: &qualified,
                tool_may_ask: true,
            });
        let schema = self
            .tools
            .current()
            .get(name)
            .map(|t| t.parameters())
            .unwrap_or(Value::Null);
        (editable, schema)
    }

    /// `issued` with the user's edit of its arguments, where the tool allows it.
    pub(super) fn edited_call(&self, issued: &Issued, edited: &Value) -> Result<ToolCall, Refusal> {
        let (editable, schema) = self.edits(&issued.call.name);
        let edits = Edits {
            editable,
            schema: &schema,
            max_bytes: crate::call::MAX_ARGS_BYTES,
        };
        check::edit(issued, Some(edited), edits)
    }

    /// An approval that won the claim: runs `call` (the issued one or the
    /// user's edit), unless a rule now denies it.
    pub(super) async fn approve_won(
        &self,
        scope: &Scope,
        id: &str,
        call: ToolCall,
        issued_args: &Value,
        approval: &Decision,
        who: &str,
    ) -> Result<(Answered, AuditDecision, String), GateError> {
        let (payload, remember, approve_next) = match approval {
            Decision::Approve {
                payload,
                remember,
                approve_next,
                ..
            } => (payload.clone(), *remember, *approve_next),
            Decision::Deny { .. } | Decision::Respond { .. } => (None, None, None),
        };
        if let Some(Verdict::Deny { reason }) = self.verdict(scope, &call) {
            // A rule added since the question was asked, or one the edit hits, still wins.
            let outcome = Outcome::Error {
                message: format!("denied by policy: {reason}"),
                ran_with: None,
            };
            self.store.finish(id, outcome.clone()).await?;
            return Ok((
                Answered::Recorded { call, outcome },
                AuditDecision::Denied,
                "policy".to_owned(),
            ));
        }
        let edited = *issued_args != call.args;
        let ran_with = edited.then(|| call.args.clone());
        let decision = if edited {
            AuditDecision::Edited
        } else {
            AuditDecision::Approved
        };
        if self.runs_elsewhere(&call.name) {
            let name = call.name.clone();
            let answered = self.hand_off(id, call, ran_with).await?;
            self.extend(scope, &name, remember, approve_next).await;
            return Ok((answered, decision, approver(who, remember, approve_next)));
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
        Ok((
            Answered::Running { call, outcome },
            decision,
            approver(who, remember, approve_next),
        ))
    }
}

/// Who approved (`user`: the user who asked), and how far the approval reaches.
pub(super) fn approver(who: &str, remember: Option<Remember>, approve_next: Option<u32>) -> String {
    match (remember, approve_next) {
        (Some(Remember::Chat), _) => format!("{who}, remembered for this chat"),
        (Some(Remember::Everywhere), _) => format!("{who}, remembered for every chat"),
        (Some(Remember::Window { minutes: 1 }), _) => format!("{who}, remembered for 1 minute"),
        (Some(Remember::Window { minutes }), _) => {
            format!("{who}, remembered for {minutes} minutes")
        }
        (None, Some(n)) if n > 0 => format!("{who}, and the next {n} calls"),
        _ => who.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approver_says_how_far_it_reaches() {
        let cases = [
            (None, None, "user"),
            (None, Some(3), "user, and the next 3 calls"),
            (Some(Remember::Chat), None, "user, remembered for this chat"),
            (
                Some(Remember::Everywhere),
                None,
                "user, remembered for every chat",
            ),
            (
                Some(Remember::Window { minutes: 60 }),
                None,
                "user, remembered for 60 minutes",
            ),
            (
                Some(Remember::Window { minutes: 1 }),
                Some(2),
                "user, remembered for 1 minute",
            ),
        ];
        for (remember, next, by) in cases {
            assert_eq!(approver("user", remember, next), by);
        }
    }
}
