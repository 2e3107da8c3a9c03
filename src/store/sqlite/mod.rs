//! The SQLite backend: the default for `toolgate serve`. One file, WAL mode,
//! migrations embedded and applied at open. Every call runs on the blocking
//! pool; the connection is never held across an await.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{CachedStatement, Connection, OptionalExtension, Params, params};
use rusqlite_migration::{M, Migrations};
use tokio::sync::watch;

use super::{
    AuditEvent, BackendError, Claim, Cursor, Issued, Outcome, RecordKind, Remembered, Status,
    StoreError,
};
use crate::call::ToolCall;
use crate::protocol::ConfirmationProtocol;

const MIGRATIONS: &[M<'static>] = &[
    M::up(include_str!("migrations/001_confirmations.sql")),
    M::up(include_str!("migrations/002_remembered.sql")),
    M::up(include_str!("migrations/003_audit.sql")),
    M::up(include_str!("migrations/004_claimed_by.sql")),
    M::up(include_str!("migrations/005_remembered_expiry.sql")),
    M::up(include_str!("migrations/006_open_index.sql")),
    M::up(include_str!("migrations/007_record_kind.sql")),
];

/// The columns of an [`Issued`], in the order [`issued_row`] reads them.
macro_rules! issued_columns {
    () => {
        "id, chat_id, principal, call_id, tool_name, args, hint, protocol, issued_at_ms, expires_at_ms, kind"
    };
}

/// The open questions of every chat, after (?1, ?2), unexpired at ?3, at
/// most ?4: a walk of the `confirmations_open` index, which holds open
/// rows only.
const OPEN_ALL: &str = concat!(
    "SELECT ",
    issued_columns!(),
    " FROM confirmations
     WHERE claimed_at_ms IS NULL AND outcome IS NULL AND (issued_at_ms, id) > (?1, ?2) AND expires_at_ms >= ?3
       AND (?5 IS NULL OR principal = ?5)
     ORDER BY issued_at_ms, id LIMIT ?4"
);

/// How often a waiter looks for an outcome recorded by another process.
const POLL: Duration = Duration::from_millis(100);

/// Room for every statement this file runs, so each is compiled once.
const STATEMENTS: usize = 32;

/// How large the log may grow (in 4 KiB pages) before a write copies it
/// into the file itself: a bound for when [`SqliteStore::checkpoint`]
/// is not called, as for a store used without `serve`.
const AUTO_CHECKPOINT_PAGES: u32 = 16_384;

#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    /// A second connection, for checkpoints only: the copy of the log into
    /// the file, and its fsync, run beside the store's calls, not inside one.
    checkpoints: Arc<Mutex<Connection>>,
    /// Bumped when this process records an outcome, to wake its waiters.
    recorded: watch::Sender<u64>,
}

/// Creates `dir` and the folders above it that are missing, each 0700.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the database file 0600 unless it is there; one that is there
/// keeps its mode (its owner chose it), with a warning when others may
/// read it.
fn private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(path)?.permissions().mode();
                if mode & 0o077 != 0 {
                    tracing::warn!(
                        "the database file may be read by other accounts (mode {:o}); `chmod 600` it",
                        mode & 0o777
                    );
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

impl SqliteStore {
    /// Opens (creating it and its folder if needed) and migrates the file.
    /// What it creates only its own account may read: the folders 0700,
    /// the file 0600 (SQLite gives its `-wal` and `-shm` the file's mode).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            private_dir(dir).map_err(|source| BackendError::Folder {
                path: dir.to_owned(),
                source,
            })?;
        }
        private_file(path).map_err(|source| BackendError::File {
            path: path.to_owned(),
            source,
        })?;
        let mut conn = Connection::open(path).map_err(backend)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(backend)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(backend)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(backend)?;
        conn.set_prepared_statement_cache_capacity(STATEMENTS);
        conn.pragma_update(None, "wal_autocheckpoint", AUTO_CHECKPOINT_PAGES)
            .map_err(backend)?;
        Migrations::from_slice(MIGRATIONS)
            .to_latest(&mut conn)
            .map_err(|source| BackendError::Migration {
                path: path.to_owned(),
                source,
            })?;
        let checkpoints = Connection::open(path).map_err(backend)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            checkpoints: Arc::new(Mutex::new(checkpoints)),
            recorded: watch::Sender::new(0),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Db<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&Db(&conn))
        })
        .await
        .map_err(|e| StoreError::Backend(e.into()))?
    }

    /// Copies what the log holds into the file, as far as readers allow,
    /// without waiting for any of them or for a writer.
    pub(super) async fn checkpoint(&self) -> Result<(), StoreError> {
        let conn = self.checkpoints.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                .map_err(backend)
        })
        .await
        .map_err(|e| StoreError::Backend(e.into()))?
    }

    pub(super) async fn insert(&self, issued: Issued) -> Result<(), StoreError> {
        self.with(move |conn| {
            let inserted = conn
                .execute(
                    "INSERT INTO confirmations (id, chat_id, principal, call_id, tool_name, args, hint, protocol, issued_at_ms, expires_at_ms, kind)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT (id) DO NOTHING",
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

    pub(super) async fn get(&self, id: &str) -> Result<Option<Issued>, StoreError> {
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

    pub(super) async fn open_all(
        &self,
        now_ms: u64,
        after: Option<&Cursor>,
        limit: usize,
        asker: Option<&str>,
    ) -> Result<Vec<Issued>, StoreError> {
        let asker = asker.map(str::to_owned);
        // Before every row: no issue time is negative.
        let (after_ms, after_id) = after.map_or((-1, String::new()), |c| {
            (millis(c.issued_at_ms), c.id.clone())
        });
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let mut statement = conn.prepare(OPEN_ALL).map_err(backend)?;
            let rows = statement
                .query_map(
                    params![after_ms, after_id, millis(now_ms), limit, asker],
                    issued_row,
                )
                .map_err(backend)?;
            rows.map(|row| row.map_err(backend).and_then(Row::issued))
                .collect()
        })
        .await
    }

    pub(super) async fn open_confirmations(
        &self,
        principal: &str,
        chat_id: &str,
        now_ms: u64,
    ) -> Result<Vec<Issued>, StoreError> {
        let (principal, chat_id) = (principal.to_owned(), chat_id.to_owned());
        let ids: Vec<String> = self
            .with(move |conn| {
                let mut statement = conn
                    .prepare(
                        "SELECT id FROM confirmations WHERE principal = ?1 AND chat_id = ?2 AND expires_at_ms >= ?3
                         AND claimed_at_ms IS NULL AND outcome IS NULL",
                    )
                    .map_err(backend)?;
                let rows = statement.query_map(params![principal, chat_id, millis(now_ms)], |row| row.get(0)).map_err(backend)?;
                rows.collect::<Result<Vec<String>, _>>().map_err(backend)
            })
            .await?;
        let mut open = Vec::with_capacity(ids.len());
        for id in ids {
            open.extend(self.get(&id).await?);
        }
        Ok(open)
    }

    pub(super) async fn audit(&self, event: AuditEvent) -> Result<(), StoreError> {
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

    pub(super) async fn audit_log(
        &self,
        principal: &str,
        since_ms: u64,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let principal = principal.to_owned();
        self.with(move |conn| {
            let mut statement = conn
                .prepare("SELECT event FROM audit WHERE principal = ?1 AND at_ms >= ?2 ORDER BY at_ms, seq")
                .map_err(backend)?;
            let rows = statement.query_map(params![principal, millis(since_ms)], |row| row.get::<_, String>(0)).map_err(backend)?;
            rows.map(|text| {
                let text = text.map_err(backend)?;
                serde_json::from_str(&text).map_err(BackendError::json("stored audit event is corrupt"))
            })
            .collect()
        })
        .await
    }

    /// Reads the confirmations table: a missing file or table fails.
    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        self.with(move |conn| {
            conn.query_row(
                "SELECT count(*) FROM confirmations WHERE id = ''",
                [],
                |_| Ok(()),
            )
            .map_err(backend)
        })
        .await
    }

    pub(super) async fn prune_audit(&self, before_ms: u64) -> Result<usize, StoreError> {
        self.with(move |conn| {
            conn.execute("DELETE FROM audit WHERE at_ms < ?1", [millis(before_ms)])
                .map_err(backend)
        })
        .await
    }

    pub(super) async fn remember(&self, approval: Remembered) -> Result<(), StoreError> {
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO remembered (id, principal, chat_id, tool, created_at_ms, expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (principal, chat_id, tool) DO UPDATE
                 SET id = excluded.id, created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms",
                params![
                    approval.id,
                    approval.principal,
                    approval.chat_id.unwrap_or_default(),
                    approval.tool,
                    millis(approval.created_at_ms),
                    approval.expires_at_ms.map(millis),
                ],
            )
            .map(drop)
            .map_err(backend)
        })
        .await
    }

    pub(super) async fn remembered(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
        now_ms: u64,
    ) -> Result<Option<Remembered>, StoreError> {
        let (principal, chat_id, tool) =
            (principal.to_owned(), chat_id.to_owned(), tool.to_owned());
        self.with(move |conn| {
            // This chat's approval first, then one for every chat; a lapsed
            // window is skipped, so it cannot hide a live one behind it.
            conn.query_row(
                "SELECT id, principal, chat_id, tool, created_at_ms, expires_at_ms FROM remembered
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

    pub(super) async fn list_remembered(
        &self,
        principal: &str,
        now_ms: u64,
    ) -> Result<Vec<Remembered>, StoreError> {
        let principal = principal.to_owned();
        self.with(move |conn| {
            let mut statement = conn
                .prepare(
                    "SELECT id, principal, chat_id, tool, created_at_ms, expires_at_ms FROM remembered
                     WHERE principal = ?1 AND (expires_at_ms IS NULL OR expires_at_ms > ?2)",
                )
                .map_err(backend)?;
            let rows = statement
                .query_map(params![principal, millis(now_ms)], remembered_row)
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    pub(super) async fn revoke(&self, principal: &str, id: &str) -> Result<bool, StoreError> {
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

    pub(super) async fn grant_budget(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
        n: u32,
    ) -> Result<(), StoreError> {
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

    pub(super) async fn take_budget(
        &self,
        principal: &str,
        chat_id: &str,
        tool: &str,
    ) -> Result<bool, StoreError> {
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

    /// One process owns the file: a claim of any other instance (or of none,
    /// made before claims named their holder) is orphaned.
    pub(super) async fn claim(
        &self,
        id: &str,
        now_ms: u64,
        instance: &str,
    ) -> Result<Claim, StoreError> {
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

    pub(super) async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
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
        self.recorded.send_modify(|n| *n = n.wrapping_add(1));
        Ok(())
    }

    pub(super) async fn status(&self, id: &str) -> Result<Option<Status>, StoreError> {
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

    pub(super) async fn wait_outcome(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<Option<Outcome>, StoreError> {
        let mut changes = self.recorded.subscribe();
        let wait = async {
            loop {
                if let Some(Status::Done(outcome)) = self.status(id).await? {
                    return Ok(Some(outcome));
                }
                // Woken by this process, or polling for another one.
                let _ = tokio::time::timeout(POLL, changes.changed()).await;
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(result) => result,
            Err(_elapsed) => Ok(None),
        }
    }

    pub(super) async fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<Issued>, StoreError> {
        let ids: Vec<String> = self
            .with(move |conn| {
                let mut statement = conn
                    .prepare("SELECT id FROM confirmations WHERE expires_at_ms < ?1 AND claimed_at_ms IS NULL AND outcome IS NULL ORDER BY expires_at_ms LIMIT ?2")
                    .map_err(backend)?;
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let rows = statement.query_map(params![millis(now_ms), limit], |row| row.get(0)).map_err(backend)?;
                rows.collect::<Result<Vec<String>, _>>().map_err(backend)
            })
            .await?;
        let mut expired = Vec::with_capacity(ids.len());
        for id in ids {
            expired.extend(self.get(&id).await?);
        }
        Ok(expired)
    }

    /// Confirmations that expired before `before`, windows over at `now_ms`.
    pub(super) async fn purge_expired(
        &self,
        before: u64,
        now_ms: u64,
    ) -> Result<usize, StoreError> {
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
}

/// The connection as the store's calls use it: every statement through
/// rusqlite's cache, so the SQL is compiled on its first call only (a
/// confirmation's round trip makes eight calls).
struct Db<'c>(&'c Connection);

impl Db<'_> {
    fn prepare(&self, sql: &str) -> rusqlite::Result<CachedStatement<'_>> {
        self.0.prepare_cached(sql)
    }

    fn execute(&self, sql: &str, params: impl Params) -> rusqlite::Result<usize> {
        self.prepare(sql)?.execute(params)
    }

    fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        self.prepare(sql)?.query_row(params, f)
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
    })
}

impl Row {
    fn issued(self) -> Result<Issued, StoreError> {
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
        })
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
    })
}

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.into())
}

fn json(text: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(text).map_err(BackendError::json("stored JSON is corrupt"))
}

fn outcome_from(text: &str) -> Result<Outcome, StoreError> {
    serde_json::from_str(text).map_err(BackendError::json("stored outcome is corrupt"))
}

/// SQLite integers are signed; times past 2262 saturate.
fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn protocol_name(protocol: ConfirmationProtocol) -> &'static str {
    match protocol {
        ConfirmationProtocol::Adk => "adk",
        ConfirmationProtocol::AiSdk => "ai-sdk",
    }
}

#[cfg(test)]
mod tests;
