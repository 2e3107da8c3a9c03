use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::protocol::RequestError;

/// A request refused before its stream starts. Once a stream has started,
/// errors are chunks, not statuses.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("cannot read the request body: {0}")]
    Body(String),
    #[error("missing header `{0}` naming the user")]
    Unauthorized(String),
    #[error("an API key is needed: Authorization: Bearer <key>")]
    NoKey,
    #[error("the API key is not valid")]
    BadKey,
    #[error("only an operator's key may read another principal's records")]
    Forbidden,
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Gate(#[from] crate::confirm::GateError),
    #[error(transparent)]
    Busy(#[from] super::runs::RunError),
    #[error(transparent)]
    Guard(#[from] super::guard::GuardError),
    #[error("the request body did not arrive in time")]
    BodyTimeout,
}

impl ApiError {
    pub(super) fn from_body_rejection(rejection: BytesRejection, limit: usize) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(limit)
        } else if timed_out(&rejection) {
            ApiError::BodyTimeout
        } else {
            ApiError::Body(rejection.body_text())
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Request(_) | ApiError::Body(_) => StatusCode::BAD_REQUEST,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized(_) | ApiError::NoKey | ApiError::BadKey => {
                StatusCode::UNAUTHORIZED
            }
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Forbidden => StatusCode::FORBIDDEN,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Guard(refused) => refused.status(),
            ApiError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            // The store failed: not the client's mistake.
            ApiError::Gate(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Whether reading the body failed because `server.bodyReadSecs` passed
/// without data (`RequestBodyTimeoutLayer`).
fn timed_out(rejection: &BytesRejection) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(rejection);
    while let Some(error) = source {
        if error.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        source = error.source();
    }
    false
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            ApiError::Gate(e) => tracing::error!("the gate failed: {}", e.detail()),
            _ => tracing::info!(status = %self.status(), "request refused: {self}"),
        }
        (self.status(), Json(json!({"error": self.to_string()}))).into_response()
    }
}
