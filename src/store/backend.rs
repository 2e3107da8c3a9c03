//! What every backend does, by job: [`Confirmations`] (the issued
//! questions and their ledger), [`Approvals`] (remembered approvals and
//! approve-next budgets), [`AuditLog`]; and [`StoreBackend`], the three
//! together with what differs between a store one process owns and one
//! instances share. [`super::Store`] dispatches each call to its backend
//! (a closed enum) and counts it; the conformance suite holds every
//! backend to the same guarantees.

use std::time::Duration;

use futures::stream::BoxStream;
use tokio::sync::watch;

use super::chain::{Chained, Sealer};
use super::{AuditEvent, Claim, Cursor, Grant, Issued, Outcome, Remembered, Result, Status};

/// Bumped whenever this process records an outcome, to wake its waiters.
#[derive(Debug, Clone)]
pub(crate) struct Recorded(watch::Sender<u64>);

impl Default for Recorded {
    fn default() -> Self {
        Self(watch::Sender::new(0))
    }
}

impl Recorded {
    /// An outcome was recorded: every waiter looks again.
    pub(crate) fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The outcome `look` finds, for at most `timeout`: it looks again
    /// each time one is recorded here and, with `poll`, at least that often
    /// (for outcomes another process records).
    pub(crate) async fn wait<F, Fut>(
        &self,
        timeout: Duration,
        poll: Option<Duration>,
        mut look: F,
    ) -> Result<Option<Outcome>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<Outcome>>>,
    {
        let mut changes = self.0.subscribe();
        let wait = async {
            loop {
                if let Some(outcome) = look().await? {
                    return Ok(Some(outcome));
                }
                match poll {
                    Some(poll) => {
                        let _ = tokio::time::timeout(poll, changes.changed()).await;
                    }
                    None => {
                        if changes.changed().await.is_err() {
                            return Ok(None);
                        }
                    }
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .unwrap_or(Ok(None))
    }
}

/// A page of every chat's open questions: unexpired at `now_ms`, just
/// after `after`, at most `limit`, only `asker`'s if given.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    pub now_ms: u64,
    pub after: Option<&'a Cursor>,
    pub limit: usize,
    pub asker: Option<&'a str>,
}

impl<'a> Page<'a> {
    /// Its fields, to bind at once.
    pub(crate) fn parts(self) -> (u64, Option<&'a Cursor>, usize, Option<&'a str>) {
        (self.now_ms, self.after, self.limit, self.asker)
    }
}

/// A principal's calls of a tool in a chat: what a remembered approval covers.
#[derive(Debug, Clone, Copy)]
pub struct Calls<'a> {
    pub principal: &'a str,
    pub chat_id: &'a str,
    /// The qualified tool name.
    pub tool: &'a str,
}

impl<'a> Calls<'a> {
    /// Its fields, to bind at once: principal, chat, tool.
    pub(crate) fn parts(self) -> (&'a str, &'a str, &'a str) {
        (self.principal, self.chat_id, self.tool)
    }
}

/// Issued confirmations and the execution ledger.
pub(crate) trait Confirmations {
    async fn insert(&self, issued: Issued) -> Result<()>;

    async fn get(&self, id: &str) -> Result<Option<Issued>>;

    async fn status(&self, id: &str) -> Result<Option<Status>>;

    /// Unanswered and undecided, expired before `now_ms`; at most `limit`.
    async fn expired(&self, now_ms: u64, limit: usize) -> Result<Vec<Issued>>;

    /// Forgets what expired before `before_ms` (unless running), and the
    /// remembered approvals whose window is over at `now_ms`.
    async fn purge_expired(&self, before_ms: u64, now_ms: u64) -> Result<usize>;

    /// A chat's open questions, in any order.
    async fn open(&self, principal: &str, chat_id: &str, now_ms: u64) -> Result<Vec<Issued>>;

    /// Every chat's open questions in order, after `after`, at most `limit`.
    async fn open_all(&self, page: Page<'_>) -> Result<Vec<Issued>>;

    /// Atomic: exactly one caller wins.
    async fn claim(&self, id: &str, now_ms: u64, instance: &str) -> Result<Claim>;

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<()>;

    async fn wait_outcome(&self, id: &str, timeout: Duration) -> Result<Option<Outcome>>;
}

/// Remembered approvals (window grants among them) and approve-next budgets.
pub(crate) trait Approvals {
    async fn remember(&self, approval: Remembered) -> Result<()>;

    async fn remembered(&self, calls: Calls<'_>, now_ms: u64) -> Result<Option<Remembered>>;

    /// In any order.
    async fn list_remembered(&self, principal: &str, now_ms: u64) -> Result<Vec<Remembered>>;

    async fn revoke(&self, principal: &str, id: &str) -> Result<bool>;

    async fn grant_budget(&self, principal: &str, chat_id: &str, tool: &str, n: u32) -> Result<()>;

    async fn take_budget(&self, principal: &str, chat_id: &str, tool: &str) -> Result<bool>;
}

/// Narrowed grants: each made once; a use and a revocation each atomic
/// with every other, on every instance.
pub(crate) trait Grants {
    async fn add_grant(&self, grant: Grant) -> Result<()>;

    /// Every grant of `principal`, as it stands, in any order.
    async fn grants(&self, principal: &str) -> Result<Vec<Grant>>;

    /// Spends one use of `grant` if it is active at `now_ms`; false when
    /// it is not (revoked, used up, over, or gone).
    async fn redeem_grant(&self, grant: &Grant, now_ms: u64) -> Result<bool>;

    /// Revokes `principal`'s grant `id` at `now_ms`; false when there is
    /// none, or it was revoked already.
    async fn revoke_grant(&self, principal: &str, id: &str, now_ms: u64) -> Result<bool>;
}

/// Who decided what, each event a link of the store's one chain.
pub(crate) trait AuditLog {
    /// Appends `event` (`text`, its JSON, is what the chain hashes) after
    /// the chain's head, sealed by `sealer`: atomic with every other
    /// append, so the chain never forks.
    async fn audit(&self, event: AuditEvent, text: String, sealer: &Sealer) -> Result<()>;

    /// The chain from the first event at or after `since_ms`, in order.
    async fn audit_chain(&self, since_ms: u64) -> Result<Vec<Chained>>;

    /// `principal`'s events from `since_ms` on, oldest first.
    async fn audit_log(&self, principal: &str, since_ms: u64) -> Result<Vec<AuditEvent>>;

    async fn prune_audit(&self, before_ms: u64) -> Result<usize>;
}

/// A backend: every job, and what a store one process owns has nothing
/// to do for (the defaults).
pub(crate) trait StoreBackend: Confirmations + Approvals + AuditLog + Grants {
    /// The backend, as the metrics' `store` label names it.
    const LABEL: &'static str;

    async fn ping(&self) -> Result<()> {
        Ok(())
    }

    /// Other instances' questions asked or taken; `None`: there are none.
    async fn changes(&self) -> Result<Option<BoxStream<'static, ()>>> {
        Ok(None)
    }

    async fn heartbeat(&self, _instance: &str, _ttl: Duration) -> Result<()> {
        Ok(())
    }

    async fn checkpoint(&self) -> Result<()> {
        Ok(())
    }
}
