//! Anthropic Messages, streaming.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::http::{HttpModel, ModelApi};
use super::{
    AssistantContent, ModelMessage, ModelOptions, ModelRequest, ProviderError, TOOLS, ToolResult,
    UserContent, inline_data, tool_declarations,
};
use crate::call::ToolSpec;

use crate::ids::Ids;

const PROVIDER: &str = "anthropic";
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";
/// Sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// Anthropic requires `max_tokens`; this when the user set none.
const DEFAULT_MAX_TOKENS: u64 = 4096;

/// Anthropic Messages, at `messages`.
pub type Anthropic = HttpModel<Decode>;

impl ModelApi for Decode {
    fn tools(tools: &[ToolSpec]) -> Value {
        Value::Array(tool_declarations(tools, "input_schema"))
    }

    fn body(
        options: &ModelOptions,
        request: &ModelRequest,
        tools: Option<&[u8]>,
    ) -> Result<Vec<u8>, ProviderError> {
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
        if tools.is_some() {
            // Where finish_body writes the declarations.
            body.insert(TOOLS.into(), Value::Null);
        }
        body.insert("messages".into(), Value::Array(messages));
        options.finish_body(body, tools)
    }

    fn path(_: &ModelOptions) -> Cow<'static, str> {
        "messages".into()
    }

    fn decoder(ids: Ids) -> Self {
        Self::new(ids)
    }
}

fn user_blocks(content: &[UserContent]) -> Result<Vec<Value>, ProviderError> {
    content
        .iter()
        .filter_map(|item| match item {
            UserContent::Text(text) => text_block(text).map(Ok),
            UserContent::File { media_type, url } => Some(file_block(media_type, url)),
        })
        .collect()
}

/// A text block: Anthropic refuses one with nothing to read.
fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// An image or a PDF.
fn file_block(media_type: &str, url: &str) -> Result<Value, ProviderError> {
    let kind = if media_type.starts_with("image/") {
        "image"
    } else if media_type == "application/pdf" {
        "document"
    } else {
        return Err(ProviderError::Request(format!(
            "{PROVIDER} does not take files of type `{media_type}`"
        )));
    };
    Ok(json!({"type": kind, "source": file_source(media_type, url)?}))
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
    content
        .iter()
        .filter_map(|item| match item {
            AssistantContent::Text(text) => text_block(text),
            AssistantContent::Reasoning { text, metadata } => {
                thinking_block(text, metadata.as_ref())
            }
            AssistantContent::ToolCall { call, .. } => Some(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": tool_input(&call.args),
            })),
        })
        .collect()
}

/// A thinking block Anthropic signed, or one it redacted. Unsigned
/// reasoning (another model's, or cut short) is refused by Anthropic, so
/// it is left out.
fn thinking_block(text: &str, metadata: Option<&Value>) -> Option<Value> {
    let ours = metadata?.get(PROVIDER)?;
    let field = |name: &str| ours.get(name).and_then(Value::as_str);
    match field("signature") {
        Some(signature) => {
            Some(json!({"type": "thinking", "thinking": text, "signature": signature}))
        }
        None => {
            field("redactedData").map(|data| json!({"type": "redacted_thinking", "data": data}))
        }
    }
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

mod decode;
pub use decode::Decode;

#[cfg(test)]
mod tests;
