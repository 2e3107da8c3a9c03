//! What happens to a call the model just made: run it, hand it to the
//! client, refuse it, or issue a confirmation and ask.

use serde_json::Value;

use super::audit::Note;
use super::check;
use super::remembered::budget_key;
use super::{Gate, GateError, NewCall, Permit, Scope, millis};
use crate::call::QualifiedName;
use crate::call::{Fingerprint, ToolCall};
use crate::policy::{BUDGET, REMEMBERED, ToolInfo, Verdict};
use crate::protocol::ConfirmationProtocol;
use crate::store::{AuditDecision, Grant, Issued, LimitError, RecordKind};

impl Gate {
    /// The whole chain for a new call: the policy's deciders, with
    /// remembered approvals, narrowed grants and budgets from the store in
    /// their place. A grant that decides it is spent one use here.
    pub(super) async fn decide(
        &self,
        scope: &Scope,
        call: &ToolCall,
    ) -> Result<Option<Verdict>, GateError> {
        let (verdict, grant) = self.decide_pending(scope, call).await?;
        self.spend(verdict, grant).await
    }

    /// `verdict`, once the grant that gave it (if any) is spent one use:
    /// a grant that ended meanwhile (on any instance) decides nothing, and
    /// the call is asked.
    async fn spend(
        &self,
        verdict: Option<Verdict>,
        grant: Option<Grant>,
    ) -> Result<Option<Verdict>, GateError> {
        match grant {
            Some(grant) if !self.redeem(&grant).await? => Ok(Some(Verdict::Ask)),
            _ => Ok(verdict),
        }
    }

    /// The chain for a new call, a grant that decides it not spent yet:
    /// the verdict, and the grant that gave it.
    async fn decide_pending(
        &self,
        scope: &Scope,
        call: &ToolCall,
    ) -> Result<(Option<Verdict>, Option<Grant>), GateError> {
        let Some(facts) = self.facts(call) else {
            return Ok((None, None));
        };
        let qualified = &facts.qualified;
        let info = facts.info(scope, call);
        let above = self.policy.decide_in(&info, REMEMBERED + 1..=i32::MAX);
        if above != Verdict::Pass {
            return Ok((Some(above), None));
        }
        let between = self.policy.decide_in(&info, BUDGET + 1..=REMEMBERED);
        let below = || match self.policy.decide_in(&info, i32::MIN..=BUDGET) {
            Verdict::Pass => Verdict::Ask,
            verdict => verdict,
        };
        // Others approve these arguments: no grant of the asker's decides.
        if !self.grants_apply(call) {
            let verdict = match between {
                Verdict::Pass => below(),
                verdict => verdict,
            };
            return Ok((Some(verdict), None));
        }
        let now = self.clock.now_ms();
        // A grant holds only for the tool as it was offered when granted.
        let definition = self.definition(&call.name);
        let holds = |granted: Option<&str>| check::grant_holds(granted, definition.as_deref());
        if let Some(approval) = self
            .remembered
            .remembered(scope.calls(qualified), now)
            .await?
            .filter(|approval| holds(approval.definition.as_deref()))
        {
            let reach = match (&approval.chat_id, approval.expires_at_ms) {
                (Some(_), _) => "this chat".to_owned(),
                (None, None) => "every chat".to_owned(),
                (None, Some(until)) => format!("every chat until {until} (epoch ms)"),
            };
            return Ok((
                Some(Verdict::Allow {
                    by: format!("remembered approval {} for {reach}", approval.id),
                }),
                None,
            ));
        }
        // Then a grant narrowed to a scope these arguments fall inside.
        if let Some(grant) = self
            .covering(scope, call, qualified, definition.as_deref(), now)
            .await?
        {
            let by = format!("narrowed grant {}", grant.id);
            return Ok((Some(Verdict::Allow { by }), Some(grant)));
        }
        if between != Verdict::Pass {
            return Ok((Some(between), None));
        }
        let budget = budget_key(qualified, definition.as_deref());
        if self
            .remembered
            .take_budget(&scope.principal, &scope.chat_id, &budget)
            .await?
        {
            return Ok((
                Some(Verdict::Allow {
                    by: "approve the next N".into(),
                }),
                None,
            ));
        }
        Ok((Some(below()), None))
    }

    /// Decides about a call the model made: run it, or issue a confirmation
    /// to be asked in `protocol`.
    pub async fn check_new(
        &self,
        scope: &Scope,
        call: ToolCall,
        protocol: ConfirmationProtocol,
    ) -> Result<NewCall, GateError> {
        let tools = self.tools.current();
        let Some(tool) = tools.get(&call.name) else {
            return Ok(NewCall::Refused(format!("unknown tool `{}`", call.name)));
        };
        // Before any rule reads an argument: a rule written for a number
        // must never see a string.
        if let Err(why) = tools.check_input(&call.name, &call.args) {
            let why = format!(
                "the arguments do not fit the input schema of `{}`: {why}",
                call.name
            );
            let note = Note::new(AuditDecision::Refused, scope, &call).by("schema");
            self.note(note.because(why.clone())).await;
            return Ok(NewCall::Invalid(why));
        }
        let (verdict, grant) = self.decide_pending(scope, &call).await?;
        // Counted once, as the call is decided: a call the policy refuses
        // costs nothing, and one a person approves later runs whatever the
        // count is by then, so an approval is never spent on a limit.
        if !matches!(verdict, Some(Verdict::Deny { .. }))
            && let Some(limited) = self.over_limit(scope, &call).await
        {
            return Ok(limited);
        }
        // A grant's use is spent only on a call that runs from here.
        let verdict = self.spend(verdict, grant).await?;
        match verdict {
            Some(Verdict::Allow { by }) => {
                if tool.runs_on_client() {
                    let (gate, scope, handed) = (self.clone(), scope.clone(), call.clone());
                    let handoff = self
                        .to_the_end(async move {
                            let handoff = gate.record_hand_off(&scope, &handed, protocol).await?;
                            let note = Note::new(AuditDecision::Allowed, &scope, &handed).by(by);
                            gate.note(note.on(Some(&handoff))).await;
                            Ok(handoff)
                        })
                        .await?;
                    return Ok(NewCall::Client { call, handoff });
                }
                let note = Note::new(AuditDecision::Allowed, scope, &call).by(by);
                self.note(note).await;
                return Ok(NewCall::Run(Permit { call }));
            }
            Some(Verdict::Deny { reason }) => {
                let note = Note::new(AuditDecision::Denied, scope, &call).by("policy");
                self.note(note.because(reason.clone())).await;
                return Ok(NewCall::Refused(format!("denied by policy: {reason}")));
            }
            Some(Verdict::Ask | Verdict::Pass) | None => {}
        }
        if !self.may_ask(&call.name) {
            // Its input already streamed as a call that would not ask; fail closed.
            return Ok(NewCall::Refused(format!(
                "tool `{}` asks for confirmation its policy said it never needs",
                call.name
            )));
        }
        let qualified = QualifiedName::of(&call.name);
        let tool_info = ToolInfo {
            name: &call.name,
            qualified: &qualified,
            tool_may_ask: true,
        };
        // Made from what a person may see: the hint is shown wherever the call is.
        let hint = {
            let shown = self.shown_args(&call);
            self.policy
                .hint(&tool_info, &shown)
                .unwrap_or_else(|| tool.confirmation_hint(&shown))
        };
        let hint = self.for_asker(scope, &call, hint);
        // What the approver is shown, bound to the tool as offered now.
        let fingerprint = self.fingerprint(&call);
        let now = self.clock.now_ms();
        let issued = Issued {
            id: self.ids.next(match protocol {
                ConfirmationProtocol::Adk => "adk",
                ConfirmationProtocol::AiSdk => "approval",
            }),
            chat_id: scope.chat_id.clone(),
            principal: scope.principal.clone(),
            hint,
            protocol,
            call,
            issued_at_ms: now,
            expires_at_ms: now.saturating_add(millis(self.expiry)),
            kind: RecordKind::Question,
            fingerprint,
        };
        self.store.insert(issued.clone()).await?;
        let note = Note::new(AuditDecision::Asked, scope, &issued.call).by("policy");
        let note = note.fingerprint(issued.fingerprint.as_ref());
        self.note(note.on(Some(&issued.id))).await;
        self.announce(&issued).await;
        Ok(NewCall::Ask(issued))
    }
}

impl Gate {
    /// The fingerprint of `call` against its tool as offered now; `None`
    /// for a tool toolgate does not offer (an upstream agent's own).
    pub(super) fn fingerprint(&self, call: &ToolCall) -> Option<Fingerprint> {
        let tools = self.tools.current();
        let definition = tools.definition(&call.name)?;
        let qualified = QualifiedName::of(&call.name);
        Some(Fingerprint::of(&qualified, &call.args, definition))
    }

    /// The digest of the tool `name`'s definition as offered now.
    pub(super) fn definition(&self, name: &str) -> Option<String> {
        self.tools.current().definition(name).map(str::to_owned)
    }

    /// Counts a call against the limits (`limits`); what becomes of it
    /// when it is over one: refused with the limit's text, audited.
    async fn over_limit(&self, scope: &Scope, call: &ToolCall) -> Option<NewCall> {
        let text = match self.limiter.tool_call(&scope.principal, &call.name).await {
            Ok(()) => return None,
            Err(LimitError::Limited(limited)) => {
                self.metrics.rate_limited(limited.limit.label());
                limited.to_string()
            }
            // Fail closed: a limit that cannot be checked admits nothing.
            Err(LimitError::Store(e)) => {
                tracing::error!(tool = %call.name, "checking the rate limits failed: {e}");
                "the rate limits could not be checked; the call did not run".to_owned()
            }
        };
        let note = Note::new(AuditDecision::Denied, scope, call).by("limits");
        self.note(note.because(text.clone())).await;
        Some(NewCall::Refused(text))
    }
}

/// The input of an `adk_request_confirmation` call, as ADK shapes it.
pub fn confirmation_input(issued: &Issued) -> Value {
    crate::protocol::adk::question(&issued.call, &issued.hint)
}

#[cfg(test)]
mod tests;
