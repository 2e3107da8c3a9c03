//! The SQLite side of [`AuditLog`]: the `audit` table, each event with its
//! place in the chain and its link, appended in one immediate transaction
//! (the head read and the row written with no other writer between, even
//! another process on the same file).

use rusqlite::{OptionalExtension, params};

use super::{Db, SqliteStore, backend, millis};
use crate::store::backend::AuditLog;
use crate::store::chain::{Chained, Link, Sealer};
use crate::store::{AuditEvent, BackendError, Result};

impl AuditLog for SqliteStore {
    async fn audit(&self, event: AuditEvent, text: String, sealer: &Sealer) -> Result<()> {
        let sealer = sealer.clone();
        self.with(move |conn| {
            conn.execute("BEGIN IMMEDIATE", []).map_err(backend)?;
            let appended = append(conn, &event, &text, &sealer);
            match appended {
                Ok(()) => conn.execute("COMMIT", []).map(drop).map_err(backend),
                Err(e) => {
                    let _ = conn.execute("ROLLBACK", []);
                    Err(e)
                }
            }
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

    async fn audit_chain(&self, since_ms: u64) -> Result<Vec<Chained>> {
        self.with(move |conn| {
            let rows = conn.query(
                "SELECT link, event FROM audit WHERE chain_seq >= (
                     SELECT min(chain_seq) FROM audit WHERE chain_seq IS NOT NULL AND at_ms >= ?1
                 ) ORDER BY chain_seq",
                [millis(since_ms)],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
            )?;
            rows.into_iter()
                .map(|(link, event)| {
                    let link: Link = serde_json::from_str(&link)
                        .map_err(BackendError::json("stored audit link is corrupt"))?;
                    Ok(Chained { link, event })
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

/// Reads the head and writes the event after it; inside a transaction.
fn append(conn: &Db<'_>, event: &AuditEvent, text: &str, sealer: &Sealer) -> Result<()> {
    let head = conn
        .query_row(
            "SELECT chain_seq, link FROM audit WHERE chain_seq IS NOT NULL ORDER BY chain_seq DESC LIMIT 1",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)),
        )
        .optional()
        .map_err(backend)?;
    let head = match head {
        Some((_, link)) => {
            let link: Link = serde_json::from_str(&link)
                .map_err(BackendError::json("stored audit link is corrupt"))?;
            Some(link.head())
        }
        None => None,
    };
    let link = sealer.seal(head.as_ref(), text);
    let link_text =
        serde_json::to_string(&link).map_err(BackendError::json("encoding a record"))?;
    conn.execute(
        "INSERT INTO audit (at_ms, principal, event, chain_seq, link) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            millis(event.at_ms),
            event.principal,
            text,
            millis(link.seq),
            link_text
        ],
    )
    .map(drop)
    .map_err(backend)
}
