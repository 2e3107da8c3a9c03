//! The Redis side of [`Approvals`]: a key per remembered approval (a
//! window grant's expires with its window), listed through a set per
//! principal; a key per approve-next budget, taken from in Lua.

use redis::AsyncCommands;

use super::{RedisStore, backend};
use crate::store::backend::{Approvals, Calls};
use crate::store::{BackendError, Remembered, Result};

impl RedisStore {
    /// A principal's index of their approvals: a set of (chat or "", tool)
    /// fields, for listing. An entry whose record is gone (a window that
    /// ended) is dropped when a listing meets it.
    pub(super) fn approvals_key(&self, principal: &str) -> String {
        format!("{}approvals:{principal}", self.prefix)
    }

    /// One remembered approval: `principal`'s under `field` (chat or "", tool).
    pub(super) fn approval_key(&self, principal: &str, field: &str) -> String {
        format!("{}approval:{principal}\u{1f}{field}", self.prefix)
    }

    pub(super) fn budget_key(&self, principal: &str, chat_id: &str, tool: &str) -> String {
        format!(
            "{}budget:{principal}\u{1f}{chat_id}\u{1f}{tool}",
            self.prefix
        )
    }

    /// `principal`'s approvals as stored, dropping the index entries of
    /// records that are gone on the way.
    async fn stored_approvals(&self, principal: &str) -> Result<Vec<StoredApproval>> {
        let index = self.approvals_key(principal);
        let mut conn = self.conn.clone();
        let fields: Vec<String> = conn.smembers(&index).await.map_err(backend)?;
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = fields
            .iter()
            .map(|field| self.approval_key(principal, field))
            .collect();
        let texts: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        let mut stored = Vec::with_capacity(fields.len());
        for ((field, key), text) in fields.into_iter().zip(keys).zip(texts) {
            match text {
                Some(text) => stored.push(StoredApproval {
                    approval: remembered_from(&text)?,
                    field,
                    key,
                    text,
                }),
                None => {
                    let _: i64 = self
                        .forget_entry
                        .key(&index)
                        .key(&key)
                        .arg(&field)
                        .invoke_async(&mut conn)
                        .await
                        .map_err(backend)?;
                }
            }
        }
        Ok(stored)
    }
}

impl Approvals for RedisStore {
    async fn remember(&self, approval: Remembered) -> Result<()> {
        let field = field(approval.chat_id.as_deref().unwrap_or(""), &approval.tool);
        let key = self.approval_key(&approval.principal, &field);
        let text =
            serde_json::to_string(&approval).map_err(BackendError::json("encoding a record"))?;
        // A plain SET also clears the expiry of a window grant it replaces.
        let mut set = redis::cmd("SET");
        set.arg(&key).arg(text);
        // A window grant expires itself, relative to now: the instances'
        // clocks and Redis' need not agree (lookups also judge it by the
        // gate's clock). A chat's grant lives at most the retention: chats
        // are many, and a user makes new ones at will.
        let window = approval
            .expires_at_ms
            .map(|until| until.saturating_sub(approval.created_at_ms).max(1));
        let chat = approval.chat_id.is_some().then_some(self.kept_ms);
        if let Some(lives) = window.into_iter().chain(chat).min() {
            set.arg("PX").arg(lives);
        }
        let mut conn = self.conn.clone();
        let () = redis::pipe()
            .atomic()
            .add_command(set)
            .ignore()
            .sadd(self.approvals_key(&approval.principal), &field)
            .ignore()
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        // The index holds no entry of a grant that is gone: it is as large
        // as the principal's live grants, not as every chat ever approved.
        if let Err(e) = self.stored_approvals(&approval.principal).await {
            tracing::warn!("pruning an index of approvals failed: {e}");
        }
        Ok(())
    }

    async fn remembered(&self, calls: Calls<'_>, now_ms: u64) -> Result<Option<Remembered>> {
        let (principal, chat_id, tool) = calls.parts();
        let mut conn = self.conn.clone();
        let (this_chat, every_chat): (Option<String>, Option<String>) = redis::cmd("MGET")
            .arg(self.approval_key(principal, &field(chat_id, tool)))
            .arg(self.approval_key(principal, &field("", tool)))
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        for text in [this_chat, every_chat].into_iter().flatten() {
            let approval = remembered_from(&text)?;
            if approval.is_live(now_ms) {
                return Ok(Some(approval));
            }
        }
        Ok(None)
    }

    async fn list_remembered(&self, principal: &str, now_ms: u64) -> Result<Vec<Remembered>> {
        Ok(self
            .stored_approvals(principal)
            .await?
            .into_iter()
            .map(|stored| stored.approval)
            .filter(|approval| approval.is_live(now_ms))
            .collect())
    }

    async fn revoke(&self, principal: &str, id: &str) -> Result<bool> {
        let Some(found) = self
            .stored_approvals(principal)
            .await?
            .into_iter()
            .find(|stored| stored.approval.id == id)
        else {
            return Ok(false);
        };
        let mut conn = self.conn.clone();
        let revoked: i64 = self
            .revoke
            .key(&found.key)
            .key(self.approvals_key(principal))
            .arg(&found.text)
            .arg(&found.field)
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(revoked == 1)
    }

    async fn grant_budget(&self, principal: &str, chat_id: &str, tool: &str, n: u32) -> Result<()> {
        let mut conn = self.conn.clone();
        // As long as a chat's remembered approval: a chat's grant either way.
        let _: () = conn
            .pset_ex(self.budget_key(principal, chat_id, tool), n, self.kept_ms)
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn take_budget(&self, principal: &str, chat_id: &str, tool: &str) -> Result<bool> {
        let mut conn = self.conn.clone();
        let taken: i64 = self
            .take_budget
            .key(self.budget_key(principal, chat_id, tool))
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(taken == 1)
    }
}

/// An approval as a listing found it: what revoking it needs.
struct StoredApproval {
    approval: Remembered,
    /// Its entry in the principal's index: (chat or "", tool).
    field: String,
    key: String,
    /// The record's text, to revoke this one and no newer one.
    text: String,
}

/// The part of an approval's key after its principal: (chat or "", tool).
pub(super) fn field(chat_id: &str, tool: &str) -> String {
    format!("{chat_id}\u{1f}{tool}")
}

fn remembered_from(text: &str) -> Result<Remembered> {
    serde_json::from_str(text).map_err(BackendError::json("stored approval is corrupt"))
}
