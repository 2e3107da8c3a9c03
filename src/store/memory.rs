//! The in-memory backend: tests and throwaway runs. Nothing survives a restart.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::backend::{
    Approvals, AuditLog, Calls, Confirmations, Grants, Page, Recorded, StoreBackend,
};
use super::chain::{Chained, Head, Sealer};
use super::{
    AuditEvent, Claim, Grant, GrantState, Issued, Outcome, Remembered, Result, Status, StoreError,
};

/// Most audit events kept in memory per principal; the oldest go first.
pub const AUDIT_CAPACITY: usize = 10_000;

/// Most confirmations kept at once (about 2 KB each).
pub const DEFAULT_CAPACITY: usize = 100_000;

/// Keyed by (principal, chat, qualified tool).
type ByCall<T> = Arc<Mutex<HashMap<(String, String, String), T>>>;

#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<HashMap<String, Record>>>,
    /// Remembered approvals, by (principal, chat or "", tool).
    remembered: ByCall<Remembered>,
    /// Budgets, by (principal, chat, tool).
    budgets: ByCall<u32>,
    /// Narrowed grants, by principal, oldest first.
    grants: Arc<Mutex<HashMap<String, Vec<Grant>>>>,
    /// The audit log per principal, oldest first; at most [`AUDIT_CAPACITY`]
    /// events each, so one principal cannot push out another's (in the
    /// chain, an event pushed out is a gap), and the chain's head.
    audit: Arc<Mutex<Audit>>,
    capacity: usize,
    recorded: Recorded,
    /// Test-only: audit writes never finish, to show what a stalled store
    /// must not hold up.
    #[cfg(test)]
    pub(crate) stall_audit: Arc<std::sync::atomic::AtomicBool>,
}

#[derive(Debug, Default)]
struct Audit {
    logs: HashMap<String, std::collections::VecDeque<(AuditEvent, Chained)>>,
    head: Option<Head>,
}

#[derive(Debug)]
struct Record {
    issued: Issued,
    state: State,
}

impl Record {
    fn expired(&self, now_ms: u64) -> bool {
        now_ms > self.issued.expires_at_ms && !matches!(self.state, State::Claimed { .. })
    }
}

#[derive(Debug)]
enum State {
    Pending,
    /// Claimed by the instance `by`.
    Claimed {
        since_ms: u64,
        by: String,
    },
    Done(Outcome),
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

impl MemoryStore {
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            inner: Arc::default(),
            remembered: Arc::default(),
            budgets: Arc::default(),
            grants: Arc::default(),
            audit: Arc::default(),
            capacity,
            recorded: Recorded::default(),
            #[cfg(test)]
            stall_audit: Arc::default(),
        }
    }

    // The map stays consistent under every operation, so a poisoned lock is
    // still safe to use.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Record>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn outcome(&self, id: &str) -> Option<Outcome> {
        match &self.lock().get(id)?.state {
            State::Done(outcome) => Some(outcome.clone()),
            State::Pending | State::Claimed { .. } => None,
        }
    }
}

impl Confirmations for MemoryStore {
    async fn insert(&self, issued: Issued) -> Result<()> {
        let mut map = self.lock();
        if map.len() >= self.capacity {
            let now = issued.issued_at_ms;
            map.retain(|_, r| !r.expired(now));
            if map.len() >= self.capacity {
                return Err(StoreError::Full(self.capacity));
            }
        }
        match map.entry(issued.id.clone()) {
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

    async fn get(&self, id: &str) -> Result<Option<Issued>> {
        Ok(self.lock().get(id).map(|r| r.issued.clone()))
    }

    async fn status(&self, id: &str) -> Result<Option<Status>> {
        let map = self.lock();
        let Some(record) = map.get(id) else {
            return Ok(None);
        };
        Ok(Some(match &record.state {
            State::Pending => Status::Pending,
            State::Claimed { since_ms, .. } => Status::Claimed {
                since_ms: *since_ms,
            },
            State::Done(outcome) => Status::Done(outcome.clone()),
        }))
    }

    async fn expired(&self, now_ms: u64, limit: usize) -> Result<Vec<Issued>> {
        Ok(self
            .lock()
            .values()
            .filter(|r| matches!(r.state, State::Pending) && now_ms > r.issued.expires_at_ms)
            .take(limit)
            .map(|r| r.issued.clone())
            .collect())
    }

    /// Confirmations that expired before `expired_before`, windows over at `now_ms`.
    async fn purge_expired(&self, expired_before: u64, now_ms: u64) -> Result<usize> {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, r| !r.expired(expired_before));
        let purged = before - map.len();
        drop(map);
        let mut remembered = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let before = remembered.len();
        remembered.retain(|_, r| r.is_live(now_ms));
        Ok(purged + before - remembered.len())
    }

    async fn open(&self, principal: &str, chat_id: &str, now_ms: u64) -> Result<Vec<Issued>> {
        Ok(self
            .lock()
            .values()
            .filter(|r| matches!(r.state, State::Pending))
            .map(|r| &r.issued)
            .filter(|i| {
                i.principal == principal && i.chat_id == chat_id && now_ms <= i.expires_at_ms
            })
            .cloned()
            .collect())
    }

    async fn open_all(&self, page: Page<'_>) -> Result<Vec<Issued>> {
        let (now_ms, after, limit, asker) = page.parts();
        let mut open: Vec<Issued> = self
            .lock()
            .values()
            .filter(|r| matches!(r.state, State::Pending) && now_ms <= r.issued.expires_at_ms)
            .filter(|r| asker.is_none_or(|asker| r.issued.principal == asker))
            .filter(|r| {
                after.is_none_or(|after| {
                    (r.issued.issued_at_ms, r.issued.id.as_str())
                        > (after.issued_at_ms, after.id.as_str())
                })
            })
            .map(|r| r.issued.clone())
            .collect();
        open.sort_by(|a, b| (a.issued_at_ms, &a.id).cmp(&(b.issued_at_ms, &b.id)));
        open.truncate(limit);
        Ok(open)
    }

    /// A claim of another instance is orphaned: a memory store lives and
    /// dies with the one process that holds it.
    async fn claim(&self, id: &str, now_ms: u64, instance: &str) -> Result<Claim> {
        let mut map = self.lock();
        let record = map
            .get_mut(id)
            .ok_or_else(|| StoreError::NotClaimed(id.to_owned()))?;
        Ok(match &record.state {
            State::Pending => {
                record.state = State::Claimed {
                    since_ms: now_ms,
                    by: instance.to_owned(),
                };
                Claim::Won
            }
            State::Claimed { since_ms, by } => Claim::InFlight {
                since_ms: *since_ms,
                orphaned: by != instance,
            },
            State::Done(outcome) => Claim::Done(outcome.clone()),
        })
    }

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<()> {
        {
            let mut map = self.lock();
            match map.get_mut(id) {
                Some(record) if matches!(record.state, State::Claimed { .. }) => {
                    record.state = State::Done(outcome);
                }
                _ => return Err(StoreError::NotClaimed(id.to_owned())),
            }
        }
        self.recorded.bump();
        Ok(())
    }

    async fn wait_outcome(&self, id: &str, timeout: Duration) -> Result<Option<Outcome>> {
        let look = || std::future::ready(Ok(self.outcome(id)));
        self.recorded.wait(timeout, None, look).await
    }
}

impl Grants for MemoryStore {
    async fn add_grant(&self, grant: Grant) -> Result<()> {
        let mut grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        grants
            .entry(grant.principal.clone())
            .or_default()
            .push(grant.made());
        Ok(())
    }

    async fn grants(&self, principal: &str) -> Result<Vec<Grant>> {
        let grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(grants.get(principal).cloned().unwrap_or_default())
    }

    async fn redeem_grant(&self, grant: &Grant, now_ms: u64) -> Result<bool> {
        let mut grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        let stored = grants
            .get_mut(&grant.principal)
            .and_then(|mine| mine.iter_mut().find(|g| g.id == grant.id));
        Ok(match stored {
            Some(stored) if stored.state(now_ms) == GrantState::Active => {
                stored.used = stored.used.saturating_add(1);
                true
            }
            _ => false,
        })
    }

    async fn revoke_grant(&self, principal: &str, id: &str, now_ms: u64) -> Result<bool> {
        let mut grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        let stored = grants
            .get_mut(principal)
            .and_then(|mine| mine.iter_mut().find(|g| g.id == id));
        Ok(match stored {
            Some(stored) if stored.revoked_at_ms.is_none() => {
                stored.revoked_at_ms = Some(now_ms);
                true
            }
            _ => false,
        })
    }
}

impl Approvals for MemoryStore {
    async fn remember(&self, approval: Remembered) -> Result<()> {
        let key = (
            approval.principal.clone(),
            approval.chat_id.clone().unwrap_or_default(),
            approval.tool.clone(),
        );
        self.remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, approval);
        Ok(())
    }

    async fn remembered(&self, calls: Calls<'_>, now_ms: u64) -> Result<Option<Remembered>> {
        let (principal, chat_id, tool) = calls.parts();
        let map = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let live = |chat: &str| {
            map.get(&(principal.to_owned(), chat.to_owned(), tool.to_owned()))
                .filter(|r| r.is_live(now_ms))
        };
        Ok(live(chat_id).or_else(|| live("")).cloned())
    }

    async fn list_remembered(&self, principal: &str, now_ms: u64) -> Result<Vec<Remembered>> {
        let map = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(map
            .values()
            .filter(|r| r.principal == principal && r.is_live(now_ms))
            .cloned()
            .collect())
    }

    async fn revoke(&self, principal: &str, id: &str) -> Result<bool> {
        let mut map = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let before = map.len();
        map.retain(|_, r| !(r.principal == principal && r.id == id));
        Ok(map.len() < before)
    }

    async fn grant_budget(&self, principal: &str, chat_id: &str, tool: &str, n: u32) -> Result<()> {
        let key = (principal.to_owned(), chat_id.to_owned(), tool.to_owned());
        self.budgets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, n);
        Ok(())
    }

    async fn take_budget(&self, principal: &str, chat_id: &str, tool: &str) -> Result<bool> {
        let key = (principal.to_owned(), chat_id.to_owned(), tool.to_owned());
        let mut budgets = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(match budgets.get_mut(&key) {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        })
    }
}

impl AuditLog for MemoryStore {
    async fn audit(&self, event: AuditEvent, text: String, sealer: &Sealer) -> Result<()> {
        #[cfg(test)]
        if self.stall_audit.load(std::sync::atomic::Ordering::Acquire) {
            std::future::pending::<()>().await;
        }
        let mut audit = self.audit.lock().unwrap_or_else(PoisonError::into_inner);
        let link = sealer.seal(audit.head.as_ref(), &text);
        audit.head = Some(link.head());
        let log = audit.logs.entry(event.principal.clone()).or_default();
        if log.len() == AUDIT_CAPACITY {
            log.pop_front();
        }
        log.push_back((event, Chained { link, event: text }));
        Ok(())
    }

    async fn audit_log(&self, principal: &str, since_ms: u64) -> Result<Vec<AuditEvent>> {
        let audit = self.audit.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(audit
            .logs
            .get(principal)
            .into_iter()
            .flatten()
            .filter(|(e, _)| e.at_ms >= since_ms)
            .map(|(e, _)| e.clone())
            .collect())
    }

    async fn audit_chain(&self, since_ms: u64) -> Result<Vec<Chained>> {
        let audit = self.audit.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = audit.logs.values().flatten();
        let Some(from) = kept
            .clone()
            .filter(|(e, _)| e.at_ms >= since_ms)
            .map(|(_, c)| c.link.seq)
            .min()
        else {
            return Ok(Vec::new());
        };
        let mut chain: Vec<Chained> = kept
            .filter(|(_, c)| c.link.seq >= from)
            .map(|(_, c)| c.clone())
            .collect();
        chain.sort_unstable_by_key(|c| c.link.seq);
        Ok(chain)
    }

    async fn prune_audit(&self, before_ms: u64) -> Result<usize> {
        let mut audit = self.audit.lock().unwrap_or_else(PoisonError::into_inner);
        let logs = &mut audit.logs;
        let mut pruned = 0;
        for log in logs.values_mut() {
            let before = log.len();
            log.retain(|(e, _)| e.at_ms >= before_ms);
            pruned += before - log.len();
        }
        logs.retain(|_, log| !log.is_empty());
        Ok(pruned)
    }
}

impl StoreBackend for MemoryStore {
    const LABEL: &'static str = "memory";
}

#[cfg(test)]
mod tests {
    use super::super::{Store, StoreError, conformance};
    use super::MemoryStore;

    /// A memory store of its own, for each case of the suite.
    async fn fresh() -> ((), Store) {
        ((), Store::memory())
    }

    conformance::suite!(fresh, purges);

    #[tokio::test]
    async fn chains_appends_made_at_once() {
        let store = Store::memory();
        conformance::chains_appends_made_at_once(store.clone(), vec![store]).await;
    }

    #[tokio::test]
    async fn full_means_full_until_something_expires() {
        let store = Store::from(crate::store::Backend::Memory(MemoryStore::with_capacity(1)));
        assert!(store.insert(conformance::issued("a")).await.is_ok());
        assert!(matches!(
            store.insert(conformance::issued("b")).await,
            Err(StoreError::Full(1))
        ));
        let mut later = conformance::issued("c");
        later.issued_at_ms = 11;
        assert!(store.insert(later).await.is_ok());
    }
}
