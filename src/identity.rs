//! Who someone is, and how toolgate knows it: the source of a caller's
//! principal and the roles its identity brings, which travel with it into
//! a decision made through the API or a `confirm` frame.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// How toolgate knows who made a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Nothing tells callers apart: everyone is `anonymous`.
    Anonymous,
    /// A trusted proxy's header (`auth.principalHeader`) named the user.
    ProxyHeader,
    /// An API key (`auth.apiKeys`).
    Key,
    /// A bearer JWT the configured OpenID Connect issuer signed (`auth.oidc`).
    Oidc,
}

/// Who a request is: its principal, how toolgate knows it, the roles the
/// identity itself brings (an OIDC token's groups, mapped by
/// `auth.oidc.roles`; config's `auth.roles` by name add to these where a
/// decision is judged), and for a token its issuer and subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub principal: String,
    pub source: Source,
    pub roles: Arc<[String]>,
    pub token: Option<Arc<Token>>,
}

/// Whom an OIDC token names: its issuer and subject (`iss`, `sub`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    pub issuer: String,
    pub subject: String,
}

impl Identity {
    /// `principal` known by `source`, bringing no roles of its own.
    pub fn new(principal: impl Into<String>, source: Source) -> Self {
        Self {
            principal: principal.into(),
            source,
            roles: Arc::from([]),
            token: None,
        }
    }
}
