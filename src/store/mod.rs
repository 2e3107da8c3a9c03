//! State: confirmations the server issued and the execution ledger.
//!
//! One closed enum of backends; every backend gives the same guarantees:
//! [`Store::claim`] is atomic, so one caller wins and every other one sees
//! the claim or the recorded outcome. A claim names the instance (process)
//! that holds it, so a claim whose holder is gone is known as orphaned.

mod backend;
pub mod chain;
mod error;
mod grant;
pub mod limits;
#[cfg(test)]
mod lua_keys;
mod memory;
mod record;
mod redis;
mod sqlite;
mod turn_log;

use std::time::Duration;

use futures::stream::BoxStream;
use tokio_util::task::TaskTracker;

use backend::{Approvals, AuditLog, Confirmations, Grants, StoreBackend};
pub use backend::{Calls, Page};
use error::Result;
pub use error::{BackendError, StoreError};
pub use grant::{Grant, GrantState};

pub use limits::{Limit, LimitError, Limited, Limiter, Rates};
pub use memory::MemoryStore;
pub use record::{
    AuditDecision, AuditEvent, AuditPage, Claim, Cursor, Issued, Outcome, RecordKind, Remembered,
    Status,
};
pub use redis::RedisStore;
pub use sqlite::SqliteStore;
pub use turn_log::{
    Adopted, FOLLOWED, FOLLOWED_PER_USER, FollowLimits, Follower, KEPT_AFTER_END, REFRESH_EVERY,
    Read, TURN_TTL, TakeOver, TurnLogReader, TurnLogWriter, TurnLogs, Window,
};

use crate::metrics::{Metrics, StoreCounters};

/// How long a confirmation is kept after it expired: its outcome (expired,
/// or a running call's) stays readable that long.
pub const KEPT_AFTER_EXPIRY: Duration = Duration::from_secs(60 * 60);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How long an instance's heartbeat lasts without renewal: its claims are
/// orphaned this long after it died.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(10);

/// How often a live instance renews its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(3);

/// The store: one of the backends, its operations counted once each in
/// one place ([`Store::counted`]) when it was given metrics.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) backend: Backend,
    /// `toolgate_store_operations_total`, one counter pair per [`Op`].
    counters: Option<StoreCounters>,
    /// Links each audit event into the store's chain (`chain/`).
    sealer: std::sync::Arc<chain::Sealer>,
}

#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Memory(MemoryStore),
    Sqlite(SqliteStore),
    Redis(std::sync::Arc<RedisStore>),
}

impl From<Backend> for Store {
    fn from(backend: Backend) -> Self {
        Store {
            backend,
            counters: None,
            sealer: std::sync::Arc::default(),
        }
    }
}

/// Each operation of [`Store`], as `op` labels it; its place is its index
/// in [`OPS`].
#[derive(Debug, Clone, Copy)]
enum Op {
    Ping,
    Insert,
    Get,
    Status,
    Expired,
    PurgeExpired,
    Remember,
    Remembered,
    ListRemembered,
    Revoke,
    GrantBudget,
    TakeBudget,
    Open,
    OpenAll,
    Changes,
    Audit,
    AuditLog,
    PruneAudit,
    Claim,
    Heartbeat,
    Finish,
    WaitOutcome,
    AddGrant,
    Grants,
    RedeemGrant,
    RevokeGrant,
}

/// The `op` label of each [`Op`], in order.
const OPS: [&str; 26] = [
    "ping",
    "insert",
    "get",
    "status",
    "expired",
    "purge_expired",
    "remember",
    "remembered",
    "list_remembered",
    "revoke",
    "grant_budget",
    "take_budget",
    "open",
    "open_all",
    "changes",
    "audit",
    "audit_log",
    "prune_audit",
    "claim",
    "heartbeat",
    "finish",
    "wait_outcome",
    "add_grant",
    "grants",
    "redeem_grant",
    "revoke_grant",
];

/// Runs `$call` on the store's backend, whichever it is: `$s` names it.
macro_rules! each {
    ($store:expr, $s:ident => $call:expr) => {
        match &$store.backend {
            Backend::Memory($s) => $call,
            Backend::Sqlite($s) => $call,
            Backend::Redis($s) => $call,
        }
    };
}

impl Store {
    pub fn memory() -> Self {
        Backend::Memory(MemoryStore::default()).into()
    }

    pub fn sqlite(path: &std::path::Path) -> Result<Self> {
        Ok(Backend::Sqlite(SqliteStore::open(path)?).into())
    }

    /// Every key starts with `prefix`, so instances of one deployment share it.
    pub async fn redis(url: &str, prefix: &str) -> Result<Self> {
        Ok(Backend::Redis(std::sync::Arc::new(RedisStore::connect(url, prefix).await?)).into())
    }

    /// With Redis, what a user can multiply (a chat's remembered approvals
    /// and approve-next budgets, the audit log's keys) expires `retention`
    /// after it was last written; the other backends keep them in their
    /// file or memory, pruned as before.
    pub fn with_retention(mut self, retention: Duration) -> Self {
        if let Backend::Redis(redis) = &self.backend {
            let redis = (**redis).clone().with_retention(retention);
            self.backend = Backend::Redis(std::sync::Arc::new(redis));
        }
        self
    }

    /// With Redis, the one subscription to outcomes the instance's
    /// waiters share runs on `tasks`.
    pub fn with_tasks(mut self, tasks: &TaskTracker) -> Self {
        if let Backend::Redis(redis) = &self.backend {
            let redis = (**redis).clone().with_tasks(tasks.clone());
            self.backend = Backend::Redis(std::sync::Arc::new(redis));
        }
        self
    }

    /// Signs every audit event it appends with `key` (`audit.signingKey`);
    /// without one the chain is kept unsigned.
    pub fn with_audit_key(mut self, key: Option<chain::AuditKey>) -> Self {
        self.sealer = std::sync::Arc::new(chain::Sealer::new(key));
        self
    }

    /// Whether the audit events it appends are signed.
    pub fn signs_audit(&self) -> bool {
        self.sealer.signs()
    }

    /// Counts every operation in `metrics`'s `toolgate_store_operations_total`
    /// (`store`: the backend; `op`: the method; `outcome`: `error` when the
    /// backend failed, else `ok`, a refusal such as a full store included).
    pub fn with_metrics(mut self, metrics: &Metrics) -> Self {
        self.counters = Some(metrics.store_operations(self.kind(), &OPS));
        self
    }

    /// The backend, as the `store` label names it.
    fn kind(&self) -> &'static str {
        match self.backend {
            Backend::Memory(_) => MemoryStore::LABEL,
            Backend::Sqlite(_) => SqliteStore::LABEL,
            Backend::Redis(_) => RedisStore::LABEL,
        }
    }

    /// Runs one operation and counts how it ended. An operation dropped
    /// before its end (a wait given up) is not counted.
    async fn counted<T>(&self, op: Op, work: impl Future<Output = Result<T>>) -> Result<T> {
        let result = work.await;
        if let Some(counters) = &self.counters {
            let failed = matches!(result, Err(StoreError::Backend(_)));
            counters.count(op as usize, !failed);
        }
        result
    }

    /// A cheap round trip, for `/readyz`: an error if the backend cannot
    /// be read now.
    pub async fn ping(&self) -> Result<()> {
        self.counted(Op::Ping, async { each!(self, s => s.ping().await) })
            .await
    }

    pub async fn insert(&self, issued: Issued) -> Result<()> {
        self.counted(Op::Insert, async {
            each!(self, s => s.insert(issued).await)
        })
        .await
    }

    pub async fn get(&self, id: &str) -> Result<Option<Issued>> {
        self.counted(Op::Get, async { each!(self, s => s.get(id).await) })
            .await
    }

    /// Where a confirmation stands, without claiming anything.
    pub async fn status(&self, id: &str) -> Result<Option<Status>> {
        self.counted(Op::Status, async { each!(self, s => s.status(id).await) })
            .await
    }

    /// The confirmations that expired before `now_ms` with nobody's answer
    /// and no outcome yet, at most `limit`. The gate ends each as expired
    /// through the store's claim, so one instance (or a decision that came
    /// first) wins.
    pub async fn expired(&self, now_ms: u64, limit: usize) -> Result<Vec<Issued>> {
        self.counted(Op::Expired, async {
            each!(self, s => s.expired(now_ms, limit).await)
        })
        .await
    }

    /// Forgets every confirmation whose expiry is more than
    /// [`KEPT_AFTER_EXPIRY`] before `now_ms`, unless its call is running
    /// (until then a late answer learns it expired, or how it ended), and
    /// every remembered approval whose window is over at `now_ms`.
    /// Forgetting is safe: an answer to a confirmation the server does not
    /// know runs nothing, and a lapsed approval is never handed out anyway.
    /// (Redis expires records itself.)
    pub async fn purge_expired(&self, now_ms: u64) -> Result<usize> {
        let before = now_ms.saturating_sub(millis(KEPT_AFTER_EXPIRY));
        self.counted(Op::PurgeExpired, async {
            each!(self, s => s.purge_expired(before, now_ms).await)
        })
        .await
    }

    /// Remembers an approval; one for the same principal, chat scope (this
    /// chat, or every chat: a window grant is one for every chat) and tool
    /// replaces it.
    pub async fn remember(&self, approval: Remembered) -> Result<()> {
        self.counted(Op::Remember, async {
            each!(self, s => s.remember(approval).await)
        })
        .await
    }

    /// The approval that covers `calls` at `now_ms`: one for their chat
    /// first, then one for all the principal's chats; never one whose
    /// window is over.
    pub async fn remembered(&self, calls: Calls<'_>, now_ms: u64) -> Result<Option<Remembered>> {
        self.counted(Op::Remembered, async {
            each!(self, s => s.remembered(calls, now_ms).await)
        })
        .await
    }

    /// Every approval `principal` asked to be remembered that still applies
    /// at `now_ms`, oldest first.
    pub async fn list_remembered(&self, principal: &str, now_ms: u64) -> Result<Vec<Remembered>> {
        let mut list = self
            .counted(Op::ListRemembered, async {
                each!(self, s => s.list_remembered(principal, now_ms).await)
            })
            .await?;
        list.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
        Ok(list)
    }

    /// Forgets one of `principal`'s remembered approvals; false if there was none.
    pub async fn revoke(&self, principal: &str, id: &str) -> Result<bool> {
        self.counted(Op::Revoke, async {
            each!(self, s => s.revoke(principal, id).await)
        })
        .await
    }

    /// Lets the next `n` calls of `tool` in this chat run without asking.
    pub async fn grant_budget(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
        n: u32,
    ) -> Result<()> {
        self.counted(Op::GrantBudget, async {
            each!(self, s => s.grant_budget(principal, chat_id, tool, n).await)
        })
        .await
    }

    /// Spends one call of the budget, atomically; false when none is left.
    pub async fn take_budget(&self, principal: &str, chat_id: &str, tool: &str) -> Result<bool> {
        self.counted(Op::TakeBudget, async {
            each!(self, s => s.take_budget(principal, chat_id, tool).await)
        })
        .await
    }

    /// Keeps a narrowed grant.
    pub async fn add_grant(&self, grant: Grant) -> Result<()> {
        self.counted(Op::AddGrant, async {
            each!(self, s => s.add_grant(grant).await)
        })
        .await
    }

    /// Every grant of `principal` as it stands (active or not), oldest first.
    pub async fn grants(&self, principal: &str) -> Result<Vec<Grant>> {
        let mut list = self
            .counted(Op::Grants, async {
                each!(self, s => s.grants(principal).await)
            })
            .await?;
        list.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
        Ok(list)
    }

    /// Spends one use of `grant`, atomically on every instance; false when
    /// it no longer decides anything (revoked, used up, over).
    pub async fn redeem_grant(&self, grant: &Grant, now_ms: u64) -> Result<bool> {
        self.counted(Op::RedeemGrant, async {
            each!(self, s => s.redeem_grant(grant, now_ms).await)
        })
        .await
    }

    /// Revokes `principal`'s grant `id`; false when there is none, or it
    /// was revoked already.
    pub async fn revoke_grant(&self, principal: &str, id: &str, now_ms: u64) -> Result<bool> {
        self.counted(Op::RevokeGrant, async {
            each!(self, s => s.revoke_grant(principal, id, now_ms).await)
        })
        .await
    }

    /// `principal`'s confirmations in `chat_id` that nobody decided yet and
    /// that have not expired at `now_ms`, oldest first.
    pub async fn open(&self, principal: &str, chat_id: &str, now_ms: u64) -> Result<Vec<Issued>> {
        let mut open = self
            .counted(Op::Open, async {
                each!(self, s => s.open(principal, chat_id, now_ms).await)
            })
            .await?;
        open.sort_by(|a, b| (a.issued_at_ms, &a.id).cmp(&(b.issued_at_ms, &b.id)));
        Ok(open)
    }

    /// Every principal's confirmations in every chat (only the page's
    /// `asker`'s, if given) that nobody decided yet and that have not
    /// expired at its `now_ms`, oldest first (by issue time, then id), from
    /// just after its `after` on, at most its `limit`: an inbox pages
    /// through them without reading them all at once.
    pub async fn open_all(&self, page: Page<'_>) -> Result<Vec<Issued>> {
        self.counted(Op::OpenAll, async {
            each!(self, s => s.open_all(page).await)
        })
        .await
    }

    /// A signal for each question asked or taken (claimed) by any
    /// instance sharing the store; the stream ends when the subscription
    /// drops. `None` for a store one process owns: its gate sees every
    /// change itself.
    pub async fn changes(&self) -> Result<Option<BoxStream<'static, ()>>> {
        self.counted(Op::Changes, async { each!(self, s => s.changes().await) })
            .await
    }

    /// Appends to the audit log: the event is linked into the store's
    /// chain, after its head, atomically with the other instances.
    pub async fn audit(&self, event: AuditEvent) -> Result<()> {
        self.counted(Op::Audit, async {
            let text =
                serde_json::to_string(&event).map_err(BackendError::json("encoding a record"))?;
            each!(self, s => s.audit(event, text, &self.sealer).await)
        })
        .await
    }

    /// The chain from the first event at or after `since_ms` to its head,
    /// in order (`toolgate audit export`). Events written before the chain
    /// existed are left out.
    pub async fn audit_chain(&self, since_ms: u64) -> Result<Vec<chain::Chained>> {
        each!(self, s => s.audit_chain(since_ms).await)
    }

    /// The events of the audit log `page` names.
    pub async fn audit_log(&self, page: AuditPage<'_>) -> Result<Vec<AuditEvent>> {
        let events = self
            .counted(Op::AuditLog, async {
                each!(self, s => s.audit_log(page.principal, page.since_ms).await)
            })
            .await?;
        Ok(events
            .into_iter()
            .filter(|e| page.chat_id.is_none_or(|c| e.chat_id == c))
            .take(page.limit)
            .collect())
    }

    /// Moves SQLite's write-ahead log into its file, off the path of the
    /// calls that write it (`serve` does so every second); the other
    /// stores have nothing to move.
    pub async fn checkpoint(&self) -> Result<()> {
        each!(self, s => s.checkpoint().await)
    }

    /// Drops audit events older than `before_ms` (the retention setting).
    pub async fn prune_audit(&self, before_ms: u64) -> Result<usize> {
        self.counted(Op::PruneAudit, async {
            each!(self, s => s.prune_audit(before_ms).await)
        })
        .await
    }

    /// Claims a confirmation for execution at `now_ms` on behalf of
    /// `instance` (the id the process minted at start-up); atomic.
    pub async fn claim(&self, id: &str, now_ms: u64, instance: &str) -> Result<Claim> {
        self.counted(Op::Claim, async {
            each!(self, s => s.claim(id, now_ms, instance).await)
        })
        .await
    }

    /// The limiter for `rates`: shared through Redis when the store is,
    /// in process otherwise; Redis stream leases are renewed on `tasks`
    /// and named by `instance`.
    pub fn limiter(&self, rates: Rates, tasks: TaskTracker, instance: &str) -> Limiter {
        match &self.backend {
            Backend::Memory(_) | Backend::Sqlite(_) => Limiter::local(rates),
            Backend::Redis(s) => Limiter::redis(rates, s.clone(), tasks, instance),
        }
    }

    /// Whether several instances share this store: then each keeps a
    /// [`Store::heartbeat`] so the others know its claims are alive.
    pub fn is_shared(&self) -> bool {
        matches!(self.backend, Backend::Redis(_))
    }

    /// The turn logs other instances resume turns from, written and read
    /// by `instance`: only a shared store has them (one process keeps its
    /// turns in memory).
    pub fn turn_logs(&self, instance: &str) -> Option<TurnLogs> {
        match &self.backend {
            Backend::Memory(_) | Backend::Sqlite(_) => None,
            Backend::Redis(s) => Some(TurnLogs::new(s.clone(), instance)),
        }
    }

    /// Says `instance` is alive for the next [`HEARTBEAT_TTL`]; renew it
    /// every [`HEARTBEAT_EVERY`]. A no-op for a store one process owns.
    pub async fn heartbeat(&self, instance: &str) -> Result<()> {
        self.counted(Op::Heartbeat, async {
            each!(self, s => s.heartbeat(instance, HEARTBEAT_TTL).await)
        })
        .await
    }

    /// Records the outcome of a claimed confirmation.
    pub async fn finish(&self, id: &str, outcome: Outcome) -> Result<()> {
        self.counted(Op::Finish, async {
            each!(self, s => s.finish(id, outcome).await)
        })
        .await
    }

    /// Waits up to `timeout` for another caller's outcome.
    pub async fn wait_outcome(&self, id: &str, timeout: Duration) -> Result<Option<Outcome>> {
        self.counted(Op::WaitOutcome, async {
            each!(self, s => s.wait_outcome(id, timeout).await)
        })
        .await
    }
}

#[cfg(test)]
pub(crate) mod conformance;
