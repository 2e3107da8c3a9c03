//! The Redis side of [`AuditLog`]: a sorted set per principal, scored by
//! time, and an index of the principals with events, pruned with them;
//! each member the event's link in the chain and its JSON. The chain's
//! head is one key every instance appends after, by compare-and-set
//! (`lua/audit_append.lua`), retried when another instance came first.

use redis::AsyncCommands;

use super::{RedisStore, backend};
use crate::store::backend::AuditLog;
use crate::store::chain::{Chained, Head, Link, Sealer};
use crate::store::{AuditEvent, BackendError, Result};

/// How often an append reads the head again when other instances
/// appended first, before it fails.
const APPEND_ATTEMPTS: u64 = 200;

/// A member's link (none for an event from before the chain) and its event.
fn split(member: &str) -> (Option<&str>, &str) {
    match member.split_once('\u{1f}') {
        Some((link, event)) if link.starts_with('{') => (Some(link), event),
        Some((_, event)) => (None, event),
        None => (None, member),
    }
}

/// The head as the append script keeps it: "seq hash".
fn parse_head(text: &str) -> Result<Head> {
    text.split_once(' ')
        .and_then(|(seq, hash)| {
            Some(Head {
                seq: seq.parse().ok()?,
                hash: hash.to_owned(),
            })
        })
        .ok_or_else(|| BackendError::Contended("a corrupt audit chain head").into())
}

impl RedisStore {
    /// The audit chain's head, "seq hash": one per store.
    fn audit_head(&self) -> String {
        format!("{}audit-head", self.prefix)
    }

    /// One sorted set per principal, scored by time.
    pub(super) fn audit_key(&self, principal: &str) -> String {
        format!("{}audit:{principal}", self.prefix)
    }

    /// The principals with audit events, scored by their newest event's
    /// time: pruned with the events, so it holds only principals with an
    /// event within the retention.
    pub(super) fn audit_index(&self) -> String {
        format!("{}audit-index", self.prefix)
    }

    /// The index before it was scored: a set that only grew. Read and
    /// removed by the next prune.
    fn legacy_audit_index(&self) -> String {
        format!("{}audit-principals", self.prefix)
    }
}

impl AuditLog for RedisStore {
    async fn audit(&self, event: AuditEvent, text: String, sealer: &Sealer) -> Result<()> {
        let mut conn = self.conn.clone();
        let head_key = self.audit_head();
        let key = self.audit_key(&event.principal);
        // Read the head, seal after it, append if it is still the head;
        // else another instance appended first: read it again.
        for attempt in 0..APPEND_ATTEMPTS {
            let read: Option<String> = conn.get(&head_key).await.map_err(backend)?;
            let head = read.as_deref().map(parse_head).transpose()?;
            let link = sealer.seal(head.as_ref(), &text);
            let member = format!(
                "{}\u{1f}{text}",
                serde_json::to_string(&link).map_err(BackendError::json("encoding a record"))?
            );
            // Every key lives the retention past its newest event: by then
            // the prune has taken every event in it anyway.
            let appended: i64 = self
                .audit_append
                .key(&head_key)
                .key(&key)
                .key(self.audit_index())
                .arg(read.unwrap_or_default())
                .arg(format!("{} {}", link.seq, link.hash))
                .arg(member)
                .arg(event.at_ms)
                .arg(self.kept_i64())
                .arg(&event.principal)
                .invoke_async(&mut conn)
                .await
                .map_err(backend)?;
            if appended == 1 {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(attempt.min(20))).await;
        }
        Err(BackendError::Contended("the audit chain's head").into())
    }

    async fn audit_log(&self, principal: &str, since_ms: u64) -> Result<Vec<AuditEvent>> {
        let mut conn = self.conn.clone();
        let members: Vec<String> = conn
            .zrangebyscore(self.audit_key(principal), since_ms, "+inf")
            .await
            .map_err(backend)?;
        members
            .iter()
            .map(|m| {
                serde_json::from_str(split(m).1)
                    .map_err(BackendError::json("stored audit event is corrupt"))
            })
            .collect()
    }

    async fn audit_chain(&self, since_ms: u64) -> Result<Vec<Chained>> {
        let mut conn = self.conn.clone();
        let principals: Vec<String> = conn
            .zrange(self.audit_index(), 0, -1)
            .await
            .map_err(backend)?;
        // Every principal's events: the chain goes on from the first event
        // since then, whoever's events follow it.
        let mut chain = Vec::new();
        let mut from = u64::MAX;
        for principal in principals {
            let members: Vec<(String, u64)> = conn
                .zrangebyscore_withscores(self.audit_key(&principal), "-inf", "+inf")
                .await
                .map_err(backend)?;
            for (member, at_ms) in members {
                let (link, event) = split(&member);
                let Some(link) = link else { continue };
                let link: Link = serde_json::from_str(link)
                    .map_err(BackendError::json("stored audit link is corrupt"))?;
                if at_ms >= since_ms {
                    from = from.min(link.seq);
                }
                chain.push(Chained {
                    link,
                    event: event.to_owned(),
                });
            }
        }
        chain.retain(|c| c.link.seq >= from);
        chain.sort_unstable_by_key(|c| c.link.seq);
        Ok(chain)
    }

    async fn prune_audit(&self, before_ms: u64) -> Result<usize> {
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
}
