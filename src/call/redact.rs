//! Redaction: which of a call's argument values a person is never shown,
//! and the one function that masks them. Pure; every face that shows or
//! writes a call's arguments (the stream's cards, the decisions API, the
//! inbox, notifications, links' pages, traces) calls [`Redaction::mask`],
//! and an answer that comes back with masked values has them put back by
//! [`Redaction::restore`] from the call as toolgate issued it.
//!
//! A value is masked when its key is one of the sensitive key names (the
//! default list and `toolConfirmation.redaction.keys`, compared without
//! case and without `_`, `-`, `.` or spaces) wherever it appears, or when a
//! JSON pointer of the tool's `sensitive` list names it. It is replaced by
//! [`MARKER`], whatever its type; `null` hides nothing and stays.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{QualifiedName, ToolCall};

/// What a masked value reads as.
pub const MARKER: &str = "[redacted]";

/// The key names masked wherever they appear, as compared (lowercase,
/// without `_`, `-`, `.` or spaces): `api_key`, `apiKey` and `API-Key`
/// are all `apikey`.
pub const DEFAULT_KEYS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "clientsecret",
    "token",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "authtoken",
    "bearertoken",
    "sessiontoken",
    "apikey",
    "apitoken",
    "xapikey",
    "authorization",
    "proxyauthorization",
    "cookie",
    "setcookie",
    "privatekey",
    "secretkey",
    "secretaccesskey",
    "credentials",
];

/// A `sensitive` entry that is not a JSON pointer to a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{pointer}` is not a JSON pointer to an argument: {why}")]
pub struct BadPointer {
    pub pointer: String,
    pub why: &'static str,
}

/// Which values are masked: the sensitive key names, and each tool's
/// pointers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Redaction {
    /// Each as `normal` makes it.
    keys: Vec<String>,
    /// Per tool (by qualified name), each pointer's unescaped segments.
    tools: Vec<(QualifiedName, Vec<Vec<String>>)>,
}

impl Redaction {
    /// The default key names only.
    pub fn standard() -> Self {
        let mut keys: Vec<String> = DEFAULT_KEYS.iter().map(|k| (*k).to_owned()).collect();
        keys.sort();
        Self {
            keys,
            tools: Vec::new(),
        }
    }

    /// `defaults` (the [`DEFAULT_KEYS`] or none), `extra` key names, and
    /// each tool's pointers; a bad pointer is named.
    pub fn new<'a>(
        defaults: bool,
        extra: &[String],
        tools: impl IntoIterator<Item = (&'a str, &'a [String])>,
    ) -> Result<Self, BadPointer> {
        let mut keys: Vec<String> = match defaults {
            true => DEFAULT_KEYS.iter().map(|k| (*k).to_owned()).collect(),
            false => Vec::new(),
        };
        keys.extend(extra.iter().map(|k| normal(k)));
        keys.sort();
        keys.dedup();
        let mut by_tool = Vec::new();
        for (tool, pointers) in tools {
            if pointers.is_empty() {
                continue;
            }
            let parsed = pointers
                .iter()
                .map(|p| parse(p))
                .collect::<Result<Vec<_>, _>>()?;
            by_tool.push((QualifiedName::of(tool), parsed));
        }
        Ok(Self {
            keys,
            tools: by_tool,
        })
    }

    /// Whether the tool `tool` has pointers of its own (its input is then
    /// never streamed as the model writes it).
    pub fn has_pointers(&self, tool: &str) -> bool {
        !self.tools.is_empty() && !self.pointers(tool).is_empty()
    }

    /// `args` of a call of `tool` as a person is shown them: borrowed when
    /// nothing in them is masked.
    pub fn mask<'a>(&self, tool: &str, args: &'a Value) -> Cow<'a, Value> {
        let pointers = self.pointers(tool);
        let at: Vec<&[String]> = pointers.iter().map(Vec::as_slice).collect();
        match self.masked(args, &at) {
            Some(masked) => Cow::Owned(masked),
            None => Cow::Borrowed(args),
        }
    }

    /// `call` with its arguments masked: borrowed when nothing is.
    pub fn mask_call<'a>(&self, call: &'a ToolCall) -> Cow<'a, ToolCall> {
        match self.mask(&call.name, &call.args) {
            Cow::Borrowed(_) => Cow::Borrowed(call),
            Cow::Owned(args) => Cow::Owned(ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                args,
            }),
        }
    }

    /// `shown` (arguments that came back from a person, perhaps with the
    /// masked values still [`MARKER`]) with each marker at a masked place
    /// of `real` (the call as issued) put back to the real value. Any other
    /// value stays as the person wrote it.
    pub fn restore<'a>(&self, tool: &str, shown: &'a Value, real: &Value) -> Cow<'a, Value> {
        let pointers = self.pointers(tool);
        let at: Vec<&[String]> = pointers.iter().map(Vec::as_slice).collect();
        match self.restored(shown, real, &at) {
            Some(restored) => Cow::Owned(restored),
            None => Cow::Borrowed(shown),
        }
    }

    fn pointers(&self, tool: &str) -> &[Vec<String>] {
        if self.tools.is_empty() {
            return &[];
        }
        let qualified = QualifiedName::of(tool);
        self.tools
            .iter()
            .find(|(name, _)| *name == qualified)
            .map_or(&[], |(_, pointers)| pointers.as_slice())
    }

    /// Whether the value under `key` is masked: its name, or a pointer
    /// that ends at it. Compared without allocating: the encoder asks this
    /// of every argument of every call.
    fn hides(&self, key: &str, at: &[&[String]]) -> bool {
        at.iter().any(|p| p.len() == 1 && p[0] == key) || self.names(key)
    }

    /// Whether `key` is one of the sensitive names. An ASCII key (nearly
    /// all) is normalized once into a stack buffer and looked up in the
    /// sorted names; any other is compared name by name.
    fn names(&self, key: &str) -> bool {
        let mut buf = [0u8; 48];
        let mut len = 0;
        for byte in key.bytes() {
            if !byte.is_ascii() || len == buf.len() {
                return self
                    .keys
                    .iter()
                    .any(|name| normalized(key).eq(name.chars()));
            }
            if !matches!(byte, b'_' | b'-' | b'.' | b' ') {
                buf[len] = byte.to_ascii_lowercase();
                len += 1;
            }
        }
        std::str::from_utf8(&buf[..len])
            .is_ok_and(|name| self.keys.binary_search_by(|k| k.as_str().cmp(name)).is_ok())
    }

    /// The masked copy of `value`, or `None` when nothing in it is masked.
    fn masked(&self, value: &Value, at: &[&[String]]) -> Option<Value> {
        match value {
            Value::Object(map) => {
                let mut changed = Vec::new();
                for (key, inner) in map {
                    if self.hides(key, at) {
                        if !inner.is_null() && inner.as_str() != Some(MARKER) {
                            changed.push((key, Value::String(MARKER.to_owned())));
                        }
                    } else if let Some(masked) = self.masked(inner, &deeper(at, key)) {
                        changed.push((key, masked));
                    }
                }
                with_changes(map, changed)
            }
            Value::Array(items) => {
                let mut copy: Option<Vec<Value>> = None;
                for (index, inner) in items.iter().enumerate() {
                    if at.is_empty() {
                        if let Some(masked) = self.masked(inner, &[]) {
                            copy.get_or_insert_with(|| items.clone())[index] = masked;
                        }
                        continue;
                    }
                    let key = index.to_string();
                    let masked = match at.iter().any(|p| p.len() == 1 && p[0] == key) {
                        true if !inner.is_null() && inner.as_str() != Some(MARKER) => {
                            Some(Value::String(MARKER.to_owned()))
                        }
                        true => None,
                        false => self.masked(inner, &deeper(at, &key)),
                    };
                    if let Some(masked) = masked {
                        copy.get_or_insert_with(|| items.clone())[index] = masked;
                    }
                }
                copy.map(Value::Array)
            }
            _ => None,
        }
    }

    /// `shown` with its markers at masked places of `real` put back, or
    /// `None` when there is none.
    fn restored(&self, shown: &Value, real: &Value, at: &[&[String]]) -> Option<Value> {
        match (shown, real) {
            (Value::Object(map), Value::Object(real)) => {
                let mut changed = Vec::new();
                for (key, inner) in map {
                    let Some(was) = real.get(key) else { continue };
                    if self.hides(key, at) {
                        if inner.as_str() == Some(MARKER) && !was.is_null() {
                            changed.push((key, was.clone()));
                        }
                    } else if let Some(restored) = self.restored(inner, was, &deeper(at, key)) {
                        changed.push((key, restored));
                    }
                }
                with_changes(map, changed)
            }
            (Value::Array(items), Value::Array(real)) => {
                let mut copy: Option<Vec<Value>> = None;
                for (index, (inner, was)) in items.iter().zip(real).enumerate() {
                    let key = index.to_string();
                    let restored = match at.iter().any(|p| p.len() == 1 && p[0] == key) {
                        true if inner.as_str() == Some(MARKER) && !was.is_null() => {
                            Some(was.clone())
                        }
                        true => None,
                        false => self.restored(inner, was, &deeper(at, &key)),
                    };
                    if let Some(restored) = restored {
                        copy.get_or_insert_with(|| items.clone())[index] = restored;
                    }
                }
                copy.map(Value::Array)
            }
            _ => None,
        }
    }
}

/// The pointers that go on below `key`, less their first segment.
fn deeper<'p>(at: &[&'p [String]], key: &str) -> Vec<&'p [String]> {
    at.iter()
        .filter(|p| p.len() > 1 && p[0] == key)
        .map(|p| &p[1..])
        .collect()
}

/// A copy of `map` with `changed` in place, or `None` without changes.
fn with_changes(map: &Map<String, Value>, changed: Vec<(&String, Value)>) -> Option<Value> {
    if changed.is_empty() {
        return None;
    }
    let mut copy = map.clone();
    for (key, value) in changed {
        copy.insert(key.clone(), value);
    }
    Some(Value::Object(copy))
}

/// A key name as compared: lowercase, without `_`, `-`, `.` or spaces.
fn normalized(key: &str) -> impl Iterator<Item = char> + '_ {
    key.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
}

fn normal(key: &str) -> String {
    normalized(key).collect()
}

/// An RFC 6901 pointer's unescaped segments; it must name a field.
fn parse(pointer: &str) -> Result<Vec<String>, BadPointer> {
    let bad = |why| BadPointer {
        pointer: pointer.to_owned(),
        why,
    };
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(bad(match pointer.is_empty() {
            true => "it names the whole arguments; name a field, e.g. /password",
            false => "it must start with `/`",
        }));
    };
    rest.split('/')
        .map(|segment| {
            let mut out = String::with_capacity(segment.len());
            let mut chars = segment.chars();
            while let Some(c) = chars.next() {
                match c {
                    '~' => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return Err(bad("`~` must be followed by 0 or 1")),
                    },
                    c => out.push(c),
                }
            }
            Ok(out)
        })
        .collect()
}

#[cfg(test)]
mod tests;
