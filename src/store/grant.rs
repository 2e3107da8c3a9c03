//! Narrowed grants as the store keeps them: the record and its state.
//! Each backend keeps them beside its remembered approvals
//! (`sqlite/grants.rs`, `redis/grants.rs`, `memory.rs`). A grant's scope
//! never changes once made; only its count of uses and its revocation do,
//! each atomically in the store.

use serde::{Deserialize, Serialize};

use crate::protocol::grant::GrantScope;

/// An approval that decides the asker's later calls of one tool, only
/// inside the scope its approver narrowed it to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub id: String,
    /// The user whose calls it decides (who asked, and approved).
    pub principal: String,
    /// The chat it was given in; `None`: every chat of the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
    /// The qualified tool name.
    pub tool: String,
    /// The digest of the tool's definition it was granted for: it decides
    /// no call once the tool is listed differently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
    pub scope: GrantScope,
    /// The question whose approval made it.
    pub confirmation_id: String,
    pub created_at_ms: u64,
    /// The first moment it no longer decides; `None`: until revoked or used up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// How many calls it decided.
    #[serde(default)]
    pub used: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<u64>,
}

/// Where a grant stands: only an active one decides a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantState {
    Active,
    /// Its uses are spent.
    Redeemed,
    Revoked,
    /// Its window is over.
    Expired,
}

impl GrantState {
    /// The word the API uses for it.
    pub fn word(self) -> &'static str {
        match self {
            GrantState::Active => "active",
            GrantState::Redeemed => "redeemed",
            GrantState::Revoked => "revoked",
            GrantState::Expired => "expired",
        }
    }
}

impl Grant {
    /// Where it stands at `now_ms`; a revocation names it first, then
    /// spent uses, then the window.
    pub fn state(&self, now_ms: u64) -> GrantState {
        if self.revoked_at_ms.is_some() {
            GrantState::Revoked
        } else if self.scope.uses.is_some_and(|uses| self.used >= uses) {
            GrantState::Redeemed
        } else if self.expires_at_ms.is_some_and(|at| now_ms >= at) {
            GrantState::Expired
        } else {
            GrantState::Active
        }
    }

    /// As made, before any use or revocation: what a backend stores once.
    pub(super) fn made(&self) -> Grant {
        Grant {
            used: 0,
            revoked_at_ms: None,
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_stands_as_its_uses_window_and_revocation_say() {
        let grant = |uses: Option<u32>, used, until: Option<u64>, revoked: Option<u64>| Grant {
            id: "g".into(),
            principal: "alice".into(),
            chat_id: None,
            tool: "pay".into(),
            definition: None,
            scope: GrantScope {
                uses,
                ..GrantScope::default()
            },
            confirmation_id: "q".into(),
            created_at_ms: 0,
            expires_at_ms: until,
            used,
            revoked_at_ms: revoked,
        };
        let cases = [
            (grant(None, 0, None, None), GrantState::Active),
            (grant(None, 500, None, None), GrantState::Active),
            (grant(Some(2), 1, None, None), GrantState::Active),
            (grant(Some(2), 2, None, None), GrantState::Redeemed),
            (grant(None, 0, Some(1_000), None), GrantState::Active),
            (grant(None, 0, Some(999), None), GrantState::Expired),
            (grant(Some(1), 1, Some(999), None), GrantState::Redeemed),
            (grant(Some(1), 1, Some(999), Some(5)), GrantState::Revoked),
            (grant(None, 0, None, Some(5)), GrantState::Revoked),
        ];
        for (grant, state) in cases {
            assert_eq!(grant.state(999), state, "{grant:?}");
        }
    }
}
