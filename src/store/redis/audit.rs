//! The Redis side of [`AuditLog`]: a sorted set per principal, scored by
//! time, and an index of the principals with events, pruned with them.

use redis::AsyncCommands;

use super::{RedisStore, backend};
use crate::store::backend::AuditLog;
use crate::store::{AuditEvent, BackendError, Result};

impl RedisStore {
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
    async fn audit(&self, event: AuditEvent) -> Result<()> {
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

    async fn audit_log(&self, principal: &str, since_ms: u64) -> Result<Vec<AuditEvent>> {
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
