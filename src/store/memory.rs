//! The in-memory backend: tests and throwaway runs. Nothing survives a restart.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use super::{Claim, Issued, Outcome, StoreError};

#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<HashMap<String, Record>>>,
    /// Bumped whenever an outcome is recorded, to wake waiters.
    recorded: watch::Sender<u64>,
}

#[derive(Debug)]
struct Record {
    issued: Issued,
    state: State,
}

#[derive(Debug)]
enum State {
    Pending,
    Claimed,
    Done(Outcome),
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self {
            inner: Arc::default(),
            recorded: watch::Sender::new(0),
        }
    }
}

impl MemoryStore {
    // The map stays consistent under every operation, so a poisoned lock is
    // still safe to use.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Record>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn insert(&self, issued: Issued) -> Result<(), StoreError> {
        match self.lock().entry(issued.id.clone()) {
            Entry::Occupied(e) => Err(StoreError::Duplicate(e.key().clone())),
            Entry::Vacant(e) => {
                e.insert(Record {
                    issued,
                    state: State::Pending,
                });
                Ok(())
            }
        }
    }

    pub(super) fn get(&self, id: &str) -> Option<Issued> {
        self.lock().get(id).map(|r| r.issued.clone())
    }

    pub(super) fn claim(&self, id: &str) -> Result<Claim, StoreError> {
        let mut map = self.lock();
        let record = map
            .get_mut(id)
            .ok_or_else(|| StoreError::NotClaimed(id.to_owned()))?;
        Ok(match &record.state {
            State::Pending => {
                record.state = State::Claimed;
                Claim::Won
            }
            State::Claimed => Claim::InFlight,
            State::Done(outcome) => Claim::Done(outcome.clone()),
        })
    }

    pub(super) fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        {
            let mut map = self.lock();
            match map.get_mut(id) {
                Some(record) if matches!(record.state, State::Claimed) => {
                    record.state = State::Done(outcome);
                }
                _ => return Err(StoreError::NotClaimed(id.to_owned())),
            }
        }
        self.recorded.send_modify(|n| *n = n.wrapping_add(1));
        Ok(())
    }

    fn outcome(&self, id: &str) -> Option<Outcome> {
        match &self.lock().get(id)?.state {
            State::Done(outcome) => Some(outcome.clone()),
            State::Pending | State::Claimed => None,
        }
    }

    pub(super) async fn wait_outcome(&self, id: &str, timeout: Duration) -> Option<Outcome> {
        let mut changes = self.recorded.subscribe();
        let wait = async {
            loop {
                if let Some(outcome) = self.outcome(id) {
                    return Some(outcome);
                }
                if changes.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn conformance() {
        super::super::conformance::claims_exactly_once(super::super::Store::memory()).await;
    }
}
