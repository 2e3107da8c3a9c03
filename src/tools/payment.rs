//! `process_payment`: the demo tool that always needs confirmation.

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError};

#[derive(Debug, Clone)]
pub struct ProcessPayment {
    limit: f64,
}

impl ProcessPayment {
    pub fn new(limit: f64) -> Self {
        Self { limit }
    }
}

#[async_trait::async_trait]
impl Tool for ProcessPayment {
    fn source(&self) -> super::ToolSource {
        super::ToolSource::Builtin
    }

    fn name(&self) -> &str {
        "process_payment"
    }

    fn description(&self) -> &str {
        "Send money to a recipient."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": self.limit},
                "recipient": {"type": "string", "minLength": 1},
                "currency": {"type": "string", "pattern": "^[A-Z]{3}$", "default": "USD"}
            },
            "required": ["amount", "recipient"],
            "additionalProperties": false
        })
    }

    fn needs_confirmation(&self, _args: &Value) -> bool {
        true
    }

    fn confirmation_hint(&self, args: &Value) -> String {
        let text = |key: &str| {
            args.get(key)
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        };
        match (args.get("amount"), text("recipient")) {
            (Some(amount), Some(recipient)) => format!(
                "Send {amount} {} to {recipient}?",
                text("currency").unwrap_or_else(|| "USD".to_owned())
            ),
            _ => format!("Please approve or reject the call process_payment({args})."),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let amount = args
            .get("amount")
            .and_then(Value::as_f64)
            .ok_or_else(|| ToolError::InvalidArgs("`amount` must be a number".into()))?;
        if !(amount > 0.0 && amount <= self.limit) {
            return Err(ToolError::InvalidArgs(format!(
                "amount must be > 0 and at most {}",
                self.limit
            )));
        }
        let recipient = args
            .get("recipient")
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty())
            .ok_or_else(|| {
                ToolError::InvalidArgs("`recipient` must be a non-empty string".into())
            })?;
        let currency = match args.get("currency") {
            None => "USD",
            Some(Value::String(c)) if c.len() == 3 && c.chars().all(|c| c.is_ascii_uppercase()) => {
                c
            }
            Some(_) => {
                return Err(ToolError::InvalidArgs(
                    "`currency` must be a three-letter code".into(),
                ));
            }
        };
        Ok(json!({
            "status": "completed",
            "transactionId": ctx.ids.next("tx"),
            "amount": args["amount"],
            "recipient": recipient,
            "currency": currency,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Ids;

    fn ctx() -> ToolContext {
        ToolContext {
            chat_id: "c".into(),
            call_id: "call-1".into(),
            payload: None,
            cancel: Default::default(),
            ids: Ids::sequential(),
        }
    }

    #[tokio::test]
    async fn pays_within_the_limit() {
        let tool = ProcessPayment::new(100.0);
        let ok = tool
            .execute(
                json!({"amount": 50, "recipient": "花子", "currency": "USD"}),
                ctx(),
            )
            .await;
        assert_eq!(
            ok,
            Ok(
                json!({"status":"completed","transactionId":"tx-1","amount":50,"recipient":"花子","currency":"USD"})
            )
        );
        for (args, error) in [
            (
                json!({"amount": 0, "recipient": "a"}),
                "invalid arguments: amount must be > 0 and at most 100",
            ),
            (
                json!({"amount": 101, "recipient": "a"}),
                "invalid arguments: amount must be > 0 and at most 100",
            ),
            (
                json!({"amount": "5", "recipient": "a"}),
                "invalid arguments: `amount` must be a number",
            ),
            (
                json!({"amount": 5, "recipient": " "}),
                "invalid arguments: `recipient` must be a non-empty string",
            ),
            (
                json!({"amount": 5, "recipient": "a", "currency": "usd"}),
                "invalid arguments: `currency` must be a three-letter code",
            ),
        ] {
            assert_eq!(
                tool.execute(args, ctx()).await.map_err(|e| e.to_string()),
                Err(error.to_owned())
            );
        }
    }

    #[test]
    fn hint_names_the_payment() {
        let tool = ProcessPayment::new(100.0);
        assert_eq!(
            tool.confirmation_hint(
                &json!({"amount": 50, "recipient": "Hanako", "currency": "USD"})
            ),
            "Send 50 USD to Hanako?"
        );
    }
}
