//! What every backend does, by job: [`Confirmations`] (the issued
//! questions and their ledger), [`Approvals`] (remembered approvals and
//! approve-next budgets), [`AuditLog`]; and [`StoreBackend`], the three
//! together with what differs between a store one process owns and one
//! instances share. [`super::Store`] dispatches each call to its backend
//! (a closed enum) and counts it; the conformance suite holds every
//! backend to the same guarantees.

use std::time::Duration;

use futures::stream::BoxStream;

use super::{AuditEvent, Claim, Cursor, Issued, Outcome, Remembered, Status, StoreError};

/// Issued confirmations and the execution ledger.
pub(crate) trait Confirmations {
    async fn insert(&self, issued: Issued) -> Result<(), StoreError>;

    async fn get(&self, id: &str) -> Result<Option<Issued>, StoreError>;

    async fn status(&self, id: &str) -> Result<Option<Status>, StoreError>;

    /// Unanswered and undecided, expired before `now_ms`; at most `limit`.
    async fn expired(&self, now_ms: u64, limit: usize) -> Result<Vec<Issued>, StoreError>;

    /// Forgets what expired before `before_ms` (unless running), and the
    /// remembered approvals whose window is over at `now_ms`.
    async fn purge_expired(&self, before_ms: u64, now_ms: u64) -> Result<usize, StoreError>;

    /// A chat's open questions, in any order.
    async fn open(
        &self,
        principal: &str,
        chat_id: &str,
        now_ms: u64,
    ) -> Result<Vec<Issued>, StoreError>;

    /// Every chat's open questions in order, after `after`, at most `limit`.
    async fn open_all(
        &self,
        now_ms: u64,
        after: Option<&Cursor>,
        limit: usize,
        asker: Option<&str>,
    ) -> Result<Vec<Issued>, StoreError>;

    /// Atomic: exactly one caller wins.
    async fn claim(&self, id: &str, now_ms: u64, instance: &str) -> Result<Claim, StoreError>;

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError>;

    async fn wait_outcome(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<Option<Outcome>, StoreError>;
}

/// Remembered approvals (window grants among them) and approve-next budgets.
pub(crate) trait Approvals {
    async fn remember(&self, approval: Remembered) -> Result<(), StoreError>;

    async fn remembered(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
        now_ms: u64,
    ) -> Result<Option<Remembered>, StoreError>;

    /// In any order.
    async fn list_remembered(
        &self,
        principal: &str,
        now_ms: u64,
    ) -> Result<Vec<Remembered>, StoreError>;

    async fn revoke(&self, principal: &str, id: &str) -> Result<bool, StoreError>;

    async fn grant_budget(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
        n: u32,
    ) -> Result<(), StoreError>;

    async fn take_budget(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
    ) -> Result<bool, StoreError>;
}

/// Who decided what.
pub(crate) trait AuditLog {
    async fn audit(&self, event: AuditEvent) -> Result<(), StoreError>;

    /// `principal`'s events from `since_ms` on, oldest first.
    async fn audit_log(
        &self,
        principal: &str,
        since_ms: u64,
    ) -> Result<Vec<AuditEvent>, StoreError>;

    async fn prune_audit(&self, before_ms: u64) -> Result<usize, StoreError>;
}

/// A backend: every job, and what a store one process owns has nothing
/// to do for (the defaults).
pub(crate) trait StoreBackend: Confirmations + Approvals + AuditLog {
    /// The backend, as the metrics' `store` label names it.
    const LABEL: &'static str;

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Other instances' questions asked or taken; `None`: there are none.
    async fn changes(&self) -> Result<Option<BoxStream<'static, ()>>, StoreError> {
        Ok(None)
    }

    async fn heartbeat(&self, _instance: &str, _ttl: Duration) -> Result<(), StoreError> {
        Ok(())
    }

    async fn checkpoint(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
