//! HMAC-SHA256 keys, as links and confirmation seals use them: the first
//! signs, any verifies, so keys can be rotated.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// One keyed MAC per key, cloned for each use; never empty.
#[derive(Clone)]
pub struct Keys(Vec<HmacSha256>);

/// How many, never a key.
impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keys({})", self.0.len())
    }
}

impl Keys {
    /// The keys of configured secrets, in order; an empty one is no secret
    /// and is left out. `None` without one.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Option<Self> {
        let keys: Vec<_> = secrets
            .into_iter()
            .filter(|k| !k.is_empty())
            .filter_map(|k| HmacSha256::new_from_slice(k.as_bytes()).ok())
            .collect();
        (!keys.is_empty()).then_some(Self(keys))
    }

    /// One key of 32 random bytes from the operating system.
    pub fn random() -> Result<Self, String> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| e.to_string())?;
        // HMAC takes a key of any length: this cannot fail.
        let key = HmacSha256::new_from_slice(&key).map_err(|e| e.to_string())?;
        Ok(Self(vec![key]))
    }

    /// The first key's MAC over `parts`, one after the other.
    pub fn sign(&self, parts: &[&[u8]]) -> Vec<u8> {
        self.0.first().map_or_else(Vec::new, |key| {
            mac(key, parts).finalize().into_bytes().to_vec()
        })
    }

    /// Whether one of the keys made `signature` over `parts`.
    pub fn verify(&self, parts: &[&[u8]], signature: &[u8]) -> bool {
        self.0
            .iter()
            .any(|key| mac(key, parts).verify_slice(signature).is_ok())
    }
}

fn mac(key: &HmacSha256, parts: &[&[u8]]) -> HmacSha256 {
    let mut mac = key.clone();
    for part in parts {
        mac.update(part);
    }
    mac
}
