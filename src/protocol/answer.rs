//! What a client says about one confirmation, whichever protocol carried it
//! (`adk.rs`, `native.rs`; `mod.rs` reads a part in either). Untrusted: only what the client claims; the gate
//! judges it against what it issued.

use serde::Deserialize;
use serde_json::{Value, json};

use super::compat::ConfirmationProtocol;
use super::message::{AnswerKeys, Remember};
use crate::call::ToolCall;

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Approve {
        payload: Option<Value>,
        remember: Option<Remember>,
        approve_next: Option<u32>,
        /// Arguments the user changed before approving.
        edited: Option<Value>,
    },
    Deny {
        reason: Option<String>,
    },
}

impl Decision {
    /// A yes or no with the answer's other keys, however it arrived.
    pub fn new(approved: bool, keys: AnswerKeys) -> Self {
        if approved {
            Decision::Approve {
                payload: keys.payload,
                remember: keys.remember,
                approve_next: keys.approve_next,
                edited: keys.edited_args,
            }
        } else {
            Decision::Deny {
                reason: keys.reason,
            }
        }
    }
}

/// What the client says about one confirmation; `Answer::from_part`
/// (in `mod.rs`) reads one out of a tool part.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub confirmation_id: String,
    /// The call the client says it answers, if it parses.
    pub original: Option<ToolCall>,
    pub decision: Decision,
    pub protocol: ConfirmationProtocol,
    /// The signature that came back with the question, if any.
    pub seal: Option<Seal>,
}

/// What travels with a confirmation when signing is on: toolgate's own key
/// in the metadata, the same in both protocols.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Seal {
    pub signature: String,
    #[serde(rename = "expiresAt")]
    pub expires_at_ms: u64,
}

impl Seal {
    /// `{"toolgate": {"signature", "expiresAt"}}`, the chunk's `providerMetadata`.
    pub fn to_metadata(&self) -> Value {
        json!({"toolgate": {"signature": self.signature, "expiresAt": self.expires_at_ms}})
    }

    /// The seal in a part's `callProviderMetadata`, if it has one.
    pub fn from_metadata(metadata: Option<&Value>) -> Option<Self> {
        object(metadata?.get("toolgate")?)
    }
}

/// `value` as `T` if it is a JSON object of that shape. Only an object:
/// serde would also read a struct out of an array (`[true]` as
/// `{"confirmed": true}`), which no client sends.
pub(super) fn object<'a, T: Deserialize<'a>>(value: &'a Value) -> Option<T> {
    match value {
        Value::Object(_) => T::deserialize(value).ok(),
        _ => None,
    }
}
