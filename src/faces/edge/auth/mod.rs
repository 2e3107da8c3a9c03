//! Who is asking: API keys, the trusted proxy's principal header, an OIDC
//! issuer's bearer tokens (`oidc.rs`, its keys in `jwks.rs`), and the
//! [`Caller`] extractor every authenticated route takes.

mod jwks;
pub mod oidc;

pub use jwks::checked_url;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, header};

use crate::faces::{ANONYMOUS, ApiError, HttpState};
use crate::identity::{Identity, Source, Token};
use crate::run::Whose;
use oidc::TokenError;

/// A resolved API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub principal: String,
    pub sha256: [u8; 32],
    pub admin: bool,
}

/// The caller of a request, resolved once before the handler runs: with
/// `auth.oidc`, whom a bearer JWT from the issuer names; else the
/// principal of the API key when keys are configured, else the trusted
/// proxy's header, else `anonymous`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub principal: String,
    /// The key is an operator's: it may read and revoke others' records.
    pub operator: bool,
    /// How toolgate knows the principal.
    pub source: Source,
    /// The roles the identity brings (a token's groups, mapped).
    pub roles: Arc<[String]>,
    /// A token's issuer and subject.
    pub token: Option<Arc<Token>>,
}

impl Caller {
    /// `principal`, known by `source`, no operator, no roles of its own.
    fn known(principal: String, source: Source) -> Self {
        Caller {
            principal,
            operator: false,
            source,
            roles: Arc::from([]),
            token: None,
        }
    }

    /// The caller as the gate judges its decisions.
    pub fn identity(&self) -> Identity {
        Identity {
            principal: self.principal.clone(),
            source: self.source,
            roles: self.roles.clone(),
            token: self.token.clone(),
        }
    }

    /// The caller as the gate judges its decisions, taken apart.
    pub fn into_identity(self) -> Identity {
        Identity {
            principal: self.principal,
            source: self.source,
            roles: self.roles,
            token: self.token,
        }
    }

    /// Resolves the caller from a request's headers. With `auth.oidc`, a
    /// bearer credential shaped like a JWT that is no API key must be a
    /// valid token of the issuer; without one, keys and the principal
    /// header work as they would alone, and if neither is configured a
    /// token is needed.
    pub(in crate::faces) async fn from_headers(
        state: &HttpState,
        headers: &HeaderMap,
    ) -> Result<Self, ApiError> {
        if let Some(oidc) = &state.oidc {
            if let Some(token) = bearer_token(headers)? {
                if let Ok(caller) = by_key(state, headers) {
                    return Ok(caller);
                }
                if headers.contains_key(&X_API_KEY) {
                    return Err(ApiError::KeysDisagree);
                }
                let identity = oidc.verify(token).await.map_err(|e| match e {
                    TokenError::Keys(_) => ApiError::NoIssuerKeys(e.into()),
                    _ => ApiError::BadToken(e.into()),
                })?;
                return Ok(Caller {
                    principal: identity.principal,
                    operator: false,
                    source: identity.source,
                    roles: identity.roles,
                    token: identity.token,
                });
            }
            if state.api_keys.is_empty() && state.principal_header.is_none() {
                return Err(ApiError::NoToken);
            }
        }
        Caller::by_config(state, headers)
    }

    /// The caller without a token: a key, the proxy's header, or nobody.
    fn by_config(state: &HttpState, headers: &HeaderMap) -> Result<Self, ApiError> {
        if !state.api_keys.is_empty() {
            return by_key(state, headers);
        }
        let Some(name) = &state.principal_header else {
            return Ok(Caller::known(ANONYMOUS.to_owned(), Source::Anonymous));
        };
        // Two values mean the proxy appended to one the client sent: trust neither.
        if headers.get_all(name).iter().count() > 1 {
            return Err(ApiError::Unauthorized);
        }
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(|v| Caller::known(v.to_owned(), Source::ProxyHeader))
            .ok_or(ApiError::Unauthorized)
    }

    /// Whose records the request reads: the caller's own, or with
    /// `?principal=` another's (the door lets only operators; anyone else
    /// gets 403).
    pub(in crate::faces) fn whose(self, asked: Option<String>) -> Whose {
        Whose {
            operator: self.operator,
            who: self.into_identity(),
            of: asked,
        }
    }
}

/// The header that carries an API key besides `Authorization: Bearer`.
pub const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// The principal of the request's key, compared with every configured key.
fn by_key(state: &HttpState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    use sha2::Digest;
    use subtle::ConstantTimeEq;
    let key = presented_key(headers)?;
    let hash: [u8; 32] = sha2::Sha256::digest(key.as_bytes()).into();
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
            operator: key.admin,
            ..Caller::known(key.principal.clone(), Source::Key)
        })
        .ok_or(ApiError::BadKey)
}

/// The JWT-shaped credential of `Authorization: Bearer`, if any (several
/// that disagree name nobody).
fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let mut token = None;
    let bearers = headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok()?.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|v| oidc::jwt_shaped(v));
    for presented in bearers {
        match token {
            None => token = Some(presented),
            Some(first) if first == presented => {}
            Some(_) => return Err(ApiError::KeysDisagree),
        }
    }
    Ok(token)
}

/// The key a request presents: `Authorization: Bearer <key>` or
/// `X-API-Key: <key>` (trimmed). Several, the same key, are one; keys that
/// disagree name nobody. An `Authorization` of another scheme is no key.
fn presented_key(headers: &HeaderMap) -> Result<&str, ApiError> {
    let bearer = headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok()?.strip_prefix("Bearer "));
    let plain = headers
        .get_all(&X_API_KEY)
        .iter()
        .map(|v| v.to_str().map_err(|_| ApiError::BadKey));
    let mut key = None;
    for presented in bearer.map(Ok).chain(plain) {
        let presented = presented?.trim();
        match key {
            None => key = Some(presented),
            Some(first) if first == presented => {}
            Some(_) => return Err(ApiError::KeysDisagree),
        }
    }
    key.ok_or(ApiError::NoKey)
}

impl FromRequestParts<HttpState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        Caller::from_headers(state, &parts.headers).await
    }
}

/// `?principal=`: operators only, another principal's records.
#[derive(serde::Deserialize)]
struct PrincipalQuery {
    principal: Option<String>,
}

/// Whose records a request reads: the caller's, or with `?principal=`
/// another's (see [`Caller::whose`]).
impl FromRequestParts<HttpState> for Whose {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        let caller = Caller::from_headers(state, &parts.headers).await?;
        let axum::extract::Query(query) =
            axum::extract::Query::<PrincipalQuery>::try_from_uri(&parts.uri)
                .map_err(|e| crate::protocol::RequestError::Invalid(e.body_text()))?;
        Ok(caller.whose(query.principal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Header names and raw values, in order.
    type Headers<'a> = &'a [(&'a str, &'a [u8])];

    fn headers(pairs: Headers<'_>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            let name = HeaderName::from_bytes(name.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
            let value =
                axum::http::HeaderValue::from_bytes(value).unwrap_or_else(|e| panic!("{e}"));
            headers.append(name, value);
        }
        headers
    }

    #[test]
    fn the_key_a_request_presents() {
        // What is presented, and the header sets that present it.
        #[rustfmt::skip]
        let cases: &[(Result<&str, &str>, &[Headers<'_>])] = &[
            (Ok("k1"), &[
                &[("authorization", b"Bearer k1")],
                &[("authorization", b"Bearer  k1 ")],
                &[("x-api-key", b"k1")],
                &[("X-API-Key", b" k1")],
                &[("authorization", b"Bearer k1"), ("x-api-key", b"k1")],
                &[("x-api-key", b"k1"), ("x-api-key", b"k1")],
                // Another scheme is not toolgate's key (a proxy's Basic auth, say).
                &[("authorization", b"Basic a2V5"), ("x-api-key", b"k1")],
            ]),
            (Ok(""), &[&[("x-api-key", b"")]]),
            (Err("no key"), &[&[], &[("authorization", b"Basic a2V5")], &[("authorization", b"bearer k1")]]),
            (Err("disagree"), &[
                &[("authorization", b"Bearer k1"), ("x-api-key", b"k2")],
                &[("x-api-key", b"k1"), ("x-api-key", b"k2")],
                &[("authorization", b"Bearer k1"), ("authorization", b"Bearer k2")],
            ]),
            (Err("bad"), &[&[("x-api-key", b"k\xff")]]),
        ];
        for (expected, sets) in cases {
            for pairs in *sets {
                let headers = headers(pairs);
                let got = presented_key(&headers).map_err(|e| match e {
                    ApiError::NoKey => "no key",
                    ApiError::KeysDisagree => "disagree",
                    ApiError::BadKey => "bad",
                    _ => "other",
                });
                assert_eq!(&got, expected, "{pairs:?}");
            }
        }
    }
}
