//! The audit log's hash chain: one chain per store. Every event carries
//! its place (`seq`, from 1), the hash of the event before it (`prev`) and
//! its own hash over both and the event's JSON exactly as it was written;
//! with `audit.signingKey`, an Ed25519 signature of that hash. Pure: the
//! backends keep the head and append atomically (a lock, a transaction,
//! a compare-and-set script retried), [`Sealer`] makes each link, and
//! `verify.rs` checks an export offline, each line's shape first
//! (`shape.rs`).
//!
//! One chain per store rather than per chat or per principal: a deleted
//! event is then a gap wherever it was, whereas a per-chat chain could lose
//! a whole chat unseen. The cost is one head that every append of every
//! instance contends for; decisions are made at a person's pace.

mod shape;
mod verify;

use base64::Engine;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

pub use verify::{Broken, Verified, verify};

/// The `prev` of the first event of a chain.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What the hash of every event starts with: the format's name and version.
const DOMAIN: &str = "toolgate-audit-chain-1";

/// The newest event of a chain: the next one follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: String,
}

/// An event's place in the chain, as the store keeps it beside the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub seq: u64,
    pub prev: String,
    pub hash: String,
    /// Ed25519 over `hash` (its hex text), base64; `None`: no key was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
    /// The signing key's id ([`key_id`]), with `sig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Link {
    /// The head this link makes.
    pub fn head(&self) -> Head {
        Head {
            seq: self.seq,
            hash: self.hash.clone(),
        }
    }
}

/// One event of the chain: its link and its JSON exactly as hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chained {
    pub link: Link,
    pub event: String,
}

/// One line of an export (JSON Lines), the event inline as written.
/// Written with borrowed text (`S = &str`), read with owned.
#[derive(Serialize, Deserialize)]
struct Line<S, E> {
    seq: u64,
    prev: S,
    hash: S,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sig: Option<S>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<S>,
    event: E,
}

impl Chained {
    /// Its export line (without the newline).
    pub fn line(&self) -> Result<String, KeyError> {
        let event = RawValue::from_string(self.event.clone()).map_err(KeyError::Json)?;
        let Link {
            seq,
            prev,
            hash,
            sig,
            key,
        } = &self.link;
        let line = Line {
            seq: *seq,
            prev,
            hash,
            sig: sig.as_ref(),
            key: key.as_ref(),
            event,
        };
        serde_json::to_string(&line).map_err(KeyError::Json)
    }
}

/// The hash of the event at `seq` after `prev`: SHA-256 (hex) of the
/// format's name, `seq`, `prev` and the event's JSON, each on its line.
pub fn hash(seq: u64, prev: &str, event: &str) -> String {
    let mut sha = Sha256::new();
    for part in [DOMAIN, &seq.to_string(), prev] {
        sha.update(part.as_bytes());
        sha.update(b"\n");
    }
    sha.update(event.as_bytes());
    hex::encode(sha.finalize())
}

/// A key's id: the first 16 hex digits of SHA-256 over its 32 bytes.
pub fn key_id(key: &VerifyingKey) -> String {
    let digest = Sha256::digest(key.as_bytes());
    hex::encode(&digest[..8])
}

/// Why a key cannot be read, or an export line not written.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "not an Ed25519 key: expected a PKCS#8 PEM (`openssl genpkey -algorithm ed25519`) or 32 bytes in base64"
    )]
    Format,
    #[error("cannot encode: {0}")]
    Json(serde_json::Error),
}

/// The audit log's signing key, `audit.signingKey`: compared and shown by
/// its public half only.
#[derive(Clone)]
pub struct AuditKey(SigningKey);

impl AuditKey {
    /// A PKCS#8 PEM private key, or its 32-byte seed in base64.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        if text.starts_with("-----BEGIN") {
            return SigningKey::from_pkcs8_pem(text)
                .map(Self)
                .map_err(|_| KeyError::Format);
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| KeyError::Format)?;
        let seed: [u8; 32] = bytes.try_into().map_err(|_| KeyError::Format)?;
        Ok(Self(SigningKey::from_bytes(&seed)))
    }

    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self(SigningKey::from_bytes(&seed))
    }

    pub fn public(&self) -> VerifyingKey {
        self.0.verifying_key()
    }

    /// The public key as a PEM (SPKI), what `audit verify --public-key` reads.
    pub fn public_pem(&self) -> String {
        self.public()
            .to_public_key_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey({})", key_id(&self.public()))
    }
}

impl PartialEq for AuditKey {
    fn eq(&self, other: &Self) -> bool {
        self.public() == other.public()
    }
}

/// A public key as `audit verify --public-key` takes it: a PEM (SPKI) or
/// its 32 bytes in base64.
pub fn parse_public(text: &str) -> Result<VerifyingKey, KeyError> {
    let text = text.trim();
    if text.starts_with("-----BEGIN") {
        return VerifyingKey::from_public_key_pem(text).map_err(|_| KeyError::Format);
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| KeyError::Format)?;
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| KeyError::Format)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::Format)
}

/// Makes each link: the hash, and the signature when a key is set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sealer {
    key: Option<(AuditKey, String)>,
}

impl Sealer {
    pub fn new(key: Option<AuditKey>) -> Self {
        Self {
            key: key.map(|key| {
                let id = key_id(&key.public());
                (key, id)
            }),
        }
    }

    pub fn signs(&self) -> bool {
        self.key.is_some()
    }

    /// The link of `event` (its JSON as stored) after `head` (`None`: the
    /// chain's first).
    pub fn seal(&self, head: Option<&Head>, event: &str) -> Link {
        let (seq, prev) = match head {
            Some(head) => (head.seq.saturating_add(1), head.hash.clone()),
            None => (1, GENESIS.to_owned()),
        };
        let hash = hash(seq, &prev, event);
        let (sig, key) = match &self.key {
            Some((key, id)) => {
                let sig = key.0.sign(hash.as_bytes());
                (
                    Some(base64::engine::general_purpose::STANDARD.encode(sig.to_bytes())),
                    Some(id.clone()),
                )
            }
            None => (None, None),
        };
        Link {
            seq,
            prev,
            hash,
            sig,
            key,
        }
    }
}

#[cfg(test)]
mod tests;
