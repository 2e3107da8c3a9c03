//! The SQLite backend: the default for `toolgate serve`. One file, WAL mode,
//! migrations embedded and applied at open. Every call runs on the blocking
//! pool; the connection is never held across an await.

mod approvals;
mod audit;
mod confirmations;
mod grants;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{CachedStatement, Connection, Params};
use rusqlite_migration::{M, Migrations};

use super::backend::{Recorded, StoreBackend};
use super::{BackendError, Outcome, Result, StoreError};

const MIGRATIONS: &[M<'static>] = &[
    M::up(include_str!("migrations/001_confirmations.sql")),
    M::up(include_str!("migrations/002_remembered.sql")),
    M::up(include_str!("migrations/003_audit.sql")),
    M::up(include_str!("migrations/004_claimed_by.sql")),
    M::up(include_str!("migrations/005_remembered_expiry.sql")),
    M::up(include_str!("migrations/006_open_index.sql")),
    M::up(include_str!("migrations/007_record_kind.sql")),
    M::up(include_str!("migrations/008_fingerprint.sql")),
    M::up(include_str!("migrations/009_audit_chain.sql")),
    M::up(include_str!("migrations/010_grants.sql")),
];

/// Room for every statement this file runs, so each is compiled once.
const STATEMENTS: usize = 40;

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
    recorded: Recorded,
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
    pub fn open(path: &Path) -> Result<Self> {
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
            recorded: Recorded::default(),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Db<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&Db(&conn))
        })
        .await
        .map_err(|e| StoreError::Backend(e.into()))?
    }
}

impl StoreBackend for SqliteStore {
    const LABEL: &'static str = "sqlite";

    /// Reads the confirmations table: a missing file or table fails.
    async fn ping(&self) -> Result<()> {
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

    /// Copies what the log holds into the file, as far as readers allow,
    /// without waiting for any of them or for a writer.
    async fn checkpoint(&self) -> Result<()> {
        let conn = self.checkpoints.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                .map_err(backend)
        })
        .await
        .map_err(|e| StoreError::Backend(e.into()))?
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

    /// Every row `sql` returns, each read by `f`.
    fn query<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut statement = self.prepare(sql).map_err(backend)?;
        let rows = statement.query_map(params, f).map_err(backend)?;
        rows.collect::<rusqlite::Result<_>>().map_err(backend)
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

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.into())
}

fn json(text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(BackendError::json("stored JSON is corrupt"))
}

fn outcome_from(text: &str) -> Result<Outcome> {
    serde_json::from_str(text).map_err(BackendError::json("stored outcome is corrupt"))
}

/// SQLite integers are signed; times past 2262 saturate.
fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}
