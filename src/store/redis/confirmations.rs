//! The Redis side of [`Confirmations`]: one hash per confirmation
//! (`issued`, `claimed_at`, `outcome`) that expires with it, the open
//! index, the expiries, and each chat's index; claims and outcomes in Lua.

use std::time::Duration;

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::{RedisStore, backend, outcome_from};
use crate::call::{Fingerprint, ToolCall};
use crate::protocol::ConfirmationProtocol;
use crate::store::backend::{Confirmations, Page};
use crate::store::{BackendError, Claim, Issued, Outcome, RecordKind, Result, Status, StoreError};

/// How long a record outlives its expiry: a running call's outcome, or
/// that it expired, stays readable.
pub(super) const LINGER_MS: u64 = crate::store::KEPT_AFTER_EXPIRY.as_millis() as u64;

/// A waiter also looks on its own this often, in case a message was missed.
pub(super) const POLL: Duration = Duration::from_millis(500);

/// Most open-index entries one look at Redis reads.
const OPEN_BATCH: usize = 256;

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
    /// Absent for a record that asks nobody (and one stored before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fingerprint: Option<Fingerprint>,
}

impl RedisStore {
    pub(super) fn expiries_key(&self) -> String {
        format!("{}expiries", self.prefix)
    }

    /// The open questions of every chat: a sorted set whose entries all
    /// score 0, so it orders by the entry, [`open_entry`]: issue time, then id.
    pub(super) fn open_key(&self) -> String {
        format!("{}open", self.prefix)
    }

    pub(super) fn chat_key(&self, principal: &str, chat_id: &str) -> String {
        format!("{}chat:{principal}\u{1f}{chat_id}", self.prefix)
    }
}

impl Confirmations for RedisStore {
    async fn insert(&self, issued: Issued) -> Result<()> {
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
            fingerprint: issued.fingerprint,
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

    async fn get(&self, id: &str) -> Result<Option<Issued>> {
        let mut conn = self.conn.clone();
        let text: Option<String> = conn.hget(self.key(id), "issued").await.map_err(backend)?;
        text.as_deref().map(issued_from).transpose()
    }

    async fn status(&self, id: &str) -> Result<Option<Status>> {
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

    async fn expired(&self, now_ms: u64, limit: usize) -> Result<Vec<Issued>> {
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

    /// Redis expires records itself.
    async fn purge_expired(&self, _before_ms: u64, _now_ms: u64) -> Result<usize> {
        Ok(0)
    }

    async fn open(&self, principal: &str, chat_id: &str, now_ms: u64) -> Result<Vec<Issued>> {
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

    /// Reads the open index in order from after `after`, a batch at a time,
    /// until `limit` open ones are found; drops each entry it meets whose
    /// question is no longer open (taken, expired, gone), since none ever
    /// opens again.
    async fn open_all(&self, page: Page<'_>) -> Result<Vec<Issued>> {
        let (now_ms, after, limit, asker) = page.parts();
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

    /// A claim is orphaned when its holder is another instance with no live
    /// heartbeat. A claim made before claims named their holder is not: it
    /// may be running on an instance of the version before.
    async fn claim(&self, id: &str, now_ms: u64, instance: &str) -> Result<Claim> {
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

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<()> {
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

    async fn wait_outcome(&self, id: &str, timeout: Duration) -> Result<Option<Outcome>> {
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

/// A question's entry in the open index: its issue time, zero-padded so
/// that entries sort by it, then its id.
fn open_entry(issued_at_ms: u64, id: &str) -> String {
    format!("{issued_at_ms:020}\u{1f}{id}")
}

fn issued_from(text: &str) -> Result<Issued> {
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
        fingerprint: record.fingerprint,
    })
}

fn is_question(kind: &RecordKind) -> bool {
    kind.asks()
}
