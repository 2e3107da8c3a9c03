//! A call's fingerprint: what an approver was shown, as one digest an
//! auditor can recompute offline. Two SHA-256 digests (lowercase hex) over
//! RFC 8785 (JSON Canonicalization Scheme) text:
//!
//! - the tool's **definition**: `{"description": …, "inputSchema": …}` as
//!   toolgate offered the tool to the model;
//! - the **call**: `{"arguments": …, "definition": <definition digest>,
//!   "tool": <qualified name>}`, the arguments with their Unicode as it
//!   will be sent.
//!
//! A question keeps both; a grant keeps the definition's. When an MCP
//! server relists a tool differently, its definition digest changes, and
//! neither the question nor the grant applies to it any more.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What a question was asked about, as digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fingerprint {
    /// The digest of the tool's definition when it was asked.
    pub definition: String,
    /// The digest of (qualified name, canonical arguments, definition).
    pub call: String,
}

impl Fingerprint {
    /// The fingerprint of a call of `qualified` with `args`, whose tool's
    /// definition has the digest `definition`.
    pub fn of(qualified: &str, args: &Value, definition: &str) -> Self {
        // `{"arguments":…,"definition":…,"tool":…}`: its keys in RFC 8785's
        // order already, so written in place rather than built as a `Value`.
        let mut text = Vec::with_capacity(256);
        text.extend_from_slice(b"{\"arguments\":");
        write_canonical(args, &mut text);
        text.extend_from_slice(b",\"definition\":");
        write_str(definition, &mut text);
        text.extend_from_slice(b",\"tool\":");
        write_str(qualified, &mut text);
        text.push(b'}');
        Self {
            definition: definition.to_owned(),
            call: hex::encode(Sha256::digest(&text)),
        }
    }
}

/// The digest of a tool's definition: its description and input schema.
pub fn definition(description: &str, input_schema: &Value) -> String {
    // `{"description":…,"inputSchema":…}`, keys in order as above.
    let mut text = Vec::with_capacity(256);
    text.extend_from_slice(b"{\"description\":");
    write_str(description, &mut text);
    text.extend_from_slice(b",\"inputSchema\":");
    write_canonical(input_schema, &mut text);
    text.push(b'}');
    hex::encode(Sha256::digest(&text))
}

/// `value` as RFC 8785 canonical JSON.
pub fn canonical(value: &Value) -> String {
    let mut text = Vec::with_capacity(128);
    write_canonical(value, &mut text);
    // Only whole UTF-8 text is written: the strings as they are, ASCII around them.
    String::from_utf8(text).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Writes `value` as RFC 8785 text: no whitespace; object members sorted
/// by their keys' UTF-16 code units; every number as ECMAScript's
/// `Number.prototype.toString` writes its double (`ryu-js`, as `serde_jcs`);
/// strings escaped as `JSON.stringify` does, which is serde_json's escaping
/// (`\"`, `\\`, `\b\f\n\r\t`, other controls as lowercase `\u00xx`).
/// `serde_jcs` is the oracle the tests hold it to.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            // RFC 8785 sorts by UTF-16 code units. For ASCII keys that is
            // their bytes' order; otherwise a character above U+FFFF (a
            // surrogate pair) sorts before U+E000..=U+FFFF, unlike in UTF-8.
            members.sort_unstable_by(|(a, _), (b, _)| {
                if a.is_ascii() && b.is_ascii() {
                    a.as_bytes().cmp(b.as_bytes())
                } else {
                    a.encode_utf16().cmp(b.encode_utf16())
                }
            });
            out.push(b'{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(key, out);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
    }
}

/// A number as ECMAScript writes its double: `50.0` is `50`, integers
/// past 2^53 round as doubles do.
fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    // Without serde_json's `arbitrary_precision` every number is an i64,
    // a u64 or a finite f64, and `as_f64` is `Some` for each.
    let value = n.as_f64().unwrap_or_default();
    let mut buffer = ryu_js::Buffer::new();
    out.extend_from_slice(buffer.format_finite(value).as_bytes());
}

/// A string, quoted and escaped as serde_json (and so `serde_jcs`) does.
fn write_str(s: &str, out: &mut Vec<u8>) {
    // Writing into a `Vec` cannot fail; a `str` always serializes.
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests;
