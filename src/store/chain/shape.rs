//! A line's shape, checked before its chain: only the format's fields, and
//! no key twice in one object. A field beside the hashed event (an
//! `"approvedBy"` added to an exported line) is covered by nothing, and a
//! key given twice reads as either value depending on the reader: either
//! would let a line say more than what was signed.

use std::collections::HashSet;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The fields of a line: each is hashed (`seq`, `prev`, `event`), is the
/// hash, or signs it (`sig`, `key`).
const FIELDS: [&str; 6] = ["seq", "prev", "hash", "sig", "key", "event"];

/// What is wrong with a line's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Odd {
    /// A top-level field outside the format: its name.
    Field(String),
    /// A key given twice in one object, at any depth: its name.
    Twice(String),
}

/// The first thing wrong with `text`'s shape; `Err`: it is not JSON.
pub(super) fn check(text: &str) -> Result<Option<Odd>, serde_json::Error> {
    serde_json::from_str::<Line>(text).map(|line| line.0)
}

/// A line's top level: an object of the format's fields.
struct Line(Option<Odd>);

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(Keys { top: true }).map(Line)
    }
}

/// Any value, its objects' keys checked (`top`: against [`FIELDS`] too).
/// The whole value is read even after a finding, so that the reader stays
/// in step; the first finding is kept.
#[derive(Clone, Copy)]
struct Keys {
    top: bool,
}

impl<'de> DeserializeSeed<'de> for Keys {
    type Value = Option<Odd>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Keys {
    type Value = Option<Odd>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(if self.top {
            "an object"
        } else {
            "a JSON value"
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = HashSet::new();
        let mut odd = None;
        // Decoded: `"h\u0061sh"` is `hash` to every reader.
        while let Some(key) = map.next_key::<String>()? {
            let inner = map.next_value_seed(Keys { top: false })?;
            if odd.is_none() {
                odd = if self.top && !FIELDS.contains(&key.as_str()) {
                    Some(Odd::Field(key))
                } else if !seen.insert(key.clone()) {
                    Some(Odd::Twice(key))
                } else {
                    inner
                };
            }
        }
        Ok(odd)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if self.top {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        let mut odd = None;
        while let Some(inner) = seq.next_element_seed(self)? {
            odd = odd.or(inner);
        }
        Ok(odd)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.scalar(de::Unexpected::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.scalar(de::Unexpected::Signed(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.scalar(de::Unexpected::Unsigned(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.scalar(de::Unexpected::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.scalar(de::Unexpected::Str(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.scalar(de::Unexpected::Unit)
    }
}

impl Keys {
    /// A scalar: nothing to check, but not a line on its own.
    fn scalar<E: de::Error>(self, what: de::Unexpected) -> Result<Option<Odd>, E> {
        match self.top {
            true => Err(E::invalid_type(what, &self)),
            false => Ok(None),
        }
    }
}

/// A key as a message shows it: quoted and escaped (it is the file's, not
/// ours: no control character reaches the terminal), at most 64 characters.
pub(super) fn shown(key: &str) -> String {
    const MAX: usize = 64;
    match key.char_indices().nth(MAX) {
        Some((at, _)) => format!("{:?}…", &key[..at]),
        None => format!("{key:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_formats_fields_once_each() {
        let cases = [
            (r#"{"seq":1,"prev":"p","hash":"h","event":{"a":1}}"#, None),
            (
                r#"{"seq":1,"sig":"s","key":"k","prev":"p","hash":"h","event":{}}"#,
                None,
            ),
            // The same key in different objects is no repetition.
            (
                r#"{"seq":1,"event":{"seq":2,"a":{"a":[{"a":1},{"a":2}]}}}"#,
                None,
            ),
            (
                r#"{"seq":1,"approvedBy":"cfo","event":{}}"#,
                Some(Odd::Field("approvedBy".into())),
            ),
            (r#"{"seq":1,"seq":2}"#, Some(Odd::Twice("seq".into()))),
            (r#"{"seq":1,"s\u0065q":2}"#, Some(Odd::Twice("seq".into()))),
            (r#"{"x":1,"x":2}"#, Some(Odd::Field("x".into()))),
            (
                r#"{"event":{"by":"user","by":"cfo"}}"#,
                Some(Odd::Twice("by".into())),
            ),
            (
                r#"{"event":{"a":[1,{"b":1,"b":2}]}}"#,
                Some(Odd::Twice("b".into())),
            ),
            // The first finding is named.
            (
                r#"{"event":{"b":1,"b":2},"extra":1}"#,
                Some(Odd::Twice("b".into())),
            ),
        ];
        for (line, odd) in cases {
            assert_eq!(check(line).ok(), Some(odd), "{line}");
        }
    }

    #[test]
    fn a_line_that_is_no_object_is_not_read() {
        for line in ["[1]", "1", "\"seq\"", "null", "{\"seq\":1", "{} {}"] {
            assert!(check(line).is_err(), "{line}");
        }
    }

    #[test]
    fn a_key_is_shown_escaped_and_short() {
        assert_eq!(shown("approvedBy"), r#""approvedBy""#);
        assert_eq!(shown("a\u{1b}[31m"), r#""a\u{1b}[31m""#);
        let long = "k".repeat(100);
        assert_eq!(shown(&long), format!("\"{}\"…", "k".repeat(64)));
    }
}
