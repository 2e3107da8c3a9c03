//! Who someone is, and how toolgate knows it: the source of a caller's
//! principal and the roles its identity brings, which travel with it into
//! every decision and the audit log (`Approver`), and the least source a
//! tool's approvers must have (`toolConfirmation.tools.<tool>.approverIdentity`,
//! [`Verified`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// How toolgate knows who made a request, or that no person decided.
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
    /// The principal configured for the MCP face on stdio: whoever started
    /// the process.
    Stdio,
    /// Whoever holds a signed link (`notify`'s approve and deny links),
    /// when the request that follows it names nobody: the link's bearer.
    Link,
    /// toolgate's own rules decided; no person did.
    Policy,
}

/// `approverIdentity`: the least source an approver's identity must have,
/// on a ladder `proxy-header` < `key` < `oidc`. A header is what a proxy
/// asserts and toolgate cannot check; a key is a secret toolgate checks,
/// but may be shared and does not expire; a token is a person the identity
/// provider signed in, for a short while. Anonymous callers, the stdio
/// face, a link's bearer and the policy meet no rung.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Verified {
    ProxyHeader,
    Key,
    Oidc,
}

impl Source {
    /// Whether an identity from this source is at least `least`.
    pub fn meets(self, least: Verified) -> bool {
        let rung = match self {
            Source::Anonymous | Source::Stdio | Source::Link | Source::Policy => return false,
            Source::ProxyHeader => Verified::ProxyHeader,
            Source::Key => Verified::Key,
            Source::Oidc => Verified::Oidc,
        };
        rung >= least
    }

    /// The word the config and the audit log use.
    pub fn word(self) -> &'static str {
        match self {
            Source::Anonymous => "anonymous",
            Source::ProxyHeader => "proxy-header",
            Source::Key => "key",
            Source::Oidc => "oidc",
            Source::Stdio => "stdio",
            Source::Link => "link",
            Source::Policy => "policy",
        }
    }
}

impl Verified {
    /// The word the config uses.
    pub fn word(self) -> &'static str {
        match self {
            Verified::ProxyHeader => "proxy-header",
            Verified::Key => "key",
            Verified::Oidc => "oidc",
        }
    }
}

/// Who a request is: its principal, how toolgate knows it, the roles the
/// identity itself brings (an OIDC token's groups, mapped by
/// `auth.oidc.roles`; config's `auth.roles` by name add to these where a
/// decision is judged), and for a token its issuer and subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub principal: String,
    pub source: Source,
    pub roles: Arc<[String]>,
    pub token: Option<Arc<Token>>,
}

/// How a principal is known, without it: its source, the roles its
/// identity brings and its token, if any.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Known {
    pub source: Source,
    pub roles: Arc<[String]>,
    pub token: Option<Arc<Token>>,
}

impl Known {
    /// No roles, no token.
    pub fn by(source: Source) -> Self {
        Self {
            source,
            roles: Arc::from([]),
            token: None,
        }
    }
}

/// Whom an OIDC token names: its issuer and subject (`iss`, `sub`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

    /// Its principal, and the rest: what a turn keeps beside its scope.
    pub fn into_parts(self) -> (String, Known) {
        let known = Known {
            source: self.source,
            roles: self.roles,
            token: self.token,
        };
        (self.principal, known)
    }

    /// `principal`, known as `known` says.
    pub fn of(principal: String, known: Known) -> Self {
        Self {
            principal,
            source: known.source,
            roles: known.roles,
            token: known.token,
        }
    }

    /// Who decided, as the audit log keeps it.
    pub fn approver(&self) -> Approver {
        Approver {
            source: self.source,
            principal: Some(self.principal.clone()),
            issuer: self.token.as_ref().map(|t| t.issuer.clone()),
            subject: self.token.as_ref().map(|t| t.subject.clone()),
        }
    }
}

/// Who made a decision and how toolgate knew them, as an audit event
/// records it (`approver`): `{source: oidc, principal, issuer, subject}`,
/// `{source: key, principal}`, `{source: link}` for a link's bearer whom
/// nothing else names, or `{source: policy}` for toolgate's own rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approver {
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl Approver {
    /// No person: toolgate's rules (or a link's bearer whom nothing names).
    pub fn nobody(source: Source) -> Self {
        Self {
            source,
            principal: None,
            issuer: None,
            subject: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_of_sources() {
        use Source::*;
        let cases = [
            (Anonymous, [false, false, false]),
            (Stdio, [false, false, false]),
            (Link, [false, false, false]),
            (Policy, [false, false, false]),
            (ProxyHeader, [true, false, false]),
            (Key, [true, true, false]),
            (Oidc, [true, true, true]),
        ];
        for (source, meets) in cases {
            let got =
                [Verified::ProxyHeader, Verified::Key, Verified::Oidc].map(|l| source.meets(l));
            assert_eq!(got, meets, "{source:?}");
            let word = serde_json::to_value(source).unwrap_or_default();
            assert_eq!(word, source.word(), "{source:?}");
        }
    }

    #[test]
    fn an_approver_as_the_audit_log_writes_it() {
        let mut who = Identity::new("carol", Source::Oidc);
        who.token = Some(Arc::new(Token {
            issuer: "https://idp.example".into(),
            subject: "c-1".into(),
        }));
        let json = serde_json::to_value(who.approver()).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"source": "oidc", "principal": "carol",
                "issuer": "https://idp.example", "subject": "c-1"})
        );
        let key = Identity::new("bob", Source::Key).approver();
        let json = serde_json::to_value(key).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"source": "key", "principal": "bob"})
        );
        let json = serde_json::to_value(Approver::nobody(Source::Policy)).unwrap_or_default();
        assert_eq!(json, serde_json::json!({"source": "policy"}));
    }
}
