//! Calls an upstream agent runs itself (an ADK agent): the agent asks
//! about a call, and the gate decides exactly as for its own tools (the
//! same chain, the same checks of an answer), but an approved call is
//! handed back to the agent instead of run here.
//!
//! The question keeps the agent's own id, so the answer goes back under
//! it; every question is recorded, so the agent gets at most one answer
//! from toolgate for each.

use tracing::Instrument;

use super::audit::Note;
use super::{Gate, GateError, NewCall, Scope, millis};
use crate::call::{QualifiedName, ToolCall};
use crate::policy::{ToolInfo, Verdict};
use crate::protocol::ConfirmationProtocol;
use crate::store::{AuditDecision, Issued, Outcome, RecordKind};

/// The upstream agent's question about one of its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The agent's id for the question; its answer goes back under it.
    pub id: String,
    pub call: ToolCall,
    /// What the agent says about it, shown when the policy has no hint.
    pub hint: Option<String>,
}

impl Gate {
    /// The gate serves an upstream agent: every call is the agent's to run.
    pub fn with_upstream(mut self) -> Self {
        self.upstream = true;
        self
    }

    /// Runs `work` to its end on the gate's tracked tasks, whatever
    /// happens to the caller; shutdown waits for it.
    pub fn keep(&self, work: impl Future<Output = ()> + Send + 'static) {
        // In the caller's span: the decisions it records belong to the turn.
        self.tasks.spawn(work.in_current_span());
    }

    /// Whether an approved call of `name` is handed out rather than run
    /// here: a client-side tool's, or any call of an upstream agent.
    pub(super) fn runs_elsewhere(&self, name: &str) -> bool {
        self.upstream || self.runs_on_client(name)
    }

    /// Decides about a call the upstream agent asks about: allowed
    /// ([`NewCall::Client`]: hand it back approved), refused, or asked (a
    /// confirmation issued under the agent's id).
    pub async fn check_upstream(
        &self,
        scope: &Scope,
        question: Question,
        protocol: ConfirmationProtocol,
    ) -> Result<NewCall, GateError> {
        let (gate, scope) = (self.clone(), scope.clone());
        self.to_the_end(async move { gate.upstream_question(&scope, question, protocol).await })
            .await
    }

    async fn upstream_question(
        &self,
        scope: &Scope,
        question: Question,
        protocol: ConfirmationProtocol,
    ) -> Result<NewCall, GateError> {
        // The same question again (a replayed stream): shown again, never
        // decided a second time (nor a budget spent on it); its answer is
        // judged as any.
        if let Some(known) = self.store.get(&question.id).await? {
            if known.chat_id == scope.chat_id && known.principal == scope.principal {
                return Ok(NewCall::Ask(known));
            }
            let id = question.id;
            return Ok(NewCall::Refused(format!(
                "question `{id}` was asked elsewhere"
            )));
        }
        let verdict = self.decide(scope, &question.call).await?;
        let now = self.clock.now_ms();
        let qualified = QualifiedName::of(&question.call.name);
        let tool = ToolInfo {
            name: &question.call.name,
            qualified: &qualified,
            tool_may_ask: true,
        };
        let hint = self
            .policy
            .hint(&tool, &self.shown_args(&question.call))
            .or(question.hint)
            .unwrap_or_else(|| format!("Allow {}?", question.call.name));
        let hint = self.for_asker(scope, &question.call, hint);
        let fingerprint = self.fingerprint(&question.call);
        let issued = Issued {
            id: question.id,
            chat_id: scope.chat_id.clone(),
            principal: scope.principal.clone(),
            hint,
            protocol,
            call: question.call,
            issued_at_ms: now,
            expires_at_ms: now.saturating_add(millis(self.expiry)),
            kind: RecordKind::Question,
            fingerprint,
        };
        let id = issued.id.clone();
        let call = issued.call.clone();
        match verdict {
            Some(Verdict::Allow { by }) => {
                let handed = Outcome::HandedOff { ran_with: None };
                self.issue_closed(issued, handed).await?;
                let note = Note::new(AuditDecision::Allowed, scope, &call).by(by);
                self.note(note.on(Some(&id))).await;
                Ok(NewCall::Client { call, handoff: id })
            }
            Some(Verdict::Deny { reason }) => {
                let outcome = Outcome::Denied {
                    reason: Some(format!("denied by policy: {reason}")),
                };
                self.issue_closed(issued, outcome).await?;
                let note = Note::new(AuditDecision::Denied, scope, &call).by("policy");
                self.note(note.because(reason.clone()).on(Some(&id))).await;
                Ok(NewCall::Refused(format!("denied by policy: {reason}")))
            }
            Some(Verdict::Ask | Verdict::Pass) | None => {
                self.store.insert(issued.clone()).await?;
                let note = Note::new(AuditDecision::Asked, scope, &call).by("policy");
                let note = note.fingerprint(issued.fingerprint.as_ref());
                self.note(note.on(Some(&id))).await;
                self.announce(&issued).await;
                Ok(NewCall::Ask(issued))
            }
        }
    }
}
