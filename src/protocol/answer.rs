//! What a client says about one confirmation, whichever protocol carried it
//! (`adk.rs`, `native.rs`). Untrusted: only what the client claims; the gate
//! judges it against what it issued.

use serde::Deserialize;
use serde_json::{Value, json};

use super::compat::ConfirmationProtocol;
use super::message::RequestError;
use super::message::{AnswerKeys, Remember, ToolPart};
use super::{adk, native};
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

/// What the client says about one confirmation.
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

impl Answer {
    /// The answer in a tool part, in either protocol, or `None` when the
    /// part holds none. Anything but an explicit yes is a denial (fail
    /// closed); a malformed key ([`AnswerKeys`]) is an error: the request
    /// that carries it is refused.
    pub fn from_part(part: &ToolPart) -> Result<Option<Self>, RequestError> {
        match adk::answer(part)? {
            Some(answer) => Ok(Some(answer)),
            None => native::answer(part),
        }
    }

    /// Whether `part` is a question still waiting for its answer.
    pub fn is_pending(part: &ToolPart) -> bool {
        adk::is_pending(part) || native::is_pending(part)
    }
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
