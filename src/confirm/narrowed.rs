//! Narrowed grants: made by an approval that carries `grant` (admitted by
//! `check::grant` and `check::narrowed` like any grant), found for a new
//! call inside its scope, spent one use at a time in the store, listed
//! with their state and revoked (audited).

use serde::Serialize;

use super::check;
use super::{Gate, GateError, Scope};
use crate::call::{QualifiedName, ToolCall};
use crate::protocol::grant::GrantScope;
use crate::store::{Grant, GrantState};

/// A grant as the API lists it: the record and where it stands now.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantView {
    #[serde(flatten)]
    pub grant: Grant,
    pub state: GrantState,
}

/// What became of a request to revoke a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// Revoked now: it decides nothing after, on any instance.
    Now,
    /// The user has no grant by that id.
    NotFound,
    /// It had ended already (used up, over, or revoked).
    Ended(GrantState),
}

impl Gate {
    /// The grant an approval with `scope` makes for later calls of `tool`
    /// by the user who asked, tied to the tool as offered now. Made before
    /// the approved call starts (nothing awaited), kept after.
    pub(super) fn narrow(
        &self,
        asker: &Scope,
        confirmation_id: &str,
        tool: &str,
        scope: &GrantScope,
    ) -> Grant {
        let now = self.clock.now_ms();
        Grant {
            id: self.ids.next("grant"),
            principal: asker.principal.clone(),
            chat_id: (!scope.every_chat).then(|| asker.chat_id.clone()),
            tool: QualifiedName::of(tool).into_string(),
            definition: self.definition(tool),
            scope: scope.clone(),
            confirmation_id: confirmation_id.to_owned(),
            created_at_ms: now,
            expires_at_ms: scope
                .minutes
                .map(|m| now.saturating_add(u64::from(m) * 60_000)),
            used: 0,
            revoked_at_ms: None,
        }
    }

    /// Keeps a grant an approval made. A store that fails here is reported
    /// but does not undo the approval (its call is already running): the
    /// later calls are asked, as without the grant.
    pub(super) async fn keep_grant(&self, grant: Grant) {
        let tool = grant.tool.clone();
        if let Err(e) = self.remembered.add_grant(grant).await {
            tracing::error!(tool = %tool, "keeping a narrowed grant failed: {e}");
        }
    }

    /// The first of the user's active grants that covers `call` now (its
    /// tool as offered when granted, its chat, its pins and caps), not yet
    /// spent. `None`: no grant decides the call, which is asked as usual.
    pub(super) async fn covering(
        &self,
        scope: &Scope,
        call: &ToolCall,
        qualified: &str,
        definition: Option<&str>,
        now_ms: u64,
    ) -> Result<Option<Grant>, GateError> {
        let grants = self.remembered.grants(&scope.principal).await?;
        Ok(grants
            .into_iter()
            .find(|grant| covers(grant, scope, call, qualified, definition, now_ms)))
    }

    /// Spends one use of `grant`, atomically in the store: false when it
    /// ended meanwhile (revoked, or its last use spent, on any instance).
    pub(super) async fn redeem(&self, grant: &Grant) -> Result<bool, GateError> {
        let now = self.clock.now_ms();
        Ok(self.remembered.redeem_grant(grant, now).await?)
    }

    /// `principal`'s grants, active or not, oldest first.
    pub async fn grants(&self, principal: &str) -> Result<Vec<GrantView>, GateError> {
        let now = self.clock.now_ms();
        let grants = self.remembered.grants(principal).await?;
        Ok(grants
            .into_iter()
            .map(|grant| GrantView {
                state: grant.state(now),
                grant,
            })
            .collect())
    }

    /// Revokes `principal`'s grant `id`, audited as revoked by `by`.
    pub async fn revoke_grant(
        &self,
        principal: &str,
        id: &str,
        by: String,
    ) -> Result<Revoked, GateError> {
        let now = self.clock.now_ms();
        let grants = self.remembered.grants(principal).await?;
        let Some(grant) = grants.into_iter().find(|g| g.id == id) else {
            return Ok(Revoked::NotFound);
        };
        match grant.state(now) {
            GrantState::Active => {}
            ended => return Ok(Revoked::Ended(ended)),
        }
        if !self.remembered.revoke_grant(principal, id, now).await? {
            return Ok(Revoked::Ended(GrantState::Revoked));
        }
        let chat_id = grant.chat_id.unwrap_or_default();
        self.note_revoked(principal, chat_id, grant.tool, id, by)
            .await;
        Ok(Revoked::Now)
    }
}

/// Whether `grant` decides `call` by the user of `scope` at `now_ms`.
fn covers(
    grant: &Grant,
    scope: &Scope,
    call: &ToolCall,
    qualified: &str,
    definition: Option<&str>,
    now_ms: u64,
) -> bool {
    grant.tool == qualified
        && grant
            .chat_id
            .as_ref()
            .is_none_or(|chat| *chat == scope.chat_id)
        && grant.state(now_ms) == GrantState::Active
        && check::grant_holds(grant.definition.as_deref(), definition)
        && grant.scope.covers(&call.args).is_ok()
}
