//! The Redis backend, for several instances sharing the work. One hash per
//! confirmation (`issued`, `claimed_at`, `outcome`) that expires with it;
//! claims and outcomes are Lua scripts, so exactly one instance wins; an
//! outcome is published, so an instance waiting on it learns at once. The
//! open questions of every chat are a sorted set the insert adds to and the
//! winning claim takes from, each publishing on the inbox channel. A
//! remembered approval is a key of its own (a window grant's expires with
//! its window), listed through a set per principal.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio_util::task::TaskTracker;

use super::{
    AuditEvent, BackendError, Claim, Cursor, Issued, Outcome, RecordKind, Remembered, Status,
    StoreError,
};
use crate::call::ToolCall;
use crate::protocol::ConfirmationProtocol;

/// How long a record outlives its expiry: a running call's outcome, or
/// that it expired, stays readable.
const LINGER_MS: u64 = super::KEPT_AFTER_EXPIRY.as_millis() as u64;

/// How long, by default, what a user can multiply lives in Redis: a
/// chat's remembered approvals and approve-next budgets, and the audit
/// log's keys; the store's audit retention (`store.auditRetentionDays`)
/// replaces it ([`RedisStore::with_retention`]).
const KEPT: Duration = Duration::from_secs(90 * 24 * 60 * 60);

/// How long `/readyz`'s look at a new connection may take.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// A waiter also looks on its own this often, in case a message was missed.
const POLL: Duration = Duration::from_millis(500);

/// Claims a confirmation, once: `redis/lua/claim_confirmation.lua` (KEYS and ARGV in its header).
pub(super) const CLAIM: &str = include_str!("lua/claim_confirmation.lua");

/// Records a confirmation once, with its indexes and its life: `redis/lua/insert_confirmation.lua` (KEYS and ARGV in its header).
pub(super) const INSERT: &str = include_str!("lua/insert_confirmation.lua");

/// Most open-index entries one look at Redis reads.
const OPEN_BATCH: usize = 256;

/// Takes one call from an approve-next budget: `redis/lua/take_budget.lua` (KEYS and ARGV in its header).
pub(super) const TAKE_BUDGET: &str = include_str!("lua/take_budget.lua");

/// Drops an index entry of an approval that is gone: `redis/lua/forget_grant_entry.lua` (KEYS and ARGV in its header).
pub(super) const FORGET_ENTRY: &str = include_str!("lua/forget_grant_entry.lua");

/// Revokes an approval if it is still the one found: `redis/lua/revoke_grant.lua` (KEYS and ARGV in its header).
pub(super) const REVOKE: &str = include_str!("lua/revoke_grant.lua");

/// Records the outcome of a claimed confirmation: `redis/lua/finish_confirmation.lua` (KEYS and ARGV in its header).
pub(super) const FINISH: &str = include_str!("lua/finish_confirmation.lua");

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
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// The stored form of [`Issued`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    id: String,
    chat_id: String,
    principal: String,
    call_id: String,
    tool_name: String,
    args: serde_json::Value,
    hint: String,
    native: bool,
    issued_at_ms: u64,
    expires_at_ms: u64,
    /// Absent for a question (and in a record stored before kinds were).
    #[serde(default, skip_serializing_if = "is_question")]
    kind: RecordKind,
}

impl RedisStore {
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, StoreError> {
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

    /// What the turn logs (`turn_log.rs`) share with the store: its keys'
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

    pub(super) async fn insert(&self, issued: Issued) -> Result<(), StoreError> {
        let record = Record {
            id: issued.id.clone(),
            chat_id: issued.chat_id,
            principal: issued.principal,
            call_id: issued.call.id,
            tool_name: issued.call.name,
            args: issued.call.args,
            hint: issued.hint,
            native: issued.protocol == ConfirmationProtocol::AiSdk,
            issued_at_ms: issued.issued_at_ms,
            expires_at_ms: issued.expires_at_ms,
            kind: issued.kind,
        };
        let text =
            serde_json::to_string(&record).map_err(BackendError::json("encoding a record"))?;
        let key = self.key(&issued.id);
        // The chat's index of confirmations, for listing the open ones.
        let index = self.chat_key(&record.principal, &record.chat_id);
        // Relative to now: the instances' clocks need not agree. The index
        // lives as long as its newest confirmation.
        let lives = record
            .expires_at_ms
            .saturating_sub(record.issued_at_ms)
            .saturating_add(LINGER_MS);
        let mut conn = self.conn.clone();
        let inserted: bool = self
            .insert
            .key(&key)
            .key(self.open_key())
            .key(self.inbox_channel())
            // Expiries, for the sweep that logs unanswered ones as timed out.
            .key(self.expiries_key())
            .key(&index)
            .arg(text)
            .arg(open_entry(record.issued_at_ms, &issued.id))
            .arg(&issued.id)
            .arg(record.expires_at_ms)
            .arg(lives)
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        if !inserted {
            return Err(StoreError::Duplicate(issued.id));
        }
        Ok(())
    }

    pub(super) async fn get(&self, id: &str) -> Result<Option<Issued>, StoreError> {
        let mut conn = self.conn.clone();
        let text: Option<String> = conn.hget(self.key(id), "issued").await.map_err(backend)?;
        text.as_deref().map(issued_from).transpose()
    }

    fn expiries_key(&self) -> String {
        format!("{}expiries", self.prefix)
    }

    /// The open questions of every chat: a sorted set whose entries all
    /// score 0, so it orders by the entry, [`open_entry`]: issue time, then id.
    fn open_key(&self) -> String {
        format!("{}open", self.prefix)
    }

    /// Where a question asked or taken is told to every instance.
    fn inbox_channel(&self) -> String {
        format!("{}inbox", self.prefix)
    }

    pub(super) async fn changes(&self) -> Result<BoxStream<'static, ()>, StoreError> {
        let mut pubsub = self.client.get_async_pubsub().await.map_err(backend)?;
        pubsub
            .subscribe(self.inbox_channel())
            .await
            .map_err(backend)?;
        Ok(pubsub.into_on_message().map(drop).boxed())
    }

    /// Reads the open index in order from after `after`, a batch at a time,
    /// until `limit` open ones are found; drops each entry it meets whose
    /// question is no longer open (taken, expired, gone), since none ever
    /// opens again.
    pub(super) async fn open_all(
        &self,
        now_ms: u64,
        after: Option<&Cursor>,
        limit: usize,
        asker: Option<&str>,
    ) -> Result<Vec<Issued>, StoreError> {
        let mut conn = self.conn.clone();
        let index = self.open_key();
        let mut from = after.map_or_else(
            || "-".to_owned(),
            |c| format!("({}", open_entry(c.issued_at_ms, &c.id)),
        );
        let mut open = Vec::new();
        while open.len() < limit {
            // Filtered by who asked, a batch may keep few: read whole ones.
            let batch = match asker {
                Some(_) => OPEN_BATCH,
                None => OPEN_BATCH.min(limit - open.len()),
            };
            let entries: Vec<String> = redis::cmd("ZRANGEBYLEX")
                .arg(&index)
                .arg(&from)
                .arg("+")
                .arg("LIMIT")
                .arg(0)
                .arg(batch)
                .query_async(&mut conn)
                .await
                .map_err(backend)?;
            let Some(last) = entries.last() else { break };
            from = format!("({last}");
            let mut records = redis::pipe();
            for entry in &entries {
                let id = entry.split_once('\u{1f}').map_or("", |(_, id)| id);
                records
                    .cmd("HMGET")
                    .arg(self.key(id))
                    .arg("issued")
                    .arg("claimed_at")
                    .arg("outcome");
            }
            let records: Vec<(Option<String>, Option<String>, Option<String>)> =
                records.query_async(&mut conn).await.map_err(backend)?;
            let mut closed = Vec::new();
            for (entry, record) in entries.iter().zip(records) {
                match record {
                    (Some(text), None, None) => {
                        let issued = issued_from(&text)?;
                        if now_ms > issued.expires_at_ms {
                            closed.push(entry);
                        } else if asker.is_none_or(|asker| issued.principal == asker) {
                            open.push(issued);
                        }
                    }
                    _ => closed.push(entry),
                }
            }
            if !closed.is_empty() {
                let _: i64 = conn.zrem(&index, closed).await.map_err(backend)?;
            }
            if entries.len() < batch {
                break;
            }
        }
        open.truncate(limit);
        Ok(open)
    }
}

/// A question's entry in the open index: its issue time, zero-padded so
/// that entries sort by it, then its id.
fn is_question(kind: &RecordKind) -> bool {
    kind.asks()
}

fn open_entry(issued_at_ms: u64, id: &str) -> String {
    format!("{issued_at_ms:020}\u{1f}{id}")
}

fn issued_from(text: &str) -> Result<Issued, StoreError> {
    let record: Record =
        serde_json::from_str(text).map_err(BackendError::json("stored record is corrupt"))?;
    Ok(Issued {
        id: record.id,
        chat_id: record.chat_id,
        principal: record.principal,
        call: ToolCall {
            id: record.call_id,
            name: record.tool_name,
            args: record.args,
        },
        hint: record.hint,
        protocol: if record.native {
            ConfirmationProtocol::AiSdk
        } else {
            ConfirmationProtocol::Adk
        },
        issued_at_ms: record.issued_at_ms,
        expires_at_ms: record.expires_at_ms,
        kind: record.kind,
    })
}

impl RedisStore {
    pub(super) async fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<Issued>, StoreError> {
        let mut conn = self.conn.clone();
        let limit = isize::try_from(limit).unwrap_or(isize::MAX);
        let ids: Vec<String> = conn
            .zrangebyscore_limit(self.expiries_key(), "-inf", format!("({now_ms}"), 0, limit)
            .await
            .map_err(backend)?;
        let mut expired = Vec::new();
        for id in ids {
            match (self.get(&id).await?, self.status(&id).await?) {
                (Some(issued), Some(Status::Pending)) => expired.push(issued),
                // Decided, or gone: no longer due.
                _ => {
                    let _: i64 = conn.zrem(self.expiries_key(), &id).await.map_err(backend)?;
                }
            }
        }
        Ok(expired)
    }

    fn chat_key(&self, principal: &str, chat_id: &str) -> String {
        format!("{}chat:{principal}\u{1f}{chat_id}", self.prefix)
    }

    pub(super) async fn open_confirmations(
        &self,
        principal: &str,
        chat_id: &str,
        now_ms: u64,
    ) -> Result<Vec<Issued>, StoreError> {
        let index = self.chat_key(principal, chat_id);
        let mut conn = self.conn.clone();
        let ids: Vec<String> = conn.smembers(&index).await.map_err(backend)?;
        let mut open = Vec::new();
        for id in ids {
            match (self.get(&id).await?, self.status(&id).await?) {
                (Some(issued), Some(Status::Pending)) if now_ms <= issued.expires_at_ms => {
                    open.push(issued)
                }
                // Gone (expired in Redis): drop it from the index too.
                (None, _) => {
                    let _: i64 = conn.srem(&index, &id).await.map_err(backend)?;
                }
                _ => {}
            }
        }
        Ok(open)
    }

    /// One sorted set per principal, scored by time.
    fn audit_key(&self, principal: &str) -> String {
        format!("{}audit:{principal}", self.prefix)
    }

    /// The principals with audit events, scored by their newest event's
    /// time: pruned with the events, so it holds only principals with an
    /// event within the retention.
    fn audit_index(&self) -> String {
        format!("{}audit-index", self.prefix)
    }

    /// The index before it was scored: a set that only grew. Read and
    /// removed by the next prune.
    fn legacy_audit_index(&self) -> String {
        format!("{}audit-principals", self.prefix)
    }

    pub(super) async fn audit(&self, event: AuditEvent) -> Result<(), StoreError> {
        // A unique prefix keeps equal events apart in the set; it is cut on reading.
        let text = format!(
            "{}\u{1f}{}",
            uuid::Uuid::new_v4().simple(),
            serde_json::to_string(&event).map_err(BackendError::json("encoding a record"))?
        );
        let mut conn = self.conn.clone();
        let key = self.audit_key(&event.principal);
        // Every key lives the retention past its newest event: by then the
        // prune has taken every event in it anyway.
        let () = redis::pipe()
            .zadd(&key, text, event.at_ms)
            .ignore()
            .pexpire(&key, self.kept_i64())
            .ignore()
            .zadd(self.audit_index(), &event.principal, event.at_ms)
            .ignore()
            .pexpire(self.audit_index(), self.kept_i64())
            .ignore()
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(())
    }

    pub(super) async fn audit_log(
        &self,
        principal: &str,
        since_ms: u64,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let mut conn = self.conn.clone();
        let members: Vec<String> = conn
            .zrangebyscore(self.audit_key(principal), since_ms, "+inf")
            .await
            .map_err(backend)?;
        members
            .iter()
            .map(|m| {
                let json = m.split_once('\u{1f}').map_or(m.as_str(), |(_, json)| json);
                serde_json::from_str(json)
                    .map_err(BackendError::json("stored audit event is corrupt"))
            })
            .collect()
    }

    /// One round trip to the server on the shared connection, and one on
    /// a new connection: waiters and followers of other instances' turns
    /// need new ones, and a server that refuses them (`maxclients`) is
    /// not one to send traffic to.
    pub(super) async fn ping(&self) -> Result<(), StoreError> {
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

    pub(super) async fn prune_audit(&self, before_ms: u64) -> Result<usize, StoreError> {
        let mut conn = self.conn.clone();
        let mut principals: Vec<String> = conn
            .zrange(self.audit_index(), 0, -1)
            .await
            .map_err(backend)?;
        let legacy: Vec<String> = conn
            .smembers(self.legacy_audit_index())
            .await
            .map_err(backend)?;
        principals.extend(legacy.iter().cloned());
        principals.sort_unstable();
        principals.dedup();
        let mut pruned = 0;
        for principal in principals {
            let n: usize = conn
                .zrembyscore(self.audit_key(&principal), "-inf", format!("({before_ms}"))
                .await
                .map_err(backend)?;
            pruned += n;
        }
        // A principal whose newest event is past the retention has none left.
        let _: usize = conn
            .zrembyscore(self.audit_index(), "-inf", format!("({before_ms}"))
            .await
            .map_err(backend)?;
        if !legacy.is_empty() {
            // Moved over to the scored index by their next event; until
            // then their keys expire on their own.
            let _: usize = conn.del(self.legacy_audit_index()).await.map_err(backend)?;
        }
        Ok(pruned)
    }

    /// A principal's index of their approvals: a set of (chat or "", tool)
    /// fields, for listing. An entry whose record is gone (a window that
    /// ended) is dropped when a listing meets it.
    fn approvals_key(&self, principal: &str) -> String {
        format!("{}approvals:{principal}", self.prefix)
    }

    /// One remembered approval: `principal`'s under `field` (chat or "", tool).
    fn approval_key(&self, principal: &str, field: &str) -> String {
        format!("{}approval:{principal}\u{1f}{field}", self.prefix)
    }

    fn budget_key(&self, principal: &str, chat_id: &str, tool: &str) -> String {
        format!(
            "{}budget:{principal}\u{1f}{chat_id}\u{1f}{tool}",
            self.prefix
        )
    }

    pub(super) async fn remember(&self, approval: Remembered) -> Result<(), StoreError> {
        let field = field(approval.chat_id.as_deref().unwrap_or(""), &approval.tool);
        let key = self.approval_key(&approval.principal, &field);
        let text =
            serde_json::to_string(&approval).map_err(BackendError::json("encoding a record"))?;
        // A plain SET also clears the expiry of a window grant it replaces.
        let mut set = redis::cmd("SET");
        set.arg(&key).arg(text);
        // A window grant expires itself, relative to now: the instances'
        // clocks and Redis' need not agree (lookups also judge it by the
        // gate's clock). A chat's grant lives at most the retention: chats
        // are many, and a user makes new ones at will.
        let window = approval
            .expires_at_ms
            .map(|until| until.saturating_sub(approval.created_at_ms).max(1));
        let chat = approval.chat_id.is_some().then_some(self.kept_ms);
        if let Some(lives) = window.into_iter().chain(chat).min() {
            set.arg("PX").arg(lives);
        }
        let mut conn = self.conn.clone();
        let () = redis::pipe()
            .atomic()
            .add_command(set)
            .ignore()
            .sadd(self.approvals_key(&approval.principal), &field)
            .ignore()
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        // The index holds no entry of a grant that is gone: it is as large
        // as the principal's live grants, not as every chat ever approved.
        if let Err(e) = self.stored_approvals(&approval.principal).await {
            tracing::warn!("pruning an index of approvals failed: {e}");
        }
        Ok(())
    }

    pub(super) async fn remembered(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
        now_ms: u64,
    ) -> Result<Option<Remembered>, StoreError> {
        let mut conn = self.conn.clone();
        let (this_chat, every_chat): (Option<String>, Option<String>) = redis::cmd("MGET")
            .arg(self.approval_key(principal, &field(chat_id, tool)))
            .arg(self.approval_key(principal, &field("", tool)))
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        for text in [this_chat, every_chat].into_iter().flatten() {
            let approval = remembered_from(&text)?;
            if approval.is_live(now_ms) {
                return Ok(Some(approval));
            }
        }
        Ok(None)
    }

    pub(super) async fn list_remembered(
        &self,
        principal: &str,
        now_ms: u64,
    ) -> Result<Vec<Remembered>, StoreError> {
        Ok(self
            .stored_approvals(principal)
            .await?
            .into_iter()
            .map(|stored| stored.approval)
            .filter(|approval| approval.is_live(now_ms))
            .collect())
    }

    /// `principal`'s approvals as stored, dropping the index entries of
    /// records that are gone on the way.
    async fn stored_approvals(&self, principal: &str) -> Result<Vec<StoredApproval>, StoreError> {
        let index = self.approvals_key(principal);
        let mut conn = self.conn.clone();
        let fields: Vec<String> = conn.smembers(&index).await.map_err(backend)?;
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = fields
            .iter()
            .map(|field| self.approval_key(principal, field))
            .collect();
        let texts: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        let mut stored = Vec::with_capacity(fields.len());
        for ((field, key), text) in fields.into_iter().zip(keys).zip(texts) {
            match text {
                Some(text) => stored.push(StoredApproval {
                    approval: remembered_from(&text)?,
                    field,
                    key,
                    text,
                }),
                None => {
                    let _: i64 = self
                        .forget_entry
                        .key(&index)
                        .key(&key)
                        .arg(&field)
                        .invoke_async(&mut conn)
                        .await
                        .map_err(backend)?;
                }
            }
        }
        Ok(stored)
    }

    pub(super) async fn revoke(&self, principal: &str, id: &str) -> Result<bool, StoreError> {
        let Some(found) = self
            .stored_approvals(principal)
            .await?
            .into_iter()
            .find(|stored| stored.approval.id == id)
        else {
            return Ok(false);
        };
        let mut conn = self.conn.clone();
        let revoked: i64 = self
            .revoke
            .key(&found.key)
            .key(self.approvals_key(principal))
            .arg(&found.text)
            .arg(&found.field)
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(revoked == 1)
    }

    pub(super) async fn grant_budget(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
        n: u32,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        // As long as a chat's remembered approval: a chat's grant either way.
        let _: () = conn
            .pset_ex(self.budget_key(principal, chat_id, tool), n, self.kept_ms)
            .await
            .map_err(backend)?;
        Ok(())
    }

    pub(super) async fn take_budget(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let taken: i64 = self
            .take_budget
            .key(self.budget_key(principal, chat_id, tool))
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(taken == 1)
    }

    /// An instance's heartbeat key.
    fn heartbeat_key(&self, instance: &str) -> String {
        format!("{}{instance}", self.heartbeat_prefix())
    }

    /// What every heartbeat key starts with (`take_over` names one in KEYS).
    pub(super) fn heartbeat_prefix(&self) -> String {
        format!("{}instance:", self.prefix)
    }

    pub(super) async fn heartbeat(&self, instance: &str, ttl: Duration) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let _: () = conn
            .pset_ex(self.heartbeat_key(instance), 1, ttl)
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// A claim is orphaned when its holder is another instance with no live
    /// heartbeat. A claim made before claims named their holder is not: it
    /// may be running on an instance of the version before.
    pub(super) async fn claim(
        &self,
        id: &str,
        now_ms: u64,
        instance: &str,
    ) -> Result<Claim, StoreError> {
        let mut conn = self.conn.clone();
        let reply: Vec<String> = self
            .claim
            .key(self.key(id))
            .key(self.open_key())
            .key(self.inbox_channel())
            .arg(now_ms)
            .arg(instance)
            .arg(id)
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        match reply.as_slice() {
            [won] if won == "won" => Ok(Claim::Won),
            [done, outcome] if done == "done" => Ok(Claim::Done(outcome_from(outcome)?)),
            [claimed, since, by] if claimed == "claimed" => {
                let orphaned = !by.is_empty()
                    && by != instance
                    && !conn
                        .exists::<_, bool>(self.heartbeat_key(by))
                        .await
                        .map_err(backend)?;
                Ok(Claim::InFlight {
                    since_ms: since.parse().unwrap_or(0),
                    orphaned,
                })
            }
            _ => Err(StoreError::NotClaimed(id.to_owned())),
        }
    }

    pub(super) async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        let text =
            serde_json::to_string(&outcome).map_err(BackendError::json("encoding a record"))?;
        let mut conn = self.conn.clone();
        let done: i64 = self
            .finish
            .key(self.key(id))
            .key(self.channel())
            .arg(text)
            .arg(id)
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        if done == 1 {
            Ok(())
        } else {
            Err(StoreError::NotClaimed(id.to_owned()))
        }
    }

    pub(super) async fn status(&self, id: &str) -> Result<Option<Status>, StoreError> {
        let mut conn = self.conn.clone();
        let (issued, since, outcome): (Option<String>, Option<u64>, Option<String>) =
            redis::cmd("HMGET")
                .arg(self.key(id))
                .arg("issued")
                .arg("claimed_at")
                .arg("outcome")
                .query_async(&mut conn)
                .await
                .map_err(backend)?;
        Ok(match (issued, since, outcome) {
            (None, _, _) => None,
            (Some(_), _, Some(outcome)) => Some(Status::Done(outcome_from(&outcome)?)),
            (Some(_), Some(since_ms), None) => Some(Status::Claimed { since_ms }),
            (Some(_), None, None) => Some(Status::Pending),
        })
    }

    pub(super) async fn wait_outcome(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<Option<Outcome>, StoreError> {
        let channel = self.channel();
        let mut decided = self.outcomes.subscribe(&self.client, &channel).await?;
        let wait = async {
            loop {
                // Subscribed first, then looked: an outcome cannot slip between.
                if let Some(Status::Done(outcome)) = self.status(id).await? {
                    return Ok(Some(outcome));
                }
                // Until this one's outcome is told, or anything may have been
                // missed (lagged), or the subscription ended: then a new one.
                let told = async {
                    loop {
                        match decided.recv().await {
                            Ok(decided) if *decided == *id => return true,
                            Ok(_) => {}
                            Err(broadcast::error::RecvError::Lagged(_)) => return true,
                            Err(broadcast::error::RecvError::Closed) => return false,
                        }
                    }
                };
                // Elapsed: look anyway.
                if let Ok(false) = tokio::time::timeout(POLL, told).await {
                    decided = self.outcomes.subscribe(&self.client, &channel).await?;
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(result) => result,
            Err(_elapsed) => Ok(None),
        }
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RedisStore {
    fn kept_i64(&self) -> i64 {
        i64::try_from(self.kept_ms).unwrap_or(i64::MAX)
    }
}

/// The one subscription to the outcomes channel of an instance, shared by
/// every waiter on it: each outcome's id, told to all of them. The first
/// waiter makes it (others that come meanwhile wait for that one); it
/// ends once no waiter is left, or when its connection drops.
struct Outcomes {
    current: std::sync::Mutex<std::sync::Arc<Subscription>>,
    tasks: TaskTracker,
}

/// One subscription, made once.
type Subscription = tokio::sync::OnceCell<broadcast::Sender<std::sync::Arc<str>>>;

/// Outcomes a slow waiter may be behind before it looks for itself.
const TOLD: usize = 1024;

/// How often the subscription looks whether any waiter is left.
const IDLE: Duration = Duration::from_secs(1);

impl Outcomes {
    fn new(tasks: TaskTracker) -> Self {
        Self {
            current: std::sync::Mutex::new(std::sync::Arc::default()),
            tasks,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::sync::Arc<Subscription>> {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The ids of outcomes from now on: from the subscription there is,
    /// or from a new one, subscribed before this returns.
    async fn subscribe(
        self: &std::sync::Arc<Self>,
        client: &redis::Client,
        channel: &str,
    ) -> Result<broadcast::Receiver<std::sync::Arc<str>>, StoreError> {
        loop {
            let current = self.lock().clone();
            let told = current
                .get_or_try_init(|| async {
                    let mut pubsub = client.get_async_pubsub().await.map_err(backend)?;
                    pubsub.subscribe(channel).await.map_err(backend)?;
                    let (told, _) = broadcast::channel(TOLD);
                    self.tasks
                        .spawn(self.clone().tell(pubsub, told.clone(), current.clone()));
                    Ok::<_, StoreError>(told)
                })
                .await?;
            let receiver = told.subscribe();
            // Still the one there is: it counts this waiter before it
            // looks whether any is left (under the same lock).
            if std::sync::Arc::ptr_eq(&self.lock(), &current) {
                return Ok(receiver);
            }
        }
    }

    /// Tells each outcome's id until the subscription drops or no waiter
    /// is left (looked at every [`IDLE`]); then the next waiter makes a
    /// new one.
    async fn tell(
        self: std::sync::Arc<Self>,
        pubsub: redis::aio::PubSub,
        told: broadcast::Sender<std::sync::Arc<str>>,
        this: std::sync::Arc<Subscription>,
    ) {
        let mut messages = pubsub.into_on_message();
        let mut looked = tokio::time::Instant::now();
        loop {
            match tokio::time::timeout(IDLE, messages.next()).await {
                Ok(Some(message)) => {
                    if let Ok(id) = message.get_payload::<String>() {
                        // None listening is no error: the look below ends it.
                        told.send(id.into()).ok();
                    }
                }
                Ok(None) => break,
                Err(_idle) => {}
            }
            if looked.elapsed() < IDLE {
                continue;
            }
            looked = tokio::time::Instant::now();
            let mut current = self.lock();
            if told.receiver_count() == 0 {
                if std::sync::Arc::ptr_eq(&current, &this) {
                    *current = std::sync::Arc::default();
                }
                return;
            }
        }
        // Dropped: its waiters see it closed, and make another.
        let mut current = self.lock();
        if std::sync::Arc::ptr_eq(&current, &this) {
            *current = std::sync::Arc::default();
        }
    }
}

pub(super) fn backend(e: redis::RedisError) -> StoreError {
    StoreError::Backend(e.into())
}

/// An approval as a listing found it: what revoking it needs.
struct StoredApproval {
    approval: Remembered,
    /// Its entry in the principal's index: (chat or "", tool).
    field: String,
    key: String,
    /// The record's text, to revoke this one and no newer one.
    text: String,
}

/// The part of an approval's key after its principal: (chat or "", tool).
fn field(chat_id: &str, tool: &str) -> String {
    format!("{chat_id}\u{1f}{tool}")
}

fn remembered_from(text: &str) -> Result<Remembered, StoreError> {
    serde_json::from_str(text).map_err(BackendError::json("stored approval is corrupt"))
}

fn outcome_from(text: &str) -> Result<Outcome, StoreError> {
    serde_json::from_str(text).map_err(BackendError::json("stored outcome is corrupt"))
}

// Compiled with the `redis-server` feature (`./scripts/test` turns it on),
// so plain `cargo test` needs only Rust and never passes without a server.
#[cfg(all(test, feature = "redis-server"))]
pub(super) mod tests;
