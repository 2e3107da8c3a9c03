//! The SQLite side of [`Confirmations`]: the `confirmations` table, an
//! index of the open rows for the inbox; waiters woken by this process or
//! polling for another one.

use std::time::Duration;

use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, backend, json, millis, outcome_from};
use crate::call::{Fingerprint, ToolCall};
use crate::protocol::ConfirmationProtocol;
use crate::store::backend::{Confirmations, Page};
use crate::store::{BackendError, Claim, Issued, Outcome, RecordKind, Result, Status, StoreError};

/// The columns of an [`Issued`], in the order [`issued_row`] reads them.
macro_rules! issued_columns {
    () => {
        "id, chat_id, principal, call_id, tool_name, args, hint, protocol, issued_at_ms, expires_at_ms, kind, definition_digest, fingerprint"
    };
}

/// The open questions of every chat, after (?1, ?2), unexpired at ?3, at
/// most ?4: a walk of the `confirmations_open` index, which holds open
/// rows only.
pub(super) const OPEN_ALL: &str = concat!(
    "SELECT ",
    issued_columns!(),
    " FROM confirmations
     WHERE claimed_at_ms IS NULL AND outcome IS NULL AND (issued_at_ms, id) > (?1, ?2) AND expires_at_ms >= ?3
       AND (?5 IS NULL OR principal = ?5)
     ORDER BY issued_at_ms, id LIMIT ?4"
);

/// How often a waiter looks for an outcome recorded by another process.
const POLL: Duration = Duration::from_millis(100);

impl Confirmations for SqliteStore {
    async fn insert(&self, issued: Issued) -> Result<()> {
        self.with(move |conn| {
            let inserted = conn
                .execute(
                    "INSERT INTO confirmations (id, chat_id, principal, call_id, tool_name, args, hint, protocol, issued_at_ms, expires_at_ms, kind, definition_digest, fingerprint)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (id) DO NOTHING",
                    params![
                        issued.id,
                        issued.chat_id,
                        issued.principal,
                        issued.call.id,
                        issued.call.name,
                        issued.call.args.to_string(),
                        issued.hint,
                        protocol_name(issued.protocol),
                        millis(issued.issued_at_ms),
                        millis(issued.expires_at_ms),
                        issued.kind.name(),
                        issued.fingerprint.as_ref().map(|f| &f.definition),
                        issued.fingerprint.as_ref().map(|f| &f.call),
                    ],
                )
                .map_err(backend)?;
            if inserted == 0 {
                return Err(StoreError::Duplicate(issued.id));
            }
            Ok(())
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Option<Issued>> {
        let id = id.to_owned();
        self.with(move |conn| {
            conn.query_row(
                concat!(
                    "SELECT ",
                    issued_columns!(),
                    " FROM confirmations WHERE id = ?1"
                ),
                [&id],
                issued_row,
            )
            .optional()
            .map_err(backend)?
            .map(Row::issued)
            .transpose()
        })
        .await
    }

    async fn status(&self, id: &str) -> Result<Option<Status>> {
        let id = id.to_owned();
        self.with(move |conn| {
            let row: Option<(Option<i64>, Option<String>)> = conn
                .query_row(
                    "SELECT claimed_at_ms, outcome FROM confirmations WHERE id = ?1",
                    [&id],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(backend)?;
            row.map(|(since, outcome)| match (since, outcome) {
                (_, Some(outcome)) => Ok(Status::Done(outcome_from(&outcome)?)),
                (Some(since), None) => Ok(Status::Claimed {
                    since_ms: u64::try_from(since).unwrap_or(0),
                }),
                (None, None) => Ok(Status::Pending),
            })
            .transpose()
        })
        .await
    }

    async fn expired(&self, now_ms: u64, limit: usize) -> Result<Vec<Issued>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ids = self
            .with(move |conn| {
                conn.query(
                    "SELECT id FROM confirmations WHERE expires_at_ms < ?1 AND claimed_at_ms IS NULL AND outcome IS NULL ORDER BY expires_at_ms LIMIT ?2",
                    params![millis(now_ms), limit],
                    |row| row.get(0),
                )
            })
            .await?;
        self.each_issued(ids).await
    }

    /// Confirmations that expired before `before`, windows over at `now_ms`.
    async fn purge_expired(&self, before: u64, now_ms: u64) -> Result<usize> {
        self.with(move |conn| {
            let confirmations = conn
                .execute(
                    "DELETE FROM confirmations WHERE expires_at_ms < ?1 AND NOT (claimed_at_ms IS NOT NULL AND outcome IS NULL)",
                    [millis(before)],
                )
                .map_err(backend)?;
            let windows = conn
                .execute(
                    "DELETE FROM remembered WHERE expires_at_ms <= ?1",
                    [millis(now_ms)],
                )
                .map_err(backend)?;
            Ok(confirmations + windows)
        })
        .await
    }

    async fn open(&self, principal: &str, chat_id: &str, now_ms: u64) -> Result<Vec<Issued>> {
        let (principal, chat_id) = (principal.to_owned(), chat_id.to_owned());
        let ids = self
            .with(move |conn| {
                conn.query(
                    "SELECT id FROM confirmations WHERE principal = ?1 AND chat_id = ?2 AND expires_at_ms >= ?3
                     AND claimed_at_ms IS NULL AND outcome IS NULL",
                    params![principal, chat_id, millis(now_ms)],
                    |row| row.get(0),
                )
            })
            .await?;
        self.each_issued(ids).await
    }

    async fn open_all(&self, page: Page<'_>) -> Result<Vec<Issued>> {
        let (now_ms, after, limit, asker) = page.parts();
        let asker = asker.map(str::to_owned);
        // Before every row: no issue time is negative.
        let (after_ms, after_id) = after.map_or((-1, String::new()), |c| {
            (millis(c.issued_at_ms), c.id.clone())
        });
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let rows = conn.query(
                OPEN_ALL,
                params![after_ms, after_id, millis(now_ms), limit, asker],
                issued_row,
            )?;
            rows.into_iter().map(Row::issued).collect()
        })
        .await
    }

    /// One process owns the file: a claim of any other instance (or of none,
    /// made before claims named their holder) is orphaned.
    async fn claim(&self, id: &str, now_ms: u64, instance: &str) -> Result<Claim> {
        let (id, instance) = (id.to_owned(), instance.to_owned());
        self.with(move |conn| {
            // One statement: atomic, also against other processes on the same file.
            let won = conn
                .execute(
                    "UPDATE confirmations SET claimed_at_ms = ?2, claimed_by = ?3 WHERE id = ?1 AND claimed_at_ms IS NULL AND outcome IS NULL",
                    params![id, millis(now_ms), instance],
                )
                .map_err(backend)?;
            if won == 1 {
                return Ok(Claim::Won);
            }
            let row: Option<(Option<i64>, Option<String>, Option<String>)> = conn
                .query_row("SELECT claimed_at_ms, claimed_by, outcome FROM confirmations WHERE id = ?1", [&id], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()
                .map_err(backend)?;
            match row {
                None => Err(StoreError::NotClaimed(id)),
                Some((_, _, Some(outcome))) => Ok(Claim::Done(outcome_from(&outcome)?)),
                Some((since, by, None)) => Ok(Claim::InFlight {
                    since_ms: since.and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
                    orphaned: by.as_deref() != Some(instance.as_str()),
                }),
            }
        })
        .await
    }

    async fn finish(&self, id: &str, outcome: Outcome) -> Result<()> {
        let id = id.to_owned();
        let text =
            serde_json::to_string(&outcome).map_err(BackendError::json("encoding a record"))?;
        self.with(move |conn| {
            let updated = conn
                .execute(
                    "UPDATE confirmations SET outcome = ?2 WHERE id = ?1 AND claimed_at_ms IS NOT NULL AND outcome IS NULL",
                    params![id, text],
                )
                .map_err(backend)?;
            if updated == 0 {
                return Err(StoreError::NotClaimed(id));
            }
            Ok(())
        })
        .await?;
        self.recorded.bump();
        Ok(())
    }

    async fn wait_outcome(&self, id: &str, timeout: Duration) -> Result<Option<Outcome>> {
        let look = || async move {
            Ok(match self.status(id).await? {
                Some(Status::Done(outcome)) => Some(outcome),
                _ => None,
            })
        };
        // Woken by this process, or polling for another one.
        self.recorded.wait(timeout, Some(POLL), look).await
    }
}

impl SqliteStore {
    /// The confirmations `ids` name that are still there, in that order.
    async fn each_issued(&self, ids: Vec<String>) -> Result<Vec<Issued>> {
        let mut issued = Vec::with_capacity(ids.len());
        for id in ids {
            issued.extend(self.get(&id).await?);
        }
        Ok(issued)
    }
}

/// A row of `issued_columns!()` as read, before its JSON is parsed.
struct Row {
    id: String,
    chat_id: String,
    principal: String,
    call_id: String,
    tool_name: String,
    args: String,
    hint: String,
    protocol: String,
    issued_at_ms: i64,
    expires_at_ms: i64,
    kind: String,
    definition_digest: Option<String>,
    fingerprint: Option<String>,
}

fn issued_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: row.get(0)?,
        chat_id: row.get(1)?,
        principal: row.get(2)?,
        call_id: row.get(3)?,
        tool_name: row.get(4)?,
        args: row.get(5)?,
        hint: row.get(6)?,
        protocol: row.get(7)?,
        issued_at_ms: row.get(8)?,
        expires_at_ms: row.get(9)?,
        kind: row.get(10)?,
        definition_digest: row.get(11)?,
        fingerprint: row.get(12)?,
    })
}

impl Row {
    fn issued(self) -> Result<Issued> {
        Ok(Issued {
            id: self.id,
            chat_id: self.chat_id,
            principal: self.principal,
            call: ToolCall {
                id: self.call_id,
                name: self.tool_name,
                args: json(&self.args)?,
            },
            hint: self.hint,
            protocol: match self.protocol.as_str() {
                "ai-sdk" => ConfirmationProtocol::AiSdk,
                _ => ConfirmationProtocol::Adk,
            },
            issued_at_ms: u64::try_from(self.issued_at_ms).unwrap_or(0),
            expires_at_ms: u64::try_from(self.expires_at_ms).unwrap_or(0),
            kind: RecordKind::named(&self.kind),
            fingerprint: match (self.definition_digest, self.fingerprint) {
                (Some(definition), Some(call)) => Some(Fingerprint { definition, call }),
                _ => None,
            },
        })
    }
}

fn protocol_name(protocol: ConfirmationProtocol) -> &'static str {
    match protocol {
        ConfirmationProtocol::Adk => "adk",
        ConfirmationProtocol::AiSdk => "ai-sdk",
    }
}
