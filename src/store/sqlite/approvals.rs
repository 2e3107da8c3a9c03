//! The SQLite side of [`Approvals`]: the `remembered` and `budgets` tables.

use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, backend, millis};
use crate::store::backend::{Approvals, Calls};
use crate::store::{Remembered, Result};

impl Approvals for SqliteStore {
    async fn remember(&self, approval: Remembered) -> Result<()> {
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO remembered (id, principal, chat_id, tool, created_at_ms, expires_at_ms, definition) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (principal, chat_id, tool) DO UPDATE
                 SET id = excluded.id, created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms,
                     definition = excluded.definition",
                params![
                    approval.id,
                    approval.principal,
                    approval.chat_id.unwrap_or_default(),
                    approval.tool,
                    millis(approval.created_at_ms),
                    approval.expires_at_ms.map(millis),
                    approval.definition,
                ],
            )
            .map(drop)
            .map_err(backend)
        })
        .await
    }

    async fn remembered(&self, calls: Calls<'_>, now_ms: u64) -> Result<Option<Remembered>> {
        let (principal, chat_id, tool) = calls.parts();
        let (principal, chat_id, tool) =
            (principal.to_owned(), chat_id.to_owned(), tool.to_owned());
        self.with(move |conn| {
            // This chat's approval first, then one for every chat; a lapsed
            // window is skipped, so it cannot hide a live one behind it.
            conn.query_row(
                "SELECT id, principal, chat_id, tool, created_at_ms, expires_at_ms, definition FROM remembered
                 WHERE principal = ?1 AND tool = ?3 AND chat_id IN (?2, '') AND (expires_at_ms IS NULL OR expires_at_ms > ?4)
                 ORDER BY chat_id = '' LIMIT 1",
                params![principal, chat_id, tool, millis(now_ms)],
                remembered_row,
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn list_remembered(&self, principal: &str, now_ms: u64) -> Result<Vec<Remembered>> {
        let principal = principal.to_owned();
        self.with(move |conn| {
            conn.query(
                "SELECT id, principal, chat_id, tool, created_at_ms, expires_at_ms, definition FROM remembered
                 WHERE principal = ?1 AND (expires_at_ms IS NULL OR expires_at_ms > ?2)",
                params![principal, millis(now_ms)],
                remembered_row,
            )
        })
        .await
    }

    async fn revoke(&self, principal: &str, id: &str) -> Result<bool> {
        let (principal, id) = (principal.to_owned(), id.to_owned());
        self.with(move |conn| {
            conn.execute(
                "DELETE FROM remembered WHERE principal = ?1 AND id = ?2",
                params![principal, id],
            )
            .map(|n| n > 0)
            .map_err(backend)
        })
        .await
    }

    async fn grant_budget(&self, principal: &str, chat_id: &str, tool: &str, n: u32) -> Result<()> {
        let (principal, chat_id, tool) =
            (principal.to_owned(), chat_id.to_owned(), tool.to_owned());
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO budgets (principal, chat_id, tool, remaining) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (principal, chat_id, tool) DO UPDATE SET remaining = excluded.remaining",
                params![principal, chat_id, tool, n],
            )
            .map(drop)
            .map_err(backend)
        })
        .await
    }

    async fn take_budget(&self, principal: &str, chat_id: &str, tool: &str) -> Result<bool> {
        let (principal, chat_id, tool) =
            (principal.to_owned(), chat_id.to_owned(), tool.to_owned());
        self.with(move |conn| {
            conn.execute(
                "UPDATE budgets SET remaining = remaining - 1 WHERE principal = ?1 AND chat_id = ?2 AND tool = ?3 AND remaining > 0",
                params![principal, chat_id, tool],
            )
            .map(|n| n == 1)
            .map_err(backend)
        })
        .await
    }
}

fn remembered_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Remembered> {
    let chat_id: String = row.get(2)?;
    Ok(Remembered {
        id: row.get(0)?,
        principal: row.get(1)?,
        chat_id: (!chat_id.is_empty()).then_some(chat_id),
        tool: row.get(3)?,
        created_at_ms: u64::try_from(row.get::<_, i64>(4)?).unwrap_or(0),
        expires_at_ms: row
            .get::<_, Option<i64>>(5)?
            .map(|at| u64::try_from(at).unwrap_or(0)),
        definition: row.get(6)?,
    })
}
