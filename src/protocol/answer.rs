//! What a client says about one confirmation, whichever protocol carried it
//! (`adk.rs`, `native.rs`; `mod.rs` reads a part in either). Untrusted: only what the client claims; the gate
//! judges it against what it issued.

use serde::Deserialize;
use serde_json::{Value, json};

use super::compat::ConfirmationProtocol;
use super::message::{AnswerKeys, DecisionWord, Remember, RequestError};
use crate::call::ToolCall;

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Approve {
        payload: Option<Value>,
        remember: Option<Remember>,
        approve_next: Option<u32>,
        /// Arguments the user changed before approving.
        edited: Option<Value>,
        /// Later calls it decides too, inside this scope only.
        grant: Option<super::grant::GrantScope>,
    },
    Deny {
        reason: Option<String>,
    },
    /// `decision: "respond"`: the tool does not run, and `output` is the
    /// call's result.
    Respond {
        output: Value,
    },
}

impl Decision {
    /// The decision an answer makes, however it arrived: its yes or no
    /// (`None` when the carrier's key was left out, which only a response
    /// may) with its other keys. A malformed combination
    /// ([`AnswerKeys::check`]) refuses the whole answer.
    pub fn new(approved: Option<bool>, keys: AnswerKeys) -> Result<Self, RequestError> {
        keys.check(approved)?;
        match (keys.decision, keys.output, approved) {
            (Some(DecisionWord::Respond), Some(output), _) => Ok(Decision::Respond { output }),
            (None, _, Some(true)) => Ok(Decision::Approve {
                payload: keys.payload,
                remember: keys.remember,
                approve_next: keys.approve_next,
                edited: keys.edited_args,
                grant: keys.grant,
            }),
            (None, _, Some(false)) => Ok(Decision::Deny {
                reason: keys.reason,
            }),
            (_, _, None) | (Some(DecisionWord::Respond), None, _) => Err(RequestError::Invalid(
                r#"missing `approved` (`confirmed`), or `decision: "respond"`"#.into(),
            )),
        }
    }

    /// Whether only someone who may approve the call may make it: an
    /// approval, and a response, which stands in for the tool's run. The
    /// user who asked may always deny.
    pub fn needs_approver(&self) -> bool {
        match self {
            Decision::Approve { .. } | Decision::Respond { .. } => true,
            Decision::Deny { .. } => false,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_from_its_yes_or_no_and_keys() {
        let keys = |value: Value| -> AnswerKeys {
            serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
        };
        let respond = json!({"decision": "respond", "output": {"policy": "30 days"}});
        let responded = Ok(Decision::Respond {
            output: json!({"policy": "30 days"}),
        });
        let cases = [
            (
                Some(true),
                json!({"payload": 1}),
                Ok(Decision::Approve {
                    payload: Some(json!(1)),
                    remember: None,
                    approve_next: None,
                    edited: None,
                    grant: None,
                }),
            ),
            (
                Some(false),
                json!({"reason": "no"}),
                Ok(Decision::Deny {
                    reason: Some("no".into()),
                }),
            ),
            (None, respond.clone(), responded.clone()),
            (Some(true), respond.clone(), responded),
            (
                Some(false),
                respond,
                Err(r#"`decision: "respond"` is no denial"#),
            ),
            (None, json!({}), Err("missing `approved`")),
            (None, json!({"reason": "no"}), Err("missing `approved`")),
            (
                Some(true),
                json!({"output": 1}),
                Err("`output` comes only with"),
            ),
        ];
        for (approved, value, expected) in cases {
            let got = Decision::new(approved, keys(value.clone()));
            match (got, expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got, expected, "{approved:?} {value}"),
                (Err(e), Err(why)) => assert!(e.to_string().contains(why), "{e} for {value}"),
                (got, expected) => panic!("{approved:?} {value}: {got:?}, not {expected:?}"),
            }
        }
    }

    #[test]
    fn only_approvals_and_responses_need_an_approver() {
        assert!(Decision::Respond { output: json!(1) }.needs_approver());
        assert!(!Decision::Deny { reason: None }.needs_approver());
    }
}
