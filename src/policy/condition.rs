//! Conditions on a call's arguments, as written in config:
//! `amount > 100`, `recipient not in ["Mallory"]`, `command matches "git *"`,
//! `command ~ "^rm "`. A path (dotted, into the arguments), an operator, and a
//! JSON value.
//!
//! Conditions fail closed: every one of them makes a call ask, be denied or
//! need other approvers, so an argument that is missing, or of a type the
//! operator cannot read (a string for `>`, a number for `matches`, an array
//! for `== "USD"`), makes the condition hold. The gate checks arguments
//! against the tool's schema before any rule reads them; this is what stands
//! when a schema allows more than a rule expects.

use std::fmt;
use std::str::FromStr;

use globset::{Glob, GlobMatcher};
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::json::same;

#[derive(Debug, Clone)]
pub struct Condition {
    text: String,
    path: Vec<String>,
    test: Test,
}

#[derive(Debug, Clone)]
enum Test {
    Compare(Compare, f64),
    Eq(Value),
    Ne(Value),
    In(Vec<Value>),
    NotIn(Vec<Value>),
    Glob(GlobMatcher),
    Regex(Regex),
}

#[derive(Debug, Clone, Copy)]
enum Compare {
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("condition `{text}`: {why}")]
pub struct BadCondition {
    text: String,
    why: String,
}

impl FromStr for Condition {
    type Err = BadCondition;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| BadCondition {
            text: text.to_owned(),
            why: why.to_owned(),
        };
        let trimmed = text.trim();
        let path_end = trimmed
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .ok_or_else(|| bad("expected `<argument> <operator> <value>`"))?;
        let (path, rest) = trimmed.split_at(path_end);
        if path.is_empty() {
            return Err(bad("no argument name"));
        }
        let rest = rest.trim_start();
        // Longest operators first.
        let ops = [
            "not in", "matches", ">=", "<=", "==", "!=", "in", ">", "<", "~",
        ];
        let op = ops
            .iter()
            .find(|op| {
                rest.starts_with(*op)
                    && (!op.chars().all(char::is_alphabetic)
                        || rest[op.len()..].starts_with(char::is_whitespace))
            })
            .ok_or_else(|| bad("unknown operator (use > >= < <= == != in, not in, matches, ~)"))?;
        let literal = rest[op.len()..].trim();
        let value: Value =
            serde_json::from_str(literal).map_err(|e| bad(&format!("value is not JSON: {e}")))?;
        let number = || value.as_f64().ok_or_else(|| bad("expected a number"));
        let list = || {
            value
                .as_array()
                .cloned()
                .ok_or_else(|| bad("expected a JSON array"))
        };
        let string = || {
            value
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| bad("expected a JSON string"))
        };
        let test = match *op {
            ">" => Test::Compare(Compare::Gt, number()?),
            ">=" => Test::Compare(Compare::Ge, number()?),
            "<" => Test::Compare(Compare::Lt, number()?),
            "<=" => Test::Compare(Compare::Le, number()?),
            "==" => Test::Eq(value.clone()),
            "!=" => Test::Ne(value.clone()),
            "in" => Test::In(list()?),
            "not in" => Test::NotIn(list()?),
            "matches" => Test::Glob(
                Glob::new(&string()?)
                    .map_err(|e| bad(&format!("bad pattern: {e}")))?
                    .compile_matcher(),
            ),
            _ => Test::Regex(Regex::new(&string()?).map_err(|e| bad(&format!("bad regex: {e}")))?),
        };
        Ok(Condition {
            text: trimmed.to_owned(),
            path: path.split('.').map(str::to_owned).collect(),
            test,
        })
    }
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl PartialEq for Condition {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Condition {
    /// Whether the condition holds for `args`: also when the argument it
    /// reads is missing or of another type than the operator reads.
    pub fn holds(&self, args: &Value) -> bool {
        let Some(value) = self.path.iter().try_fold(args, |v, key| v.get(key)) else {
            return true;
        };
        match &self.test {
            Test::Compare(op, limit) => value.as_f64().is_none_or(|x| match op {
                Compare::Gt => x > *limit,
                Compare::Ge => x >= *limit,
                Compare::Lt => x < *limit,
                Compare::Le => x <= *limit,
            }),
            Test::Eq(expected) => !same_kind(value, expected) || same(value, expected),
            Test::Ne(expected) => !same(value, expected),
            Test::In(list) => {
                !list.iter().any(|x| same_kind(value, x)) || list.iter().any(|x| same(value, x))
            }
            Test::NotIn(list) => !list.iter().any(|x| same(value, x)),
            Test::Glob(glob) => value.as_str().is_none_or(|s| glob.is_match(s)),
            Test::Regex(re) => value.as_str().is_none_or(|s| re.is_match(s)),
        }
    }
}

/// Whether two JSON values are of one kind (every number is one kind).
fn same_kind(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn holds(condition: &str, args: Value) -> bool {
        condition
            .parse::<Condition>()
            .map(|c| c.holds(&args))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn conditions_on_arguments() {
        let cases = [
            ("amount > 100", json!({"amount": 150}), true),
            ("amount > 100", json!({"amount": 100}), false),
            ("amount >= 100", json!({"amount": 100}), true),
            ("amount < 1.5", json!({"amount": 1}), true),
            // Fail closed: an argument the operator cannot read, or none, holds.
            ("amount > 100", json!({"amount": "150"}), true),
            ("amount > 100", json!({"amount": "50"}), true),
            ("amount > 100", json!({"amount": [9000]}), true),
            ("amount <= 100", json!({"amount": null}), true),
            ("amount > 100", json!({}), true),
            ("amount > 100", json!("not an object"), true),
            ("payee.country == \"JP\"", json!({"payee": "JP"}), true),
            (r#"currency == "USD""#, json!({"currency": ["USD"]}), true),
            (r#"currency == "USD""#, json!({"currency": 5}), true),
            (r#"currency == "USD""#, json!({"currency": "EUR"}), false),
            (
                r#"currency in ["USD", "EUR"]"#,
                json!({"currency": 1}),
                true,
            ),
            (
                r#"currency in ["USD", "EUR"]"#,
                json!({"currency": "JPY"}),
                false,
            ),
            (r#"currency in ["USD", "EUR"]"#, json!({}), true),
            (r#"currency != "USD""#, json!({"currency": "USD"}), false),
            (r#"command matches "git *""#, json!({"command": 7}), true),
            (r#"command ~ "^rm""#, json!({"command": {"rm": true}}), true),
            (r#"command ~ "^rm""#, json!({"command": "ls"}), false),
            (
                r#"recipient not in ["Mallory", "Eve"]"#,
                json!({"recipient": "Bob"}),
                true,
            ),
            (
                r#"recipient not in ["Mallory", "Eve"]"#,
                json!({"recipient": "Eve"}),
                false,
            ),
            (r#"recipient not in ["Mallory"]"#, json!({}), true),
            (
                r#"currency in ["USD", "EUR"]"#,
                json!({"currency": "EUR"}),
                true,
            ),
            (r#"currency == "USD""#, json!({"currency": "USD"}), true),
            (r#"currency != "USD""#, json!({}), true),
            (
                r#"command matches "git *""#,
                json!({"command": "git status"}),
                true,
            ),
            (
                r#"command matches "git *""#,
                json!({"command": "rm -rf /"}),
                false,
            ),
            (
                r#"command ~ "^rm\\s""#,
                json!({"command": "rm -rf /"}),
                true,
            ),
            (
                "payee.country == \"JP\"",
                json!({"payee": {"country": "JP"}}),
                true,
            ),
            // A float is the number it equals: no way around a rule by writing 5000.0.
            ("amount == 5000", json!({"amount": 5000.0}), true),
            ("amount != 5000", json!({"amount": 5000.0}), false),
            ("amount in [5000]", json!({"amount": 5000.0}), true),
            ("amount not in [5000]", json!({"amount": 5000.0}), false),
        ];
        for (condition, args, expected) in cases {
            assert_eq!(
                holds(condition, args.clone()),
                expected,
                "{condition} on {args}"
            );
        }
    }

    /// Every operator against every kind of JSON value it does not read,
    /// and against no value: the condition holds.
    #[test]
    fn a_value_no_operator_reads_holds() {
        let kinds = [
            json!(null),
            json!(true),
            json!(9000),
            json!(-0.5),
            json!("9000"),
            json!([9000]),
            json!({"amount": 9000}),
        ];
        let conditions = [
            ("amount > 100", "number"),
            ("amount >= 100", "number"),
            ("amount < 100", "number"),
            ("amount <= 100", "number"),
            ("amount == 100", "number"),
            (r#"amount == "x""#, "string"),
            ("amount in [1, 2]", "number"),
            (r#"amount in ["a"]"#, "string"),
            (r#"amount matches "*""#, "string"),
            (r#"amount ~ "^$""#, "string"),
        ];
        for (condition, reads) in conditions {
            assert!(holds(condition, json!({})), "{condition} with no argument");
            for value in &kinds {
                let kind = match value {
                    Value::Number(_) => "number",
                    Value::String(_) => "string",
                    _ => "other",
                };
                if kind != reads {
                    let args = json!({ "amount": value });
                    assert!(holds(condition, args.clone()), "{condition} on {args}");
                }
            }
        }
    }

    #[test]
    fn bad_conditions_say_why() {
        for (text, why) in [
            ("amount", "expected `<argument> <operator> <value>`"),
            ("amount >> 3", "value is not JSON"),
            ("amount <> 3", "value is not JSON"),
            ("amount > \"x\"", "expected a number"),
            ("who in \"x\"", "expected a JSON array"),
            ("cmd ~ \"(\"", "bad regex"),
            ("amount is 3", "unknown operator"),
        ] {
            let err = text
                .parse::<Condition>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
