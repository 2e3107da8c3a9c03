//! The sessions a face keeps for its callers (MCP's `Mcp-Session-Id`
//! today), each bound to the principal that opened it and holding a share
//! of the face's pool ([`super::Shares`]): another caller who learns a
//! session's id cannot use it, answer in it or close it, and nobody opens
//! more than their share. The face only says who asks and which session
//! its wire names; the ruling is here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::shares::{Pool, Share, ShareError, ShareLimits, Shares};

/// Why a session was not opened or not let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// Over the caller's share of sessions, or the total.
    #[error(transparent)]
    Share(#[from] ShareError),
    /// No session of this caller's has the id: unknown, closed, or
    /// another's (not told apart, so an id tells nobody whose it is).
    #[error("no such session")]
    NotFound,
}

/// One face's sessions, by id.
#[derive(Debug)]
pub struct Sessions {
    shares: Arc<Shares>,
    open: Mutex<HashMap<Box<str>, Share>>,
}

/// A place taken for a session being opened; given back if it is
/// dropped before [`Sessions::bind`] names the session.
#[derive(Debug)]
pub struct Opening(Share);

impl Sessions {
    pub fn new(pool: Pool, limits: ShareLimits) -> Arc<Self> {
        Arc::new(Self {
            shares: Shares::new(pool, limits),
            open: Mutex::default(),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Share>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a session `principal` opens, if their share (when
    /// `capped`: callers are told apart) and the total leave one.
    pub fn opening(&self, principal: &str, capped: bool) -> Result<Opening, SessionError> {
        Ok(Opening(self.shares.take_as(principal, capped)?))
    }

    /// The session the face made with `opening` is `id`, its opener's.
    pub fn bind(&self, opening: Opening, id: &str) {
        self.open().insert(id.into(), opening.0);
    }

    /// Lets `principal` use session `id` only if they opened it.
    pub fn check(&self, id: &str, principal: &str) -> Result<(), SessionError> {
        match self.open().get(id) {
            Some(share) if share.principal() == principal => Ok(()),
            _ => Err(SessionError::NotFound),
        }
    }

    /// Session `id` ended (closed, timed out): its place is free.
    pub fn close(&self, id: &str) {
        let share = self.open().remove(id);
        drop(share);
    }

    /// Sessions open now.
    pub fn count(&self) -> usize {
        self.shares.held_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(per_principal: usize, total: usize) -> Arc<Sessions> {
        Sessions::new(
            Pool::McpSessions,
            ShareLimits {
                per_principal,
                total,
            },
        )
    }

    #[test]
    fn a_session_is_its_openers_alone() {
        let sessions = sessions(4, 8);
        let opening = sessions.opening("alice", true).unwrap();
        sessions.bind(opening, "s1");
        assert_eq!(sessions.check("s1", "alice"), Ok(()));
        let cases = [("s1", "bob"), ("s2", "alice"), ("", "alice")];
        for (id, principal) in cases {
            assert_eq!(
                sessions.check(id, principal),
                Err(SessionError::NotFound),
                "{id} {principal}"
            );
        }
        sessions.close("s1");
        assert_eq!(sessions.check("s1", "alice"), Err(SessionError::NotFound));
        assert_eq!(sessions.count(), 0);
    }

    #[test]
    fn sessions_are_capped_and_an_unbound_opening_frees_its_place() {
        let sessions = sessions(1, 2);
        let first = sessions.opening("alice", true).unwrap();
        assert!(matches!(
            sessions.opening("alice", true),
            Err(SessionError::Share(ShareError::PerPrincipal { max: 1, .. }))
        ));
        drop(first);
        let again = sessions.opening("alice", true).unwrap();
        sessions.bind(again, "s1");
        assert!(sessions.opening("alice", true).is_err());
        sessions.bind(sessions.opening("bob", true).unwrap(), "s2");
        assert!(matches!(
            sessions.opening("carol", true),
            Err(SessionError::Share(ShareError::Total { max: 2, .. }))
        ));
        sessions.close("s1");
        assert!(sessions.opening("alice", true).is_ok());
    }

    /// Where nobody is told apart, everyone is one principal: only the
    /// total holds.
    #[test]
    fn callers_not_told_apart_are_held_to_the_total_alone() {
        let everyone = sessions(1, 3);
        let first = everyone.opening("anonymous", false).unwrap();
        let second = everyone.opening("anonymous", false).unwrap();
        everyone.bind(first, "a1");
        everyone.bind(second, "a2");
        let third = everyone.opening("anonymous", false);
        assert!(third.is_ok());
        assert!(matches!(
            everyone.opening("anonymous", false),
            Err(SessionError::Share(ShareError::Total { max: 3, .. }))
        ));
    }
}
