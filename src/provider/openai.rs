//! OpenAI Chat Completions, streaming; any server that speaks it (OpenAI,
//! Azure-style gateways, OpenRouter, Groq, vLLM, llama.cpp, Ollama, LM Studio).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sse_stream::Sse;

use super::http::{Answer, Decoder, HttpModel, ModelApi, read_json};
use super::{
    AssistantContent, ModelMessage, ModelOptions, ModelRequest, ProviderError, ProviderEvent,
    StopReason, Usage, UserContent, inline_data, tool_declarations,
};
use crate::call::{MAX_ARGS_BYTES, MAX_CALLS_PER_STEP, ToolSpec};
use crate::ids::Ids;
use crate::protocol::DeltaText;

const PROVIDER: &str = "openai";
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Chat Completions, at `chat/completions`.
pub type OpenAi = HttpModel<Decode>;

impl ModelApi for Decode {
    fn tools(tools: &[ToolSpec]) -> Value {
        let functions = tool_declarations(tools, "parameters")
            .into_iter()
            .map(|function| json!({"type": "function", "function": function}));
        Value::Array(functions.collect())
    }

    /// Written straight to bytes, not as a tree of JSON values: the body is
    /// on the way to the first token, and Chat Completions' is the one the
    /// load tests measure.
    fn body(
        options: &ModelOptions,
        request: &ModelRequest,
        tools: Option<&[u8]>,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut messages = Vec::with_capacity(request.messages.len());
        for message in &request.messages {
            match message {
                ModelMessage::System(text) => messages.push(ChatMessage::new("system", text)),
                ModelMessage::User(content) => messages.push(ChatMessage {
                    content: user_content(content)?,
                    ..ChatMessage::new("user", "")
                }),
                ModelMessage::Assistant(content) => {
                    let mut text = String::new();
                    let mut calls = Vec::new();
                    for item in content {
                        match item {
                            AssistantContent::Text(t) => text.push_str(t),
                            // Chat Completions takes no reasoning back.
                            AssistantContent::Reasoning { .. } => {}
                            AssistantContent::ToolCall { call, .. } => calls.push(CallOut {
                                id: &call.id,
                                kind: "function",
                                function: FunctionOut {
                                    name: &call.name,
                                    arguments: call.args.to_string(),
                                },
                            }),
                        }
                    }
                    // A step of reasoning only has nothing this API takes back.
                    if text.is_empty() && calls.is_empty() {
                        continue;
                    }
                    messages.push(ChatMessage {
                        content: match text.is_empty() {
                            true => Content::Null(()),
                            false => Content::Text(text.into()),
                        },
                        tool_calls: (!calls.is_empty()).then_some(calls),
                        ..ChatMessage::new("assistant", "")
                    });
                }
                ModelMessage::Tool(results) => {
                    for result in results {
                        messages.push(ChatMessage {
                            tool_call_id: Some(&result.call_id),
                            content: Content::Text(result.outcome.text().into()),
                            ..ChatMessage::new("tool", "")
                        });
                    }
                }
            }
        }
        let failed = |e: serde_json::Error| ProviderError::Request(e.to_string());
        // What serde_json writes for the same keys as a map, in this order.
        let mut body = Vec::with_capacity(256 + tools.map_or(0, <[u8]>::len));
        body.extend_from_slice(b"{\"model\":");
        serde_json::to_writer(&mut body, &options.model).map_err(failed)?;
        body.extend_from_slice(b",\"messages\":");
        serde_json::to_writer(&mut body, &messages).map_err(failed)?;
        body.extend_from_slice(b",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
        if let Some(tools) = tools {
            body.extend_from_slice(b",\"tools\":");
            body.extend_from_slice(tools);
        }
        if let Some(temperature) = options.temperature {
            body.extend_from_slice(b",\"temperature\":");
            serde_json::to_writer(&mut body, &temperature).map_err(failed)?;
        }
        if let Some(max_tokens) = options.max_tokens {
            body.extend_from_slice(b",\"max_tokens\":");
            serde_json::to_writer(&mut body, &max_tokens).map_err(failed)?;
        }
        body.push(b'}');
        options.finish_written(body)
    }

    fn path(_: &ModelOptions) -> Cow<'static, str> {
        "chat/completions".into()
    }

    fn decoder(ids: Ids) -> Self {
        Self::new(ids)
    }
}

/// One message of `messages`, its keys in the order the API documents.
#[derive(Serialize)]
struct ChatMessage<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<CallOut<'a>>>,
}

impl<'a> ChatMessage<'a> {
    fn new(role: &'static str, text: &'a str) -> Self {
        Self {
            role,
            tool_call_id: None,
            content: Content::Text(Cow::Borrowed(text)),
            tool_calls: None,
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(Cow<'a, str>),
    /// Text with files: the API's content parts.
    Parts(Value),
    /// `null`: an assistant message of tool calls only.
    Null(()),
}

#[derive(Serialize)]
struct CallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionOut<'a>,
}

#[derive(Serialize)]
struct FunctionOut<'a> {
    name: &'a str,
    arguments: String,
}

fn user_content(content: &[UserContent]) -> Result<Content<'_>, ProviderError> {
    if let [UserContent::Text(text)] = content {
        return Ok(Content::Text(Cow::Borrowed(text)));
    }
    content
        .iter()
        .map(|item| match item {
            UserContent::Text(text) => Ok(json!({"type": "text", "text": text})),
            UserContent::File { media_type, url } if media_type.starts_with("image/") => {
                Ok(json!({"type": "image_url", "image_url": {"url": url}}))
            }
            UserContent::File { media_type, url } if media_type == "application/pdf" => {
                match inline_data(url)? {
                    Some((_, data)) => Ok(json!({"type": "file", "file": {
                        "file_data": format!("data:application/pdf;base64,{data}"),
                    }})),
                    None => Err(ProviderError::Request(format!(
                        "{PROVIDER} takes a PDF as a data: URL only"
                    ))),
                }
            }
            UserContent::File { media_type, .. } => Err(ProviderError::Request(format!(
                "{PROVIDER} does not take files of type `{media_type}` here"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|parts| Content::Parts(Value::Array(parts)))
}

/// One chunk of the stream; everything else in it is ignored.
#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<ChunkUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<DeltaText>,
    refusal: Option<DeltaText>,
    reasoning_content: Option<DeltaText>,
    reasoning: Option<DeltaText>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: Option<u32>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// A call being assembled from fragments.
struct Call {
    index: Option<u32>,
    id: String,
    /// Set once the name is known, which starts the call.
    name: Option<String>,
    /// Arguments that came before the name.
    pending: String,
}

pub struct Decode {
    answer: Answer,
    calls: Vec<Call>,
}

impl Decode {
    pub fn new(ids: Ids) -> Self {
        Self {
            answer: Answer::new(ids),
            calls: Vec::new(),
        }
    }

    /// Finds the call a fragment continues: by `index`, else by `id`, else
    /// by position (a lone fragment continues the newest call). A fragment
    /// with an id of its own starts a call even at a used `index`: some
    /// servers send every parallel call at index 0.
    fn call_for(
        &mut self,
        delta: &CallDelta,
        position: usize,
        count: usize,
    ) -> Result<usize, ProviderError> {
        let id = delta.id.as_deref().filter(|id| !id.is_empty());
        let found = match (delta.index, id) {
            (Some(index), _) => self.calls.iter().rposition(|c| c.index == Some(index)),
            (None, Some(id)) => self.calls.iter().position(|c| c.id == id),
            (None, None) if count == 1 => self.calls.len().checked_sub(1),
            (None, None) => (position < self.calls.len()).then_some(position),
        };
        let found = found.filter(|&i| id.is_none_or(|id| self.calls[i].id == id));
        if let Some(i) = found {
            return Ok(i);
        }
        if self.calls.len() == MAX_CALLS_PER_STEP {
            return Err(ProviderError::Stream(format!(
                "{PROVIDER} made more than {MAX_CALLS_PER_STEP} tool calls in one step"
            )));
        }
        let id = match id {
            Some(id) => id.to_owned(),
            None => self.answer.ids.next("call"),
        };
        self.calls.push(Call {
            index: delta.index,
            id,
            name: None,
            pending: String::new(),
        });
        Ok(self.calls.len() - 1)
    }

    fn tool_calls(
        &mut self,
        deltas: Vec<CallDelta>,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let count = deltas.len();
        for (position, delta) in deltas.into_iter().enumerate() {
            let i = self.call_for(&delta, position, count)?;
            let call = &mut self.calls[i];
            let (name, arguments) = match delta.function {
                Some(f) => (f.name, f.arguments),
                None => (None, None),
            };
            let arguments = arguments.unwrap_or_default();
            match (&call.name, name) {
                (None, Some(name)) if !name.is_empty() => {
                    out.push(ProviderEvent::ToolCallStart {
                        id: call.id.clone(),
                        name: name.clone(),
                        metadata: None,
                    });
                    call.name = Some(name);
                    call.pending.push_str(&arguments);
                    if !call.pending.is_empty() {
                        out.push(ProviderEvent::ToolCallDelta {
                            id: call.id.clone(),
                            delta: std::mem::take(&mut call.pending),
                        });
                    }
                }
                (None, _) if call.pending.len() + arguments.len() > MAX_ARGS_BYTES => {
                    return Err(ProviderError::Stream(format!(
                        "{PROVIDER} sent more than {MAX_ARGS_BYTES} bytes of arguments for an unnamed call"
                    )));
                }
                (None, _) => call.pending.push_str(&arguments),
                (Some(_), _) if !arguments.is_empty() => out.push(ProviderEvent::ToolCallDelta {
                    id: call.id.clone(),
                    delta: arguments,
                }),
                (Some(_), _) => {}
            }
        }
        Ok(())
    }

    fn chunk(&mut self, chunk: Chunk, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        if let Some(error) = chunk.error {
            return Err(ProviderError::in_stream(PROVIDER, &error));
        }
        if let Some(usage) = chunk.usage {
            self.answer.usage = Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
            };
        }
        // One answer is asked for; other choices are not this conversation.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            let delta = choice.delta;
            // Some servers send both names for one delta.
            if let Some(reasoning) = delta.reasoning_content.or(delta.reasoning)
                && !reasoning.is_empty()
            {
                out.push(ProviderEvent::ReasoningDelta(reasoning));
            }
            for text in [delta.content, delta.refusal].into_iter().flatten() {
                if !text.is_empty() {
                    out.push(ProviderEvent::TextDelta(text));
                }
            }
            if let Some(calls) = delta.tool_calls {
                self.tool_calls(calls, out)?;
            }
            if let Some(reason) = choice.finish_reason {
                self.answer.reason = Some(stop_reason(&reason));
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        for call in self.calls.drain(..) {
            if call.name.is_none() {
                return Err(ProviderError::Stream(format!(
                    "{PROVIDER} sent tool call `{}` without a name",
                    call.id
                )));
            }
            out.push(ProviderEvent::ToolCallEnd { id: call.id });
        }
        out.push(self.answer.finish());
        Ok(())
    }
}

impl Decoder for Decode {
    type Event = ProviderEvent;

    fn event(&mut self, event: Sse, out: &mut Vec<ProviderEvent>) -> Result<bool, ProviderError> {
        match event.data.as_deref() {
            None => Ok(false),
            Some(data) if data.trim() == "[DONE]" => {
                self.finish(out)?;
                Ok(true)
            }
            Some(data) => {
                self.chunk(read_json(PROVIDER, "chunk", data)?, out)?;
                Ok(false)
            }
        }
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        // Some servers close without `[DONE]` once the finish reason is out.
        self.answer.stopped(PROVIDER)?;
        self.finish(out)
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" | "end_turn" | "eos" => StopReason::Stop,
        "length" | "max_tokens" => StopReason::Length,
        "content_filter" => StopReason::ContentFilter,
        "tool_calls" | "function_call" => StopReason::ToolCalls,
        _ => StopReason::Other,
    }
}

#[cfg(test)]
mod tests;
