//! What fails inside the gate, and what of it a client may read.

use crate::store::StoreError;

/// What a client is told is fixed text; [`GateError::detail`] (which may
/// name the store's internals: SQL, addresses) goes to the log only.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{}", public_text(.0))]
    Store(#[from] StoreError),
    /// A gate task ended without an answer (it panicked).
    #[error("a confirmation task failed")]
    Task(String),
}

/// A store error as a client may read it: a backend's own words stay in the log.
fn public_text(e: &StoreError) -> String {
    match e {
        StoreError::Backend(_) => "the confirmation store is unavailable; try again".to_owned(),
        StoreError::Duplicate(_)
        | StoreError::NotClaimed(_)
        | StoreError::Full(_)
        | StoreError::Followed(_)
        | StoreError::FollowedPerUser(_) => e.to_string(),
    }
}

impl GateError {
    /// What failed inside, for the log.
    pub fn detail(&self) -> String {
        match self {
            GateError::Store(e) => e.to_string(),
            GateError::Task(why) => why.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_internals_stay_in_the_log() {
        let secret = "no such table: ledger at /var/lib/toolgate/db.sqlite3";
        let cases = [
            (
                GateError::Store(StoreError::Backend(secret.into())),
                "the confirmation store is unavailable; try again",
            ),
            (GateError::Task(secret.into()), "a confirmation task failed"),
            (
                GateError::Store(StoreError::Full(64)),
                "too many open confirmations (64); try again later",
            ),
        ];
        for (error, public) in cases {
            assert_eq!(error.to_string(), public);
            assert!(
                error.detail().contains(secret)
                    || matches!(error, GateError::Store(StoreError::Full(_)))
            );
        }
    }
}
