//! An export checked offline (`toolgate audit verify`): every line of the
//! format's fields only (`shape.rs`), in place after the one before it,
//! its hash over its own content, and, with public keys, its signature.
//! The first link that fails is named.

use base64::Engine;
use ed25519_dalek::{Signature, VerifyingKey};
use serde_json::value::RawValue;

use super::shape::{self, Odd};
use super::{GENESIS, Line, hash, key_id};

/// What an intact export holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub events: u64,
    /// The first event's place and the hash it follows (the chain may
    /// begin before the export: that part is not checked).
    pub first: Option<(u64, String)>,
    pub last_seq: Option<u64>,
    /// Whether the signatures were checked (public keys were given).
    pub signatures_checked: bool,
}

/// The first broken link: the line (from 1), the place it claims, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("broken at line {line}{}: {why}", .seq.map(|s| format!(" (seq {s})")).unwrap_or_default())]
pub struct Broken {
    pub line: usize,
    pub seq: Option<u64>,
    pub why: Why,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    #[error("not a line of an audit export")]
    Unreadable,
    /// A field nothing covers: its name, never its value.
    #[error("field {} is not part of the chain: no hash or signature covers it", shape::shown(.0))]
    Field(String),
    /// A key twice in one object: readers differ on which one counts.
    #[error("key {} is given twice in one object: which one counts is ambiguous", shape::shown(.0))]
    Twice(String),
    #[error("the file cannot be read: {0}")]
    Read(String),
    /// A later event where `expected` should be: deleted, or moved.
    #[error("seq {expected} is missing here (deleted or moved), after seq {after}")]
    Missing { expected: u64, after: u64 },
    /// An earlier event where `expected` should be: moved, or repeated.
    #[error("out of order: seq {expected} was expected here (moved or repeated)")]
    OutOfOrder { expected: u64 },
    #[error("its prev is not the hash of the line before it")]
    Prev,
    #[error("the first event of a chain must follow the genesis hash")]
    Genesis,
    #[error("its hash does not match its content (altered?)")]
    Hash,
    #[error("not signed")]
    Unsigned,
    #[error("signed by key {0}, which is not among the public keys given")]
    UnknownKey(String),
    #[error("its signature is not valid for its hash")]
    Signature,
}

/// Checks `lines` (an export, oldest first); with `keys` (`None`: the
/// chain only), every event must be signed by one of them.
pub fn verify<I>(lines: I, keys: Option<&[VerifyingKey]>) -> Result<Verified, Broken>
where
    I: IntoIterator<Item = std::io::Result<String>>,
{
    let keys: Option<Vec<(String, &VerifyingKey)>> =
        keys.map(|keys| keys.iter().map(|k| (key_id(k), k)).collect());
    let mut verified = Verified {
        events: 0,
        first: None,
        last_seq: None,
        signatures_checked: keys.is_some(),
    };
    let mut before: Option<(u64, String)> = None;
    for (i, line) in lines.into_iter().enumerate() {
        let number = i + 1;
        let broken = |seq, why| Broken {
            line: number,
            seq,
            why,
        };
        let text = line.map_err(|e| broken(None, Why::Read(e.to_string())))?;
        if text.trim().is_empty() {
            continue;
        }
        let odd = shape::check(&text).map_err(|_| broken(None, Why::Unreadable))?;
        let line: Result<Line<String, Box<RawValue>>, _> = serde_json::from_str(&text);
        if let Some(odd) = odd {
            let seq = line.ok().map(|line| line.seq);
            return Err(broken(
                seq,
                match odd {
                    Odd::Field(name) => Why::Field(name),
                    Odd::Twice(name) => Why::Twice(name),
                },
            ));
        }
        let line = line.map_err(|_| broken(None, Why::Unreadable))?;
        let seq = Some(line.seq);
        match &before {
            Some((after, _)) if line.seq > after.saturating_add(1) => {
                return Err(broken(
                    seq,
                    Why::Missing {
                        expected: after + 1,
                        after: *after,
                    },
                ));
            }
            Some((after, _)) if line.seq != after.saturating_add(1) => {
                return Err(broken(
                    seq,
                    Why::OutOfOrder {
                        expected: after + 1,
                    },
                ));
            }
            Some((_, prev)) if *prev != line.prev => return Err(broken(seq, Why::Prev)),
            None if line.seq == 1 && line.prev != GENESIS => {
                return Err(broken(seq, Why::Genesis));
            }
            _ => {}
        }
        if hash(line.seq, &line.prev, line.event.get()) != line.hash {
            return Err(broken(seq, Why::Hash));
        }
        if let Some(keys) = &keys {
            check_signature(&line, keys).map_err(|why| broken(seq, why))?;
        }
        if verified.first.is_none() {
            verified.first = Some((line.seq, line.prev.clone()));
        }
        verified.events += 1;
        verified.last_seq = seq;
        before = Some((line.seq, line.hash));
    }
    Ok(verified)
}

fn check_signature(
    line: &Line<String, Box<RawValue>>,
    keys: &[(String, &VerifyingKey)],
) -> Result<(), Why> {
    let (Some(sig), Some(id)) = (&line.sig, &line.key) else {
        return Err(Why::Unsigned);
    };
    let Some((_, key)) = keys.iter().find(|(k, _)| k == id) else {
        return Err(Why::UnknownKey(id.clone()));
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(sig)
        .map_err(|_| Why::Signature)?;
    let sig = Signature::from_slice(&bytes).map_err(|_| Why::Signature)?;
    key.verify_strict(line.hash.as_bytes(), &sig)
        .map_err(|_| Why::Signature)
}
