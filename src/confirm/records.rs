//! What the store still holds open: the questions of a chat, and the
//! ones that expired unanswered. (Those of every chat: `inbox.rs`.)

use super::{Gate, GateError, Scope};
use crate::call::ToolCall;
use crate::store::{Issued, Outcome};

/// How many expired questions one sweep ends; the next takes the rest.
const SWEEP_BATCH: usize = 256;

/// The suffix of a taken client result's key.
pub(super) const RESULT: &str = "/result";

impl Gate {
    /// Ends every question that expired unanswered as expired (the same
    /// claim as a held question's timeout, so one instance, or a decision
    /// that came first, wins). How many it ended.
    pub async fn sweep(&self) -> Result<usize, GateError> {
        let expired = self.store.expired(self.clock.now_ms(), SWEEP_BATCH).await?;
        let mut ended = 0;
        for issued in expired {
            let scope = Scope {
                chat_id: issued.chat_id.clone(),
                principal: issued.principal.clone(),
            };
            if self.expire(&scope, &issued).await? == Outcome::Expired {
                ended += 1;
            }
        }
        Ok(ended)
    }

    /// The questions still open in a chat, for a reloaded page.
    pub async fn open(&self, scope: &Scope) -> Result<Vec<Issued>, GateError> {
        let mut open = self
            .store
            .open(&scope.principal, &scope.chat_id, self.clock.now_ms())
            .await?;
        open.retain(asks);
        Ok(open)
    }
}

/// Whether a record is a question someone is asked. Hand-offs and taken
/// client results are kept as records too, open for the moment between
/// their insert and claim: they ask nobody.
pub(super) fn asks(issued: &Issued) -> bool {
    issued.kind.asks()
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
