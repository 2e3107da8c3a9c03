//! Every caller's share of a pool, and the pool's total, in one place:
//! what is opened for a caller (an MCP session, an inbox stream, another
//! instance's turn followed for their resume) takes a [`Share`] of its
//! [`Pool`] here, so no face or store keeps a count or a cap of its own,
//! and a new face inherits the caps by asking the door for a share.
//!
//! A share is a ticket: it counts until it is dropped, whatever ends it
//! (a close, a timeout, a panic, a disconnect).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// What is shared out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// Inbox streams (`/api/confirmations/events`).
    InboxStreams,
    /// MCP sessions of older clients (`Mcp-Session-Id`).
    McpSessions,
    /// Other instances' turns this one follows for resumes (a Redis
    /// connection each).
    FollowedTurns,
}

impl Pool {
    /// What the pool holds, as a refusal names it.
    fn noun(self) -> &'static str {
        match self {
            Pool::InboxStreams => "inbox streams",
            Pool::McpSessions => "MCP sessions",
            Pool::FollowedTurns => "followed turns",
        }
    }
}

/// How much of a pool one principal, and everyone, may hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    pub per_principal: usize,
    pub total: usize,
}

/// Why a share was refused: the caller's is used up, or everyone's is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    #[error("too many {} for this user (at most {max}); close one and try again", .pool.noun())]
    PerPrincipal { pool: Pool, max: usize },
    #[error("too many {} (at most {max}); try again later", .pool.noun())]
    Total { pool: Pool, max: usize },
}

/// One pool's shares, per principal and in total.
#[derive(Debug)]
pub struct Shares {
    pool: Pool,
    limits: ShareLimits,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    by_principal: HashMap<Arc<str>, usize>,
    total: usize,
}

/// One share of a pool, held until dropped.
#[derive(Debug)]
pub struct Share {
    shares: Arc<Shares>,
    principal: Arc<str>,
}

impl Shares {
    pub fn new(pool: Pool, limits: ShareLimits) -> Arc<Self> {
        Arc::new(Self {
            pool,
            limits,
            held: Mutex::default(),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A share for `principal`, if neither their part nor the total is used up.
    pub fn take(self: &Arc<Self>, principal: &str) -> Result<Share, ShareError> {
        self.take_as(principal, true)
    }

    /// A share for `principal`, their part counted only when `capped` (a
    /// server that tells no callers apart has one principal for everyone:
    /// there only the total holds).
    pub fn take_as(self: &Arc<Self>, principal: &str, capped: bool) -> Result<Share, ShareError> {
        let mut held = self.held();
        if held.total >= self.limits.total {
            return Err(ShareError::Total {
                pool: self.pool,
                max: self.limits.total,
            });
        }
        let principal: Arc<str> = match held.by_principal.get_key_value(principal) {
            Some((_, &n)) if capped && n >= self.limits.per_principal => {
                return Err(ShareError::PerPrincipal {
                    pool: self.pool,
                    max: self.limits.per_principal,
                });
            }
            Some((key, _)) => key.clone(),
            None => principal.into(),
        };
        *held.by_principal.entry(principal.clone()).or_default() += 1;
        held.total += 1;
        Ok(Share {
            shares: self.clone(),
            principal,
        })
    }

    /// Shares held now, in total.
    pub fn held_now(&self) -> usize {
        self.held().total
    }

    /// Shares `principal` holds now.
    pub fn held_by(&self, principal: &str) -> usize {
        self.held()
            .by_principal
            .get(principal)
            .copied()
            .unwrap_or(0)
    }
}

impl Share {
    /// Whose share this is.
    pub fn principal(&self) -> &str {
        &self.principal
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.held();
        held.total = held.total.saturating_sub(1);
        if let Some(n) = held.by_principal.get_mut(&self.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.by_principal.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_capped_per_principal_and_in_total() {
        let pool = Pool::McpSessions;
        let shares = Shares::new(
            pool,
            ShareLimits {
                per_principal: 2,
                total: 3,
            },
        );
        let a1 = shares.take("alice");
        let a2 = shares.take("alice");
        assert!(a1.is_ok() && a2.is_ok());
        assert_eq!(
            shares.take("alice").err(),
            Some(ShareError::PerPrincipal { pool, max: 2 })
        );
        let b1 = shares.take("bob");
        assert!(b1.is_ok());
        assert_eq!(
            shares.take("carol").err(),
            Some(ShareError::Total { pool, max: 3 })
        );
        drop(a1);
        assert!(
            shares.take("alice").is_ok(),
            "a dropped share frees its place"
        );
        // The one just taken was dropped at once too.
        assert_eq!(shares.held_now(), 2);
        drop((a2, b1));
        assert_eq!(shares.held_now(), 0);
        assert!(shares.held().by_principal.is_empty());
    }

    #[test]
    fn a_refusal_names_the_pool_and_no_principal() {
        let refused = ShareError::PerPrincipal {
            pool: Pool::InboxStreams,
            max: 4,
        };
        assert_eq!(
            refused.to_string(),
            "too many inbox streams for this user (at most 4); close one and try again"
        );
    }
}
