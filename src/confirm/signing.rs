//! Signed confirmations: each issued confirmation carries an HMAC-SHA256
//! over (confirmation id, chat, principal, tool, canonical arguments,
//! expiry) that travels through the client in the tool-input chunk's
//! `providerMetadata` (returned as the part's `callProviderMetadata`).
//! Answers are verified before any store lookup, so forged ones cost nothing.

use serde_json::Value;
use sha2::Sha256;

use crate::call::ToolCall;
use crate::notify::Keys;
pub use crate::protocol::answer::Seal;

/// Signs with the first key; each seal names its key, which alone
/// verifies it, so keys can be rotated.
#[derive(Debug, Clone)]
pub struct Signer {
    keys: Keys,
}

/// What a seal covers.
pub struct Subject<'a> {
    pub confirmation_id: &'a str,
    pub chat_id: &'a str,
    pub principal: &'a str,
    pub call: &'a ToolCall,
    pub expires_at_ms: u64,
}

impl Signer {
    /// `None` without keys: signing is off.
    pub fn new(keys: impl IntoIterator<Item = String>) -> Option<Self> {
        Keys::new(keys).map(|keys| Self { keys })
    }

    /// The seal of `subject`: `<key id>-<hex HMAC>`, so that only the key
    /// that made it verifies it.
    pub fn seal(&self, subject: &Subject<'_>) -> Seal {
        let mac = self.keys.sign(&[message(subject).as_bytes()]);
        Seal {
            signature: format!("{}-{}", self.keys.signer_id(), hex::encode(mac)),
            expires_at_ms: subject.expires_at_ms,
        }
    }

    /// Whether `seal` was made for exactly this subject by the key it
    /// names (a seal made before keys had ids names none: by any key).
    pub fn verify(&self, seal: &Seal, subject: &Subject<'_>) -> bool {
        let (by, mac) = match seal.signature.split_once('-') {
            Some((id, mac)) => (Some(id), mac),
            None => (None, seal.signature.as_str()),
        };
        let Ok(signature) = hex::decode(mac) else {
            return false;
        };
        seal.expires_at_ms == subject.expires_at_ms
            && (self.keys).verify(&[message(subject).as_bytes()], &signature, by)
    }
}

/// What a seal's MAC covers.
fn message(subject: &Subject<'_>) -> String {
    let mut message = String::with_capacity(256);
    for field in [
        "toolgate-confirmation-v1",
        subject.confirmation_id,
        subject.chat_id,
        subject.principal,
        &subject.call.id,
        &subject.call.name,
    ] {
        // Length-prefixed, so no field can run into the next.
        message.push_str(&field.len().to_string());
        message.push(':');
        message.push_str(field);
    }
    canonical(&subject.call.args, &mut message);
    message.push('|');
    message.push_str(&subject.expires_at_ms.to_string());
    message
}

/// SHA-256 (hex) of the canonical arguments: what the audit log keeps.
pub fn digest(args: &Value) -> String {
    use sha2::Digest;
    let mut text = String::new();
    canonical(args, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// JSON with sorted keys and integral numbers written as integers, so that
/// the arguments a JavaScript client sends back (`50.0` as `50`, keys in any
/// order) sign the same as the issued ones.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => {
                out.push_str(&format!("{}", f as i64));
            }
            _ => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn subject<'a>(call: &'a ToolCall, chat: &'a str) -> Subject<'a> {
        Subject {
            confirmation_id: "adk-1",
            chat_id: chat,
            principal: "alice",
            call,
            expires_at_ms: 99,
        }
    }

    #[test]
    fn seals_verify_only_for_their_subject() {
        let signer = Signer::new(["k1".to_owned()]).unwrap_or_else(|| panic!("no signer"));
        let call = ToolCall {
            id: "c".into(),
            name: "pay".into(),
            args: json!({"amount": 50.0, "to": "b"}),
        };
        let seal = signer.seal(&subject(&call, "chat"));
        assert!(signer.verify(&seal, &subject(&call, "chat")));
        // What a JavaScript client sends back is the same call.
        let echoed = ToolCall {
            args: json!({"to": "b", "amount": 50}),
            ..call.clone()
        };
        assert!(signer.verify(&seal, &subject(&echoed, "chat")));
        assert!(!signer.verify(&seal, &subject(&call, "other")));
        let more = ToolCall {
            args: json!({"amount": 51, "to": "b"}),
            ..call.clone()
        };
        assert!(!signer.verify(&seal, &subject(&more, "chat")));
        let later = Seal {
            expires_at_ms: 100,
            ..seal.clone()
        };
        assert!(!signer.verify(&later, &subject(&call, "chat")));
        assert!(!signer.verify(
            &Seal {
                signature: "zz".into(),
                ..seal.clone()
            },
            &subject(&call, "chat")
        ));
    }

    #[test]
    fn keys_rotate() {
        let old = Signer::new(["old".to_owned()]).unwrap_or_else(|| panic!("no signer"));
        let rotated = Signer::new(["new".to_owned(), "old".to_owned()])
            .unwrap_or_else(|| panic!("no signer"));
        let retired = Signer::new(["new".to_owned()]).unwrap_or_else(|| panic!("no signer"));
        let call = ToolCall {
            id: "c".into(),
            name: "pay".into(),
            args: json!({}),
        };
        let seal = old.seal(&subject(&call, "chat"));
        assert!(rotated.verify(&seal, &subject(&call, "chat")));
        assert!(!retired.verify(&seal, &subject(&call, "chat")));
        assert!(Signer::new(Vec::<String>::new()).is_none());
        // The seal names the key that made it; another key's id fails it,
        // and one made before keys had ids is tried with each.
        let old_id = crate::notify::key_id(b"old");
        let Some((id, mac)) = seal.signature.split_once('-') else {
            panic!("the seal names no key: {}", seal.signature)
        };
        assert_eq!(id, old_id);
        let named = |signature: String| Seal {
            signature,
            ..seal.clone()
        };
        let new_id = crate::notify::key_id(b"new");
        assert!(!rotated.verify(&named(format!("{new_id}-{mac}")), &subject(&call, "chat")));
        assert!(rotated.verify(&named(mac.to_owned()), &subject(&call, "chat")));
    }

    #[test]
    fn seals_travel_as_provider_metadata() {
        let seal = Seal {
            signature: "ab".into(),
            expires_at_ms: 7,
        };
        assert_eq!(Seal::from_metadata(Some(&seal.to_metadata())), Some(seal));
        assert_eq!(Seal::from_metadata(Some(&json!({"other": 1}))), None);
    }
}
