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
    BATCH, ModelEvents, ModelMessage, ModelProvider, ModelRequest, ProviderError, ProviderEvent,
    ResultContent, StopReason, ToolResult, Usage, UserContent, batched,
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

/// Whether `text` may name one of `words`, in any case: false only when it
/// surely does not, so that a request that asks for no call (a count, a
/// sentence) never enters the regex engine, whose search and cold code
/// cost more than the rest of the plan. The patterns ignore case as
/// Unicode folds it (`ſ` is an `s`), which only ASCII text keeps exact:
/// any other text goes to them.
fn may_name(text: &str, words: &[&str]) -> bool {
    !text.is_ascii()
        || words.iter().any(|word| {
            text.as_bytes()
                .windows(word.len())
                .any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
        })
}

/// The `N` of `count to N`, in any case, with spaces between the words
/// and `N` a whole word of ASCII digits. Read by hand, with
/// [`may_name`], so that a count stays out of the regex engine.
fn count_to(text: &str) -> Option<&str> {
    text.char_indices().find_map(|(at, _)| {
        let rest = &text[at..];
        if !starts_with_ci(rest, "count") || text[..at].chars().next_back().is_some_and(is_word) {
            return None;
        }
        let rest = spaced(&rest["count".len()..])?;
        let rest = spaced(
            rest.get("to".len()..)
                .filter(|_| starts_with_ci(rest, "to"))?,
        )?;
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let after = rest[digits..].chars().next();
        (digits > 0 && !after.is_some_and(is_word)).then(|| &rest[..digits])
    })
}

fn starts_with_ci(s: &str, word: &str) -> bool {
    s.get(..word.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(word))
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// What follows at least one space at the start of `s`.
fn spaced(s: &str) -> Option<&str> {
    let rest = s.trim_start();
    (rest.len() < s.len()).then_some(rest)
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
        let script = self.script(&request);
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

    /// Without a delay, the whole script is there at once: it goes in
    /// batches made straight from it, each event written once, into its
    /// batch.
    fn batches(&self, request: ModelRequest) -> ModelEvents {
        if !self.delta_delay.is_zero() {
            return batched(self.stream(request));
        }
        let mut script = self.script(&request);
        stream::iter(std::iter::from_fn(move || {
            let batch: Vec<_> = script.by_ref().take(BATCH).collect();
            (!batch.is_empty()).then_some(Ok(batch))
        }))
        .boxed()
    }
}

impl ScriptedModel {
    /// The answer to `request`, planned.
    fn script(&self, request: &ModelRequest) -> Script {
        let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        let plan = plan(&request.messages, &offered);
        // Counted now: the stream keeps only its plan, not the request.
        let input_tokens = request.messages.len() as u64;
        Script {
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
        }
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

    /// Exact for a count, so that its batches are made at their size.
    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.left {
            Left::Count { next, last } => {
                // The deltas left, and the finish.
                let left = usize::try_from((last + 1).saturating_sub(*next)).unwrap_or(usize::MAX);
                (left.saturating_add(1), left.checked_add(1))
            }
            Left::Done => (0, Some(0)),
            // The finish at least.
            Left::Calls { .. } | Left::Text { .. } => (1, None),
        }
    }

    fn next(&mut self) -> Option<ProviderEvent> {
        let reason = match &mut self.left {
            Left::Calls { calls, open } => {
                if let Some((id, fragments)) = open {
                    if let Some(delta) = fragments.next() {
                        self.usage.output_tokens += 1;
                        let id = id.clone();
                        return Some(ProviderEvent::ToolCallDelta { id, delta });
                    }
                    let id = std::mem::take(id);
                    *open = None;
                    return Some(ProviderEvent::ToolCallEnd { id });
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
    if let Some(n) = count_to(text) {
        return match n.parse::<u64>() {
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
    let split = text.len() <= MAX_SPLIT_BYTES && may_name(text, &[",", "and"]);
    if let Some(separator) = regex(&SEPARATOR).filter(|_| split) {
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
    if may_name(clause, &["use"])
        && let Some(caps) = regex(&USE).and_then(|re| re.captures(clause))
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
    let verb = may_name(clause, &["send", "pay", "transfer"]);
    let payment = match regex(&PAYMENT)
        .filter(|_| verb)
        .and_then(|re| re.captures(clause))
    {
        Some(caps) => Some((caps, "USD")),
        None => after_payment
            .filter(|_| may_name(clause, &["to"]))
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
    if !may_name(clause, &["weather"]) {
        return None;
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
mod tests;
