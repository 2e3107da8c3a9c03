//! `get_weather`: the demo tool that never needs confirmation. Deterministic:
//! the same city always has the same weather.

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError};

const CONDITIONS: [&str; 5] = ["sunny", "cloudy", "rainy", "windy", "foggy"];

#[derive(Debug, Clone, Copy)]
pub struct GetWeather;

#[async_trait::async_trait]
impl Tool for GetWeather {
    fn source(&self) -> super::ToolSource {
        super::ToolSource::Builtin
    }

    fn name(&self) -> &str {
        "get_weather"
    }

    fn description(&self) -> &str {
        "Current weather in a city."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1}},
            "required": ["city"],
            "additionalProperties": false
        })
    }

    fn needs_confirmation(&self, _args: &Value) -> bool {
        false
    }

    fn may_need_confirmation(&self) -> bool {
        false
    }

    async fn execute(&self, args: Value, _ctx: ToolContext) -> Result<Value, ToolError> {
        let city = args
            .get("city")
            .and_then(Value::as_str)
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| ToolError::InvalidArgs("`city` must be a non-empty string".into()))?;
        // FNV-1a: stable across runs and platforms, unlike the std hasher.
        let hash = city
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        let condition = CONDITIONS[(hash % CONDITIONS.len() as u64) as usize];
        let temperature = (hash >> 8) % 36;
        Ok(json!({"city": city, "condition": condition, "temperatureC": temperature as i64 - 5}))
    }
}
