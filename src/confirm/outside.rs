//! What the gate adds for a call from an agent outside toolgate (the MCP
//! face): the client named in the audit log, a question as it stands, the
//! chat's question whose outcome the client was not given yet, and who may
//! answer it in the client. The run API's `Calls` (`run/calls.rs`) puts
//! them in order; every decision still goes through the one pipeline.

use std::sync::Arc;
use std::time::Duration;

use super::audit::{CLIENT, Note};
use super::{Gate, GateError, Scope, millis};
use crate::call::ToolCall;
use crate::identity::Identity;
use crate::store::{AuditDecision, AuditPage, Issued, Outcome, Status};

/// Who the audit log says took a question's outcome to the outside client.
const DELIVERED_BY: &str = "the MCP client";

/// A question of an outside call, as it stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    /// Nobody decided yet (or its call runs now).
    Open(Issued),
    /// Decided: the question and its recorded outcome.
    Decided(Issued, Outcome),
}

impl Gate {
    /// Runs `work` with every audit event it writes naming `client` (the
    /// outside client's `name version`), the gate's own tasks included.
    pub async fn for_client<F: Future>(client: Option<Arc<str>>, work: F) -> F::Output {
        match client {
            Some(client) => CLIENT.scope(client, work).await,
            None => work.await,
        }
    }

    /// Question `id` as it stands; `None` when there is no such question.
    pub async fn question(&self, id: &str) -> Result<Option<Question>, GateError> {
        let issued = self.store.get(id).await?.filter(|i| i.kind.asks());
        let Some(issued) = issued else {
            return Ok(None);
        };
        Ok(Some(match self.store.status(id).await? {
            Some(Status::Done(outcome)) => Question::Decided(issued, outcome),
            Some(Status::Pending | Status::Claimed { .. }) | None => Question::Open(issued),
        }))
    }

    /// The newest question asked in `scope`'s chat within the questions'
    /// window whose outcome its client was not given yet: still open and
    /// unexpired, or decided since. Read from the audit log, so it holds
    /// across restarts and instances.
    pub async fn undelivered(&self, scope: &Scope) -> Result<Option<Question>, GateError> {
        let now = self.clock.now_ms();
        let since = now.saturating_sub(millis(self.expiry));
        let events = self
            .store
            .audit_log(AuditPage {
                principal: &scope.principal,
                chat_id: Some(&scope.chat_id),
                since_ms: since,
                limit: usize::MAX,
            })
            .await?;
        let mut newest: Option<String> = None;
        for event in events {
            match (event.decision, event.confirmation_id) {
                (AuditDecision::Asked, Some(id)) => newest = Some(id),
                (AuditDecision::Delivered, Some(id)) if newest.as_ref() == Some(&id) => {
                    newest = None;
                }
                _ => {}
            }
        }
        let Some(id) = newest else {
            return Ok(None);
        };
        Ok(match self.question(&id).await? {
            Some(Question::Open(issued)) if issued.expires_at_ms <= now => None,
            question => question,
        })
    }

    /// Records that the outside client was given `issued`'s outcome: a
    /// later call of the same tool with the same arguments asks anew.
    pub async fn delivered(&self, scope: &Scope, issued: &Issued) {
        let note = Note::new(AuditDecision::Delivered, scope, &issued.call).by(DELIVERED_BY);
        self.note(note.on(Some(&issued.id))).await;
    }

    /// Question `id`'s outcome, waited for at most `wait`.
    pub async fn outcome_within(
        &self,
        id: &str,
        wait: Duration,
    ) -> Result<Option<Outcome>, GateError> {
        Ok(self.store.wait_outcome(id, wait).await?)
    }

    /// Whether `who`, who asked `call`, may decide it themselves (no
    /// approvers, or they are among them, known as `approverIdentity`
    /// asks): only then is the client asked.
    pub fn asker_decides(&self, who: &Identity, call: &ToolCall) -> bool {
        let roles = self.roles_with(&who.principal, &who.roles);
        let decider = super::check::Decider {
            principal: &who.principal,
            roles: &roles,
            source: who.source,
        };
        super::check::decider(self.approvers(call), &who.principal, decider, true).is_ok()
    }

    /// Whether an approval of `call` may be remembered (its approvers are
    /// the user who asked alone).
    pub fn may_remember(&self, call: &ToolCall) -> bool {
        self.grants_apply(call)
    }

    /// Whether the policy never lets `name` run, whatever its arguments:
    /// an outside client is not offered it.
    pub fn never_runs(&self, name: &str) -> bool {
        let tools = self.tools.current();
        let Some(tool) = tools.get(name) else {
            return true;
        };
        let qualified = crate::call::QualifiedName::of(name);
        tool.runs_on_client()
            || self.policy.never_runs(&crate::policy::ToolInfo {
                name,
                qualified: &qualified,
                tool_may_ask: tool.may_need_confirmation(),
            })
    }
}
