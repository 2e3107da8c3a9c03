//! The SQLite side of [`AuditLog`]: the `audit` table.

use rusqlite::params;

use super::{SqliteStore, backend, millis};
use crate::store::backend::AuditLog;
use crate::store::{AuditEvent, BackendError, Result};

impl AuditLog for SqliteStore {
    async fn audit(&self, event: AuditEvent) -> Result<()> {
        let text =
            serde_json::to_string(&event).map_err(BackendError::json("encoding a record"))?;
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO audit (at_ms, principal, event) VALUES (?1, ?2, ?3)",
                params![millis(event.at_ms), event.principal, text],
            )
            .map(drop)
            .map_err(backend)
        })
        .await
    }

    async fn audit_log(&self, principal: &str, since_ms: u64) -> Result<Vec<AuditEvent>> {
        let principal = principal.to_owned();
        self.with(move |conn| {
            let texts = conn.query(
                "SELECT event FROM audit WHERE principal = ?1 AND at_ms >= ?2 ORDER BY at_ms, seq",
                params![principal, millis(since_ms)],
                |row| row.get::<_, String>(0),
            )?;
            texts
                .iter()
                .map(|text| {
                    serde_json::from_str(text)
                        .map_err(BackendError::json("stored audit event is corrupt"))
                })
                .collect()
        })
        .await
    }

    async fn prune_audit(&self, before_ms: u64) -> Result<usize> {
        self.with(move |conn| {
            conn.execute("DELETE FROM audit WHERE at_ms < ?1", [millis(before_ms)])
                .map_err(backend)
        })
        .await
    }
}
