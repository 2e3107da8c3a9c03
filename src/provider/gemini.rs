//! Google Gemini `streamGenerateContent` with `alt=sse`.
//!
//! Gemini sends every call whole in one part, matches results to calls by
//! name and order, and needs a call's `thoughtSignature` back beside it.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use sse_stream::Sse;

use super::http::{Answer, Decoder, HttpModel, ModelApi, read_json};
use super::{
    AssistantContent, ModelMessage, ModelOptions, ModelRequest, ProviderError, ProviderEvent,
    ResultContent, StopReason, TOOLS, ToolCall, ToolResult, Usage, UserContent, inline_data,
    tool_declarations,
};
use crate::call::ToolSpec;
use crate::ids::Ids;
use crate::protocol::DeltaText;

const PROVIDER: &str = "gemini";
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// Gemini, at `models/{model}:streamGenerateContent`.
pub type Gemini = HttpModel<Decode>;

impl ModelApi for Decode {
    fn tools(tools: &[ToolSpec]) -> Value {
        json!([{"functionDeclarations": tool_declarations(tools, "parametersJsonSchema")}])
    }

    fn body(
        options: &ModelOptions,
        request: &ModelRequest,
        tools: Option<&[u8]>,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut system = Vec::new();
        let mut contents = Contents::default();
        let mut order: Vec<&str> = Vec::new();
        for message in &request.messages {
            match message {
                ModelMessage::System(text) if !text.is_empty() => system.push(text.as_str()),
                ModelMessage::System(_) => {}
                ModelMessage::User(content) => {
                    let parts = content.iter().map(user_part).collect::<Result<_, _>>()?;
                    contents.push("user", parts);
                }
                ModelMessage::Assistant(content) => {
                    order = call_order(content);
                    let mut ordered: Vec<&AssistantContent> = content.iter().collect();
                    ordered.sort_by_key(|item| match item {
                        AssistantContent::ToolCall { call, .. } => order
                            .iter()
                            .position(|id| *id == call.id.as_str())
                            .map_or(usize::MAX, |i| i + 1),
                        _ => 0,
                    });
                    contents.push(
                        "model",
                        ordered.into_iter().filter_map(model_part).collect(),
                    )
                }
                ModelMessage::Tool(results) => {
                    // In the order of the calls they answer.
                    let mut ordered: Vec<&ToolResult> = results.iter().collect();
                    ordered.sort_by_key(|r| {
                        order
                            .iter()
                            .position(|id| *id == r.call_id.as_str())
                            .unwrap_or(usize::MAX)
                    });
                    contents.push("user", ordered.into_iter().map(function_response).collect())
                }
            }
        }
        let mut body = Map::new();
        body.insert("contents".into(), contents.into_json());
        if !system.is_empty() {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system.join("\n\n")}]}),
            );
        }
        if tools.is_some() {
            // Where finish_body writes the declarations.
            body.insert(TOOLS.into(), Value::Null);
        }
        let mut config = Map::new();
        if let Some(temperature) = options.temperature {
            config.insert("temperature".into(), temperature.into());
        }
        if let Some(max_tokens) = options.max_tokens {
            config.insert("maxOutputTokens".into(), max_tokens.into());
        }
        if !config.is_empty() {
            body.insert("generationConfig".into(), Value::Object(config));
        }
        options.finish_body(body, tools)
    }

    fn path(options: &ModelOptions) -> Cow<'static, str> {
        format!("models/{}:streamGenerateContent?alt=sse", options.model).into()
    }

    fn decoder(ids: Ids) -> Self {
        Self::new(ids)
    }
}

/// Contents in order, consecutive ones of a role merged: Gemini wants the
/// roles to alternate.
#[derive(Default)]
struct Contents(Vec<(&'static str, Vec<Value>)>);

impl Contents {
    fn push(&mut self, role: &'static str, parts: Vec<Value>) {
        if parts.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some((last, into)) if *last == role => into.extend(parts),
            _ => self.0.push((role, parts)),
        }
    }

    fn into_json(self) -> Value {
        self.0
            .into_iter()
            .map(|(role, parts)| json!({"role": role, "parts": parts}))
            .collect()
    }
}

fn user_part(content: &UserContent) -> Result<Value, ProviderError> {
    match content {
        UserContent::Text(text) => Ok(json!({"text": text})),
        UserContent::File { media_type, url } => match inline_data(url)? {
            Some((url_type, data)) => {
                let mime_type = if media_type.is_empty() {
                    url_type
                } else {
                    media_type.clone()
                };
                Ok(json!({"inlineData": {"mimeType": mime_type, "data": data}}))
            }
            None => Ok(json!({"fileData": {"mimeType": media_type, "fileUri": url}})),
        },
    }
}

fn model_part(content: &AssistantContent) -> Option<Value> {
    match content {
        AssistantContent::Text(text) if !text.is_empty() => Some(json!({"text": text})),
        AssistantContent::Text(_) | AssistantContent::Reasoning { .. } => None,
        AssistantContent::ToolCall { call, metadata } => {
            // No id: toolgate's ids are not Gemini's; it matches by name and order.
            let mut part = json!({"functionCall": {"name": call.name, "args": call_args(call)}});
            if let Some(signature) = signature(metadata.as_ref()) {
                part["thoughtSignature"] = signature.into();
            }
            Some(part)
        }
    }
}

/// The ids of a step's calls in the order Gemini must get them back: the
/// first signed call first (Gemini checks the signature on a step's first
/// call; toolgate may have recorded an unsigned one before it), the rest as
/// the model made them.
fn call_order(content: &[AssistantContent]) -> Vec<&str> {
    let mut calls: Vec<(&str, bool)> = content
        .iter()
        .filter_map(|item| match item {
            AssistantContent::ToolCall { call, metadata } => {
                Some((call.id.as_str(), signature(metadata.as_ref()).is_some()))
            }
            _ => None,
        })
        .collect();
    if let Some(signed) = calls.iter().position(|(_, signed)| *signed) {
        let first = calls.remove(signed);
        calls.insert(0, first);
    }
    calls.into_iter().map(|(id, _)| id).collect()
}

fn signature(metadata: Option<&Value>) -> Option<&str> {
    metadata?.get("google")?.get("thoughtSignature")?.as_str()
}

/// Gemini takes only an object: arguments that never parsed are kept as
/// text, which it would refuse.
fn call_args(call: &ToolCall) -> Value {
    match &call.args {
        Value::Object(_) => call.args.clone(),
        Value::String(text) => match serde_json::from_str(text) {
            Ok(Value::Object(args)) => Value::Object(args),
            _ => json!({}),
        },
        _ => json!({}),
    }
}

fn function_response(result: &ToolResult) -> Value {
    let response = match &result.outcome {
        ResultContent::Output(output) => json!({"output": output}),
        outcome => json!({"error": outcome.text()}),
    };
    json!({"functionResponse": {"name": result.tool_name, "response": response}})
}

/// One `GenerateContentResponse`; everything else in it is ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    candidates: Vec<Candidate>,
    usage_metadata: Option<UsageMetadata>,
    prompt_feedback: Option<PromptFeedback>,
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    index: u32,
    content: Option<Content<Part>>,
    finish_reason: Option<String>,
}

/// A genai `Content`, of Gemini's `Part`s here and of ADK's in its events.
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
pub(super) struct Content<P> {
    #[serde(default)]
    pub parts: Vec<P>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<DeltaText>,
    thought: Option<bool>,
    function_call: Option<FunctionCall>,
    thought_signature: Option<String>,
}

#[derive(Deserialize)]
struct FunctionCall {
    id: Option<String>,
    #[serde(default)]
    name: String,
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

pub struct Decode {
    answer: Answer,
    /// A function call came in this answer.
    called: bool,
}

impl Decode {
    pub fn new(ids: Ids) -> Self {
        Self {
            answer: Answer::new(ids),
            called: false,
        }
    }

    fn response(
        &mut self,
        response: Response,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        if let Some(error) = response.error {
            return Err(ProviderError::in_stream(PROVIDER, &error));
        }
        if let Some(usage) = response.usage_metadata {
            self.answer.usage = Usage {
                input_tokens: usage.prompt_token_count,
                // Thinking is output too, as other providers count it. The
                // counts are the upstream's word: a sum past u64 saturates.
                output_tokens: usage
                    .candidates_token_count
                    .saturating_add(usage.thoughts_token_count),
            };
        }
        if response.candidates.is_empty() {
            let blocked = response.prompt_feedback.and_then(|f| f.block_reason);
            if blocked.is_some() {
                self.answer.reason = Some(StopReason::ContentFilter);
            }
        }
        // One answer is asked for; other candidates are not this conversation.
        for candidate in response.candidates.into_iter().filter(|c| c.index == 0) {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.part(part, out)?;
            }
            if let Some(reason) = candidate.finish_reason {
                self.answer.reason = Some(stop_reason(&reason));
            }
        }
        Ok(())
    }

    fn part(&mut self, part: Part, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        if let Some(call) = part.function_call {
            if call.name.is_empty() {
                return Err(ProviderError::Stream(format!(
                    "{PROVIDER} sent a function call without a name"
                )));
            }
            let id = match call.id {
                Some(id) if !id.is_empty() => id,
                _ => self.answer.ids.next("call"),
            };
            let metadata = part
                .thought_signature
                .map(|signature| json!({"google": {"thoughtSignature": signature}}));
            let args = match call.args {
                Some(Value::Null) | None => "{}".to_owned(),
                Some(args) => args.to_string(),
            };
            self.called = true;
            out.push(ProviderEvent::ToolCallStart {
                id: id.clone(),
                name: call.name,
                metadata: metadata.map(Box::new),
            });
            out.push(ProviderEvent::ToolCallDelta {
                id: id.clone(),
                delta: args,
            });
            out.push(ProviderEvent::ToolCallEnd { id });
            return Ok(());
        }
        // A signature on text is optional and not needed back.
        match part.text {
            Some(text) if text.is_empty() => {}
            Some(text) if part.thought == Some(true) => {
                out.push(ProviderEvent::ReasoningDelta(text))
            }
            Some(text) => out.push(ProviderEvent::TextDelta(text)),
            None => {}
        }
        Ok(())
    }
}

impl Decoder for Decode {
    type Event = ProviderEvent;

    fn event(&mut self, event: Sse, out: &mut Vec<ProviderEvent>) -> Result<bool, ProviderError> {
        if let Some(data) = event.data.as_deref().filter(|data| !data.trim().is_empty()) {
            self.response(read_json(PROVIDER, "GenerateContentResponse", data)?, out)?;
        }
        // No end marker: usage may still follow the finish reason.
        Ok(false)
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        if self.answer.stopped(PROVIDER)? == StopReason::Stop && self.called {
            self.answer.reason = Some(StopReason::ToolCalls);
        }
        out.push(self.answer.finish());
        Ok(())
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "STOP" => StopReason::Stop,
        "MAX_TOKENS" => StopReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT" => StopReason::ContentFilter,
        _ => StopReason::Other,
    }
}

#[cfg(test)]
mod tests;
