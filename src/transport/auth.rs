//! Who is asking: API keys, the trusted proxy's principal header, and the
//! [`Caller`] extractor every authenticated route takes.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;

use super::{ANONYMOUS, ApiError, HttpState};

/// A resolved API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub principal: String,
    pub sha256: [u8; 32],
    pub admin: bool,
}

/// The caller of a request, resolved once before the handler runs: the
/// principal of the API key when keys are configured, else the trusted
/// proxy's header, else `anonymous`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub principal: String,
    /// The key is an operator's: it may read and revoke others' records.
    pub operator: bool,
}

impl Caller {
    /// Resolves the caller from a request's headers.
    pub(super) fn from_headers(state: &HttpState, headers: &HeaderMap) -> Result<Self, ApiError> {
        if !state.api_keys.is_empty() {
            return by_key(state, headers);
        }
        let Some(name) = &state.principal_header else {
            return Ok(Caller {
                principal: ANONYMOUS.to_owned(),
                operator: false,
            });
        };
        // Two values mean the proxy appended to one the client sent: trust neither.
        if headers.get_all(name).iter().count() > 1 {
            return Err(ApiError::Unauthorized(name.clone()));
        }
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(|v| Caller {
                principal: v.to_owned(),
                operator: false,
            })
            .ok_or_else(|| ApiError::Unauthorized(name.clone()))
    }

    /// The principal whose records the request reads: the caller's own, or
    /// with `?principal=` another's (operators only; anyone else gets 403).
    pub(super) fn subject(&self, asked: Option<String>) -> Result<String, ApiError> {
        match asked {
            Some(other) if other != self.principal && !self.operator => Err(ApiError::Forbidden),
            Some(other) => Ok(other),
            None => Ok(self.principal.clone()),
        }
    }
}

/// The principal of the bearer key, compared with every configured key.
fn by_key(state: &HttpState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    use sha2::Digest;
    use subtle::ConstantTimeEq;
    let key = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(ApiError::NoKey)?;
    let hash: [u8; 32] = sha2::Sha256::digest(key.trim().as_bytes()).into();
    // Every key is compared, in constant time.
    let found = state.api_keys.iter().fold(None, |found, key| {
        if bool::from(key.sha256.ct_eq(&hash)) {
            Some(key)
        } else {
            found
        }
    });
    found
        .map(|key| Caller {
            principal: key.principal.clone(),
            operator: key.admin,
        })
        .ok_or(ApiError::BadKey)
}

impl FromRequestParts<HttpState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        Caller::from_headers(state, &parts.headers)
    }
}
