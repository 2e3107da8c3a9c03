//! `grant`: an approval that reaches later calls only inside a scope the
//! approver narrowed it to — arguments pinned to a value or capped, a time
//! window, a number of uses — and the pure check of whether a call's
//! arguments fall inside it.
//!
//! An argument is named by its top-level name (`recipient`), as the
//! policy's `when` rules name them, or by a JSON pointer (`/to/iban`) for
//! one nested deeper: a key that starts with `/` is a pointer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

use crate::call::MAX_ARGS_BYTES;

/// The most arguments one grant may pin or cap, together.
pub const MAX_GRANT_KEYS: usize = 32;

/// The most uses one grant may carry.
pub const MAX_GRANT_USES: u32 = 10_000;

/// How far a narrowed approval reaches: only calls of its tool, by the
/// user who asked, whose arguments match every pin and stay within every
/// cap, while its window lasts and uses remain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantScope {
    /// Arguments fixed to a value (compared as JSON, numbers by value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<String, Value>,
    /// Numeric arguments capped: the argument must be a number `<=` this.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max: BTreeMap<String, Number>,
    /// For how long from the approval; `None`: until revoked or used up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<u32>,
    /// How many later calls it decides; `None`: any number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uses: Option<u32>,
    /// Whether it covers the user's calls in every chat, not just the one
    /// the approval was given in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_chat: bool,
}

/// Why a call's arguments fall outside a grant's scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Outside {
    #[error("`{0}` is not there")]
    Missing(String),
    #[error("`{0}` differs from its pinned value")]
    Pinned(String),
    #[error("`{0}` is not a number")]
    NotANumber(String),
    #[error("`{0}` exceeds its cap")]
    OverCap(String),
}

impl GrantScope {
    /// Refuses a scope no grant may have: an empty or malformed argument
    /// name, too many of them, a window (of at most `max_minutes`) or a
    /// count out of range, or a scope larger than a call's arguments may
    /// be. The error says why.
    pub fn check(&self, max_minutes: u32) -> Result<(), String> {
        let invalid = |why: String| Err(format!("invalid `grant`: {why}"));
        if self.pins.len() + self.max.len() > MAX_GRANT_KEYS {
            return invalid(format!(
                "at most {MAX_GRANT_KEYS} arguments may be pinned or capped"
            ));
        }
        if let Some(key) = self.pins.keys().chain(self.max.keys()).find(|k| !named(k)) {
            return invalid(format!(
                "`{}` names no argument: use a top-level name or a JSON pointer (`/a/b`)",
                key.escape_debug()
            ));
        }
        if self
            .minutes
            .is_some_and(|m| !(1..=max_minutes).contains(&m))
        {
            return invalid(format!("`minutes` is a window of 1 to {max_minutes}"));
        }
        if self
            .uses
            .is_some_and(|n| !(1..=MAX_GRANT_USES).contains(&n))
        {
            return invalid(format!("`uses` is 1 to {MAX_GRANT_USES}"));
        }
        let size = serde_json::to_string(self).map_or(usize::MAX, |text| text.len());
        if size > MAX_ARGS_BYTES {
            return invalid(format!("it exceeds {MAX_ARGS_BYTES} bytes"));
        }
        Ok(())
    }

    /// Whether `args` (schema-checked already) fall inside the scope's
    /// pins and caps. An argument a pin or cap cannot read (absent, or not
    /// a number under a cap) is outside: it fails closed.
    pub fn covers(&self, args: &Value) -> Result<(), Outside> {
        for (key, pinned) in &self.pins {
            let value = argument(args, key).ok_or_else(|| Outside::Missing(key.clone()))?;
            if !crate::json::same(value, pinned) {
                return Err(Outside::Pinned(key.clone()));
            }
        }
        for (key, cap) in &self.max {
            let value = argument(args, key).ok_or_else(|| Outside::Missing(key.clone()))?;
            let Value::Number(value) = value else {
                return Err(Outside::NotANumber(key.clone()));
            };
            if !at_most(value, cap) {
                return Err(Outside::OverCap(key.clone()));
            }
        }
        Ok(())
    }
}

/// Whether `key` names an argument: a non-empty top-level name without a
/// control character, or a JSON pointer.
fn named(key: &str) -> bool {
    !key.is_empty() && !key.chars().any(char::is_control)
}

/// The argument `key` names in `args`.
fn argument<'a>(args: &'a Value, key: &str) -> Option<&'a Value> {
    if key.starts_with('/') {
        args.pointer(key)
    } else {
        args.get(key)
    }
}

/// `value <= cap`: integers exactly, anything else as floats.
fn at_most(value: &Number, cap: &Number) -> bool {
    match (value.as_i128(), cap.as_i128()) {
        (Some(value), Some(cap)) => value <= cap,
        _ => match (value.as_f64(), cap.as_f64()) {
            (Some(value), Some(cap)) => value <= cap,
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MAX_WINDOW_MINUTES: u32 = 60;

    fn scope(value: Value) -> GrantScope {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_call_is_inside_only_where_every_pin_and_cap_holds() {
        let pay = scope(json!({
            "pins": {"recipient": "Bob", "/meta/currency": "USD"},
            "max": {"amount": 100}
        }));
        let cases = [
            (
                json!({"recipient": "Bob", "amount": 100, "meta": {"currency": "USD"}}),
                Ok(()),
            ),
            (
                json!({"recipient": "Bob", "amount": 99.5, "meta": {"currency": "USD"}}),
                Ok(()),
            ),
            (
                json!({"recipient": "Bob", "amount": 100.0, "meta": {"currency": "USD"}}),
                Ok(()),
            ),
            (
                json!({"recipient": "Bob", "amount": 100.01, "meta": {"currency": "USD"}}),
                Err(Outside::OverCap("amount".into())),
            ),
            (
                json!({"recipient": "Bob", "amount": 101, "meta": {"currency": "USD"}}),
                Err(Outside::OverCap("amount".into())),
            ),
            (
                json!({"recipient": "Mallory", "amount": 5, "meta": {"currency": "USD"}}),
                Err(Outside::Pinned("recipient".into())),
            ),
            (
                json!({"recipient": "bob", "amount": 5, "meta": {"currency": "USD"}}),
                Err(Outside::Pinned("recipient".into())),
            ),
            (
                json!({"recipient": "Bob", "amount": 5, "meta": {"currency": "EUR"}}),
                Err(Outside::Pinned("/meta/currency".into())),
            ),
            (
                json!({"recipient": "Bob", "amount": 5}),
                Err(Outside::Missing("/meta/currency".into())),
            ),
            (
                json!({"amount": 5, "meta": {"currency": "USD"}}),
                Err(Outside::Missing("recipient".into())),
            ),
            (
                json!({"recipient": "Bob", "amount": "5", "meta": {"currency": "USD"}}),
                Err(Outside::NotANumber("amount".into())),
            ),
            (
                json!({"recipient": "Bob", "meta": {"currency": "USD"}}),
                Err(Outside::Missing("amount".into())),
            ),
            (json!(null), Err(Outside::Missing("/meta/currency".into()))),
        ];
        for (args, inside) in cases {
            assert_eq!(pay.covers(&args), inside, "{args}");
        }
        // No pins and no caps: every call of the tool is inside.
        assert_eq!(GrantScope::default().covers(&json!({"x": 1})), Ok(()));
        // A pin on a whole object compares it whole, whatever the key order.
        let whole = scope(json!({"pins": {"to": {"bank": "A", "iban": "X"}}}));
        assert_eq!(
            whole.covers(&json!({"to": {"iban": "X", "bank": "A"}})),
            Ok(())
        );
        assert_eq!(
            whole.covers(&json!({"to": {"iban": "X", "bank": "A", "memo": "m"}})),
            Err(Outside::Pinned("to".into()))
        );
        // Large integers compare exactly, not as floats.
        let big = scope(json!({"max": {"n": 9_007_199_254_740_993_i64}}));
        assert_eq!(big.covers(&json!({"n": 9_007_199_254_740_993_i64})), Ok(()));
        assert_eq!(
            big.covers(&json!({"n": 9_007_199_254_740_994_i64})),
            Err(Outside::OverCap("n".into()))
        );
    }

    #[test]
    fn a_scope_out_of_bounds_is_refused() {
        let many: serde_json::Map<String, Value> = (0..=MAX_GRANT_KEYS)
            .map(|i| (format!("k{i}"), json!(1)))
            .collect();
        let cases = [
            (json!({}), true),
            (
                json!({"pins": {"a": 1}, "max": {"b": 2}, "minutes": 60, "uses": 3}),
                true,
            ),
            (json!({"uses": 0}), false),
            (json!({"uses": MAX_GRANT_USES + 1}), false),
            (json!({"minutes": 0}), false),
            (json!({"minutes": MAX_WINDOW_MINUTES + 1}), false),
            (json!({"pins": {"": 1}}), false),
            (json!({"max": {"a\nb": 1}}), false),
            (json!({"pins": many}), false),
            (json!({"pins": {"a": "x".repeat(MAX_ARGS_BYTES)}}), false),
        ];
        for (value, ok) in cases {
            let checked = scope(value.clone()).check(MAX_WINDOW_MINUTES);
            assert_eq!(checked.is_ok(), ok, "{value}");
        }
        // The shape itself: unknown keys, a cap that is no number.
        for value in [
            json!({"pin": {"a": 1}}),
            json!({"max": {"a": "1"}}),
            json!({"uses": -1}),
        ] {
            assert!(
                serde_json::from_value::<GrantScope>(value.clone()).is_err(),
                "{value}"
            );
        }
    }
}
