use super::*;
use serde_json::json;

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
    let text =
        format!(r#"{{"arguments":{{"a":1}},"definition":"{definition}","tool":"internal--t"}}"#);
    assert_eq!(call.call, hex::encode(Sha256::digest(text.as_bytes())));
}

/// The text the fingerprint hashes, as it was made before it was written
/// in place: through a `Value` and `serde_jcs`.
fn oracle_call(qualified: &str, args: &Value, definition: &str) -> String {
    let subject = json!({"arguments": args, "definition": definition, "tool": qualified});
    hex::encode(Sha256::digest(oracle(&subject).as_bytes()))
}

fn oracle(value: &Value) -> String {
    serde_jcs::to_string(value).unwrap_or_else(|e| panic!("{e}"))
}

/// Strings and numbers where canonical forms differ: escapes, controls,
/// characters on both sides of the surrogates, exponents, -0, 2^53 and up.
#[test]
fn canonical_text_is_serde_jcs_text() {
    for input in [
        r#"null"#,
        r#"[true,false,null,[],{}]"#,
        r#"{"":0,"a":"","\u0000":"\u0001\u001f\u007f\u0080"}"#,
        r#""\b\f\n\r\t\"\\/\u2028\u2029\ufeff""#,
        r#"{"\ue000":1,"\ud800\udc00":2,"\uffff":3,"z":4,"\u00e9":5,"Z":6,"a\ud83d\ude00":7,"a\uf8ff":8}"#,
        r#"[0,-0,-0.0,1,-1,0.1,1e21,1e-7,123456789012345678901234567890,-9007199254740993,18446744073709551615,-9223372036854775808,5e-324,1.7976931348623157e308,0.30000000000000004,100,1e2,12.5e-3]"#,
        r#"{"b":{"d":[{"f":1,"e":2}],"c":null},"a":{"y":true,"x":false}}"#,
    ] {
        let value: Value = serde_json::from_str(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(canonical(&value), oracle(&value), "{input}");
    }
}

/// A small generator of JSON values (xorshift, a fixed seed): thousands of
/// documents, each held to `serde_jcs`, and their fingerprints to the
/// fingerprint made through a `Value`.
#[test]
fn canonical_text_is_serde_jcs_text_for_generated_values() {
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn string(&mut self) -> String {
            const CHARS: [char; 16] = [
                'a',
                'Z',
                '0',
                '"',
                '\\',
                '/',
                '\n',
                '\u{1}',
                '\u{7f}',
                'é',
                '€',
                '\u{2028}',
                '\u{e000}',
                '\u{fffd}',
                '😀',
                '\u{10ffff}',
            ];
            let len = self.below(6);
            (0..len).map(|_| CHARS[self.below(16) as usize]).collect()
        }
        fn number(&mut self) -> Value {
            match self.below(5) {
                0 => json!(self.next() as i64),
                1 => json!(self.next()),
                2 => json!(self.below(2000) as i64 - 1000),
                3 => json!(
                    f64::from_bits(self.next() >> 2) * if self.below(2) == 0 { 1.0 } else { -1.0 }
                ),
                _ => json!((self.below(100_000) as f64) / 8.0),
            }
        }
        fn value(&mut self, depth: u32) -> Value {
            let kinds = if depth == 0 { 4 } else { 6 };
            match self.below(kinds) {
                0 => Value::Null,
                1 => Value::Bool(self.below(2) == 0),
                2 => self.number(),
                3 => Value::String(self.string()),
                4 => (0..self.below(4)).map(|_| self.value(depth - 1)).collect(),
                _ => Value::Object(
                    (0..self.below(5))
                        .map(|_| (self.string(), self.value(depth - 1)))
                        .collect(),
                ),
            }
        }
    }
    let mut generate = Gen(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let value = generate.value(3);
        // A non-finite double is no JSON value: serde_json makes it null.
        assert_eq!(canonical(&value), oracle(&value), "{value}");
        let name = generate.string();
        let definition = generate.string();
        assert_eq!(
            Fingerprint::of(&name, &value, &definition).call,
            oracle_call(&name, &value, &definition),
            "{value}"
        );
    }
    let schema = json!({"type": "object", "properties": {"to": {"type": "string", "description": "wh\u{e9}re"}}});
    assert_eq!(
        definition("Pays \"someone\"", &schema),
        hex::encode(Sha256::digest(
            oracle(&json!({"description": "Pays \"someone\"", "inputSchema": schema})).as_bytes()
        ))
    );
}
