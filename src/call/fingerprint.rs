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
use serde_json::{Value, json};
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
        let subject = json!({"arguments": args, "definition": definition, "tool": qualified});
        Self {
            definition: definition.to_owned(),
            call: digest(&subject),
        }
    }
}

/// The digest of a tool's definition: its description and input schema.
pub fn definition(description: &str, input_schema: &Value) -> String {
    digest(&json!({"description": description, "inputSchema": input_schema}))
}

/// `value` as RFC 8785 canonical JSON.
pub fn canonical(value: &Value) -> String {
    // A `Value` always serializes (string keys, finite numbers); should
    // that ever change, its plain text still digests deterministically.
    serde_jcs::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// SHA-256 (lowercase hex) of `value`'s canonical text.
fn digest(value: &Value) -> String {
    hex::encode(Sha256::digest(canonical(value).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8785's own examples (§3.2.2 and appendix B) and the points
    /// where toolgate's older canonical form differs.
    #[test]
    fn canonical_text_is_rfc_8785() {
        for (input, canonical_text) in [
            // §3.2.2: numbers as ECMAScript writes them, literals, escapes.
            (
                r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
                    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
                    "literals": [null, true, false]}"#,
                r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#,
            ),
            // §3.2.3: keys sorted by UTF-16 code units, not by bytes.
            (
                r#"{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
                    "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
                    "\u00f6": "Latin Small Letter O With Diaeresis"}"#,
                "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
            ),
            // A JavaScript client's `50.0` is `50`; integers past 2^53 are doubles.
            (
                r#"{"b": 50.0, "a": 9007199254740993}"#,
                r#"{"a":9007199254740992,"b":50}"#,
            ),
            // Invisible Unicode stays as it will be sent: it changes the digest.
            ("{\"to\": \"bo\u{200b}b\"}", "{\"to\":\"bo\u{200b}b\"}"),
        ] {
            let value: Value = serde_json::from_str(input).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(canonical(&value), canonical_text, "{input}");
        }
    }

    #[test]
    fn the_fingerprint_covers_name_arguments_and_definition() {
        let schema = json!({"type": "object", "properties": {"to": {"type": "string"}}});
        let definition = definition("Pays someone", &schema);
        let base = Fingerprint::of("mcp--bank--pay", &json!({"to": "bob", "n": 5}), &definition);
        // Key order and `5.0` against `5` do not matter ...
        let same = Fingerprint::of(
            "mcp--bank--pay",
            &json!({"n": 5.0, "to": "bob"}),
            &definition,
        );
        assert_eq!(base, same);
        // ... anything else does.
        let relisted = super::definition("Pays someone", &json!({"type": "object"}));
        let described = super::definition("Pays anyone", &schema);
        for other in [
            Fingerprint::of(
                "mcp--bank--send",
                &json!({"to": "bob", "n": 5}),
                &definition,
            ),
            Fingerprint::of("mcp--bank--pay", &json!({"to": "bob", "n": 6}), &definition),
            Fingerprint::of(
                "mcp--bank--pay",
                &json!({"to": "bo\u{200b}b", "n": 5}),
                &definition,
            ),
            Fingerprint::of("mcp--bank--pay", &json!({"to": "bob", "n": 5}), &relisted),
            Fingerprint::of("mcp--bank--pay", &json!({"to": "bob", "n": 5}), &described),
        ] {
            assert_ne!(base.call, other.call, "{other:?}");
        }
        assert_eq!(base.definition, definition);
        assert_eq!(base.call.len(), 64);
    }

    /// The digests are pinned: an auditor's own JCS and SHA-256 of the
    /// same text must find them (`printf '%s' TEXT | sha256sum`).
    #[test]
    fn digests_are_sha256_of_the_canonical_text() {
        let definition = definition("d", &json!({"type": "object"}));
        assert_eq!(
            definition,
            hex::encode(Sha256::digest(
                br#"{"description":"d","inputSchema":{"type":"object"}}"#
            ))
        );
        let call = Fingerprint::of("internal--t", &json!({"a": 1}), &definition);
        let text = format!(
            r#"{{"arguments":{{"a":1}},"definition":"{definition}","tool":"internal--t"}}"#
        );
        assert_eq!(call.call, hex::encode(Sha256::digest(text.as_bytes())));
    }
}
