//! The pipeline's ledger: the only calls of the store's `claim`, `finish`
//! and `audit` (besides `execute.rs`, which records the end of a tool run
//! for a claim won here). `tests/it/tidy_pipeline.rs` checks it.

use super::super::audit::{Note, trace};
use super::super::{Gate, GateError};
use crate::store::{AuditEvent, Claim, Outcome, StoreError};

impl Gate {
    /// Claims `id` for this instance (its heartbeat first, on a shared store).
    pub(super) async fn claim(&self, id: &str, now_ms: u64) -> Result<Claim, StoreError> {
        self.beat_before_claiming().await?;
        let claim = self.store.claim(id, now_ms, &self.instance).await?;
        if claim == Claim::Won {
            // Taken: whatever ends it, it leaves the inbox now.
            self.inbox_changed();
        }
        Ok(claim)
    }

    /// Records the outcome of a question this instance claimed.
    pub(super) async fn close(&self, id: &str, outcome: Outcome) -> Result<(), GateError> {
        Ok(self.store.finish(id, outcome).await?)
    }

    /// Appends a decision to the audit log. A failing log is reported, but
    /// does not undo or block the decision.
    pub(in crate::confirm) async fn note(&self, note: Note<'_>) {
        let event: AuditEvent = self.event(note);
        self.count(&event);
        trace(&event);
        if let Err(e) = self.store.audit(event).await {
            tracing::error!("writing the audit log failed: {e}");
        }
    }
}
