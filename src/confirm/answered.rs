//! What a user's answer in the chat does: checked once, then
//! claimed, and an approval started or handed out at once.

use serde_json::Value;

use super::audit::{edited_from, outcome_reason};
use super::records::as_ran;
use super::{
    Answer, Answered, Decision, Gate, GateError, OUTCOME_UNKNOWN, Remember, Scope, same_call,
    signing,
};
use crate::policy::{ToolInfo, Verdict};
use crate::protocol::ConfirmationProtocol;
use crate::provider::ToolCall;
use crate::store::{AuditDecision, Claim, Issued, Outcome, Status};
use crate::tools::qualified_name;

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
        let reject = |decision: AuditDecision, why: String| {
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
        if let Some(signer) = &self.signer {
            let verified = match (&answer.seal, &answer.original) {
                (Some(seal), Some(call)) => signer.verify(
                    seal,
                    &signing::Subject {
                        confirmation_id: &answer.confirmation_id,
                        chat_id: &scope.chat_id,
                        principal: &scope.principal,
                        call,
                        expires_at_ms: seal.expires_at_ms,
                    },
                ),
                _ => false,
            };
            if !verified {
                return reject(
                    AuditDecision::Refused,
                    "confirmation signature is missing or does not match".into(),
                );
            }
        }
        let Some(issued) = self.store.get(&answer.confirmation_id).await? else {
            return reject(
                AuditDecision::Refused,
                format!(
                    "confirmation `{}` was not issued by this server",
                    answer.confirmation_id
                ),
            );
        };
        if issued.chat_id != scope.chat_id {
            return reject(
                AuditDecision::Refused,
                "confirmation belongs to another chat".into(),
            );
        }
        if issued.principal != scope.principal {
            return reject(
                AuditDecision::Refused,
                "confirmation belongs to another user".into(),
            );
        }
        if answer.protocol != issued.protocol {
            return reject(
                AuditDecision::Refused,
                "confirmation answered in another form than it was asked".into(),
            );
        }
        if !answer
            .original
            .as_ref()
            .is_some_and(|o| same_call(o, &issued.call))
        {
            return reject(
                AuditDecision::Refused,
                match answer.protocol {
                    ConfirmationProtocol::Adk => {
                        "originalFunctionCall differs from the call this server issued"
                    }
                    ConfirmationProtocol::AiSdk => {
                        "the approved call differs from the call this server issued"
                    }
                }
                .into(),
            );
        }
        let now = self.clock.now_ms();
        if now > issued.expires_at_ms {
            // A decided call keeps its outcome; an undecided one can no longer be.
            return match self.store.status(&issued.id).await? {
                Some(Status::Done(outcome)) => recorded(issued.call, outcome),
                Some(Status::Claimed { .. }) => {
                    reject(AuditDecision::Refused, OUTCOME_UNKNOWN.into())
                }
                Some(Status::Pending) | None => {
                    reject(AuditDecision::TimedOut, "confirmation expired".into())
                }
            };
        }
        // An edit is checked before the claim: a refused edit leaves the question open.
        let edited = match &answer.decision {
            Decision::Approve { edited, .. } => edited.as_ref(),
            Decision::Deny { .. } => None,
        };
        let call = match self.effective_call(&issued, edited) {
            Ok(call) => call,
            Err(why) => return reject(AuditDecision::Refused, why),
        };
        match self.claim(&issued.id, now).await? {
            Claim::Done(outcome) => recorded(issued.call, outcome),
            Claim::InFlight { since_ms, orphaned } => {
                match self.claimed_outcome(&issued.id, since_ms, orphaned).await? {
                    Some(outcome) => recorded(issued.call, outcome),
                    None => reject(AuditDecision::Refused, OUTCOME_UNKNOWN.into()),
                }
            }
            Claim::Won => match &answer.decision {
                Decision::Approve { .. } => {
                    self.approve_won(scope, &issued.id, call, &issued.call.args, &answer.decision)
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
            },
        }
    }

    /// The call an approval runs: the issued one, or the user's edit of its
    /// arguments where `tools.<tool>.editable` allows it and the edit fits
    /// the tool's JSON schema.
    pub(super) fn effective_call(
        &self,
        issued: &Issued,
        edited: Option<&Value>,
    ) -> Result<ToolCall, String> {
        let Some(args) = edited.filter(|args| **args != issued.call.args) else {
            return Ok(issued.call.clone());
        };
        let name = &issued.call.name;
        if args.to_string().len() > crate::agent::MAX_ARGS_BYTES {
            return Err(format!(
                "edited arguments exceed {} bytes",
                crate::agent::MAX_ARGS_BYTES
            ));
        }
        let qualified = qualified_name(name);
        let tool = ToolInfo {
            name,
            qualified: &qualified,
            tool_may_ask: true,
        };
        if !self.policy.editable(&tool) {
            return Err(format!("the arguments of {name} may not be edited"));
        }
        let schema = self
            .tools
            .current()
            .get(name)
            .map(|t| t.parameters())
            .unwrap_or(Value::Null);
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| format!("{name} has no usable schema: {e}"))?;
        if let Some(error) = validator.iter_errors(args).next() {
            return Err(format!("edited arguments are not valid: {error}"));
        }
        Ok(ToolCall {
            id: issued.call.id.clone(),
            name: name.clone(),
            args: args.clone(),
        })
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
    ) -> Result<(Answered, AuditDecision, String), GateError> {
        let (payload, remember, approve_next) = match approval {
            Decision::Approve {
                payload,
                remember,
                approve_next,
                ..
            } => (payload.clone(), *remember, *approve_next),
            Decision::Deny { .. } => (None, None, None),
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
        if self.runs_on_client(&call.name) {
            let name = call.name.clone();
            let answered = self.hand_off(id, call, ran_with).await?;
            self.extend(scope, &name, remember, approve_next).await;
            return Ok((answered, decision, approver(remember, approve_next)));
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
            approver(remember, approve_next),
        ))
    }
}

/// Who approved, and how far the approval reaches.
pub(super) fn approver(remember: Option<Remember>, approve_next: Option<u32>) -> String {
    match (remember, approve_next) {
        (Some(Remember::Chat), _) => "user, remembered for this chat".into(),
        (Some(Remember::Everywhere), _) => "user, remembered for every chat".into(),
        (None, Some(n)) if n > 0 => format!("user, and the next {n} calls"),
        _ => "user".into(),
    }
}
