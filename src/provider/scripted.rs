//! `scripted`: the embedded deterministic model. No network, no key; the
//! default, so `toolgate serve` works out of the box and tests are exact.
//!
//! It reads the last message (case-insensitive):
//! - `send|pay|transfer <amount> [<currency>] to <name>` (or `$50`) →
//!   `process_payment`; `weather in <city>` → `get_weather`; `use <tool>
//!   [with <JSON object>]` → that tool, if it is offered (a client-side tool,
//!   say); several clauses joined by ` and ` or commas become parallel calls
//!   in one step, and after a payment `<amount> [<currency>] to <name>` alone
//!   is another payment (`Send 10 USD to Taro, 20 USD to Jiro and 30 to Saburo`);
//! - `count to N` → the text `1 2 … N` as N deltas (N ≤ 100000);
//! - tool results → one sentence per outcome;
//! - anything else → an echo, word by word.

use std::sync::LazyLock;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use regex::Regex;
use serde_json::{Number, Value, json};

use super::{
    ModelMessage, ModelProvider, ModelRequest, ProviderError, ProviderEvent, ResultContent,
    StopReason, ToolResult, Usage, UserContent,
};
use crate::ids::Ids;
use crate::protocol::DeltaText;

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
/// A payment clause without its verb, after a payment: `20 USD to Jiro`.
static MORE_PAYMENT: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*(\$)?\s*(\d+(?:\.\d+)?)\s*(?:([a-z]{3})\s+)?to\s+(.+?)[\s.!?]*$")
});
/// Where a request may split into clauses: ` and `, a comma, `, and `.
static SEPARATOR: LazyLock<Result<Regex, regex::Error>> =
    LazyLock::new(|| Regex::new(r"(?i)\s*,\s*(?:and\s+)?|\s+and\s+"));

/// Beyond this many pieces a request is not split further: each piece may
/// re-read the clause before it. Twice the calls a step may make, so a
/// request for too many calls still reaches the agent's limit.
const MAX_CLAUSES: usize = 2 * crate::call::MAX_CALLS_PER_STEP;
/// A longer request is read as one clause, which bounds the re-reading.
const MAX_SPLIT_BYTES: usize = 64 << 10;

/// `1`, then ` 2`, ` 3`…: held inline, without the formatting machinery
/// (`format!` was a tenth of a W1 turn's instructions).
fn count_delta(i: u64) -> DeltaText {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(i);
    let mut delta = DeltaText::default();
    if i > 1 {
        delta.push(' ');
    }
    delta.push_str(digits);
    delta
}

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
        // Counted now: the stream keeps only its plan, not the request.
        let input_tokens = request.messages.len() as u64;
        let script = Script {
            ids: self.ids.clone(),
            left: match plan {
                Plan::Calls(calls) => Left::Calls {
                    calls: calls.into_iter(),
                    open: None,
                },
                Plan::Count(last) => Left::Count { next: 1, last },
                Plan::Text(text) => Left::Text { text, at: 0 },
            },
            usage: Usage {
                input_tokens,
                output_tokens: 0,
            },
        };
        let delay = self.delta_delay;
        if delay.is_zero() {
            return stream::iter(script.map(Ok)).boxed();
        }
        stream::iter(script)
            .then(move |event| async move {
                if matches!(
                    event,
                    ProviderEvent::TextDelta(_) | ProviderEvent::ToolCallDelta { .. }
                ) {
                    tokio::time::sleep(delay).await;
                }
                Ok(event)
            })
            .boxed()
    }
}

/// A plan's events in order, as a plain iterator: a turn pulls each delta
/// with one call, where a generator's yield cost about 200 instructions a
/// delta (a fifth of W1's turn was the model's).
struct Script {
    ids: Ids,
    left: Left,
    usage: Usage,
}

/// What is left of the plan to stream.
enum Left {
    /// The calls not yet started, and the one streaming its arguments.
    Calls {
        calls: std::vec::IntoIter<Call>,
        open: Option<(String, std::vec::IntoIter<String>)>,
    },
    Count {
        next: u64,
        last: u64,
    },
    /// The text, streamed word by word from byte `at`.
    Text {
        text: String,
        at: usize,
    },
    Done,
}

impl Iterator for Script {
    type Item = ProviderEvent;

    fn next(&mut self) -> Option<ProviderEvent> {
        let reason = match &mut self.left {
            Left::Calls { calls, open } => {
                if let Some((id, fragments)) = open {
                    let event = match fragments.next() {
                        Some(delta) => ProviderEvent::ToolCallDelta {
                            id: id.clone(),
                            delta,
                        },
                        None => ProviderEvent::ToolCallEnd {
                            id: std::mem::take(id),
                        },
                    };
                    if matches!(event, ProviderEvent::ToolCallEnd { .. }) {
                        *open = None;
                    } else {
                        self.usage.output_tokens += 1;
                    }
                    return Some(event);
                }
                if let Some((name, args)) = calls.next() {
                    let id = self.ids.next("call");
                    let fragments = fragments(&args.to_string(), ARG_FRAGMENTS);
                    *open = Some((id.clone(), fragments.into_iter()));
                    return Some(ProviderEvent::ToolCallStart {
                        id,
                        name,
                        metadata: None,
                    });
                }
                StopReason::ToolCalls
            }
            Left::Count { next, last } => {
                if *next <= *last {
                    let delta = count_delta(*next);
                    *next += 1;
                    self.usage.output_tokens += 1;
                    return Some(ProviderEvent::TextDelta(delta));
                }
                StopReason::Stop
            }
            Left::Text { text, at } => {
                let word = word(&text[*at..]);
                if !word.is_empty() {
                    *at += word.len();
                    self.usage.output_tokens += 1;
                    return Some(ProviderEvent::TextDelta(word.into()));
                }
                StopReason::Stop
            }
            Left::Done => return None,
        };
        self.left = Left::Done;
        Some(ProviderEvent::Finish {
            reason,
            usage: self.usage,
        })
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
    let calls = calls_in(text, offered);
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

/// The calls a request asks for, one per clause. A piece between
/// separators that starts no call of its own stays with the clause before
/// it, so `weather in Paris, France`, `to Tom and Jerry` and JSON with
/// commas keep their text.
fn calls_in(text: &str, offered: &[&str]) -> Vec<Call> {
    let mut pieces = Vec::new();
    let mut start = 0;
    if let Some(separator) = regex(&SEPARATOR).filter(|_| text.len() <= MAX_SPLIT_BYTES) {
        for found in separator.find_iter(text) {
            if pieces.len() + 1 == MAX_CLAUSES {
                break;
            }
            pieces.push(start..found.start());
            start = found.end();
        }
    }
    pieces.push(start..text.len());

    let mut calls: Vec<Call> = Vec::new();
    // The clause being read (a range of `text`) and what it asks for so far.
    let mut clause: Option<(std::ops::Range<usize>, Option<Call>)> = None;
    for piece in pieces {
        let before = calls.last().and_then(payment_currency);
        let current = clause.as_ref().and_then(|(_, call)| call.as_ref());
        let context = current
            .and_then(payment_currency)
            .or_else(|| before.clone());
        let own = call_for_clause(&text[piece.clone()], offered, context.as_deref());
        clause = match (clause.take(), own) {
            (None, own) => Some((piece, own)),
            (Some((_, call)), Some(own)) => {
                calls.extend(call);
                Some((piece, Some(own)))
            }
            (Some((range, _)), None) => {
                let glued = range.start..piece.end;
                let call = call_for_clause(&text[glued.clone()], offered, before.as_deref());
                Some((glued, call))
            }
        };
    }
    calls.extend(clause.and_then(|(_, call)| call));
    calls
}

/// A tool's name and its arguments.
type Call = (String, Value);

/// The currency of a payment call, which a verb-less payment after it takes.
fn payment_currency((name, args): &(String, Value)) -> Option<String> {
    (name == "process_payment")
        .then(|| args.get("currency")?.as_str().map(str::to_owned))
        .flatten()
}

/// The call one clause asks for. `after_payment` is the currency of the
/// payment just before it, if any: then `<amount> [<currency>] to <name>`
/// alone is a payment too.
fn call_for_clause(
    clause: &str,
    offered: &[&str],
    after_payment: Option<&str>,
) -> Option<(String, Value)> {
    if let Some(caps) = regex(&USE).and_then(|re| re.captures(clause))
        && offered.contains(&&caps[1])
    {
        let args = match caps.get(2) {
            Some(json) => serde_json::from_str(json.as_str()).ok()?,
            None => json!({}),
        };
        return Some((caps[1].to_owned(), args));
    }
    // With its own verb a payment stands alone (USD unless it says);
    // without one it continues the payment before it, in its currency.
    let payment = match regex(&PAYMENT).and_then(|re| re.captures(clause)) {
        Some(caps) => Some((caps, "USD")),
        None => after_payment
            .and_then(|currency| Some((regex(&MORE_PAYMENT)?.captures(clause)?, currency))),
    };
    if let Some((caps, default_currency)) = payment {
        let amount = amount(&caps[2])?;
        let currency = match (caps.get(1), caps.get(3)) {
            (_, Some(code)) => code.as_str().to_uppercase(),
            (Some(_dollar), None) => "USD".to_owned(),
            (None, None) => default_currency.to_owned(),
        };
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

/// The first word of `rest` with the spaces before it, empty at the end:
/// `"a b c"` streams as `"a"`, `" b"`, `" c"`.
fn word(rest: &str) -> &str {
    let skip = rest.len() - rest.trim_start().len();
    let end = rest[skip..].find(' ').map_or(rest.len(), |i| skip + i);
    &rest[..end]
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
    fn counting_deltas() {
        for (i, delta) in [(1, "1"), (2, " 2"), (10, " 10"), (100_000, " 100000")] {
            assert_eq!(count_delta(i), delta);
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
    fn lists_of_payments() {
        let pay = |amount: u64, recipient: &str, currency: &str| {
            (
                "process_payment".to_owned(),
                json!({"amount": amount, "recipient": recipient, "currency": currency}),
            )
        };
        let weather = |city: &str| ("get_weather".to_owned(), json!({"city": city}));
        let cases: &[(&str, Vec<(String, Value)>)] = &[
            (
                "Send 10 USD to Taro and 20 USD to Jiro",
                vec![pay(10, "Taro", "USD"), pay(20, "Jiro", "USD")],
            ),
            (
                "Send 10 USD to Taro, 20 USD to Jiro and 30 USD to Saburo",
                vec![
                    pay(10, "Taro", "USD"),
                    pay(20, "Jiro", "USD"),
                    pay(30, "Saburo", "USD"),
                ],
            ),
            (
                "Pay 5 EUR to Ann, 6 to Ben, and $7 to Cy.",
                vec![
                    pay(5, "Ann", "EUR"),
                    pay(6, "Ben", "EUR"),
                    pay(7, "Cy", "USD"),
                ],
            ),
            // A verb of its own starts afresh: USD unless it says.
            (
                "Send 10 EUR to Taro and pay 20 to Jiro",
                vec![pay(10, "Taro", "EUR"), pay(20, "Jiro", "USD")],
            ),
            // Pieces that start no call stay with the clause before them.
            (
                "Send 5 USD to Tom and Jerry, 6 USD to Bob",
                vec![pay(5, "Tom and Jerry", "USD"), pay(6, "Bob", "USD")],
            ),
            ("weather in Paris, France", vec![weather("Paris, France")]),
            (
                "weather in Rome, and send 3 USD to Al, please",
                vec![weather("Rome"), pay(3, "Al, please", "USD")],
            ),
            // Without a payment before it, `20 USD to Jiro` is no call.
            (
                "weather in Oslo and 20 USD to Jiro",
                vec![weather("Oslo and 20 USD to Jiro")],
            ),
        ];
        for (text, want) in cases {
            assert_eq!(&calls(text), want, "{text}");
        }
        assert_eq!(
            calls(r#"use get_location with {"a": 1, "b": [2, 3]} and weather in Oslo"#),
            vec![
                ("get_location".to_owned(), json!({"a": 1, "b": [2, 3]})),
                weather("Oslo")
            ]
        );
        // A long list is read, but not split past MAX_CLAUSES pieces.
        let long = format!("Send 1 USD to A{}", ", 1 USD to B".repeat(MAX_CLAUSES + 10));
        assert_eq!(calls(&long).len(), MAX_CLAUSES);
        // Nor is one too long to re-read: it is one clause.
        let huge = format!("Send 1 USD to A{}", ", 1 USD to B".repeat(MAX_SPLIT_BYTES));
        assert_eq!(calls(&huge).len(), 1);
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
        for text in ["use rm_rf", "use get_location with {oops}"] {
            let echo = Plan::Text(format!("You said: {text}"));
            assert_eq!(plan_for_text(text, OFFERED), echo, "{text}");
        }
    }

    #[test]
    fn count_echo_and_limits() {
        let cases = [
            ("count to 3", Plan::Count(3)),
            ("Count to 100000", Plan::Count(100_000)),
            (
                "count to 100001",
                Plan::Text("I can count from 1 to 100000.".into()),
            ),
            ("hello there", Plan::Text("You said: hello there".into())),
        ];
        for (text, plan) in cases {
            assert_eq!(plan_for_text(text, OFFERED), plan, "{text}");
        }
    }

    /// Each plan's events, in order, with the usage the finish reports.
    #[tokio::test]
    async fn streams_each_plan() {
        let events = |text: &str| {
            // A fresh model a request, so every plan's first call is `call-1`.
            let model = ScriptedModel::new(Ids::sequential());
            let request = ModelRequest {
                messages: vec![ModelMessage::User(vec![UserContent::Text(text.into())])],
                tools: std::sync::Arc::from([crate::call::ToolSpec {
                    name: "get_weather".into(),
                    description: String::new(),
                    parameters: json!({}),
                }]),
            };
            model.stream(request).map(Result::ok).collect::<Vec<_>>()
        };
        let finish = |reason, output_tokens| ProviderEvent::Finish {
            reason,
            usage: Usage {
                input_tokens: 1,
                output_tokens,
            },
        };
        let text = |t: &str| Some(ProviderEvent::TextDelta(t.into()));
        assert_eq!(
            events("count to 3").await,
            [
                text("1"),
                text(" 2"),
                text(" 3"),
                Some(finish(StopReason::Stop, 3))
            ]
        );
        // A slow model pauses before each delta and streams the same events.
        let slow = ScriptedModel::new(Ids::sequential()).with_delta_delay(Duration::from_millis(1));
        let request = ModelRequest {
            messages: vec![ModelMessage::User(vec![UserContent::Text(
                "count to 2".into(),
            )])],
            tools: std::sync::Arc::from([]),
        };
        assert_eq!(
            slow.stream(request)
                .map(Result::ok)
                .collect::<Vec<_>>()
                .await,
            [text("1"), text(" 2"), Some(finish(StopReason::Stop, 2))]
        );
        assert_eq!(
            events("hi  there").await,
            [
                text("You"),
                text(" said:"),
                text(" hi"),
                text("  there"),
                Some(finish(StopReason::Stop, 4))
            ]
        );
        let id = || "call-1".to_owned();
        let delta = |d: &str| {
            Some(ProviderEvent::ToolCallDelta {
                id: id(),
                delta: d.into(),
            })
        };
        assert_eq!(
            events("weather in Paris").await,
            [
                Some(ProviderEvent::ToolCallStart {
                    id: id(),
                    name: "get_weather".into(),
                    metadata: None,
                }),
                delta("{\"city"),
                delta("\":\"Par"),
                delta("is\"}"),
                Some(ProviderEvent::ToolCallEnd { id: id() }),
                Some(finish(StopReason::ToolCalls, 3)),
            ]
        );
    }

    #[test]
    fn words_and_fragments() {
        for (rest, first) in [
            ("You said:  hi", "You"),
            ("  hi there", "  hi"),
            (" \t", " \t"),
            ("", ""),
        ] {
            assert_eq!(word(rest), first, "{rest:?}");
        }
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
