//! Anthropic's stream, event by event, into `ProviderEvent`s.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use sse_stream::Sse;

use super::PROVIDER;
use crate::call::{MAX_ARGS_BYTES, MAX_CALLS_PER_STEP};
use crate::ids::Ids;
use crate::protocol::DeltaText;
use crate::provider::http::{Answer, Decoder};
use crate::provider::{ProviderError, ProviderEvent, StopReason};

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
        text: DeltaText,
    },
    Thinking {
        #[serde(default)]
        thinking: DeltaText,
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

impl StartBlock {
    /// The block it opens, and the events its start says.
    fn open(self, ids: &Ids, out: &mut Vec<ProviderEvent>) -> Block {
        match self {
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
                out.push(ProviderEvent::ReasoningMetadata(Box::new(
                    json!({PROVIDER: {"redactedData": data}}),
                )));
                Block::RedactedThinking
            }
            StartBlock::ToolUse { id, name, input } => {
                let id = if id.is_empty() { ids.next("call") } else { id };
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
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        #[serde(default)]
        text: DeltaText,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: DeltaText,
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
                out.push(ProviderEvent::ReasoningMetadata(Box::new(
                    json!({PROVIDER: {"signature": signature}}),
                )));
            }
            Block::Text | Block::Thinking { .. } | Block::RedactedThinking | Block::Other => {}
        }
    }
}

pub struct Decode {
    answer: Answer,
    /// Open blocks by their index.
    blocks: BTreeMap<u64, Block>,
}

impl Decode {
    pub fn new(ids: Ids) -> Self {
        Self {
            answer: Answer::new(ids),
            blocks: BTreeMap::new(),
        }
    }

    fn usage(&mut self, usage: Option<EventUsage>) {
        let Some(usage) = usage else { return };
        if let Some(input) = usage.input_tokens {
            self.answer.usage.input_tokens = input;
        }
        if let Some(output) = usage.output_tokens {
            self.answer.usage.output_tokens = output;
        }
    }

    /// Whether block `index` may open.
    fn room_for(&self, index: u64) -> Result<(), ProviderError> {
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
        out.push(self.answer.finish());
    }
}

impl Decoder for Decode {
    type Event = ProviderEvent;

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
            } => {
                self.room_for(index)?;
                let block = content_block.open(&self.answer.ids, out);
                self.blocks.insert(index, block);
            }
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out)?,
            Event::ContentBlockStop { index } => self.stop(index, out)?,
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.answer.reason = Some(stop_reason(&reason));
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
        self.answer.stopped(PROVIDER)?;
        self.finish(out);
        Ok(())
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
