//! State: confirmations the server issued and the execution ledger.
//!
//! One closed enum of backends; every backend gives the same guarantees:
//! [`Store::claim`] is atomic, so one caller wins and every other one sees
//! the claim or the recorded outcome. A claim names the instance (process)
//! that holds it, so a claim whose holder is gone is known as orphaned.

pub mod limits;
#[cfg(test)]
mod lua_keys;
mod memory;
mod redis;
mod sqlite;
mod turn_log;

use std::time::Duration;

use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::task::TaskTracker;

pub use limits::{Limit, LimitError, Limited, Limiter, Rates};
pub use memory::MemoryStore;
pub use redis::RedisStore;
pub use sqlite::SqliteStore;
pub use turn_log::{
    Adopted, FOLLOWED, KEPT_AFTER_END, REFRESH_EVERY, Read, TURN_TTL, TakeOver, TurnLogReader,
    TurnLogWriter, TurnLogs,
};

use crate::call::ToolCall;
use crate::metrics::{Metrics, StoreCounters};
use crate::protocol::ConfirmationProtocol;

/// A confirmation as the server issued it: the authority for what may run.
#[derive(Debug, Clone, PartialEq)]
pub struct Issued {
    /// The id of the `adk_request_confirmation` call.
    pub id: String,
    pub chat_id: String,
    pub principal: String,
    /// The original call, with the exact arguments the user was asked about.
    pub call: ToolCall,
    pub hint: String,
    /// How it was asked; it must be answered the same way.
    pub protocol: ConfirmationProtocol,
    pub issued_at_ms: u64,
    pub expires_at_ms: u64,
    /// What the record is: only a question asks anyone.
    pub kind: RecordKind,
}

/// What a stored record is. Hand-offs and taken client results are kept as
/// records too, so that their claim and ledger work as a question's does;
/// they ask nobody. Every backend stores it (a record stored before it had
/// one is a question).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordKind {
    /// A confirmation someone is asked to decide.
    #[default]
    Question,
    /// A client-side tool's call handed to the client to run.
    HandOff,
    /// A client's result for a hand-off, taken.
    ClientResult,
}

impl RecordKind {
    /// Whether someone is asked to decide it.
    pub fn asks(self) -> bool {
        self == RecordKind::Question
    }

    /// Its stored name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RecordKind::Question => "question",
            RecordKind::HandOff => "hand-off",
            RecordKind::ClientResult => "client-result",
        }
    }

    /// The kind a stored name names; a name it does not know is a question.
    pub(crate) fn named(name: &str) -> Self {
        match name {
            "hand-off" => RecordKind::HandOff,
            "client-result" => RecordKind::ClientResult,
            _ => RecordKind::Question,
        }
    }
}

/// Where a listing of open confirmations goes on: just after this one in
/// their order (issue time, then id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    pub issued_at_ms: u64,
    pub id: String,
}

impl Cursor {
    pub fn after(issued: &Issued) -> Self {
        Cursor {
            issued_at_ms: issued.issued_at_ms,
            id: issued.id.clone(),
        }
    }
}

/// How a call ended, as recorded in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Outcome {
    Output {
        output: Value,
        /// The arguments the call ran with, when the user edited them.
        #[serde(rename = "ranWith", default, skip_serializing_if = "Option::is_none")]
        ran_with: Option<Value>,
        /// A person gave it in the tool's place (the `respond` decision):
        /// the tool never ran. Kept so that a later decision can tell a
        /// response from an approval.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        responded: bool,
    },
    Error {
        message: String,
        #[serde(rename = "ranWith", default, skip_serializing_if = "Option::is_none")]
        ran_with: Option<Value>,
    },
    Denied {
        reason: Option<String>,
    },
    /// Nobody approved or denied it before its window closed; it never ran.
    Expired,
    /// Closed unanswered when the user wrote a new message (the tool's
    /// `onNewMessage: cancel`); it never ran.
    Cancelled,
    /// A client-side tool's call, handed to the client to run: its result
    /// comes with the client's next request, never from the server.
    HandedOff {
        /// The arguments it was handed out with, when the user edited them.
        #[serde(rename = "ranWith", default, skip_serializing_if = "Option::is_none")]
        ran_with: Option<Value>,
    },
}

/// An approval a user asked to be remembered: calls of `tool` by
/// `principal` then run without asking, in `chat_id` or (when `None`) in
/// every chat of theirs, until `expires_at_ms` if it has one (a window
/// grant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remembered {
    pub id: String,
    pub principal: String,
    pub chat_id: Option<String>,
    /// The qualified tool name.
    pub tool: String,
    pub created_at_ms: u64,
    /// The first moment it no longer applies; `None`: until revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

impl Remembered {
    /// Whether it still applies at `now_ms`: no backend ever hands out one
    /// that does not.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_none_or(|at| now_ms < at)
    }
}

/// One decision about a tool call, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub at_ms: u64,
    pub principal: String,
    pub chat_id: String,
    /// The qualified tool name.
    pub tool: String,
    pub call_id: String,
    /// SHA-256 of the canonical arguments: who decided what, without the data.
    pub args_digest: String,
    /// For an edit: the digest of the arguments as issued (`argsDigest` is what ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_args_digest: Option<String>,
    pub decision: AuditDecision,
    /// The rule or person that decided.
    pub by: String,
    pub reason: Option<String>,
    pub confirmation_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditDecision {
    /// A rule let the call run without asking.
    Allowed,
    /// A rule refused the call.
    Denied,
    /// A confirmation was issued.
    Asked,
    Approved,
    /// The user approved after editing the arguments.
    Edited,
    /// The user refused.
    Rejected,
    /// An answer was refused: forged, unknown, foreign, expired.
    Refused,
    /// An answer repeated one already decided.
    Replayed,
    /// A person gave the call's result in the tool's place; nothing ran.
    Responded,
    /// Nobody approved or denied it before it expired (read also as the
    /// `timed-out` older logs wrote).
    #[serde(alias = "timed-out")]
    Expired,
    /// Closed unanswered by a new message (`onNewMessage: cancel`).
    Cancelled,
    /// A remembered approval was revoked.
    Revoked,
    /// A question was sent to a notification target (`by`, its safe
    /// name); `reason` says why it failed, when it did.
    Notified,
}

/// Where a confirmation stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Pending,
    /// Claimed at `since_ms`; no outcome recorded yet.
    Claimed {
        since_ms: u64,
    },
    Done(Outcome),
}

/// The result of trying to claim a confirmation for execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// This caller holds the claim and must record the outcome.
    Won,
    /// Claimed at `since_ms` and no outcome recorded yet. `orphaned`: its
    /// holder is another instance that is gone (SQLite and memory: any other
    /// instance, since one process owns the store; Redis: one without a
    /// live heartbeat), so no outcome will ever come.
    InFlight { since_ms: u64, orphaned: bool },
    /// The outcome that was recorded.
    Done(Outcome),
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("confirmation `{0}` is already recorded")]
    Duplicate(String),
    #[error("confirmation `{0}` is not claimed")]
    NotClaimed(String),
    #[error("too many open confirmations ({0}); try again later")]
    Full(usize),
    /// A resume of another instance's turn when this instance already
    /// follows as many such turns as it may (each holds a connection).
    #[error("too many turns of other instances followed at once ({0}); try again later")]
    Followed(usize),
    /// The backend failed; its driver's words are for the log only.
    #[error("store failed: {0}")]
    Backend(#[from] BackendError),
}

/// Why a backend failed, with the driver's own error kept as the source.
/// It may name SQL, file paths or addresses: it goes to the log, and a
/// client only ever learns that storage is unavailable.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migrating the sqlite file {}: {source}", .path.display())]
    Migration {
        path: std::path::PathBuf,
        #[source]
        source: rusqlite_migration::Error,
    },
    #[error("cannot create the folder {}: {source}", .path.display())]
    Folder {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the file {}: {source}", .path.display())]
    File {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// A record that does not encode, or a stored one that does not decode.
    #[error("{what}: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// A turn log this instance wrote was taken over by another instance
    /// (this one was taken for dead).
    #[error("another instance took this turn over")]
    TakenOver,
    /// The blocking task that ran the call panicked or was cancelled.
    #[error("store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// No store can be opened with this config.
    #[error("{0}")]
    Config(String),
}

/// A backend failure in plain words (a config that names no store; tests).
impl From<&str> for BackendError {
    fn from(why: &str) -> Self {
        BackendError::Config(why.to_owned())
    }
}

impl BackendError {
    pub(crate) fn json(what: &'static str) -> impl FnOnce(serde_json::Error) -> StoreError {
        move |source| StoreError::Backend(BackendError::Json { what, source })
    }
}

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
}

/// The `op` label of each [`Op`], in order.
const OPS: [&str; 22] = [
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
];

impl Store {
    pub fn memory() -> Self {
        Backend::Memory(MemoryStore::default()).into()
    }

    pub fn sqlite(path: &std::path::Path) -> Result<Self, StoreError> {
        Ok(Backend::Sqlite(SqliteStore::open(path)?).into())
    }

    /// Every key starts with `prefix`, so instances of one deployment share it.
    pub async fn redis(url: &str, prefix: &str) -> Result<Self, StoreError> {
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
            Backend::Memory(_) => "memory",
            Backend::Sqlite(_) => "sqlite",
            Backend::Redis(_) => "redis",
        }
    }

    /// Runs one operation and counts how it ended. An operation dropped
    /// before its end (a wait given up) is not counted.
    async fn counted<T>(
        &self,
        op: Op,
        work: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let result = work.await;
        if let Some(counters) = &self.counters {
            let failed = matches!(result, Err(StoreError::Backend(_)));
            counters.count(op as usize, !failed);
        }
        result
    }

    /// A cheap round trip, for `/readyz`: an error if the backend cannot
    /// be read now.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.counted(Op::Ping, async {
            match &self.backend {
                Backend::Memory(_) => Ok(()),
                Backend::Sqlite(s) => s.ping().await,
                Backend::Redis(s) => s.ping().await,
            }
        })
        .await
    }

    pub async fn insert(&self, issued: Issued) -> Result<(), StoreError> {
        self.counted(Op::Insert, async {
            match &self.backend {
                Backend::Memory(s) => s.insert(issued),
                Backend::Sqlite(s) => s.insert(issued).await,
                Backend::Redis(s) => s.insert(issued).await,
            }
        })
        .await
    }

    pub async fn get(&self, id: &str) -> Result<Option<Issued>, StoreError> {
        self.counted(Op::Get, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.get(id)),
                Backend::Sqlite(s) => s.get(id).await,
                Backend::Redis(s) => s.get(id).await,
            }
        })
        .await
    }

    /// Where a confirmation stands, without claiming anything.
    pub async fn status(&self, id: &str) -> Result<Option<Status>, StoreError> {
        self.counted(Op::Status, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.status(id)),
                Backend::Sqlite(s) => s.status(id).await,
                Backend::Redis(s) => s.status(id).await,
            }
        })
        .await
    }

    /// The confirmations that expired before `now_ms` with nobody's answer
    /// and no outcome yet, at most `limit`. The gate ends each as expired
    /// through the store's claim, so one instance (or a decision that came
    /// first) wins.
    pub async fn expired(&self, now_ms: u64, limit: usize) -> Result<Vec<Issued>, StoreError> {
        self.counted(Op::Expired, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.expired(now_ms, limit)),
                Backend::Sqlite(s) => s.expired(now_ms, limit).await,
                Backend::Redis(s) => s.expired(now_ms, limit).await,
            }
        })
        .await
    }

    /// Forgets every confirmation whose expiry is more than
    /// [`KEPT_AFTER_EXPIRY`] before `now_ms`, unless its call is running
    /// (until then a late answer learns it expired, or how it ended), and
    /// every remembered approval whose window is over at `now_ms`.
    /// Forgetting is safe: an answer to a confirmation the server does not
    /// know runs nothing, and a lapsed approval is never handed out anyway.
    pub async fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        let before = now_ms.saturating_sub(millis(KEPT_AFTER_EXPIRY));
        self.counted(Op::PurgeExpired, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.purge_expired(before, now_ms)),
                Backend::Sqlite(s) => s.purge_expired(before, now_ms).await,
                // Redis expires records itself.
                Backend::Redis(_) => Ok(0),
            }
        })
        .await
    }

    /// Remembers an approval; one for the same principal, chat scope (this
    /// chat, or every chat: a window grant is one for every chat) and tool
    /// replaces it.
    pub async fn remember(&self, approval: Remembered) -> Result<(), StoreError> {
        self.counted(Op::Remember, async {
            match &self.backend {
                Backend::Memory(s) => {
                    s.remember(approval);
                    Ok(())
                }
                Backend::Sqlite(s) => s.remember(approval).await,
                Backend::Redis(s) => s.remember(approval).await,
            }
        })
        .await
    }

    /// The approval that covers `tool` for `principal` in `chat_id` at
    /// `now_ms`: one for this chat first, then one for all their chats;
    /// never one whose window is over.
    pub async fn remembered(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
        now_ms: u64,
    ) -> Result<Option<Remembered>, StoreError> {
        self.counted(Op::Remembered, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.remembered(principal, chat_id, tool, now_ms)),
                Backend::Sqlite(s) => s.remembered(principal, chat_id, tool, now_ms).await,
                Backend::Redis(s) => s.remembered(principal, chat_id, tool, now_ms).await,
            }
        })
        .await
    }

    /// Every approval `principal` asked to be remembered that still applies
    /// at `now_ms`, oldest first.
    pub async fn list_remembered(
        &self,
        principal: &str,
        now_ms: u64,
    ) -> Result<Vec<Remembered>, StoreError> {
        let mut list = self
            .counted(Op::ListRemembered, async {
                match &self.backend {
                    Backend::Memory(s) => Ok(s.list_remembered(principal, now_ms)),
                    Backend::Sqlite(s) => s.list_remembered(principal, now_ms).await,
                    Backend::Redis(s) => s.list_remembered(principal, now_ms).await,
                }
            })
            .await?;
        list.sort_by(|a, b| {
            a.created_at_ms
                .cmp(&b.created_at_ms)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(list)
    }

    /// Forgets one of `principal`'s remembered approvals; false if there was none.
    pub async fn revoke(&self, principal: &str, id: &str) -> Result<bool, StoreError> {
        self.counted(Op::Revoke, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.revoke(principal, id)),
                Backend::Sqlite(s) => s.revoke(principal, id).await,
                Backend::Redis(s) => s.revoke(principal, id).await,
            }
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
    ) -> Result<(), StoreError> {
        self.counted(Op::GrantBudget, async {
            match &self.backend {
                Backend::Memory(s) => {
                    s.grant_budget(principal, chat_id, tool, n);
                    Ok(())
                }
                Backend::Sqlite(s) => s.grant_budget(principal, chat_id, tool, n).await,
                Backend::Redis(s) => s.grant_budget(principal, chat_id, tool, n).await,
            }
        })
        .await
    }

    /// Spends one call of the budget, atomically; false when none is left.
    pub async fn take_budget(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
    ) -> Result<bool, StoreError> {
        self.counted(Op::TakeBudget, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.take_budget(principal, chat_id, tool)),
                Backend::Sqlite(s) => s.take_budget(principal, chat_id, tool).await,
                Backend::Redis(s) => s.take_budget(principal, chat_id, tool).await,
            }
        })
        .await
    }

    /// `principal`'s confirmations in `chat_id` that nobody decided yet and
    /// that have not expired at `now_ms`, oldest first.
    pub async fn open(
        &self,
        principal: &str,
        chat_id: &str,
        now_ms: u64,
    ) -> Result<Vec<Issued>, StoreError> {
        let mut open = self
            .counted(Op::Open, async {
                match &self.backend {
                    Backend::Memory(s) => Ok(s.open_confirmations(principal, chat_id, now_ms)),
                    Backend::Sqlite(s) => s.open_confirmations(principal, chat_id, now_ms).await,
                    Backend::Redis(s) => s.open_confirmations(principal, chat_id, now_ms).await,
                }
            })
            .await?;
        open.sort_by(|a, b| {
            a.issued_at_ms
                .cmp(&b.issued_at_ms)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(open)
    }

    /// Every principal's confirmations in every chat (only `asker`'s, if
    /// given) that nobody decided yet and that have not expired at
    /// `now_ms`, oldest first (by issue time, then id), from just after
    /// `after` on, at most `limit`: an inbox pages through them without
    /// reading them all at once.
    pub async fn open_all(
        &self,
        now_ms: u64,
        after: Option<&Cursor>,
        limit: usize,
        asker: Option<&str>,
    ) -> Result<Vec<Issued>, StoreError> {
        self.counted(Op::OpenAll, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.open_all(now_ms, after, limit, asker)),
                Backend::Sqlite(s) => s.open_all(now_ms, after, limit, asker).await,
                Backend::Redis(s) => s.open_all(now_ms, after, limit, asker).await,
            }
        })
        .await
    }

    /// A signal for each question asked or taken (claimed) by any
    /// instance sharing the store; the stream ends when the subscription
    /// drops. `None` for a store one process owns: its gate sees every
    /// change itself.
    pub async fn changes(&self) -> Result<Option<BoxStream<'static, ()>>, StoreError> {
        self.counted(Op::Changes, async {
            match &self.backend {
                Backend::Memory(_) | Backend::Sqlite(_) => Ok(None),
                Backend::Redis(s) => Ok(Some(s.changes().await?)),
            }
        })
        .await
    }

    /// Appends to the audit log.
    pub async fn audit(&self, event: AuditEvent) -> Result<(), StoreError> {
        self.counted(Op::Audit, async {
            match &self.backend {
                Backend::Memory(s) => {
                    #[cfg(test)]
                    if s.stall_audit.load(std::sync::atomic::Ordering::Acquire) {
                        std::future::pending::<()>().await;
                    }
                    s.audit(event);
                    Ok(())
                }
                Backend::Sqlite(s) => s.audit(event).await,
                Backend::Redis(s) => s.audit(event).await,
            }
        })
        .await
    }

    /// `principal`'s audit log from `since_ms` on, oldest first, at most
    /// `limit` events, optionally of one chat.
    pub async fn audit_log(
        &self,
        principal: &str,
        chat_id: Option<&str>,
        since_ms: u64,
        limit: usize,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let events = self
            .counted(Op::AuditLog, async {
                match &self.backend {
                    Backend::Memory(s) => Ok(s.audit_log(principal, since_ms)),
                    Backend::Sqlite(s) => s.audit_log(principal, since_ms).await,
                    Backend::Redis(s) => s.audit_log(principal, since_ms).await,
                }
            })
            .await?;
        Ok(events
            .into_iter()
            .filter(|e| chat_id.is_none_or(|c| e.chat_id == c))
            .take(limit)
            .collect())
    }

    /// Moves SQLite's write-ahead log into its file, off the path of the
    /// calls that write it (`serve` does so every second); the other
    /// stores have nothing to move.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.checkpoint().await,
            Backend::Memory(_) | Backend::Redis(_) => Ok(()),
        }
    }

    /// Drops audit events older than `before_ms` (the retention setting).
    pub async fn prune_audit(&self, before_ms: u64) -> Result<usize, StoreError> {
        self.counted(Op::PruneAudit, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.prune_audit(before_ms)),
                Backend::Sqlite(s) => s.prune_audit(before_ms).await,
                Backend::Redis(s) => s.prune_audit(before_ms).await,
            }
        })
        .await
    }

    /// Claims a confirmation for execution at `now_ms` on behalf of
    /// `instance` (the id the process minted at start-up); atomic.
    pub async fn claim(&self, id: &str, now_ms: u64, instance: &str) -> Result<Claim, StoreError> {
        self.counted(Op::Claim, async {
            match &self.backend {
                Backend::Memory(s) => s.claim(id, now_ms, instance),
                Backend::Sqlite(s) => s.claim(id, now_ms, instance).await,
                Backend::Redis(s) => s.claim(id, now_ms, instance).await,
            }
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
    pub async fn heartbeat(&self, instance: &str) -> Result<(), StoreError> {
        self.counted(Op::Heartbeat, async {
            match &self.backend {
                Backend::Memory(_) | Backend::Sqlite(_) => Ok(()),
                Backend::Redis(s) => s.heartbeat(instance, HEARTBEAT_TTL).await,
            }
        })
        .await
    }

    /// Records the outcome of a claimed confirmation.
    pub async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        self.counted(Op::Finish, async {
            match &self.backend {
                Backend::Memory(s) => s.finish(id, outcome),
                Backend::Sqlite(s) => s.finish(id, outcome).await,
                Backend::Redis(s) => s.finish(id, outcome).await,
            }
        })
        .await
    }

    /// Waits up to `timeout` for another caller's outcome.
    pub async fn wait_outcome(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<Option<Outcome>, StoreError> {
        self.counted(Op::WaitOutcome, async {
            match &self.backend {
                Backend::Memory(s) => Ok(s.wait_outcome(id, timeout).await),
                Backend::Sqlite(s) => s.wait_outcome(id, timeout).await,
                Backend::Redis(s) => s.wait_outcome(id, timeout).await,
            }
        })
        .await
    }
}

#[cfg(test)]
pub(crate) mod conformance;
