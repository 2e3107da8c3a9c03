//! The tokens of the approve and deny links: (confirmation id, decision,
//! expiry, the target the link was sent to), signed with HMAC-SHA256.
//! A token is verified, and its expiry checked, before anything is looked
//! up: a forged, altered or expired one costs nothing.
//!
//! `v1.<id>.<a|d>.<expiresAtMs>.<target>.<mac>`, the id, the target and the
//! MAC in unpadded URL-safe base64: only `A-Z a-z 0-9 - _ .`, nothing a URL
//! path must escape.

use super::{Keys, NotifyError};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;

/// Keeps a link's MAC apart from every other MAC made with the same key
/// (a confirmation's seal, `confirm/signing.rs`).
const DOMAIN: &[u8] = b"toolgate-link-v1\n";

/// What a link does when its page's button is pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkDecision {
    Approve,
    Deny,
}

impl LinkDecision {
    fn letter(self) -> &'static str {
        match self {
            LinkDecision::Approve => "a",
            LinkDecision::Deny => "d",
        }
    }

    /// `approve` or `deny`.
    pub fn word(self) -> &'static str {
        match self {
            LinkDecision::Approve => "approve",
            LinkDecision::Deny => "deny",
        }
    }
}

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub confirmation_id: String,
    pub decision: LinkDecision,
    /// The question's expiry: the link dies with it.
    pub expires_at_ms: u64,
    /// The safe name of the target it was sent to, for the audit log.
    pub target: String,
}

/// Why a token is refused. Fixed texts: nothing of the token is repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("this link is not valid")]
    Invalid,
    #[error("this link has expired")]
    Expired,
}

/// The key links are signed with: the first of `toolConfirmation.signingKeys`
/// (each verifies the links it signed, for rotation), or a random one made
/// at start.
#[derive(Debug, Clone)]
pub struct Links {
    keys: Keys,
}

impl Links {
    /// Signs with the first non-empty key; `None` without one.
    pub fn new(keys: impl IntoIterator<Item = String>) -> Option<Self> {
        Keys::new(keys).map(|keys| Self { keys })
    }

    /// A key of 32 random bytes from the operating system: links then die
    /// with the process.
    pub fn random() -> Result<Self, NotifyError> {
        let keys = Keys::random().map_err(NotifyError::Random)?;
        Ok(Self { keys })
    }

    /// The token for `link`: `v2.<id>.<a|d>.<expiry>.<target>.<key id>`,
    /// then the MAC of all that by the key it names.
    pub fn token(&self, link: &Link) -> String {
        let payload = format!(
            "v2.{}.{}.{}.{}.{}",
            B64.encode(&link.confirmation_id),
            link.decision.letter(),
            link.expires_at_ms,
            B64.encode(&link.target),
            self.keys.signer_id(),
        );
        let mac = self.keys.sign(&[DOMAIN, payload.as_bytes()]);
        format!("{payload}.{}", B64.encode(mac))
    }

    /// What `token` says, if the key it names made it (a `v1` token, made
    /// before keys had ids, names none: any key) and it has not expired at
    /// `now_ms`.
    pub fn verify(&self, token: &str, now_ms: u64) -> Result<Link, LinkError> {
        let (payload, mac_text) = token.rsplit_once('.').ok_or(LinkError::Invalid)?;
        let given = B64.decode(mac_text).map_err(|_| LinkError::Invalid)?;
        let (link, by) = parse(payload).ok_or(LinkError::Invalid)?;
        if !self.keys.verify(&[DOMAIN, payload.as_bytes()], &given, by) {
            return Err(LinkError::Invalid);
        }
        if now_ms > link.expires_at_ms {
            return Err(LinkError::Expired);
        }
        Ok(link)
    }
}

/// The link a token's payload says, and the key id it names (`v2`).
fn parse(payload: &str) -> Option<(Link, Option<&str>)> {
    let mut parts = payload.split('.');
    let version = parts.next()?;
    let (Some(id), Some(decision), Some(expires), Some(target)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let by = match version {
        "v1" => None,
        "v2" => Some(parts.next()?),
        _ => return None,
    };
    if parts.next().is_some() {
        return None;
    }
    let text = |b64: &str| String::from_utf8(B64.decode(b64).ok()?).ok();
    let link = Link {
        confirmation_id: text(id)?,
        decision: match decision {
            "a" => LinkDecision::Approve,
            "d" => LinkDecision::Deny,
            _ => return None,
        },
        expires_at_ms: expires.parse().ok()?,
        target: text(target)?,
    };
    Some((link, by))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::key_id;

    fn links(key: &str) -> Links {
        Links::new([key.to_owned()]).unwrap_or_else(|| panic!("no key"))
    }

    fn link() -> Link {
        Link {
            confirmation_id: "adk-3".into(),
            decision: LinkDecision::Approve,
            expires_at_ms: 1_000,
            target: "webhook 1 (hooks.example.com)".into(),
        }
    }

    /// `token` with the part at `index` (split at `.`) replaced.
    fn with_part(token: &str, index: usize, part: &str) -> String {
        let mut parts: Vec<&str> = token.split('.').collect();
        parts[index] = part;
        parts.join(".")
    }

    #[test]
    fn tokens_verify_only_as_made() {
        let key = links("k1");
        let token = key.token(&link());
        let other_id = B64.encode("adk-4");
        #[rustfmt::skip]
        let cases: &[(&str, String, u64, Result<Link, LinkError>)] = &[
            ("valid", token.clone(), 999, Ok(link())),
            ("valid at the last moment", token.clone(), 1_000, Ok(link())),
            ("altered id", with_part(&token, 1, &other_id), 999, Err(LinkError::Invalid)),
            ("altered decision", with_part(&token, 2, "d"), 999, Err(LinkError::Invalid)),
            ("altered expiry", with_part(&token, 3, "9999"), 999, Err(LinkError::Invalid)),
            ("altered target", with_part(&token, 4, "c2xhY2sgMQ"), 999, Err(LinkError::Invalid)),
            ("expired", token.clone(), 1_001, Err(LinkError::Expired)),
            ("wrong key", links("k2").token(&link()), 999, Err(LinkError::Invalid)),
            ("another key's id", with_part(&token, 5, &key_id(b"k2")), 999, Err(LinkError::Invalid)),
            ("no key id", with_part(&token, 5, ""), 999, Err(LinkError::Invalid)),
            ("a version not made", with_part(&token, 0, "v3"), 999, Err(LinkError::Invalid)),
            ("no mac", with_part(&token, 6, ""), 999, Err(LinkError::Invalid)),
            ("mac not base64", with_part(&token, 6, "!!"), 999, Err(LinkError::Invalid)),
            ("not a token", "adk-3".into(), 999, Err(LinkError::Invalid)),
            ("empty", String::new(), 999, Err(LinkError::Invalid)),
        ];
        for (what, token, now, expected) in cases {
            assert_eq!(&key.verify(token, *now), expected, "{what}");
        }
    }

    #[test]
    fn tokens_are_url_safe_and_keys_rotate() {
        let deny = Link {
            confirmation_id: "approval-7/../x y".into(),
            decision: LinkDecision::Deny,
            ..link()
        };
        let token = links("old").token(&deny);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "{token}"
        );
        let rotated =
            Links::new(["new".to_owned(), "old".to_owned()]).unwrap_or_else(|| panic!("no key"));
        assert_eq!(rotated.verify(&token, 0), Ok(deny.clone()));
        // A link sent before keys had ids (`v1`) still verifies, by any key.
        let v1 = format!(
            "v1.{}.d.{}.{}",
            B64.encode(&deny.confirmation_id),
            deny.expires_at_ms,
            B64.encode(&deny.target)
        );
        let mac = links("old").keys.sign(&[DOMAIN, v1.as_bytes()]);
        let v1 = format!("{v1}.{}", B64.encode(mac));
        assert_eq!(rotated.verify(&v1, 0), Ok(deny));
        assert!(Links::new([String::new()]).is_none());
        let random = Links::random().unwrap_or_else(|e| panic!("{e}"));
        let again = Links::random().unwrap_or_else(|e| panic!("{e}"));
        assert!(random.verify(&random.token(&link()), 0).is_ok());
        assert_eq!(
            again.verify(&random.token(&link()), 0),
            Err(LinkError::Invalid)
        );
    }
}
