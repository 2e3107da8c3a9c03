//! OpenID Connect approvers (`auth.oidc`): a bearer JWT verified against
//! the issuer's keys (`jwks.rs`), its `iss`, `aud`, `exp` and `nbf`
//! checked (with `leewaySecs` of clock skew), its algorithm one its key
//! signs with (never `none`, never HMAC with a public key), and its groups
//! mapped to roles. The token's own `jku`, `jwk` and `x5u` are never
//! followed: only the configured issuer's keys verify.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};
use serde_json::{Map, Value};

use super::jwks::{Found, Jwks, JwksError};
use crate::identity::{Identity, Source, Token};

/// `auth.oidc`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcSettings {
    pub issuer: String,
    pub audience: String,
    pub jwks_uri: Option<String>,
    pub principal_claim: String,
    pub groups_claim: String,
    /// Roles by name, each with the groups that hold it.
    pub roles: BTreeMap<String, Vec<String>>,
    pub leeway: Duration,
    /// The fewest seconds between two fetches of the keys.
    pub refetch: Duration,
}

/// Why a token names nobody. The client reads one fixed text for all of
/// them ([`crate::faces::ApiError::BadToken`]); the log reads these.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TokenError {
    #[error("not a JWT, or its algorithm is not one toolgate verifies ({0})")]
    Malformed(String),
    #[error("no key of the issuer has this token's key id")]
    UnknownKey,
    #[error("the key does not sign with the token's algorithm")]
    Algorithm,
    #[error("the signature does not verify")]
    Signature,
    #[error("expired")]
    Expired,
    #[error("not valid yet")]
    NotYet,
    #[error("another audience")]
    Audience,
    #[error("another issuer")]
    Issuer,
    #[error("claims: {0}")]
    Claims(String),
    /// The issuer's keys could not be had: not the token's fault.
    #[error(transparent)]
    Keys(#[from] JwksError),
}

/// The verifier of one issuer's tokens.
pub struct Oidc {
    settings: OidcSettings,
    jwks: Jwks,
}

impl Oidc {
    pub fn new(settings: OidcSettings) -> Self {
        let jwks = Jwks::new(
            settings.issuer.clone(),
            settings.jwks_uri.clone(),
            settings.refetch,
        );
        Self { settings, jwks }
    }

    /// How many times the issuer's keys were fetched.
    pub fn fetches(&self) -> u64 {
        self.jwks.fetches()
    }

    /// Who `token` names, if the issuer signed it for this audience and it
    /// is valid now.
    pub async fn verify(&self, token: &str) -> Result<Identity, TokenError> {
        let header = decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        let key = match self.jwks.key(header.kid.as_deref()).await? {
            Found::Key(key) => key,
            Found::Unknown => return Err(TokenError::UnknownKey),
        };
        if !key.algorithms.contains(&header.alg) {
            return Err(TokenError::Algorithm);
        }
        let s = &self.settings;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&s.issuer]);
        validation.set_audience(&[&s.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = s.leeway.as_secs();
        validation.validate_nbf = true;
        let claims = decode::<Map<String, Value>>(token, &key.decoding, &validation)
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidSignature => TokenError::Signature,
                ErrorKind::ExpiredSignature => TokenError::Expired,
                ErrorKind::ImmatureSignature => TokenError::NotYet,
                ErrorKind::InvalidAudience => TokenError::Audience,
                ErrorKind::InvalidIssuer => TokenError::Issuer,
                ErrorKind::InvalidAlgorithm => TokenError::Algorithm,
                _ => TokenError::Claims(e.to_string()),
            })?
            .claims;
        identity(s, &claims)
    }
}

/// The identity verified `claims` name: the principal claim's text, the
/// roles whose groups the groups claim lists (a list of texts, or one).
fn identity(s: &OidcSettings, claims: &Map<String, Value>) -> Result<Identity, TokenError> {
    let text = |name: &str| {
        claims
            .get(name)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let principal = text(&s.principal_claim)
        .ok_or_else(|| TokenError::Claims(format!("no `{}`", s.principal_claim)))?;
    let groups: HashSet<&str> = match claims.get(&s.groups_claim) {
        Some(Value::Array(groups)) => groups.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(group)) => HashSet::from([group.as_str()]),
        _ => HashSet::new(),
    };
    let roles: Vec<String> = s
        .roles
        .iter()
        .filter(|(_, held_by)| held_by.iter().any(|g| groups.contains(g.as_str())))
        .map(|(role, _)| role.clone())
        .collect();
    Ok(Identity {
        principal: principal.to_owned(),
        source: Source::Oidc,
        roles: roles.into(),
        token: Some(Arc::new(Token {
            issuer: s.issuer.clone(),
            subject: text("sub").unwrap_or(principal).to_owned(),
        })),
    })
}

/// Whether a bearer credential has a JWT's shape (three base64url parts,
/// the last possibly empty): such a one is a token, any other a key.
pub(super) fn jwt_shaped(credential: &str) -> bool {
    let b64 = |part: &str| {
        part.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let mut parts = credential.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(c), Some(s), None) => {
            !h.is_empty() && !c.is_empty() && b64(h) && b64(c) && b64(s)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings() -> OidcSettings {
        OidcSettings {
            issuer: "https://idp.example".into(),
            audience: "toolgate".into(),
            jwks_uri: None,
            principal_claim: "email".into(),
            groups_claim: "groups".into(),
            roles: BTreeMap::from([
                ("finance".into(), vec!["fin".into(), "cfo-office".into()]),
                ("ops".into(), vec!["sre".into()]),
            ]),
            leeway: Duration::from_secs(30),
            refetch: Duration::from_secs(60),
        }
    }

    #[test]
    fn claims_name_a_principal_and_roles() {
        let cases = [
            (
                json!({"email": "c@x", "sub": "1", "groups": ["fin", "other"]}),
                Some(("c@x", vec!["finance"])),
            ),
            (
                json!({"email": "c@x", "sub": "1", "groups": "sre"}),
                Some(("c@x", vec!["ops"])),
            ),
            (
                json!({"email": "c@x", "sub": "1", "groups": ["sre", "cfo-office"]}),
                Some(("c@x", vec!["finance", "ops"])),
            ),
            (json!({"email": "c@x", "sub": "1"}), Some(("c@x", vec![]))),
            (
                json!({"email": "c@x", "groups": {"fin": true}}),
                Some(("c@x", vec![])),
            ),
            (json!({"email": "", "sub": "1"}), None),
            (json!({"sub": "1"}), None),
        ];
        for (claims, expected) in cases {
            let Value::Object(claims) = claims else {
                continue;
            };
            let got = identity(&settings(), &claims).ok();
            let got = got.as_ref().map(|i| {
                (
                    i.principal.as_str(),
                    i.roles.iter().map(String::as_str).collect::<Vec<_>>(),
                )
            });
            assert_eq!(got, expected, "{claims:?}");
        }
    }

    #[test]
    fn a_token_is_told_from_a_key() {
        for (credential, token) in [
            ("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", true),
            ("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", true),
            ("sk-live-0123456789", false),
            ("a.b", false),
            ("a.b.c.d", false),
            (".b.c", false),
            ("a+b.c.d", false),
        ] {
            assert_eq!(jwt_shaped(credential), token, "{credential}");
        }
    }
}
