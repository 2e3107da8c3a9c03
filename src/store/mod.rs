//! State: confirmations the server issued and the execution ledger.
//!
//! One closed enum of backends; every backend gives the same guarantees:
//! [`Store::claim`] is atomic, so one caller wins and every other one sees
//! the claim or the recorded outcome.

mod memory;
mod redis;
mod sqlite;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use memory::MemoryStore;
pub use redis::RedisStore;
pub use sqlite::SqliteStore;

use crate::protocol::ConfirmationProtocol;
use crate::provider::ToolCall;

/// A confirmation as the server issued it: the authority for what may run.
#[derive(Debug, Clone, PartialEq)]
pub struct Issued {
    /// The id of the `adk_request_confirmation` call.
    pub id: String,
    pub chat_id: String,
    pub principal: String,
    /// The original call, with the exact arguments the user was asked about.
    pub call: ToolCall,
    pub hint: String,
    /// How it was asked; it must be answered the same way.
    pub protocol: ConfirmationProtocol,
    pub issued_at_ms: u64,
    pub expires_at_ms: u64,
}

/// How a call ended, as recorded in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Outcome {
    Output { output: Value },
    Error { message: String },
    Denied { reason: Option<String> },
}

/// Where a confirmation stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Pending,
    /// Claimed at `since_ms`; no outcome recorded yet.
    Claimed {
        since_ms: u64,
    },
    Done(Outcome),
}

/// The result of trying to claim a confirmation for execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// This caller holds the claim and must record the outcome.
    Won,
    /// Another caller claimed it at `since_ms` and has not recorded an
    /// outcome yet (or never will: it may have crashed).
    InFlight { since_ms: u64 },
    /// The outcome that was recorded.
    Done(Outcome),
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("confirmation `{0}` is already recorded")]
    Duplicate(String),
    #[error("confirmation `{0}` is not claimed")]
    NotClaimed(String),
    #[error("too many open confirmations ({0}); try again later")]
    Full(usize),
    #[error("store failed: {0}")]
    Backend(String),
}

#[derive(Debug, Clone)]
pub enum Store {
    Memory(MemoryStore),
    Sqlite(SqliteStore),
    Redis(std::sync::Arc<RedisStore>),
}

impl Store {
    pub fn memory() -> Self {
        Store::Memory(MemoryStore::default())
    }

    pub fn sqlite(path: &std::path::Path) -> Result<Self, StoreError> {
        Ok(Store::Sqlite(SqliteStore::open(path)?))
    }

    /// Every key starts with `prefix`, so instances of one deployment share it.
    pub async fn redis(url: &str, prefix: &str) -> Result<Self, StoreError> {
        Ok(Store::Redis(std::sync::Arc::new(
            RedisStore::connect(url, prefix).await?,
        )))
    }

    pub async fn insert(&self, issued: Issued) -> Result<(), StoreError> {
        match self {
            Store::Memory(s) => s.insert(issued),
            Store::Sqlite(s) => s.insert(issued).await,
            Store::Redis(s) => s.insert(issued).await,
        }
    }

    pub async fn get(&self, id: &str) -> Result<Option<Issued>, StoreError> {
        match self {
            Store::Memory(s) => Ok(s.get(id)),
            Store::Sqlite(s) => s.get(id).await,
            Store::Redis(s) => s.get(id).await,
        }
    }

    /// Where a confirmation stands, without claiming anything.
    pub async fn status(&self, id: &str) -> Result<Option<Status>, StoreError> {
        match self {
            Store::Memory(s) => Ok(s.status(id)),
            Store::Sqlite(s) => s.status(id).await,
            Store::Redis(s) => s.status(id).await,
        }
    }

    /// Forgets every confirmation that expired before `now_ms`, unless its
    /// call is running. Forgetting is safe: an answer to a confirmation the
    /// server does not know runs nothing.
    pub async fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        match self {
            Store::Memory(s) => Ok(s.purge_expired(now_ms)),
            Store::Sqlite(s) => s.purge_expired(now_ms).await,
            // Redis expires records itself.
            Store::Redis(_) => Ok(0),
        }
    }

    /// Claims a confirmation for execution at `now_ms`; atomic.
    pub async fn claim(&self, id: &str, now_ms: u64) -> Result<Claim, StoreError> {
        match self {
            Store::Memory(s) => s.claim(id, now_ms),
            Store::Sqlite(s) => s.claim(id, now_ms).await,
            Store::Redis(s) => s.claim(id, now_ms).await,
        }
    }

    /// Records the outcome of a claimed confirmation.
    pub async fn finish(&self, id: &str, outcome: Outcome) -> Result<(), StoreError> {
        match self {
            Store::Memory(s) => s.finish(id, outcome),
            Store::Sqlite(s) => s.finish(id, outcome).await,
            Store::Redis(s) => s.finish(id, outcome).await,
        }
    }

    /// Waits up to `timeout` for another caller's outcome.
    pub async fn wait_outcome(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<Option<Outcome>, StoreError> {
        match self {
            Store::Memory(s) => Ok(s.wait_outcome(id, timeout).await),
            Store::Sqlite(s) => s.wait_outcome(id, timeout).await,
            Store::Redis(s) => s.wait_outcome(id, timeout).await,
        }
    }
}

#[cfg(test)]
pub(crate) mod conformance {
    //! The suite every backend passes.
    use super::*;
    use serde_json::json;

    pub fn issued(id: &str) -> Issued {
        Issued {
            id: id.into(),
            chat_id: "chat".into(),
            principal: "anonymous".into(),
            call: ToolCall {
                id: "call-1".into(),
                name: "process_payment".into(),
                args: json!({"amount": 1}),
            },
            hint: "ok?".into(),
            protocol: ConfirmationProtocol::Adk,
            issued_at_ms: 0,
            expires_at_ms: 10,
        }
    }

    pub async fn claims_exactly_once(store: Store) {
        store
            .insert(issued("a"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            store.insert(issued("a")).await,
            Err(StoreError::Duplicate(_))
        ));
        assert_eq!(store.get("a").await.ok().flatten(), Some(issued("a")));
        assert_eq!(store.get("b").await.ok().flatten(), None);
        assert_eq!(store.claim("a", 5).await.ok(), Some(Claim::Won));
        assert_eq!(
            store.claim("a", 5).await.ok(),
            Some(Claim::InFlight { since_ms: 5 })
        );
        let outcome = Outcome::Output { output: json!(1) };
        let waiter = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .wait_outcome("a", Duration::from_secs(5))
                    .await
                    .ok()
                    .flatten()
            })
        };
        store
            .finish("a", outcome.clone())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(waiter.await.ok().flatten(), Some(outcome.clone()));
        assert_eq!(store.claim("a", 5).await.ok(), Some(Claim::Done(outcome)));
        assert!(matches!(
            store
                .finish(
                    "b",
                    Outcome::Error {
                        message: "x".into()
                    }
                )
                .await,
            Err(StoreError::NotClaimed(_))
        ));
        assert_eq!(
            store
                .wait_outcome("b", Duration::from_millis(10))
                .await
                .ok()
                .flatten(),
            None
        );
        assert_eq!(
            store.status("a").await.ok().flatten(),
            Some(Status::Done(Outcome::Output { output: json!(1) }))
        );
        assert_eq!(store.status("b").await.ok().flatten(), None);
    }

    /// `issued()` expires at 10 ms.
    pub async fn purges_what_expired_unless_running(store: Store) {
        for id in ["pending", "running", "done"] {
            store
                .insert(issued(id))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for id in ["running", "done"] {
            assert_eq!(store.claim(id, 5).await.ok(), Some(Claim::Won));
        }
        store
            .finish("done", Outcome::Denied { reason: None })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.purge_expired(10).await.ok(), Some(0));
        assert_eq!(store.purge_expired(11).await.ok(), Some(2));
        assert_eq!(store.get("pending").await.ok().flatten(), None);
        assert_eq!(store.get("done").await.ok().flatten(), None);
        assert!(store.get("running").await.ok().flatten().is_some());
    }
}
