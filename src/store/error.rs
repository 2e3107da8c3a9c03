//! How a store call fails.

/// What a store call returns.
pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("confirmation `{0}` is already recorded")]
    Duplicate(String),
    #[error("confirmation `{0}` is not claimed")]
    NotClaimed(String),
    #[error("too many open confirmations ({0}); try again later")]
    Full(usize),
    /// A resume of another instance's turn when this instance already
    /// follows as many such turns as it may (each holds a connection).
    #[error("too many turns of other instances followed at once ({0}); try again later")]
    Followed(usize),
    /// The same for one principal's turns: their share of the followed
    /// turns is taken, and no other user's resume waits for it.
    #[error(
        "too many of this user's turns of other instances followed at once (at most {0}); close one and try again"
    )]
    FollowedPerUser(usize),
    /// The backend failed; its driver's words are for the log only.
    #[error("store failed: {0}")]
    Backend(#[from] BackendError),
}

/// Why a backend failed, with the driver's own error kept as the source.
/// It may name SQL, file paths or addresses: it goes to the log, and a
/// client only ever learns that storage is unavailable.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migrating the sqlite file {}: {source}", .path.display())]
    Migration {
        path: std::path::PathBuf,
        #[source]
        source: rusqlite_migration::Error,
    },
    #[error("cannot create the folder {}: {source}", .path.display())]
    Folder {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the file {}: {source}", .path.display())]
    File {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// A record that does not encode, or a stored one that does not decode.
    #[error("{what}: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// A turn log this instance wrote was taken over by another instance
    /// (this one was taken for dead).
    #[error("another instance took this turn over")]
    TakenOver,
    /// The blocking task that ran the call panicked or was cancelled.
    #[error("store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// An append that other writers kept beating, or the shared state it
    /// reads is not what toolgate wrote.
    #[error("cannot append: {0}")]
    Contended(&'static str),
    /// No store can be opened with this config.
    #[error("{0}")]
    Config(String),
}

/// A backend failure in plain words (a config that names no store; tests).
impl From<&str> for BackendError {
    fn from(why: &str) -> Self {
        BackendError::Config(why.to_owned())
    }
}

impl BackendError {
    pub(crate) fn json(what: &'static str) -> impl FnOnce(serde_json::Error) -> StoreError {
        move |source| StoreError::Backend(BackendError::Json { what, source })
    }
}
