//! HMAC-SHA256 keys, as links and confirmation seals use them: the first
//! signs, and every signature names its key by id, so that keys can be
//! rotated across instances: each key verifies what it signed, no key
//! verifies another's.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// One keyed MAC per key, cloned for each use, with its id; never empty.
#[derive(Clone)]
pub struct Keys(Vec<Key>);

#[derive(Clone)]
struct Key {
    id: String,
    mac: HmacSha256,
}

/// How many, never a key.
impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keys({})", self.0.len())
    }
}

/// A key's id: the first four bytes of SHA-256 over a domain and the key,
/// in hex. The same on every instance configured with the key; of a key
/// of at least 32 bytes it tells nothing.
pub fn key_id(secret: &[u8]) -> String {
    use sha2::Digest;
    let digest = Sha256::new()
        .chain_update(b"toolgate-signing-key-id\0")
        .chain_update(secret)
        .finalize();
    hex::encode(&digest[..4])
}

impl Keys {
    /// The keys of configured secrets, in order; an empty one is no secret
    /// and is left out. `None` without one.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Option<Self> {
        let keys: Vec<_> = secrets
            .into_iter()
            .filter(|k| !k.is_empty())
            .filter_map(|k| Key::new(k.as_bytes()))
            .collect();
        (!keys.is_empty()).then_some(Self(keys))
    }

    /// One key of 32 random bytes from the operating system.
    pub fn random() -> Result<Self, String> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| e.to_string())?;
        // HMAC takes a key of any length: this cannot fail.
        let key = Key::new(&key).ok_or("an HMAC key of 32 bytes")?;
        Ok(Self(vec![key]))
    }

    /// The id of the key that signs (the first).
    pub fn signer_id(&self) -> &str {
        self.0.first().map_or("", |key| key.id.as_str())
    }

    /// The first key's MAC over `parts`, one after the other.
    pub fn sign(&self, parts: &[&[u8]]) -> Vec<u8> {
        self.0.first().map_or_else(Vec::new, |key| {
            mac(&key.mac, parts).finalize().into_bytes().to_vec()
        })
    }

    /// Whether the key `by` names made `signature` over `parts`; a
    /// signature that names no key (made before keys had ids) is tried
    /// with each.
    pub fn verify(&self, parts: &[&[u8]], signature: &[u8], by: Option<&str>) -> bool {
        self.0
            .iter()
            .filter(|key| by.is_none_or(|id| key.id == id))
            .any(|key| mac(&key.mac, parts).verify_slice(signature).is_ok())
    }
}

impl Key {
    fn new(secret: &[u8]) -> Option<Self> {
        Some(Self {
            id: key_id(secret),
            mac: HmacSha256::new_from_slice(secret).ok()?,
        })
    }
}

fn mac(key: &HmacSha256, parts: &[&[u8]]) -> HmacSha256 {
    let mut mac = key.clone();
    for part in parts {
        mac.update(part);
    }
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(secrets: &[&str]) -> Keys {
        Keys::new(secrets.iter().map(|s| (*s).to_owned())).unwrap_or_else(|| panic!("no keys"))
    }

    /// A signature verifies with the key it names, or with any key when it
    /// names none; never with another key's id.
    #[test]
    fn a_signature_verifies_only_with_the_key_it_names() {
        let (old, rotated) = (keys(&["old"]), keys(&["new", "old"]));
        let parts: &[&[u8]] = &[b"a", b"b"];
        let signed = old.sign(parts);
        let (old_id, new_id) = (key_id(b"old"), key_id(b"new"));
        assert_eq!(old.signer_id(), old_id);
        assert_eq!(rotated.signer_id(), new_id);
        assert_eq!(old_id.len(), 8);
        assert_ne!(old_id, new_id);
        #[rustfmt::skip]
        let cases: [(&str, Option<&str>, bool); 4] = [
            ("named", Some(&old_id), true),
            ("unnamed, made before ids", None, true),
            ("another key's id", Some(&new_id), false),
            ("an id no key has", Some("00000000"), false),
        ];
        for (what, by, verifies) in cases {
            assert_eq!(rotated.verify(parts, &signed, by), verifies, "{what}");
        }
        assert!(!rotated.verify(&[b"a", b"c"], &signed, Some(&old_id)));
        assert!(
            !keys(&["new"]).verify(parts, &signed, None),
            "a dropped key verifies nothing"
        );
    }
}
