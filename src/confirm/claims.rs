//! Who holds a confirmation: this instance's heartbeat on a shared store
//! (written before its first claim), and judging a claim someone else holds.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{CLAIM_GRACE_MS, Gate, GateError, millis};
use crate::store::{HEARTBEAT_EVERY, Outcome, StoreError};

impl Gate {
    /// Renews this instance's heartbeat on the gate's tracked task, for a
    /// store several instances share, until [`Gate::shutdown`].
    pub(super) fn keep_alive(&self) {
        let (store, instance) = (self.store.clone(), self.instance.clone());
        let stopping = self.stopping.clone();
        self.tasks.spawn(async move {
            let mut every = tokio::time::interval(HEARTBEAT_EVERY);
            loop {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    _ = every.tick() => {}
                }
                if let Err(e) = store.heartbeat(&instance).await {
                    tracing::warn!("renewing this instance's heartbeat failed: {e}");
                }
            }
        });
    }

    /// Keeps this instance's heartbeat from now on (a shared store): the
    /// turns it runs are its as long as it beats, and another instance
    /// takes a held one over once it stops.
    pub fn keep_beating(&self) {
        if self.store.is_shared() && !self.beating.swap(true, Ordering::AcqRel) {
            self.keep_alive();
        }
    }

    /// With a shared store, writes this instance's heartbeat before its
    /// first claim (`pipeline/ledger.rs`), and keeps it alive from then on:
    /// no other instance may take a claim of a live one for orphaned.
    pub(super) async fn beat_before_claiming(&self) -> Result<(), StoreError> {
        if self.store.is_shared() && !self.beating.load(Ordering::Acquire) {
            self.store.heartbeat(&self.instance).await?;
            if !self.beating.swap(true, Ordering::AcqRel) {
                self.keep_alive();
            }
        }
        Ok(())
    }

    /// The outcome of a claim someone else holds, or `None` when it will
    /// never come. The one place a claim in flight is judged: an orphaned
    /// one (its instance is gone) is answered at once; a live one (running
    /// here, or on a live instance) is waited for until the longest its call
    /// can take has passed.
    pub(super) async fn claimed_outcome(
        &self,
        id: &str,
        since_ms: u64,
        orphaned: bool,
    ) -> Result<Option<Outcome>, GateError> {
        if orphaned {
            return Ok(None);
        }
        let deadline = since_ms
            .saturating_add(millis(self.tool_timeout))
            .saturating_add(CLAIM_GRACE_MS);
        let left = Duration::from_millis(deadline.saturating_sub(self.clock.now_ms()));
        Ok(self.store.wait_outcome(id, left).await?)
    }
}
