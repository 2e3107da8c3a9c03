//! A tool's schemas, compiled, and the one place a misfit becomes words:
//! every call a model makes is checked against its input schema before
//! any rule reads its arguments, and an approver's edit and a person's
//! response against theirs, all through [`Schema`].
//!
//! A misfit's words name where (the JSON pointer) and which rule (the
//! schema keyword), never a value: they reach the model, the approver,
//! the audit log and the traces, and an argument may be one no person is
//! shown (a `sensitive` one, masked), put back before an edit is checked.

use std::collections::HashSet;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

/// A compiled JSON schema and the property names it declares itself.
pub struct Schema {
    validator: jsonschema::Validator,
    /// Every key of a `properties`, every name a `required` or a
    /// `dependentRequired` lists, anywhere in the schema: the only object
    /// keys a misfit's words show.
    names: HashSet<String>,
}

impl Schema {
    /// The schema compiled, or why it does not compile (words about the
    /// schema, which its tool's definition wrote, not about a value).
    pub fn compile(schema: &Value) -> Result<Self, String> {
        let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
        let mut names = HashSet::new();
        declared(schema, &mut names);
        Ok(Self { validator, names })
    }

    /// The first misfit of `instance`, in words, or `None` when it fits.
    pub fn misfit(&self, instance: &Value) -> Option<String> {
        let error = self.validator.validate(instance).err()?;
        Some(words(&error, instance, &self.names))
    }
}

/// `error` as words naming where in `instance` and which rule, and nothing
/// else: no value, not the validator's own message (it quotes the value,
/// and for `additionalProperties` the unexpected keys), no limit, `enum`
/// or `const` of the schema (the rule's name says enough).
///
/// The path is a JSON pointer, but a segment is shown only where it is an
/// array's index or a key `names` (the schema's own property names) holds:
/// any other key is the caller's (one that `additionalProperties` or
/// `patternProperties` lets in, or an unexpected one) and may itself be
/// the secret, so it reads `*`. A `required` misfit names the missing
/// property, which only the schema can name, in the validator's words.
fn words(
    error: &jsonschema::ValidationError<'_>,
    instance: &Value,
    names: &HashSet<String>,
) -> String {
    let path = path(error.instance_path().as_str(), instance, names);
    if let ValidationErrorKind::Required {
        property: Value::String(name),
    } = error.kind()
        && names.contains(name)
    {
        let name = Value::String(name.clone());
        return match path.as_str() {
            "" => format!("{name} is a required property"),
            path => format!("{path}: {name} is a required property"),
        };
    }
    let rule = error.kind().keyword();
    match path.as_str() {
        "" => format!("the value breaks the `{rule}` rule"),
        path => format!("{path} breaks the `{rule}` rule"),
    }
}

/// `pointer` (into `instance`) with each segment that is not an index of
/// an array or a key in `names` as `*`. Walked along `instance` so that
/// a key made of digits is still a key.
fn path(pointer: &str, instance: &Value, names: &HashSet<String>) -> String {
    let mut shown = String::with_capacity(pointer.len());
    let mut at = Some(instance);
    for segment in pointer.split('/').skip(1) {
        shown.push('/');
        match at {
            Some(Value::Array(items)) => match segment.parse::<usize>() {
                Ok(index) => {
                    shown.push_str(segment);
                    at = items.get(index);
                }
                Err(_) => {
                    shown.push('*');
                    at = None;
                }
            },
            Some(Value::Object(map)) => {
                let key = segment.replace("~1", "/").replace("~0", "~");
                if names.contains(&key) {
                    shown.push_str(segment);
                } else {
                    shown.push('*');
                }
                at = map.get(&key);
            }
            _ => {
                shown.push('*');
                at = None;
            }
        }
    }
    shown
}

/// Collects into `names` the property names `schema` declares anywhere.
/// Whatever lands here is a string the schema holds, so a misread (a
/// property itself named `properties`) shows nothing a caller chose.
fn declared(schema: &Value, names: &mut HashSet<String>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("properties", Value::Object(properties)) => {
                        names.extend(properties.keys().cloned());
                    }
                    ("required", Value::Array(listed)) => {
                        names.extend(listed.iter().filter_map(Value::as_str).map(str::to_owned));
                    }
                    ("dependentRequired", Value::Object(dependent)) => {
                        names.extend(dependent.keys().cloned());
                        for listed in dependent.values().filter_map(Value::as_array) {
                            names
                                .extend(listed.iter().filter_map(Value::as_str).map(str::to_owned));
                        }
                    }
                    _ => {}
                }
                declared(value, names);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| declared(item, names)),
        _ => {}
    }
}

/// The compiled `parameters` schema of one tool, or why it has none.
pub struct InputSchema(Result<Schema, String>);

impl InputSchema {
    pub fn compile(schema: &Value) -> Self {
        Self(Schema::compile(schema))
    }

    /// Whether `args` fit; the first misfit in words (no value). A schema
    /// that does not compile fits nothing: a call nobody can check does
    /// not run.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let schema = self
            .0
            .as_ref()
            .map_err(|why| format!("the tool's input schema is unusable: {why}"))?;
        match schema.misfit(args) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Why the schema does not compile, if it does not.
    pub fn unusable(&self) -> Option<&str> {
        self.0.as_ref().err().map(String::as_str)
    }
}

impl std::fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_ok() {
            "InputSchema"
        } else {
            "InputSchema(unusable)"
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Where the secret stands in every case: no misfit's words may hold
    /// it, whether it is a value, a key the caller chose, or both.
    const SECRET: &str = "hunter2-4111111111111111";

    #[test]
    fn a_misfit_names_where_and_which_rule_and_no_value() {
        let payment = json!({
            "type": "object",
            "properties": {
                "amount": {"type": "number", "maximum": 100, "multipleOf": 0.5},
                "currency": {"enum": ["USD", "EUR"]},
                "memo": {"type": "string", "maxLength": 8, "pattern": "^[a-z]*$"},
                "card": {
                    "type": "object",
                    "properties": {"number": {"type": "string", "minLength": 30}},
                    "required": ["number"],
                    "additionalProperties": false
                },
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "labels": {"type": "object", "additionalProperties": {"type": "integer"}},
                "kind": {"const": "card"},
                "either": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]}
            },
            "required": ["amount"],
            "additionalProperties": false
        });
        let schema = Schema::compile(&payment).unwrap_or_else(|e| panic!("{e}"));
        let cases = [
            (json!({"amount": 50}), None),
            (
                json!({"amount": SECRET}),
                Some("/amount breaks the `type` rule"),
            ),
            (
                json!({"amount": 101}),
                Some("/amount breaks the `maximum` rule"),
            ),
            (
                json!({"amount": 0.3}),
                Some("/amount breaks the `multipleOf` rule"),
            ),
            (
                json!({"amount": 1, "currency": SECRET}),
                Some("/currency breaks the `enum` rule"),
            ),
            (
                json!({"amount": 1, "memo": SECRET}),
                Some("/memo breaks the `maxLength` rule"),
            ),
            (
                json!({"amount": 1, "memo": "a1"}),
                Some("/memo breaks the `pattern` rule"),
            ),
            (
                json!({"amount": 1, "card": {"number": SECRET}}),
                Some("/card/number breaks the `minLength` rule"),
            ),
            (
                json!({"amount": 1, "card": {}}),
                Some("/card: \"number\" is a required property"),
            ),
            (
                json!({"amount": 1, "card": {"number": "a".repeat(30), SECRET: 1}}),
                Some("/card breaks the `additionalProperties` rule"),
            ),
            (
                json!({"amount": 1, "tags": ["a", SECRET, SECRET]}),
                Some("/tags breaks the `uniqueItems` rule"),
            ),
            (
                json!({"amount": 1, "tags": ["a", {"x": SECRET}]}),
                Some("/tags/1 breaks the `type` rule"),
            ),
            // A key the schema does not name is the caller's: `*`, even
            // one of digits only.
            (
                json!({"amount": 1, "labels": {SECRET: SECRET}}),
                Some("/labels/* breaks the `type` rule"),
            ),
            (
                json!({"amount": 1, "labels": {"4111111111111111": SECRET}}),
                Some("/labels/* breaks the `type` rule"),
            ),
            (
                json!({"amount": 1, "kind": SECRET}),
                Some("/kind breaks the `const` rule"),
            ),
            (
                json!({"amount": 1, "either": SECRET}),
                Some("/either breaks the `oneOf` rule"),
            ),
            (json!({}), Some("\"amount\" is a required property")),
            (
                json!({"amount": 1, SECRET: SECRET}),
                Some("the value breaks the `additionalProperties` rule"),
            ),
            (json!(SECRET), Some("the value breaks the `type` rule")),
            (json!([SECRET]), Some("the value breaks the `type` rule")),
        ];
        for (args, expected) in cases {
            let got = schema.misfit(&args);
            assert_eq!(got.as_deref(), expected, "{args}");
            let secret_free =
                got.is_none_or(|why| !why.contains("hunter2") && !why.contains("4111"));
            assert!(secret_free, "{args}");
        }
    }

    #[test]
    fn a_tools_arguments_fit_or_say_where_not() {
        let payment = json!({
            "type": "object",
            "properties": {"amount": {"type": "number"}},
            "required": ["amount"]
        });
        let schema = InputSchema::compile(&payment);
        assert_eq!(schema.check(&json!({"amount": 50.5})), Ok(()));
        assert_eq!(
            schema.check(&json!({"amount": SECRET})),
            Err("/amount breaks the `type` rule".into())
        );
    }

    #[test]
    fn an_unusable_schema_fits_nothing() {
        let schema = InputSchema::compile(&json!({"type": "no such type"}));
        assert!(schema.unusable().is_some());
        let refused = schema.check(&json!({}));
        assert!(refused.is_err_and(|why| why.contains("unusable")));
    }
}
