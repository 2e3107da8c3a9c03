//! What a remembered approval or a budget covers: listing, revoking and
//! granting them, and settling an open question one now covers.

use serde_json::Value;

use super::audit::Note;
use super::check;
use super::records::as_ran;
use super::{Answered, Gate, GateError, Remember, Scope};
use crate::call::QualifiedName;
use crate::call::ToolCall;
use crate::policy::{REMEMBERED, Verdict};
use crate::store::{AuditDecision, Remembered, Status};

impl Gate {
    /// Every approval `principal` asked to be remembered that still applies.
    pub async fn remembered(&self, principal: &str) -> Result<Vec<Remembered>, GateError> {
        let now = self.clock.now_ms();
        Ok(self.remembered.list_remembered(principal, now).await?)
    }

    /// Forgets one of `principal`'s remembered approvals; false if they have none by that id.
    /// `by` names who revoked it, for the audit log.
    pub async fn revoke(&self, principal: &str, id: &str, by: String) -> Result<bool, GateError> {
        let mine = self.remembered(principal).await?;
        let Some(approval) = mine.into_iter().find(|r| r.id == id) else {
            return Ok(false);
        };
        let revoked = self.remembered.revoke(principal, id).await?;
        if revoked {
            let chat_id = approval.chat_id.unwrap_or_default();
            self.note_revoked(principal, chat_id, approval.tool, id, by)
                .await;
        }
        Ok(revoked)
    }

    /// Audits the revocation of `principal`'s grant `id` (of `tool`, in
    /// `chat_id` or, empty, every chat) by `by`.
    pub(super) async fn note_revoked(
        &self,
        principal: &str,
        chat_id: String,
        tool: String,
        id: &str,
        by: String,
    ) {
        let scope = Scope {
            chat_id,
            principal: principal.to_owned(),
        };
        let tool = ToolCall {
            id: String::new(),
            name: tool,
            args: Value::Null,
        };
        let note = Note::new(AuditDecision::Revoked, &scope, &tool).by(by);
        self.note(note.on(Some(id))).await;
    }

    /// Records how far an approval reaches beyond its own call: a window
    /// grant is remembered for every chat until its window ends, and like
    /// any grant replaces the one for the same chat scope and tool. A store
    /// that fails here is reported but does not undo the approval: its call
    /// is already running, and its audit event is still to be written.
    pub(super) async fn extend(
        &self,
        scope: &Scope,
        tool: &str,
        remember: Option<Remember>,
        approve_next: Option<u32>,
    ) {
        let qualified = QualifiedName::of(tool);
        // Granted for the tool as offered now: a relisting ends it.
        let definition = self.definition(tool);
        if let Some(remember) = remember {
            let now = self.clock.now_ms();
            let approval = Remembered {
                id: self.ids.next("remembered"),
                principal: scope.principal.clone(),
                chat_id: (remember == Remember::Chat).then(|| scope.chat_id.clone()),
                tool: qualified.to_string(),
                created_at_ms: now,
                expires_at_ms: remember.expires_at_ms(now),
                definition: definition.clone(),
            };
            if let Err(e) = self.remembered.remember(approval).await {
                tracing::error!(tool = %qualified, "remembering an approval failed: {e}");
            }
        }
        let budget = budget_key(&qualified, definition.as_deref());
        if let Some(n) = approve_next.filter(|n| *n > 0)
            && let Err(e) = self
                .remembered
                .grant_budget(&scope.principal, &scope.chat_id, &budget, n)
                .await
        {
            tracing::error!(tool = %qualified, "granting the next {n} calls failed: {e}");
        }
    }

    /// Settles a confirmation nobody answered yet when a remembered approval
    /// now covers it: claims it and starts the call, as an approval would.
    pub async fn settle(
        &self,
        scope: &Scope,
        confirmation_id: &str,
    ) -> Result<Option<Answered>, GateError> {
        let (gate, scope) = (self.clone(), scope.clone());
        let id = confirmation_id.to_owned();
        self.to_the_end(async move { gate.settle_here(&scope, &id).await })
            .await
    }

    pub(super) async fn settle_here(
        &self,
        scope: &Scope,
        confirmation_id: &str,
    ) -> Result<Option<Answered>, GateError> {
        let Some(issued) = self.store.get(confirmation_id).await? else {
            return Ok(None);
        };
        let ours = issued.chat_id == scope.chat_id && issued.principal == scope.principal;
        if !ours {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        match self.store.status(confirmation_id).await? {
            // Decided meanwhile (through the API, or by another tab): report it.
            Some(Status::Done(outcome)) => {
                return Ok(Some(Answered::Recorded {
                    call: as_ran(issued.call, &outcome),
                    outcome,
                }));
            }
            // Nobody decided in time: it ends as expired.
            Some(Status::Pending) if now > issued.expires_at_ms => {
                let outcome = self.expire(scope, &issued).await?;
                return Ok(Some(Answered::Recorded {
                    call: as_ran(issued.call, &outcome),
                    outcome,
                }));
            }
            _ if now > issued.expires_at_ms => return Ok(None),
            _ => {}
        }
        // A question others decide is theirs, whatever the asker granted.
        if !self.grants_apply(&issued.call) {
            return Ok(None);
        }
        let qualified = QualifiedName::of(&issued.call.name);
        // The grant, and the question it settles, both for the tool as
        // offered now: a stale one waits for a person (who finds it stale).
        let definition = self.definition(&issued.call.name);
        let holds = self
            .remembered
            .remembered(scope.calls(&qualified), now)
            .await?
            .is_some_and(|r| check::grant_holds(r.definition.as_deref(), definition.as_deref()));
        if !holds || check::fresh(&issued, definition.as_deref()).is_err() {
            return Ok(None);
        }
        // Only what the chain would settle by a remembered approval: a rule
        // ranked above it that denies or asks still holds.
        let Some(facts) = self.facts(&issued.call) else {
            return Ok(None);
        };
        let above = self
            .policy
            .decide_in(&facts.info(scope, &issued.call), REMEMBERED + 1..=i32::MAX);
        if matches!(above, Verdict::Deny { .. } | Verdict::Ask) {
            return Ok(None);
        }
        self.approve_remembered(scope, issued, now).await
    }
}

/// The key a budget ("approve the next N") is kept under: the qualified
/// tool and the digest of its definition when granted, so that a tool
/// listed differently finds no budget (budgets are never listed).
pub(super) fn budget_key(qualified: &str, definition: Option<&str>) -> String {
    match definition {
        Some(definition) => format!("{qualified}\u{1f}{definition}"),
        None => qualified.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::atomic::Ordering;
    use std::task::{Context, Waker};
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::confirm::NewCall;
    use crate::ids::{Clock, Ids};
    use crate::protocol::ConfirmationProtocol;
    use crate::store::{Outcome, Status, Store};
    use crate::tools::Registry;

    /// Between winning the claim and starting the call nothing is awaited:
    /// a settle whose audit write never finishes, dropped right there, has
    /// still started its call, which runs to the end and is recorded.
    #[tokio::test]
    async fn a_settled_call_starts_before_anything_is_awaited() {
        let store = Store::memory();
        let gate = Gate::new(
            Registry::with_builtins(100.0),
            store.clone(),
            Clock::manual(1_000),
            Ids::sequential(),
            Duration::from_secs(60),
            Duration::from_secs(5),
        );
        let scope = Scope::alice("chat");
        let call = ToolCall {
            id: "call-1".into(),
            name: "process_payment".into(),
            args: json!({"amount": 5, "recipient": "bob"}),
        };
        let issued = match gate
            .check_new(&scope, call, ConfirmationProtocol::Adk)
            .await
        {
            Ok(NewCall::Ask(issued)) => issued,
            other => panic!("the payment should ask: {other:?}"),
        };
        let approval = Remembered {
            id: "remembered-1".into(),
            principal: "alice".into(),
            chat_id: Some("chat".into()),
            tool: QualifiedName::of("process_payment").into_string(),
            created_at_ms: 1_000,
            expires_at_ms: None,
            definition: None,
        };
        if let Err(e) = store.remember(approval).await {
            panic!("{e}");
        }
        let crate::store::Backend::Memory(memory) = &store.backend else {
            panic!("a memory store");
        };
        memory.stall_audit.store(true, Ordering::Release);

        // One poll runs the settle up to its first await that does not
        // finish at once; then the request goes away.
        {
            let settling = pin!(gate.settle_here(&scope, &issued.id));
            let polled = settling.poll(&mut Context::from_waker(Waker::noop()));
            assert!(polled.is_pending(), "the audit write stalls the settle");
        }

        let outcome = store.wait_outcome(&issued.id, Duration::from_secs(5)).await;
        assert!(
            matches!(outcome, Ok(Some(Outcome::Output { .. }))),
            "the call ran to its end: {outcome:?}"
        );
        assert!(matches!(
            store.status(&issued.id).await,
            Ok(Some(Status::Done(Outcome::Output { .. })))
        ));
    }
}
