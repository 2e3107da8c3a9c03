//! `scripted`: the embedded deterministic model. No network, no key; the
//! default, so `toolgate serve` works out of the box and tests are exact.
//!
//! It reads the last message (case-insensitive):
//! - `send|pay|transfer <amount> [<currency>] to <name>` (or `$50`) →
//!   `process_payment`; `weather in <city>` → `get_weather`; `use <tool>
//!   [with <JSON object>]` → that tool, if it is offered (a client-side tool,
//!   say); several clauses joined by ` and ` become parallel calls in one step;
//! - `count to N` → the text `1 2 … N` as N deltas (N ≤ 100000);
//! - tool results → one sentence per outcome;
//! - anything else → an echo, word by word.

use std::sync::LazyLock;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use regex::Regex;
use serde_json::{Number, Value, json};

use super::{
    ModelMessage, ModelProvider, ModelRequest, ProviderError, ProviderEvent, ResultContent,
    StopReason, ToolResult, Usage, UserContent,
};
use crate::ids::Ids;

/// The largest `count to N` the model accepts.
pub const MAX_COUNT: u64 = 100_000;

/// How many fragments a call's arguments are streamed in.
const ARG_FRAGMENTS: usize = 3;

static PAYMENT: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:send|pay|transfer)\s+(\$)?\s*(\d+(?:\.\d+)?)\s*(?:([a-z]{3})\s+)?to\s+(.+?)[\s.!?]*$",
    )
});
static WEATHER: LazyLock<Result<Regex, regex::Error>> =
    LazyLock::new(|| Regex::new(r"(?i)\bweather\s+in\s+(.+?)[\s.!?]*$"));
static USE: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*(?:please\s+)?use\s+([a-z0-9_-]+)(?:\s+with\s+(\{.*\}))?[\s.!?]*$")
});
static COUNT: LazyLock<Result<Regex, regex::Error>> =
    LazyLock::new(|| Regex::new(r"(?i)\bcount\s+to\s+(\d+)\b"));
static AND: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| Regex::new(r"(?i)\s+and\s+"));

fn regex(re: &'static LazyLock<Result<Regex, regex::Error>>) -> Option<&'static Regex> {
    re.as_ref().ok()
}

#[derive(Clone, Debug)]
pub struct ScriptedModel {
    ids: Ids,
    delta_delay: Duration,
}

/// What the model will answer, decided before anything streams.
#[derive(Debug, PartialEq)]
enum Plan {
    Calls(Vec<(String, Value)>),
    Count(u64),
    Text(String),
}

impl ScriptedModel {
    pub fn new(ids: Ids) -> Self {
        Self {
            ids,
            delta_delay: Duration::ZERO,
        }
    }

    /// Sleeps this long before each delta, to simulate a slow model.
    pub fn with_delta_delay(mut self, delay: Duration) -> Self {
        self.delta_delay = delay;
        self
    }
}

impl ModelProvider for ScriptedModel {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        let plan = plan(&request.messages, &offered);
        let ids = self.ids.clone();
        let delay = self.delta_delay;
        async_stream::stream! {
            let pause = || async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
            };
            let mut output_tokens = 0u64;
            let reason = match plan {
                Plan::Calls(calls) => {
                    for (name, args) in calls {
                        let id = ids.next("call");
                        yield Ok(ProviderEvent::ToolCallStart { id: id.clone(), name, metadata: None });
                        for delta in fragments(&args.to_string(), ARG_FRAGMENTS) {
                            pause().await;
                            output_tokens += 1;
                            yield Ok(ProviderEvent::ToolCallDelta { id: id.clone(), delta });
                        }
                        yield Ok(ProviderEvent::ToolCallEnd { id });
                    }
                    StopReason::ToolCalls
                }
                Plan::Count(n) => {
                    for i in 1..=n {
                        pause().await;
                        output_tokens += 1;
                        yield Ok(ProviderEvent::TextDelta(if i == 1 { "1".to_owned() } else { format!(" {i}") }));
                    }
                    StopReason::Stop
                }
                Plan::Text(text) => {
                    for word in words(&text) {
                        pause().await;
                        output_tokens += 1;
                        yield Ok(ProviderEvent::TextDelta(word.to_owned()));
                    }
                    StopReason::Stop
                }
            };
            let input_tokens = request.messages.len() as u64;
            yield Ok(ProviderEvent::Finish { reason, usage: Usage { input_tokens, output_tokens } });
        }
        .boxed()
    }
}

fn plan(messages: &[ModelMessage], offered: &[&str]) -> Plan {
    match messages.last() {
        Some(ModelMessage::Tool(results)) => {
            Plan::Text(results.iter().map(sentence).collect::<Vec<_>>().join(" "))
        }
        Some(ModelMessage::User(content)) => {
            let text = content
                .iter()
                .filter_map(|c| match c {
                    UserContent::Text(t) => Some(t.as_str()),
                    UserContent::File { .. } => None,
                })
                .collect::<Vec<_>>()
                .join(" ");
            plan_for_text(text.trim(), offered)
        }
        Some(ModelMessage::System(_) | ModelMessage::Assistant(_)) | None => {
            Plan::Text("Nothing to answer.".to_owned())
        }
    }
}

fn plan_for_text(text: &str, offered: &[&str]) -> Plan {
    let clauses: Vec<&str> = match regex(&AND) {
        Some(and) => and.split(text).collect(),
        None => vec![text],
    };
    let calls: Vec<_> = clauses
        .iter()
        .filter_map(|c| call_for_clause(c, offered))
        .collect();
    if !calls.is_empty() {
        return Plan::Calls(calls);
    }
    if let Some(caps) = regex(&COUNT).and_then(|re| re.captures(text)) {
        return match caps[1].parse::<u64>() {
            Ok(n @ 1..=MAX_COUNT) => Plan::Count(n),
            _ => Plan::Text(format!("I can count from 1 to {MAX_COUNT}.")),
        };
    }
    if text.is_empty() {
        return Plan::Text("You said nothing.".to_owned());
    }
    Plan::Text(format!("You said: {text}"))
}

fn call_for_clause(clause: &str, offered: &[&str]) -> Option<(String, Value)> {
    if let Some(caps) = regex(&USE).and_then(|re| re.captures(clause))
        && offered.contains(&&caps[1])
    {
        let args = match caps.get(2) {
            Some(json) => serde_json::from_str(json.as_str()).ok()?,
            None => json!({}),
        };
        return Some((caps[1].to_owned(), args));
    }
    if let Some(caps) = regex(&PAYMENT).and_then(|re| re.captures(clause)) {
        let amount = amount(&caps[2])?;
        let currency = caps
            .get(3)
            .map_or_else(|| "USD".to_owned(), |c| c.as_str().to_uppercase());
        let recipient = caps[4].trim();
        return Some((
            "process_payment".to_owned(),
            json!({"amount": amount, "recipient": recipient, "currency": currency}),
        ));
    }
    let caps = regex(&WEATHER)?.captures(clause)?;
    Some(("get_weather".to_owned(), json!({"city": caps[1].trim()})))
}

/// `50` → 50, `12.5` → 12.5: a JSON number, integral when it can be.
fn amount(text: &str) -> Option<Number> {
    match text.parse::<u64>() {
        Ok(n) => Some(Number::from(n)),
        Err(_) => text.parse::<f64>().ok().and_then(Number::from_f64),
    }
}

fn sentence(result: &ToolResult) -> String {
    let tool = &result.tool_name;
    match &result.outcome {
        ResultContent::Output(out) => match (out.get("transactionId"), out.get("condition")) {
            (Some(tx), _) => format!(
                "Sent {} {} to {} (transaction {}).",
                plain(out.get("amount")),
                plain(out.get("currency")),
                plain(out.get("recipient")),
                plain(Some(tx)),
            ),
            (None, Some(condition)) => format!(
                "It is {} and {} °C in {}.",
                plain(Some(condition)),
                plain(out.get("temperatureC")),
                plain(out.get("city")),
            ),
            (None, None) => format!("{tool} returned {out}."),
        },
        ResultContent::Error(error) => format!("The {tool} call failed: {error}."),
        ResultContent::Denied {
            reason: Some(reason),
        } => {
            format!("The {tool} call was denied: {reason}.")
        }
        ResultContent::Denied { reason: None } => format!("The {tool} call was denied."),
    }
}

fn plain(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "?".to_owned(),
    }
}

/// `"a b c"` → `"a"`, `" b"`, `" c"`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let skip = rest.len() - rest.trim_start().len();
        let end = rest[skip..].find(' ').map_or(rest.len(), |i| skip + i);
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}

/// Splits on char boundaries into at most `n` pieces of similar size.
fn fragments(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(n).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFERED: &[&str] = &["process_payment", "get_weather", "get_location"];

    fn calls(text: &str) -> Vec<(String, Value)> {
        match plan_for_text(text, OFFERED) {
            Plan::Calls(calls) => calls,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn payments() {
        let pay = |amount: Value, recipient: &str, currency: &str| {
            (
                "process_payment".to_owned(),
                json!({"amount": amount, "recipient": recipient, "currency": currency}),
            )
        };
        assert_eq!(
            calls("Send 50 USD to Hanako"),
            vec![pay(json!(50), "Hanako", "USD")]
        );
        assert_eq!(
            calls("please pay $12.5 to Bob."),
            vec![pay(json!(12.5), "Bob", "USD")]
        );
        assert_eq!(
            calls("TRANSFER 7 eur to 花子"),
            vec![pay(json!(7), "花子", "EUR")]
        );
        assert_eq!(
            calls("Send 50 USD to Hanako and pay $20 to Bob"),
            vec![
                pay(json!(50), "Hanako", "USD"),
                pay(json!(20), "Bob", "USD")
            ]
        );
        assert_eq!(
            calls("What is the weather in New York? and send 5 to Al"),
            vec![
                ("get_weather".to_owned(), json!({"city": "New York"})),
                pay(json!(5), "Al", "USD")
            ]
        );
    }

    #[test]
    fn use_calls_an_offered_tool_by_name() {
        assert_eq!(
            calls("Use get_location"),
            vec![("get_location".to_owned(), json!({}))]
        );
        assert_eq!(
            calls(r#"use get_location with {"precision": "city"} and weather in Oslo"#),
            vec![
                ("get_location".to_owned(), json!({"precision": "city"})),
                ("get_weather".to_owned(), json!({"city": "Oslo"}))
            ]
        );
        // A tool that is not offered, or arguments that are not JSON, are just text.
        assert_eq!(
            plan_for_text("use rm_rf", OFFERED),
            Plan::Text("You said: use rm_rf".into())
        );
        assert_eq!(
            plan_for_text("use get_location with {oops}", OFFERED),
            Plan::Text("You said: use get_location with {oops}".into())
        );
    }

    #[test]
    fn count_echo_and_limits() {
        assert_eq!(plan_for_text("count to 3", OFFERED), Plan::Count(3));
        assert_eq!(
            plan_for_text("Count to 100000", OFFERED),
            Plan::Count(100_000)
        );
        assert_eq!(
            plan_for_text("count to 100001", OFFERED),
            Plan::Text("I can count from 1 to 100000.".into())
        );
        assert_eq!(
            plan_for_text("hello there", OFFERED),
            Plan::Text("You said: hello there".into())
        );
    }

    #[test]
    fn words_and_fragments() {
        assert_eq!(
            words("You said:  hi").collect::<Vec<_>>(),
            ["You", " said:", "  hi"]
        );
        assert_eq!(
            fragments("{\"a\":\"花子\"}", 3).concat(),
            "{\"a\":\"花子\"}"
        );
        assert_eq!(fragments("ab", 3), ["a", "b"]);
    }

    #[test]
    fn sentences_per_outcome() {
        let result = |outcome| ToolResult {
            call_id: "c".into(),
            tool_name: "process_payment".into(),
            outcome,
        };
        assert_eq!(
            sentence(&result(ResultContent::Output(
                json!({"transactionId":"tx-1","amount":50,"recipient":"Hanako","currency":"USD"})
            ))),
            "Sent 50 USD to Hanako (transaction tx-1)."
        );
        assert_eq!(
            sentence(&result(ResultContent::Denied {
                reason: Some("too much".into())
            })),
            "The process_payment call was denied: too much."
        );
        assert_eq!(
            sentence(&result(ResultContent::Error("amount must be > 0".into()))),
            "The process_payment call failed: amount must be > 0."
        );
    }
}
