//! Anthropic Messages, streaming.

use std::collections::BTreeMap;

use futures::stream::BoxStream;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sse_stream::Sse;

use super::http::{Decoder, Upstream};
use super::{
    AssistantContent, ModelMessage, ModelOptions, ModelProvider, ModelRequest, ProviderError,
    ProviderEvent, StopReason, ToolResult, Usage, UserContent, inline_data,
};
use crate::call::{MAX_ARGS_BYTES, MAX_CALLS_PER_STEP};
use crate::ids::Ids;

const PROVIDER: &str = "anthropic";
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";
/// Sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// Anthropic requires `max_tokens`; this when the user set none.
const DEFAULT_MAX_TOKENS: u64 = 4096;

pub struct Anthropic {
    upstream: Upstream,
    options: ModelOptions,
    ids: Ids,
}

impl Anthropic {
    pub fn new(upstream: Upstream, options: ModelOptions, ids: Ids) -> Self {
        Self {
            upstream,
            options,
            ids,
        }
    }
}

impl ModelProvider for Anthropic {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let body = body(&self.options, &request);
        let url = self.upstream.url("messages");
        self.upstream
            .stream(url, body, Decode::new(self.ids.clone()))
    }
}

/// The request body for `request`.
pub fn body(options: &ModelOptions, request: &ModelRequest) -> Result<Vec<u8>, ProviderError> {
    let mut system: Vec<&str> = Vec::new();
    // Anthropic wants roles to alternate: consecutive messages of one role
    // become one message.
    let mut messages: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message {
            ModelMessage::System(text) => {
                if !text.trim().is_empty() {
                    system.push(text);
                }
                continue;
            }
            ModelMessage::User(content) => ("user", user_blocks(content)?),
            ModelMessage::Assistant(content) => ("assistant", assistant_blocks(content)),
            ModelMessage::Tool(results) => ("user", results.iter().map(tool_result).collect()),
        };
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some((last, into)) if *last == role => into.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    let messages = messages
        .into_iter()
        .map(|(role, mut content)| {
            // A user message's tool results come before anything else in it
            // (the sort is stable).
            content.sort_by_key(|block| block["type"] != "tool_result");
            json!({"role": role, "content": content})
        })
        .collect();

    let mut body = Map::new();
    body.insert("model".into(), options.model.clone().into());
    body.insert(
        "max_tokens".into(),
        options.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS).into(),
    );
    body.insert("stream".into(), true.into());
    if let Some(temperature) = options.temperature {
        body.insert("temperature".into(), temperature.into());
    }
    if !system.is_empty() {
        body.insert("system".into(), system.join("\n\n").into());
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("messages".into(), Value::Array(messages));
    options.finish_body(body)
}

fn user_blocks(content: &[UserContent]) -> Result<Vec<Value>, ProviderError> {
    let mut blocks = Vec::with_capacity(content.len());
    for item in content {
        match item {
            // Anthropic refuses text blocks with nothing to read.
            UserContent::Text(text) if text.trim().is_empty() => {}
            UserContent::Text(text) => blocks.push(json!({"type": "text", "text": text})),
            UserContent::File { media_type, url } => {
                let kind = if media_type.starts_with("image/") {
                    "image"
                } else if media_type == "application/pdf" {
                    "document"
                } else {
                    return Err(ProviderError::Request(format!(
                        "{PROVIDER} does not take files of type `{media_type}`"
                    )));
                };
                blocks.push(json!({"type": kind, "source": file_source(media_type, url)?}));
            }
        }
    }
    Ok(blocks)
}

/// A file's `source`: the data of a `data:` URL, or an http(s) URL
/// for Anthropic to fetch.
fn file_source(media_type: &str, url: &str) -> Result<Value, ProviderError> {
    if let Some((_, data)) = inline_data(url)? {
        return Ok(json!({"type": "base64", "media_type": media_type, "data": data}));
    }
    let scheme = url.split_once(':').map(|(scheme, _)| scheme);
    if scheme.is_some_and(|s| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https")) {
        return Ok(json!({"type": "url", "url": url}));
    }
    Err(ProviderError::Request(format!(
        "{PROVIDER} takes a `{media_type}` file as a data: or http(s) URL only"
    )))
}

fn assistant_blocks(content: &[AssistantContent]) -> Vec<Value> {
    let mut blocks = Vec::with_capacity(content.len());
    for item in content {
        match item {
            AssistantContent::Text(text) if text.trim().is_empty() => {}
            AssistantContent::Text(text) => blocks.push(json!({"type": "text", "text": text})),
            AssistantContent::Reasoning { text, metadata } => {
                let ours = metadata.as_ref().and_then(|m| m.get(PROVIDER));
                let field = |name: &str| ours.and_then(|o| o.get(name)).and_then(Value::as_str);
                if let Some(signature) = field("signature") {
                    blocks.push(
                        json!({"type": "thinking", "thinking": text, "signature": signature}),
                    );
                } else if let Some(data) = field("redactedData") {
                    blocks.push(json!({"type": "redacted_thinking", "data": data}));
                }
                // Unsigned reasoning (another model's, or cut short) is
                // refused by Anthropic, so it is left out.
            }
            AssistantContent::ToolCall { call, .. } => blocks.push(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": tool_input(&call.args),
            })),
        }
    }
    blocks
}

/// A call's arguments as Anthropic's `input`, which must be an object.
/// Arguments that never parsed are kept as text; the model is told so by
/// the call's error result, so an empty object stands in for them.
fn tool_input(args: &Value) -> Value {
    match args {
        Value::Object(_) => args.clone(),
        Value::String(text) => match serde_json::from_str(text) {
            Ok(Value::Object(object)) => Value::Object(object),
            _ => json!({}),
        },
        _ => json!({}),
    }
}

fn tool_result(result: &ToolResult) -> Value {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": result.outcome.text(),
    });
    if result.outcome.is_error() {
        block["is_error"] = true.into();
    }
    block
}

/// One event of the stream, by its `type`; everything else in it is ignored.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDelta,
        usage: Option<EventUsage>,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: ErrorBody,
    },
    /// `ping`, and events toolgate does not know.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    usage: Option<EventUsage>,
}

#[derive(Deserialize)]
struct EventUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Server tools and their results, and blocks toolgate does not know.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: String,
    },
    SignatureDelta {
        #[serde(default)]
        signature: String,
    },
    /// Citations, and deltas toolgate does not know.
    #[serde(other)]
    Other,
}

impl BlockDelta {
    fn name(&self) -> &'static str {
        match self {
            BlockDelta::TextDelta { .. } => "text_delta",
            BlockDelta::InputJsonDelta { .. } => "input_json_delta",
            BlockDelta::ThinkingDelta { .. } => "thinking_delta",
            BlockDelta::SignatureDelta { .. } => "signature_delta",
            BlockDelta::Other => "unknown",
        }
    }
}

#[derive(Deserialize, Default)]
struct MessageDelta {
    stop_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

/// A content block being streamed.
enum Block {
    Text,
    Thinking {
        signature: String,
    },
    RedactedThinking,
    ToolUse {
        id: String,
        /// Arguments sent whole in the block's start, told only if no
        /// fragments follow.
        input: Option<String>,
        streamed: bool,
    },
    Other,
}

impl Block {
    fn name(&self) -> &'static str {
        match self {
            Block::Text => "text",
            Block::Thinking { .. } => "thinking",
            Block::RedactedThinking => "redacted_thinking",
            Block::ToolUse { .. } => "tool_use",
            Block::Other => "unknown",
        }
    }

    /// The events that end the block.
    fn end(self, out: &mut Vec<ProviderEvent>) {
        match self {
            Block::ToolUse {
                id,
                input,
                streamed,
            } => {
                if let Some(input) = input.filter(|_| !streamed) {
                    out.push(ProviderEvent::ToolCallDelta {
                        id: id.clone(),
                        delta: input,
                    });
                }
                out.push(ProviderEvent::ToolCallEnd { id });
            }
            Block::Thinking { signature } if !signature.is_empty() => {
                out.push(ProviderEvent::ReasoningMetadata(
                    json!({PROVIDER: {"signature": signature}}),
                ));
            }
            Block::Text | Block::Thinking { .. } | Block::RedactedThinking | Block::Other => {}
        }
    }
}

pub struct Decode {
    ids: Ids,
    /// Open blocks by their index.
    blocks: BTreeMap<u64, Block>,
    reason: Option<StopReason>,
    usage: Usage,
}

impl Decode {
    pub fn new(ids: Ids) -> Self {
        Self {
            ids,
            blocks: BTreeMap::new(),
            reason: None,
            usage: Usage::default(),
        }
    }

    fn usage(&mut self, usage: Option<EventUsage>) {
        let Some(usage) = usage else { return };
        if let Some(input) = usage.input_tokens {
            self.usage.input_tokens = input;
        }
        if let Some(output) = usage.output_tokens {
            self.usage.output_tokens = output;
        }
    }

    fn start(
        &mut self,
        index: u64,
        block: StartBlock,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        if self.blocks.contains_key(&index) {
            return Err(ProviderError::Stream(format!(
                "{PROVIDER} started content block {index} twice"
            )));
        }
        if self.blocks.len() == MAX_CALLS_PER_STEP {
            return Err(ProviderError::Stream(format!(
                "{PROVIDER} kept more than {MAX_CALLS_PER_STEP} content blocks open"
            )));
        }
        let block = match block {
            StartBlock::Text { text } => {
                if !text.is_empty() {
                    out.push(ProviderEvent::TextDelta(text));
                }
                Block::Text
            }
            StartBlock::Thinking {
                thinking,
                signature,
            } => {
                if !thinking.is_empty() {
                    out.push(ProviderEvent::ReasoningDelta(thinking));
                }
                Block::Thinking { signature }
            }
            StartBlock::RedactedThinking { data } => {
                out.push(ProviderEvent::ReasoningMetadata(
                    json!({PROVIDER: {"redactedData": data}}),
                ));
                Block::RedactedThinking
            }
            StartBlock::ToolUse { id, name, input } => {
                let id = if id.is_empty() {
                    self.ids.next("call")
                } else {
                    id
                };
                out.push(ProviderEvent::ToolCallStart {
                    id: id.clone(),
                    name,
                    metadata: None,
                });
                let input = match input {
                    Value::Object(object) if !object.is_empty() => {
                        Some(Value::Object(object).to_string())
                    }
                    _ => None,
                };
                Block::ToolUse {
                    id,
                    input,
                    streamed: false,
                }
            }
            StartBlock::Other => Block::Other,
        };
        self.blocks.insert(index, block);
        Ok(())
    }

    fn delta(
        &mut self,
        index: u64,
        delta: BlockDelta,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(ProviderError::Stream(format!(
                "{PROVIDER} sent a {} for content block {index}, which is not open",
                delta.name()
            )));
        };
        match (block, delta) {
            (Block::Other, _) | (_, BlockDelta::Other) => {}
            (Block::Text, BlockDelta::TextDelta { text }) => {
                if !text.is_empty() {
                    out.push(ProviderEvent::TextDelta(text));
                }
            }
            (Block::Thinking { .. }, BlockDelta::ThinkingDelta { thinking }) => {
                if !thinking.is_empty() {
                    out.push(ProviderEvent::ReasoningDelta(thinking));
                }
            }
            (Block::Thinking { signature }, BlockDelta::SignatureDelta { signature: more }) => {
                if signature.len() + more.len() > MAX_ARGS_BYTES {
                    return Err(ProviderError::Stream(format!(
                        "{PROVIDER} sent a thinking signature over {MAX_ARGS_BYTES} bytes"
                    )));
                }
                signature.push_str(&more);
            }
            (Block::ToolUse { id, streamed, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                if !partial_json.is_empty() {
                    *streamed = true;
                    out.push(ProviderEvent::ToolCallDelta {
                        id: id.clone(),
                        delta: partial_json,
                    });
                }
            }
            (block, delta) => {
                return Err(ProviderError::Stream(format!(
                    "{PROVIDER} sent a {} for content block {index}, which is a {} block",
                    delta.name(),
                    block.name()
                )));
            }
        }
        Ok(())
    }

    fn stop(&mut self, index: u64, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let Some(block) = self.blocks.remove(&index) else {
            return Err(ProviderError::Stream(format!(
                "{PROVIDER} ended content block {index}, which is not open"
            )));
        };
        block.end(out);
        Ok(())
    }

    /// Ends what is still open, then the answer.
    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        for block in std::mem::take(&mut self.blocks).into_values() {
            block.end(out);
        }
        out.push(ProviderEvent::Finish {
            reason: self.reason.unwrap_or(StopReason::Stop),
            usage: self.usage,
        });
    }
}

impl Decoder for Decode {
    fn event(&mut self, event: Sse, out: &mut Vec<ProviderEvent>) -> Result<bool, ProviderError> {
        let name = event.event.filter(|name| !name.is_empty());
        if name.as_deref() == Some("ping") {
            return Ok(false);
        }
        let Some(data) = event.data else {
            return match name {
                None => Ok(false),
                Some(name) => Err(ProviderError::Stream(format!(
                    "{PROVIDER} sent a `{name}` event without data"
                ))),
            };
        };
        let mut value: Value = serde_json::from_str(&data).map_err(|e| {
            let name = name.as_deref().unwrap_or("message");
            ProviderError::Stream(format!(
                "{PROVIDER} sent a `{name}` event whose data is not JSON: {e}"
            ))
        })?;
        // The SSE event name is the type; the data's own `type` stands in
        // when there is none.
        if let (Some(name), Value::Object(object)) = (&name, &mut value) {
            object.insert("type".into(), Value::String(name.clone()));
        }
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("untyped")
            .to_owned();
        let event: Event = serde_json::from_value(value).map_err(|e| {
            ProviderError::Stream(format!(
                "{PROVIDER} sent a `{kind}` event that cannot be read: {e}"
            ))
        })?;
        match event {
            Event::MessageStart { message } => self.usage(message.usage),
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start(index, content_block, out)?,
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out)?,
            Event::ContentBlockStop { index } => self.stop(index, out)?,
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.reason = Some(stop_reason(&reason));
                }
                self.usage(usage);
            }
            Event::MessageStop => {
                self.finish(out);
                return Ok(true);
            }
            Event::Error { error } => {
                let message = match (error.kind, error.message) {
                    (Some(kind), Some(message)) => format!("{kind}: {message}"),
                    (Some(text), None) | (None, Some(text)) => text,
                    (None, None) => "an error without a message".to_owned(),
                };
                return Err(ProviderError::Upstream {
                    provider: PROVIDER,
                    message,
                });
            }
            Event::Other => {}
        }
        Ok(false)
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        // Once the stop reason is out, the answer is whole.
        match self.reason {
            Some(_) => {
                self.finish(out);
                Ok(())
            }
            None => Err(ProviderError::Incomplete { provider: PROVIDER }),
        }
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        "tool_use" => StopReason::ToolCalls,
        "refusal" => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::http::{self, testing::decode_sse};
    use crate::provider::{ResultContent, ToolCall, ToolSpec};

    fn run(text: &str) -> (Vec<ProviderEvent>, Option<ProviderError>) {
        decode_sse(Decode::new(Ids::sequential()), text.as_bytes())
    }

    fn decode_text(text: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        match run(text) {
            (events, None) => Ok(events),
            (_, Some(e)) => Err(e),
        }
    }

    fn fixture(name: &str) -> String {
        String::from_utf8_lossy(&http::testing::fixture(PROVIDER, name)).into_owned()
    }

    fn text(delta: &str) -> ProviderEvent {
        ProviderEvent::TextDelta(delta.into())
    }

    fn finish(reason: StopReason, input_tokens: u64, output_tokens: u64) -> ProviderEvent {
        ProviderEvent::Finish {
            reason,
            usage: Usage {
                input_tokens,
                output_tokens,
            },
        }
    }

    fn start(id: &str) -> ProviderEvent {
        ProviderEvent::ToolCallStart {
            id: id.into(),
            name: "get_weather".into(),
            metadata: None,
        }
    }

    fn args(id: &str, delta: &str) -> ProviderEvent {
        ProviderEvent::ToolCallDelta {
            id: id.into(),
            delta: delta.into(),
        }
    }

    fn end(id: &str) -> ProviderEvent {
        ProviderEvent::ToolCallEnd { id: id.into() }
    }

    #[test]
    fn text_streams_as_it_comes() {
        assert_eq!(
            decode_text(&fixture("text")).unwrap_or_default(),
            [
                text("Bonjour"),
                text(" from the café "),
                text("☕"),
                finish(StopReason::Stop, 25, 12),
            ]
        );
        assert_eq!(
            decode_text(&fixture("after_tool")).unwrap_or_default(),
            [
                text("It is sunny"),
                text(" in Paris."),
                finish(StopReason::Stop, 460, 8),
            ]
        );
    }

    #[test]
    fn thinking_ends_with_its_signature() {
        assert_eq!(
            decode_text(&fixture("thinking")).unwrap_or_default(),
            [
                ProviderEvent::ReasoningDelta("The user wants the GCD of 1071 and 462.".into()),
                ProviderEvent::ReasoningDelta(
                    " 1071 = 2·462 + 147; 462 = 3·147 + 21; 147 = 7·21.".into()
                ),
                ProviderEvent::ReasoningMetadata(json!({"anthropic": {
                    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
                }})),
                text("The GCD is 21."),
                finish(StopReason::Stop, 40, 58),
            ]
        );
    }

    #[test]
    fn redacted_thinking_is_metadata_alone() {
        let events = decode_text(concat!(
            "event: content_block_start\n",
            r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}"#,
            "\n\nevent: content_block_stop\n",
            r#"data: {"type":"content_block_stop","index":0}"#,
            "\n\nevent: message_stop\n",
            r#"data: {"type":"message_stop"}"#,
            "\n\n",
        ));
        assert_eq!(
            events.unwrap_or_default(),
            [
                ProviderEvent::ReasoningMetadata(
                    json!({"anthropic": {"redactedData": "EmwKAhgB"}})
                ),
                finish(StopReason::Stop, 0, 0),
            ]
        );
    }

    #[test]
    fn a_tool_call_streams_its_fragments() {
        assert_eq!(
            decode_text(&fixture("tool_call")).unwrap_or_default(),
            [
                text("Let me check the weather"),
                text(" in Paris."),
                start("toolu_01A"),
                args("toolu_01A", "{\"ci"),
                args("toolu_01A", "ty\": \"Pa"),
                args("toolu_01A", "ris\"}"),
                end("toolu_01A"),
                finish(StopReason::ToolCalls, 380, 54),
            ]
        );
    }

    #[test]
    fn parallel_tool_calls_keep_their_own_fragments() {
        assert_eq!(
            decode_text(&fixture("parallel_tool_calls")).unwrap_or_default(),
            [
                start("toolu_01A"),
                args("toolu_01A", "{\"city\": "),
                args("toolu_01A", "\"Paris\"}"),
                end("toolu_01A"),
                start("toolu_01B"),
                args("toolu_01B", "{\"city\""),
                args("toolu_01B", ": \"Rome\"}"),
                end("toolu_01B"),
                finish(StopReason::ToolCalls, 402, 96),
            ]
        );
    }

    #[test]
    fn an_error_event_is_the_upstreams_error() {
        let (events, failure) = run(&fixture("error"));
        assert_eq!(events, [text("Let me")]);
        assert!(matches!(
            failure,
            Some(ProviderError::Upstream { provider: "anthropic", message })
                if message == "overloaded_error: Overloaded"
        ));
    }

    #[test]
    fn a_cut_stream_is_incomplete_unless_the_stop_reason_came() {
        let text_fixture = fixture("text");
        let cut = text_fixture
            .split_once("event: message_delta")
            .map(|(head, _)| head)
            .unwrap_or_default();
        assert!(matches!(
            decode_text(cut),
            Err(ProviderError::Incomplete {
                provider: "anthropic"
            })
        ));

        let tool_fixture = fixture("tool_call");
        let without_stop = tool_fixture
            .split_once("event: message_stop")
            .map(|(head, _)| head)
            .unwrap_or_default();
        let events = decode_text(without_stop).unwrap_or_default();
        assert_eq!(events.last(), Some(&finish(StopReason::ToolCalls, 380, 54)));
    }

    #[test]
    fn a_stop_reason_without_message_stop_ends_open_calls() {
        let events = decode_text(concat!(
            "event: content_block_start\n",
            r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}}}"#,
            "\n\nevent: message_delta\n",
            r#"data: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":7}}"#,
            "\n\n",
        ));
        assert_eq!(
            events.unwrap_or_default(),
            [
                start("toolu_01A"),
                args("toolu_01A", r#"{"city":"Paris"}"#),
                end("toolu_01A"),
                finish(StopReason::Length, 0, 7),
            ]
        );
    }

    #[test]
    fn the_data_type_stands_in_for_a_missing_event_name() {
        let mut decode = Decode::new(Ids::sequential());
        let mut out = Vec::new();
        let events = [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}"#,
            r#"{"type":"something_new","index":3}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"refusal"}}"#,
            r#"{"type":"message_stop"}"#,
        ];
        let mut done = false;
        for data in events {
            done = decode
                .event(Sse::default().data(data), &mut out)
                .unwrap_or_default();
        }
        assert!(done);
        assert_eq!(
            out,
            [
                text("Hi"),
                text("!"),
                finish(StopReason::ContentFilter, 0, 0)
            ]
        );
    }

    #[test]
    fn broken_events_are_stream_errors() {
        let mut out = Vec::new();
        let malformed = Sse::default()
            .event("content_block_delta")
            .data("{not json");
        assert!(matches!(
            Decode::new(Ids::sequential()).event(malformed, &mut out),
            Err(ProviderError::Stream(message)) if message.contains("not JSON")
        ));
        let stray = Sse::default().event("content_block_delta").data(
            r#"{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}"#,
        );
        assert!(matches!(
            Decode::new(Ids::sequential()).event(stray, &mut out),
            Err(ProviderError::Stream(message)) if message.contains("block 4")
        ));
        assert!(out.is_empty());
    }

    #[test]
    fn history_becomes_alternating_messages() {
        let call = ToolCall {
            id: "toolu_01A".into(),
            name: "get_weather".into(),
            args: json!({"city": "Paris"}),
        };
        let request = ModelRequest {
            messages: vec![
                ModelMessage::System("Be brief.".into()),
                ModelMessage::User(vec![UserContent::Text("Weather in Paris?".into())]),
                ModelMessage::System("Use metric units.".into()),
                ModelMessage::Assistant(vec![
                    AssistantContent::Reasoning {
                        text: "I should ask the tool.".into(),
                        metadata: Some(json!({"anthropic": {"signature": "sig-1"}})),
                    },
                    AssistantContent::Reasoning {
                        text: "unsigned".into(),
                        metadata: None,
                    },
                    AssistantContent::Reasoning {
                        text: String::new(),
                        metadata: Some(json!({"anthropic": {"redactedData": "EmwK"}})),
                    },
                    AssistantContent::Text("Checking.".into()),
                    AssistantContent::ToolCall {
                        call,
                        metadata: None,
                    },
                ]),
                ModelMessage::Tool(vec![ToolResult {
                    call_id: "toolu_01A".into(),
                    tool_name: "get_weather".into(),
                    outcome: ResultContent::Denied {
                        reason: Some("not now".into()),
                    },
                }]),
                ModelMessage::User(vec![UserContent::Text("Then guess.".into())]),
                ModelMessage::Assistant(vec![AssistantContent::Reasoning {
                    text: "dropped".into(),
                    metadata: None,
                }]),
            ],
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "Weather".into(),
                parameters: json!({"type": "object"}),
            }]
            .into(),
        };
        let mut extra_body = Map::new();
        extra_body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": 1024}),
        );
        let options = ModelOptions {
            model: "claude-sonnet-4-5".into(),
            temperature: Some(1.0),
            extra_body,
            ..ModelOptions::default()
        };
        let body: Value = serde_json::from_slice(&body(&options, &request).unwrap_or_default())
            .unwrap_or_default();
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "stream": true,
                "temperature": 1.0,
                "system": "Be brief.\n\nUse metric units.",
                "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "I should ask the tool.", "signature": "sig-1"},
                        {"type": "redacted_thinking", "data": "EmwK"},
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "User denied execution: not now", "is_error": true},
                        {"type": "text", "text": "Then guess."},
                    ]},
                ],
                "thinking": {"type": "enabled", "budget_tokens": 1024},
            })
        );
    }

    #[test]
    fn files_are_images_and_documents() {
        let request = |media_type: &str, url: &str| ModelRequest {
            messages: vec![
                ModelMessage::User(vec![
                    UserContent::File {
                        media_type: media_type.into(),
                        url: url.into(),
                    },
                    UserContent::Text("What is this?".into()),
                ]),
                ModelMessage::Tool(vec![ToolResult {
                    call_id: "toolu_01B".into(),
                    tool_name: "get_weather".into(),
                    outcome: ResultContent::Output(json!({"sky": "clear"})),
                }]),
            ],
            tools: Vec::new().into(),
        };
        let content = |media_type: &str, url: &str| {
            let body = body(&ModelOptions::default(), &request(media_type, url));
            body.map(|bytes| {
                let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
                body["messages"][0]["content"].clone()
            })
        };
        assert_eq!(
            content("image/png", "data:image/png;base64,iVBORw0K").unwrap_or_default(),
            json!([
                {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "{\"sky\":\"clear\"}"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
                {"type": "text", "text": "What is this?"},
            ])
        );
        assert_eq!(
            content("application/pdf", "https://example.com/a.pdf").unwrap_or_default()[1],
            json!({"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}})
        );
        assert!(matches!(
            content("text/csv", "data:text/csv;base64,YSxi"),
            Err(ProviderError::Request(message)) if message.contains("text/csv")
        ));
        assert!(matches!(
            content("image/png", "file:///etc/passwd"),
            Err(ProviderError::Request(_))
        ));
    }
}
