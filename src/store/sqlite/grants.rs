//! The SQLite side of [`Grants`]: the `grants` table. A use is one
//! `UPDATE` whose condition is the grant being active, so two instances
//! on one file never spend the same use.

use rusqlite::params;

use super::{SqliteStore, backend, millis};
use crate::store::backend::Grants;
use crate::store::{BackendError, Grant, Result};

impl Grants for SqliteStore {
    async fn add_grant(&self, grant: Grant) -> Result<()> {
        let record = serde_json::to_string(&grant.made())
            .map_err(BackendError::json("encoding a record"))?;
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO grants (id, principal, record, created_at_ms, uses, expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    grant.id,
                    grant.principal,
                    record,
                    millis(grant.created_at_ms),
                    grant.scope.uses,
                    grant.expires_at_ms.map(millis),
                ],
            )
            .map(drop)
            .map_err(backend)
        })
        .await
    }

    async fn grants(&self, principal: &str) -> Result<Vec<Grant>> {
        let principal = principal.to_owned();
        let rows = self
            .with(move |conn| {
                conn.query(
                    "SELECT record, used, revoked_at_ms FROM grants WHERE principal = ?1",
                    params![principal],
                    |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, i64>(1)?,
                            row.get::<_, Option<i64>>(2)?,
                        ))
                    },
                )
            })
            .await?;
        rows.into_iter()
            .map(|(record, used, revoked)| {
                let mut grant: Grant = serde_json::from_str(&record)
                    .map_err(BackendError::json("stored grant is corrupt"))?;
                grant.used = u32::try_from(used).unwrap_or(u32::MAX);
                grant.revoked_at_ms = revoked.map(|at| u64::try_from(at).unwrap_or(0));
                Ok(grant)
            })
            .collect()
    }

    async fn redeem_grant(&self, grant: &Grant, now_ms: u64) -> Result<bool> {
        let (principal, id) = (grant.principal.clone(), grant.id.clone());
        self.with(move |conn| {
            conn.execute(
                "UPDATE grants SET used = used + 1 WHERE principal = ?1 AND id = ?2 AND revoked_at_ms IS NULL
                 AND (uses IS NULL OR used < uses) AND (expires_at_ms IS NULL OR expires_at_ms > ?3)",
                params![principal, id, millis(now_ms)],
            )
            .map(|n| n == 1)
            .map_err(backend)
        })
        .await
    }

    async fn revoke_grant(&self, principal: &str, id: &str, now_ms: u64) -> Result<bool> {
        let (principal, id) = (principal.to_owned(), id.to_owned());
        self.with(move |conn| {
            conn.execute(
                "UPDATE grants SET revoked_at_ms = ?3 WHERE principal = ?1 AND id = ?2 AND revoked_at_ms IS NULL",
                params![principal, id, millis(now_ms)],
            )
            .map(|n| n == 1)
            .map_err(backend)
        })
        .await
    }
}
