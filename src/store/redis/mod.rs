//! The Redis backend, for several instances sharing the work. One hash per
//! confirmation (`issued`, `claimed_at`, `outcome`) that expires with it;
//! claims and outcomes are Lua scripts, so exactly one instance wins; an
//! outcome is published, so an instance waiting on it learns at once. The
//! open questions of every chat are a sorted set the insert adds to and the
//! winning claim takes from, each publishing on the inbox channel. A
//! remembered approval is a key of its own (a window grant's expires with
//! its window), listed through a set per principal.

mod approvals;
mod audit;
mod confirmations;
mod grants;
mod outcomes;
// Compiled with the `redis-server` feature (`./scripts/test` turns it on),
// so plain `cargo test` needs only Rust and never passes without a server.
#[cfg(all(test, feature = "redis-server"))]
pub(super) mod tests;

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use tokio_util::task::TaskTracker;

use outcomes::Outcomes;

use super::backend::StoreBackend;
use super::{BackendError, Outcome, Result, StoreError};

/// How long, by default, what a user can multiply lives in Redis: a
/// chat's remembered approvals and approve-next budgets, and the audit
/// log's keys; the store's audit retention (`store.auditRetentionDays`)
/// replaces it ([`RedisStore::with_retention`]).
const KEPT: Duration = Duration::from_secs(90 * 24 * 60 * 60);

/// How long `/readyz`'s look at a new connection may take.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// Claims a confirmation, once: `redis/lua/claim_confirmation.lua` (KEYS and ARGV in its header).
pub(super) const CLAIM: &str = include_str!("lua/claim_confirmation.lua");

/// Records a confirmation once, with its indexes and its life: `redis/lua/insert_confirmation.lua` (KEYS and ARGV in its header).
pub(super) const INSERT: &str = include_str!("lua/insert_confirmation.lua");

/// Takes one call from an approve-next budget: `redis/lua/take_budget.lua` (KEYS and ARGV in its header).
pub(super) const TAKE_BUDGET: &str = include_str!("lua/take_budget.lua");

/// Drops an index entry of an approval that is gone: `redis/lua/forget_grant_entry.lua` (KEYS and ARGV in its header).
pub(super) const FORGET_ENTRY: &str = include_str!("lua/forget_grant_entry.lua");

/// Revokes an approval if it is still the one found: `redis/lua/revoke_grant.lua` (KEYS and ARGV in its header).
pub(super) const REVOKE: &str = include_str!("lua/revoke_grant.lua");

/// Spends one use of a narrowed grant if it is active: `redis/lua/redeem_grant.lua` (KEYS and ARGV in its header).
pub(super) const REDEEM_GRANT: &str = include_str!("lua/redeem_grant.lua");

/// Revokes a narrowed grant once: `redis/lua/revoke_narrowed.lua` (KEYS and ARGV in its header).
pub(super) const REVOKE_NARROWED: &str = include_str!("lua/revoke_narrowed.lua");

/// Records the outcome of a claimed confirmation: `redis/lua/finish_confirmation.lua` (KEYS and ARGV in its header).
pub(super) const FINISH: &str = include_str!("lua/finish_confirmation.lua");

/// Appends an audit event after the chain's head, if it is still the one
/// read: `redis/lua/audit_append.lua` (KEYS and ARGV in its header).
pub(super) const AUDIT_APPEND: &str = include_str!("lua/audit_append.lua");

#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    pub(super) conn: ConnectionManager,
    pub(super) prefix: String,
    /// How long a chat's grants and budgets and the audit log's keys live
    /// after they were last written (ms).
    kept_ms: u64,
    /// The one subscription to outcomes every waiter of this instance shares.
    outcomes: std::sync::Arc<Outcomes>,
    claim: redis::Script,
    insert: redis::Script,
    finish: redis::Script,
    take_budget: redis::Script,
    forget_entry: redis::Script,
    revoke: redis::Script,
    audit_append: redis::Script,
    redeem_grant: redis::Script,
    revoke_narrowed: redis::Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    pub async fn connect(url: &str, prefix: &str) -> Result<Self> {
        let client = redis::Client::open(url).map_err(backend)?;
        let conn = ConnectionManager::new(client.clone())
            .await
            .map_err(backend)?;
        Ok(Self {
            client,
            conn,
            prefix: prefix.to_owned(),
            kept_ms: millis(KEPT),
            outcomes: std::sync::Arc::new(Outcomes::new(TaskTracker::new())),
            claim: redis::Script::new(CLAIM),
            insert: redis::Script::new(INSERT),
            finish: redis::Script::new(FINISH),
            take_budget: redis::Script::new(TAKE_BUDGET),
            forget_entry: redis::Script::new(FORGET_ENTRY),
            revoke: redis::Script::new(REVOKE),
            audit_append: redis::Script::new(AUDIT_APPEND),
            redeem_grant: redis::Script::new(REDEEM_GRANT),
            revoke_narrowed: redis::Script::new(REVOKE_NARROWED),
        })
    }

    /// Runs the shared subscription to outcomes on `tasks`.
    pub(super) fn with_tasks(mut self, tasks: TaskTracker) -> Self {
        self.outcomes = std::sync::Arc::new(Outcomes::new(tasks));
        self
    }

    /// Keeps a chat's grants and budgets, and the audit log's keys, for
    /// `retention` after they were last written (default [`KEPT`]).
    pub(super) fn with_retention(mut self, retention: Duration) -> Self {
        self.kept_ms = millis(retention).max(1);
        self
    }

    fn key(&self, id: &str) -> String {
        format!("{}confirmation:{id}", self.prefix)
    }

    /// What the turn logs (`turn_log/`) share with the store: its keys'
    /// prefix, its connection, and its client for connections of their own.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    pub(super) fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    pub(super) fn client(&self) -> &redis::Client {
        &self.client
    }

    fn channel(&self) -> String {
        format!("{}outcomes", self.prefix)
    }

    /// Where a question asked or taken is told to every instance.
    fn inbox_channel(&self) -> String {
        format!("{}inbox", self.prefix)
    }

    /// An instance's heartbeat key.
    fn heartbeat_key(&self, instance: &str) -> String {
        format!("{}{instance}", self.heartbeat_prefix())
    }

    /// What every heartbeat key starts with (`take_over` names one in KEYS).
    pub(super) fn heartbeat_prefix(&self) -> String {
        format!("{}instance:", self.prefix)
    }

    fn kept_i64(&self) -> i64 {
        i64::try_from(self.kept_ms).unwrap_or(i64::MAX)
    }
}

impl StoreBackend for RedisStore {
    const LABEL: &'static str = "redis";

    /// One round trip to the server on the shared connection, and one on
    /// a new connection: waiters and followers of other instances' turns
    /// need new ones, and a server that refuses them (`maxclients`) is
    /// not one to send traffic to.
    async fn ping(&self) -> Result<()> {
        let mut conn = self.conn.clone();
        let _: bool = conn
            .exists(self.heartbeat_key("ping"))
            .await
            .map_err(backend)?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(PING_TIMEOUT))
            .set_response_timeout(Some(PING_TIMEOUT));
        let mut fresh = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(backend)?;
        let () = redis::cmd("PING")
            .query_async::<String>(&mut fresh)
            .await
            .map(drop)
            .map_err(backend)?;
        Ok(())
    }

    async fn changes(&self) -> Result<Option<BoxStream<'static, ()>>> {
        let mut pubsub = self.client.get_async_pubsub().await.map_err(backend)?;
        pubsub
            .subscribe(self.inbox_channel())
            .await
            .map_err(backend)?;
        Ok(Some(pubsub.into_on_message().map(drop).boxed()))
    }

    async fn heartbeat(&self, instance: &str, ttl: Duration) -> Result<()> {
        let mut conn = self.conn.clone();
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let _: () = conn
            .pset_ex(self.heartbeat_key(instance), 1, ttl)
            .await
            .map_err(backend)?;
        Ok(())
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn backend(e: redis::RedisError) -> StoreError {
    StoreError::Backend(e.into())
}

fn outcome_from(text: &str) -> Result<Outcome> {
    serde_json::from_str(text).map_err(BackendError::json("stored outcome is corrupt"))
}
