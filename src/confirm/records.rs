//! What the store still holds open: the questions of a chat, and the
//! ones that expired unanswered.

use super::handoff::HANDOFF;
use super::{Gate, GateError, Scope};
use crate::call::ToolCall;
use crate::store::{AuditDecision, Issued, Outcome};

/// The suffix of a taken client result's key.
pub(super) const RESULT: &str = "/result";

impl Gate {
    /// Logs every confirmation that expired unanswered as timed out (and
    /// forgets it).
    pub async fn sweep(&self) -> Result<usize, GateError> {
        let expired = self.store.take_expired(self.clock.now_ms()).await?;
        for issued in &expired {
            let scope = Scope {
                chat_id: issued.chat_id.clone(),
                principal: issued.principal.clone(),
            };
            let why = "nobody answered before the confirmation expired".to_owned();
            self.note(
                &scope,
                &issued.call,
                AuditDecision::TimedOut,
                "toolgate".into(),
                Some(why),
                Some(&issued.id),
            )
            .await;
        }
        Ok(expired.len())
    }

    /// The questions still open in a chat, for a reloaded page.
    pub async fn open(&self, scope: &Scope) -> Result<Vec<Issued>, GateError> {
        let mut open = self
            .store
            .open(&scope.principal, &scope.chat_id, self.clock.now_ms())
            .await?;
        // Hand-offs and taken client results are kept as records too, open
        // for the moment between their insert and claim: they ask nobody.
        open.retain(|issued| {
            let handoff = issued
                .id
                .strip_prefix(HANDOFF)
                .is_some_and(|n| n.starts_with('-'));
            !handoff && !issued.id.ends_with(RESULT)
        });
        Ok(open)
    }
}

/// The call as it ran: with the user's edit, if the ledger recorded one.
pub(super) fn as_ran(mut call: ToolCall, outcome: &Outcome) -> ToolCall {
    if let Outcome::Output {
        ran_with: Some(args),
        ..
    }
    | Outcome::Error {
        ran_with: Some(args),
        ..
    }
    | Outcome::HandedOff {
        ran_with: Some(args),
    } = outcome
    {
        call.args = args.clone();
    }
    call
}
