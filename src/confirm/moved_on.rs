//! A question the conversation moved on from: the user wrote a new message
//! while its card was open. It stays answerable (unless its tool says
//! `onNewMessage: cancel`), and once decided its outcome reaches the chat.

use super::records::as_ran;
use super::{Gate, GateError, Scope};
use crate::call::{QualifiedName, ToolCall};
use crate::policy::{OnNewMessage, ToolInfo};
use crate::store::{Outcome, Status};

impl Gate {
    /// How an earlier question of this chat stands now that the user wrote
    /// a new message: its outcome when it has one (decided elsewhere, or
    /// expired), closed as cancelled when its tool says so, or `None`
    /// while it stays open. Nothing runs here.
    pub async fn moved_on(
        &self,
        scope: &Scope,
        confirmation_id: &str,
    ) -> Result<Option<(ToolCall, Outcome)>, GateError> {
        let (gate, scope) = (self.clone(), scope.clone());
        let id = confirmation_id.to_owned();
        self.to_the_end(async move { gate.moved_on_here(&scope, &id).await })
            .await
    }

    async fn moved_on_here(
        &self,
        scope: &Scope,
        id: &str,
    ) -> Result<Option<(ToolCall, Outcome)>, GateError> {
        let Some(issued) = self.store.get(id).await? else {
            return Ok(None);
        };
        if issued.chat_id != scope.chat_id || issued.principal != scope.principal {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        match self.store.status(id).await? {
            Some(Status::Done(outcome)) => {
                return Ok(Some((as_ran(issued.call, &outcome), outcome)));
            }
            Some(Status::Pending) if now > issued.expires_at_ms => {
                let outcome = self.expire(scope, &issued).await?;
                return Ok(Some((as_ran(issued.call, &outcome), outcome)));
            }
            Some(Status::Pending) => {}
            Some(Status::Claimed { .. }) | None => return Ok(None),
        }
        let qualified = QualifiedName::of(&issued.call.name);
        let tool = ToolInfo {
            name: &issued.call.name,
            qualified: &qualified,
            tool_may_ask: true,
        };
        if self.policy.on_new_message(&tool) != OnNewMessage::Cancel {
            return Ok(None);
        }
        let Some(outcome) = self.cancel(scope, &issued, now).await? else {
            return Ok(None);
        };
        Ok(Some((as_ran(issued.call, &outcome), outcome)))
    }
}
