//! The Redis side of [`Grants`]: one hash per principal, holding each
//! grant as made (its id the field), its uses spent (`id\x1fused`) and
//! its revocation (`id\x1frevoked`); a use and a revocation are each one
//! Lua script, so every instance sees one count. The hash lives the
//! store's retention after the principal's last grant: grants are what a
//! user can multiply.

use std::collections::HashMap;

use super::{RedisStore, backend};
use crate::store::backend::Grants;
use crate::store::{BackendError, Grant, Result};

/// What follows a grant's id in the field of its uses spent.
const USED: &str = "\u{1f}used";
/// What follows a grant's id in the field of its revocation.
const REVOKED: &str = "\u{1f}revoked";

impl RedisStore {
    fn grants_key(&self, principal: &str) -> String {
        format!("{}grants:{principal}", self.prefix)
    }
}

impl Grants for RedisStore {
    async fn add_grant(&self, grant: Grant) -> Result<()> {
        let key = self.grants_key(&grant.principal);
        let text = serde_json::to_string(&grant.made())
            .map_err(BackendError::json("encoding a record"))?;
        let mut conn = self.conn.clone();
        let () = redis::pipe()
            .atomic()
            .hset(&key, &grant.id, text)
            .ignore()
            .pexpire(&key, i64::try_from(self.kept_ms).unwrap_or(i64::MAX))
            .ignore()
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn grants(&self, principal: &str) -> Result<Vec<Grant>> {
        let mut conn = self.conn.clone();
        let fields: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(self.grants_key(principal))
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        let mut grants = Vec::new();
        for (field, text) in &fields {
            if field.contains('\u{1f}') {
                continue;
            }
            let mut grant: Grant = serde_json::from_str(text)
                .map_err(BackendError::json("stored grant is corrupt"))?;
            grant.used = fields
                .get(&format!("{field}{USED}"))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            grant.revoked_at_ms = fields
                .get(&format!("{field}{REVOKED}"))
                .and_then(|at| at.parse().ok());
            grants.push(grant);
        }
        Ok(grants)
    }

    async fn redeem_grant(&self, grant: &Grant, now_ms: u64) -> Result<bool> {
        let mut conn = self.conn.clone();
        let spent: i64 = self
            .redeem_grant
            .key(self.grants_key(&grant.principal))
            .arg(&grant.id)
            .arg(grant.scope.uses.unwrap_or(0))
            .arg(grant.expires_at_ms.unwrap_or(0))
            .arg(now_ms)
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(spent == 1)
    }

    async fn revoke_grant(&self, principal: &str, id: &str, now_ms: u64) -> Result<bool> {
        let mut conn = self.conn.clone();
        let revoked: i64 = self
            .revoke_narrowed
            .key(self.grants_key(principal))
            .arg(id)
            .arg(now_ms)
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(revoked == 1)
    }
}
