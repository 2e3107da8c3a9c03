//! The store's background chores while serving: purging what expired and
//! checkpointing SQLite's write-ahead log.

use std::time::Duration;

use crate::confirm::Gate;
use crate::ids::Clock;
use crate::store::{Limiter, Store};

/// Until aborted: the [`checkpoint`] every second, and once a minute
/// forgets expired confirmations and remembered approvals whose window is
/// over, audit events past `retention`, and the limits of principals idle
/// for a minute.
pub(super) async fn run(
    gate: Gate,
    store: Store,
    clock: Clock,
    retention: Duration,
    limiter: Limiter,
) {
    let checkpoints = checkpoint(store.clone());
    let purge = async move {
        let mut every = tokio::time::interval(Duration::from_secs(60));
        loop {
            every.tick().await;
            limiter.prune();
            if let Err(e) = gate.sweep().await {
                tracing::warn!("logging timed-out confirmations failed: {e}");
            }
            match store.purge_expired(clock.now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!("forgot {n} expired confirmations and approval windows"),
                Err(e) => tracing::warn!("purging expired confirmations failed: {e}"),
            }
            let cutoff = clock
                .now_ms()
                .saturating_sub(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX));
            if let Err(e) = store.prune_audit(cutoff).await {
                tracing::warn!("pruning the audit log failed: {e}");
            }
        }
    };
    futures::join!(checkpoints, purge);
}

/// Moves the store's write-ahead log into its file once a second, so that
/// no request waits for it (SQLite otherwise does it in the write that
/// fills the log).
async fn checkpoint(store: Store) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        if let Err(e) = store.checkpoint().await {
            tracing::warn!("checkpointing the store failed: {e}");
        }
    }
}
