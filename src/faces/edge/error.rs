use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::notify::LinkError;
use crate::protocol::RequestError;
use crate::run::{GateError, Limited, QuestionError, Refused, SessionError, StoreError, TurnError};

/// A request body that went silent for `server.bodyReadSecs`, or did not
/// arrive by its deadline (`server.bodyTotalSecs`, `protect.rs`); read as
/// [`ApiError::BodyTimeout`].
#[derive(Debug, thiserror::Error)]
#[error("the request body stopped coming or did not arrive within its deadline")]
pub struct BodyDeadline;

/// What a client reads when the store fails, whatever the backend said.
pub const STORAGE_UNAVAILABLE: &str = "storage unavailable";

/// A request refused before its stream starts. Once a stream has started,
/// errors are chunks, not statuses.
///
/// Its `Display` is what the client reads: fixed text wherever the cause
/// could name internals (SQL, paths, addresses, a library's words), which
/// [`ApiError::log`] writes to the log instead.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("request body is larger than {0} bytes")]
    TooLarge(usize),
    /// The body broke off or did not decode; hyper's words go to the log.
    #[error("cannot read the request body")]
    Body(#[source] BytesRejection),
    /// The same, for a body read by hand (a small one, after a check).
    #[error("cannot read the request body")]
    BodyCut(#[source] axum::Error),
    /// The trusted proxy's principal header is missing or repeated; its
    /// name is the deployment's and is not told.
    #[error("the request does not name its user (the proxy in front sets who it is)")]
    Unauthorized,
    #[error("an API key is needed: Authorization: Bearer <key> or X-API-Key: <key>")]
    NoKey,
    #[error("Authorization and X-API-Key name different keys")]
    KeysDisagree,
    #[error("the API key is not valid")]
    BadKey,
    /// `auth.oidc` alone: a bearer token is needed.
    #[error("a bearer token is needed: Authorization: Bearer <token>")]
    NoToken,
    /// A bearer JWT that names nobody: why goes to the log only.
    #[error("the bearer token is not valid")]
    BadToken(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The issuer's keys cannot be had now: not the token's fault.
    #[error("the identity provider's keys cannot be fetched now; try again later")]
    NoIssuerKeys(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("only an operator's key may read another principal's records")]
    Forbidden,
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// Not this caller's decision to make (approvers, four eyes).
    #[error("{0}")]
    NotApprover(String),
    /// Too late: the question expired unanswered.
    #[error("{0}")]
    Gone(String),
    #[error("{}", gate_text(.0))]
    Core(#[from] GateError),
    #[error(transparent)]
    Busy(#[from] crate::run::RunError),
    /// Over a caller's share of a pool, or the pool's total.
    #[error(transparent)]
    Share(#[from] crate::run::ShareError),
    /// A face's session that is not the caller's, or one over their share.
    #[error(transparent)]
    Session(crate::run::SessionError),
    /// Over a limit of `limits`: the text names it.
    #[error(transparent)]
    Limited(Limited),
    #[error(transparent)]
    Guard(#[from] crate::faces::guard::GuardError),
    #[error("the request body did not arrive in time")]
    BodyTimeout,
    /// A confirmation link's token that is forged, altered or expired.
    #[error(transparent)]
    Link(#[from] LinkError),
}

/// The run API's refusals, each as the edge says it (the one place).
impl From<TurnError> for ApiError {
    fn from(e: TurnError) -> Self {
        match e {
            TurnError::Request(e) => ApiError::Request(e),
            TurnError::Busy(e) => ApiError::Busy(e),
            TurnError::Limited(limited) => ApiError::Limited(limited),
            TurnError::Core(e) => ApiError::Core(e),
        }
    }
}

/// The questions' refusals, each as the edge says it.
impl From<QuestionError> for ApiError {
    fn from(e: QuestionError) -> Self {
        match e {
            QuestionError::NotOperator => ApiError::Forbidden,
            QuestionError::Core(e) => ApiError::Core(e),
        }
    }
}

impl ApiError {
    /// A decision on question `id` that was not taken, as the API says it.
    pub(in crate::faces) fn refused(refused: Refused, id: &str) -> Self {
        match refused {
            Refused::Conflict(why) => ApiError::Conflict(why),
            Refused::Expired(why) => ApiError::Gone(why),
            Refused::Forbidden(why) => ApiError::NotApprover(why),
            Refused::Invalid(why) => RequestError::Invalid(why).into(),
            Refused::NotFound => ApiError::NotFound(format!("no confirmation `{id}`")),
        }
    }

    pub(in crate::faces) fn from_body_rejection(rejection: BytesRejection, limit: usize) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(limit)
        } else if timed_out(&rejection) {
            ApiError::BodyTimeout
        } else {
            ApiError::Body(rejection)
        }
    }

    /// A body read by hand that broke off: too slow, or cut.
    pub(in crate::faces) fn from_body_error(error: axum::Error) -> Self {
        if timed_out(&error) {
            ApiError::BodyTimeout
        } else {
            ApiError::BodyCut(error)
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Request(_) | ApiError::Body(_) | ApiError::BodyCut(_) => {
                StatusCode::BAD_REQUEST
            }
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized
            | ApiError::NoKey
            | ApiError::KeysDisagree
            | ApiError::BadKey
            | ApiError::NoToken
            | ApiError::BadToken(_) => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) | ApiError::Session(SessionError::NotFound) => {
                StatusCode::NOT_FOUND
            }
            ApiError::Forbidden | ApiError::NotApprover(_) => StatusCode::FORBIDDEN,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::Busy(_)
            | ApiError::Limited(_)
            | ApiError::Share(_)
            | ApiError::Session(SessionError::Share(_)) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Guard(refused) => refused.status(),
            ApiError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::Link(LinkError::Invalid) => StatusCode::FORBIDDEN,
            ApiError::Link(LinkError::Expired) => StatusCode::GONE,
            // The store, or the issuer, failed: not the client's mistake.
            ApiError::Core(_) | ApiError::NoIssuerKeys(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl ApiError {
    /// Seconds a refused client should wait (`Retry-After`), for a limit.
    fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::Limited(limited) => Some(limited.retry_after_secs()),
            // When a turn in flight ends cannot be known.
            ApiError::Busy(_) | ApiError::Share(_) | ApiError::Session(SessionError::Share(_)) => {
                Some(BUSY_RETRY_SECS)
            }
            _ => None,
        }
    }
}

/// What a client refused for turns in flight is told to wait.
const BUSY_RETRY_SECS: u64 = 5;

/// Whether reading the body failed because `server.bodyReadSecs` passed
/// without data, or `server.bodyTotalSecs` since the request came.
fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(error) = source {
        if error.is::<BodyDeadline>() {
            return true;
        }
        source = error.source();
    }
    false
}

impl ApiError {
    /// Logs why, with the detail the client is not told: the one place a
    /// refused request's cause is logged.
    pub(in crate::faces) fn log(&self) {
        match self {
            ApiError::Core(e) => tracing::error!("the gate failed: {}", e.detail()),
            ApiError::Body(rejection) => {
                tracing::info!(status = %self.status(), "request refused: {self}: {}", rejection.body_text());
            }
            ApiError::BodyCut(e) => {
                tracing::info!(status = %self.status(), "request refused: {self}: {e}");
            }
            ApiError::NoIssuerKeys(why) => {
                tracing::warn!(status = %self.status(), "request refused: {self}: {why}");
            }
            ApiError::BadToken(why) => {
                tracing::info!(status = %self.status(), "request refused: {self}: {why}");
            }
            _ => tracing::info!(status = %self.status(), "request refused: {self}"),
        }
    }

    /// Logs the error and gives the text a client reads, for an error
    /// sent as a frame instead of a response.
    pub(in crate::faces) fn public(self) -> String {
        self.log();
        self.to_string()
    }
}

/// A gate failure as a client reads it: a failed store is only "storage
/// unavailable".
fn gate_text(e: &GateError) -> String {
    match e {
        GateError::Store(StoreError::Backend(_)) => STORAGE_UNAVAILABLE.to_owned(),
        // Fixed texts, or ids and limits the client may know.
        GateError::Store(_) | GateError::Task(_) => e.to_string(),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        let mut body = json!({"error": self.to_string()});
        if let ApiError::Gone(_) = self {
            // How it ended, in the shape a decision's outcome has.
            body["outcome"] = json!(crate::run::Outcome::Expired);
        }
        let mut response = (self.status(), Json(body)).into_response();
        if let Some(secs) = self.retry_after() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::BackendError;

    #[test]
    fn a_failed_store_reads_as_storage_unavailable() {
        let secret = "no such table: ledger at /var/lib/toolgate/db.sqlite3";
        let error = ApiError::Core(GateError::Store(StoreError::Backend(BackendError::Config(
            secret.into(),
        ))));
        assert_eq!(error.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(error.to_string(), STORAGE_UNAVAILABLE);
        let full = ApiError::Core(GateError::Store(StoreError::Full(8)));
        assert_eq!(
            full.to_string(),
            "too many open confirmations (8); try again later"
        );
    }

    #[test]
    fn the_run_apis_refusals_keep_their_statuses_and_texts() {
        let busy = ApiError::from(TurnError::Busy(crate::run::RunError::Total(3)));
        assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(busy.retry_after(), Some(BUSY_RETRY_SECS));
        assert_eq!(busy.to_string(), "too many turns in flight (at most 3)");
        let limited = ApiError::from(TurnError::Limited(Limited::streams()));
        assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(limited.to_string(), Limited::streams().to_string());
        let invalid = ApiError::from(TurnError::Request(RequestError::Invalid("no".into())));
        assert_eq!(invalid.status(), StatusCode::BAD_REQUEST);
        let store = StoreError::Backend(BackendError::Config("secret".into()));
        let failed = ApiError::from(TurnError::from(store));
        assert_eq!(failed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(failed.to_string(), STORAGE_UNAVAILABLE);
    }
}
