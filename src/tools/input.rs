//! A tool's input schema, compiled once per registry: every call a model
//! makes is checked against it before any rule reads its arguments.

use serde_json::Value;

/// The compiled `parameters` schema of one tool, or why it has none.
pub struct InputSchema(Result<jsonschema::Validator, String>);

impl InputSchema {
    pub fn compile(schema: &Value) -> Self {
        Self(jsonschema::validator_for(schema).map_err(|e| e.to_string()))
    }

    /// Whether `args` fit; the first misfit in words. A schema that does
    /// not compile fits nothing: a call nobody can check does not run.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let validator = self
            .0
            .as_ref()
            .map_err(|why| format!("the tool's input schema is unusable: {why}"))?;
        validator.validate(args).map_err(|error| {
            let path = error.instance_path().to_string();
            match path.as_str() {
                "" => error.to_string(),
                path => format!("{path}: {error}"),
            }
        })
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

    #[test]
    fn arguments_fit_or_say_where_not() {
        let payment = json!({
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "recipient": {"type": "string"}
            },
            "required": ["amount", "recipient"],
            "additionalProperties": false
        });
        let schema = InputSchema::compile(&payment);
        let cases = [
            (json!({"amount": 50, "recipient": "bob"}), None),
            (json!({"amount": 50.5, "recipient": "bob"}), None),
            (
                json!({"amount": "9000", "recipient": "bob"}),
                Some("/amount"),
            ),
            (
                json!({"amount": [9000], "recipient": "bob"}),
                Some("/amount"),
            ),
            (json!({"amount": null, "recipient": "bob"}), Some("/amount")),
            (json!({"recipient": "bob"}), Some("amount")),
            (json!({"amount": 1, "recipient": "bob", "x": 1}), Some("x")),
            (json!("amount=9000"), Some("object")),
            (json!([]), Some("object")),
        ];
        for (args, misfit) in cases {
            match (schema.check(&args), misfit) {
                (Ok(()), None) => {}
                (Err(why), Some(needle)) => assert!(why.contains(needle), "{args}: {why}"),
                (result, _) => panic!("{args}: {result:?}"),
            }
        }
    }

    #[test]
    fn an_unusable_schema_fits_nothing() {
        let schema = InputSchema::compile(&json!({"type": "no such type"}));
        assert!(schema.unusable().is_some());
        let refused = schema.check(&json!({}));
        assert!(refused.is_err_and(|why| why.contains("unusable")));
    }
}
