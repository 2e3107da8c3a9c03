//! What admits a turn: how many may run, per principal and in total, and
//! for how long without a reader; who asks; and why one was refused.

use std::time::Duration;

/// Why a turn was not started, or not followed from another instance.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("too many turns in flight for this user (at most {0})")]
    PerPrincipal(usize),
    #[error("too many turns in flight (at most {0})")]
    Total(usize),
    /// A resume of this user's turn on another instance when this one
    /// follows the user's share of such turns already.
    #[error(
        "too many of this user's turns of other instances followed at once (at most {0}); close one and try again"
    )]
    Followed(usize),
}

/// How many turns may run, and for how long without a reader.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub per_principal: usize,
    pub total: usize,
    /// How long a reader may hold a turn back before the turn is stopped.
    pub stall: Duration,
    /// How long a turn waiting for a human is kept with nobody reading it;
    /// its question stays answerable by the next request.
    pub held: Duration,
}

/// Who starts or resumes a turn, and whether the per-user caps (turns in
/// flight, turns of other instances followed) apply to them.
#[derive(Clone, Copy)]
pub struct Owner<'a> {
    pub principal: &'a str,
    pub chat_id: &'a str,
    /// Off for `anonymous`, which is everyone on a keyless server.
    pub capped: bool,
}
